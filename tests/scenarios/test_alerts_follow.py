"""Issue 21, "alerts follow their subject to the end", through the HTTP app, moto and the local Slack: an
escalation is edited with its alert (acknowledged, recovered); a failure a silence held back is posted when
the silence ends (pressed or run out) and escalates counting from then; a recovered node alert says what
failed and what it is now; a job alert has one cause line, naming only a node failure under way when the
job's trouble began; an idle notice closes saying what happened to its nodes, and is edited hourly."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.clusters.model import Backend
from bot.config import ProgramConfig
from bot.ingest.tokens import create_token
from sandbox.moto_support import hyperpod_progress, reset_moto_server, set_hyperpod_node_status
from sandbox.slack import Message
from sandbox.world import Sandbox
from storage.models import Episode
from tests.conftest import SeededAws
from tests.scenarios.conftest import COORDINATION, body
from tests.scenarios.test_node_alerts import ACCOUNT, REGION, TRAIN, XID, running_workers
from tests.scenarios.test_throughput import CLUSTER, JOB, history, post

ALICE = "U0ALICE01"
KUMO = "C0KUMOLAB"
DEV = "kumo-p5-dev"  # ParallelCluster, 4 x p5.48xlarge and no job: the seeded program's idle cluster


@pytest.fixture
def reseed(moto_endpoint: str) -> Iterator[None]:
    with hyperpod_progress(0.2, create_seconds=0.2, delete_seconds=0.2):
        yield
    reset_moto_server(moto_endpoint)  # nodes failed or fleets stopped: the next test gets the seed afresh


@pytest.fixture
async def world(sandbox_factory: Callable[..., Any], reseed: None) -> AsyncIterator[Sandbox]:
    async with sandbox_factory() as sandbox:
        await sandbox.pitcrew.ready.wait()
        await sandbox.pitcrew.services.drain()
        await sandbox.pitcrew.services.monitor.sweep()  # the seeded failures: opened now, not looked at below
        await sandbox.pitcrew.services.drain()
        yield sandbox


class Clock:
    """The desk's clock (the node monitor's, the escalation pass's, the idle check's), set by the test."""

    def __init__(self, world: Sandbox, start: datetime) -> None:
        self.now = start
        world.pitcrew.services.alerts.clock = lambda: self.now

    def at(self, later: timedelta) -> None:
        self.now += later


def top_level(world: Sandbox, channel: str, text: str) -> list[Message]:
    return [m for m in world.slack.channel_messages(channel) if m.thread_ts is None and text in m.text]


def now_of(world: Sandbox, message: Message) -> Message:
    return next(m for m in world.slack.messages if m.ts == message.ts and m.channel == message.channel)


def escalations(world: Sandbox, about: str) -> list[Message]:
    return [m for m in top_level(world, COORDINATION, about) if "acknowledged" in body(m).lower()]


async def sweep(world: Sandbox) -> None:
    await world.pitcrew.services.monitor.sweep()
    await world.pitcrew.services.drain()


async def escalate(world: Sandbox) -> int:
    assert world.pitcrew.services.escalation is not None
    posted = await world.pitcrew.services.escalation.check()
    await world.pitcrew.services.drain()
    return posted


async def test_an_escalation_is_edited_when_its_alert_is_acknowledged_and_when_it_recovers(
    world: Sandbox, seeded_aws: SeededAws
) -> None:
    clock = Clock(world, datetime.now(UTC))
    node = running_workers(seeded_aws)[0]
    set_hyperpod_node_status(ACCOUNT, REGION, TRAIN, node, "Failure", XID)
    await sweep(world)
    (alert,) = top_level(world, KUMO, node)
    clock.at(timedelta(minutes=31))
    await escalate(world)
    (escalated,) = escalations(world, node)
    assert "alert_ack" in str(escalated.blocks)

    await world.slack.click(user_id=ALICE, message=alert, action_id="alert_ack")  # on the alert, not the repost
    acked = await world.slack.wait_for(lambda m: m.ts == escalated.ts and "Acknowledged by" in body(m))
    assert "alert_ack" not in str(acked.blocks), "nothing left to acknowledge"
    assert f"Acknowledged by <@{ALICE}>" in body(acked)

    set_hyperpod_node_status(ACCOUNT, REGION, TRAIN, node, "Running")
    clock.at(timedelta(minutes=5))
    await sweep(world)
    over = body(now_of(world, escalated))
    assert "recovered after" in over and ":red_circle:" not in over and ":rotating_light:" not in over, over


async def test_a_failure_held_back_by_a_silence_is_posted_when_it_is_ended_and_escalates_from_then(
    world: Sandbox, seeded_aws: SeededAws
) -> None:
    clock = Clock(world, datetime.now(UTC))
    first, second = running_workers(seeded_aws)[:2]
    set_hyperpod_node_status(ACCOUNT, REGION, TRAIN, first, "Failure", XID)
    await sweep(world)
    (alert,) = top_level(world, KUMO, first)
    await world.slack.click(user_id=ALICE, message=alert, action_id="alert_ack")
    await world.slack.click(user_id=ALICE, message=alert, action_id="alert_silence_1")
    silenced = await world.slack.wait_for(lambda m: m.thread_ts == alert.ts and "Silenced until" in m.text)
    set_hyperpod_node_status(ACCOUNT, REGION, TRAIN, second, "Failure", XID)
    await sweep(world)
    assert not top_level(world, KUMO, second), "held back while the silence lasts"

    clock.at(timedelta(minutes=40))
    await sweep(world)
    await world.slack.click(user_id=ALICE, message=silenced, action_id="alert_unsilence")
    posted = await world.slack.wait_for(lambda m: m.thread_ts is None and "Node failed" in m.text and second in m.text)
    assert posted.channel == KUMO and "alert_ack" in str(posted.blocks)
    await world.slack.wait_for(lambda m: m.channel == COORDINATION and second in m.text)  # and its line there

    clock.at(timedelta(minutes=5))
    await escalate(world)
    assert not escalations(world, second), "posted 5 minutes ago: not escalated for its 40 minutes held back"
    clock.at(timedelta(minutes=26))
    await escalate(world)
    assert len(escalations(world, second)) == 1


async def test_a_failure_held_back_is_posted_by_the_sweep_after_its_silence_ran_out(
    world: Sandbox, seeded_aws: SeededAws
) -> None:
    clock = Clock(world, datetime.now(UTC))
    first, second = running_workers(seeded_aws)[:2]
    set_hyperpod_node_status(ACCOUNT, REGION, TRAIN, first, "Failure", XID)
    await sweep(world)
    (alert,) = top_level(world, KUMO, first)
    await world.slack.click(user_id=ALICE, message=alert, action_id="alert_silence_1")
    await world.slack.wait_for(lambda m: m.thread_ts == alert.ts and "Silenced until" in m.text)
    set_hyperpod_node_status(ACCOUNT, REGION, TRAIN, second, "Failure", XID)
    await sweep(world)
    assert not top_level(world, KUMO, second)

    clock.at(timedelta(minutes=61))
    await sweep(world)
    (posted,) = top_level(world, KUMO, second)
    assert "Node failed" in posted.text
    await sweep(world)
    assert len(top_level(world, KUMO, second)) == 1, "posted once"


async def test_a_recovered_node_alert_says_what_failed_and_what_it_is_now(
    world: Sandbox, seeded_aws: SeededAws
) -> None:
    node = running_workers(seeded_aws)[0]
    set_hyperpod_node_status(ACCOUNT, REGION, TRAIN, node, "Failure", XID)
    await sweep(world)
    (alert,) = top_level(world, KUMO, node)
    set_hyperpod_node_status(ACCOUNT, REGION, TRAIN, node, "Running")
    await sweep(world)
    text = body(now_of(world, alert))
    assert "Recovered after" in text
    assert f"with `Failure`: {XID}" in text, text
    assert f"*Now*\n`{node}` is Running again" in text, text
    assert "*Status*" not in text, "no status that reads as if it still failed"


async def test_a_job_alert_has_one_cause_line_naming_only_a_failure_under_way_when_it_began(
    world: Sandbox, seeded_aws: SeededAws
) -> None:
    services = world.pitcrew.services
    now = datetime.now(UTC)
    Clock(world, now)
    hung_at = now - timedelta(minutes=15)
    replaced, failing = running_workers(seeded_aws)[2:4]

    def failure(node: str, opened: datetime, closed: datetime | None) -> Episode:
        return Episode(
            org_id="kumo-labs",
            backend=Backend.HYPERPOD.value,
            cluster_name=CLUSTER,
            node_key=node,
            kind="node",
            state="open" if closed is None else "closed",
            node_ids=[node],
            group_name="worker-group-1",
            instance_type="ml.p5.48xlarge",
            status="Failure",
            message=XID,
            opened_at=opened,
            failing_since=opened,
            updated_at=closed or opened,
            closed_at=closed,
        )

    async with services.db.session() as session:  # as the node monitor stored them
        session.add(failure(replaced, hung_at - timedelta(minutes=35), hung_at - timedelta(minutes=10)))
        session.add(failure(failing, hung_at + timedelta(minutes=1), None))
        await session.commit()
    token = await create_token(services.db, org_id="kumo-labs", created_by="test")
    await post(world, token, history(hung_at))
    await services.throughput.check()
    await services.drain()
    (alert,) = top_level(world, KUMO, "Training stalled")
    text = body(alert)
    assert failing in text, "a node that failed as the job hung is offered"
    assert replaced not in text, "a node failed and replaced before the hang is not"
    shown = text[len(alert.text) :]  # the blocks (the fallback text repeats them)
    assert shown.count("Likely") == 1, shown
    assert JOB in text


def idle_after_3_minutes(program: ProgramConfig) -> ProgramConfig:
    """kumo-labs' idle threshold as `pitcrew demo` sets it."""
    orgs = [o.model_copy(update={"idle_after_hours": 0.05}) if o.id == "kumo-labs" else o for o in program.orgs]
    return program.model_copy(update={"orgs": orgs})


