"""The episode state machine, pure: one episode per failing node, followed through replacement (and only
through a replacement: a node that merely joined the group is never its successor)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from bot.clusters.model import Backend, Cluster, InstanceGroup, Node, hyperpod_node_health, pcluster_node_health
from bot.monitor.episodes import (
    CLUSTER_KEY,
    GONE,
    STORM_NODES,
    Known,
    Replacement,
    assess,
    gone,
    hours_lost,
    with_hints,
)

T0 = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)


def node(
    node_id: str, status: str = "Running", *, launched: datetime = T0 - timedelta(days=1), message: str = ""
) -> Node:
    return Node(node_id, "workers", "ml.p5.48xlarge", status, hyperpod_node_health(status), launched, message)


def cluster(
    nodes: Iterable[Node], status: str = "InService", failure: str = "", *, target: int | None = None
) -> Cluster:
    nodes = tuple(nodes)
    groups = (InstanceGroup("workers", "ml.p5.48xlarge", current=len(nodes), target=target or len(nodes)),)
    return Cluster("kumo-labs", "c1", Backend.HYPERPOD, status, groups, nodes=nodes, failure_message=failure)


def episode(
    *node_ids: str,
    status: str = "Failure",
    open: bool = True,
    closed_at: datetime | None = None,
    group: Iterable[str] | None = None,
    target: int | None = None,
) -> Known:
    """An episode as stored; `group`: its group's nodes at the last look that listed the failed node
    (default: the node itself and i-00000002), `target` that group's target count (default: their number)."""
    members = frozenset(group if group is not None else {node_ids[-1], "i-00000002"})
    return Known(1, "node", node_ids, open, status, "XID 79", "workers", T0, closed_at, members, target or len(members))


def test_a_new_failure_opens_one_episode_and_a_lasting_one_changes_nothing() -> None:
    seen = cluster([node("i-00000001", "Failure", message="XID 79"), node("i-00000002")])
    verdict = assess(seen, [], now=T0)
    (opened,) = verdict.opened
    assert (opened.node_id, opened.status, opened.message, opened.reopens) == ("i-00000001", "Failure", "XID 79", None)
    assert opened.group_nodes == {"i-00000001", "i-00000002"} and opened.group_target == 2
    assert not assess(seen, [episode("i-00000001")], now=T0 + timedelta(minutes=1)), "the same failure, no news"


def test_transitional_nodes_are_not_failures() -> None:
    assert not assess(
        cluster([node("i-00000001", "Pending"), node("i-00000002", "DeepHealthCheckInProgress")]), [], now=T0
    )


def test_status_change_is_a_change_with_a_note() -> None:
    verdict = assess(cluster([node("i-00000001", "NotFound")]), [episode("i-00000001")], now=T0)
    (changed,) = verdict.changed
    assert changed.status == "NotFound" and "Failure → NotFound" in changed.note


def test_recovery_closes() -> None:
    (closed,) = assess(cluster([node("i-00000001")]), [episode("i-00000001")], now=T0).closed
    assert "Running again" in closed.note


def test_a_replacement_joins_the_episode_and_closes_it_when_running() -> None:
    failed = episode("i-00000001")
    shutting = assess(cluster([node("i-00000001", "ShuttingDown")]), [failed], now=T0)
    assert shutting.changed[0].status == "ShuttingDown"
    gap = assess(cluster([node("i-00000002")]), [failed], now=T0)  # an old node, launched before the failure
    assert gap.changed[0].status == GONE and not gap.opened
    successor = node("i-00000009", "Pending", launched=T0 + timedelta(minutes=5))
    joining = assess(cluster([node("i-00000002"), successor]), [failed], now=T0)
    (changed,) = joining.changed
    assert changed.node_ids == ("i-00000001", "i-00000009") and "replacement `i-00000009` is Pending" in changed.note
    running = replace_status(successor, "Running")
    done = assess(cluster([running]), [episode("i-00000001", "i-00000009", status="Pending")], now=T0)
    assert done.closed and "i-00000009" in done.closed[0].note


def test_automatic_recovery_while_the_target_stays_is_the_successor() -> None:
    """HyperPod replaced the node itself (new instance id, same TargetCount): that new node is its successor."""
    failed = episode("i-00000001", group={"i-00000001", "i-00000002"}, target=2)
    seen = cluster([node("i-00000002"), node("i-00000009", "Pending", launched=T0 + timedelta(minutes=5))])
    (changed,) = assess(seen, [failed], now=T0 + timedelta(minutes=6)).changed
    assert changed.node_ids == ("i-00000001", "i-00000009") and "automatic recovery" in changed.note


