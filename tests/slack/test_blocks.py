"""Block Kit builders keep Slack's limits and always carry a text fallback."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bot.clusters.fleet import OrgClusters
from bot.clusters.model import Backend, Cluster, Health, InstanceGroup, Node
from bot.slack import blocks

TZ = ZoneInfo("Asia/Tokyo")
NOW = datetime(2026, 11, 29, 3, 0, tzinfo=UTC)


def make_cluster(name: str, *, nodes: int, failed: int = 0, org: str = "kumo-labs") -> Cluster:
    node_list = tuple(
        Node(
            node_id=f"i-{i:017x}",
            group="worker-group-1",
            instance_type="ml.p5.48xlarge",
            status="Failure" if i < failed else "Running",
            health=Health.UNHEALTHY if i < failed else Health.HEALTHY,
            launch_time=NOW,
            message="GPU XID 79 <fallen off the bus>" if i < failed else "",
        )
        for i in range(nodes)
    )
    return Cluster(
        org=org,
        name=name,
        backend=Backend.HYPERPOD,
        status="InService",
        created=NOW,
        nodes=node_list,
        groups=(InstanceGroup(name="worker-group-1", instance_type="ml.p5.48xlarge", current=nodes, target=nodes),),
    )


def assert_within_limits(message: dict[str, Any]) -> None:
    assert message["text"]
    assert len(message["blocks"]) <= 50
    for block in message["blocks"]:
        if block["type"] == "section":
            assert len(block["text"]["text"]) <= 3000
        if block["type"] == "header":
            assert len(block["text"]["text"]) <= 150


@pytest.mark.parametrize("count", [1, 40, 41, 130, 1000])
def test_nodes_reply_fits_for_any_cluster_size(count: int) -> None:
    reply = blocks.cluster_nodes(make_cluster("big", nodes=count, failed=min(count, 3)), tz=TZ)
    assert_within_limits(reply.as_message())
    listed = sum(block["text"]["text"].count("`i-") for block in reply.blocks if block["type"] == "section")
    assert listed == (count if count <= 40 else 3)  # over 40: only the unhealthy nodes are listed
    assert f"{count} nodes" in reply.text


def test_nodes_failed_only_lists_only_unhealthy_and_first() -> None:
    reply = blocks.cluster_nodes(make_cluster("c", nodes=10, failed=2), tz=TZ, failed_only=True)
    body = "\n".join(b["text"]["text"] for b in reply.blocks if b["type"] == "section")
    assert body.count("`i-") == 2
    assert "&lt;fallen off the bus&gt;" in body  # AWS text is escaped, never read as a Slack link


def test_list_of_many_orgs_fits_and_says_what_is_hidden() -> None:
    results = [
        OrgClusters(org=f"org-{i}", clusters=[make_cluster(f"c{j}", nodes=8, org=f"org-{i}") for j in range(30)])
        for i in range(12)
    ]
    names = {f"org-{i}": f"Org {i}" for i in range(12)}
    reply = blocks.cluster_list(results, org_names=names, tz=TZ)
    assert_within_limits(reply.as_message())
    if len(reply.blocks) == 50:
        assert "not shown" in reply.blocks[-1]["elements"][0]["text"]


def test_list_shows_errors_as_lines() -> None:
    results = [
        OrgClusters(org="a", clusters=[make_cluster("c1", nodes=2, org="a")]),
        OrgClusters(org="b", errors=["HyperPod: AWS refused access (AccessDenied)"]),
    ]
    reply = blocks.cluster_list(results, org_names={"a": "A", "b": "B"}, tz=TZ)
    body = "\n".join(b["text"]["text"] for b in reply.blocks if b["type"] == "section")
    assert "c1" in body and "AccessDenied" in body
    assert "2 orgs" in reply.text


def test_times_are_shown_in_the_program_timezone() -> None:
    reply = blocks.cluster_status(make_cluster("c", nodes=1), org_name="Kumo Labs", tz=TZ)
    assert "2026-11-29 12:00 JST" in str(reply.blocks)
