"""Reading reservations from moto (sandbox.moto_support's training plans and capacity reservations) through
Pitcrew's per-org clients: which nodes each holds, by an explicit CapacityReservationTarget or by instance type
and zone, and which reservations are left out."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import yaml

from bot.capacity.aws import read_reservations
from bot.capacity.model import Reservation
from bot.clusters.model import Backend, Cluster
from bot.config import OrgConfig
from sandbox.moto_support import add_capacity_reservation, add_training_plan
from tests.conftest import SeededAws

ACCOUNT, REGION = "111111111111", "us-east-1"
CLUSTERS = (
    Cluster(org="kumo-labs", name="kumo-p5-dev", backend=Backend.PCLUSTER, status="CREATE_COMPLETE"),
    Cluster(org="kumo-labs", name="kumo-p5-train", backend=Backend.HYPERPOD, status="InService"),
)


@pytest.fixture
def kumo(seeded_aws: SeededAws) -> Iterator[OrgConfig]:
    """Kumo Labs, whose moto state is put back as it was seeded after the test."""
    from moto.ec2.models import ec2_backends
    from moto.sagemaker.models import sagemaker_backends

    backends = (ec2_backends[ACCOUNT][REGION], sagemaker_backends[ACCOUNT][REGION])
    saved = [copy.deepcopy(b.__dict__.get(key)) for b, key in zip(backends, KEYS, strict=True)]
    org = seeded_aws.program.org("kumo-labs")
    assert org is not None
    yield org
    for backend, key, value in zip(backends, KEYS, saved, strict=True):
        if value is None:
            backend.__dict__.pop(key, None)
        else:
            backend.__dict__[key] = value


KEYS = ("_pitcrew_capacity_reservations", "_pitcrew_training_plans")


def read(seeded_aws: SeededAws, org: OrgConfig, configuration: str | None = None) -> dict[str, Reservation]:
    found = read_reservations(
        org,
        sagemaker=seeded_aws.accounts.client(org, "sagemaker"),
        ec2=seeded_aws.accounts.client(org, "ec2"),
        clusters=CLUSTERS,
        configuration=lambda name: configuration if name == "kumo-p5-dev" else None,
    )
    return {r.id: r for r in found}


def targeting(rid: str) -> str:
    resource = {"Name": "distributed-ml", "InstanceType": "p5.48xlarge", "MinCount": 4, "MaxCount": 4}
    resource["CapacityReservationTarget"] = {"CapacityReservationId": rid}
    return yaml.safe_dump({"Scheduling": {"SlurmQueues": [{"Name": "compute-gpu", "ComputeResources": [resource]}]}})


def test_a_cluster_with_no_target_is_matched_by_instance_type_and_zone(seeded_aws: SeededAws, kumo: OrgConfig) -> None:
    elsewhere = add_capacity_reservation(
        ACCOUNT, REGION, instance_type="p5.48xlarge", count=8, availability_zone="us-east-1c", start=None, end=None,
        capacity_block=False,
    )  # fmt: skip
    found = read(seeded_aws, kumo)
    (block,) = [r for r in found.values() if r.source == "capacity_block"]
    assert block.clusters == (("kumo-p5-dev", "compute-gpu", 4),)
    odcr = found[elsewhere]
    assert odcr.source == "capacity_reservation" and odcr.end is None and odcr.clusters == ()  # another zone
    assert list(found)[-1] == elsewhere, "open-ended last, soonest end first"


def test_an_explicit_capacity_reservation_target_wins_over_the_type_and_zone_match(
    seeded_aws: SeededAws, kumo: OrgConfig
) -> None:
    now = datetime.now(UTC)  # once, as the test starts: moto judges the plans by the same clock
    targeted = add_capacity_reservation(
        ACCOUNT, REGION, instance_type="p5.48xlarge", count=4, availability_zone="us-east-1a",
        start=now - timedelta(days=1), end=now + timedelta(days=3), capacity_block=False,
    )  # fmt: skip
    found = read(seeded_aws, kumo, configuration=targeting(targeted))
    assert found[targeted].clusters == (("kumo-p5-dev", "compute-gpu", 4),)
    (block,) = [r for r in found.values() if r.source == "capacity_block"]
    assert block.clusters == (), "the cluster says which reservation it uses: not this one"


def test_a_training_plan_lists_the_hyperpod_groups_that_name_it_and_ended_plans_are_left_out(
    seeded_aws: SeededAws, kumo: OrgConfig
) -> None:
    now = datetime.now(UTC)  # once, as the test starts: moto judges the plans by the same clock
    from sandbox.moto_support import use_training_plan

    arn = add_training_plan(
        ACCOUNT, REGION, name="kumo-plan", instance_type="p5.48xlarge", count=32,
        start=now - timedelta(days=2), end=now + timedelta(days=1),
    )  # fmt: skip
    add_training_plan(
        ACCOUNT, REGION, name="kumo-old", instance_type="p5.48xlarge", count=8,
        start=now - timedelta(days=9), end=now - timedelta(days=2),
    )  # fmt: skip
    add_training_plan(
        ACCOUNT, REGION, name="kumo-failed", instance_type="p5.48xlarge", count=8,
        start=now, end=now + timedelta(days=2), status="Failed",
    )  # fmt: skip
    use_training_plan(ACCOUNT, REGION, "kumo-p5-train", "worker-group-1", arn)
    try:
        found = read(seeded_aws, kumo)
    finally:
        use_training_plan(ACCOUNT, REGION, "kumo-p5-train", "worker-group-1", None)
    plans = [r for r in found.values() if r.source == "training_plan"]
    assert [p.name for p in plans] == ["kumo-plan"]
    (plan,) = plans
    assert plan.instance_type == "ml.p5.48xlarge" and plan.total == 32 and plan.status == "Active"
    assert plan.clusters == (("kumo-p5-train", "worker-group-1", 32),)
    assert plan.end is not None and abs((plan.end - (now + timedelta(days=1))).total_seconds()) < 1


def test_a_reservation_tagged_for_another_org_is_not_listed(seeded_aws: SeededAws, kumo: OrgConfig) -> None:
    theirs = add_capacity_reservation(
        ACCOUNT, REGION, instance_type="p5.48xlarge", count=2, availability_zone="us-east-1a", start=None,
        end=None, capacity_block=False, tags={"pitcrew:org": "sakura-ai"},
    )  # fmt: skip
    ours = add_capacity_reservation(
        ACCOUNT, REGION, instance_type="p5.48xlarge", count=2, availability_zone="us-east-1b", start=None,
        end=None, capacity_block=False, tags={"pitcrew:org": "kumo-labs"},
    )  # fmt: skip
    found = read(seeded_aws, kumo)
    assert ours in found and theirs not in found