def test_a_node_that_appears_while_the_target_grew_is_not_a_successor() -> None:
    """The group was scaled up as the failed node left: the new node may be a scale-up node, so it is none."""
    failed = episode("i-00000001", group={"i-00000001", "i-00000002"}, target=2)
    seen = cluster([node("i-00000002"), node("i-00000009", launched=T0 + timedelta(minutes=5))], target=3)
    verdict = assess(seen, [failed], now=T0 + timedelta(minutes=6))
    (changed,) = verdict.changed
    assert changed.status == GONE and changed.node_ids == ("i-00000001",) and not verdict.closed


def test_a_scale_up_node_that_joined_before_the_failed_node_left_is_never_its_successor() -> None:
    """The issue's case: a failed node, the group scaled up, then the failed node replaced. The scale-up
    nodes are remembered as members of the group while the failed node was still there."""
    failed = episode("i-00000001", group={"i-00000001", "i-00000002"}, target=2)
    scaled = [node("i-00000001", "Failure", message="XID 79"), node("i-00000002")]
    scaled += [node(f"i-0000001{i}", launched=T0 + timedelta(minutes=2)) for i in range(2)]
    (moved,) = assess(cluster(scaled), [failed], now=T0 + timedelta(minutes=3)).changed
    assert moved.note == "" and moved.group_target == 4 and "i-00000010" in (moved.group_nodes or ())
    remembered = episode("i-00000001", group=moved.group_nodes, target=moved.group_target)
    replaced = [*scaled[1:], node("i-00000020", "Pending", launched=T0 + timedelta(minutes=10))]
    (changed,) = assess(cluster(replaced), [remembered], now=T0 + timedelta(minutes=11)).changed
    assert changed.node_ids == ("i-00000001", "i-00000020"), "the real replacement, not a scale-up node"


def test_a_replacement_listed_beside_its_leaving_node_is_still_its_successor() -> None:
    """AWS may list the new instance while the old one is still ShuttingDown: from then on the group's
    membership is not remembered, so the newcomer is not excluded as a node that was already there."""
    failed = episode("i-00000001", group={"i-00000001", "i-00000002"}, target=2)
    newcomer = node("i-00000009", "Pending", launched=T0 + timedelta(minutes=5))
    both = cluster([node("i-00000001", "ShuttingDown"), node("i-00000002"), newcomer], target=2)
    (leaving,) = assess(both, [failed], now=T0 + timedelta(minutes=5)).changed
    assert leaving.status == "ShuttingDown" and leaving.group_nodes is None, "membership kept as it was"
    seen = Known(1, "node", ("i-00000001",), True, "ShuttingDown", "", "workers", T0, None, failed.group_nodes, 2)
    (changed,) = assess(cluster([node("i-00000002"), newcomer]), [seen], now=T0 + timedelta(minutes=6)).changed
    assert changed.node_ids == ("i-00000001", "i-00000009")


def test_a_confirmed_replace_names_the_node_that_was_not_there_when_it_was_planned() -> None:
    """An episode stored before group members were kept has no automatic successor; Pitcrew's own replace
    (AWS accepted the old id; the group's nodes when planned are on the operation) still finds it."""
    old = Known(1, "node", ("i-00000001",), True, "Failure", "XID 79", "workers", T0)
    scale_up = [node(f"i-0000001{i}", launched=T0 + timedelta(minutes=2)) for i in range(2)]
    after = cluster([node("i-00000002"), *scale_up, node("i-00000020", "Pending", launched=T0 + timedelta(minutes=9))])
    assert assess(after, [old], now=T0 + timedelta(minutes=10)).changed[0].status == GONE, "no guess without facts"
    replace = Replacement(
        node_ids=frozenset({"i-00000001"}),
        before_ids=frozenset({"i-00000001", "i-00000002", "i-00000010", "i-00000011"}),
        started_at=T0 + timedelta(minutes=8),
        confirmed_by="U0ALICE01",
    )
    (changed,) = assess(after, [old], now=T0 + timedelta(minutes=10), replacements=[replace]).changed
    assert changed.node_ids == ("i-00000001", "i-00000020") and "confirmed by <@U0ALICE01>" in changed.note


