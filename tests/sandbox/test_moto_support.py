"""The moto server and the gaps moto_support fills: pagination, node ids, health injection, accounts."""

from __future__ import annotations

import math
import re
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from bot.sandbox.moto_support import (
    apply_moto_patches,
    hyperpod_node_id,
    reset_moto_server,
    set_ec2_instance_status,
    set_hyperpod_cluster_status,
    set_hyperpod_node_status,
)

ACCOUNT = "123456789012"  # moto's default account, for the base "testing" keys
REGION = "us-east-1"
LIFECYCLE = {"SourceS3Uri": "s3://sagemaker-test-lifecycle/base-config/", "OnCreate": "on_create.sh"}
ROLE = f"arn:aws:iam::{ACCOUNT}:role/SageMakerHyperPodExecutionRole"


@pytest.fixture(autouse=True)
def _fresh(endpoint: str) -> None:
    reset_moto_server(endpoint)


@pytest.fixture
def sagemaker(endpoint: str) -> Any:
    return boto3.client("sagemaker", region_name=REGION, endpoint_url=endpoint)


def _group(name: str, instance_type: str, count: int, **extra: Any) -> dict[str, Any]:
    return {
        "InstanceGroupName": name,
        "InstanceType": instance_type,
        "InstanceCount": count,
        "LifeCycleConfig": LIFECYCLE,
        "ExecutionRole": ROLE,
        "ThreadsPerCore": 1,
        **extra,
    }


def _create(sagemaker: Any, name: str, workers: int, **extra: Any) -> None:
    sagemaker.create_cluster(
        ClusterName=name,
        InstanceGroups=[
            _group("controller-machine", "ml.m5.12xlarge", 1),
            _group("worker-group-1", "ml.p5.48xlarge", workers),
        ],
        **extra,
    )


def _all_nodes(sagemaker: Any, name: str, page_size: int | None = None) -> tuple[list[dict[str, Any]], int]:
    config = {"PageSize": page_size} if page_size else {}
    nodes: list[dict[str, Any]] = []
    pages = 0
    for page in sagemaker.get_paginator("list_cluster_nodes").paginate(ClusterName=name, PaginationConfig=config):
        pages += 1
        nodes += page["ClusterNodeSummaries"]
    return nodes, pages


@pytest.mark.parametrize(("total", "page_size"), [(130, None), (130, 100), (130, 37), (250, 100), (250, 7)])
def test_list_cluster_nodes_paginates_every_node_once(sagemaker: Any, total: int, page_size: int | None) -> None:
    _create(sagemaker, "big", total - 1)  # plus the controller
    nodes, pages = _all_nodes(sagemaker, "big", page_size)
    ids = [node["InstanceId"] for node in nodes]
    assert len(ids) == total
    assert len(set(ids)) == total
    assert pages == math.ceil(total / (page_size or 100))


def test_pagination_of_one_group(sagemaker: Any) -> None:
    _create(sagemaker, "big", 120)
    ids = [
        node["InstanceId"]
        for page in sagemaker.get_paginator("list_cluster_nodes").paginate(
            ClusterName="big", InstanceGroupNameContains="worker", PaginationConfig={"PageSize": 50}
        )
        for node in page["ClusterNodeSummaries"]
    ]
    assert len(ids) == len(set(ids)) == 120


def test_node_ids_are_ec2_instance_ids(sagemaker: Any) -> None:
    _create(sagemaker, "kumo-p5-train", 4)
    nodes, _ = _all_nodes(sagemaker, "kumo-p5-train")
    assert len(nodes) == 5
    for node in nodes:
        assert re.fullmatch(r"i-[a-f0-9]{17}", node["InstanceId"])
        assert node["InstanceStatus"] == {"Status": "Running", "Message": ""}
        assert re.fullmatch(r"ip-10-1-\d+-\d+\.ec2\.internal", node["PrivateDnsHostname"])
    expected = {hyperpod_node_id(ACCOUNT, REGION, "kumo-p5-train", "worker-group-1", i) for i in range(4)}
    expected.add(hyperpod_node_id(ACCOUNT, REGION, "kumo-p5-train", "controller-machine", 0))
    assert {node["InstanceId"] for node in nodes} == expected

    worker = hyperpod_node_id(ACCOUNT, REGION, "kumo-p5-train", "worker-group-1", 2)
    details = sagemaker.describe_cluster_node(ClusterName="kumo-p5-train", NodeId=worker)["NodeDetails"]
    assert details["InstanceId"] == worker
    assert details["InstanceGroupName"] == "worker-group-1"
    assert details["InstanceType"] == "ml.p5.48xlarge"
    assert details["ThreadsPerCore"] == 1
    assert details["Placement"]["AvailabilityZone"].startswith(REGION)
    assert details["PrivatePrimaryIp"].startswith("10.1.")


