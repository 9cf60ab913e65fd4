"""A degradation notice end to end (issue 23): a job 7 % below its level for 4 hours, checked by the throughput
monitor as the scheduler runs it, on a clock fixed by the test. One low-urgency message in the org's channel (no
line in the coordination channel, never escalated), its chart in the thread, edited while it lasts, closed when
the job is back; never a slowdown alert for the same episode; stored as kind "degradation" and counted in the
org's digest preview (a signed /digest command)."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from sqlmodel import select

from bot.digest.weeks import parse_week
from sandbox.slack import Message
from sandbox.world import Sandbox
from storage import crud
from storage.models import Episode, ThroughputSample
from tests.scenarios.conftest import ADMIN, COORDINATION, body
from tests.scenarios.test_digest import digest_command

KUMO = "C0KUMOLAB"
CLUSTER, JOB = "kumo-p5-train", "deg-probe-70b"  # a job of its own: the sandbox's jobs report at today's time
WEEK = parse_week("2026-W47", ZoneInfo("Asia/Tokyo"))
T0 = WEEK.start + timedelta(days=1)  # the job starts; fixed instants only
RATE = 480_000.0
DROP_FROM, DROP_UNTIL, FACTOR = T0 + timedelta(hours=30), T0 + timedelta(hours=34), 0.93


@pytest.fixture
async def world(sandbox_factory: Callable[..., Any]) -> AsyncIterator[Sandbox]:
    async with sandbox_factory() as sandbox:
        await sandbox.pitcrew.ready.wait()
        await sandbox.pitcrew.services.drain()
        yield sandbox


def samples() -> list[ThroughputSample]:
    """A quiet job (+-1 %) on 16 nodes reporting every minute for 38 hours, 7 % down from 30 h to 34 h."""
    rng = random.Random(23)
    base = {"org_id": "kumo-labs", "cluster": CLUSTER, "job": JOB}
    rows = [ThroughputSample(**base, ts=T0, event="start", received_at=T0, nodes=16)]
    for minute in range(1, 38 * 60):
        ts = T0 + timedelta(minutes=minute)
        factor = FACTOR if DROP_FROM <= ts < DROP_UNTIL else 1.0
        value = RATE * factor * (1 + rng.uniform(-0.01, 0.01))
        rows.append(ThroughputSample(**base, ts=ts, tokens_per_second=value, received_at=ts, nodes=16))
    return rows


def top_level(world: Sandbox, channel: str) -> list[Message]:
    return [m for m in world.slack.channel_messages(channel) if m.thread_ts is None and JOB in body(m)]


async def test_a_lasting_small_drop_is_one_notice_edited_closed_and_counted_in_the_digest(world: Sandbox) -> None:
    services = world.pitcrew.services
    now = T0
    services.alerts.clock = lambda: now
    async with services.db.session() as session:
        await crud.store_samples(session, samples=samples())

    async def check_at(hours: float) -> None:
        nonlocal now
        now = T0 + timedelta(hours=hours)
        await services.throughput.check()
        await services.drain()
        if services.escalation is not None:
            await services.escalation.check()  # a notice is never escalated, however long nobody owns it
            await services.drain()

    for hours in (29, 31):
        await check_at(hours)
    assert top_level(world, KUMO) == [], "not before the drop has lasted 2 hours"
    await check_at(32.5)
    (notice,) = top_level(world, KUMO)
    text = body(notice)
    assert "Throughput degraded" in text and "low urgency" in text and "Down 7 %" in text, text
    assert "No node of this cluster failed as it began" in text
    actions = {e["action_id"] for b in notice.blocks if b["type"] == "actions" for e in b["elements"]}
    assert "alert_ack" in actions and not {"alert_replace", "alert_reboot"} & actions
    charts = [m for m in world.slack.messages if m.thread_ts == notice.ts and m.files]
    assert len(charts) == 1, "its chart in the thread"

    assert "for 2 h" in text
    await check_at(33.5)
    edited = next(m for m in world.slack.messages if m.ts == notice.ts and m.channel == KUMO)
    assert edited.edits >= 1 and "for 3 h" in body(edited), "edited as it lasts"
    for hours in (34.5, 35.5, 36.5, 37.5):
        await check_at(hours)

    (closed,) = top_level(world, KUMO)
    assert closed.ts == notice.ts and "Degradation over after" in body(closed), body(closed)
    assert "Throughput is back at its level" in body(closed)
    assert any("Throughput is back" in m.text for m in world.slack.messages if m.thread_ts == notice.ts)
    assert not any("Training slowed down" in body(m) or "Training stalled" in body(m) for m in top_level(world, KUMO))
    assert top_level(world, COORDINATION) == [], "a low-urgency notice: no coordination line, no escalation"
    async with services.db.session() as session:
        stored = (await session.exec(select(Episode).where(Episode.node_key == JOB))).all()
    assert [(e.kind, e.status, e.state) for e in stored] == [("degradation", "degradation", "closed")]
    assert DROP_FROM - timedelta(minutes=30) <= stored[0].failing_since <= DROP_FROM + timedelta(minutes=30)
    assert stored[0].opened_at >= DROP_FROM + timedelta(hours=2)

    moment = WEEK.end + timedelta(hours=1)
    services.digest.clock = services.records.clock = lambda: moment
    preview = await digest_command(world, "preview kumo-labs --week 2026-W47", user=ADMIN, channel=KUMO)
    shown = body(preview)
    assert "*Throughput episodes*: " in shown and "1 degradation" in shown, shown
    assert f"degradation of `{JOB}` on `{CLUSTER}`" in shown