def test_a_later_failure_of_another_node_is_its_own_episode_not_a_reopening() -> None:
    ended = episode("i-00000001", "i-00000020", open=False, closed_at=T0 + timedelta(minutes=15))
    other = assess(
        cluster([node("i-00000010", "Failure"), node("i-00000020")]), [ended], now=T0 + timedelta(minutes=20)
    )
    assert [(o.node_id, o.reopens) for o in other.opened] == [("i-00000010", None)]
    again = assess(cluster([node("i-00000020", "Failure")]), [ended], now=T0 + timedelta(minutes=20))
    assert [(o.node_id, o.reopens) for o in again.opened] == [("i-00000020", 1)], "its own successor reopens it"


def test_a_failing_successor_stays_in_the_same_episode() -> None:
    successor = node("i-00000009", "Failure", launched=T0 + timedelta(minutes=5), message="EFA")
    verdict = assess(cluster([successor]), [episode("i-00000001")], now=T0)
    assert not verdict.opened and verdict.changed[0].node_ids[-1] == "i-00000009"


def test_failing_again_within_30_minutes_reopens() -> None:
    closed = episode("i-00000001", open=False, closed_at=T0)
    again = assess(cluster([node("i-00000001", "Failure")]), [closed], now=T0 + timedelta(minutes=20))
    assert again.opened[0].reopens == 1
    later = assess(cluster([node("i-00000001", "Failure")]), [closed], now=T0 + timedelta(minutes=40))
    assert later.opened[0].reopens is None


def test_many_failures_in_one_look_are_a_storm() -> None:
    nodes = [node(f"i-{i:08x}", "Failure") for i in range(STORM_NODES)]
    assert assess(cluster(nodes), [], now=T0).storm
    assert not assess(cluster(nodes[:-1]), [], now=T0).storm


def test_a_failed_cluster_is_one_cluster_episode_until_it_recovers() -> None:
    verdict = assess(cluster([], status="Failed", failure="capacity"), [], now=T0)
    (opened,) = verdict.opened
    assert (opened.kind, opened.node_id, opened.message) == ("cluster", CLUSTER_KEY, "capacity")
    known = Known(7, "cluster", (), True, "Failed", "capacity", "", T0)
    assert not assess(cluster([], status="Failed", failure="capacity"), [known], now=T0)
    assert assess(cluster([], status="InService"), [known], now=T0).closed[0].episode_id == 7


def test_event_hints_mark_a_node_unhealthy_before_the_api_does() -> None:
    seen = with_hints(cluster([node("i-00000001")]), {"i-00000001": (False, "XidHardwareFailure")})
    (opened,) = assess(seen, [], now=T0).opened
    assert opened.message == "XidHardwareFailure"


def test_a_deleted_cluster_closes_its_episodes_and_hours_are_counted() -> None:
    assert gone([episode("i-00000001")]).closed[0].note == "the cluster no longer exists"
    assert hours_lost(T0, T0 + timedelta(minutes=90)) == 1.5


def replace_status(n: Node, status: str) -> Node:
    return Node(n.node_id, n.group, n.instance_type, status, hyperpod_node_health(status), n.launch_time, n.message)


def test_a_throughput_alert_names_the_node_that_failed_at_the_time_not_its_later_replacement() -> None:
    """Issue 11: the next throughput alert named a (wrongly taken) successor as the cause at a time it did
    not exist. The cause names the node that failed then; its replacement only as such."""
    from zoneinfo import ZoneInfo

    from bot.monitor.jobs import failed_node_text
    from storage.models import Episode

    tz = ZoneInfo("Asia/Tokyo")
    replaced = Episode(
        org_id="kumo-labs",
        backend="hyperpod",
        cluster_name="c1",
        node_key="i-00000001",
        kind="node",
        state="closed",
        node_ids=["i-00000001", "i-00000020"],
        status="Running",
        opened_at=T0,
        failing_since=T0,
        updated_at=T0,
    )
    text = failed_node_text(replaced, since=T0 - timedelta(minutes=30), tz=tz)
    assert text.startswith("`i-00000001` (failed at 2026-11-29 18:00 JST") and "replaced by `i-00000020`" in text
    again = Episode.model_validate(
        {**replaced.model_dump(), "reopened": 1, "failing_since": T0 + timedelta(hours=2), "state": "open"}
    )
    later = failed_node_text(again, since=T0 + timedelta(hours=1), tz=tz)
    assert later.startswith("`i-00000020` (failed again at 2026-11-29 20:00 JST")


