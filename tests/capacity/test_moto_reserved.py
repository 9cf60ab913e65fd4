"""The sandbox's training plans and capacity reservations (sandbox.moto_support, gap h) as a boto3 client sees
them from the moto server: only fields botocore's model has, its filters, pagination and errors, and HyperPod
instance groups carrying TrainingPlanArn."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import botocore.session
import pytest
from botocore.exceptions import ClientError

from sandbox.moto_support import add_capacity_reservation, add_training_plan, remove_reserved_capacity

ACCOUNT, REGION = "123456789012", "eu-west-1"  # moto's default account; a region no seeded org uses


@pytest.fixture
def clients(moto_endpoint: str) -> Iterator[tuple[Any, Any]]:
    kw = {"region_name": REGION, "endpoint_url": moto_endpoint}
    yield boto3.client("sagemaker", **kw), boto3.client("ec2", **kw)
    remove_reserved_capacity(ACCOUNT, REGION)


def members(service: str, shape: str) -> set[str]:
    return set(botocore.session.get_session().get_service_model(service).shape_for(shape).members)


def test_training_plans_answer_in_botocore_shapes_with_status_from_the_clock(clients: tuple[Any, Any]) -> None:
    now = datetime.now(UTC)  # once, as the test starts: moto judges the plans by the same clock
    sagemaker, _ = clients
    for i, (start, end) in enumerate(
        [(now - timedelta(days=1), now + timedelta(days=1)), (now + timedelta(days=2), now + timedelta(days=3))]
    ):
        add_training_plan(ACCOUNT, REGION, name=f"plan-{i}", instance_type="p5.48xlarge", count=4, start=start, end=end)
    add_training_plan(
        ACCOUNT, REGION, name="plan-gone", instance_type="p5.48xlarge", count=4,
        start=now - timedelta(days=4), end=now - timedelta(days=1),
    )  # fmt: skip
    listed = sagemaker.list_training_plans()["TrainingPlanSummaries"]
    assert {p["TrainingPlanName"]: p["Status"] for p in listed} == {
        "plan-0": "Active",
        "plan-1": "Scheduled",
        "plan-gone": "Expired",
    }
    for plan in listed:
        assert set(plan) <= members("sagemaker", "TrainingPlanSummary")
        for capacity in plan["ReservedCapacitySummaries"]:
            assert set(capacity) <= members("sagemaker", "ReservedCapacitySummary")
    active = sagemaker.list_training_plans(Filters=[{"Name": "Status", "Value": "Active"}])["TrainingPlanSummaries"]
    assert [p["TrainingPlanName"] for p in active] == ["plan-0"]
    pages = list(sagemaker.get_paginator("list_training_plans").paginate(PaginationConfig={"PageSize": 1}))
    assert [p["TrainingPlanName"] for page in pages for p in page["TrainingPlanSummaries"]] == [
        "plan-gone",
        "plan-0",
        "plan-1",
    ]  # by StartTime, ascending
    described = sagemaker.describe_training_plan(TrainingPlanName="plan-0")
    assert set(described) - {"ResponseMetadata"} <= members("sagemaker", "DescribeTrainingPlanResponse")
    assert described["TotalInstanceCount"] == 4 and described["DurationHours"] == 48
    with pytest.raises(ClientError) as missing:
        sagemaker.describe_training_plan(TrainingPlanName="no-such-plan")
    assert missing.value.response["Error"]["Code"] == "ResourceNotFound"


def test_capacity_reservations_answer_in_botocore_shape_with_ec2s_filters_and_errors(clients: tuple[Any, Any]) -> None:
    now = datetime.now(UTC)  # once, as the test starts: moto judges the plans by the same clock
    _, ec2 = clients
    block = add_capacity_reservation(
        ACCOUNT, REGION, instance_type="p5.48xlarge", count=16, availability_zone=f"{REGION}a",
        start=now - timedelta(days=1), end=now + timedelta(hours=20),
    )  # fmt: skip
    odcr = add_capacity_reservation(
        ACCOUNT, REGION, instance_type="trn1.32xlarge", count=4, availability_zone=f"{REGION}b",
        start=None, end=None, capacity_block=False,
    )  # fmt: skip
    found = {r["CapacityReservationId"]: r for r in ec2.describe_capacity_reservations()["CapacityReservations"]}
    assert set(found) == {block, odcr}
    for reservation in found.values():
        assert set(reservation) <= members("ec2", "CapacityReservation")
    assert found[block]["ReservationType"] == "capacity-block" and found[block]["State"] == "active"
    assert found[odcr]["ReservationType"] == "default" and found[odcr]["EndDateType"] == "unlimited"
    typed = ec2.describe_capacity_reservations(Filters=[{"Name": "instance-type", "Values": ["trn1.32xlarge"]}])
    assert [r["CapacityReservationId"] for r in typed["CapacityReservations"]] == [odcr]
    one = ec2.describe_capacity_reservations(CapacityReservationIds=[block])["CapacityReservations"]
    assert [r["CapacityReservationId"] for r in one] == [block]
    with pytest.raises(ClientError) as missing:
        ec2.describe_capacity_reservations(CapacityReservationIds=["cr-00000000000000000"])
    assert missing.value.response["Error"]["Code"] == "InvalidCapacityReservationId.NotFound"
    with pytest.raises(ClientError) as bad_filter:
        ec2.describe_capacity_reservations(Filters=[{"Name": "colour", "Values": ["blue"]}])
    assert bad_filter.value.response["Error"]["Code"] == "InvalidParameterValue"


def test_hyperpod_instance_groups_carry_their_training_plan(clients: tuple[Any, Any]) -> None:
    now = datetime.now(UTC)  # once, as the test starts: moto judges the plans by the same clock
    sagemaker, _ = clients
    arn = add_training_plan(
        ACCOUNT, REGION, name="hp-plan", instance_type="p5.48xlarge", count=2,
        start=now, end=now + timedelta(days=2),
    )  # fmt: skip
    group = {
        "InstanceGroupName": "workers",
        "InstanceType": "ml.p5.48xlarge",
        "InstanceCount": 2,
        "ExecutionRole": f"arn:aws:iam::{ACCOUNT}:role/Exec",
        "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-x/base/", "OnCreate": "on_create.sh"},
        "ThreadsPerCore": 1,
        "TrainingPlanArn": arn,
    }
    sagemaker.create_cluster(ClusterName="planned", InstanceGroups=[group])
    try:
        (described,) = sagemaker.describe_cluster(ClusterName="planned")["InstanceGroups"]
        assert described["TrainingPlanArn"] == arn
        (summary,) = [s for s in sagemaker.list_clusters()["ClusterSummaries"] if s["ClusterName"] == "planned"]
        assert summary["TrainingPlanArns"] == [arn]
    finally:
        sagemaker.delete_cluster(ClusterName="planned")
