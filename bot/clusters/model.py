"""What the bot knows about a cluster, the same for both backends, and how node health is judged.

Pure: the backends translate AWS answers into these types; replies and monitors read only these.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Protocol


class Backend(StrEnum):
    HYPERPOD = "hyperpod"
    PCLUSTER = "pcluster"

    @property
    def label(self) -> str:
        return "HyperPod" if self is Backend.HYPERPOD else "ParallelCluster"


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


class ClusterBackend(Protocol):
    """One org's clusters on one backend. Synchronous: callers run it in worker threads (boto3 is sync)."""

    backend: Backend

    def list_clusters(self) -> list[Cluster]:
        """Every cluster with its groups and nodes."""
        ...

    def get_cluster(self, name: str) -> Cluster:
        """One cluster with its groups and nodes; raise ClusterNotFound when it does not exist."""
        ...
