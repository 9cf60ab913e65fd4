"""bot.clusters.pending: which pending plan stands in a new plan's way, and what moved under a node plan. Pure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.alerts.kind import Action
from bot.alerts.kinds.node import KIND as NODE_KIND
from bot.clusters.model import Backend, Cluster, Health, Node
from bot.clusters.pending import conflicts, in_the_way, moved
from bot.clusters.requests import Kind, NodeRequest
from storage.models import Episode, Operation

AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def plan(kind: str, *node_ids: str, minutes: int = 0, id_: str = "") -> Operation:
    request = {"node_ids": list(node_ids), "groups": ["w"], "before_ids": list(node_ids)} if node_ids else {}
    return Operation(
        id=id_ or f"{kind}-{'-'.join(node_ids)}-{minutes}",
        kind=kind,
        org_id="kumo-labs",
        backend="hyperpod",
        cluster_name="c",
        request=request,
        requested_by="U1",
        requested_at=AT + timedelta(minutes=minutes),
        channel_id="C1",
        status="planned",
        updated_at=AT,
    )


def test_node_plans_conflict_only_on_a_shared_node_and_anything_else_stands_alone() -> None:
    replace_a = plan("replace", "i-a")
    assert conflicts(replace_a, kind=Kind.REPLACE, node_ids=["i-a"])
    assert conflicts(replace_a, kind=Kind.REBOOT, node_ids=["i-b", "i-a"])
    assert not conflicts(replace_a, kind=Kind.REPLACE, node_ids=["i-b"])
    assert conflicts(replace_a, kind=Kind.SCALE), "a scale would make the replace stale (its node may go)"
    assert conflicts(plan("scale"), kind=Kind.REPLACE, node_ids=["i-b"])
    assert conflicts(plan("stop_fleet"), kind=Kind.DELETE)
    assert not conflicts(plan("launch"), kind=Kind.SCALE), "a launch is of another cluster"


def test_the_earliest_conflicting_plan_is_the_one_in_the_way() -> None:
    later, earlier, apart = plan("replace", "i-a", minutes=5), plan("reboot", "i-a", minutes=1), plan("reboot", "i-b")
    assert in_the_way([later, apart, earlier], kind=Kind.REPLACE, node_ids=["i-a"]) is earlier
    assert in_the_way([apart], kind=Kind.REPLACE, node_ids=["i-a"]) is None
    same_minute = [plan("scale", minutes=0, id_="b"), plan("scale", minutes=0, id_="a")]
    assert in_the_way(same_minute, kind=Kind.DELETE) is same_minute[1], "ties broken by id: every replica agrees"


def node(node_id: str, status: str = "Running") -> Node:
    health = Health.HEALTHY if status == "Running" else Health.TRANSITIONAL
    return Node(node_id=node_id, group="w", instance_type="ml.p5.48xlarge", status=status, health=health)


def test_a_node_plan_moved_when_its_nodes_or_its_cluster_left() -> None:
    request = NodeRequest(node_ids=("i-a", "i-b"), groups=("w",), before_ids=("i-a", "i-b"))
    cluster = Cluster(org="kumo-labs", name="c", backend=Backend.HYPERPOD, status="InService")
    both = Cluster(**{**cluster.__dict__, "nodes": (node("i-a"), node("i-b"))})
    assert moved(request, both, ref="kumo-labs/c") is None
    leaving = Cluster(**{**cluster.__dict__, "nodes": (node("i-a", "ShuttingDown"), node("i-b"), node("i-new"))})
    assert moved(request, leaving, ref="kumo-labs/c") == (
        "`i-a` is no longer in `kumo-labs/c` (replaced or removed since the plan was made)"
    )
    assert moved(request, cluster, ref="kumo-labs/c") == (
        "`i-a`, `i-b` are no longer in `kumo-labs/c` (replaced or removed since the plan was made)"
    )
    assert moved(request, None, ref="kumo-labs/c") == "`kumo-labs/c` is gone"


def test_a_node_alert_offers_replace_and_reboot_only_while_its_node_is_there() -> None:
    def episode(status: str) -> Episode:
        return Episode(
            org_id="kumo-labs", kind="node", backend="hyperpod", cluster_name="c", node_key="i-a", status=status
        )

    assert {Action.REPLACE, Action.REBOOT} <= set(NODE_KIND.actions([episode("Failure")]))
    for status in ("ShuttingDown", "gone"):
        assert NODE_KIND.actions([episode(status)]) == (Action.ACKNOWLEDGE, Action.SILENCE), status
