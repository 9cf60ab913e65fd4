"""Launch plans, pure: quota across both backends, refusals with the numbers."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.clusters.held import held_instances
from bot.clusters.model import Backend, Cluster, Health, InstanceGroup, Node
from bot.clusters.plans import PlanRefused, ScalePlan, plan_launch, plan_scale, quota_lines
from bot.clusters.templates import TemplateSet, load_templates
from bot.config import OrgConfig

ROOT = Path(__file__).resolve().parents[2]
ORG = OrgConfig.model_validate(
    {
        "id": "kumo-labs",
        "name": "Kumo Labs",
        "channel": "C0KUMOLAB",
        "aws": {"account_id": "111111111111", "region": "us-east-1"},
        "quota": {"p5.48xlarge": 10},
    }
)
PARAMS = {
    "execution_role_arn": "arn:aws:iam::111111111111:role/HyperPodExecution",
    "lifecycle_s3_uri": "s3://sagemaker-kumo-lifecycle/base/",
}


@pytest.fixture(scope="module")
def templates() -> TemplateSet:
    return load_templates(ROOT / "bot" / "templates")


def cluster(name: str, backend: Backend, instance_type: str, count: int, *, state: str = "Running") -> Cluster:
    nodes = tuple(
        Node(
            node_id=f"i-{name}{i}",
            group="g",
            instance_type=instance_type,
            status=state,
            health=Health.HEALTHY,
            launch_time=datetime(2026, 11, 1, tzinfo=UTC),
        )
        for i in range(count)
    )
    return Cluster(org="kumo-labs", name=name, backend=backend, status="InService", nodes=nodes)


def test_held_counts_both_backends_as_one_type_and_skips_terminated() -> None:
    held = held_instances(
        [
            cluster("a", Backend.HYPERPOD, "ml.p5.48xlarge", 3),
            cluster("b", Backend.PCLUSTER, "p5.48xlarge", 2),
            cluster("c", Backend.PCLUSTER, "p5.48xlarge", 4, state="terminated"),
        ]
    )
    assert held == {"p5.48xlarge": 5}
    lines = quota_lines(ORG, held=held, requested={"ml.p5.48xlarge": 4, "ml.m5.12xlarge": 1})
    assert [(q.instance_type, q.held, q.after, q.allowed, q.over) for q in lines] == [
        ("m5.12xlarge", 0, 1, None, False),
        ("p5.48xlarge", 5, 9, 10, False),
    ]


def test_plan_within_quota(templates: TemplateSet) -> None:
    template = templates.get("hyperpod-p5")
    assert template is not None
    plan = plan_launch(
        template,
        org=ORG,
        name="kumo-new",
        given=PARAMS,
        count=5,
        clusters=[cluster("a", Backend.HYPERPOD, "ml.p5.48xlarge", 5)],
        prices=templates.prices,
    )
    assert plan.request is not None and plan.request["ClusterName"] == "kumo-new"
    assert [(q.instance_type, q.after) for q in plan.quota if q.allowed] == [("p5.48xlarge", 10)]
    assert plan.cost is not None and plan.cost[1] == pytest.approx(plan.cost[0] * 24)


@pytest.mark.parametrize(
    ("name", "count", "message"),
    [
        ("kumo-new", 6, "Over quota: p5.48xlarge: held 5, requested 6, allowed 10"),
        ("a", 1, "already has a HyperPod cluster named `a`"),
        ("-bad", 1, ""),
    ],
)
def test_plan_refusals(templates: TemplateSet, name: str, count: int, message: str) -> None:
    template = templates.get("hyperpod-p5")
    assert template is not None
    with pytest.raises(PlanRefused) as refused:
        plan_launch(
            template,
            org=ORG,
            name=name,
            given=PARAMS,
            count=count,
            clusters=[cluster("a", Backend.HYPERPOD, "ml.p5.48xlarge", 5)],
            prices=templates.prices,
        )
    assert message in str(refused.value) and str(refused.value)


def scale(held: list[Cluster], before: int, after: int, templates: TemplateSet) -> ScalePlan:
    return plan_scale(
        org=ORG,
        cluster=held[0],
        group="g",
        instance_type="ml.p5.48xlarge",
        before=before,
        after=after,
        clusters=held,
        prices=templates.prices,
    )


def test_scale_up_counts_quota_across_backends_and_prices_the_change(templates: TemplateSet) -> None:
    held = [cluster("a", Backend.HYPERPOD, "ml.p5.48xlarge", 4), cluster("b", Backend.PCLUSTER, "p5.48xlarge", 2)]
    plan = scale(held, 4, 8, templates)
    assert plan.growing
    (line,) = plan.quota
    assert (line.instance_type, line.held, line.requested, line.after, line.allowed) == ("p5.48xlarge", 6, 4, 10, 10)
    price = templates.prices.price_per_hour("ml.p5.48xlarge")
    assert price is not None and plan.cost_change == pytest.approx(4 * price)


def test_scale_over_quota_is_refused_with_the_numbers(templates: TemplateSet) -> None:
    with pytest.raises(PlanRefused) as refused:
        scale([cluster("a", Backend.HYPERPOD, "ml.p5.48xlarge", 8)], 8, 11, templates)
    assert "held 8, requested 3 more, allowed 10" in str(refused.value)


def test_scale_down_needs_no_quota_and_saves_money(templates: TemplateSet) -> None:
    # Over quota already (12 of 10): shrinking is still fine.
    plan = scale([cluster("a", Backend.HYPERPOD, "ml.p5.48xlarge", 12)], 12, 2, templates)
    assert not plan.growing and plan.quota == ()
    assert plan.cost_change is not None and plan.cost_change < 0


def test_scale_to_the_same_count_is_refused(templates: TemplateSet) -> None:
    with pytest.raises(PlanRefused, match="already set to 4 nodes"):
        scale([cluster("a", Backend.HYPERPOD, "ml.p5.48xlarge", 4)], 4, 4, templates)


def test_a_cluster_being_created_holds_its_target() -> None:
    """Review finding: nodes alone let a second launch fit into quota a Creating cluster had asked for."""
    creating = Cluster(
        org="kumo-labs",
        name="a",
        backend=Backend.HYPERPOD,
        status="Creating",
        groups=(InstanceGroup("workers", "ml.p5.48xlarge", current=0, target=10),),
    )
    assert held_instances([creating])["p5.48xlarge"] == 10
    growing = cluster("b", Backend.HYPERPOD, "ml.p5.48xlarge", 4)
    growing = Cluster(**{**growing.__dict__, "groups": (InstanceGroup("g", "ml.p5.48xlarge", current=4, target=8),)})
    assert held_instances([growing])["p5.48xlarge"] == 8