async def test_an_idle_notice_is_edited_hourly_and_closes_saying_its_nodes_were_stopped(
    sandbox_factory: Callable[..., Any], reseed: None
) -> None:
    async with sandbox_factory(program_transform=idle_after_3_minutes) as world:
        await world.pitcrew.ready.wait()
        clock = Clock(world, datetime.now(UTC))
        clock.at(timedelta(minutes=4))
        await sweep(world)
        (notice,) = [m for m in top_level(world, KUMO, DEV) if "idle" in m.text]
        for _ in range(6):  # sweeps every 15 s, as in the demo (each sweep edited it before)
            clock.at(timedelta(seconds=15))
            await sweep(world)
        assert now_of(world, notice).edits == 0, "not an edit every few sweeps"
        clock.at(timedelta(minutes=59, seconds=30))
        await sweep(world)
        assert now_of(world, notice).edits == 1, "an hour after it opened: one edit"

        org = world.program.org("kumo-labs")
        assert org is not None
        backend: Any = world.pitcrew.services.fleet._backend(org, Backend.PCLUSTER)
        await asyncio.to_thread(lambda: backend.set_compute_fleet(name=DEV, status="STOP_REQUESTED"))
        world.pcluster_api.advance(ACCOUNT, REGION, DEV)
        clock.at(timedelta(minutes=1))
        await sweep(world)
        closed = now_of(world, notice)
        assert closed.text.startswith("Nodes stopped after"), closed.text
        assert "No longer idle" not in body(closed) and "Busy again" not in body(closed)
