"""Failed-node episodes: what a new look at a cluster means for the alerts already open. Pure.

One episode per failing node, keyed by cluster and node. A look at a cluster (a sweep, or a check
prompted by an EventBridge event) is compared with the episodes of that cluster, so a node that stays
failed is one episode however many sweeps see it. A replaced node's successor (a new instance in the
same group, launched after the failure) joins its episode; the episode closes when the node, or its
successor, runs again. A node failing again within 30 minutes of recovering reopens its episode. A
cluster whose status is Failed is one cluster-level episode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from bot.clusters.model import Cluster, Health, Node, Phase

REOPEN_WINDOW = timedelta(minutes=30)
STORM_NODES = 5  # this many nodes of one cluster failing in one look make one grouped message
CLUSTER_KEY = "cluster"
GONE = "gone"  # the failed instance left the cluster and no successor is there yet
# A confirmed replace is looked for this long after AWS accepted it (replacements take minutes, not hours).
SUCCESSOR_WINDOW = timedelta(hours=6)
LAUNCH_SLACK = timedelta(minutes=1)  # AWS's clock against ours: a launch time a little before "started"
# A node on its way out: its replacement may already be listed beside it, so the group's membership is no
# longer remembered from here on (a node joining now may be that replacement, not one to exclude).
LEAVING = frozenset({"ShuttingDown", "shutting-down", "stopping", "terminated"})
GONE_FOR_GOOD = timedelta(hours=24)  # a node gone this long with no successor was removed, not replaced
# An instance that can never run again though still listed: EC2 lists a terminated instance for about an hour
# (ParallelCluster through EC2 tags). It is as good as gone: its successor is looked for at once.
ENDED = frozenset({"terminated"})
# How long a node that was part of an episode is remembered as such: a terminated one still listed after its
# episode closed (replaced) must not open a new alert of its own.
RETIRED_WINDOW = timedelta(hours=2)


@dataclass(frozen=True)
class Known:
    """An episode as the state machine needs to know it (storage keeps the rest)."""

    id: int
    kind: str  # "node" | "cluster"
    node_ids: tuple[str, ...]  # instance ids, oldest first; the last is the current one
    open: bool
    status: str
    message: str
    group: str
    opened_at: datetime
    closed_at: datetime | None = None
    # The group's nodes and target at the last look that listed the current node; None if never recorded
    # (an episode stored before they were kept: it gets no automatic successor, only a confirmed one).
    group_nodes: frozenset[str] | None = None
    group_target: int | None = None
    key: str = ""  # its node_key; a cluster kind's other than CLUSTER_KEY (HyperPod's provisioning) is not the
    # cluster's own status, and the cluster-level look leaves it alone

    @property
    def current(self) -> str:
        return self.node_ids[-1] if self.node_ids else CLUSTER_KEY


@dataclass(frozen=True)
class Replacement:
    """A replace of some nodes that Pitcrew confirmed and AWS accepted (from the operation's record)."""

    node_ids: frozenset[str]  # AWS's `Successful`: the nodes being replaced
    before_ids: frozenset[str]  # the groups' nodes when the replace was planned
    started_at: datetime  # when AWS accepted it
    confirmed_by: str = ""


@dataclass(frozen=True)
class Opened:
    kind: str
    node_id: str  # CLUSTER_KEY for a cluster-level episode
    group: str
    instance_type: str
    status: str
    message: str
    reopens: int | None = None  # the id of a recently closed episode this failure reopens
    group_nodes: frozenset[str] = frozenset()
    group_target: int | None = None


@dataclass(frozen=True)
class Changed:
    episode_id: int
    node_ids: tuple[str, ...]
    status: str
    message: str
    note: str  # one line for the episode's thread; "" for bookkeeping only (nothing to tell anyone)
    group_nodes: frozenset[str] | None = None  # set when the group's membership or target moved
    group_target: int | None = None


@dataclass(frozen=True)
class Closed:
    episode_id: int
    note: str


@dataclass(frozen=True)
class Verdict:
    opened: list[Opened] = field(default_factory=list)
    changed: list[Changed] = field(default_factory=list)
    closed: list[Closed] = field(default_factory=list)

    @property
    def storm(self) -> bool:
        return sum(1 for o in self.opened if o.kind == "node" and o.reopens is None) >= STORM_NODES

    def __bool__(self) -> bool:
        return bool(self.opened or self.changed or self.closed)


def cluster_failed(cluster: Cluster) -> bool:
    return cluster.phase is Phase.FAILED


def with_hints(cluster: Cluster, hints: Mapping[str, tuple[bool, str]]) -> Cluster:
    """The cluster with what EventBridge said of some nodes ({node id: (healthy, reason)}) laid over what
    the API lists: health events can arrive before ListClusterNodes shows the change."""
    if not hints:
        return cluster
    nodes = []
    for node in cluster.nodes:
        hint = hints.get(node.node_id)
        if hint is not None and not hint[0] and node.health is not Health.UNHEALTHY:
            node = replace(node, status="Unhealthy", health=Health.UNHEALTHY, message=hint[1] or node.message)
        nodes.append(node)
    return replace(cluster, nodes=tuple(nodes))


def group_target(cluster: Cluster, group: str) -> int | None:
    """How many nodes the group is meant to have: the target AWS states, or, where the backend does not say
    (ParallelCluster without its API), the nodes listed in it. None for a group not in the listing at all."""
    groups = [g for g in cluster.groups if g.name == group or g.name.startswith(f"{group}/")]
    if groups and all(g.target is not None for g in groups):
        return sum(g.target or 0 for g in groups)
    # Nodes on their way out are not counted: a terminated instance listed beside its replacement must not
    # make the group look grown (and the replacement a scale-up node).
    listed = sum(1 for node in cluster.nodes if node.group == group and node.status not in LEAVING)
    return listed if listed or groups or any(node.group == group for node in cluster.nodes) else None


def _group_nodes(cluster: Cluster, group: str) -> frozenset[str]:
    return frozenset(node.node_id for node in cluster.nodes if node.group == group)


def _successor(
    episode: Known, cluster: Cluster, claimed: set[str], replacements: Sequence[Replacement], now: datetime
) -> tuple[Node, str] | None:
    """The node that replaced the episode's current node, and how ("replace confirmed by ..." or
    "automatic recovery"); None while there is none, and for any node that merely joined the group."""
    in_group = [
        node
        for node in cluster.nodes
        if node.group == episode.group and node.node_id not in claimed and node.status not in LEAVING
    ]
    confirmed = [r for r in replacements if episode.current in r.node_ids and now - r.started_at <= SUCCESSOR_WINDOW]
    for replacement in sorted(confirmed, key=lambda r: r.started_at, reverse=True):
        # Not in the group when it was planned, and launched once AWS took it (a new instance, new id).
        candidates = [
            node
            for node in in_group
            if node.node_id not in replacement.before_ids
            and (node.launch_time is None or node.launch_time >= replacement.started_at - LAUNCH_SLACK)
        ]
        if candidates:
            by = f" confirmed by <@{replacement.confirmed_by}>" if replacement.confirmed_by else ""
            return _earliest(candidates), f"the replace{by}"
    if episode.group_nodes is None or episode.group_target is None:
        return None  # nothing to tell a new node from a scale-up node by
    target = group_target(cluster, episode.group)
    if target is None or target > episode.group_target:
        return None  # the group grew: a new node may be a scale-up node, so none is taken for the successor
    fresh = [node for node in in_group if node.node_id not in episode.group_nodes]
    return (_earliest(fresh), "automatic recovery") if fresh else None


def _earliest(nodes: Sequence[Node]) -> Node:
    return min(nodes, key=lambda node: (node.launch_time is None, node.launch_time or datetime.min, node.node_id))


def assess(
    cluster: Cluster, episodes: Sequence[Known], *, now: datetime, replacements: Sequence[Replacement] = ()
) -> Verdict:
    """What changed since `episodes` (the cluster's open ones, and those closed within REOPEN_WINDOW; older
    closed ones, up to RETIRED_WINDOW, only tell which nodes were replaced already).
    `replacements`: the replaces Pitcrew confirmed on this cluster lately (their node ids, from AWS)."""
    verdict = Verdict()
    nodes = {node.node_id: node for node in cluster.nodes if node.status not in ENDED}
    open_nodes = [e for e in episodes if e.open and e.kind == "node"]
    claimed = {node_id for e in open_nodes for node_id in e.node_ids}
    # An ended instance (terminated, still listed) that an episode followed already: not a new failure.
    retired = {node_id for e in episodes if e.kind == "node" for node_id in e.node_ids}
    for episode in open_nodes:
        _follow(episode, nodes, cluster, claimed, replacements, verdict, now)
    recent = [
        e for e in episodes if not e.open and e.kind == "node" and e.closed_at and now - e.closed_at <= REOPEN_WINDOW
    ]
    for node in cluster.nodes:
        if node.health is not Health.UNHEALTHY or node.node_id in claimed:
            continue
        if node.status in ENDED and node.node_id in retired:
            continue
        # Only the node the episode ended with: an earlier id of it is gone, and any other node is not it.
        again = next((e for e in recent if e.current == node.node_id), None)
        if again is not None:
            recent.remove(again)
        verdict.opened.append(
            Opened(
                kind="node",
                node_id=node.node_id,
                group=node.group,
                instance_type=node.instance_type,
                status=node.status,
                message=node.message,
                reopens=again.id if again else None,
                group_nodes=_group_nodes(cluster, node.group),
                group_target=group_target(cluster, node.group),
            )
        )
    _cluster_level(cluster, episodes, now, verdict)
    return verdict


def _follow(
    episode: Known,
    nodes: Mapping[str, Node],
    cluster: Cluster,
    claimed: set[str],
    replacements: Sequence[Replacement],
    verdict: Verdict,
    now: datetime,
) -> None:
    node = nodes.get(episode.current)
    if node is None:
        found = _successor(episode, cluster, claimed, replacements, now)
        if found is None:
            if now - episode.opened_at > GONE_FOR_GOOD:
                verdict.closed.append(Closed(episode.id, f"`{episode.current}` left the cluster and was not replaced"))
            elif episode.status != GONE:
                ended = any(n.node_id == episode.current and n.status in ENDED for n in cluster.nodes)
                how = "was terminated" if ended else "left the cluster"
                note = f"`{episode.current}` {how}; waiting for its replacement to appear"
                verdict.changed.append(Changed(episode.id, episode.node_ids, GONE, "", note))
            return
        successor, how = found
        claimed.add(successor.node_id)
        node_ids = (*episode.node_ids, successor.node_id)
        snapshot = _group_nodes(cluster, episode.group)
        target = group_target(cluster, episode.group)
        if successor.health is Health.HEALTHY:
            note = f"replaced by `{successor.node_id}`, which is Running ({how})"
            verdict.closed.append(Closed(episode.id, note))
            verdict.changed.append(
                Changed(episode.id, node_ids, successor.status, successor.message, "", snapshot, target)
            )
            return
        note = f"replacement `{successor.node_id}` is {successor.status} ({how})"
        verdict.changed.append(
            Changed(episode.id, node_ids, successor.status, successor.message, note, snapshot, target)
        )
        return
    members: frozenset[str] | None = _group_nodes(cluster, episode.group)
    size = group_target(cluster, episode.group)
    if node.status in LEAVING:
        members, size = None, episode.group_target  # kept as they were before it began to leave
    elif (
        members is not None
        and episode.group_nodes is not None
        and episode.group_target is not None
        and size is not None
        and size <= episode.group_target
    ):
        # The target did not grow: a newcomer is no scale-up node but may be this node's replacement, listed
        # beside it while it still shows Failure (HyperPod's automatic recovery). Not remembered as a member.
        members = members & episode.group_nodes
    moved = members is not None and (members != episode.group_nodes or size != episode.group_target)
    if node.health is Health.HEALTHY:
        verdict.closed.append(Closed(episode.id, f"`{node.node_id}` is {node.status} again"))
    elif node.status != episode.status or node.message != episode.message:
        note = f"`{node.node_id}`: {episode.status} → {node.status}" + (f" ({node.message})" if node.message else "")
        verdict.changed.append(Changed(episode.id, episode.node_ids, node.status, node.message, note, members, size))
    elif moved:  # the group changed around the failed node (say, a scale-up): remembered, not told
        verdict.changed.append(Changed(episode.id, episode.node_ids, node.status, node.message, "", members, size))


def _cluster_level(cluster: Cluster, episodes: Sequence[Known], now: datetime, verdict: Verdict) -> None:
    episodes = [e for e in episodes if e.kind != "cluster" or e.key in ("", CLUSTER_KEY)]
    current = next((e for e in episodes if e.open and e.kind == "cluster"), None)
    failed = cluster_failed(cluster)
    if failed and current is None:
        recent = next(
            (
                e
                for e in episodes
                if e.kind == "cluster" and not e.open and e.closed_at and now - e.closed_at <= REOPEN_WINDOW
            ),
            None,
        )
        verdict.opened.append(
            Opened(
                kind="cluster",
                node_id=CLUSTER_KEY,
                group="",
                instance_type="",
                status=cluster.status,
                message=cluster.failure_message,
                reopens=recent.id if recent else None,
            )
        )
    elif failed and current is not None and current.status != cluster.status:
        note = f"cluster: {current.status} → {cluster.status}"
        verdict.changed.append(Changed(current.id, (), cluster.status, cluster.failure_message, note))
    elif not failed and current is not None:
        verdict.closed.append(Closed(current.id, f"the cluster is {cluster.status} again"))


def gone(episodes: Sequence[Known]) -> Verdict:
    """The cluster no longer exists: its open episodes end."""
    return Verdict(closed=[Closed(e.id, "the cluster no longer exists") for e in episodes if e.open])


def hours_lost(opened_at: datetime, closed_at: datetime) -> float:
    return max(0.0, (closed_at - opened_at).total_seconds() / 3600)