def test_ids_differ_between_clusters_and_accounts() -> None:
    ids = {
        hyperpod_node_id(ACCOUNT, REGION, "a", "worker-group-1", 0),
        hyperpod_node_id(ACCOUNT, REGION, "b", "worker-group-1", 0),
        hyperpod_node_id("111111111111", REGION, "a", "worker-group-1", 0),
        hyperpod_node_id(ACCOUNT, "us-west-2", "a", "worker-group-1", 0),
        hyperpod_node_id(ACCOUNT, REGION, "a", "worker-group-1", 1),
    }
    assert len(ids) == 5


def test_describe_cluster_has_group_status_orchestrator_and_recovery(sagemaker: Any) -> None:
    _create(sagemaker, "c1", 8)
    described = sagemaker.describe_cluster(ClusterName="c1")
    assert described["ClusterStatus"] == "InService"
    assert described["NodeRecovery"] == "Automatic"
    assert described["Orchestrator"] == {"Slurm": {"SlurmConfigStrategy": "Managed"}}
    groups = {group["InstanceGroupName"]: group for group in described["InstanceGroups"]}
    assert groups["worker-group-1"]["Status"] == "InService"
    assert groups["worker-group-1"]["CurrentCount"] == groups["worker-group-1"]["TargetCount"] == 8
    assert groups["controller-machine"]["Status"] == "InService"
    assert "InstanceCount" not in groups["worker-group-1"]


def test_create_cluster_keeps_orchestrator_and_node_recovery(sagemaker: Any) -> None:
    _create(sagemaker, "c1", 2, Orchestrator={"Slurm": {"SlurmConfigStrategy": "Overwrite"}}, NodeRecovery="None")
    described = sagemaker.describe_cluster(ClusterName="c1")
    assert described["Orchestrator"] == {"Slurm": {"SlurmConfigStrategy": "Overwrite"}}
    assert described["NodeRecovery"] == "None"


def test_node_status_injection_is_visible_through_the_server(sagemaker: Any) -> None:
    _create(sagemaker, "c1", 8)
    failed = hyperpod_node_id(ACCOUNT, REGION, "c1", "worker-group-1", 3)
    pending = hyperpod_node_id(ACCOUNT, REGION, "c1", "worker-group-1", 4)
    message = "Node health check failed: GPU XID 79 (fallen off the bus)"
    set_hyperpod_node_status(ACCOUNT, REGION, "c1", failed, "Failure", message)
    set_hyperpod_node_status(ACCOUNT, REGION, "c1", pending, "Pending")

    nodes = {node["InstanceId"]: node for node in _all_nodes(sagemaker, "c1")[0]}
    assert nodes[failed]["InstanceStatus"] == {"Status": "Failure", "Message": message}
    assert nodes[pending]["InstanceStatus"]["Status"] == "Pending"
    assert sum(node["InstanceStatus"]["Status"] == "Running" for node in nodes.values()) == 7
    details = sagemaker.describe_cluster_node(ClusterName="c1", NodeId=failed)["NodeDetails"]
    assert details["InstanceStatus"] == {"Status": "Failure", "Message": message}

    groups = {g["InstanceGroupName"]: g for g in sagemaker.describe_cluster(ClusterName="c1")["InstanceGroups"]}
    assert groups["worker-group-1"]["Status"] == "Degraded"
    assert groups["worker-group-1"]["CurrentCount"] == 7  # the Pending node has not joined yet
    assert groups["worker-group-1"]["TargetCount"] == 8
    assert groups["controller-machine"]["Status"] == "InService"

    set_hyperpod_node_status(ACCOUNT, REGION, "c1", failed, "Running")
    groups = {g["InstanceGroupName"]: g for g in sagemaker.describe_cluster(ClusterName="c1")["InstanceGroups"]}
    assert groups["worker-group-1"]["Status"] == "InService"


