"""Planning changes without Slack: bot.clusters.changes against the seeded moto server and a real database.

Planning never changes AWS (only the proposed operation is stored), so these tests read the seeded clusters
as they are. ParallelCluster is read through EC2 tags here, the backend that makes no changes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.access import AccessPolicy
from bot.audit import AuditLog
from bot.clusters.changes import (
    Changes,
    ClusterBusy,
    NodesPlanned,
    NotPlanned,
    PlanPending,
    ScalePlanned,
    Shown,
)
from bot.clusters.fleet import Fleet
from bot.clusters.model import Backend, Cluster
from bot.clusters.requests import Kind
from bot.clusters.templates import load_templates
from bot.operations import Operations, StartFailed
from bot.slack.operations import SlackProgress
from bot.slack.poster import Poster
from storage import crud
from storage.db import Database
from storage.models import Operation, OperationStatus, Outcome
from tests.clusters.test_fleet import without_pcluster_api
from tests.conftest import SeededAws

ROOT = Path(__file__).resolve().parents[2]
ALICE = "U0ALICE01"
KUMO, CHANNEL = "kumo-labs", "C0KUMOLAB"
TRAIN, DEV = "kumo-p5-train", "kumo-p5-dev"  # HyperPod, 32 x p5 in worker-group-1; ParallelCluster, 4 x p5
WORKERS = "worker-group-1"


@dataclass
class Rig:
    changes: Changes
    fleet: Fleet
    operations: Operations

    async def cluster(self, name: str, backend: Backend) -> Cluster:
        cluster = await self.fleet.get(KUMO, backend, name)
        assert cluster is not None
        return cluster


@pytest.fixture
async def rig(seeded_aws: SeededAws, db: Database) -> AsyncIterator[Rig]:
    program = without_pcluster_api(seeded_aws.program)
    fleet = Fleet(program=program, accounts=seeded_aws.accounts)
    # Planning posts nothing: the poster is there because Operations holds one, and is never called.
    poster = Poster(client=AsyncWebClient(token="xoxb-unused", base_url="http://127.0.0.1:9/"), post_interval=0)
    operations = Operations(
        db=db,
        fleet=fleet,
        poster=poster,
        audit=AuditLog(db=db, flush_seconds=3600),
        access=AccessPolicy(program=program),
        tz=ZoneInfo(program.timezone),
        presenter=SlackProgress(),
    )
    templates = load_templates(ROOT / "bot" / "templates")
    try:
        yield Rig(Changes(fleet=fleet, operations=operations, program=program, templates=templates), fleet, operations)
    finally:
        fleet.close()


async def test_a_scale_within_quota_is_proposed_with_the_request_old_rows_hold(rig: Rig) -> None:
    cluster = await rig.cluster(TRAIN, Backend.HYPERPOD)
    await rig.changes.check_changeable(cluster)
    planned = await rig.changes.scale(
        cluster, group=WORKERS, count=33, dry_run=False, user_id=ALICE, channel_id=CHANNEL
    )
    assert isinstance(planned, ScalePlanned) and planned.operation_id is not None
    assert (planned.plan.before, planned.plan.after) == (32, 33)
    stored = await rig.operations.get(planned.operation_id)
    assert stored is not None and stored.status == OperationStatus.PLANNED.value and stored.kind == Kind.SCALE.value
    assert stored.request == {"group": WORKERS, "count": 33, "before": 32, "instance_type": "ml.p5.48xlarge"}


async def test_a_dry_run_proposes_nothing(rig: Rig) -> None:
    cluster = await rig.cluster(TRAIN, Backend.HYPERPOD)
    planned = await rig.changes.scale(cluster, group=WORKERS, count=30, dry_run=True, user_id=ALICE, channel_id=CHANNEL)
    assert isinstance(planned, ScalePlanned) and planned.operation_id is None
    assert not planned.plan.growing


async def test_over_quota_or_no_change_is_refused_and_a_wrong_group_is_bad_input(rig: Rig) -> None:
    cluster = await rig.cluster(TRAIN, Backend.HYPERPOD)
    with pytest.raises(NotPlanned) as over:
        await rig.changes.scale(cluster, group=WORKERS, count=48, dry_run=False, user_id=ALICE, channel_id=CHANNEL)
    assert over.value.outcome is Outcome.REFUSED and over.value.shown is Shown.REFUSAL
    assert over.value.message.startswith("Over quota: p5.48xlarge")
    with pytest.raises(NotPlanned, match="already set to 32 nodes"):
        await rig.changes.scale(cluster, group=WORKERS, count=32, dry_run=False, user_id=ALICE, channel_id=CHANNEL)
    with pytest.raises(NotPlanned) as wrong:
        await rig.changes.scale(cluster, group="workers", count=2, dry_run=False, user_id=ALICE, channel_id=CHANNEL)
    assert wrong.value.shown is Shown.USAGE and wrong.value.outcome is Outcome.INVALID
    assert (
        wrong.value.message
        == f"`{TRAIN}` has no instance group `workers`; its groups: `controller-machine`, `{WORKERS}`."
    )


async def test_a_node_plan_knows_its_groups_and_refuses_unknown_nodes(rig: Rig) -> None:
    cluster = await rig.cluster(TRAIN, Backend.HYPERPOD)
    worker = next(node for node in cluster.nodes if node.group == WORKERS)
    planned = await rig.changes.nodes(
        cluster, verb="replace", node_ids=[worker.node_id], dry_run=False, user_id=ALICE, channel_id=CHANNEL
    )
    assert isinstance(planned, NodesPlanned) and planned.nodes == (worker,) and planned.operation_id
    stored = await rig.operations.get(planned.operation_id)
    assert stored is not None and stored.kind == Kind.REPLACE.value
    assert stored.request == {
        "node_ids": [worker.node_id],
        "groups": [WORKERS],
        "before_ids": [node.node_id for node in cluster.nodes if node.group == WORKERS],
    }
    with pytest.raises(NotPlanned) as unknown:
        await rig.changes.nodes(
            cluster, verb="reboot", node_ids=["i-0000000000000dead"], dry_run=False, user_id=ALICE, channel_id=CHANNEL
        )
    assert unknown.value.shown is Shown.USAGE and "is not a node of" in unknown.value.message


async def test_the_alert_button_plans_the_same_request_as_the_command(rig: Rig) -> None:
    cluster = await rig.cluster(TRAIN, Backend.HYPERPOD)
    worker = next(node for node in cluster.nodes if node.group == WORKERS)
    from_alert = await rig.changes.node_from_alert(
        org_id=KUMO,
        backend=Backend.HYPERPOD,
        cluster_name=TRAIN,
        node_id=worker.node_id,
        verb="reboot",
        user_id=ALICE,
        channel_id=CHANNEL,
    )
    assert from_alert.operation_id
    with pytest.raises(PlanPending) as pending:  # one plan of a node at a time (issue 21): the first stands
        await rig.changes.nodes(
            cluster, verb="reboot", node_ids=[worker.node_id], dry_run=False, user_id=ALICE, channel_id=CHANNEL
        )
    assert pending.value.pending.id == from_alert.operation_id
    await rig.operations.cancel(from_alert.operation_id, user_id=ALICE)
    from_command = await rig.changes.nodes(
        cluster, verb="reboot", node_ids=[worker.node_id], dry_run=False, user_id=ALICE, channel_id=CHANNEL
    )
    assert from_alert.operation_id and from_command.operation_id
    one, other = await rig.operations.get(from_alert.operation_id), await rig.operations.get(from_command.operation_id)
    assert one is not None and other is not None and one.request == other.request and one.kind == other.kind
    with pytest.raises(NotPlanned, match="is no longer in"):
        await rig.changes.node_from_alert(
            org_id=KUMO,
            backend=Backend.HYPERPOD,
            cluster_name=TRAIN,
            node_id="i-0000000000000dead",
            verb="reboot",
            user_id=ALICE,
            channel_id=CHANNEL,
        )


async def test_parallelcluster_without_its_api_is_refused_once_by_its_backend(rig: Rig) -> None:
    cluster = await rig.cluster(DEV, Backend.PCLUSTER)
    with pytest.raises(NotPlanned) as refused:
        await rig.changes.check_changeable(cluster)
    assert refused.value.shown is Shown.REFUSAL and refused.value.outcome is Outcome.REFUSED
    assert refused.value.message.startswith(f"`{KUMO}` has no ParallelCluster API in the program file")


async def test_a_running_change_makes_the_cluster_busy(rig: Rig) -> None:
    cluster = await rig.cluster(TRAIN, Backend.HYPERPOD)
    planned = await rig.changes.delete(cluster, user_id=ALICE, channel_id=CHANNEL)
    stored = await rig.operations.get(planned.operation_id)
    assert stored is not None and stored.request == {}
    async with rig.operations.db.session() as session:  # confirmed: what Operations.confirm claims first
        assert await crud.claim_operation(
            session,
            operation_id=planned.operation_id,
            from_status=OperationStatus.PLANNED.value,
            to_status=OperationStatus.RUNNING.value,
            values={"confirmed_by": ALICE},
        )
    with pytest.raises(ClusterBusy) as busy:
        await rig.changes.check_changeable(cluster)
    assert busy.value.running.id == planned.operation_id


async def test_a_launch_is_refused_by_the_same_capability_and_planned_where_the_backend_can(rig: Rig) -> None:
    with pytest.raises(NotPlanned) as refused:
        await rig.changes.launch(
            org_id=KUMO,
            template_id="pcluster-p5-efa",
            name="kumo-pc-new",
            params={},
            count=1,
            dry_run=False,
            user_id=ALICE,
            channel_id=CHANNEL,
        )
    assert refused.value.shown is Shown.REFUSAL and "no ParallelCluster API" in refused.value.message
    planned = await rig.changes.launch(
        org_id=KUMO,
        template_id="hyperpod-p5",
        name="kumo-hp-new",
        params={
            "execution_role_arn": "arn:aws:iam::111111111111:role/SageMakerHyperPodExecutionRole",
            "lifecycle_s3_uri": "s3://sagemaker-kumo-labs-lifecycle/base-config/",
        },
        count=2,
        dry_run=False,
        user_id=ALICE,
        channel_id=CHANNEL,
    )
    assert planned.operation_id is not None
    stored = await rig.operations.get(planned.operation_id)
    assert stored is not None and stored.kind == Kind.LAUNCH.value
    assert stored.request == planned.plan.request and stored.request["ClusterName"] == "kumo-hp-new"


async def test_a_stored_request_that_cannot_be_read_fails_at_confirm_without_asking_aws(rig: Rig, db: Database) -> None:
    """Review finding: a plan whose stored request no longer reads was answered "AWS refused: …" though AWS
    was never asked. It fails as unreadable, and the cluster is as it was."""
    cluster = await rig.cluster(TRAIN, Backend.HYPERPOD)
    planned = await rig.changes.scale(
        cluster, group=WORKERS, count=33, dry_run=False, user_id=ALICE, channel_id=CHANNEL
    )
    assert isinstance(planned, ScalePlanned) and planned.operation_id is not None
    async with db.session() as session:
        row = await session.get(Operation, planned.operation_id)
        assert row is not None
        row.request = {"count": 33}  # no group: a row a later version or a hand edit left unreadable
        session.add(row)
        await session.commit()
    decision = await rig.operations.confirm(planned.operation_id, user_id=ALICE)
    assert isinstance(decision, StartFailed)
    assert decision.reason.startswith("its stored request cannot be read: ") and "AWS" not in decision.reason
    stored = await rig.operations.get(planned.operation_id)
    assert stored is not None and stored.status == OperationStatus.FAILED.value
    after = await rig.cluster(TRAIN, Backend.HYPERPOD)
    assert [(g.name, g.target) for g in after.groups] == [(g.name, g.target) for g in cluster.groups]


async def test_a_launch_takes_the_orgs_defaults_and_param_overrides_them(rig: Rig) -> None:
    """kumo-labs's program entry gives execution_role_arn, lifecycle_s3_uri, subnet_id and security_group_id."""
    planned = await rig.changes.launch(
        org_id=KUMO,
        template_id="hyperpod-p5",
        name="kumo-defaults",
        params={"lifecycle_s3_uri": "s3://sagemaker-other-bucket/scripts/"},
        count=2,
        dry_run=True,
        user_id=ALICE,
        channel_id=CHANNEL,
    )
    request = planned.plan.request
    assert request is not None and planned.operation_id is None
    (workers,) = [g for g in request["InstanceGroups"] if g["InstanceGroupName"] == WORKERS]
    assert workers["ExecutionRole"] == "arn:aws:iam::111111111111:role/SageMakerHyperPodExecutionRole"
    assert workers["LifeCycleConfig"]["SourceS3Uri"] == "s3://sagemaker-other-bucket/scripts/"
    assert request["VpcConfig"] == {
        "Subnets": ["subnet-01111111111110a1b"],
        "SecurityGroupIds": ["sg-01111111111110c2d"],
    }


