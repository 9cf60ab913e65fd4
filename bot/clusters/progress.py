"""When a running cluster change is done, failed, or still going, judged from what AWS shows. Pure.

The watcher in bot.operations polls the cluster and asks `judge` after each poll; the `Watch` carries what
earlier polls saw (a reboot is only done once its nodes were seen going down and coming back).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum

from bot.clusters.model import Cluster, FleetPhase, Health, Phase
from bot.clusters.requests import (  # Kind re-exported: callers import it from here
    ChangeRequest,
    CheckRequest,
    Kind,
    NodeRequest,
    ScaleRequest,
    StartFleetRequest,
    StopFleetRequest,
)

CHECKING = "DeepHealthCheckInProgress"  # a HyperPod node's status while a deep health check runs on it
MISSING_POLLS = 10  # a cluster not seen after this many polls is reported as lost
QUIET_REBOOT_POLLS = 10  # nodes Running all along after this many polls: the reboot was too quick to see


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


def judge(kind: Kind, request: ChangeRequest, cluster: Cluster | None, watch: Watch) -> Verdict:
    watch.polls += 1
    if cluster is None:
        if kind is Kind.DELETE:
            return Verdict(State.DONE, "the cluster is gone")
        watch.missing += 1
        if watch.missing >= MISSING_POLLS:
            return Verdict(State.FAILED, "the cluster disappeared")
        return Verdict(State.GOING)
    watch.missing = 0
    phase = cluster.phase
    if phase is Phase.FAILED or (kind is Kind.LAUNCH and phase in (Phase.DELETING, Phase.DELETED)):
        return Verdict(State.FAILED, cluster.failure_message or cluster.status)
    if kind is Kind.LAUNCH:
        return Verdict(State.DONE if phase is Phase.READY else State.GOING)
    if kind is Kind.DELETE:
        return Verdict(State.DONE if phase is Phase.DELETED else State.GOING, "the cluster is gone")
    if isinstance(request, StopFleetRequest):
        if cluster.fleet is not FleetPhase.STOPPED:
            return Verdict(State.GOING)
        then = request.then
        return Verdict(State.DONE, f"the compute fleet is stopped; now run `{then}` again" if then else "")
    if isinstance(request, StartFleetRequest):
        return _started(cluster)
    if isinstance(request, ScaleRequest):
        return _scaled(request, cluster)
    if isinstance(request, CheckRequest):
        return _checked(request, cluster, watch)
    if isinstance(request, NodeRequest):
        return _nodes_back(kind, request, cluster, watch)
    raise TypeError(f"a {kind.value} change with a {type(request).__name__}")


def _started(cluster: Cluster) -> Verdict:
    """A compute fleet started: RUNNING (START_REQUESTED and STARTING are on the way), and each queue's static
    nodes back and healthy, as they were before it was stopped."""
    if cluster.extra.get("compute_fleet") != "RUNNING":
        return Verdict(State.GOING)
    healthy = Counter((node.group, node.instance_type) for node in cluster.nodes if node.health is Health.HEALTHY)
    back = all(
        healthy[(group.name, group.instance_type)] >= group.target
        for group in cluster.groups
        if group.target is not None
    )
    return Verdict(State.DONE, "the compute fleet is running") if back else Verdict(State.GOING)


def _scaled(request: ScaleRequest, cluster: Cluster) -> Verdict:
    queue = request.group.split("/")[0]
    group = next(
        (
            g
            for g in cluster.groups
            if g.name == queue and g.instance_type == (request.instance_type or g.instance_type)
        ),
        None,
    )
    if group is None or cluster.phase is not Phase.READY:
        return Verdict(State.GOING)
    if cluster.fleet in (FleetPhase.STOPPING, FleetPhase.STOPPED):
        return Verdict(State.DONE, "the compute fleet is stopped: the nodes come up when it is started")
    if group.target is None:
        settled = group.current == request.count
    elif "/" in request.group:  # one compute resource of a queue that has several: the queue's sum moves
        settled = group.current == group.target
    else:  # the target must be the one asked for: an unchanged group (before AWS took the change) is not done
        settled = group.current == group.target == request.count
    return Verdict(State.DONE if settled else State.GOING)


def _nodes_back(kind: Kind, request: NodeRequest, cluster: Cluster, watch: Watch) -> Verdict:
    acted_on = list(request.successful or ())
    nodes = {node.node_id: node for node in cluster.nodes}
    groups = set(request.groups)
    before = set(request.before_ids)
    fresh = [node for node in cluster.nodes if node.group in groups and node.node_id not in before]
    broken = [node for node in fresh if node.health is Health.UNHEALTHY]
    if broken:
        node = broken[0]
        return Verdict(State.FAILED, f"new node {node.node_id} is {node.status}: {node.message or 'no message'}")
    # HyperPod nodes (the only ones rebooted or replaced here) are healthy exactly when Running.
    if kind is Kind.REBOOT:
        for node_id in acted_on:
            if node_id not in nodes or nodes[node_id].health is not Health.HEALTHY:
                watch.seen_away.add(node_id)
        back = all(node_id in nodes and nodes[node_id].health is Health.HEALTHY for node_id in acted_on)
        seen = watch.seen_away.issuperset(acted_on) or watch.polls >= QUIET_REBOOT_POLLS
        return Verdict(State.DONE if back and seen else State.GOING)
    # Replaced: the old instances are gone and as many new ones run in their groups. Other nodes of the group
    # are not waited for: one that was failing before has nothing to do with this replacement.
    gone = not any(node_id in nodes for node_id in acted_on)
    successors = [node.node_id for node in fresh if node.health is Health.HEALTHY]
    if not gone or len(successors) < len(acted_on):
        return Verdict(State.GOING)
    # Named when done: a poll may never have caught the successor joining, and people look for the new id.
    return Verdict(State.DONE, f"{_ids(acted_on)} replaced by {_ids(successors)}")


@dataclass(frozen=True)
class CheckResult:
    """How a deep health check of one node ended, as the node's status says once it is no longer in it."""

    node_id: str
    passed: bool
    status: str  # Running, Failure, ... ("gone" for a node no longer listed)
    message: str


