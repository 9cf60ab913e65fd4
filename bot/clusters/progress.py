"""When a running cluster change is done, failed, or still going, judged from what AWS shows. Pure.

The watcher in bot.operations polls the cluster and asks `judge` after each poll; the `Watch` carries what
earlier polls saw (a reboot is only done once its nodes were seen going down and coming back).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from bot.clusters.model import Cluster, Health

MISSING_POLLS = 10  # a cluster not seen after this many polls is reported as lost
QUIET_REBOOT_POLLS = 10  # nodes Running all along after this many polls: the reboot was too quick to see
SETTLED = frozenset({"InService", "CREATE_COMPLETE", "UPDATE_COMPLETE"})
STOPPED_FLEET = frozenset({"STOP_REQUESTED", "STOPPING", "STOPPED"})
BROKEN = frozenset({"Failed", "RollingBack", "CREATE_FAILED", "UPDATE_FAILED", "DELETE_FAILED"})


class Kind(StrEnum):
    LAUNCH = "launch"
    SCALE = "scale"
    REBOOT = "reboot"
    REPLACE = "replace"
    DELETE = "delete"
    STOP_FLEET = "stop_fleet"

    @property
    def noun(self) -> str:
        return {Kind.STOP_FLEET: "compute fleet stop"}.get(self, self.value)


class State(StrEnum):
    GOING = "going"
    DONE = "done"
    FAILED = "failed"


@dataclass
class Watch:
    polls: int = 0
    missing: int = 0
    seen_away: set[str] = field(default_factory=set)  # rebooting nodes seen not Running at least once


@dataclass(frozen=True)
class Verdict:
    state: State
    reason: str = ""  # why it failed, or what finishing means ("the cluster is gone")


def judge(kind: Kind, request: dict[str, Any], cluster: Cluster | None, watch: Watch) -> Verdict:
    watch.polls += 1
    if cluster is None:
        if kind is Kind.DELETE:
            return Verdict(State.DONE, "the cluster is gone")
        watch.missing += 1
        if watch.missing >= MISSING_POLLS:
            return Verdict(State.FAILED, "the cluster disappeared")
        return Verdict(State.GOING)
    watch.missing = 0
    if cluster.status in BROKEN or (kind is Kind.LAUNCH and cluster.status.startswith("DELETE")):
        return Verdict(State.FAILED, cluster.failure_message or cluster.status)
    if kind is Kind.LAUNCH:
        return Verdict(State.DONE if cluster.status in ("InService", "CREATE_COMPLETE") else State.GOING)
    if kind is Kind.DELETE:
        return Verdict(State.DONE if cluster.status == "DELETE_COMPLETE" else State.GOING, "the cluster is gone")
    if kind is Kind.STOP_FLEET:
        if cluster.extra.get("compute_fleet") != "STOPPED":
            return Verdict(State.GOING)
        then = request.get("then")
        return Verdict(State.DONE, f"the compute fleet is stopped; now run `{then}` again" if then else "")
    if kind is Kind.SCALE:
        return _scaled(request, cluster)
    return _nodes_back(kind, request, cluster, watch)


def _scaled(request: dict[str, Any], cluster: Cluster) -> Verdict:
    queue = str(request["group"]).split("/")[0]
    group = next(
        (
            g
            for g in cluster.groups
            if g.name == queue and g.instance_type == request.get("instance_type", g.instance_type)
        ),
        None,
    )
    if group is None or cluster.status not in SETTLED:
        return Verdict(State.GOING)
    if cluster.extra.get("compute_fleet") in STOPPED_FLEET:
        return Verdict(State.DONE, "the compute fleet is stopped: the nodes come up when it is started")
    if group.target is None:
        settled = group.current == request["count"]
    elif "/" in str(request["group"]):  # one compute resource of a queue that has several: the queue's sum moves
        settled = group.current == group.target
    else:  # the target must be the one asked for: an unchanged group (before AWS took the change) is not done
        settled = group.current == group.target == request["count"]
    return Verdict(State.DONE if settled else State.GOING)


def _nodes_back(kind: Kind, request: dict[str, Any], cluster: Cluster, watch: Watch) -> Verdict:
    acted_on = [str(node_id) for node_id in request.get("successful", [])]
    nodes = {node.node_id: node for node in cluster.nodes}
    groups = set(request.get("groups", []))
    before = set(request.get("before_ids", []))
    fresh = [node for node in cluster.nodes if node.group in groups and node.node_id not in before]
    broken = [node for node in fresh if node.health is Health.UNHEALTHY]
    if broken:
        node = broken[0]
        return Verdict(State.FAILED, f"new node {node.node_id} is {node.status}: {node.message or 'no message'}")
    if kind is Kind.REBOOT:
        for node_id in acted_on:
            if node_id not in nodes or nodes[node_id].status != "Running":
                watch.seen_away.add(node_id)
        back = all(node_id in nodes and nodes[node_id].status == "Running" for node_id in acted_on)
        seen = watch.seen_away.issuperset(acted_on) or watch.polls >= QUIET_REBOOT_POLLS
        return Verdict(State.DONE if back and seen else State.GOING)
    # Replaced: the old instances are gone and as many new ones run in their groups. Other nodes of the group
    # are not waited for: one that was failing before has nothing to do with this replacement.
    gone = not any(node_id in nodes for node_id in acted_on)
    running = sum(1 for node in fresh if node.status == "Running")
    return Verdict(State.DONE if gone and running >= len(acted_on) else State.GOING)
