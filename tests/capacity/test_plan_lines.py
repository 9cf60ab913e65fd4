"""Launch and scale plans say where the accelerator nodes would come from: a reservation the request names, one
the org has but the request does not use, or On-Demand; and warn when a used reservation ends before the
horizon or has fewer nodes available. Pure (bot.clusters.plans), rendered by bot.slack.reserved."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bot.capacity.model import Reservation
from bot.clusters.model import Backend, Cluster
from bot.clusters.plans import plan_launch, plan_scale
from bot.clusters.templates import TemplateSet, load_templates
from bot.config import OrgConfig
from bot.slack.reserved import reservation_blocks, reservation_text

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)
TOKYO = ZoneInfo("Asia/Tokyo")
ORG = OrgConfig.model_validate(
    {
        "id": "kumo-labs",
        "name": "Kumo Labs",
        "channel": "C0KUMOLAB",
        "aws": {"account_id": "111111111111", "region": "us-east-1"},
        "quota": {"p5.48xlarge": 40},
    }
)
PARAMS = {
    "execution_role_arn": "arn:aws:iam::111111111111:role/HyperPodExecution",
    "lifecycle_s3_uri": "s3://sagemaker-kumo-lifecycle/base/",
}
CR = "cr-0123456789abcdef0"


@pytest.fixture(scope="module")
def templates() -> TemplateSet:
    return load_templates(ROOT / "bot" / "templates")


def block(
    *, ends_in: timedelta, available: int | None = 4, clusters: tuple[tuple[str, str, int], ...] = ()
) -> Reservation:
    return Reservation(
        org_id="kumo-labs",
        source="capacity_block",
        id=CR,
        name=CR,
        instance_type="p5.48xlarge",
        total=8,
        available=available,
        start=NOW - timedelta(days=1),
        end=NOW + ends_in,
        status="active",
        clusters=clusters,
    )


def launch(templates: TemplateSet, template_id: str, given: dict[str, str], reservations: list[Reservation]) -> str:
    template = templates.get(template_id)
    assert template is not None
    plan = plan_launch(
        template,
        org=ORG,
        name="kumo-new",
        given=given,
        count=4,
        clusters=[],
        prices=templates.prices,
        reservations=reservations,
        now=NOW,
        tz=TOKYO,
    )
    assert [line.instance_type for line in plan.reservations] == ["p5.48xlarge"], "accelerators only"
    return "\n".join(reservation_text(line) for line in plan.reservations)


def test_a_launch_that_names_a_capacity_block_ending_within_the_horizon_is_warned(templates: TemplateSet) -> None:
    given = {"subnet_id": "subnet-0123456789abcdef0", "capacity_type": "CAPACITY_BLOCK", "capacity_reservation_id": CR}
    text = launch(templates, "pcluster-p5-efa", given, [block(ends_in=timedelta(days=2))])
    assert f"4 x p5.48xlarge: 4 from EC2 Capacity Block for ML `{CR}`" in text
    assert "ends 2026-12-04 12:00 JST" in text  # the program's time zone
    assert "before the 7-day horizon" in text
    far = launch(templates, "pcluster-p5-efa", given, [block(ends_in=timedelta(days=10))])
    assert "horizon" not in far


def test_a_launch_short_of_available_nodes_says_how_many_are_not_reserved(templates: TemplateSet) -> None:
    given = {"subnet_id": "subnet-0123456789abcdef0", "capacity_type": "CAPACITY_BLOCK", "capacity_reservation_id": CR}
    text = launch(templates, "pcluster-p5-efa", given, [block(ends_in=timedelta(days=10), available=1)])
    assert "1 from EC2 Capacity Block" in text and "Only 1 available there: 3 would be On-Demand" in text


def test_a_launch_that_names_no_reservation_says_on_demand_and_which_it_could_use(templates: TemplateSet) -> None:
    given = {"subnet_id": "subnet-0123456789abcdef0"}
    text = launch(templates, "pcluster-p5-efa", given, [block(ends_in=timedelta(days=2))])
    assert "On-Demand; this plan does not use EC2 Capacity Block for ML" in text
    assert "horizon" not in text  # not used: its end takes nothing of this cluster
    assert "On-Demand capacity, no reservation" in launch(templates, "pcluster-p5-efa", given, [])
    ended = block(ends_in=-timedelta(hours=1))
    assert "no reservation" in launch(templates, "pcluster-p5-efa", given, [ended])


def test_hyperpod_draws_on_training_plans_and_parallelcluster_on_ec2_reservations(templates: TemplateSet) -> None:
    plan = Reservation(
        org_id="kumo-labs",
        source="training_plan",
        id="arn:aws:sagemaker:us-east-1:111111111111:training-plan/kumo-plan",
        name="kumo-plan",
        instance_type="ml.p5.48xlarge",
        total=16,
        available=16,
        start=NOW,
        end=NOW + timedelta(days=20),
        status="Active",
    )
    both = [block(ends_in=timedelta(days=2)), plan]
    assert "does not use SageMaker training plan `kumo-plan`" in launch(templates, "hyperpod-p5", PARAMS, both)
    given = {"subnet_id": "subnet-0123456789abcdef0"}
    assert "does not use EC2 Capacity Block" in launch(templates, "pcluster-p5-efa", given, both)


def test_growing_a_group_its_reservation_holds_uses_it_and_no_line_for_shrinking(templates: TemplateSet) -> None:
    cluster = Cluster(org="kumo-labs", name="kumo-p5-dev", backend=Backend.PCLUSTER, status="UPDATE_COMPLETE")
    held = block(ends_in=timedelta(hours=20), clusters=(("kumo-p5-dev", "compute-gpu", 4),))

    def scale(after: int) -> tuple[str, ...]:
        plan = plan_scale(
            org=ORG,
            cluster=cluster,
            group="compute-gpu/distributed-ml",
            instance_type="p5.48xlarge",
            before=4,
            after=after,
            clusters=[],
            prices=templates.prices,
            reservations=[held],
            now=NOW,
            tz=TOKYO,
        )
        return tuple(reservation_text(line) for line in plan.reservations)

    (grow,) = scale(6)
    assert f"2 x p5.48xlarge: 2 from EC2 Capacity Block for ML `{CR}`" in grow and "horizon" in grow
    assert scale(2) == ()


def test_no_section_without_lines_and_one_within_limits_with_them() -> None:
    assert reservation_blocks(()) == []
