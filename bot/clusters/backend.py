"""What every cluster backend does: read clusters, plan and run changes, and say which changes it can make.

Implemented by HyperPod (bot.clusters.hyperpod), the ParallelCluster API and ParallelCluster seen through EC2
(bot.clusters.parallelcluster; read only). Synchronous: bot.clusters.fleet runs them in worker threads
(boto3 is sync). A change a backend cannot make raises `Unsupported`, whose message is the one refusal
people see.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from bot.clusters.model import Backend, Cluster
from bot.clusters.requests import LaunchRequest, NodeFailure


class GroupNotFound(Exception):
    """A group (HyperPod instance group, ParallelCluster queue or queue/resource) the cluster does not have;
    str() is a sentence naming it and the groups that exist."""


class Unsupported(Exception):
    """A change this backend cannot make; str() says why and what to do instead."""


@dataclass(frozen=True)
class Capabilities:
    changes: bool  # create, resize, delete
    node_actions: bool  # reboot and replace single nodes
    fleet: bool  # stop and start a compute fleet
    dry_run_resize: bool = False  # plan_resize asks AWS (a dry run) rather than reading the listed cluster
    why_not: str = ""  # why `changes` is False: the refusal a person sees
    why_no_node_actions: str = ""  # why `node_actions` is False, after "`org/cluster` "


@dataclass(frozen=True)
class NodeBatchResult:
    successful: tuple[str, ...]
    failed: tuple[NodeFailure, ...]
    request_ids: tuple[str, ...]  # ResponseMetadata.RequestId of each call (for the audit log)


@dataclass(frozen=True)
class ResizePlan:
    """What setting a group to `count` nodes would change, before anything is asked of AWS to do it."""

    before: int  # the group's node count (its target where the backend says one)
    instance_type: str
    change_set: tuple[str, ...] = ()  # one line per parameter the backend's dry run would change
    objection: Exception | None = None  # the backend's dry run refused it (bot.clusters.fleet.describe_error)
    reasons: tuple[str, ...] = ()  # the refused changes, one line each
    needs_fleet_stop: bool = False  # stopping the compute fleet would let it through


class ClusterBackend(Protocol):
    """One org's clusters on one backend."""

    backend: Backend
    capabilities: Capabilities

    def list_clusters(self) -> list[Cluster]:
        """Every cluster with its groups and nodes."""
        ...

    def get_cluster(self, name: str) -> Cluster:
        """One cluster with its groups and nodes; raise ClusterNotFound when it does not exist."""
        ...

    def launch(self, request: LaunchRequest) -> str:
        """Create the cluster; AWS's request id or ARN where it gives one, else ""."""
        ...

    def plan_resize(self, cluster: Cluster, *, group: str, count: int) -> ResizePlan:
        """What resizing would change; raise GroupNotFound for a group the cluster does not have."""
        ...

    def resize(self, *, name: str, group: str, count: int) -> str:
        """Set a group's node count; AWS's request id or ""."""
        ...

    def reboot_nodes(self, *, name: str, node_ids: Sequence[str]) -> NodeBatchResult: ...

    def replace_nodes(self, *, name: str, node_ids: Sequence[str]) -> NodeBatchResult: ...

    def delete(self, *, name: str) -> str:
        """Delete the cluster; AWS's request id or ""."""
        ...

    def stop_fleet(self, *, name: str) -> None: ...

    def start_fleet(self, *, name: str) -> None: ...
