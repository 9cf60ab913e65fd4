"""HyperPod changes against the moto server over HTTP: scale, reboot, replace, delete; and the clients' retries.

Each test works on a cluster of its own in kumo-labs' account (created and deleted here), so the seeded clusters
other tests read stay as seeded. Calls are observed through botocore's own event hooks, never mocked.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, ParamValidationError

from bot.clusters.accounts import MAX_ATTEMPTS, AwsAccounts
from bot.clusters.hyperpod import GroupNotFound, HyperPodBackend, NodeFailure
from bot.clusters.model import ClusterNotFound
from bot.config import OrgConfig
from sandbox.moto_support import (
    advance_hyperpod,
    hyperpod_node_id,
    hyperpod_progress,
    set_hyperpod_node_status,
)
from tests.conftest import SeededAws

CLUSTER = "kumo-changes"
CONTROLLER, WORKERS = "controller-machine", "worker-group-1"
UNKNOWN = ("i-0000000000000dead", "i-0000000000000beef")  # instance-id shaped, in no cluster


@dataclass
class Calls:
    """Every SageMaker operation the backend sent, with its parameters (botocore's provide-client-params)."""

    sent: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def __call__(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        self.sent.append((model.name, params))

    def of(self, operation: str) -> list[dict[str, Any]]:
        return [params for name, params in self.sent if name == operation]


@dataclass
class Rig:
    backend: HyperPodBackend
    sagemaker: Any
    calls: Calls
    org: OrgConfig
    accounts: AwsAccounts

    def node(self, group: str, index: int) -> str:
        return hyperpod_node_id(self.org.aws.account_id, self.org.aws.region, CLUSTER, group, index)

    def group(self, name: str) -> dict[str, Any]:
        described = self.sagemaker.describe_cluster(ClusterName=CLUSTER)
        found: dict[str, Any] = next(g for g in described["InstanceGroups"] if g["InstanceGroupName"] == name)
        return found

    def moto_group(self, name: str) -> dict[str, Any]:
        """The group as moto holds it: what the last CreateCluster/UpdateCluster spec said."""
        from moto.sagemaker.models import sagemaker_backends

        cluster = sagemaker_backends[self.org.aws.account_id][self.org.aws.region].clusters[CLUSTER]
        found: dict[str, Any] = next(g for g in cluster.instance_groups if g["InstanceGroupName"] == name)
        return found


def _group(name: str, instance_type: str, count: int, org: OrgConfig, **extra: Any) -> dict[str, Any]:
    return {
        "InstanceGroupName": name,
        "InstanceType": instance_type,
        "InstanceCount": count,
        "LifeCycleConfig": {
            "SourceS3Uri": "s3://sagemaker-kumo-labs-lifecycle/base-config/",
            "OnCreate": "on_create.sh",
        },
        "ExecutionRole": f"arn:aws:iam::{org.aws.account_id}:role/SageMakerHyperPodExecutionRole-kumo-labs",
        "ThreadsPerCore": 1,
        **extra,
    }


@pytest.fixture
def rig(seeded_aws: SeededAws) -> Iterator[Rig]:
    org = seeded_aws.program.org("kumo-labs")
    assert org is not None
    calls = Calls()
    session = boto3.Session()
    session.events.register("provide-client-params.sagemaker", calls)
    accounts = AwsAccounts(base_session=session)
    sagemaker = accounts.client(org, "sagemaker")
    sagemaker.create_cluster(
        ClusterName=CLUSTER,
        InstanceGroups=[
            _group(CONTROLLER, "ml.m5.12xlarge", 1, org, SlurmConfig={"NodeType": "Controller"}),
            _group(
                WORKERS,
                "ml.p5.48xlarge",
                4,
                org,
                InstanceStorageConfigs=[{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}],
                OnStartDeepHealthChecks=["InstanceStress", "InstanceConnectivity"],
                SlurmConfig={"NodeType": "Compute", "PartitionNames": ["dev"]},
            ),
        ],
        Tags=[{"Key": "pitcrew:org", "Value": "kumo-labs"}],
    )
    calls.sent.clear()
    try:
        yield Rig(HyperPodBackend(org_id=org.id, sagemaker=sagemaker), sagemaker, calls, org, accounts)
    finally:
        try:
            advance_hyperpod(org.aws.account_id, org.aws.region, CLUSTER)
            sagemaker.delete_cluster(ClusterName=CLUSTER)
        except (LookupError, ClientError):
            pass  # the test deleted it


def test_clients_retry_in_adaptive_mode(seeded_aws: SeededAws) -> None:
    org = seeded_aws.program.org("kumo-labs")
    assert org is not None
    for service in ("sagemaker", "ec2"):
        retries = AwsAccounts().client(org, service).meta.config.retries
        # botocore's max_attempts counts retries; it keeps the first try in total_max_attempts.
        assert retries == {"mode": "adaptive", "total_max_attempts": MAX_ATTEMPTS + 1}


def test_scale_up_and_down_sends_the_groups_whole_spec(rig: Rig) -> None:
    with hyperpod_progress(0):  # transitions complete before each call returns
        request_id = rig.backend.resize(name=CLUSTER, group=WORKERS, count=6)
        assert request_id
        workers = rig.group(WORKERS)
        assert (workers["TargetCount"], workers["CurrentCount"]) == (6, 6)
        assert rig.group(CONTROLLER)["TargetCount"] == 1  # the other group was not in the request

        [sent] = rig.calls.of("UpdateCluster")
        assert sent["ClusterName"] == CLUSTER
        [spec] = sent["InstanceGroups"]
        expected = _group(
            WORKERS,
            "ml.p5.48xlarge",
            6,
            rig.org,
            InstanceStorageConfigs=[{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}],
            OnStartDeepHealthChecks=["InstanceStress", "InstanceConnectivity"],
            SlurmConfig={"NodeType": "Compute", "PartitionNames": ["dev"]},
        )
        assert spec == expected  # no CurrentCount/TargetCount/Status: only input members
        assert rig.moto_group(WORKERS)["ExecutionRole"] == expected["ExecutionRole"]
        assert rig.moto_group(WORKERS)["LifeCycleConfig"] == expected["LifeCycleConfig"]

        rig.backend.resize(name=CLUSTER, group=WORKERS, count=2)
        workers = rig.group(WORKERS)
        assert (workers["TargetCount"], workers["CurrentCount"]) == (2, 2)
        assert rig.calls.of("UpdateCluster")[-1]["InstanceGroups"][0]["InstanceCount"] == 2
        cluster = rig.backend.get_cluster(CLUSTER)
        assert sum(node.group == WORKERS for node in cluster.nodes) == 2


def test_a_spec_without_execution_role_is_refused(rig: Rig) -> None:
    """Why the whole spec: UpdateCluster requires ExecutionRole for every group it names (botocore checks it,
    and so does the server, here with botocore's own check off)."""
    bare = {"ClusterName": CLUSTER, "InstanceGroups": [{"InstanceGroupName": WORKERS, "InstanceCount": 5}]}
    with pytest.raises(ParamValidationError):
        rig.sagemaker.update_cluster(**bare)
    creds = rig.accounts.credentials(rig.org)
    unchecked = boto3.client(
        "sagemaker",
        region_name=rig.org.aws.region,
        aws_access_key_id=creds.access_key,
        aws_secret_access_key=creds.secret_key,
        aws_session_token=creds.token,
        config=Config(parameter_validation=False),
    )
    with pytest.raises(ClientError) as refused:
        unchecked.update_cluster(**bare)
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert "ExecutionRole" in refused.value.response["Error"]["Message"]
    assert rig.group(WORKERS)["TargetCount"] == 4


def test_scale_while_updating_is_refused_by_aws(rig: Rig) -> None:
    with hyperpod_progress(60):
        rig.backend.resize(name=CLUSTER, group=WORKERS, count=5)
        assert rig.group(WORKERS)["TargetCount"] == 5
        with pytest.raises(ClientError) as refused:
            rig.backend.resize(name=CLUSTER, group=WORKERS, count=6)
        assert refused.value.response["Error"]["Code"] == "ConflictException"


def test_unknown_group_and_cluster(rig: Rig) -> None:
    with pytest.raises(GroupNotFound) as missing:
        rig.backend.resize(name=CLUSTER, group="workers", count=2)
    assert str(missing.value) == (
        f"Cluster {CLUSTER} has no instance group workers; its groups: {CONTROLLER}, {WORKERS}."
    )
    assert rig.calls.of("UpdateCluster") == []
    with pytest.raises(ClusterNotFound):
        rig.backend.resize(name="no-such-cluster", group=WORKERS, count=2)
    with pytest.raises(ClusterNotFound):
        rig.backend.delete(name="no-such-cluster")


def test_another_orgs_cluster_in_a_shared_account_is_not_there(rig: Rig) -> None:
    other = HyperPodBackend(org_id="sakura-ai", sagemaker=rig.sagemaker, shared_account=True)
    with pytest.raises(ClusterNotFound):
        other.resize(name=CLUSTER, group=WORKERS, count=2)
    with pytest.raises(ClusterNotFound):
        other.reboot_nodes(name=CLUSTER, node_ids=[rig.node(WORKERS, 0)])
    with pytest.raises(ClusterNotFound):
        other.delete(name=CLUSTER)
    assert rig.calls.of("UpdateCluster") == rig.calls.of("BatchRebootClusterNodes") == []
    assert rig.calls.of("DeleteCluster") == []
    ours = HyperPodBackend(org_id="kumo-labs", sagemaker=rig.sagemaker, shared_account=True)
    with hyperpod_progress(0):
        assert ours.resize(name=CLUSTER, group=WORKERS, count=3)


def test_reboot_30_ids_in_two_chunks_with_partial_failures(rig: Rig) -> None:
    with hyperpod_progress(0):
        rig.backend.resize(name=CLUSTER, group=WORKERS, count=28)
    workers = [rig.node(WORKERS, index) for index in range(28)]
    busy = workers[26]
    set_hyperpod_node_status(rig.org.aws.account_id, rig.org.aws.region, CLUSTER, busy, "Pending", "Joining")
    asked = [*workers, *UNKNOWN, workers[0]]  # 31 ids, 30 different

    with hyperpod_progress(60):
        result = rig.backend.reboot_nodes(name=CLUSTER, node_ids=asked)

    sent = rig.calls.of("BatchRebootClusterNodes")
    assert [len(params["NodeIds"]) for params in sent] == [25, 5]  # the model's max, a repeat counted once
    assert [node for params in sent for node in params["NodeIds"]] == [*workers, *UNKNOWN]
    assert result.successful == tuple(node for node in workers if node != busy)
    assert [(f.node_id, f.code) for f in result.failed] == [
        (busy, "InvalidInstanceStatus"),
        (UNKNOWN[0], "InstanceIdNotFound"),
        (UNKNOWN[1], "InstanceIdNotFound"),
    ]
    assert all(f.message for f in result.failed)
    assert len(result.request_ids) == 2 and all(result.request_ids)
    rebooting = {n.node_id: n.status for n in rig.backend.get_cluster(CLUSTER).nodes}
    assert rebooting[workers[0]] == "Pending"


def test_a_chunk_refused_as_a_whole_fails_its_nodes_and_the_others_still_run(rig: Rig) -> None:
    with hyperpod_progress(0):
        rig.backend.resize(name=CLUSTER, group=WORKERS, count=26)
    workers = [rig.node(WORKERS, index) for index in range(26)]
    asked = [*workers[:25], "not-an-instance-id", workers[25]]  # the second chunk is malformed
    with hyperpod_progress(0):
        result = rig.backend.reboot_nodes(name=CLUSTER, node_ids=asked)
    assert result.successful == tuple(workers[:25])
    assert {f.node_id for f in result.failed} == {"not-an-instance-id", workers[25]}
    assert {f.code for f in result.failed} == {"ValidationException"}
    assert all("NodeIds" in f.message for f in result.failed)
    assert len(result.request_ids) == 2


def test_replace_gives_new_instances(rig: Rig) -> None:
    old = [rig.node(WORKERS, 0), rig.node(WORKERS, 1)]
    with hyperpod_progress(0):
        result = rig.backend.replace_nodes(name=CLUSTER, node_ids=[*old, UNKNOWN[0]])
    assert result.successful == tuple(old)
    assert result.failed == (NodeFailure(UNKNOWN[0], "InstanceIdNotFound", result.failed[0].message),)
    [request_id] = result.request_ids
    assert request_id
    nodes = {n.node_id: n for n in rig.backend.get_cluster(CLUSTER).nodes if n.group == WORKERS}
    assert not set(old) & set(nodes)
    assert set(nodes) == {rig.node(WORKERS, index) for index in (2, 3, 4, 5)}
    assert {n.status for n in nodes.values()} == {"Running"}
    assert rig.group(WORKERS)["TargetCount"] == 4


def test_delete(rig: Rig) -> None:
    request_id = rig.backend.delete(name=CLUSTER)
    assert request_id
    assert rig.calls.of("DeleteCluster") == [{"ClusterName": CLUSTER}]
    with pytest.raises(ClusterNotFound):
        rig.backend.get_cluster(CLUSTER)
