"""Faulty-node alerts end to end: a simulated cluster's per-node metrics in a real Prometheus, the throughput
check (as the scheduler runs it, its clock moved along the history), the alerts in the local Slack.

One history holds the whole story: a node whose EFA degrades and recovers (opened, then closed as back in
line), and a node that throttles and is then replaced (opened, then closed as gone), among healthy peers
that never get an alert. No training job runs: a faulty node is alerted before any job slows."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.node_metrics.series import Cause
from sandbox.node_metrics import Injected, NodeMetricsSimulator, Replacement
from sandbox.slack import Message
from sandbox.world import Sandbox
from storage import crud
from storage.models import Episode
from tests.conftest import SeededAws
from tests.monitor.test_jobs_culprit import with_metrics
from tests.scenarios.conftest import COORDINATION, body, sandbox_factory  # noqa: F401  (the scenario fixture)
from tests.scenarios.test_cluster_changes import worker_nodes

ALICE = "U0ALICE01"
KUMO = "C0KUMOLAB"
ORG, CLUSTER = "kumo-labs", "kumo-p5-train"
NEW_NODE = "i-0feedface00000001"


def faulty_alerts(world: Sandbox, node: str, channel: str = KUMO) -> list[Message]:
    return [
        m
        for m in world.slack.channel_messages(channel)
        if m.thread_ts is None and node in m.text and "aulty node" in m.text
    ]


def now_of(world: Sandbox, message: Message) -> Message:
    return next(m for m in world.slack.messages if m.ts == message.ts and m.channel == message.channel)


def thread(world: Sandbox, message: Message) -> list[Message]:
    return [m for m in world.slack.messages if m.thread_ts == message.ts]


async def faulty_episodes(world: Sandbox) -> list[Episode]:
    async with world.pitcrew.services.db.session() as session:
        rows = await crud.episodes_between(
            session, org_id=ORG, since=datetime(2000, 1, 1, tzinfo=UTC), until=datetime(2100, 1, 1, tzinfo=UTC)
        )
    return [r for r in rows if r.kind == "faulty_node"]


def story(seeded_aws: SeededAws, prometheus_with: Callable[..., str]) -> tuple[datetime, str, str, str]:
    """The history both tests read (the same content, so the same Prometheus): its start, the node whose EFA
    degrades over [30, 90) min, the node throttled from 120 min and replaced at 150 min, and the URL."""
    nodes = worker_nodes(seeded_aws)[:8]
    degraded, throttled = nodes[2], nodes[6]
    t0 = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=4)

    def at(minutes: float) -> float:
        return (t0 + timedelta(minutes=minutes)).timestamp()

    simulator = NodeMetricsSimulator(
        cluster=CLUSTER,
        nodes=nodes,
        seed=11,
        replacements=[Replacement(old=throttled, new=NEW_NODE, at=at(150))],
    )
    simulator.inject(Injected(cause=Cause.NETWORK, node=degraded, start=at(30), end=at(90)))
    simulator.inject(Injected(cause=Cause.THERMAL, node=throttled, start=at(120), end=None))
    return t0, degraded, throttled, prometheus_with(simulator.series(start=at(0), end=at(180)))


async def test_a_faulty_node_opens_an_alert_that_closes_when_it_recovers_or_leaves(
    sandbox_factory: Callable[..., Any],  # noqa: F811
    prometheus_with: Callable[..., str],
    seeded_aws: SeededAws,
) -> None:
    t0, degraded, throttled, url = story(seeded_aws, prometheus_with)

    async with sandbox_factory(program_transform=with_metrics(url)) as world:
        await world.pitcrew.ready.wait()
        services = world.pitcrew.services
        await services.monitor.sweep()  # the clusters Pitcrew knows, as the node sweep records them
        await services.drain()

        async def check(minutes: float, *, replicas: int = 1) -> None:
            services.alerts.clock = lambda: t0 + timedelta(minutes=minutes)
            await asyncio.gather(*(services.throughput.check() for _ in range(replicas)))
            await services.drain()

        await check(20)
        assert not await faulty_episodes(world), "a healthy cluster has no faulty node"

        await check(45, replicas=2)  # two checks at once (two replicas' worth): one alert
        (alert,) = faulty_alerts(world, degraded)
        text = body(alert)
        assert f"Faulty node: `{degraded}` of `kumo-labs/{CLUSTER}` (network)" in text, text
        assert "EFA" in text, "the evidence says what diverges"
        buttons = {e["action_id"] for b in alert.blocks if b["type"] == "actions" for e in b["elements"]}
        assert {"alert_ack", "alert_replace", "alert_reboot", "alert_silence_1"} <= buttons
        assert any(m.files and m.files[0]["filename"].endswith("-peers.png") for m in thread(world, alert))
        assert faulty_alerts(world, degraded, COORDINATION), "the coordination channel has its line"
        (row,) = await faulty_episodes(world)
        assert (row.node_key, row.cause, row.suspects, row.state) == (degraded, "network", [degraded], "open")
        assert row.failing_since is not None and row.failing_since <= t0 + timedelta(minutes=40)

        await check(46)
        assert len(faulty_alerts(world, degraded)) == 1, "a lasting fault is one alert"
        await world.slack.click(user_id=ALICE, message=alert, action_id="alert_replace")
        plan = await world.slack.wait_for(lambda m: "Plan: replace" in m.text and degraded in m.text, timeout=15)
        assert "Confirm replace" in str(plan.blocks), "the same plan and Confirm as a failed node's alert"

        await check(105)  # its EFA recovered at 90 min
        closed = now_of(world, alert)
        assert closed.text.startswith("Back in line with its peers"), closed.text
        assert "alert_ack" not in str(closed.blocks), "a closed alert has no buttons"
        assert any("Recovered" in m.text and degraded in m.text for m in thread(world, alert))

        await check(140)  # throttled since 120 min
        (second,) = faulty_alerts(world, throttled)
        assert "(thermal)" in second.text

        await check(170)  # replaced at 150 min: its series ended, its replacement reports
        gone = now_of(world, second)
        assert gone.text.startswith("Left the cluster"), gone.text
        assert any("left the cluster" in m.text for m in thread(world, second))

        episodes = await faulty_episodes(world)
        assert sorted((e.node_key, e.state, e.status) for e in episodes) == sorted(
            [(degraded, "closed", "cleared"), (throttled, "closed", "left")]
        ), "no healthy peer, and not the replacement, got an alert"
        reads = services.throughput.last_reads
        assert reads is not None and set(reads.reads.values()) == {1}, "one read per cluster per check"


async def test_a_node_label_that_looks_like_a_mention_mentions_nobody(
    sandbox_factory: Callable[..., Any],  # noqa: F811
    prometheus_with: Callable[..., str],
    seeded_aws: SeededAws,
) -> None:
    """Node ids come from the org's exporters' labels: whatever they say is shown, never acted on by Slack."""
    tricky = "<!channel> i-0bad"
    nodes = ["i-0aaa0000000000001", "i-0aaa0000000000002", tricky, "i-0aaa0000000000004"]
    t0 = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(hours=2)
    simulator = NodeMetricsSimulator(cluster=CLUSTER, nodes=nodes, gpus_per_node=2, seed=3)
    simulator.inject(
        Injected(cause=Cause.THERMAL, node=tricky, start=(t0 + timedelta(minutes=20)).timestamp(), end=None)
    )
    simulator.clear(at=(t0 + timedelta(minutes=50)).timestamp())
    url = prometheus_with(simulator.series(start=t0.timestamp(), end=(t0 + timedelta(minutes=80)).timestamp()))

    async with sandbox_factory(program_transform=with_metrics(url)) as world:
        await world.pitcrew.ready.wait()
        services = world.pitcrew.services
        await services.monitor.sweep()
        await services.drain()
        for minutes in (40, 70):  # opened while throttled, closed once back in line
            services.alerts.clock = lambda minutes=minutes: t0 + timedelta(minutes=minutes)
            await services.throughput.check()
            await services.drain()
        posted = [m for m in world.slack.messages if "i-0bad" in m.text or "i-0bad" in str(m.blocks)]
        assert posted, "the alert and its notes were posted"
        for message in posted:
            assert "<!channel>" not in message.text and "<!channel>" not in str(message.blocks), message.text
        assert any("&lt;!channel&gt;" in str(m.blocks) for m in posted)


async def test_a_silenced_cluster_holds_back_a_faulty_node_alert_as_one_line_in_the_silenced_thread(
    sandbox_factory: Callable[..., Any],  # noqa: F811
    prometheus_with: Callable[..., str],
    seeded_aws: SeededAws,
) -> None:
    t0, degraded, throttled, url = story(seeded_aws, prometheus_with)
    async with sandbox_factory(program_transform=with_metrics(url)) as world:
        await world.pitcrew.ready.wait()
        services = world.pitcrew.services
        await services.monitor.sweep()
        await services.drain()

        async def check(minutes: float) -> None:
            services.alerts.clock = lambda: t0 + timedelta(minutes=minutes)
            await services.throughput.check()
            await services.drain()

        await check(45)
        (alert,) = faulty_alerts(world, degraded)
        await world.slack.click(user_id=ALICE, message=alert, action_id="alert_silence_24")
        await world.slack.wait_for(lambda m: m.thread_ts == alert.ts and "Silenced until" in m.text, timeout=15)
        await check(140)  # the throttled node diverges now, under the silence
        assert not faulty_alerts(world, throttled), "held back: no message in the channel"
        (held,) = [m for m in thread(world, alert) if "Held back" in m.text]
        assert f"faulty node {throttled} (thermal)" in held.text
        await check(170)  # it left while silenced: closed, nothing posted in the channel
        assert not faulty_alerts(world, throttled)
        states = {(e.node_key, e.state, e.silenced) for e in await faulty_episodes(world)}
        assert (throttled, "closed", True) in states