@pytest.mark.parametrize(
    ("name", "params", "count", "field", "words"),
    [
        ("kumo-p5-train", {}, 1, "name", "already has a HyperPod cluster"),
        ("-bad-", {}, 1, "name", "HyperPod cluster names are"),
        ("kumo-big", {}, 5, "count", "Over quota"),
        ("kumo-x", {}, 99, "count", "count must be between 1 and 64"),
        ("kumo-x", {"subnet_id": "subnet-zz"}, 1, "subnet_id", "subnet_id must look like"),
        ("kumo-x", {"colour": "red"}, 1, None, "has no parameter 'colour'"),
    ],
)
async def test_a_refused_launch_names_the_field_it_is_about(
    rig: Rig, name: str, params: dict[str, str], count: int, field: str | None, words: str
) -> None:
    with pytest.raises(NotPlanned) as refused:
        await rig.changes.launch(
            org_id=KUMO,
            template_id="hyperpod-p5",
            name=name,
            params=params,
            count=count,
            dry_run=True,
            user_id=ALICE,
            channel_id=CHANNEL,
        )
    assert refused.value.field == field and words in refused.value.message


async def test_one_request_proposes_one_launch_however_often_it_is_retried(rig: Rig, db: Database) -> None:
    async def submit() -> tuple[str | None, bool]:
        planned = await rig.changes.launch(
            org_id=KUMO,
            template_id="hyperpod-p5",
            name="kumo-once",
            params={},
            count=1,
            dry_run=False,
            user_id=ALICE,
            channel_id=CHANNEL,
            request_key="V0LAUNCH01",
        )
        return planned.operation_id, planned.again

    first, again = await submit(), await submit()
    assert first[0] is not None and first == (first[0], False) and again == (first[0], True)
    async with db.session() as session:
        rows = await crud.operations_with_status(session, status=OperationStatus.PLANNED.value)
    assert [row.id for row in rows if row.cluster_name == "kumo-once"] == [first[0]]
