"""Planning a deep health check of HyperPod nodes (StartClusterHealthCheck): from `/cluster check` and from an
alert's Run deep health check button, the same checks and the same plan, proposed as any change (Confirm, one
change of a cluster at a time, one pending plan per node).

Raises what bot.clusters.changes raises (NotPlanned saying why not and how it is meant, ClusterBusy,
PlanPending); nothing here speaks Slack (bot.slack.blocks.check_plan renders the plan).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.clusters.changes import Changes, ClusterBusy, NotPlanned, Shown, node_request
from bot.clusters.fleet import describe_error
from bot.clusters.model import Backend, Cluster, Node
from bot.clusters.progress import CHECKING
from bot.clusters.requests import DEEP_HEALTH_CHECKS, CheckRequest, Kind
from storage.models import Outcome

# The node statuses StartClusterHealthCheck takes (others are mid-change, or gone).
CHECKABLE = frozenset({"Running", "Failure"})


@dataclass(frozen=True)
class CheckPlanned:
    cluster: Cluster
    nodes: tuple[Node, ...]
    checks: tuple[str, ...]
    operation_id: str | None  # None for a dry run


def chosen_checks(*, stress: bool, connectivity: bool) -> tuple[str, ...]:
    """The checks asked for: both when neither flag is given. Pure."""
    if stress == connectivity:
        return DEEP_HEALTH_CHECKS
    return ("InstanceStress",) if stress else ("InstanceConnectivity",)


def uncheckable(cluster: Cluster, node_ids: Sequence[str]) -> str | None:
    """Why these nodes of the cluster cannot be checked now, or None. Pure."""
    by_id = {node.node_id: node for node in cluster.nodes}
    unknown = [node_id for node_id in node_ids if node_id not in by_id]
    if unknown:
        listed = ", ".join(f"`{node_id}`" for node_id in unknown[:5])
        verb = "is not a node" if len(unknown) == 1 else "are not nodes"
        return f"{listed} {verb} of `{cluster.ref}`; `/cluster nodes {cluster.name}` lists them."
    checking = [node_id for node_id in node_ids if by_id[node_id].status == CHECKING]
    if checking:
        listed = ", ".join(f"`{node_id}`" for node_id in checking[:5])
        return (
            f"{listed} {'is' if len(checking) == 1 else 'are'} already in a deep health check "
            f"(`{CHECKING}`); its result comes when it ends: nothing new was started."
        )
    busy = [by_id[node_id] for node_id in node_ids if by_id[node_id].status not in CHECKABLE]
    if busy:
        listed = ", ".join(f"`{node.node_id}` ({node.status})" for node in busy[:5])
        return (
            f"A deep health check takes nodes that are Running or in Failure; {listed} "
            f"{'is' if len(busy) == 1 else 'are'} not. Try again once `/cluster nodes {cluster.name}` shows it settled."
        )
    return None


def check_request(cluster: Cluster, node_ids: Sequence[str], checks: Sequence[str]) -> CheckRequest:
    base = node_request(cluster, node_ids)
    groups = {node.node_id: node.group for node in cluster.nodes}
    return CheckRequest(
        node_ids=base.node_ids,
        groups=base.groups,
        before_ids=base.before_ids,
        checks=tuple(checks),
        node_groups=tuple(groups[node_id] for node_id in base.node_ids),
    )


async def plan_check(
    changes: Changes,
    cluster: Cluster,
    *,
    node_ids: Sequence[str],
    checks: Sequence[str],
    dry_run: bool,
    user_id: str,
    channel_id: str,
) -> CheckPlanned:
    """A cluster found and authorized: the check of its nodes, proposed (unless a dry run). NotPlanned for a
    cluster that is not HyperPod's and for nodes it does not have or that cannot be checked now."""
    if cluster.backend is not Backend.HYPERPOD:
        reason = (
            f"Deep health checks are HyperPod's (StartClusterHealthCheck); `{cluster.ref}` is a "
            f"{cluster.backend.label} cluster."
        )
        raise NotPlanned(reason, outcome=Outcome.INVALID, shown=Shown.USAGE, org_id=cluster.org)
    problem = uncheckable(cluster, node_ids)
    if problem is not None:
        shown = Shown.USAGE if "is not a node" in problem or "are not nodes" in problem else Shown.PROBLEM
        raise NotPlanned(problem, outcome=Outcome.INVALID, shown=shown, org_id=cluster.org)
    by_id = {node.node_id: node for node in cluster.nodes}
    selected = tuple(by_id[node_id] for node_id in node_ids)
    if dry_run:
        return CheckPlanned(cluster, selected, tuple(checks), None)
    request = check_request(cluster, node_ids, checks)
    operation_id = await changes._propose_on(Kind.CHECK, cluster, request, user_id, channel_id)
    return CheckPlanned(cluster, selected, tuple(checks), operation_id)


async def check_from_alert(
    changes: Changes,
    *,
    org_id: str,
    cluster_name: str,
    node_id: str,
    user_id: str,
    channel_id: str,
) -> CheckPlanned:
    """An alert's Run deep health check: both checks of its node, the cluster read fresh. NotPlanned (a problem)
    when the cluster cannot be read or the node is gone; ClusterBusy when a change (another check among them)
    runs on the cluster; PlanPending when a plan for the node waits for Confirm."""
    try:
        cluster = await changes.fleet.get(org_id, Backend.HYPERPOD, cluster_name)
    except Exception as error:
        message = f"Could not read `{org_id}/{cluster_name}`: {describe_error(error)}"
        raise NotPlanned(message, outcome=Outcome.FAILED, shown=Shown.PROBLEM, org_id=org_id) from None
    node = next((n for n in cluster.nodes if n.node_id == node_id), None) if cluster else None
    if cluster is None or node is None or node.leaving:
        message = f"`{node_id}` is no longer in `{org_id}/{cluster_name}`; nothing to check."
        raise NotPlanned(message, outcome=Outcome.INVALID, shown=Shown.PROBLEM, org_id=org_id)
    busy = await changes.operations.busy(org_id=org_id, backend=Backend.HYPERPOD, cluster_name=cluster.name)
    if busy is not None:
        raise ClusterBusy(busy)
    return await plan_check(
        changes,
        cluster,
        node_ids=[node_id],
        checks=DEEP_HEALTH_CHECKS,
        dry_run=False,
        user_id=user_id,
        channel_id=channel_id,
    )