def test_automatic_recovery_listed_beside_the_still_failed_node_is_its_successor() -> None:
    """Review finding: HyperPod may list the new instance (Pending) while the failed one still shows Failure.
    That look remembered the newcomer as a member of the group, so once the failed node left, its real
    replacement was excluded and the alert waited 24 hours for one."""
    failed = episode("i-00000001", group={"i-00000001", "i-00000002"}, target=2)
    newcomer = node("i-00000009", "Pending", launched=T0 + timedelta(minutes=5))
    both = cluster([node("i-00000001", "Failure", message="XID 79"), node("i-00000002"), newcomer], target=2)
    verdict = assess(both, [failed], now=T0 + timedelta(minutes=5))
    remembered = failed
    for changed in verdict.changed:
        assert "i-00000009" not in (changed.group_nodes or ()), "a newcomer while the target stays is no member"
        remembered = replace(failed, group_nodes=changed.group_nodes, group_target=changed.group_target)
    (changed,) = assess(cluster([node("i-00000002"), newcomer]), [remembered], now=T0 + timedelta(minutes=6)).changed
    assert changed.node_ids == ("i-00000001", "i-00000009") and "automatic recovery" in changed.note


def pc_node(node_id: str, state: str, *, launched: datetime = T0 - timedelta(days=1), impaired: bool = False) -> Node:
    """A ParallelCluster compute node as read through EC2 tags (queue `compute-gpu`, no targets known)."""
    health = pcluster_node_health(state=state, node_type="ComputeNode", impaired=impaired)
    return Node(node_id, "compute-gpu", "p5.48xlarge", "impaired" if impaired else state, health, launched)


def pc_cluster(nodes: Iterable[Node]) -> Cluster:
    nodes = tuple(nodes)
    groups = (InstanceGroup("compute-gpu", "p5.48xlarge", current=len(nodes), target=None),)
    return Cluster("sakura-ai", "pc1", Backend.PCLUSTER, "RUNNING", groups, nodes=nodes)


def test_a_parallelcluster_node_terminated_and_relaunched_in_its_queue_is_followed_and_not_alerted_again() -> None:
    """Review finding (EC2-tag clusters): EC2 lists a terminated instance for about an hour. The episode
    waited on it (no successor while it was listed), the terminated instance counted toward the queue's size
    (so the relaunched one looked like a scale-up), and after the episode closed it opened a new alert."""
    first = pc_cluster([pc_node("i-0a", "running", impaired=True), pc_node("i-0b", "running")])
    (opened,) = assess(first, [], now=T0).opened
    assert opened.group_target == 2
    failed = Known(1, "node", ("i-0a",), True, "impaired", "", "compute-gpu", T0, None, opened.group_nodes, 2)
    relaunched = pc_node("i-0c", "pending", launched=T0 + timedelta(minutes=4))
    seen = pc_cluster([pc_node("i-0a", "terminated"), pc_node("i-0b", "running"), relaunched])
    verdict = assess(seen, [failed], now=T0 + timedelta(minutes=5))
    assert not verdict.opened
    (changed,) = verdict.changed
    assert changed.node_ids == ("i-0a", "i-0c") and "automatic recovery" in changed.note
    following = replace(failed, node_ids=changed.node_ids, status=changed.status)
    running = pc_cluster([pc_node("i-0a", "terminated"), pc_node("i-0b", "running"), pc_node("i-0c", "running")])
    verdict = assess(running, [following], now=T0 + timedelta(minutes=8))
    assert [c.episode_id for c in verdict.closed] == [1] and not verdict.opened
    ended = replace(following, open=False, closed_at=T0 + timedelta(minutes=8))
    later = assess(running, [ended], now=T0 + timedelta(minutes=58))  # past the reopen window, still listed
    assert not later, "the terminated instance it replaced is no new failure"


def test_a_terminated_parallelcluster_node_with_no_replacement_yet_says_so() -> None:
    failed = Known(1, "node", ("i-0a",), True, "impaired", "", "compute-gpu", T0, None, frozenset({"i-0a", "i-0b"}), 2)
    seen = pc_cluster([pc_node("i-0a", "terminated"), pc_node("i-0b", "running")])
    verdict = assess(seen, [failed], now=T0 + timedelta(minutes=5))
    (changed,) = verdict.changed
    assert changed.status == GONE and "`i-0a` was terminated; waiting for its replacement" in changed.note
    assert not verdict.opened
