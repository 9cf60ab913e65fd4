"""The embedded AWS of the sandbox and the tests: a moto server, plus every moto gap Pitcrew fills.

moto 5.2.5 is close enough to SageMaker HyperPod and EC2 for Pitcrew, but not quite; each patch below names the
gap it fills. In short (read from moto's source and by running it): of HyperPod, moto implements only create,
describe, list and delete of clusters and nodes (PR getmoto/moto#7765); `update_cluster` and the
`batch_*_cluster_nodes` calls answer 500; node ids are `<group>-<i>`, not `i-…`; `list_cluster_nodes` repeats
its NextToken past 100 nodes; per-group Status, Orchestrator and NodeRecovery are not returned. The patches
change moto's classes in this process, and `ThreadedMotoServer` serves from this process too: its werkzeug app
dispatches every request to `SageMakerResponse.dispatch`, which builds a fresh response object and looks the
action method up by name on the class (so a method added to the class is a new operation), and the backends it
calls are the module-level `sagemaker_backends` / `ec2_backends`. So patching the classes before (or even after)
the server starts changes what clients see, and the state helpers here (`set_hyperpod_node_status`, ...) act on
the same objects the server uses.

HyperPod work takes time in AWS and Pitcrew's progress messages poll for it, so the HyperPod operations
moto lacks (UpdateCluster, Batch{Reboot,Replace,Delete}ClusterNodes), and optionally CreateCluster and
DeleteCluster, run under one process-wide progression model (section "progression" below): each
transition completes a configurable number of seconds after the call (`set_hyperpod_progress`,
`hyperpod_progress`), lazily, whenever the cluster is read; `advance_hyperpod` completes them at once.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import itertools
import logging
import math
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import botocore.session

if TYPE_CHECKING:
    from moto.server import ThreadedMotoServer

__all__ = [
    "HyperPodProgress",
    "add_capacity_reservation",
    "add_hyperpod_cluster_event",
    "add_training_plan",
    "advance_hyperpod",
    "apply_moto_patches",
    "get_hyperpod_progress",
    "hyperpod_node_id",
    "hyperpod_progress",
    "remove_reserved_capacity",
    "reset_moto_server",
    "set_deep_health_check_result",
    "set_ec2_instance_status",
    "set_hyperpod_cluster_status",
    "set_hyperpod_node_status",
    "set_hyperpod_progress",
    "start_moto_server",
    "use_training_plan",
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


def reset_moto_server(endpoint: str, *, keep_credentials: bool = True) -> None:
    """Forget every resource in every account (moto's own reset endpoint); the patches stay.

    keep_credentials: the keys AssumeRole issued stay valid (as AWS's would), when this process serves the
    server: moto tells a request's account by its key, and a long-lived AwsAccounts (a test session's, the
    sandbox's) holds its keys. Without them each reset needed fresh sessions, whose clients cost 20-40 ms of
    CPU apiece (a tenth of the scenario tests' time)."""
    import httpx

    from bot.tls import tls_context

    issued = _issued_credentials() if keep_credentials else None
    httpx.post(f"{endpoint.rstrip('/')}/moto-api/reset", timeout=30, verify=tls_context()).raise_for_status()
    if issued is not None:
        _reissue_credentials(issued)


@dataclass(frozen=True)
class MotoSnapshot:
    """moto's state at one moment (every account and region of every service in use), to come back to
    without making it again: re-seeding the example program takes seconds of API calls, a restore a
    deep copy. Taken and restored in this process, which serves moto's state (the server shares it)."""

    services: dict[int, Any]  # id -> a service's BackendDict (a reset forgets which are in use; these are)
    backends: dict[tuple[int, str, str], Any]  # (BackendDict's id, account, region) -> that backend object
    state: dict[tuple[int, str, str], dict[str, Any]]  # the same keys -> a deep copy of the backend's attributes


def snapshot_moto() -> MotoSnapshot:
    """What moto holds now. Backends that refer to one another keep referring to the live objects."""
    from moto.core.base_backend import BackendDict, backend_lock

    with backend_lock:
        services = {id(service): service for service in list(BackendDict._instances)}  # type: ignore[misc]
        backends = {
            (key, account, region): backend
            for key, service in services.items()
            for account, regions in list(service.items())
            for region, backend in list(regions.items())
        }
        memo: dict[int, Any] = {id(backend): backend for backend in backends.values()}
        state = copy.deepcopy({key: backend.__dict__ for key, backend in backends.items()}, memo)
    return MotoSnapshot(services=services, backends=backends, state=state)


def restore_moto(endpoint: str, snapshot: MotoSnapshot) -> None:
    """moto as it was at `snapshot`: everything reset, then each backend of the snapshot given a fresh deep
    copy of its attributes then (so the snapshot can be restored again). The keys AssumeRole issued since
    stay valid, as in a reset."""
    issued = _issued_credentials()
    reset_moto_server(endpoint, keep_credentials=False)
    # Not under moto's backend_lock: looking a backend up takes that (non-reentrant) lock itself; nothing else
    # calls moto between two tests.
    fresh = {key: snapshot.services[key[0]][key[1]][key[2]] for key in snapshot.backends}
    memo: dict[int, Any] = {id(old): fresh[key] for key, old in snapshot.backends.items()}
    state = copy.deepcopy(snapshot.state, memo)
    for key, backend in fresh.items():
        backend.__dict__ = state[key]
    _reissue_credentials(issued)


# What AssumeRole issued: IAM access keys by (account, partition), STS assumed roles by (account, region).
_Issued = tuple[dict[tuple[str, str], dict[str, Any]], dict[tuple[str, str], list[Any]]]


def _issued_credentials() -> _Issued:
    """moto's IAM access keys (account, partition) and STS assumed roles (account, region), as they are now."""
    from moto.iam.models import iam_backends
    from moto.sts.models import sts_backends

    keys = {  # only AssumeRole's: an IAM user's key belongs to a user, who is a resource and goes with a reset
        (account, partition): {k: key for k, key in list(backend.access_keys.items()) if getattr(key, "role_arn", None)}
        for account, partitions in list(iam_backends.items())
        for partition, backend in list(partitions.items())
    }
    roles = {
        (account, region): list(backend.assumed_roles)
        for account, regions in list(sts_backends.items())
        for region, backend in list(regions.items())
    }
    return keys, roles


def _reissue_credentials(issued: _Issued) -> None:
    """Put back the keys and assumed roles `_issued_credentials` read that the restored state lacks."""
    from moto.iam.models import iam_backends
    from moto.sts.models import sts_backends

    keys, roles = issued
    for (account, partition), access_keys in keys.items():
        held = iam_backends[account][partition].access_keys
        for key_id, key in access_keys.items():
            held.setdefault(key_id, key)
    for (account, region), assumed in roles.items():
        backend = sts_backends[account][region]
        known = {role.access_key_id for role in backend.assumed_roles}
        backend.assumed_roles.extend(role for role in assumed if role.access_key_id not in known)


# --- node ids -----------------------------------------------------------------------------------------


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("/".join(parts).encode()).digest()


def _node_id_from_moto_name(account_id: str, region: str, cluster_name: str, moto_name: str) -> str:
    return "i-" + _digest(account_id, region, cluster_name, moto_name).hex()[:17]


def hyperpod_node_id(account_id: str, region: str, cluster_name: str, group: str, index: int) -> str:
    """The instance id the patched moto gives node `index` (0-based) of `group` in a cluster.

    Deterministic, so seeds and tests can name nodes without listing them first. `index` counts every
    node the group has had: CreateCluster makes 0..n-1, and each node added later (UpdateCluster scaling
    up, the new instance of a BatchReplaceClusterNodes) takes the next, so ids are never reused.
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


# --- progression --------------------------------------------------------------------------------------
#
# Gap (e): moto's HyperPod is static (a cluster is InService and every node Running from the moment it
# exists), while in AWS creating, scaling, rebooting, replacing and deleting take minutes and Pitcrew
# polls DescribeCluster / ListClusterNodes to report them. Each operation here changes the state at
# once to what AWS shows first (Updating, Pending, ShuttingDown, Deleting, TargetCount) and schedules
# "steps" on the cluster: each completes one transition `seconds` after the call (a replacement is two
# steps in a row). Nothing runs in the background: due steps run, in order, whenever the cluster is read
# (DescribeCluster, ListClusters, ListClusterNodes, DescribeClusterNode), before any HyperPod write, and
# in the state helpers below; advance_hyperpod runs all of a cluster's steps now. With seconds == 0 the
# steps run before the call returns. A step checks that what it finishes is still there (a node still
# Pending, a cluster still Updating, ...), so a status injected meanwhile (set_hyperpod_node_status) wins.


@dataclass(frozen=True)
class HyperPodProgress:
    """How long the emulated HyperPod's transitions take, in seconds (0: done before the call returns).

    seconds: UpdateCluster (cluster Updating -> InService, new nodes Pending -> Running, nodes scaled
        away ShuttingDown -> gone), BatchRebootClusterNodes (Pending -> Running), BatchReplaceClusterNodes
        (old node ShuttingDown -> gone and its replacement Pending, then -> Running: twice `seconds`) and
        BatchDeleteClusterNodes (ShuttingDown -> gone). Default 3 s: visible in the sandbox, short in tests.
    create_seconds: CreateCluster (Creating with Pending nodes -> InService with Running nodes). Default 0,
        moto's instant InService: sandbox/seed.py and the tests create clusters and expect them ready.
        The sandbox can raise it after seeding, so a launch from Slack shows Creating first.
    delete_seconds: DeleteCluster (Deleting, nodes ShuttingDown -> gone). Default 0, moto's instant delete:
        test fixtures delete their clusters on teardown and the next test lists the fleet.
    """

    seconds: float = 3.0
    create_seconds: float = 0.0
    delete_seconds: float = 0.0


_progress_settings = HyperPodProgress()
# The threaded server handles requests concurrently; every HyperPod change and step runs under this lock.
_state_lock = threading.RLock()
_step_numbers = itertools.count()
# Node statuses that BatchReboot/Replace/DeleteClusterNodes act on; others are mid-change or gone.
_ACTIONABLE_NODE_STATUSES = frozenset({"Running", "Failure"})
# The API docs: "If you need to delete more than 99 instances, contact Support" (the model allows 3000).
BATCH_DELETE_NODES_LIMIT = 99


@dataclass
class _Step:
    due: float  # time.monotonic()
    number: int  # steps due at the same time run in the order they were scheduled
    run: Callable[[Any, float], None]  # (cluster, due); may schedule follow-up steps counted from `due`


def _steps(cluster: Any) -> list[_Step]:
    steps: list[_Step] = cluster.__dict__.setdefault("_pitcrew_steps", [])
    return steps


def _schedule(cluster: Any, due: float, run: Callable[[Any, float], None]) -> None:
    _steps(cluster).append(_Step(due, next(_step_numbers), run))


def _run_steps(cluster: Any, until: float | None) -> int:
    """Run the cluster's steps due by `until` (every step, follow-ups included, if None); how many ran."""
    steps = _steps(cluster)
    ran = 0
    while ready := [step for step in steps if until is None or step.due <= until]:
        step = min(ready, key=lambda s: (s.due, s.number))
        steps.remove(step)
        step.run(cluster, step.due)
        ran += 1
    return ran


def _plain_name(cluster_name: Any) -> str:
    name = str(cluster_name or "")
    return name.split("/")[-1] if name.startswith("arn:") else name


def _settle(backend: Any, cluster_name: str | None = None) -> None:
    """Run the due steps of one cluster of the backend, or of all its clusters."""
    now = time.monotonic()
    if cluster_name is None:
        clusters = list(backend.clusters.values())
    else:
        clusters = [c for c in [backend.clusters.get(_plain_name(cluster_name))] if c is not None]
    for cluster in clusters:
        if _steps(cluster):
            _run_steps(cluster, now)


def _backdate(node: Any, due: float) -> None:
    # A node launched by a step that ran late (lazily) shows the launch time the step was due at.
    late = time.monotonic() - due
    if late > 0:
        node.launch_time -= timedelta(seconds=late)


def _group_of(cluster: Any, group_name: str) -> dict[str, Any] | None:
    return next((g for g in cluster.instance_groups if g["InstanceGroupName"] == group_name), None)


def _add_node(cluster: Any, group: dict[str, Any], due: float) -> Any:
    """A new Pending node in the group, named like hyperpod_node_id(..., group, n) for the group's n-th node."""
    from moto.sagemaker.models import ClusterNode

    name = group["InstanceGroupName"]
    created: dict[str, int] = cluster.__dict__.setdefault("_pitcrew_created", {})
    index = created.get(name, 0)
    created[name] = index + 1
    node = ClusterNode(
        region_name=cluster.region_name,
        account_id=cluster.account_id,
        cluster_name=cluster.cluster_name,
        instance_group_name=name,
        instance_type=group["InstanceType"],
        life_cycle_config=group["LifeCycleConfig"],
        execution_role=group["ExecutionRole"],
        node_id=f"{name}-{index}",
        threads_per_core=group.get("ThreadsPerCore"),
    )
    node.status = "Pending"
    _backdate(node, due)
    cluster.nodes[node.instance_id] = node
    return node


def _becomes(node_id: str, expected: str, status: str) -> Callable[[Any, float], None]:
    def run(cluster: Any, _due: float) -> None:
        node = cluster.nodes.get(node_id)
        if node is not None and node.status == expected:
            node.status = status
            node.status_message = ""

    return run


def _leaves(node_id: str) -> Callable[[Any, float], None]:
    def run(cluster: Any, _due: float) -> None:
        node = cluster.nodes.get(node_id)
        if node is not None and node.status == "ShuttingDown":
            del cluster.nodes[node_id]

    return run


def _replaced(node_id: str, seconds: float) -> Callable[[Any, float], None]:
    """The old instance is gone; a new one (new instance id) joins the group: Pending, then Running."""

    def run(cluster: Any, due: float) -> None:
        old = cluster.nodes.get(node_id)
        if old is None or old.status != "ShuttingDown":
            return
        del cluster.nodes[node_id]
        group = _group_of(cluster, old.instance_group_name)
        if group is not None and old.__dict__.get("_pitcrew_replacing"):  # not cancelled by a scale-down
            new = _add_node(cluster, group, due)
            _schedule(cluster, due + seconds, _becomes(new.instance_id, "Pending", "Running"))

    return run


def _shut_down(cluster: Any, node: Any, due: float, message: str, *, then: Callable[[Any, float], None]) -> None:
    node.status = "ShuttingDown"
    node.status_message = message
    _schedule(cluster, due, then)


def _node_health(nodes: list[Any]) -> str:
    return "Degraded" if any(node.status == "Failure" for node in nodes) else "InService"


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
        _patch_progression()  # after _patch_not_found: due steps run before the cluster is looked up
        _patch_create_cluster_request()
        _patch_update_cluster()
        _patch_batch_node_operations()
        _patch_ec2_status_checks()
        _patch_training_plans()
        _patch_capacity_reservations()
        _patch_tags_of_unknown_clusters()
        _patch_cluster_events()  # after _patch_clusters and _patch_create_cluster_request: it wraps theirs
        _patch_health_checks()
        _patch_service_lookup()
        _patched = True


def _patch_service_lookup() -> None:
    """Not a gap but a cost: moto's server lists its own package folder (a listdir, then a stat for each of ~200
    entries) on every request, to see whether the host names a service; under a sweep that was more CPU than
    answering the request. The folder does not change while the process runs, so it is listed once."""
    from moto import backends

    modules = tuple(backends.list_of_moto_modules())
    setattr(backends, "list_of_moto_modules", lambda: modules)  # noqa: B010 (mypy: assigning to a function)


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
    defaulting to a Slurm orchestrator and Automatic recovery. While an UpdateCluster of ours runs, only
    the groups it changes follow the cluster (Updating; Creating for a new group, Deleting for a group
    in InstanceGroupsToDelete); the others keep their own status, as in AWS.
    """
    from moto.sagemaker.models import Cluster

    original_init = Cluster.__init__

    @functools.wraps(original_init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self.nodes = _NodesByInstanceId()
        self.orchestrator = {"Slurm": {"SlurmConfigStrategy": "Managed"}}
        self.node_recovery = "Automatic"
        # How many nodes each group has had, so nodes added later get fresh ids (see _add_node).
        self._pitcrew_created = {g["InstanceGroupName"]: g["TargetCount"] for g in self.instance_groups}
        self._pitcrew_group_status = None  # group -> status while an UpdateCluster of ours runs
        self._pitcrew_steps = []

    def describe(self: Any) -> dict[str, Any]:
        all_nodes = list(self.nodes.values())  # one snapshot: steps may change the dict meanwhile
        updating = self.__dict__.get("_pitcrew_group_status") if self.status == "Updating" else None
        groups = []
        for group in list(self.instance_groups):
            nodes = [node for node in all_nodes if node.instance_group_name == group["InstanceGroupName"]]
            if updating is not None:
                status = updating.get(group["InstanceGroupName"]) or _node_health(nodes)
            elif self.status in _CLUSTER_TO_GROUP_STATUS:
                status = _CLUSTER_TO_GROUP_STATUS[self.status]
            else:
                status = _node_health(nodes)
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
    and DescribeClusterNode; Pitcrew maps it to "no such cluster". The same goes for a missing node in
    DescribeClusterNode (ResourceNotFound is its only modelled error), which matters once nodes come and
    go: a replaced node's old id is gone.
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

    describe_node = SageMakerModelBackend.describe_cluster_node

    @functools.wraps(describe_node)
    def describe_cluster_node(self: Any, cluster_name: str, node_id: str) -> dict[str, Any]:
        cluster = self.clusters.get(_plain_name(cluster_name))
        if cluster is not None and node_id not in cluster.nodes:
            raise ResourceNotFound(message=f"Node {node_id!r} not found in cluster {cluster.cluster_name!r}.")
        return dict(describe_node(self, cluster_name=cluster_name, node_id=node_id))

    SageMakerModelBackend.describe_cluster_node = describe_cluster_node  # type: ignore[method-assign]


def _patch_tags_of_unknown_clusters() -> None:
    """Gap (i): AddTags and ListTags of a cluster ARN moto does not know fail with an AttributeError (a 500); AWS
    answers ResourceNotFound. (`pitcrew doctor` asks both about a cluster that does not exist.)"""
    from moto.sagemaker.exceptions import ResourceNotFound
    from moto.sagemaker.models import SageMakerModelBackend

    def guard(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def wrapper(self: Any, arn: str, *args: Any, **kwargs: Any) -> Any:
            kind, _, name = arn.split(":")[-1].partition("/")
            if kind == "cluster" and name not in self.clusters:
                raise ResourceNotFound(message=f"Cluster {name!r} not found.")
            return method(self, arn, *args, **kwargs)

        return wrapper

    for name in ("add_tags", "list_tags"):
        setattr(SageMakerModelBackend, name, guard(getattr(SageMakerModelBackend, name)))


def _patch_progression() -> None:
    """Gap (e), reads and DeleteCluster: run due steps before a cluster is read (see "progression").

    Gap (f): DeleteCluster removes the cluster at once; AWS shows it Deleting first (ClusterStatus enum),
    and answers ConflictException (in the model's errors for DeleteCluster) while it is. With
    HyperPodProgress.delete_seconds > 0 the cluster goes Deleting, its nodes ShuttingDown, and it is
    gone that many seconds later; with 0 (the default) moto's instant delete stays.
    """
    from moto.sagemaker.exceptions import ConflictException, ResourceNotFound
    from moto.sagemaker.models import SageMakerModelBackend

    def settled(method: Callable[..., Any], *, one_cluster: bool) -> Callable[..., Any]:
        @functools.wraps(method)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            with _state_lock:
                if one_cluster:
                    _settle(self, _plain_name(kwargs.get("cluster_name", args[0] if args else "")))
                else:
                    _settle(self)
                return method(self, *args, **kwargs)

        return wrapper

    for name in ("describe_cluster", "describe_cluster_node", "list_cluster_nodes"):
        setattr(SageMakerModelBackend, name, settled(getattr(SageMakerModelBackend, name), one_cluster=True))
    SageMakerModelBackend.list_clusters = settled(  # type: ignore[method-assign]
        SageMakerModelBackend.list_clusters, one_cluster=False
    )

    instant_delete = SageMakerModelBackend.delete_cluster

    @functools.wraps(instant_delete)
    def delete_cluster(self: Any, cluster_name: str) -> str:
        with _state_lock:
            name = _plain_name(cluster_name)
            _settle(self, name)
            cluster = self.clusters.get(name)
            if cluster is None:
                raise ResourceNotFound(message=f"Cluster {name!r} not found.")
            if cluster.status == "Deleting":
                raise ConflictException(f"Cluster {name} is already being deleted.")
            seconds = _progress_settings.delete_seconds
            if seconds <= 0:
                return str(instant_delete(self, cluster_name=cluster_name))
            _steps(cluster).clear()  # nothing else finishes on a cluster that is going away
            cluster.status = "Deleting"
            cluster._pitcrew_group_status = None
            for node in list(cluster.nodes.values()):
                node.status = "ShuttingDown"
                node.status_message = ""
            _schedule(cluster, time.monotonic() + seconds, _cluster_gone)
            return str(cluster.arn)

    SageMakerModelBackend.delete_cluster = delete_cluster  # type: ignore[method-assign]


def _cluster_gone(cluster: Any, _due: float) -> None:
    from moto.sagemaker.models import sagemaker_backends

    if cluster.status != "Deleting":
        return
    clusters: dict[str, Any] = sagemaker_backends[cluster.account_id][cluster.region_name].clusters
    name: str = cluster.cluster_name
    if clusters.get(name) is cluster:
        del clusters[name]
    _steps(cluster).clear()


def _patch_create_cluster_request() -> None:
    """Gaps in CreateCluster's request handling (moto's SageMakerResponse.create_cluster).

    - Orchestrator and NodeRecovery are dropped: read them and keep them on the cluster.
    - A group without ThreadsPerCore raises KeyError *after* the cluster is registered, so the client's
      retry gets ResourceInUse and a half-built cluster stays; the field is optional in the API.
    - A group without InstanceType or LifeCycleConfig is a bare 500 (KeyError): answer with a
      ValidationException that says what moto needs instead.
    - Gap (e): the cluster is InService at once. With HyperPodProgress.create_seconds > 0 it starts
      Creating with every node Pending, and is InService with Running nodes that many seconds later.
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
        with _state_lock:  # nobody sees the cluster InService before it goes Creating
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
            seconds = _progress_settings.create_seconds
            if seconds > 0:
                due = time.monotonic() + seconds
                cluster.status = "Creating"
                for node in list(cluster.nodes.values()):
                    node.status = "Pending"
                    _schedule(cluster, due, _becomes(node.instance_id, "Pending", "Running"))
                _schedule(cluster, due, _cluster_becomes("Creating", "InService"))
        return ActionResult({"ClusterArn": arn})

    setattr(SageMakerResponse, "create_cluster", create_cluster)  # noqa: B010


def _cluster_becomes(expected: str, status: str) -> Callable[[Any, float], None]:
    def run(cluster: Any, _due: float) -> None:
        if cluster.status == expected:
            cluster.status = status

    return run


# --- request validation, as AWS words it, against the installed botocore model -------------------------


@functools.cache
def _sagemaker_shape_metadata(shape: str) -> dict[str, Any]:
    model = botocore.session.get_session().get_service_model("sagemaker")
    return dict(model.shape_for(shape).metadata)


@functools.cache
def _sagemaker_member_max(operation: str, member: str) -> int:
    model = botocore.session.get_session().get_service_model("sagemaker")
    return int(model.operation_model(operation).input_shape.members[member].metadata["max"])


def _invalid(where: str, value: Any, constraint: str) -> Exception:
    from moto.sagemaker.exceptions import ValidationError

    shown = "null" if value is None else f"'{value}'"
    return ValidationError(
        message=f"1 validation error detected: Value {shown} at '{where}' failed to satisfy constraint: {constraint}"
    )


def _require(value: Any, where: str) -> None:
    if value is None:
        raise _invalid(where, None, "Member must not be null")


def _check_pattern(value: Any, shape: str, where: str) -> None:
    metadata = _sagemaker_shape_metadata(shape)
    if not isinstance(value, str):
        raise _invalid(where, value, "Member must be a string")
    if len(value) > metadata.get("max", len(value)) or len(value) < metadata.get("min", 0):
        raise _invalid(where, value, f"Member must have length between {metadata.get('min', 0)} and {metadata['max']}")
    if "pattern" in metadata and not re.fullmatch(metadata["pattern"], value):
        raise _invalid(where, value, f"Member must satisfy regular expression pattern: {metadata['pattern']}")


def _check_range(value: Any, shape: str, where: str) -> None:
    metadata = _sagemaker_shape_metadata(shape)
    low, high = metadata.get("min", -math.inf), metadata.get("max", math.inf)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _invalid(where, value, f"Member must be an integer between {low} and {high}")


# --- UpdateCluster --------------------------------------------------------------------------------------


def _patch_update_cluster() -> None:
    """Gap (g): moto has no UpdateCluster (a 500 in server mode, NotImplementedError in-process).

    Shaped by botocore's UpdateCluster: InstanceGroups[ClusterInstanceGroupSpecification] (required per
    group: InstanceCount, InstanceGroupName, ExecutionRole), InstanceGroupsToDelete, NodeRecovery,
    Orchestrator; the answer is {ClusterArn}; errors ResourceNotFound, ConflictException (the cluster
    is not InService) and ValidationException (a missing or malformed field, named as AWS names it).
    A listed group takes the new spec and InstanceCount becomes its TargetCount at once; a new name adds
    a group (moto needs its InstanceType and LifeCycleConfig, as for CreateCluster); groups not listed
    are left alone. The cluster goes Updating; nodes to add are new Pending nodes with fresh ids, nodes
    to remove are picked by "SageMaker" (Failure first, then Pending, then the newest) and go
    ShuttingDown; one step later (HyperPodProgress.seconds) they are Running or gone, deleted groups are
    gone and the cluster is InService. There is no ClientToken in this operation's model.
    """
    from moto.core.responses import ActionResult
    from moto.sagemaker.responses import SageMakerResponse

    def update_cluster(self: Any) -> ActionResult:
        arn = _update_cluster(
            self.sagemaker_backend,
            cluster_name=self._get_param("ClusterName"),
            specs=self._get_param("InstanceGroups") or [],
            groups_to_delete=self._get_param("InstanceGroupsToDelete") or [],
            node_recovery=self._get_param("NodeRecovery"),
            orchestrator=self._get_param("Orchestrator"),
        )
        return ActionResult({"ClusterArn": arn})

    setattr(SageMakerResponse, "update_cluster", update_cluster)  # noqa: B010


def _update_cluster(
    backend: Any,
    *,
    cluster_name: Any,
    specs: list[dict[str, Any]],
    groups_to_delete: list[str],
    node_recovery: str | None,
    orchestrator: dict[str, Any] | None,
) -> str:
    from moto.sagemaker.exceptions import ConflictException, ResourceNotFound, ValidationError

    _require(cluster_name, "ClusterName")
    for position, spec in enumerate(specs, 1):
        where = f"InstanceGroups.{position}.member"
        for required in ("InstanceCount", "InstanceGroupName", "ExecutionRole"):
            _require(spec.get(required), f"{where}.{required}")
        _check_range(spec["InstanceCount"], "ClusterInstanceCount", f"{where}.InstanceCount")
        _check_pattern(spec["InstanceGroupName"], "ClusterInstanceGroupName", f"{where}.InstanceGroupName")
        _check_pattern(spec["ExecutionRole"], "RoleArn", f"{where}.ExecutionRole")
    names = [spec["InstanceGroupName"] for spec in specs]
    if repeated := sorted({name for name in names if names.count(name) > 1}):
        raise ValidationError(message=f"Instance group names must be unique in InstanceGroups: {', '.join(repeated)}.")
    if both := sorted(set(names) & set(groups_to_delete)):
        raise ValidationError(
            message=f"Instance groups cannot be both updated and deleted in one request: {', '.join(both)}."
        )

    with _state_lock:
        name = _plain_name(cluster_name)
        _settle(backend, name)
        cluster = backend.clusters.get(name)
        if cluster is None:
            raise ResourceNotFound(message=f"Cluster {name!r} not found.")
        if cluster.status != "InService":
            raise ConflictException(f"Cluster {name} is {cluster.status}; it can be updated only when it is InService.")
        existing = {group["InstanceGroupName"]: group for group in cluster.instance_groups}
        if unknown := [group for group in groups_to_delete if group not in existing]:
            raise ValidationError(
                message=f"InstanceGroupsToDelete: no instance group {', '.join(unknown)} in cluster {name}."
            )
        for spec in specs:  # everything is checked before anything changes
            group = existing.get(spec["InstanceGroupName"])
            if group is None:
                for required in ("InstanceType", "LifeCycleConfig"):
                    if required not in spec:
                        raise ValidationError(
                            message=f"New instance group {spec['InstanceGroupName']!r}: the sandbox (moto) needs "
                            f"{required}."
                        )
                cluster.valid_cluster_node_instance_types(spec["InstanceType"])
                source = str(spec["LifeCycleConfig"].get("SourceS3Uri", ""))
                if not source.startswith("s3://sagemaker-"):
                    raise ValidationError(
                        message=f"Validation Error: SourceS3Uri {source} does not start with 's3://sagemaker'."
                    )
            elif spec.get("InstanceType", group["InstanceType"]) != group["InstanceType"]:
                raise ValidationError(
                    message=f"The InstanceType of instance group {spec['InstanceGroupName']!r} cannot be changed "
                    f"(it is {group['InstanceType']})."
                )

        seconds = _progress_settings.seconds
        due = time.monotonic() + seconds
        changing: dict[str, str] = {}
        for spec in specs:
            fields = {key: value for key, value in spec.items() if key != "InstanceCount"}
            group = existing.get(spec["InstanceGroupName"])
            if group is None:
                group = {"ThreadsPerCore": None, **fields}
                cluster.instance_groups.append(group)
                changing[group["InstanceGroupName"]] = "Creating"
            else:
                group.update(fields)
                changing[group["InstanceGroupName"]] = "Updating"
            group["TargetCount"] = spec["InstanceCount"]
            _resize(cluster, group, due)
        for group_name in groups_to_delete:
            existing[group_name]["TargetCount"] = 0
            changing[group_name] = "Deleting"
            _resize(cluster, existing[group_name], due)
        if node_recovery:
            cluster.node_recovery = node_recovery
        if orchestrator:
            cluster.orchestrator = orchestrator
        cluster.status = "Updating"
        cluster._pitcrew_group_status = changing
        _schedule(cluster, due, _update_done(frozenset(groups_to_delete)))
        _run_steps(cluster, time.monotonic())  # seconds == 0: all done before the answer
        return str(cluster.arn)


def _scale_down_order(node: Any) -> tuple[int, float, str]:
    # Which nodes "SageMaker" removes first: broken ones, then ones not yet joined, then the newest.
    return ({"Failure": 0, "Pending": 1}.get(node.status, 2), -node.launch_time.timestamp(), node.instance_id)


def _resize(cluster: Any, group: dict[str, Any], due: float) -> None:
    """Add or remove nodes so the group will have TargetCount nodes once the due steps have run."""
    name = group["InstanceGroupName"]
    nodes = [node for node in list(cluster.nodes.values()) if node.instance_group_name == name]
    # A node being replaced still counts: its replacement takes its place.
    staying = [node for node in nodes if node.status != "ShuttingDown" or node.__dict__.get("_pitcrew_replacing")]
    missing = group["TargetCount"] - len(staying)
    for _ in range(missing):
        node = _add_node(cluster, group, time.monotonic())
        _schedule(cluster, due, _becomes(node.instance_id, "Pending", "Running"))
    if missing < 0:
        removable = sorted((node for node in staying if node.status != "ShuttingDown"), key=_scale_down_order)
        removable += [node for node in staying if node.status == "ShuttingDown"]  # being replaced: last resort
        for node in removable[:-missing]:
            if node.status == "ShuttingDown":
                node._pitcrew_replacing = False  # its replacement step removes it and brings no successor
                node.status_message = "Scaling down (UpdateCluster)"
            else:
                _shut_down(cluster, node, due, "Scaling down (UpdateCluster)", then=_leaves(node.instance_id))


def _update_done(deleted_groups: frozenset[str]) -> Callable[[Any, float], None]:
    def run(cluster: Any, _due: float) -> None:
        if deleted_groups:
            cluster.instance_groups[:] = [
                group for group in cluster.instance_groups if group["InstanceGroupName"] not in deleted_groups
            ]
            # Whatever is left of them (say, the successor of a node whose replacement was under way) goes too.
            for node in list(cluster.nodes.values()):
                if node.instance_group_name in deleted_groups:
                    del cluster.nodes[node.instance_id]
        cluster._pitcrew_group_status = None
        if cluster.status == "Updating":
            cluster.status = "InService"

    return run


# --- Batch{Reboot,Replace,Delete}ClusterNodes -----------------------------------------------------------


def _patch_batch_node_operations() -> None:
    """Gap (h): moto has no BatchRebootClusterNodes, BatchReplaceClusterNodes or BatchDeleteClusterNodes.

    Shaped by botocore: ClusterName and NodeIds in; Successful (node ids) and Failed out, partial failure
    in the body of an HTTP 200. Reboot and replace take at most 25 ids (the model's max) and fail a node
    with {NodeId, ErrorCode: InstanceIdNotFound | InvalidInstanceStatus, Message}; delete takes at most 99
    (the API docs; the model says 3000) and fails one with {Code: NodeIdNotFound | InvalidNodeStatus,
    Message, NodeId}: note `Code`, not `ErrorCode`. Only Running and Failure nodes can be acted on; a
    node that is Pending (joining, rebooting) or ShuttingDown (being replaced or removed) is refused.
    More ids than allowed, an id that is not an instance id, or NodeLogicalIds (only for clusters in
    Continuous provisioning mode, which moto has not) are a ValidationException; a repeated id counts
    once. None of the three has a ClientToken in the model.
    - Reboot: the node is Pending ("Rebooting"), then Running again, same id.
    - Replace: the node is ShuttingDown; a step later it is gone and a new instance with a new id is
      Pending in its group; a step after that it is Running. TargetCount does not change.
    - Delete: the group's TargetCount drops by one at once; the node is ShuttingDown, then gone.
    """
    from moto.core.responses import ActionResult
    from moto.sagemaker.responses import SageMakerResponse

    def node_operation(
        operation: str, act: Callable[[Any, Any, float, float], None], *, error_field: str, codes: tuple[str, str]
    ) -> Callable[[Any], ActionResult]:
        limit = BATCH_DELETE_NODES_LIMIT if operation == "BatchDeleteClusterNodes" else None

        def handler(self: Any) -> ActionResult:
            node_ids = _requested_node_ids(self, operation, limit)
            with _state_lock:
                cluster = _settled_cluster(self.sagemaker_backend, self._get_param("ClusterName"))
                seconds = _progress_settings.seconds
                due = time.monotonic() + seconds
                successful: list[str] = []
                failed: list[dict[str, str]] = []
                for node_id in node_ids:
                    node = cluster.nodes.get(node_id)
                    if node is None:
                        message = f"Node {node_id} was not found in cluster {cluster.cluster_name}."
                        failed.append({"NodeId": node_id, error_field: codes[0], "Message": message})
                    elif node.status not in _ACTIONABLE_NODE_STATUSES:
                        message = (
                            f"Node {node_id} is {node.status}; wait for its ongoing changes to finish before retrying."
                        )
                        failed.append({"NodeId": node_id, error_field: codes[1], "Message": message})
                    else:
                        act(cluster, node, due, seconds)
                        successful.append(node_id)
                _run_steps(cluster, time.monotonic())  # seconds == 0: all done before the answer
            return ActionResult({"Successful": successful, "Failed": failed})

        return handler

    reboot_codes = ("InstanceIdNotFound", "InvalidInstanceStatus")
    handlers = {
        "batch_reboot_cluster_nodes": node_operation(
            "BatchRebootClusterNodes", _reboot, error_field="ErrorCode", codes=reboot_codes
        ),
        "batch_replace_cluster_nodes": node_operation(
            "BatchReplaceClusterNodes", _replace, error_field="ErrorCode", codes=reboot_codes
        ),
        "batch_delete_cluster_nodes": node_operation(
            "BatchDeleteClusterNodes", _delete, error_field="Code", codes=("NodeIdNotFound", "InvalidNodeStatus")
        ),
    }
    for name, handler in handlers.items():
        setattr(SageMakerResponse, name, handler)


def _requested_node_ids(response: Any, operation: str, limit: int | None) -> list[str]:
    from moto.sagemaker.exceptions import ValidationError

    _require(response._get_param("ClusterName"), "ClusterName")
    node_ids = response._get_param("NodeIds") or []
    if response._get_param("NodeLogicalIds"):
        raise ValidationError(
            message="NodeLogicalIds are supported only for clusters whose NodeProvisioningMode is Continuous; "
            "use NodeIds."
        )
    if not node_ids:
        raise ValidationError(message="Either NodeIds or NodeLogicalIds must be provided.")
    limit = limit or _sagemaker_member_max(operation, "NodeIds")
    if len(node_ids) > limit:
        raise _invalid("NodeIds", f"[{len(node_ids)} ids]", f"Member must have length less than or equal to {limit}")
    for position, node_id in enumerate(node_ids, 1):
        _check_pattern(node_id, "ClusterNodeId", f"NodeIds.{position}.member")
    return list(dict.fromkeys(node_ids))


def _settled_cluster(backend: Any, cluster_name: Any) -> Any:
    from moto.sagemaker.exceptions import ResourceNotFound

    name = _plain_name(cluster_name)
    _settle(backend, name)
    cluster = backend.clusters.get(name)
    if cluster is None:
        raise ResourceNotFound(message=f"Cluster {name!r} not found.")
    return cluster


def _reboot(cluster: Any, node: Any, due: float, _seconds: float) -> None:
    node.status = "Pending"
    node.status_message = "Rebooting (BatchRebootClusterNodes)"
    _schedule(cluster, due, _becomes(node.instance_id, "Pending", "Running"))


def _replace(cluster: Any, node: Any, due: float, seconds: float) -> None:
    node._pitcrew_replacing = True
    _shut_down(
        cluster, node, due, "Being replaced (BatchReplaceClusterNodes)", then=_replaced(node.instance_id, seconds)
    )


def _delete(cluster: Any, node: Any, due: float, _seconds: float) -> None:
    group = _group_of(cluster, node.instance_group_name)
    if group is not None:
        group["TargetCount"] = max(0, group["TargetCount"] - 1)
    _shut_down(cluster, node, due, "Deleting (BatchDeleteClusterNodes)", then=_leaves(node.instance_id))


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


def _cluster(account_id: str, region: str, cluster_name: str, *, settle: bool = True) -> Any:
    from moto.sagemaker.models import sagemaker_backends

    backend = sagemaker_backends[account_id][region]
    with _state_lock:
        if settle:
            _settle(backend, cluster_name)
        if cluster_name not in backend.clusters:
            raise LookupError(f"no HyperPod cluster {cluster_name!r} in {account_id}/{region} of this process's moto")
        return backend.clusters[cluster_name]


def get_hyperpod_progress() -> HyperPodProgress:
    """How long HyperPod transitions take now (process-wide)."""
    return _progress_settings


def set_hyperpod_progress(
    seconds: float, *, create_seconds: float | None = None, delete_seconds: float | None = None
) -> HyperPodProgress:
    """Set how long each HyperPod transition takes, process-wide, and return the settings it replaces.

    seconds: UpdateCluster and Batch{Reboot,Replace,Delete}ClusterNodes; create_seconds / delete_seconds:
    CreateCluster / DeleteCluster (None: unchanged). 0 completes the work before the call returns. Work
    already under way keeps the times it was given. See HyperPodProgress.
    """
    global _progress_settings
    for value in (seconds, create_seconds, delete_seconds):
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise ValueError(f"progress times are seconds >= 0, not {value!r}")
    previous = _progress_settings
    _progress_settings = HyperPodProgress(
        seconds=float(seconds),
        create_seconds=previous.create_seconds if create_seconds is None else float(create_seconds),
        delete_seconds=previous.delete_seconds if delete_seconds is None else float(delete_seconds),
    )
    return previous


@contextmanager
def hyperpod_progress(
    seconds: float, *, create_seconds: float | None = None, delete_seconds: float | None = None
) -> Iterator[HyperPodProgress]:
    """set_hyperpod_progress for a block (a test, say), then the settings from before."""
    global _progress_settings
    previous = set_hyperpod_progress(seconds, create_seconds=create_seconds, delete_seconds=delete_seconds)
    try:
        yield _progress_settings
    finally:
        _progress_settings = previous


def advance_hyperpod(account_id: str, region: str, cluster_name: str) -> int:
    """Complete every transition under way in a cluster now, follow-ups included; how many ran.

    A replaced node's successor is Running, scaled nodes are Running or gone, the cluster is InService
    (or gone, if it was Deleting). LookupError if the cluster is not there (any more).
    """
    with _state_lock:
        return _run_steps(_cluster(account_id, region, cluster_name, settle=False), None)


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


# --- reserved capacity: SageMaker training plans and EC2 capacity reservations ------------------------------
#
# Gap (h): moto 5.2.5 has no training plans at all (ListTrainingPlans, DescribeTrainingPlan, ...: a 500) and no
# EC2 capacity reservations (DescribeCapacityReservations, CreateCapacityReservation, Capacity Blocks: a 500).
# Pitcrew only reads them, so the sandbox holds them as plain data on moto's per-account-and-region backends
# (so moto's reset forgets them and snapshot_moto keeps them), added by `add_training_plan` and
# `add_capacity_reservation` (what buying a plan or a block would leave behind), and answers the two reads
# shaped by botocore's service model: SageMaker TrainingPlanSummary / DescribeTrainingPlanResponse and EC2
# CapacityReservation (ReservationType "default" for an On-Demand Capacity Reservation, "capacity-block" for a
# Capacity Block for ML). A status that follows the clock (Scheduled/Active/Expired, scheduled/active/expired) is
# worked out at each read from the start and end, unless one was set.

_TRAINING_PLANS = "_pitcrew_training_plans"
_CAPACITY_RESERVATIONS = "_pitcrew_capacity_reservations"
_capacity_ids = itertools.count(1)


def _plan_status(plan: dict[str, Any], now: datetime) -> str:
    if plan.get("_status"):
        return str(plan["_status"])
    if now < plan["StartTime"]:
        return "Scheduled"
    return "Active" if now < plan["EndTime"] else "Expired"


def _reservation_state(reservation: dict[str, Any], now: datetime) -> str:
    if reservation.get("_state"):
        return str(reservation["_state"])
    start = reservation.get("StartDate")
    end = reservation.get("EndDate")
    if start is not None and now < start:
        return "scheduled"
    return "expired" if end is not None and now >= end else "active"


def _public(item: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in item.items() if not key.startswith("_")}


def _training_plan_answer(plan: dict[str, Any], now: datetime, *, detailed: bool) -> dict[str, Any]:
    answer = {**_public(plan), "Status": _plan_status(plan, now)}
    seconds = (plan["EndTime"] - plan["StartTime"]).total_seconds()
    answer["DurationHours"], answer["DurationMinutes"] = int(seconds // 3600), int(seconds % 3600 // 60)
    for summary in answer.get("ReservedCapacitySummaries", []):
        summary["Status"] = answer["Status"]
    if not detailed:  # TrainingPlanSummary has no UnhealthyInstanceCount / AvailableSpareInstanceCount
        answer.pop("UnhealthyInstanceCount", None)
    return answer


def _patch_training_plans() -> None:
    """Gap (h), SageMaker: ListTrainingPlans (Filters [{Name: Status, Value}], StartTimeAfter/Before, SortBy
    TrainingPlanName|StartTime|Status, SortOrder, NextToken/MaxResults 1-100) and DescribeTrainingPlan
    (TrainingPlanName; ResourceNotFound when there is none); also ClusterSummary.TrainingPlanArns in
    ListClusters, from the instance groups' TrainingPlanArn (CreateCluster and UpdateCluster keep that field
    of each group, and DescribeCluster echoes it)."""
    from moto.core.responses import ActionResult
    from moto.sagemaker.exceptions import ResourceNotFound, ValidationError
    from moto.sagemaker.models import Cluster
    from moto.sagemaker.responses import SageMakerResponse

    def list_training_plans(self: Any) -> ActionResult:
        now = datetime.now(UTC)
        plans = list(self.sagemaker_backend.__dict__.get(_TRAINING_PLANS, {}).values())
        for condition in self._get_param("Filters") or []:
            if condition.get("Name") != "Status":
                raise _invalid(
                    "Filters.member.Name", condition.get("Name"), "Member must satisfy enum value set: [Status]"
                )
            plans = [plan for plan in plans if _plan_status(plan, now) == condition.get("Value")]
        after, before = self._get_param("StartTimeAfter"), self._get_param("StartTimeBefore")
        if after is not None:
            plans = [plan for plan in plans if plan["StartTime"].timestamp() > float(after)]
        if before is not None:
            plans = [plan for plan in plans if plan["StartTime"].timestamp() < float(before)]
        sort_by = self._get_param("SortBy") or "StartTime"
        keys: dict[str, Callable[[dict[str, Any]], Any]] = {
            "TrainingPlanName": lambda plan: plan["TrainingPlanName"],
            "StartTime": lambda plan: plan["StartTime"],
            "Status": lambda plan: _plan_status(plan, now),
        }
        if sort_by not in keys:
            raise _invalid("SortBy", sort_by, f"Member must satisfy enum value set: [{', '.join(keys)}]")
        plans.sort(key=keys[sort_by], reverse=(self._get_param("SortOrder") or "Ascending") == "Descending")
        size = self._get_param("MaxResults") or 100
        if not 1 <= int(size) <= 100:
            raise _invalid("MaxResults", size, "Member must have value between 1 and 100")
        token = self._get_param("NextToken")
        start = int(token) if token and str(token).isdigit() else 0
        if token and not str(token).isdigit():
            raise ValidationError(message="Invalid pagination token.")
        page = plans[start : start + int(size)]
        answer: dict[str, Any] = {
            "TrainingPlanSummaries": [_training_plan_answer(plan, now, detailed=False) for plan in page]
        }
        if start + int(size) < len(plans):
            answer["NextToken"] = str(start + int(size))
        return ActionResult(answer)

    def describe_training_plan(self: Any) -> ActionResult:
        name = self._get_param("TrainingPlanName")
        _require(name, "TrainingPlanName")
        plan = self.sagemaker_backend.__dict__.get(_TRAINING_PLANS, {}).get(name)
        if plan is None:
            raise ResourceNotFound(message=f"Training plan {name!r} not found.")
        return ActionResult(_training_plan_answer(plan, datetime.now(UTC), detailed=True))

    setattr(SageMakerResponse, "list_training_plans", list_training_plans)  # noqa: B010
    setattr(SageMakerResponse, "describe_training_plan", describe_training_plan)  # noqa: B010

    original_summary = Cluster.summary

    @functools.wraps(original_summary)
    def summary(self: Any) -> dict[str, Any]:
        arns = sorted({g["TrainingPlanArn"] for g in self.instance_groups if g.get("TrainingPlanArn")})
        return {**original_summary(self), **({"TrainingPlanArns": arns} if arns else {})}

    setattr(Cluster, "summary", summary)  # noqa: B010


def _patch_capacity_reservations() -> None:
    """Gap (h), EC2: DescribeCapacityReservations (CapacityReservationIds, Filters instance-type, state,
    availability-zone, reservation-type... as EC2 names them, NextToken/MaxResults), answering botocore's
    CapacityReservation shape; an unknown id is InvalidCapacityReservationId.NotFound, as in EC2."""
    from moto.core.responses import ActionResult
    from moto.ec2.exceptions import EC2ClientError
    from moto.ec2.responses import EC2Response

    filters: dict[str, Callable[[dict[str, Any], datetime], str]] = {
        "instance-type": lambda r, _now: str(r["InstanceType"]),
        "availability-zone": lambda r, _now: str(r["AvailabilityZone"]),
        "state": lambda r, now: _reservation_state(r, now),
        "reservation-type": lambda r, _now: str(r["ReservationType"]),
        "owner-id": lambda r, _now: str(r["OwnerId"]),
        "instance-platform": lambda r, _now: str(r["InstancePlatform"]),
        "tenancy": lambda r, _now: str(r["Tenancy"]),
        "end-date-type": lambda r, _now: str(r["EndDateType"]),
        "instance-match-criteria": lambda r, _now: str(r["InstanceMatchCriteria"]),
    }

    def describe_capacity_reservations(self: Any) -> ActionResult:
        now = datetime.now(UTC)
        held = self.ec2_backend.__dict__.get(_CAPACITY_RESERVATIONS, {})
        wanted = self._get_param("CapacityReservationIds", []) or []
        if missing := [rid for rid in wanted if rid not in held]:
            raise EC2ClientError(
                "InvalidCapacityReservationId.NotFound",
                f"The capacity reservation ID '{missing[0]}' does not exist",
            )
        reservations = [held[rid] for rid in wanted] if wanted else list(held.values())
        for name, values in self._filters_from_querystring().items():
            if name not in filters:
                raise EC2ClientError("InvalidParameterValue", f"The filter '{name}' is invalid")
            reservations = [r for r in reservations if filters[name](r, now) in values]
        size = int(self._get_param("MaxResults") or 1000)
        token = self._get_param("NextToken")
        start = int(token) if token and str(token).isdigit() else 0
        page = reservations[start : start + size]
        answer: dict[str, Any] = {
            "CapacityReservations": [{**_public(r), "State": _reservation_state(r, now)} for r in page]
        }
        if start + size < len(reservations):
            answer["NextToken"] = str(start + size)
        return ActionResult(answer)

    setattr(EC2Response, "describe_capacity_reservations", describe_capacity_reservations)  # noqa: B010


def add_training_plan(
    account_id: str,
    region: str,
    *,
    name: str,
    instance_type: str,
    count: int,
    start: datetime,
    end: datetime,
    in_use: int = 0,
    availability_zone: str | None = None,
    status: str | None = None,
    target_resources: tuple[str, ...] = ("hyperpod-cluster",),
) -> str:
    """A training plan in moto's SageMaker of that account and region (as CreateTrainingPlan from an offering
    would leave it); its ARN, for an instance group's TrainingPlanArn. `status`: fixed (e.g. "Failed"), else
    from the clock."""
    from moto.sagemaker.models import sagemaker_backends

    if status is not None and status not in _sagemaker_enum("TrainingPlanStatus"):
        raise ValueError(f"{status!r} is not a TrainingPlanStatus")
    ml_type = instance_type if instance_type.startswith("ml.") else f"ml.{instance_type}"
    arn = f"arn:aws:sagemaker:{region}:{account_id}:training-plan/{name}"
    zone = availability_zone or f"{region}a"
    plan = {
        "TrainingPlanArn": arn,
        "TrainingPlanName": name,
        "StartTime": start.astimezone(UTC),
        "EndTime": end.astimezone(UTC),
        "UpfrontFee": "0",
        "CurrencyCode": "USD",
        "TotalInstanceCount": count,
        "AvailableInstanceCount": max(0, count - in_use),
        "InUseInstanceCount": in_use,
        "UnhealthyInstanceCount": 0,
        "TargetResources": list(target_resources),
        "ReservedCapacitySummaries": [
            {
                "ReservedCapacityArn": f"arn:aws:sagemaker:{region}:{account_id}:reserved-capacity/{name}-1",
                "InstanceType": ml_type,
                "TotalInstanceCount": count,
                "AvailabilityZone": zone,
                "StartTime": start.astimezone(UTC),
                "EndTime": end.astimezone(UTC),
                "Status": "Scheduled",
            }
        ],
        "_status": status,
    }
    backend = sagemaker_backends[account_id][region]
    with _state_lock:
        backend.__dict__.setdefault(_TRAINING_PLANS, {})[name] = plan
    return arn


def add_capacity_reservation(
    account_id: str,
    region: str,
    *,
    instance_type: str,
    count: int,
    availability_zone: str,
    start: datetime | None,
    end: datetime | None,
    capacity_block: bool = True,
    available: int | None = None,
    state: str | None = None,
    tags: dict[str, str] | None = None,
) -> str:
    """An EC2 capacity reservation in moto's EC2 of that account and region: a Capacity Block for ML
    (ReservationType capacity-block, a fixed end) or an On-Demand Capacity Reservation (default; no end when
    `end` is None). Its id (cr-...)."""
    from moto.ec2.models import ec2_backends

    if state is not None and state not in _ec2_enum("CapacityReservationState"):
        raise ValueError(f"{state!r} is not a CapacityReservationState")
    number = next(_capacity_ids)
    rid = "cr-" + hashlib.sha256(f"{account_id}/{region}/{number}".encode()).hexdigest()[:17]
    now = datetime.now(UTC)
    reservation: dict[str, Any] = {
        "CapacityReservationId": rid,
        "OwnerId": account_id,
        "CapacityReservationArn": f"arn:aws:ec2:{region}:{account_id}:capacity-reservation/{rid}",
        "AvailabilityZone": availability_zone,
        "InstanceType": instance_type.removeprefix("ml."),
        "InstancePlatform": "Linux/UNIX",
        "Tenancy": "default",
        "TotalInstanceCount": count,
        "AvailableInstanceCount": count if available is None else available,
        "EbsOptimized": True,
        "EphemeralStorage": False,
        "EndDateType": "limited" if end is not None else "unlimited",
        "InstanceMatchCriteria": "targeted" if capacity_block else "open",
        "CreateDate": now,
        "Tags": [{"Key": k, "Value": v} for k, v in (tags or {}).items()],
        "ReservationType": "capacity-block" if capacity_block else "default",
        "_state": state,
    }
    if start is not None:
        reservation["StartDate"] = start.astimezone(UTC)
    if end is not None:
        reservation["EndDate"] = end.astimezone(UTC)
    if capacity_block:
        reservation["CapacityBlockId"] = "cb-" + rid.removeprefix("cr-")
    backend = ec2_backends[account_id][region]
    with _state_lock:
        backend.__dict__.setdefault(_CAPACITY_RESERVATIONS, {})[rid] = reservation
    return rid


@functools.cache
def _ec2_enum(shape: str) -> frozenset[str]:
    model = botocore.session.get_session().get_service_model("ec2")
    return frozenset(model.shape_for(shape).enum)


def use_training_plan(account_id: str, region: str, cluster_name: str, group_name: str, plan_arn: str | None) -> None:
    """Let a HyperPod cluster's instance group draw on a training plan (its TrainingPlanArn, as CreateCluster or
    UpdateCluster would set it), or on none (None)."""
    cluster = _cluster(account_id, region, cluster_name)
    with _state_lock:
        group = _group_of(cluster, group_name)
        if group is None:
            raise LookupError(f"no instance group {group_name!r} in {cluster_name}")
        if plan_arn is None:
            group.pop("TrainingPlanArn", None)
        else:
            group["TrainingPlanArn"] = plan_arn


def remove_reserved_capacity(account_id: str, region: str) -> None:
    """Forget the training plans and capacity reservations added to that account and region."""
    from moto.ec2.models import ec2_backends
    from moto.sagemaker.models import sagemaker_backends

    with _state_lock:
        sagemaker_backends[account_id][region].__dict__.pop(_TRAINING_PLANS, None)
        ec2_backends[account_id][region].__dict__.pop(_CAPACITY_RESERVATIONS, None)


# --- HyperPod's own diagnosis: cluster events and deep health checks ---------------------------------------
#
# Gap (i): moto 5.2.5 drops CreateCluster's NodeProvisioningMode and has none of ListClusterEvents,
# DescribeClusterEvent (both only for clusters whose NodeProvisioningMode is Continuous) or
# StartClusterHealthCheck (a 500 each). The events are plain data on the moto cluster, added by
# `add_hyperpod_cluster_event` (what AWS would record of a provisioning or scaling attempt) and answered shaped by
# botocore's ClusterEventSummary / ClusterEventDetail (EventDetails.EventMetadata.{InstanceGroup|InstanceGroupScaling|
# Instance|Cluster}.FailureMessage). A deep health check puts the named nodes in DeepHealthCheckInProgress and,
# one progression step later (HyperPodProgress.seconds), Running again, or in Failure for a node given a failure
# by `set_deep_health_check_result`.

_EVENTS = "_pitcrew_events"
_CHECK_FAILURES = "_pitcrew_check_failures"
_event_numbers = itertools.count(1)
_METADATA_KEYS = {"Cluster": "Cluster", "InstanceGroup": "InstanceGroupScaling", "Instance": "Instance"}


def _continuous(cluster: Any) -> bool:
    return cluster.__dict__.get("node_provisioning_mode") == "Continuous"


def _event_summary(event: dict[str, Any]) -> dict[str, Any]:
    summary_shape = botocore.session.get_session().get_service_model("sagemaker").shape_for("ClusterEventSummary")
    return {key: value for key, value in event.items() if key in summary_shape.members}


def _epoch(value: Any) -> float:
    return value.timestamp() if isinstance(value, datetime) else float(value)


def _patch_cluster_events() -> None:
    """Gap (i): NodeProvisioningMode kept (CreateCluster) and shown (DescribeCluster); ListClusterEvents
    (InstanceGroupName, NodeId, EventTimeAfter/Before, ResourceType, SortOrder, MaxResults 1-100, NextToken) and
    DescribeClusterEvent (ResourceNotFound for an unknown id); a cluster not in Continuous mode is refused as a
    ValidationException (the model's docs: only supported when NodeProvisioningMode is Continuous)."""
    from moto.core.responses import ActionResult
    from moto.sagemaker.exceptions import ResourceNotFound, ValidationError
    from moto.sagemaker.models import Cluster
    from moto.sagemaker.responses import SageMakerResponse

    create = SageMakerResponse.create_cluster
    describe = Cluster.describe

    @functools.wraps(create)
    def create_cluster(self: Any) -> Any:
        answer = create(self)
        mode = self._get_param("NodeProvisioningMode")
        if mode is not None:
            allowed = _sagemaker_enum("ClusterNodeProvisioningMode")
            if mode not in allowed:
                raise _invalid("NodeProvisioningMode", mode, f"Member must satisfy enum value set: {sorted(allowed)}")
            with _state_lock:
                self.sagemaker_backend.clusters[self._get_param("ClusterName")].node_provisioning_mode = mode
        return answer

    @functools.wraps(describe)
    def described(self: Any) -> dict[str, Any]:
        answer = dict(describe(self))
        if self.__dict__.get("node_provisioning_mode"):
            answer["NodeProvisioningMode"] = self.node_provisioning_mode
        return answer

    def events_of(self: Any) -> tuple[Any, list[dict[str, Any]]]:
        _require(self._get_param("ClusterName"), "ClusterName")
        with _state_lock:
            cluster = _settled_cluster(self.sagemaker_backend, self._get_param("ClusterName"))
            if not _continuous(cluster):
                raise ValidationError(
                    message=f"Cluster events are available only for clusters whose NodeProvisioningMode is "
                    f"Continuous; {cluster.cluster_name} is not."
                )
            return cluster, list(cluster.__dict__.get(_EVENTS, []))

    def list_cluster_events(self: Any) -> ActionResult:
        _cluster, events = events_of(self)
        filters = {
            "InstanceGroupName": "InstanceGroupName",
            "NodeId": "InstanceId",
            "ResourceType": "ResourceType",
        }
        for param, key in filters.items():
            if (wanted := self._get_param(param)) is not None:
                events = [event for event in events if event.get(key) == wanted]
        after, before = self._get_param("EventTimeAfter"), self._get_param("EventTimeBefore")
        if after is not None:  # moto parses timestamps to datetimes; an epoch number where it does not
            events = [event for event in events if event["EventTime"].timestamp() > _epoch(after)]
        if before is not None:
            events = [event for event in events if event["EventTime"].timestamp() < _epoch(before)]
        order = self._get_param("SortOrder") or "Descending"
        events.sort(key=lambda event: event["EventTime"], reverse=order == "Descending")
        size = int(self._get_param("MaxResults") or 100)
        if not 1 <= size <= 100:
            raise _invalid("MaxResults", size, "Member must have value between 1 and 100")
        token = self._get_param("NextToken")
        if token and not str(token).isdigit():
            raise ValidationError(message="Invalid pagination token.")
        start = int(token) if token else 0
        answer: dict[str, Any] = {"Events": [_event_summary(event) for event in events[start : start + size]]}
        if start + size < len(events):
            answer["NextToken"] = str(start + size)
        return ActionResult(answer)

    def describe_cluster_event(self: Any) -> ActionResult:
        _require(self._get_param("EventId"), "EventId")
        _cluster, events = events_of(self)
        event = next((event for event in events if event["EventId"] == self._get_param("EventId")), None)
        if event is None:
            raise ResourceNotFound(message=f"Event {self._get_param('EventId')!r} not found.")
        return ActionResult({"EventDetails": event})

    setattr(SageMakerResponse, "create_cluster", create_cluster)  # noqa: B010
    setattr(Cluster, "describe", described)  # noqa: B010
    setattr(SageMakerResponse, "list_cluster_events", list_cluster_events)  # noqa: B010
    setattr(SageMakerResponse, "describe_cluster_event", describe_cluster_event)  # noqa: B010


def _patch_health_checks() -> None:
    """Gap (i): StartClusterHealthCheck. DeepHealthCheckConfigurations[{InstanceGroupName, InstanceIds (<= 500; all
    of the group's nodes when left out), DeepHealthChecks (InstanceStress | InstanceConnectivity |
    MultiNodeTrainingValidation)}] (<= 99); answers {ClusterArn}. An unknown group or instance, or a node that is not
    Running or in Failure, is a ValidationException and nothing starts."""
    from moto.core.responses import ActionResult
    from moto.sagemaker.exceptions import ValidationError
    from moto.sagemaker.responses import SageMakerResponse

    def start_cluster_health_check(self: Any) -> ActionResult:
        _require(self._get_param("ClusterName"), "ClusterName")
        configurations = self._get_param("DeepHealthCheckConfigurations")
        _require(configurations, "DeepHealthCheckConfigurations")
        limit = _sagemaker_member_max("StartClusterHealthCheck", "DeepHealthCheckConfigurations")
        if not 1 <= len(configurations) <= limit:
            raise _invalid("DeepHealthCheckConfigurations", f"[{len(configurations)}]", f"length 1 to {limit}")
        allowed = _sagemaker_enum("DeepHealthCheckType")
        with _state_lock:
            cluster = _settled_cluster(self.sagemaker_backend, self._get_param("ClusterName"))
            chosen: list[tuple[Any, tuple[str, ...]]] = []
            for position, configuration in enumerate(configurations, 1):
                group = configuration.get("InstanceGroupName")
                if _group_of(cluster, str(group)) is None:
                    raise ValidationError(message=f"Instance group {group!r} not found in {cluster.cluster_name}.")
                checks = tuple(configuration.get("DeepHealthChecks") or ())
                if not checks or any(check not in allowed for check in checks):
                    where = f"DeepHealthCheckConfigurations.{position}.member.DeepHealthChecks"
                    raise _invalid(where, list(checks), f"Member must satisfy enum value set: {sorted(allowed)}")
                ids = configuration.get("InstanceIds")
                nodes = [n for n in cluster.nodes.values() if n.instance_group_name == group]
                if ids is not None:
                    nodes = [cluster.nodes[i] for i in ids if i in cluster.nodes]
                    if len(nodes) != len(ids) or any(n.instance_group_name != group for n in nodes):
                        raise ValidationError(message=f"Some of {ids} are not instances of group {group!r}.")
                for node in nodes:
                    if node.status not in _ACTIONABLE_NODE_STATUSES:
                        raise ValidationError(
                            message=f"Instance {node.instance_id} is {node.status}; a deep health check needs it "
                            "Running or in Failure."
                        )
                chosen += [(node, checks) for node in nodes]
            due = time.monotonic() + _progress_settings.seconds
            for node, checks in chosen:
                node.status = "DeepHealthCheckInProgress"
                node.status_message = f"Deep health check: {', '.join(checks)}"
                _schedule(cluster, due, _checked(node.instance_id))
            _run_steps(cluster, time.monotonic())
        return ActionResult({"ClusterArn": cluster.arn})

    setattr(SageMakerResponse, "start_cluster_health_check", start_cluster_health_check)  # noqa: B010


def _checked(node_id: str) -> Callable[[Any, float], None]:
    def run(cluster: Any, _due: float) -> None:
        node = cluster.nodes.get(node_id)
        if node is None or node.status != "DeepHealthCheckInProgress":
            return  # gone, or a status injected meanwhile wins
        failure = cluster.__dict__.get(_CHECK_FAILURES, {}).pop(node_id, None)
        node.status, node.status_message = (
            ("Failure", f"Deep health check failed: {failure}")
            if failure
            else (
                "Running",
                "",
            )
        )

    return run


def add_hyperpod_cluster_event(
    account_id: str,
    region: str,
    cluster_name: str,
    *,
    description: str,
    level: str = "Error",
    resource_type: str = "InstanceGroup",
    instance_group: str | None = None,
    instance_id: str | None = None,
    failure_message: str | None = None,
    at: datetime | None = None,
) -> str:
    """Record an event of a Continuous-provisioning cluster, as ListClusterEvents will show it; its EventId."""
    cluster = _cluster(account_id, region, cluster_name)
    if not _continuous(cluster):
        raise ValueError(f"{cluster_name} is not in Continuous provisioning mode: AWS records no events for it")
    if level not in _sagemaker_enum("ClusterEventLevel") or resource_type not in _sagemaker_enum(
        "ClusterEventResourceType"
    ):
        raise ValueError(f"not an event level / resource type: {level!r}, {resource_type!r}")
    event_id = f"{next(_event_numbers):08d}-{hashlib.sha256(cluster.arn.encode()).hexdigest()[:12]}"
    event: dict[str, Any] = {
        "EventId": event_id,
        "ClusterArn": cluster.arn,
        "ClusterName": cluster.cluster_name,
        "ResourceType": resource_type,
        "EventTime": at or datetime.now(UTC),
        "Description": description,
        "EventLevel": level,
    }
    if instance_group:
        event["InstanceGroupName"] = instance_group
    if instance_id:
        event["InstanceId"] = instance_id
    if failure_message:
        event["EventDetails"] = {"EventMetadata": {_METADATA_KEYS[resource_type]: {"FailureMessage": failure_message}}}
    with _state_lock:
        cluster.__dict__.setdefault(_EVENTS, []).append(event)
    return event_id


def set_deep_health_check_result(
    account_id: str, region: str, cluster_name: str, node_id: str, failure: str | None
) -> None:
    """What the next deep health check of a node finds: `failure` (it ends in Failure with that message), or
    None (it passes)."""
    cluster = _cluster(account_id, region, cluster_name)
    with _state_lock:
        failures = cluster.__dict__.setdefault(_CHECK_FAILURES, {})
        if failure is None:
            failures.pop(node_id, None)
        else:
            failures[node_id] = failure
