"""Gap (i) of moto_support: NodeProvisioningMode, ListClusterEvents / DescribeClusterEvent and
StartClusterHealthCheck, shaped by botocore's model (the client validates what it sends and parses what it gets)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from sandbox.moto_support import (
    add_hyperpod_cluster_event,
    hyperpod_progress,
    reset_moto_server,
    set_deep_health_check_result,
)

ACCOUNT = "123456789012"
REGION = "us-east-1"
LIFECYCLE = {"SourceS3Uri": "s3://sagemaker-test-lifecycle/base-config/", "OnCreate": "on_create.sh"}
ROLE = f"arn:aws:iam::{ACCOUNT}:role/SageMakerHyperPodExecutionRole"


@pytest.fixture(autouse=True)
def _fresh(endpoint: str) -> None:
    reset_moto_server(endpoint)


@pytest.fixture
def sagemaker(endpoint: str) -> Any:
    return boto3.client("sagemaker", region_name=REGION, endpoint_url=endpoint)


def _create(sagemaker: Any, name: str, **extra: Any) -> None:
    group = {
        "InstanceGroupName": "workers",
        "InstanceType": "ml.p5.48xlarge",
        "InstanceCount": 2,
        "LifeCycleConfig": LIFECYCLE,
        "ExecutionRole": ROLE,
        "ThreadsPerCore": 1,
    }
    sagemaker.create_cluster(ClusterName=name, InstanceGroups=[group], **extra)


def test_events_of_a_continuous_cluster(sagemaker: Any) -> None:
    _create(sagemaker, "cp", NodeProvisioningMode="Continuous")
    assert sagemaker.describe_cluster(ClusterName="cp")["NodeProvisioningMode"] == "Continuous"
    event_id = add_hyperpod_cluster_event(
        ACCOUNT,
        REGION,
        "cp",
        description="Scaling workers failed",
        instance_group="workers",
        failure_message="InsufficientInstanceCapacity: no p5.48xlarge in us-east-1a",
    )
    add_hyperpod_cluster_event(
        ACCOUNT, REGION, "cp", description="Cluster created", level="Info", resource_type="Cluster"
    )
    events = sagemaker.list_cluster_events(ClusterName="cp", SortOrder="Ascending")["Events"]
    assert [e["EventLevel"] for e in events] == ["Error", "Info"]
    assert "EventDetails" not in events[0]  # a summary has none
    only = sagemaker.list_cluster_events(ClusterName="cp", InstanceGroupName="workers")["Events"]
    assert [e["EventId"] for e in only] == [event_id]
    details = sagemaker.describe_cluster_event(ClusterName="cp", EventId=event_id)["EventDetails"]
    failure = details["EventDetails"]["EventMetadata"]["InstanceGroupScaling"]["FailureMessage"]
    assert failure.startswith("InsufficientInstanceCapacity")
    with pytest.raises(ClientError) as missing:
        sagemaker.describe_cluster_event(ClusterName="cp", EventId="nope")
    assert missing.value.response["Error"]["Code"] == "ResourceNotFound"


def test_events_need_continuous_provisioning(sagemaker: Any) -> None:
    _create(sagemaker, "plain")
    assert "NodeProvisioningMode" not in sagemaker.describe_cluster(ClusterName="plain")
    with pytest.raises(ClientError) as refused:
        sagemaker.list_cluster_events(ClusterName="plain")
    assert refused.value.response["Error"]["Code"] == "ValidationException"


def test_deep_health_check_passes_or_fails(sagemaker: Any) -> None:
    _create(sagemaker, "dhc")
    nodes = [n["InstanceId"] for n in sagemaker.list_cluster_nodes(ClusterName="dhc")["ClusterNodeSummaries"]]
    set_deep_health_check_result(ACCOUNT, REGION, "dhc", nodes[1], "InstanceStress: GPU 3 failed DCGM diag")
    with hyperpod_progress(3600):
        sagemaker.start_cluster_health_check(
            ClusterName="dhc",
            DeepHealthCheckConfigurations=[
                {"InstanceGroupName": "workers", "InstanceIds": nodes, "DeepHealthChecks": ["InstanceStress"]}
            ],
        )
        statuses = {n["InstanceId"]: n["InstanceStatus"]["Status"] for n in _nodes(sagemaker, "dhc")}
        assert set(statuses.values()) == {"DeepHealthCheckInProgress"}
        with pytest.raises(ClientError):  # mid-check: not Running
            sagemaker.start_cluster_health_check(
                ClusterName="dhc",
                DeepHealthCheckConfigurations=[
                    {"InstanceGroupName": "workers", "DeepHealthChecks": ["InstanceConnectivity"]}
                ],
            )
    from sandbox.moto_support import advance_hyperpod

    advance_hyperpod(ACCOUNT, REGION, "dhc")
    after = {n["InstanceId"]: n["InstanceStatus"] for n in _nodes(sagemaker, "dhc")}
    assert after[nodes[0]]["Status"] == "Running"
    assert after[nodes[1]]["Status"] == "Failure"
    assert "GPU 3" in after[nodes[1]]["Message"]


def _nodes(sagemaker: Any, name: str) -> list[dict[str, Any]]:
    return list(sagemaker.list_cluster_nodes(ClusterName=name)["ClusterNodeSummaries"])