def test_cluster_status_injection(sagemaker: Any) -> None:
    _create(sagemaker, "c1", 2)
    set_hyperpod_cluster_status(ACCOUNT, REGION, "c1", "Failed", "Lifecycle script on_create.sh exited with 1")
    described = sagemaker.describe_cluster(ClusterName="c1")
    assert described["ClusterStatus"] == "Failed"
    assert described["FailureMessage"] == "Lifecycle script on_create.sh exited with 1"
    assert {group["Status"] for group in described["InstanceGroups"]} == {"Failed"}
    summary = sagemaker.list_clusters()["ClusterSummaries"][0]
    assert summary["ClusterStatus"] == "Failed"


def test_injection_refuses_unknown_values() -> None:
    with pytest.raises(LookupError):
        set_hyperpod_cluster_status(ACCOUNT, REGION, "missing", "InService")
    with pytest.raises(ValueError, match="ClusterStatus"):
        set_hyperpod_cluster_status(ACCOUNT, REGION, "missing", "Broken")
    with pytest.raises(ValueError, match="ClusterInstanceStatus"):
        set_hyperpod_node_status(ACCOUNT, REGION, "missing", "i-0", "Dead")


def test_injection_refuses_unknown_node(sagemaker: Any) -> None:
    _create(sagemaker, "c1", 1)
    with pytest.raises(LookupError):
        set_hyperpod_node_status(ACCOUNT, REGION, "c1", "worker-group-1-0", "Failure")


def test_missing_cluster_is_resource_not_found(sagemaker: Any) -> None:
    for call in (
        lambda: sagemaker.describe_cluster(ClusterName="nope"),
        lambda: sagemaker.list_cluster_nodes(ClusterName="nope"),
        lambda: sagemaker.describe_cluster_node(ClusterName="nope", NodeId="i-0123456789abcdef0"),
        lambda: sagemaker.delete_cluster(ClusterName="nope"),
    ):
        with pytest.raises(ClientError) as caught:
            call()
        assert caught.value.response["Error"]["Code"] == "ResourceNotFound"


def test_threads_per_core_is_optional(sagemaker: Any) -> None:
    group = _group("worker-group-1", "ml.trn1.32xlarge", 2)
    del group["ThreadsPerCore"]
    sagemaker.create_cluster(ClusterName="c1", InstanceGroups=[group])
    assert len(_all_nodes(sagemaker, "c1")[0]) == 2


def test_missing_lifecycle_config_is_a_validation_error(sagemaker: Any) -> None:
    group = _group("worker-group-1", "ml.p5.48xlarge", 2)
    del group["LifeCycleConfig"]
    with pytest.raises(ClientError) as caught:
        sagemaker.create_cluster(ClusterName="c1", InstanceGroups=[group])
    assert caught.value.response["Error"]["Code"] == "ValidationException"
    assert "LifeCycleConfig" in caught.value.response["Error"]["Message"]
    assert sagemaker.list_clusters()["ClusterSummaries"] == []


def test_patches_are_idempotent(sagemaker: Any) -> None:
    apply_moto_patches()
    apply_moto_patches()
    _create(sagemaker, "c1", 149)
    assert len(_all_nodes(sagemaker, "c1", 100)[0]) == 150


def _assumed(endpoint: str, account: str, region: str = REGION) -> boto3.Session:
    sts = boto3.client("sts", region_name=region, endpoint_url=endpoint)
    credentials = sts.assume_role(
        RoleArn=f"arn:aws:iam::{account}:role/PitcrewOps", RoleSessionName="pitcrew", ExternalId="pitcrew-test"
    )["Credentials"]
    return boto3.Session(
        aws_access_key_id=credentials["AccessKeyId"],
        aws_secret_access_key=credentials["SecretAccessKey"],
        aws_session_token=credentials["SessionToken"],
        region_name=region,
    )


