"""/cluster templates and /cluster launch --dry-run: the plan, its quota check and its refusals; nothing is
created and nothing in AWS changes."""

from __future__ import annotations

import pytest

from sandbox.world import Sandbox
from tests.conftest import SeededAws
from tests.scenarios.conftest import ADMIN, COORDINATION, ask, body

ALICE, BOB, HANA = "U0ALICE01", "U0BOB0001", "U0HANA001"
KUMO = "C0KUMOLAB"
HYPERPOD_PARAMS = (
    "--param execution_role_arn=arn:aws:iam::111111111111:role/SageMakerHyperPodExecutionRole "
    "--param lifecycle_s3_uri=s3://sagemaker-kumo-labs-lifecycle/base-config/"
)


async def test_templates_are_listed_with_their_parameters(sandbox: Sandbox) -> None:
    reply = await ask(sandbox, user=BOB, channel=KUMO, text="templates")
    text = body(reply)
    for template_id in ("hyperpod-p5", "hyperpod-trn1", "pcluster-p5-efa", "pcluster-trn1"):
        assert f"*{template_id}*" in text
    assert "`count`" in text and "`capacity_reservation_id`" in text and "Prices as of" in text


async def test_operator_gets_a_plan_with_quota_and_cost_and_nothing_changes(
    sandbox: Sandbox, seeded_aws: SeededAws
) -> None:
    before = seeded_aws.state()
    reply = await ask(
        sandbox, user=ALICE, channel=KUMO, text=f"launch hyperpod-p5 kumo-new --dry-run --count 4 {HYPERPOD_PARAMS}"
    )
    text = body(reply)
    # kumo-labs holds 32 HyperPod + 4 ParallelCluster P5 nodes: both backends count against one quota of 40.
    assert "p5.48xlarge: held 36 + 4 → 40 of 40 allowed" in text
    assert "m5.12xlarge: held 1 + 1 → 2 (not limited)" in text
    assert "/hour" in text and "/day" in text
    assert '"ClusterName": "kumo-new"' in text and '"InstanceCount": 4' in text and "pitcrew:org" in text
    assert "Dry run: nothing was created" in text
    assert seeded_aws.state() == before


async def test_parallelcluster_plan_shows_the_cluster_yaml(sandbox: Sandbox) -> None:
    reply = await ask(
        sandbox,
        user=ADMIN,
        channel=COORDINATION,
        text="launch pcluster-trn1 umi-first --dry-run --org umi-lang --count 8 "
        "--param subnet_id=subnet-0123456789abcdef0",
    )
    text = body(reply)
    assert "trn1.32xlarge: held 0 + 8 → 8 of 16 allowed" in text
    assert "MinCount: 8" in text and "InstanceType: trn1.32xlarge" in text


@pytest.mark.parametrize(
    ("user", "text", "expected"),
    [
        (
            ALICE,
            f"launch hyperpod-p5 kumo-big --dry-run --count 5 {HYPERPOD_PARAMS}",
            "Over quota: p5.48xlarge: held 36, requested 5, allowed 40",
        ),
        (BOB, f"launch hyperpod-p5 kumo-new --dry-run {HYPERPOD_PARAMS}", "this needs operator"),
        (HANA, f"launch hyperpod-p5 kumo-new --dry-run --org kumo-labs {HYPERPOD_PARAMS}", "no access to org"),
        (ALICE, f"launch hyperpod-p5 kumo-p5-train --dry-run {HYPERPOD_PARAMS}", "already has a HyperPod cluster"),
        (ALICE, "launch hyperpod-p5 kumo-new --dry-run --param execution_role_arn=", "execution_role_arn is empty"),
        (
            ALICE,
            f"launch hyperpod-p5 kumo-new --dry-run --count 99 {HYPERPOD_PARAMS}",
            "count must be between 1 and 64",
        ),
        (
            ALICE,
            "launch hyperpod-p5 kumo-new --dry-run --param lifecycle_s3_uri=s3://my-bucket/x "
            "--param execution_role_arn=arn:aws:iam::111111111111:role/R",
            "lifecycle_s3_uri must",
        ),
        (ALICE, "launch hyperpod-p9 kumo-new --dry-run", "There is no template `hyperpod-p9`"),
        (ADMIN, f"launch hyperpod-p5 anywhere --dry-run {HYPERPOD_PARAMS}", "Say which org"),
    ],
    ids=[
        "over-quota",
        "viewer",
        "other-org",
        "name-in-use",
        "missing-param",
        "out-of-bounds",
        "bad-pattern",
        "unknown-template",
        "admin-needs-org",
    ],
)
async def test_launch_refusals_say_why_and_change_nothing(
    sandbox: Sandbox, seeded_aws: SeededAws, user: str, text: str, expected: str
) -> None:
    before = seeded_aws.state()
    channel = COORDINATION if user == ADMIN else KUMO
    reply = await ask(sandbox, user=user, channel=channel, text=text)
    assert expected in body(reply)
    assert "Plan:" not in body(reply)
    assert seeded_aws.state() == before
