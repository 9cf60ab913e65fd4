"""The embedded AWS of the sandbox and the tests: a moto server, plus every moto gap Pitcrew fills.

moto 5.2.5 is close enough to SageMaker HyperPod and EC2 for Pitcrew, but not quite; each patch below
names the gap it fills (see /work/shared/reference/aws.md section 5). The patches change moto's classes
in this process, and `ThreadedMotoServer` serves from this process too: its werkzeug app dispatches
every request to `SageMakerResponse.dispatch`, which builds a fresh response object and looks the action
method up by name on the class, and the backends it calls are the module-level `sagemaker_backends` /
`ec2_backends`. So patching the classes before (or even after) the server starts changes what clients
see, and the state helpers here (`set_hyperpod_node_status`, ...) act on the same objects the server uses.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import re
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import botocore.session

if TYPE_CHECKING:
    from moto.server import ThreadedMotoServer

__all__ = [
    "apply_moto_patches",
    "hyperpod_node_id",
    "reset_moto_server",
    "set_ec2_instance_status",
    "set_hyperpod_cluster_status",
    "set_hyperpod_node_status",
    "start_moto_server",
]

# HyperPod node ids are EC2 instance ids (botocore: i-[a-f0-9]{8}(?:[a-f0-9]{9})?).
INSTANCE_ID_PATTERN = re.compile(r"i-[a-f0-9]{8}(?:[a-f0-9]{9})?")
EC2_CHECK_STATUSES = frozenset({"ok", "impaired", "insufficient-data", "initializing", "not-applicable"})
# Group statuses that follow the cluster's own status while it is not InService.
_CLUSTER_TO_GROUP_STATUS = {
    "Creating": "Creating",
    "Updating": "Updating",
    "SystemUpdating": "SystemUpdating",
    "Deleting": "Deleting",
    "Failed": "Failed",
    "RollingBack": "Failed",
}

_patch_lock = threading.Lock()
_patched = False


@functools.cache
def _sagemaker_enum(shape: str) -> frozenset[str]:
    """Allowed values from the installed botocore model, so a typo in a test fails loudly."""
    model = botocore.session.get_session().get_service_model("sagemaker")
    return frozenset(model.shape_for(shape).enum)


# --- server -------------------------------------------------------------------------------------------


def start_moto_server(
    host: str = "127.0.0.1", port: int = 0, *, quiet: bool = True, load_default_amis: bool = False
) -> tuple[ThreadedMotoServer, str]:
    """Patch moto, start a ThreadedMotoServer on host:port (0 = a free port) and return it with its URL.

    quiet: silence werkzeug's line per request (it logs through the "werkzeug" logger, which it sets to
    INFO with its own handler unless a level is already set).
    load_default_amis: moto copies ~1300 public AMIs into every EC2 backend it creates (about 0.15 s per
    account and region); neither the sandbox nor Pitcrew looks AMIs up, so by default that is skipped
    through moto's MOTO_EC2_LOAD_DEFAULT_AMIS setting (an explicit value in the environment wins).
    """
    from moto.server import ThreadedMotoServer

    apply_moto_patches()
    if quiet:
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
    if not load_default_amis:
        os.environ.setdefault("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    server = ThreadedMotoServer(ip_address=host, port=port, verbose=False)
    server.start()
    bound_host, bound_port = server.get_host_and_port()
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    return server, f"http://{shown}:{bound_port}"


def reset_moto_server(endpoint: str) -> None:
    """Forget every resource in every account (moto's own reset endpoint); the patches stay."""
    import httpx

    httpx.post(f"{endpoint.rstrip('/')}/moto-api/reset", timeout=30).raise_for_status()


# --- node ids -----------------------------------------------------------------------------------------


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("/".join(parts).encode()).digest()


def _node_id_from_moto_name(account_id: str, region: str, cluster_name: str, moto_name: str) -> str:
    return "i-" + _digest(account_id, region, cluster_name, moto_name).hex()[:17]


def hyperpod_node_id(account_id: str, region: str, cluster_name: str, group: str, index: int) -> str:
    """The instance id the patched moto gives node `index` (0-based) of `group` in a cluster.

    Deterministic, so seeds and tests can name nodes without listing them first.
    """
    return _node_id_from_moto_name(account_id, region, cluster_name, f"{group}-{index}")


def _private_ip(instance_id: str) -> str:
    digest = _digest(instance_id)
    return f"10.1.{digest[0]}.{digest[1] % 254 + 1}"


def _private_dns(ip: str, region: str) -> str:
    domain = "ec2.internal" if region == "us-east-1" else f"{region}.compute.internal"
    return f"ip-{ip.replace('.', '-')}.{domain}"


class _NodesByInstanceId(dict[str, Any]):
    """Cluster.nodes keyed by each node's instance id, whatever key moto's code stores it under.

    Gap: moto's create_cluster stores nodes as nodes["<group>-<i>"] and looks them up by the NodeId the
    client sends, so once node ids are realistic the key has to be the node's own instance_id.
    """

    def __setitem__(self, key: str, node: Any) -> None:
        super().__setitem__(getattr(node, "instance_id", key), node)


# --- the patches --------------------------------------------------------------------------------------


def apply_moto_patches() -> None:
    """Fill the moto 5.2.5 gaps Pitcrew depends on. Idempotent; call before starting the server."""
    global _patched
    with _patch_lock:
        if _patched:
            return
        _patch_list_cluster_nodes_pagination()
        _patch_cluster_nodes()
        _patch_clusters()
        _patch_not_found()
        _patch_create_cluster_request()
        _patch_ec2_status_checks()
        _patched = True


def _patch_list_cluster_nodes_pagination() -> None:
    """Gap (a): list_cluster_nodes repeats its NextToken forever past MaxResults.

    moto's paginator builds the token from each item's `unique_attribute`, "arn" for list_cluster_nodes;
    ClusterNode has no arn, so every token reads "None", matches the first node again, and boto3's
    paginator stops with "The same next token was received twice". Node instance ids are unique per
    cluster, so they key the pages instead. The decorator reads the shared PAGINATION_MODEL dict at
    call time, so changing the entry is enough.
    """
    from moto.sagemaker import models

    models.PAGINATION_MODEL["list_cluster_nodes"]["unique_attribute"] = "instance_id"


def _patch_cluster_nodes() -> None:
    """Gap (b): nodes are named "<group>-<i>" with InstanceStatus.Message "message".

    Real node ids are EC2 instance ids and a Running node has an empty message. New nodes get an id
    derived from account/region/cluster/"<group>-<i>" (see hyperpod_node_id), a private IP and DNS
    name, and a settable message. describe/summary are rebuilt from botocore's ClusterNodeDetails and
    ClusterNodeSummary shapes.
    """
    from moto.sagemaker.models import ClusterNode

    original_init = ClusterNode.__init__

    @functools.wraps(original_init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        if not INSTANCE_ID_PATTERN.fullmatch(self.instance_id):
            self.instance_id = _node_id_from_moto_name(
                self.account_id, self.region_name, self.cluster_name, self.instance_id
            )
        self.status_message = ""
        self.private_ip = _private_ip(self.instance_id)
        self.availability_zone = f"{self.region_name}{'abcd'[_digest(self.cluster_name)[0] % 4]}"

    def _status(self: Any) -> dict[str, str]:
        return {"Status": self.status, "Message": getattr(self, "status_message", "")}

    def summary(self: Any) -> dict[str, Any]:
        ip = getattr(self, "private_ip", _private_ip(self.instance_id))
        return {
            "InstanceGroupName": self.instance_group_name,
            "InstanceId": self.instance_id,
            "InstanceType": self.instance_type,
            "LaunchTime": self.launch_time,
            "InstanceStatus": _status(self),
            "PrivateDnsHostname": _private_dns(ip, self.region_name),
        }

    def describe(self: Any) -> dict[str, Any]:
        ip = getattr(self, "private_ip", _private_ip(self.instance_id))
        return {
            **summary(self),
            "LifeCycleConfig": self.life_cycle_config,
            "ThreadsPerCore": self.threads_per_core,
            "PrivatePrimaryIp": ip,
            "Placement": {"AvailabilityZone": getattr(self, "availability_zone", f"{self.region_name}a")},
            "CapacityType": "OnDemand",
        }

    setattr(ClusterNode, "__init__", __init__)  # noqa: B010 - mypy rejects assigning to a method
    setattr(ClusterNode, "summary", summary)  # noqa: B010
    setattr(ClusterNode, "describe", describe)  # noqa: B010


def _patch_clusters() -> None:
    """Gap (c): describe_cluster lacks per-group Status, NodeRecovery and Orchestrator.

    Group Status (botocore ClusterInstanceGroupDetails) follows the cluster while it is not InService,
    else is "Degraded" when a node of the group is in Failure and "InService" otherwise. CurrentCount
    counts the group's nodes that have joined (all but Pending), since health and scaling shims change
    the node set after creation. Orchestrator and NodeRecovery echo CreateCluster (moto drops both),
    defaulting to a Slurm orchestrator and Automatic recovery.
    """
    from moto.sagemaker.models import Cluster

    original_init = Cluster.__init__

    @functools.wraps(original_init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self.nodes = _NodesByInstanceId()
        self.orchestrator = {"Slurm": {"SlurmConfigStrategy": "Managed"}}
        self.node_recovery = "Automatic"

    def describe(self: Any) -> dict[str, Any]:
        groups = []
        for group in self.instance_groups:
            nodes = [node for node in self.nodes.values() if node.instance_group_name == group["InstanceGroupName"]]
            if self.status in _CLUSTER_TO_GROUP_STATUS:
                status = _CLUSTER_TO_GROUP_STATUS[self.status]
            else:
                status = "Degraded" if any(node.status == "Failure" for node in nodes) else "InService"
            groups.append({**group, "CurrentCount": sum(node.status != "Pending" for node in nodes), "Status": status})
        return {
            "ClusterArn": self.arn,
            "ClusterName": self.cluster_name,
            "ClusterStatus": self.status,
            "CreationTime": self.creation_time,
            "FailureMessage": self.failure_message,
            "InstanceGroups": groups,
            "VpcConfig": self.vpc_config,
            "Orchestrator": getattr(self, "orchestrator", None),
            "NodeRecovery": getattr(self, "node_recovery", "Automatic"),
        }

    setattr(Cluster, "__init__", __init__)  # noqa: B010
    setattr(Cluster, "describe", describe)  # noqa: B010


def _patch_not_found() -> None:
    """Gap (d): a missing cluster is a ValidationException in moto, ResourceNotFound in AWS.

    botocore lists ResourceNotFound as the error of DescribeCluster, DeleteCluster, ListClusterNodes
    and DescribeClusterNode; Pitcrew maps it to "no such cluster".
    """
    from moto.sagemaker.exceptions import ResourceNotFound
    from moto.sagemaker.models import SageMakerModelBackend

    def guard(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            name = str(kwargs.get("cluster_name", args[0] if args else ""))
            if name.startswith("arn:"):
                name = name.split("/")[-1]
            if name not in self.clusters:
                raise ResourceNotFound(message=f"Cluster {name!r} not found.")
            return method(self, *args, **kwargs)

        return wrapper

    for name in ("describe_cluster", "delete_cluster", "describe_cluster_node", "list_cluster_nodes"):
        setattr(SageMakerModelBackend, name, guard(getattr(SageMakerModelBackend, name)))


def _patch_create_cluster_request() -> None:
    """Gaps in CreateCluster's request handling (moto's SageMakerResponse.create_cluster).

    - Orchestrator and NodeRecovery are dropped: read them and keep them on the cluster.
    - A group without ThreadsPerCore raises KeyError *after* the cluster is registered, so the client's
      retry gets ResourceInUse and a half-built cluster stays; the field is optional in the API.
    - A group without InstanceType or LifeCycleConfig is a bare 500 (KeyError): answer with a
      ValidationException that says what moto needs instead.
    """
    from moto.core.responses import ActionResult
    from moto.sagemaker.exceptions import ValidationError
    from moto.sagemaker.responses import SageMakerResponse

    def create_cluster(self: Any) -> ActionResult:
        cluster_name = self._get_param("ClusterName")
        instance_groups = self._get_param("InstanceGroups") or []
        for group in instance_groups:
            for required in ("InstanceType", "LifeCycleConfig"):
                if required not in group:
                    raise ValidationError(
                        message=f"Instance group {group.get('InstanceGroupName')!r}: the sandbox (moto) needs "
                        f"{required}."
                    )
            group.setdefault("ThreadsPerCore", None)
        backend = self.sagemaker_backend
        arn = backend.create_cluster(
            cluster_name=cluster_name,
            instance_groups=instance_groups,
            vpc_config=self._get_param("VpcConfig"),
            tags=self._get_param("Tags"),
        )
        cluster = backend.clusters[cluster_name]
        orchestrator = self._get_param("Orchestrator")
        if orchestrator:
            cluster.orchestrator = orchestrator
        cluster.node_recovery = self._get_param("NodeRecovery") or "Automatic"
        return ActionResult({"ClusterArn": arn})

    setattr(SageMakerResponse, "create_cluster", create_cluster)  # noqa: B010


def _patch_ec2_status_checks() -> None:
    """Gap: moto's EC2 status checks are always "ok" for a running instance, with no way to fail them.

    Instance.instance_status / system_status become settable per instance (set_ec2_instance_status);
    an instance that is not running still reports "not-applicable", as EC2 does.
    """
    from moto.ec2.models.instances import Instance

    def check(kind: str) -> property:
        def getter(self: Any) -> dict[str, Any]:
            if self.state_code != 16:  # 16 = running
                return {"Status": "not-applicable"}
            status, since = self.__dict__.get("_pitcrew_checks", {}).get(kind, ("ok", None))
            detail: dict[str, Any] = {"Name": "reachability", "Status": _detail_status(status)}
            if status == "impaired":
                detail["ImpairedSince"] = since
            return {"Details": [detail], "Status": status}

        return property(getter)

    setattr(Instance, "instance_status", check("instance"))  # noqa: B010
    setattr(Instance, "system_status", check("system"))  # noqa: B010


def _detail_status(summary: str) -> str:
    # EC2 StatusType for a check's detail: passed | failed | insufficient-data | initializing
    return {"ok": "passed", "impaired": "failed", "initializing": "initializing"}.get(summary, "insufficient-data")


# --- state injection (in-process; the threaded server sees it at once) --------------------------------


def _cluster(account_id: str, region: str, cluster_name: str) -> Any:
    from moto.sagemaker.models import sagemaker_backends

    clusters = sagemaker_backends[account_id][region].clusters
    if cluster_name not in clusters:
        raise LookupError(f"no HyperPod cluster {cluster_name!r} in {account_id}/{region} of this process's moto")
    return clusters[cluster_name]


def set_hyperpod_node_status(
    account_id: str, region: str, cluster_name: str, node_id: str, status: str, message: str = ""
) -> None:
    """Set a node's InstanceStatus (Status and Message), as ListClusterNodes/DescribeClusterNode show it."""
    allowed = _sagemaker_enum("ClusterInstanceStatus")
    if status not in allowed:
        raise ValueError(f"{status!r} is not a ClusterInstanceStatus ({', '.join(sorted(allowed))})")
    nodes = _cluster(account_id, region, cluster_name).nodes
    if node_id not in nodes:
        raise LookupError(f"no node {node_id!r} in HyperPod cluster {cluster_name!r}")
    node = nodes[node_id]
    node.status = status
    node.status_message = message


def set_hyperpod_cluster_status(
    account_id: str, region: str, cluster_name: str, status: str, failure_message: str = ""
) -> None:
    """Set a cluster's ClusterStatus and FailureMessage (DescribeCluster and ListClusters show them)."""
    allowed = _sagemaker_enum("ClusterStatus")
    if status not in allowed:
        raise ValueError(f"{status!r} is not a ClusterStatus ({', '.join(sorted(allowed))})")
    cluster = _cluster(account_id, region, cluster_name)
    cluster.status = status
    cluster.failure_message = failure_message


def set_ec2_instance_status(
    account_id: str,
    region: str,
    instance_id: str,
    *,
    instance_status: str = "ok",
    system_status: str = "ok",
) -> None:
    """Set an EC2 instance's status checks as DescribeInstanceStatus reports them while it runs."""
    from moto.ec2.models import ec2_backends

    for value in (instance_status, system_status):
        if value not in EC2_CHECK_STATUSES:
            raise ValueError(f"{value!r} is not an EC2 status check summary ({sorted(EC2_CHECK_STATUSES)})")
    instance = ec2_backends[account_id][region].get_instance(instance_id)  # raises InvalidInstanceIdError
    now = datetime.now(UTC)
    previous = instance.__dict__.get("_pitcrew_checks", {})

    def since(kind: str, value: str) -> datetime | None:
        # ImpairedSince keeps the time the check first failed, like EC2.
        old_value, old_since = previous.get(kind, ("ok", None))
        return (old_since if old_value == "impaired" else now) if value == "impaired" else None

    instance.__dict__["_pitcrew_checks"] = {
        "instance": (instance_status, since("instance", instance_status)),
        "system": (system_status, since("system", system_status)),
    }
