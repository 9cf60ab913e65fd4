"""The culprit in a job's throughput alert, end to end: simulated per-node metrics (sandbox.node_metrics)
in a real Prometheus (`prometheus_with`), read by Pitcrew's reader, the job's samples posted to the ingest
API, the throughput check as the scheduler runs it, the alert in the local Slack, and its Replace button
replacing the node in moto through the same plan and Confirm as a failed node's alert."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.config import MetricsConfig, ProgramConfig
from bot.ingest.tokens import create_token
from bot.node_metrics.series import Cause
from sandbox.moto_support import hyperpod_progress, reset_moto_server
from sandbox.node_metrics import Injected, NodeMetricsSimulator
from sandbox.slack import Message
from sandbox.world import Sandbox
from storage import crud
from storage.models import Episode
from tests.conftest import SeededAws
from tests.scenarios.conftest import body, sandbox_factory  # noqa: F401  (the scenario fixture, used here)
from tests.scenarios.test_cluster_changes import confirm_and_wait, worker_nodes
from tests.scenarios.test_throughput import CLUSTER, JOB, RATE, history, post

ALICE = "U0ALICE01"
KUMO = "C0KUMOLAB"
ORG = "kumo-labs"


def with_metrics(url: str, org_id: str = ORG) -> Callable[[ProgramConfig], ProgramConfig]:
    def transform(program: ProgramConfig) -> ProgramConfig:
        metrics = MetricsConfig(prometheus_url=url)
        orgs = [o.model_copy(update={"metrics": metrics}) if o.id == org_id else o for o in program.orgs]
        return program.model_copy(update={"orgs": orgs})

    return transform


def unused_url() -> str:
    """A Prometheus URL nothing listens on (a port just freed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def reseed(moto_endpoint: str) -> Iterator[None]:
    with hyperpod_progress(0.2, create_seconds=0.2, delete_seconds=0.2):
        yield
    reset_moto_server(moto_endpoint)  # a node was replaced: the next test gets the seeded program afresh


@pytest.fixture
def start(sandbox_factory: Callable[..., Any]) -> Callable[..., Any]:  # noqa: F811
    def make(**kwargs: Any) -> Any:
        return sandbox_factory(**kwargs)

    return make


async def slowed_job(world: Sandbox, now: datetime, *, since: datetime) -> None:
    """A healthy job until `since`, then at 40 % of its rate until `now`, through the ingest API."""
    services = world.pitcrew.services
    await services.monitor.sweep()  # the clusters Pitcrew knows (and their backends), as the node sweep records
    await services.drain()
    token = await create_token(services.db, org_id=ORG, created_by="test")
    steps = int((now - since).total_seconds() // 30)
    slow = [(since + timedelta(seconds=30 * (i + 1)), RATE * 0.4) for i in range(steps)]
    await post(world, token, history(since, tail=slow))


async def check(world: Sandbox) -> None:
    await world.pitcrew.services.throughput.check()
    await world.pitcrew.services.drain()


def alerts_in(world: Sandbox, text: str) -> list[Message]:
    return [m for m in world.slack.channel_messages(KUMO) if text in m.text and m.thread_ts is None]


def thread(world: Sandbox, message: Message) -> list[Message]:
    return [m for m in world.slack.messages if m.thread_ts == message.ts]


def action_ids(message: Message) -> set[str]:
    return {e["action_id"] for b in message.blocks if b["type"] == "actions" for e in b["elements"]}


async def job_episode(world: Sandbox) -> Episode:
    async with world.pitcrew.services.db.session() as session:
        (row,) = [r for r in await crud.open_episodes(session, org_id=ORG) if r.kind == "job"]
    return row


async def test_a_throttled_gpu_is_named_in_the_job_alert_and_replace_from_it_replaces_the_node(
    start: Callable[..., Any], prometheus_with: Callable[..., str], seeded_aws: SeededAws, reseed: None
) -> None:
    nodes = worker_nodes(seeded_aws)[:8]
    culprit = nodes[5]
    now = datetime.now(UTC).replace(microsecond=0)
    since = now - timedelta(minutes=12)
    simulator = NodeMetricsSimulator(cluster=CLUSTER, nodes=nodes, seed=7)
    simulator.inject(Injected(cause=Cause.THERMAL, node=culprit, start=since.timestamp(), end=None, gpu=3))
    url = prometheus_with(simulator.series(start=(now - timedelta(hours=2)).timestamp(), end=now.timestamp()))

    async with start(program_transform=with_metrics(url)) as world:
        await world.pitcrew.ready.wait()
        await slowed_job(world, now, since=since)
        await check(world)

        (alert,) = alerts_in(world, "Training slowed down")
        text = body(alert)
        assert f"Likely culprit: `{culprit}`" in text and "(thermal)" in text, text
        assert "GPU 3" in text, "the evidence names the throttled GPU"
        assert {"alert_replace", "alert_reboot"} <= action_ids(alert)
        row = await job_episode(world)
        assert row.cause == "thermal" and row.suspects[0] == culprit and row.node_ids == [culprit]
        charts = [m for m in thread(world, alert) if m.files and m.files[0]["filename"].endswith("-peers.png")]
        assert len(charts) == 1, "the suspect's chart against its peers is in the thread"
        assert world.slack.files[charts[0].files[0]["id"]].content.startswith(b"\x89PNG")
        faulty = [m for m in world.slack.channel_messages(KUMO) if "Faulty node" in m.text]
        assert not faulty, "the job alert names the node already: no second alert about it"
        reads = world.pitcrew.services.throughput.last_reads
        assert reads is not None and reads.reads[(ORG, CLUSTER)] == 1, "one read of the cluster per check"
        assert set(reads.reads.values()) == {1}

        await check(world)  # the same verdict a minute later: nothing edited, nothing said again
        assert len(alerts_in(world, "Training slowed down")) == 1
        assert len([m for m in thread(world, alert) if m.files and "-peers" in m.files[0]["filename"]]) == 1
        assert not [m for m in thread(world, alert) if "Per-node metrics now say" in m.text]

        await world.slack.click(user_id=ALICE, message=alert, action_id="alert_replace")
        plan = await world.slack.wait_for(lambda m: "Plan: replace" in m.text and culprit in m.text, timeout=15)
        assert "wipes the root and secondary volumes" in body(plan) and "Confirm replace" in str(plan.blocks)
        done = await confirm_and_wait(world, plan, f"Replacing nodes of kumo-labs/{CLUSTER}")
        assert "Done:" in done.text
        assert culprit not in worker_nodes(seeded_aws), "the culprit was replaced in moto"


async def test_an_unreadable_prometheus_still_posts_the_alert_with_the_reason_in_one_line(
    start: Callable[..., Any], seeded_aws: SeededAws
) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    url = unused_url()
    async with start(program_transform=with_metrics(url)) as world:
        await world.pitcrew.ready.wait()
        await slowed_job(world, now, since=now - timedelta(minutes=12))
        await check(world)
        (alert,) = alerts_in(world, "Training slowed down")
        text = body(alert)
        sections = [b["text"]["text"] for b in alert.blocks if b["type"] == "section" and "text" in b]
        (line,) = [part for s in sections for part in s.splitlines() if "Per-node metrics could not be read" in part]
        assert "127.0.0.1" in line and "Traceback" not in text
        assert "alert_replace" not in action_ids(alert)
        row = await job_episode(world)
        assert row.cause == "" and row.suspects == [], "not assessed"


async def test_an_org_without_metrics_gets_the_alert_it_always_had(
    start: Callable[..., Any], seeded_aws: SeededAws
) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    async with start() as world:
        await world.pitcrew.ready.wait()
        await slowed_job(world, now, since=now - timedelta(minutes=12))
        await check(world)
        (alert,) = alerts_in(world, "Training slowed down")
        assert "Per-node metrics" not in body(alert) and "culprit" not in body(alert)
        assert action_ids(alert) == {"alert_ack", "alert_silence_1", "alert_silence_4", "alert_silence_24"}
        row = await job_episode(world)
        assert row.cause == "" and row.suspects == [] and row.node_ids == []
        reads = world.pitcrew.services.throughput.last_reads
        assert reads is not None and not reads.reads, "no org has metrics: nothing is read"
        assert JOB in alert.text


async def test_a_verdict_reached_after_a_restart_edits_the_alert_and_tells_its_thread(
    start: Callable[..., Any], prometheus_with: Callable[..., str], seeded_aws: SeededAws
) -> None:
    """The alert opened while Prometheus was unreachable; the bot restarts (state is the episode table) with
    Prometheus back: the next check names the culprit, edits the alert, says it in the thread with the chart,
    and the Replace button appears."""
    nodes = worker_nodes(seeded_aws)[:6]
    culprit = nodes[1]
    now = datetime.now(UTC).replace(microsecond=0)
    since = now - timedelta(minutes=12)
    simulator = NodeMetricsSimulator(cluster=CLUSTER, nodes=nodes, seed=5)
    simulator.inject(Injected(cause=Cause.NETWORK, node=culprit, start=since.timestamp(), end=None))
    url = prometheus_with(simulator.series(start=(now - timedelta(hours=2)).timestamp(), end=now.timestamp()))

    async with start(program_transform=with_metrics(unused_url())) as first:
        await first.pitcrew.ready.wait()
        await slowed_job(first, now, since=since)
        await check(first)
        (alert,) = alerts_in(first, "Training slowed down")
        assert "Per-node metrics could not be read" in body(alert)
        slack = first.slack

    async with start(program_transform=with_metrics(url), slack=slack) as world:
        await world.pitcrew.ready.wait()
        await check(world)
        edited = next(m for m in world.slack.messages if m.ts == alert.ts and m.channel == alert.channel)
        text = body(edited)
        assert f"Likely culprit: `{culprit}`" in text and "(network)" in text, text
        assert "could not be read" not in text
        assert {"alert_replace", "alert_reboot"} <= action_ids(edited)
        notes = [m for m in thread(world, alert) if "Per-node metrics now say" in m.text]
        assert len(notes) == 1 and culprit in notes[0].text
        assert [m for m in thread(world, alert) if m.files and m.files[0]["filename"].endswith("-peers.png")]
        assert len(alerts_in(world, "Training slowed down")) == 1, "the same alert, edited: not a second one"
        row = await job_episode(world)
        assert (row.cause, row.suspects[:1]) == ("network", [culprit])


async def test_a_job_alert_naming_a_node_with_a_faulty_node_alert_open_links_to_it(
    start: Callable[..., Any], prometheus_with: Callable[..., str], seeded_aws: SeededAws
) -> None:
    """The node diverged before the job slowed: its faulty_node alert is open when the job alert names it.
    No second faulty alert, and the job alert's thread points at the one there is."""
    nodes = worker_nodes(seeded_aws)[:6]
    culprit = nodes[3]
    now = datetime.now(UTC).replace(microsecond=0)
    since = now - timedelta(minutes=12)
    simulator = NodeMetricsSimulator(cluster=CLUSTER, nodes=nodes, seed=9)
    simulator.inject(
        Injected(cause=Cause.NETWORK, node=culprit, start=(now - timedelta(minutes=40)).timestamp(), end=None)
    )
    url = prometheus_with(simulator.series(start=(now - timedelta(hours=2)).timestamp(), end=now.timestamp()))

    async with start(program_transform=with_metrics(url)) as world:
        await world.pitcrew.ready.wait()
        await slowed_job(world, now, since=since)
        desk = world.pitcrew.services.alerts
        desk.clock = lambda: now - timedelta(minutes=16)  # before the job slowed
        await check(world)
        assert not alerts_in(world, "Training slowed down")
        (faulty,) = alerts_in(world, "Faulty node")
        assert culprit in faulty.text and "(network)" in faulty.text

        desk.clock = lambda: now
        await check(world)
        (alert,) = alerts_in(world, "Training slowed down")
        assert f"Likely culprit: `{culprit}`" in body(alert)
        links = [m for m in thread(world, alert) if "faulty-node alert" in m.text and culprit in m.text]
        assert len(links) == 1, [m.text for m in thread(world, alert)]
        assert len(alerts_in(world, "Faulty node")) == 1, "still the one faulty-node alert"


async def test_one_cause_line_the_metrics_verdict_first_then_a_node_failure_under_way_as_it_began(
    start: Callable[..., Any], prometheus_with: Callable[..., str], seeded_aws: SeededAws
) -> None:
    """Issue 21: the alert said "Likely cause: node failure in the same window" naming nodes replaced long
    before, then a second, contradicting "Likely culprit" line from the metrics."""
    nodes = worker_nodes(seeded_aws)[:8]
    culprit, failed = nodes[5], nodes[2]
    now = datetime.now(UTC).replace(microsecond=0)
    since = now - timedelta(minutes=12)
    simulator = NodeMetricsSimulator(cluster=CLUSTER, nodes=nodes, seed=7)
    simulator.inject(Injected(cause=Cause.THERMAL, node=culprit, start=since.timestamp(), end=None, gpu=3))
    url = prometheus_with(simulator.series(start=(now - timedelta(hours=2)).timestamp(), end=now.timestamp()))

    async with start(program_transform=with_metrics(url)) as world:
        await world.pitcrew.ready.wait()
        async with world.pitcrew.services.db.session() as session:  # as the node monitor stored it
            session.add(
                Episode(
                    org_id=ORG,
                    backend="hyperpod",
                    cluster_name=CLUSTER,
                    node_key=failed,
                    kind="node",
                    state="open",
                    node_ids=[failed],
                    status="Failure",
                    opened_at=since + timedelta(minutes=1),
                    failing_since=since + timedelta(minutes=1),
                    updated_at=since + timedelta(minutes=1),
                )
            )
            await session.commit()
        await slowed_job(world, now, since=since)
        await check(world)

        (alert,) = alerts_in(world, "Training slowed down")
        shown = body(alert)[len(alert.text) :]  # the blocks (the fallback text repeats them)
        assert shown.count("Likely") == 1, shown
        assert shown.index(f"Likely culprit: `{culprit}`") < shown.index(f"A node also failed as it began: `{failed}`")
