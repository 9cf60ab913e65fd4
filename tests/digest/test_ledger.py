"""The usage ledger records what clusters hold as plans count it (bot.clusters.held): a scale under way holds its
target, a stopped compute fleet nothing, head nodes their own type; the quota notices count the same."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bot.clusters.model import Backend, Cluster, Health, InstanceGroup, Node
from bot.config import ProgramConfig
from bot.digest.ledger import UsageLedger
from bot.digest.render import SlackDigest
from bot.publishing import Reply
from storage import crud, tracking
from storage.db import Database
from storage.models import Org

AT = datetime(2026, 11, 16, 3, 0, tzinfo=UTC)
PROGRAM = ProgramConfig.model_validate(
    {
        "name": "Test",
        "coordination_channel": "C0PROGRAM",
        "orgs": [
            {
                "id": "kumo-labs",
                "name": "Kumo Labs",
                "channel": "C0KUMOLAB",
                "aws": {"account_id": "111111111111", "region": "us-east-1"},
                "quota": {"p5.48xlarge": 10},
            }
        ],
    }
)


class Posts:
    def __init__(self) -> None:
        self.posted: list[Reply] = []

    async def post(self, *, channel: str, reply: Reply, thread_ts: str | None = None) -> str:
        self.posted.append(reply)
        return "1.0"


def node(i: int, group: str, instance_type: str) -> Node:
    return Node(
        node_id=f"i-{group}{i}", group=group, instance_type=instance_type, status="running", health=Health.HEALTHY
    )


def dev(*, nodes: int, target: int, fleet: str) -> Cluster:
    return Cluster(
        org="kumo-labs",
        name="kumo-p5-dev",
        backend=Backend.PCLUSTER,
        status="UPDATE_COMPLETE",
        groups=(InstanceGroup("compute-gpu", "p5.48xlarge", current=nodes, target=target),),
        nodes=(node(0, "HeadNode", "m5.xlarge"), *(node(i, "compute-gpu", "p5.48xlarge") for i in range(nodes))),
        extra={"compute_fleet": fleet},
    )


def train(*, nodes: int, target: int) -> Cluster:
    return Cluster(
        org="kumo-labs",
        name="kumo-p5-train",
        backend=Backend.HYPERPOD,
        status="Updating",
        groups=(InstanceGroup("workers", "ml.p5.48xlarge", current=nodes, target=target),),
        nodes=tuple(node(i, "workers", "ml.p5.48xlarge") for i in range(nodes)),
    )


async def test_the_ledger_records_the_held_figure_and_notices_count_it(db: Database) -> None:
    posts = Posts()
    poster: Any = posts
    ledger = UsageLedger(db=db, poster=poster, program=PROGRAM, presenter=SlackDigest(), clock=lambda: AT)
    async with db.session() as session:  # the clusters table refers to its org (a foreign key on Postgres)
        await crud.sync_orgs(
            session,
            orgs=[
                Org(
                    id="kumo-labs",
                    name="Kumo Labs",
                    channel="C0KUMOLAB",
                    account_id="1" * 12,
                    region="us-east-1",
                    synced_at=AT,
                )
            ],
        )
    # A stopped fleet scaled to 2 (nothing runs) and a HyperPod group scaling from 4 to 8.
    await ledger.observe("kumo-labs", [dev(nodes=0, target=2, fleet="STOPPED"), train(nodes=4, target=8)])
    async with db.session() as session:
        assert await tracking.held_now(session, org_id="kumo-labs") == {"m5.xlarge": 1, "p5.48xlarge": 8}
        seen = {c.name: c.instances for c in await crud.clusters_seen(session)}
    assert seen == {"kumo-p5-dev": {"m5.xlarge": 1}, "kumo-p5-train": {"ml.p5.48xlarge": 8}}
    assert [r.text for r in posts.posted] == ["Kumo Labs holds 8 of 10 p5.48xlarge instances, past 80% of its quota"]
