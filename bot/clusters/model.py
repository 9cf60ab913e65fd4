"""What the bot knows about a cluster, the same for both backends, and how node health is judged.

Pure: the backends translate AWS answers into these types; replies and monitors read only these.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum


class Backend(StrEnum):
    HYPERPOD = "hyperpod"
    PCLUSTER = "pcluster"

    @property
    def label(self) -> str:
        return "HyperPod" if self is Backend.HYPERPOD else "ParallelCluster"


ORG_TAG = "pitcrew:org"  # the tag saying which org a cluster (and its instances) belongs to


class Phase(StrEnum):
    """Where a cluster is in its life, the same for both backends (each backend's words mapped below, once)."""

    CREATING = "creating"
    UPDATING = "updating"
    READY = "ready"
    DELETING = "deleting"
    DELETED = "deleted"
    FAILED = "failed"
    OTHER = "other"  # a word no table knows, or ParallelCluster seen through EC2 with its head node not running


class FleetPhase(StrEnum):
    """A ParallelCluster compute fleet; NONE where there is none to speak of (HyperPod, no API)."""

    NONE = "none"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"


# HyperPod ClusterStatus and ParallelCluster clusterStatus ("RUNNING" is the EC2 backend's own word: the head
# node runs). A ParallelCluster word ending in _FAILED is FAILED whatever comes before it.
_PHASES = {
    Backend.HYPERPOD: {
        "Creating": Phase.CREATING,
        "Updating": Phase.UPDATING,
        "SystemUpdating": Phase.UPDATING,
        "InService": Phase.READY,
        "Deleting": Phase.DELETING,
        "Failed": Phase.FAILED,
        "RollingBack": Phase.FAILED,
    },
    Backend.PCLUSTER: {
        "CREATE_IN_PROGRESS": Phase.CREATING,
        "UPDATE_IN_PROGRESS": Phase.UPDATING,
        "CREATE_COMPLETE": Phase.READY,
        "UPDATE_COMPLETE": Phase.READY,
        "RUNNING": Phase.READY,
        "DELETE_IN_PROGRESS": Phase.DELETING,
        "DELETE_COMPLETE": Phase.DELETED,
    },
}
_FLEET_PHASES = {
    "START_REQUESTED": FleetPhase.RUNNING,
    "STARTING": FleetPhase.RUNNING,
    "RUNNING": FleetPhase.RUNNING,
    "PROTECTED": FleetPhase.RUNNING,
    "STOP_REQUESTED": FleetPhase.STOPPING,
    "STOPPING": FleetPhase.STOPPING,
    "STOPPED": FleetPhase.STOPPED,
}
# Node words (EC2 state, HyperPod instance status) for an instance on its way out or gone.
_LEAVING = frozenset({"shutting-down", "terminated", "ShuttingDown"})


def cluster_phase(backend: Backend, status: str) -> Phase:
    if backend is Backend.PCLUSTER and status.endswith("_FAILED"):
        return Phase.FAILED
    return _PHASES[backend].get(status, Phase.OTHER)


class Health(StrEnum):
    HEALTHY = "healthy"
    UNHEALTHY = "unhealthy"
    TRANSITIONAL = "transitional"  # pending, rebooting, health checks: shown as such, never as failed


# HyperPod ClusterInstanceStatus (botocore 1.44.8): Failure and NotFound are the unhealthy ones.
_HYPERPOD_UNHEALTHY = frozenset({"Failure", "NotFound"})


def hyperpod_node_health(status: str) -> Health:
    if status == "Running":
        return Health.HEALTHY
    if status in _HYPERPOD_UNHEALTHY:
        return Health.UNHEALTHY
    return Health.TRANSITIONAL


def pcluster_node_health(*, state: str, node_type: str, impaired: bool) -> Health:
    """EC2 state plus status checks. Stopped or terminated compute nodes still counted are failures."""
    if impaired:
        return Health.UNHEALTHY
    if state == "running":
        return Health.HEALTHY
    if state in ("stopped", "terminated") and node_type == "ComputeNode":
        return Health.UNHEALTHY
    return Health.TRANSITIONAL  # pending, stopping, shutting-down; a head node stopped on purpose


@dataclass(frozen=True)
class Node:
    node_id: str
    group: str  # HyperPod instance group, or ParallelCluster queue ("HeadNode"/"LoginNode" for those)
    instance_type: str
    status: str  # as AWS says it: Running, Failure, running, impaired, ...
    health: Health
    launch_time: datetime | None = None
    message: str = ""

    @property
    def leaving(self) -> bool:
        """Shutting down or terminated (EC2 lists a terminated instance for a while)."""
        return self.status in _LEAVING


@dataclass(frozen=True)
class InstanceGroup:
    name: str
    instance_type: str
    current: int
    target: int | None  # None where the backend does not say (ParallelCluster without its API)
    status: str = ""


@dataclass(frozen=True)
class Cluster:
    org: str
    name: str
    backend: Backend
    status: str
    groups: tuple[InstanceGroup, ...] = ()
    created: datetime | None = None
    failure_message: str = ""
    nodes: tuple[Node, ...] = ()
    nodes_known: bool = True  # False when node listing failed; counts are then unknown
    note: str = ""  # e.g. "seen through EC2 tags: no ParallelCluster API configured"
    extra: dict[str, str] = field(default_factory=dict)  # backend facts worth a line (fleet status, ...)

    @property
    def ref(self) -> str:
        return f"{self.org}/{self.name}"

    @property
    def phase(self) -> Phase:
        return cluster_phase(self.backend, self.status)

    @property
    def fleet(self) -> FleetPhase:
        return _FLEET_PHASES.get(self.extra.get("compute_fleet", ""), FleetPhase.NONE)

    @property
    def healthy(self) -> int:
        return sum(1 for node in self.nodes if node.health is Health.HEALTHY)

    @property
    def unhealthy(self) -> list[Node]:
        return [node for node in self.nodes if node.health is Health.UNHEALTHY]

    def counts_by_group_and_status(self) -> Counter[tuple[str, str]]:
        return Counter((node.group, node.status) for node in self.nodes)

    def instances_by_type(self) -> Counter[str]:
        return Counter(node.instance_type for node in self.nodes)


class ClusterNotFound(Exception):
    pass
