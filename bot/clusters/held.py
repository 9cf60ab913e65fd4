"""What an org holds: the one "held" figure that plans, the Home, `/track`, `/cluster list`, the quota notices and
the digest all count (DESIGN.md, Quota: the nodes an org's clusters hold or are bound to hold). Pure.

A cluster holds each node that has an instance (a failed node still occupies one), not one shutting down or
terminated. A stopped node of a fleet that runs is still held: the cluster still counts it, and ParallelCluster
brings a static node back (the contract calls it unhealthy, not gone). A group on its way to a target (a cluster
being created, a scale under way, a fleet starting) holds the larger of its nodes and that target: otherwise two
requests could each fit in quota and together exceed it. A stopped or stopping ParallelCluster compute fleet holds
only what still runs: its counts come back when the fleet is started, not before. Nor does a cluster being
deleted or failed hold more than what still runs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import replace

from bot.clusters.model import Cluster, FleetPhase, Node, Phase
from bot.config import OrgConfig, is_accelerator_type, normalize_instance_type

# Node words (EC2 state, HyperPod instance status) of an instance that holds no capacity.
_NOT_HELD = frozenset({"shutting-down", "terminated", "ShuttingDown"})
_PAUSED = frozenset({"stopping", "stopped"})  # held while its fleet runs: the cluster still counts the node
# A cluster in these holds no more than its nodes: its targets are not coming.
_NO_TARGETS = frozenset({Phase.DELETING, Phase.DELETED, Phase.FAILED})
_FLEET_DOWN = frozenset({FleetPhase.STOPPING, FleetPhase.STOPPED})


def holds(node: Node, *, fleet_down: bool = False) -> bool:
    """Whether the node occupies an instance (a stopped one: unless its whole fleet was stopped)."""
    if node.leaving or node.status in _NOT_HELD:
        return False
    return not (fleet_down and node.status in _PAUSED)


def cluster_held(cluster: Cluster) -> Counter[str]:
    """What one cluster holds, by instance type as the cluster names it (HyperPod's keep their `ml.`)."""
    # Nodes and targets meet per group and type; `ml.p5` and `p5` are one type whichever of them AWS says.
    named: dict[str, str] = {}
    counted: Counter[tuple[str, str]] = Counter()
    fleet_down = cluster.fleet in _FLEET_DOWN
    for node in cluster.nodes:
        if holds(node, fleet_down=fleet_down):
            counted[(node.group, _key(node.instance_type, named))] += 1
    if cluster.phase not in _NO_TARGETS and cluster.fleet not in _FLEET_DOWN:
        for group in cluster.groups:
            if group.target is not None:
                key = (group.name, _key(group.instance_type, named))
                counted[key] = max(counted[key], group.target)
    held: Counter[str] = Counter()
    for (_, instance_type), count in counted.items():
        if count:
            held[named[instance_type]] += count
    return held


def _key(instance_type: str, named: dict[str, str]) -> str:
    key = normalize_instance_type(instance_type)
    named.setdefault(key, instance_type)
    return key


def held_instances(clusters: Iterable[Cluster]) -> Counter[str]:
    """What clusters hold together, by instance type without the `ml.` prefix: one quota counts both backends."""
    held: Counter[str] = Counter()
    for cluster in clusters:
        for instance_type, count in cluster_held(cluster).items():
            held[normalize_instance_type(instance_type)] += count
    return held


def back_on_start(cluster: Cluster) -> Counter[str]:
    """What starting a stopped compute fleet would add to what the cluster holds, by type as it names them: the
    request a Start compute fleet checks against quota (nothing for a fleet that runs)."""
    if cluster.fleet not in _FLEET_DOWN:
        return Counter()
    started = replace(cluster, extra={**cluster.extra, "compute_fleet": "RUNNING"})
    return cluster_held(started) - cluster_held(cluster)


def quota_gaps(org: OrgConfig, held: Mapping[str, int]) -> dict[str, int]:
    """Accelerator types an org's clusters hold that its quota does not list (their quota is 0), with the count
    held: `pitcrew check-config` warns of them."""
    gaps: Counter[str] = Counter()
    for instance_type, count in held.items():
        if count > 0 and is_accelerator_type(instance_type) and not org.quota_lists(instance_type):
            gaps[normalize_instance_type(instance_type)] += count
    return dict(sorted(gaps.items()))
