"""The sandbox's reserved capacity (seeded after the clusters, sandbox.seed): a Capacity Block for ML that ends
tomorrow under Kumo Labs' ParallelCluster cluster kumo-p5-dev (its 4 P5 nodes, matched by instance type and
zone), so `make run` posts its 24-hour notice at the leader's first capacity check, and a SageMaker training
plan that ends in 6 days under Hoshi Vision's HyperPod cluster hoshi-p5-vlm (its worker group's
TrainingPlanArn). Orgs or clusters the seeded program lacks get none."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from sandbox import moto_support

if TYPE_CHECKING:
    from sandbox.seed import SeededCluster

BLOCK_CLUSTER = "kumo-p5-dev"
PLAN_CLUSTER = "hoshi-p5-vlm"
PLAN_GROUP = "worker-group-1"
BLOCK_ENDS_IN = timedelta(hours=20)  # tomorrow, within the 24-hour notice
PLAN_ENDS_IN = timedelta(days=6)


@dataclass(frozen=True)
class SeededReservation:
    org_id: str
    account_id: str
    region: str
    source: str  # "capacity_block" or "training_plan"
    id: str  # the reservation's id, or the plan's ARN
    cluster: str
    end: datetime


def seed_reserved_capacity(
    clusters: Sequence[SeededCluster], *, now: datetime | None = None
) -> list[SeededReservation]:
    now = now or datetime.now(UTC)
    seeded = []
    by_name = {cluster.name: cluster for cluster in clusters}
    block = by_name.get(BLOCK_CLUSTER)
    if block is not None:
        end = now + BLOCK_ENDS_IN
        rid = moto_support.add_capacity_reservation(
            block.account_id,
            block.region,
            instance_type=block.instance_type,
            count=block.count,
            available=0,
            availability_zone=f"{block.region}a",  # where moto places instances with no Placement
            start=now - timedelta(days=13),
            end=end,
            capacity_block=True,
        )
        seeded.append(
            SeededReservation(block.org_id, block.account_id, block.region, "capacity_block", rid, block.name, end)
        )
    plan = by_name.get(PLAN_CLUSTER)
    if plan is not None:
        end = now + PLAN_ENDS_IN
        arn = moto_support.add_training_plan(
            plan.account_id,
            plan.region,
            name=f"{plan.org_id}-p5-plan",
            instance_type=plan.instance_type,
            count=plan.count + 1,
            in_use=plan.count,
            start=now - timedelta(days=8),
            end=end,
        )
        moto_support.use_training_plan(plan.account_id, plan.region, plan.name, PLAN_GROUP, arn)
        seeded.append(
            SeededReservation(plan.org_id, plan.account_id, plan.region, "training_plan", arn, plan.name, end)
        )
    return seeded
