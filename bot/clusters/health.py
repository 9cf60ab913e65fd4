"""One health rule and one colour rule for a cluster, whichever view shows it. Pure.

`/cluster list`, `status` and `nodes`, the progress of a change, the Home and the tracking document all say a
cluster's health through `cluster_health` (from a live `Cluster`) or `seen_health` (from the counts stored when
it was last seen), so the same cluster reads the same everywhere:

- red (`FAILING`): the cluster failed, or a node is unhealthy (DESIGN.md, Node health);
- stopped (`STOPPED`): its ParallelCluster compute fleet is stopped: nothing runs on it, by choice, until it is
  started again (no green "1/1 healthy" for a head node alone);
- yellow (`CHANGING`): anything under way or not known: a cluster being created, updated or deleted, a compute
  fleet stopping or starting, nodes in a transitional state, nodes not listed, or no nodes at all;
- green (`HEALTHY`): ready, with every node healthy.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from bot.clusters.model import Backend, Cluster, Phase, cluster_phase

# ParallelCluster's compute fleet words, as people read them (DescribeCluster's computeFleetStatus).
_FLEET_WORDS = {
    "STOP_REQUESTED": "stopping",
    "STOPPING": "stopping",
    "STOPPED": "stopped",
    "START_REQUESTED": "starting",
    "STARTING": "starting",
    "PROTECTED": "protected (launches keep failing)",
}


class Look(StrEnum):
    """The colour a cluster is shown in."""

    HEALTHY = "healthy"
    CHANGING = "changing"
    FAILING = "failing"
    STOPPED = "stopped"


@dataclass(frozen=True)
class ClusterHealth:
    look: Look
    total: int
    healthy: int
    unhealthy: int
    known: bool = True  # False: the nodes could not be listed
    fleet: str = ""  # the compute fleet's state in words ("stopped", "starting", ...); "" when running or none

    @property
    def transitional(self) -> int:
        return max(0, self.total - self.healthy - self.unhealthy)

    def counts(self, *, strong: bool = False) -> str:
        """The node counts in words, "158/165 nodes healthy, 4 unhealthy, 3 in transition" (`strong`: the
        unhealthy count in bold, mrkdwn)."""
        if not self.known:
            return "nodes unknown"
        text = f"{self.healthy:,}/{self.total:,} nodes healthy"
        if self.unhealthy:
            bad = f"{self.unhealthy:,} unhealthy"
            text += f", *{bad}*" if strong else f", {bad}"
        if self.transitional:
            text += f", {self.transitional:,} in transition"
        return text

    def summary(self, *, strong: bool = False) -> str:
        """The compute fleet's state when it is not running, then the node counts:
        "compute fleet stopped · 1/1 nodes healthy"."""
        counts = self.counts(strong=strong)
        return f"compute fleet {self.fleet} · {counts}" if self.fleet else counts


def judge(
    *, phase: Phase, fleet_status: str, total: int, healthy: int, unhealthy: int, known: bool = True
) -> ClusterHealth:
    """The rule itself, from what any view knows of a cluster: its phase, its compute fleet's word, its node
    counts by health."""
    fleet = _FLEET_WORDS.get(fleet_status, "")
    if phase is Phase.FAILED or unhealthy:
        look = Look.FAILING
    elif fleet == "stopped":
        look = Look.STOPPED
    elif fleet or phase is not Phase.READY or not known or not total or healthy < total:
        look = Look.CHANGING
    else:
        look = Look.HEALTHY
    return ClusterHealth(look, total, healthy, unhealthy, known, fleet)


def cluster_health(cluster: Cluster) -> ClusterHealth:
    """A cluster as AWS shows it now."""
    return judge(
        phase=cluster.phase,
        fleet_status=cluster.extra.get("compute_fleet", "") if cluster.backend is Backend.PCLUSTER else "",
        total=len(cluster.nodes),
        healthy=cluster.healthy,
        unhealthy=len(cluster.unhealthy),
        known=cluster.nodes_known,
    )


def seen_health(
    *, backend: str, status: str, compute_fleet: str, total: int, healthy: int, unhealthy: int
) -> ClusterHealth:
    """A cluster as Pitcrew stored it when it last saw it (storage's ClusterSeen: the Home, the tracking document)."""
    try:
        phase = cluster_phase(Backend(backend), status)
    except ValueError:  # a backend this version does not know: its words mean nothing here
        phase = Phase.OTHER
    return judge(phase=phase, fleet_status=compute_fleet, total=total, healthy=healthy, unhealthy=unhealthy)
