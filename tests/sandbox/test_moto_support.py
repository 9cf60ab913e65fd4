"""The moto server and the gaps moto_support fills: pagination, node ids, health injection, accounts,
and the HyperPod operations moto lacks (UpdateCluster, Batch*ClusterNodes) with their progression."""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import boto3
import botocore.session
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, ParamValidationError

from sandbox import moto_support
from sandbox.moto_support import (
    HyperPodProgress,
    advance_hyperpod,
    apply_moto_patches,
    get_hyperpod_progress,
    hyperpod_node_id,
    hyperpod_progress,
    reset_moto_server,
    set_ec2_instance_status,
    set_hyperpod_cluster_status,
    set_hyperpod_node_status,
    set_hyperpod_progress,
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


# --- HyperPod operations moto lacks, and their progression ---------------------------------------------

WORKERS = "worker-group-1"
CONTROLLER = "controller-machine"
UNKNOWN_NODE = "i-0123456789abcdef0"  # well formed, in no cluster


class SteppedClock:
    """moto_support's `time.monotonic`, moved by hand: transitions due "after n seconds" happen exactly when the
    test says so, however slowly a loaded machine runs the calls in between."""

    def __init__(self) -> None:
        self.now = time.monotonic()

    def monotonic(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def stepped(monkeypatch: pytest.MonkeyPatch) -> SteppedClock:
    """Stand in for the time module moto_support reads (the moto server runs in this process's threads)."""
    clock = SteppedClock()
    monkeypatch.setattr(moto_support, "time", clock)
    return clock


@pytest.fixture
def slow() -> Iterator[HyperPodProgress]:
    """Transitions that never finish by themselves during a test: advance_hyperpod drives them."""
    with hyperpod_progress(600, create_seconds=0, delete_seconds=0) as settings:
        yield settings


def _groups(sagemaker: Any, name: str) -> dict[str, dict[str, Any]]:
    return {g["InstanceGroupName"]: g for g in sagemaker.describe_cluster(ClusterName=name)["InstanceGroups"]}


def _nodes(sagemaker: Any, name: str, group: str | None = None) -> dict[str, dict[str, Any]]:
    return {
        node["InstanceId"]: node
        for node in _all_nodes(sagemaker, name)[0]
        if group is None or node["InstanceGroupName"] == group
    }


def _statuses(sagemaker: Any, name: str, group: str = WORKERS) -> dict[str, str]:
    return {node_id: node["InstanceStatus"]["Status"] for node_id, node in _nodes(sagemaker, name, group).items()}


def _scale(sagemaker: Any, name: str, count: int, group: str = WORKERS) -> dict[str, Any]:
    spec = {"InstanceGroupName": group, "InstanceCount": count, "ExecutionRole": ROLE}
    response: dict[str, Any] = sagemaker.update_cluster(ClusterName=name, InstanceGroups=[spec])
    return response


def _worker(name: str, index: int) -> str:
    return hyperpod_node_id(ACCOUNT, REGION, name, WORKERS, index)


def _error(caught: pytest.ExceptionInfo[ClientError]) -> tuple[str, str, int]:
    response = caught.value.response
    return response["Error"]["Code"], response["Error"]["Message"], response["ResponseMetadata"]["HTTPStatusCode"]


def test_scale_up_sets_target_at_once_and_adds_pending_nodes(sagemaker: Any, slow: HyperPodProgress) -> None:
    _create(sagemaker, "c1", 4)
    before = set(_statuses(sagemaker, "c1"))
    answer = _scale(sagemaker, "c1", 6)
    assert answer["ClusterArn"] == sagemaker.describe_cluster(ClusterName="c1")["ClusterArn"]

    described = sagemaker.describe_cluster(ClusterName="c1")
    assert described["ClusterStatus"] == "Updating"
    groups = {g["InstanceGroupName"]: g for g in described["InstanceGroups"]}
    assert (groups[WORKERS]["TargetCount"], groups[WORKERS]["CurrentCount"]) == (6, 4)
    assert groups[WORKERS]["Status"] == "Updating"
    assert groups[CONTROLLER]["Status"] == "InService"  # a group the update leaves alone
    assert [s["ClusterStatus"] for s in sagemaker.list_clusters()["ClusterSummaries"]] == ["Updating"]
    statuses = _statuses(sagemaker, "c1")
    added = set(statuses) - before
    assert added == {_worker("c1", 4), _worker("c1", 5)}  # fresh ids, predictable
    assert all(re.fullmatch(r"i-[a-f0-9]{17}", node_id) for node_id in added)
    assert {statuses[node_id] for node_id in added} == {"Pending"}
    assert {statuses[node_id] for node_id in before} == {"Running"}
    pending = sagemaker.describe_cluster_node(ClusterName="c1", NodeId=_worker("c1", 5))["NodeDetails"]
    assert pending["InstanceStatus"]["Status"] == "Pending"
    assert pending["InstanceType"] == "ml.p5.48xlarge" and pending["LifeCycleConfig"] == LIFECYCLE

    assert advance_hyperpod(ACCOUNT, REGION, "c1") == 3  # two nodes join, then the cluster is InService
    described = sagemaker.describe_cluster(ClusterName="c1")
    assert described["ClusterStatus"] == "InService"
    groups = {g["InstanceGroupName"]: g for g in described["InstanceGroups"]}
    assert (groups[WORKERS]["TargetCount"], groups[WORKERS]["CurrentCount"]) == (6, 6)
    assert groups[WORKERS]["Status"] == "InService"
    assert set(_statuses(sagemaker, "c1").values()) == {"Running"}
    assert len(_statuses(sagemaker, "c1")) == 6
    assert advance_hyperpod(ACCOUNT, REGION, "c1") == 0


def test_scale_down_removes_broken_nodes_first(sagemaker: Any, slow: HyperPodProgress) -> None:
    _create(sagemaker, "c1", 6)
    broken = _worker("c1", 1)
    set_hyperpod_node_status(ACCOUNT, REGION, "c1", broken, "Failure", "GPU XID 79")
    _scale(sagemaker, "c1", 3)

    workers = _groups(sagemaker, "c1")[WORKERS]
    assert (workers["TargetCount"], workers["CurrentCount"]) == (3, 6)  # leaving nodes still count
    statuses = _statuses(sagemaker, "c1")
    assert sorted(statuses.values()).count("ShuttingDown") == 3
    assert statuses[broken] == "ShuttingDown"

    advance_hyperpod(ACCOUNT, REGION, "c1")
    workers = _groups(sagemaker, "c1")[WORKERS]
    assert (workers["TargetCount"], workers["CurrentCount"], workers["Status"]) == (3, 3, "InService")
    statuses = _statuses(sagemaker, "c1")
    assert len(statuses) == 3 and set(statuses.values()) == {"Running"}
    assert broken not in statuses
    assert sagemaker.describe_cluster(ClusterName="c1")["ClusterStatus"] == "InService"


def test_scale_to_zero_and_back_gives_new_ids(sagemaker: Any) -> None:
    with hyperpod_progress(0):  # 0: done before the call returns
        _create(sagemaker, "c1", 2)
        _scale(sagemaker, "c1", 0)
        assert sagemaker.describe_cluster(ClusterName="c1")["ClusterStatus"] == "InService"
        assert _statuses(sagemaker, "c1") == {}
        _scale(sagemaker, "c1", 2)
        assert _statuses(sagemaker, "c1") == {_worker("c1", 2): "Running", _worker("c1", 3): "Running"}
        workers = _groups(sagemaker, "c1")[WORKERS]
        assert (workers["TargetCount"], workers["CurrentCount"]) == (2, 2)


def test_update_adds_and_deletes_groups_and_sets_node_recovery(sagemaker: Any, slow: HyperPodProgress) -> None:
    _create(sagemaker, "c1", 2)
    trn = _group("worker-group-2", "ml.trn1.32xlarge", 3)
    sagemaker.update_cluster(
        ClusterName="c1",
        InstanceGroups=[trn],
        InstanceGroupsToDelete=[WORKERS],
        NodeRecovery="None",
    )
    described = sagemaker.describe_cluster(ClusterName="c1")
    groups = {g["InstanceGroupName"]: g for g in described["InstanceGroups"]}
    assert groups["worker-group-2"]["Status"] == "Creating"
    assert (groups["worker-group-2"]["TargetCount"], groups["worker-group-2"]["CurrentCount"]) == (3, 0)
    assert groups["worker-group-2"]["InstanceType"] == "ml.trn1.32xlarge"
    assert groups[WORKERS]["Status"] == "Deleting"
    assert (groups[WORKERS]["TargetCount"], groups[WORKERS]["CurrentCount"]) == (0, 2)
    assert groups[CONTROLLER]["Status"] == "InService"
    assert described["NodeRecovery"] == "None"

    advance_hyperpod(ACCOUNT, REGION, "c1")
    groups = _groups(sagemaker, "c1")
    assert set(groups) == {CONTROLLER, "worker-group-2"}
    assert groups["worker-group-2"]["CurrentCount"] == 3
    new = _statuses(sagemaker, "c1", "worker-group-2")
    assert set(new) == {hyperpod_node_id(ACCOUNT, REGION, "c1", "worker-group-2", i) for i in range(3)}
    assert set(new.values()) == {"Running"}
    assert _statuses(sagemaker, "c1", WORKERS) == {}


def test_update_while_updating_or_creating_is_a_conflict(sagemaker: Any) -> None:
    with hyperpod_progress(600, create_seconds=600):
        _create(sagemaker, "c1", 2)
        with pytest.raises(ClientError) as caught:
            _scale(sagemaker, "c1", 3)
        code, message, status = _error(caught)
        assert (code, status) == ("ConflictException", 400)
        assert "Creating" in message
        advance_hyperpod(ACCOUNT, REGION, "c1")

        _scale(sagemaker, "c1", 3)
        with pytest.raises(ClientError) as caught:
            _scale(sagemaker, "c1", 4)
        code, message, status = _error(caught)
        assert (code, status) == ("ConflictException", 400)
        assert "Updating" in message
        assert _groups(sagemaker, "c1")[WORKERS]["TargetCount"] == 3  # the refused update changed nothing
        advance_hyperpod(ACCOUNT, REGION, "c1")
        _scale(sagemaker, "c1", 4)
        assert _groups(sagemaker, "c1")[WORKERS]["TargetCount"] == 4


def test_update_validation(endpoint: str, sagemaker: Any, slow: HyperPodProgress) -> None:
    _create(sagemaker, "c1", 2)
    # botocore itself refuses a group without a required member, before any request...
    with pytest.raises(ParamValidationError, match="ExecutionRole"):
        sagemaker.update_cluster(ClusterName="c1", InstanceGroups=[{"InstanceGroupName": WORKERS, "InstanceCount": 3}])
    # ...and so does the server, naming the field, for a client that does not validate.
    unchecked = boto3.client(
        "sagemaker", region_name=REGION, endpoint_url=endpoint, config=Config(parameter_validation=False)
    )
    for missing in ("ExecutionRole", "InstanceCount", "InstanceGroupName"):
        spec: dict[str, Any] = {"InstanceGroupName": WORKERS, "InstanceCount": 3, "ExecutionRole": ROLE}
        del spec[missing]
        with pytest.raises(ClientError) as caught:
            unchecked.update_cluster(ClusterName="c1", InstanceGroups=[spec])
        code, message, status = _error(caught)
        assert (code, status) == ("ValidationException", 400)
        assert f"InstanceGroups.1.member.{missing}" in message and "must not be null" in message

    bad_requests: list[dict[str, Any]] = [
        {"InstanceGroups": [{"InstanceGroupName": WORKERS, "InstanceCount": 6759, "ExecutionRole": ROLE}]},
        {
            "InstanceGroups": [
                {"InstanceGroupName": WORKERS, "InstanceCount": 3, "ExecutionRole": "arn:aws:iam::12345:role/Short"}
            ]
        },
        {"InstanceGroups": [_group(WORKERS, "ml.trn1.32xlarge", 3)]},  # a group's instance type is fixed
        {"InstanceGroups": [{"InstanceGroupName": "worker-group-9", "InstanceCount": 1, "ExecutionRole": ROLE}]},
        {"InstanceGroups": [_scale_spec(3), _scale_spec(4)]},
        {"InstanceGroups": [_scale_spec(3)], "InstanceGroupsToDelete": [WORKERS]},
        {"InstanceGroupsToDelete": ["no-such-group"]},
    ]
    for request in bad_requests:
        with pytest.raises(ClientError) as caught:
            sagemaker.update_cluster(ClusterName="c1", **request)
        assert _error(caught)[0] == "ValidationException", request
    described = sagemaker.describe_cluster(ClusterName="c1")
    assert described["ClusterStatus"] == "InService"  # nothing started
    assert _groups(sagemaker, "c1")[WORKERS]["TargetCount"] == 2

    with pytest.raises(ClientError) as caught:
        _scale(sagemaker, "nope", 3)
    assert _error(caught)[0] == "ResourceNotFound"


def _scale_spec(count: int) -> dict[str, Any]:
    return {"InstanceGroupName": WORKERS, "InstanceCount": count, "ExecutionRole": ROLE}


def test_update_cluster_by_arn(sagemaker: Any, slow: HyperPodProgress) -> None:
    _create(sagemaker, "c1", 2)
    arn = sagemaker.describe_cluster(ClusterName="c1")["ClusterArn"]
    assert _scale(sagemaker, arn, 3)["ClusterArn"] == arn
    assert _groups(sagemaker, "c1")[WORKERS]["TargetCount"] == 3


def test_reboot_with_partial_failure(sagemaker: Any, slow: HyperPodProgress) -> None:
    _create(sagemaker, "c1", 4)
    good, pending = _worker("c1", 0), _worker("c1", 1)
    set_hyperpod_node_status(ACCOUNT, REGION, "c1", pending, "Pending")
    answer = sagemaker.batch_reboot_cluster_nodes(ClusterName="c1", NodeIds=[good, UNKNOWN_NODE, pending])
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert answer["Successful"] == [good]
    failed = {f["NodeId"]: f for f in answer["Failed"]}
    assert failed[UNKNOWN_NODE]["ErrorCode"] == "InstanceIdNotFound"
    assert failed[pending]["ErrorCode"] == "InvalidInstanceStatus"
    assert all(f["Message"] for f in answer["Failed"])

    rebooting = sagemaker.describe_cluster_node(ClusterName="c1", NodeId=good)["NodeDetails"]["InstanceStatus"]
    assert rebooting == {"Status": "Pending", "Message": "Rebooting (BatchRebootClusterNodes)"}
    again = sagemaker.batch_reboot_cluster_nodes(ClusterName="c1", NodeIds=[good])  # already rebooting
    assert again["Successful"] == [] and again["Failed"][0]["ErrorCode"] == "InvalidInstanceStatus"
    assert sagemaker.describe_cluster(ClusterName="c1")["ClusterStatus"] == "InService"

    advance_hyperpod(ACCOUNT, REGION, "c1")
    statuses = _statuses(sagemaker, "c1")
    assert statuses[good] == "Running"  # same instance, back
    assert statuses[pending] == "Pending"  # injected: no transition of ours to finish
    assert len(statuses) == 4


def test_reboot_heals_a_failed_node(sagemaker: Any, slow: HyperPodProgress) -> None:
    _create(sagemaker, "c1", 2)
    failed = _worker("c1", 0)
    set_hyperpod_node_status(ACCOUNT, REGION, "c1", failed, "Failure", "NvidiaErrorReboot")
    assert sagemaker.batch_reboot_cluster_nodes(ClusterName="c1", NodeIds=[failed])["Successful"] == [failed]
    advance_hyperpod(ACCOUNT, REGION, "c1")
    node = sagemaker.describe_cluster_node(ClusterName="c1", NodeId=failed)["NodeDetails"]
    assert node["InstanceStatus"] == {"Status": "Running", "Message": ""}
    assert _groups(sagemaker, "c1")[WORKERS]["Status"] == "InService"


def test_replace_with_partial_failure_gives_a_new_instance(sagemaker: Any, slow: HyperPodProgress) -> None:
    _create(sagemaker, "c1", 4)
    good, pending = _worker("c1", 2), _worker("c1", 3)
    set_hyperpod_node_status(ACCOUNT, REGION, "c1", good, "Failure", "XidHardwareFailure")
    set_hyperpod_node_status(ACCOUNT, REGION, "c1", pending, "Pending")
    answer = sagemaker.batch_replace_cluster_nodes(ClusterName="c1", NodeIds=[good, UNKNOWN_NODE, pending])
    assert answer["Successful"] == [good]
    assert {(f["NodeId"], f["ErrorCode"]) for f in answer["Failed"]} == {
        (UNKNOWN_NODE, "InstanceIdNotFound"),
        (pending, "InvalidInstanceStatus"),
    }
    assert _statuses(sagemaker, "c1")[good] == "ShuttingDown"
    again = sagemaker.batch_replace_cluster_nodes(ClusterName="c1", NodeIds=[good])
    assert again["Failed"][0]["ErrorCode"] == "InvalidInstanceStatus"

    advance_hyperpod(ACCOUNT, REGION, "c1")
    statuses = _statuses(sagemaker, "c1")
    successor = _worker("c1", 4)  # the group's fifth instance
    assert good not in statuses
    assert statuses[successor] == "Running"
    assert len(statuses) == 4
    with pytest.raises(ClientError) as caught:
        sagemaker.describe_cluster_node(ClusterName="c1", NodeId=good)
    assert _error(caught)[0] == "ResourceNotFound"  # the old id is gone for good
    workers = _groups(sagemaker, "c1")[WORKERS]
    # The injected Pending node has not joined; the successor has.
    assert (workers["TargetCount"], workers["CurrentCount"], workers["Status"]) == (4, 3, "InService")


def test_scale_down_during_a_replacement_keeps_the_count(sagemaker: Any, slow: HyperPodProgress) -> None:
    _create(sagemaker, "c1", 2)
    replaced = _worker("c1", 0)
    sagemaker.batch_replace_cluster_nodes(ClusterName="c1", NodeIds=[replaced])
    _scale(sagemaker, "c1", 0)  # the node under replacement goes too, with no successor
    advance_hyperpod(ACCOUNT, REGION, "c1")
    assert _statuses(sagemaker, "c1") == {}
    workers = _groups(sagemaker, "c1")[WORKERS]
    assert (workers["TargetCount"], workers["CurrentCount"]) == (0, 0)

    _scale(sagemaker, "c1", 2)
    advance_hyperpod(ACCOUNT, REGION, "c1")
    replaced = _worker("c1", 3)
    sagemaker.batch_replace_cluster_nodes(ClusterName="c1", NodeIds=[replaced])
    sagemaker.update_cluster(ClusterName="c1", InstanceGroupsToDelete=[WORKERS])
    advance_hyperpod(ACCOUNT, REGION, "c1")
    assert WORKERS not in _groups(sagemaker, "c1")
    assert _statuses(sagemaker, "c1") == {}


def test_batch_limits_and_malformed_ids(sagemaker: Any, slow: HyperPodProgress) -> None:
    _create(sagemaker, "c1", 2)
    too_many = [f"i-{i:017x}" for i in range(26)]
    for call in (sagemaker.batch_reboot_cluster_nodes, sagemaker.batch_replace_cluster_nodes):
        with pytest.raises(ClientError) as caught:
            call(ClusterName="c1", NodeIds=too_many)
        code, message, status = _error(caught)
        assert (code, status) == ("ValidationException", 400)
        assert "25" in message
        assert call(ClusterName="c1", NodeIds=too_many[:25])["Successful"] == []  # 25 unknown ids: fine
        with pytest.raises(ClientError) as caught:
            call(ClusterName="c1", NodeIds=["worker-group-1-0"])
        assert _error(caught)[0] == "ValidationException"
        with pytest.raises(ClientError) as caught:
            call(ClusterName="nope", NodeIds=[UNKNOWN_NODE])
        assert _error(caught)[0] == "ResourceNotFound"
    with pytest.raises(ClientError) as caught:
        sagemaker.batch_delete_cluster_nodes(ClusterName="c1", NodeIds=[f"i-{i:017x}" for i in range(100)])
    assert _error(caught)[0] == "ValidationException"
    assert set(_statuses(sagemaker, "c1").values()) == {"Running"}


def test_delete_nodes_decrements_target_count(sagemaker: Any, slow: HyperPodProgress) -> None:
    _create(sagemaker, "c1", 5)
    first, second, pending = _worker("c1", 0), _worker("c1", 1), _worker("c1", 2)
    set_hyperpod_node_status(ACCOUNT, REGION, "c1", pending, "Pending")
    answer = sagemaker.batch_delete_cluster_nodes(
        ClusterName="c1", NodeIds=[first, second, UNKNOWN_NODE, pending, first]
    )
    assert answer["Successful"] == [first, second]  # a repeated id counts once
    failed = {f["NodeId"]: f for f in answer["Failed"]}
    assert failed[UNKNOWN_NODE]["Code"] == "NodeIdNotFound"  # `Code` here, not `ErrorCode`
    assert failed[pending]["Code"] == "InvalidNodeStatus"
    assert "ErrorCode" not in failed[pending]

    workers = _groups(sagemaker, "c1")[WORKERS]
    assert (workers["TargetCount"], workers["CurrentCount"]) == (3, 4)  # the Pending node has not joined
    assert _statuses(sagemaker, "c1")[first] == "ShuttingDown"
    advance_hyperpod(ACCOUNT, REGION, "c1")
    statuses = _statuses(sagemaker, "c1")
    assert first not in statuses and second not in statuses
    assert len(statuses) == 3
    assert _groups(sagemaker, "c1")[WORKERS]["TargetCount"] == 3


def test_progression_by_time(sagemaker: Any, stepped: SteppedClock) -> None:
    step = 0.4
    with hyperpod_progress(step):
        _create(sagemaker, "c1", 2)
        old = _worker("c1", 0)
        _scale(sagemaker, "c1", 3)
        sagemaker.batch_replace_cluster_nodes(ClusterName="c1", NodeIds=[old])
        assert sagemaker.describe_cluster(ClusterName="c1")["ClusterStatus"] == "Updating"
        workers = _groups(sagemaker, "c1")[WORKERS]
        assert (workers["TargetCount"], workers["CurrentCount"]) == (3, 2)

        stepped.advance(step + 0.05)  # one step: the update is done, the old node is gone, its successor joining
        assert sagemaker.list_clusters()["ClusterSummaries"][0]["ClusterStatus"] == "InService"
        statuses = _statuses(sagemaker, "c1")
        assert old not in statuses
        assert statuses[_worker("c1", 2)] == "Running"  # added by the scale-up
        assert statuses[_worker("c1", 3)] == "Pending"  # the replacement
        workers = _groups(sagemaker, "c1")[WORKERS]
        assert (workers["TargetCount"], workers["CurrentCount"]) == (3, 2)

        stepped.advance(step + 0.05)  # two steps: the replacement is Running
        statuses = _statuses(sagemaker, "c1")
        assert set(statuses.values()) == {"Running"} and len(statuses) == 3
        assert _groups(sagemaker, "c1")[WORKERS]["CurrentCount"] == 3


def test_create_and_delete_can_take_time(sagemaker: Any) -> None:
    assert get_hyperpod_progress().create_seconds == 0  # by default: seeded clusters are InService at once
    with hyperpod_progress(600, create_seconds=600, delete_seconds=600):
        _create(sagemaker, "c1", 2)
        described = sagemaker.describe_cluster(ClusterName="c1")
        assert described["ClusterStatus"] == "Creating"
        assert {g["Status"] for g in described["InstanceGroups"]} == {"Creating"}
        assert {g["CurrentCount"] for g in described["InstanceGroups"]} == {0}
        assert {g["TargetCount"] for g in described["InstanceGroups"]} == {1, 2}
        assert set(_statuses(sagemaker, "c1").values()) == {"Pending"}
        refused = sagemaker.batch_reboot_cluster_nodes(ClusterName="c1", NodeIds=[_worker("c1", 0)])
        assert refused["Failed"][0]["ErrorCode"] == "InvalidInstanceStatus"
        advance_hyperpod(ACCOUNT, REGION, "c1")
        assert sagemaker.describe_cluster(ClusterName="c1")["ClusterStatus"] == "InService"
        assert set(_statuses(sagemaker, "c1").values()) == {"Running"}

        sagemaker.delete_cluster(ClusterName="c1")
        assert sagemaker.describe_cluster(ClusterName="c1")["ClusterStatus"] == "Deleting"
        assert {g["Status"] for g in _groups(sagemaker, "c1").values()} == {"Deleting"}
        assert set(_statuses(sagemaker, "c1").values()) == {"ShuttingDown"}
        for call in (lambda: sagemaker.delete_cluster(ClusterName="c1"), lambda: _scale(sagemaker, "c1", 3)):
            with pytest.raises(ClientError) as caught:
                call()
            assert _error(caught)[0] == "ConflictException"
        advance_hyperpod(ACCOUNT, REGION, "c1")
        with pytest.raises(ClientError) as caught:
            sagemaker.describe_cluster(ClusterName="c1")
        assert _error(caught)[0] == "ResourceNotFound"
        assert sagemaker.list_clusters()["ClusterSummaries"] == []
        with pytest.raises(LookupError):
            advance_hyperpod(ACCOUNT, REGION, "c1")


def test_create_and_delete_by_time(sagemaker: Any, stepped: SteppedClock) -> None:
    step = 0.3
    with hyperpod_progress(step, create_seconds=step, delete_seconds=step):
        _create(sagemaker, "c1", 1)
        assert sagemaker.list_clusters()["ClusterSummaries"][0]["ClusterStatus"] == "Creating"
        stepped.advance(step + 0.05)
        assert sagemaker.list_clusters()["ClusterSummaries"][0]["ClusterStatus"] == "InService"
        sagemaker.delete_cluster(ClusterName="c1")
        assert sagemaker.list_clusters()["ClusterSummaries"][0]["ClusterStatus"] == "Deleting"
        stepped.advance(step + 0.05)
        assert sagemaker.list_clusters()["ClusterSummaries"] == []


def test_injected_status_wins_over_a_pending_transition(sagemaker: Any, slow: HyperPodProgress) -> None:
    _create(sagemaker, "c1", 1)
    _scale(sagemaker, "c1", 2)
    joining = _worker("c1", 1)
    set_hyperpod_node_status(ACCOUNT, REGION, "c1", joining, "Failure", "failed its deep health check")
    set_hyperpod_cluster_status(ACCOUNT, REGION, "c1", "Failed", "capacity")
    advance_hyperpod(ACCOUNT, REGION, "c1")
    assert _statuses(sagemaker, "c1")[joining] == "Failure"
    assert sagemaker.describe_cluster(ClusterName="c1")["ClusterStatus"] == "Failed"


def test_progress_settings() -> None:
    assert get_hyperpod_progress() == HyperPodProgress(seconds=3.0, create_seconds=0.0, delete_seconds=0.0)
    with hyperpod_progress(1.5, delete_seconds=2) as inside:
        assert inside == get_hyperpod_progress() == HyperPodProgress(1.5, 0.0, 2.0)
        previous = set_hyperpod_progress(0, create_seconds=4)
        assert previous == inside
        assert get_hyperpod_progress() == HyperPodProgress(0.0, 4.0, 2.0)
    assert get_hyperpod_progress() == HyperPodProgress()
    for bad in (-1.0, math.inf, math.nan):
        with pytest.raises(ValueError):
            set_hyperpod_progress(bad)
    assert get_hyperpod_progress() == HyperPodProgress()


def test_botocore_gives_these_operations_no_client_token() -> None:
    """Nothing to honour: a retried UpdateCluster or Batch* call is a second call (Pitcrew keys them itself).
    If a botocore upgrade adds a ClientToken, this fails, and the emulation should honour it."""
    model = botocore.session.get_session().get_service_model("sagemaker")
    for operation in (
        "UpdateCluster",
        "BatchRebootClusterNodes",
        "BatchReplaceClusterNodes",
        "BatchDeleteClusterNodes",
        "CreateCluster",
        "DeleteCluster",
    ):
        members = model.operation_model(operation).input_shape.members
        assert "ClientToken" not in members, operation
        assert not any(shape.metadata.get("idempotencyToken") for shape in members.values()), operation


def test_concurrent_readers_during_changes(sagemaker: Any) -> None:
    """The threaded server: reads while nodes come and go never see a half-changed node set."""
    with hyperpod_progress(0.01):
        _create(sagemaker, "c1", 20)
        errors: list[BaseException] = []
        done = threading.Event()

        def read() -> None:
            client = boto3.client("sagemaker", region_name=REGION, endpoint_url=sagemaker.meta.endpoint_url)
            try:
                while not done.is_set():
                    client.describe_cluster(ClusterName="c1")
                    client.list_cluster_nodes(ClusterName="c1")
            except BaseException as error:  # reported below
                errors.append(error)

        readers = [threading.Thread(target=read) for _ in range(4)]
        for reader in readers:
            reader.start()
        try:
            for count in (40, 10, 30, 20):
                _scale(sagemaker, "c1", count)
                advance_hyperpod(ACCOUNT, REGION, "c1")
                ids = list(_statuses(sagemaker, "c1"))[:5]
                sagemaker.batch_replace_cluster_nodes(ClusterName="c1", NodeIds=ids)
                advance_hyperpod(ACCOUNT, REGION, "c1")
        finally:
            done.set()
            for reader in readers:
                reader.join()
        assert errors == []
        workers = _groups(sagemaker, "c1")[WORKERS]
        assert (workers["TargetCount"], workers["CurrentCount"]) == (20, 20)


def test_a_reset_keeps_the_keys_assume_role_issued(endpoint: str) -> None:
    """A long-lived session (Pitcrew's, the test session's) keeps working across a reset, in the account its role
    is in; without its key moto would take its requests for its default account's. (Not tried with
    keep_credentials=False: that would break every session of this test process.)"""
    other = "222233334444"
    sts = boto3.client("sts", region_name=REGION, endpoint_url=endpoint)
    issued = sts.assume_role(RoleArn=f"arn:aws:iam::{other}:role/Pitcrew", RoleSessionName="test")["Credentials"]
    session_client = boto3.client(
        "ec2",
        region_name=REGION,
        endpoint_url=endpoint,
        aws_access_key_id=issued["AccessKeyId"],
        aws_secret_access_key=issued["SecretAccessKey"],
        aws_session_token=issued["SessionToken"],
    )
    before = session_client.create_security_group(GroupName="before-reset", Description="which account?")
    reset_moto_server(endpoint)
    made = session_client.create_security_group(GroupName="after-reset", Description="which account?")
    groups = session_client.describe_security_groups()["SecurityGroups"]
    assert {g["OwnerId"] for g in groups if g["GroupId"] == made["GroupId"]} == {other}
    assert before["GroupId"] not in {g["GroupId"] for g in groups}, "the reset forgot the resources"