def check_results(request: CheckRequest, cluster: Cluster | None) -> tuple[CheckResult, ...]:
    """Each checked node's result as the cluster shows it now: passed when Running, failed otherwise (its status
    and message say why); nodes still in the check are left out."""
    nodes = {node.node_id: node for node in cluster.nodes} if cluster is not None else {}
    results = []
    for node_id in request.successful or request.node_ids:
        node = nodes.get(node_id)
        if node is None:
            results.append(CheckResult(node_id, False, "gone", "no longer in the cluster"))
        elif node.status != CHECKING:
            results.append(CheckResult(node_id, node.health is Health.HEALTHY, node.status, node.message))
    return tuple(results)


def _checked(request: CheckRequest, cluster: Cluster, watch: Watch) -> Verdict:
    """A deep health check is over once each node was seen in it and has left it (or, seen in it never, after
    QUIET_REBOOT_POLLS: a check quicker than the polls). Done either way: a node that fails its check is the
    check's answer, not the change failing; the reason says each node's result."""
    checked = list(request.successful or request.node_ids)
    for node in cluster.nodes:
        if node.node_id in checked and node.status == CHECKING:
            watch.seen_away.add(node.node_id)
    results = {r.node_id: r for r in check_results(request, cluster)}
    over = all(
        node_id in results and (node_id in watch.seen_away or watch.polls >= QUIET_REBOOT_POLLS) for node_id in checked
    )
    if not over:
        return Verdict(State.GOING)
    return Verdict(State.DONE, check_summary(tuple(results[node_id] for node_id in checked)))


def check_summary(results: tuple[CheckResult, ...]) -> str:
    """One line: which nodes passed, which failed and why."""
    passed = [r.node_id for r in results if r.passed]
    failed = [r for r in results if not r.passed]
    parts = []
    if passed:
        parts.append(f"deep health check passed: {_ids(passed)} Running")
    for result in failed:
        said = f": {result.message}" if result.message else ""
        parts.append(f"`{result.node_id}` failed the deep health check ({result.status}{said})")
    return "; ".join(parts)


def _ids(node_ids: list[str]) -> str:
    return ", ".join(f"`{node_id}`" for node_id in node_ids)
