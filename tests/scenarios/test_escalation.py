"""Escalation end to end: the seeded failed node's alert (posted by the node monitor's sweep), the escalation
pass as the scheduler runs it with the desk's clock injected, the coordination channel of the local Slack,
and the Acknowledge button pressed as Slack sends it (signed), before or on the escalation itself."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sandbox.slack import Message
from sandbox.world import Sandbox
from tests.scenarios.conftest import COORDINATION, body

ALICE, BOB = "U0ALICE01", "U0BOB0001"  # kumo-labs: operator, viewer
KUMO = "C0KUMOLAB"
TRAIN = "kumo-p5-train"  # the seed fails one of its nodes (GPU XID 79)


@pytest.fixture
async def world(sandbox_factory: Callable[..., Any]) -> AsyncIterator[Sandbox]:
    async with sandbox_factory() as sandbox:
        await sandbox.pitcrew.ready.wait()
        await sandbox.pitcrew.services.drain()
        await sandbox.pitcrew.services.monitor.sweep()  # the seeded failures are alerted now
        await sandbox.pitcrew.services.drain()
        yield sandbox


def the_alert(world: Sandbox) -> Message:
    (alert,) = [m for m in world.slack.channel_messages(KUMO) if m.thread_ts is None and "Node failed" in m.text]
    return alert


def escalations(world: Sandbox, about: str = TRAIN) -> list[Message]:
    return [
        m for m in world.slack.channel_messages(COORDINATION) if "Not acknowledged after" in m.text and about in m.text
    ]


async def escalate_at(world: Sandbox, moment: datetime) -> int:
    services = world.pitcrew.services
    services.alerts.clock = lambda: moment  # the desk's injectable clock, the escalation pass's too
    assert services.escalation is not None
    posted = await services.escalation.check()
    await services.drain()
    return posted


async def test_an_unacknowledged_alert_escalates_once_and_its_acknowledge_works_from_there(world: Sandbox) -> None:
    alert = the_alert(world)
    now = datetime.now(UTC)
    await escalate_at(world, now + timedelta(minutes=20))
    assert not escalations(world), "before the org's 30 minutes: nothing"

    await escalate_at(world, now + timedelta(minutes=31))
    await escalate_at(world, now + timedelta(minutes=45))
    (escalated,) = escalations(world)
    text = body(escalated)
    assert f"<@{ALICE}>" in text and f"<@{BOB}>" not in text, "the org's operators are mentioned"
    permalink = await world.pitcrew.services.alerts.permalink(KUMO, alert.ts)  # chat.getPermalink
    assert permalink and f"<{permalink}|Open the alert>" in text
    assert any(
        "Nobody acknowledged this within 30 min" in m.text for m in world.slack.messages if m.thread_ts == alert.ts
    )
    assert "escalated to the coordination channel" in body(next(m for m in world.slack.messages if m.ts == alert.ts))

    await world.slack.click(user_id=ALICE, message=escalated, action_id="alert_ack")
    await world.slack.wait_for(lambda m: m.ts == alert.ts and "acknowledged by <@U0ALICE01>" in body(m))


async def test_an_alert_acknowledged_before_the_deadline_never_escalates(world: Sandbox) -> None:
    alert = the_alert(world)
    await world.slack.click(user_id=ALICE, message=alert, action_id="alert_ack")
    await world.slack.wait_for(lambda m: m.ts == alert.ts and "acknowledged by <@U0ALICE01>" in body(m))
    now = datetime.now(UTC)
    for later in (timedelta(minutes=31), timedelta(hours=3), timedelta(days=1)):
        await escalate_at(world, now + later)
    assert not escalations(world)
    assert escalations(world, "fuji-p5-pretrain"), "other orgs' unacknowledged alerts do escalate"
