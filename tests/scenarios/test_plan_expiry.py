"""A plan expires: its quota check and prices were true when it was made. Confirm on an expired plan says
so, removes the buttons, changes nothing in AWS and is audited as refused; inside its ttl Confirm starts it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bot.config import Settings
from sandbox.moto_support import hyperpod_progress, reset_moto_server
from sandbox.slack import Message
from sandbox.world import Sandbox
from storage import crud
from storage.models import utcnow
from tests.conftest import SeededAws
from tests.scenarios.conftest import ask, body

ALICE, KUMO = "U0ALICE01", "C0KUMOLAB"
SCALE = "scale kumo-p5-train worker-group-1 33"
TOKYO = ZoneInfo("Asia/Tokyo")  # the example program's time zone


class Clock:
    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


async def planned_at(world: Sandbox, clock: Clock) -> Message:
    world.pitcrew.services.operations.clock = clock
    planned = await ask(world, user=ALICE, channel=KUMO, text=SCALE)
    assert "operation_confirm" in str(planned.blocks)
    return planned


async def click_confirm(world: Sandbox, planned: Message) -> Message:
    response = await world.slack.click(user_id=ALICE, message=planned, action_id="operation_confirm")
    assert response.status_code == 200
    return await world.slack.wait_for(lambda m: m.ts == planned.ts and m.edits >= 1, timeout=15)


async def last_audit(world: Sandbox) -> tuple[str, str, str]:
    await world.pitcrew.services.drain()
    async with world.pitcrew.services.db.session() as session:
        (last, *_) = await crud.audit_entries(session, org_id="kumo-labs")
    return last.command, last.outcome, last.detail


async def test_confirm_after_30_minutes_says_the_plan_expired_and_changes_nothing(
    sandbox: Sandbox, seeded_aws: SeededAws, clock: Clock
) -> None:
    planned = await planned_at(sandbox, clock)
    before = seeded_aws.state()
    made = clock.now
    clock.now += timedelta(minutes=31)
    answered = await click_confirm(sandbox, planned)
    expected_time = (made + timedelta(minutes=30)).astimezone(TOKYO).strftime("%H:%M")
    assert (
        f"This plan expired at {expected_time} (30 min after it was made); "
        "run the command again for current quota and prices." in body(answered)
    )
    assert not any(block.get("type") == "actions" for block in answered.blocks), "offers nothing to press"
    assert "operation_confirm" not in str(answered.blocks)
    assert seeded_aws.state() == before, "no AWS change"
    assert not [m for m in sandbox.slack.messages if m.text.startswith("Scaling kumo-labs/")], "no progress message"
    command, outcome, detail = await last_audit(sandbox)
    assert (command, outcome) == ("operation_confirm", "refused") and "expired" in detail
    async with sandbox.pitcrew.services.db.session() as session:
        operation = (await crud.operations_with_status(session, status="planned"))[-1]
    assert operation.confirmed_by is None, "the plan was not claimed"


async def test_delete_after_the_ttl_opens_no_form_and_says_the_plan_expired(
    sandbox: Sandbox, seeded_aws: SeededAws, clock: Clock
) -> None:
    """Delete… is a delete plan's Confirm: once the plan expired it opens no form to type the name into
    (only to be told afterwards), it replaces the plan with the reason and changes nothing."""
    sandbox.pitcrew.services.operations.clock = clock
    planned = await ask(sandbox, user=ALICE, channel=KUMO, text="delete kumo-p5-train")
    assert "delete_open" in str(planned.blocks)
    before = seeded_aws.state()
    clock.now += timedelta(minutes=31)
    response = await sandbox.slack.click(user_id=ALICE, message=planned, action_id="delete_open")
    assert response.status_code == 200
    answered = await sandbox.slack.wait_for(lambda m: m.ts == planned.ts and m.edits >= 1, timeout=15)
    assert "This plan expired at " in body(answered) and "run the command again" in body(answered)
    assert not any(block.get("type") == "actions" for block in answered.blocks), "offers nothing to press"
    assert not sandbox.slack.open_views, "no form opened"
    assert seeded_aws.state() == before
    command, outcome, detail = await last_audit(sandbox)
    assert (command, outcome) == ("delete_open", "refused") and "expired" in detail


async def test_the_ttl_comes_from_pitcrew_plan_ttl_minutes(
    sandbox_factory: Callable[..., Any], seeded_aws: SeededAws, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PITCREW_PLAN_TTL_MINUTES", raising=False)
    assert Settings().pitcrew_plan_ttl_minutes == 30
    monkeypatch.setenv("PITCREW_PLAN_TTL_MINUTES", "5")
    assert Settings().pitcrew_plan_ttl_minutes == 5
    async with sandbox_factory(settings_overrides={"pitcrew_plan_ttl_minutes": 5}) as world:
        await world.pitcrew.ready.wait()
        await world.pitcrew.services.drain()
        planned = await planned_at(world, clock)
        before = seeded_aws.state()
        clock.now += timedelta(minutes=6)
        answered = await click_confirm(world, planned)
        assert "(5 min after it was made)" in body(answered)
        assert seeded_aws.state() == before


@pytest.fixture
def reseed(moto_endpoint: str) -> Iterator[None]:
    """The next test gets the seeded program back: a confirmed scale changes it."""
    with hyperpod_progress(0.3, create_seconds=0.3, delete_seconds=0.3):
        yield
    reset_moto_server(moto_endpoint)


@pytest.fixture
async def changing(sandbox_factory: Callable[..., Any], reseed: None) -> AsyncIterator[Sandbox]:
    async with sandbox_factory() as world:
        await world.pitcrew.ready.wait()
        await world.pitcrew.services.drain()
        world.pitcrew.services.operations.first_poll = 0.2  # seconds here, where AWS takes minutes
        world.pitcrew.services.operations.max_poll = 0.5
        yield world


async def test_confirm_inside_the_ttl_starts_the_change(changing: Sandbox, clock: Clock) -> None:
    planned = await planned_at(changing, clock)
    clock.now += timedelta(minutes=29)
    await changing.slack.click(user_id=ALICE, message=planned, action_id="operation_confirm")
    done = await changing.slack.wait_for(
        lambda m: m.text.startswith("Scaling kumo-labs/kumo-p5-train") and "Done:" in m.text, timeout=30
    )
    assert "expired" not in done.text
    await changing.pitcrew.services.drain()
    async with changing.pitcrew.services.db.session() as session:
        steps = [(e.command, e.outcome) for e in await crud.audit_entries(session, org_id="kumo-labs")]
    assert ("operation_confirm", "allowed") in steps