def test_assumed_role_credentials_reach_the_roles_account(endpoint: str) -> None:
    account_a, account_b = "111111111111", "222222222222"
    session_a, session_b = _assumed(endpoint, account_a), _assumed(endpoint, account_b)
    assert session_a.client("sts", endpoint_url=endpoint).get_caller_identity()["Account"] == account_a
    assert session_b.client("sts", endpoint_url=endpoint).get_caller_identity()["Account"] == account_b

    sagemaker_a = session_a.client("sagemaker", endpoint_url=endpoint)
    sagemaker_b = session_b.client("sagemaker", endpoint_url=endpoint)
    _create(sagemaker_a, "kumo-p5-train", 2)
    assert [c["ClusterName"] for c in sagemaker_a.list_clusters()["ClusterSummaries"]] == ["kumo-p5-train"]
    assert sagemaker_a.describe_cluster(ClusterName="kumo-p5-train")["ClusterArn"].split(":")[4] == account_a
    assert sagemaker_b.list_clusters()["ClusterSummaries"] == []
    with pytest.raises(ClientError):
        sagemaker_b.describe_cluster(ClusterName="kumo-p5-train")
    # Nor with the base keys, which moto maps to its default account.
    base = boto3.client("sagemaker", region_name=REGION, endpoint_url=endpoint)
    assert base.list_clusters()["ClusterSummaries"] == []
    # And the node ids, hence the injection helpers, use the role's account.
    node = hyperpod_node_id(account_a, REGION, "kumo-p5-train", "worker-group-1", 0)
    set_hyperpod_node_status(account_a, REGION, "kumo-p5-train", node, "Failure", "boom")
    assert (
        sagemaker_a.describe_cluster_node(ClusterName="kumo-p5-train", NodeId=node)["NodeDetails"]["InstanceStatus"][
            "Status"
        ]
        == "Failure"
    )

    ec2_a = session_a.client("ec2", endpoint_url=endpoint)
    ec2_b = session_b.client("ec2", endpoint_url=endpoint)
    ec2_a.run_instances(ImageId="ami-0123456789abcdef0", InstanceType="p5.48xlarge", MinCount=2, MaxCount=2)
    assert sum(len(r["Instances"]) for r in ec2_a.describe_instances()["Reservations"]) == 2
    assert ec2_b.describe_instances()["Reservations"] == []


def test_ec2_status_checks_can_be_impaired(endpoint: str) -> None:
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=endpoint)
    ids = [
        i["InstanceId"]
        for i in ec2.run_instances(ImageId="ami-0123456789abcdef0", InstanceType="p5.48xlarge", MinCount=3, MaxCount=3)[
            "Instances"
        ]
    ]
    set_ec2_instance_status(ACCOUNT, REGION, ids[0], instance_status="impaired")
    set_ec2_instance_status(ACCOUNT, REGION, ids[1], system_status="impaired")
    ec2.stop_instances(InstanceIds=[ids[2]])
    statuses = {
        s["InstanceId"]: s
        for s in ec2.describe_instance_status(InstanceIds=ids, IncludeAllInstances=True)["InstanceStatuses"]
    }
    assert statuses[ids[0]]["InstanceStatus"]["Status"] == "impaired"
    assert statuses[ids[0]]["InstanceStatus"]["Details"][0]["Status"] == "failed"
    assert "ImpairedSince" in statuses[ids[0]]["InstanceStatus"]["Details"][0]
    assert statuses[ids[0]]["SystemStatus"]["Status"] == "ok"
    assert statuses[ids[1]]["SystemStatus"]["Status"] == "impaired"
    assert statuses[ids[2]]["InstanceState"]["Name"] == "stopped"
    assert statuses[ids[2]]["InstanceStatus"]["Status"] == "not-applicable"

    set_ec2_instance_status(ACCOUNT, REGION, ids[0])  # healed
    healed = ec2.describe_instance_status(InstanceIds=[ids[0]])["InstanceStatuses"][0]
    assert healed["InstanceStatus"]["Status"] == "ok"
    with pytest.raises(ValueError, match="status check"):
        set_ec2_instance_status(ACCOUNT, REGION, ids[0], instance_status="broken")
