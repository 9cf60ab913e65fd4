"""Escalation: an alert nobody acknowledged within the org's escalate_after_minutes is posted again in the
coordination channel, mentioning the org's operators with a link to the alert, once across replicas;
acknowledged in time, never. Real parts: SQLite and Postgres, the local Slack over HTTP, the real poster."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy.ext.asyncio import create_async_engine

from bot.alerts.desk import AlertDesk, operators
from bot.alerts.escalation import Escalation, due, escalate_after
from bot.config import ProgramConfig, load_program
from bot.slack.alerts import SlackAlerts
from bot.slack.poster import Poster
from sandbox.asgi_server import serve_asgi
from sandbox.slack import LocalSlack, Message
from sandbox.world import EXAMPLE_PROGRAM
from storage import crud
from storage.db import Database, upgrade
from storage.models import Episode

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
TOKEN = "xoxb-test-token"
ALICE, BOB = "U0ALICE01", "U0BOB0001"  # kumo-labs: Alice operates, Bob views
COORDINATION_TEXT = "Not acknowledged after"


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture(scope="module")
def program() -> ProgramConfig:
    return load_program(EXAMPLE_PROGRAM)


@pytest.fixture
async def slack(program: ProgramConfig) -> AsyncIterator[LocalSlack]:
    channels = {program.coordination_channel: "coordination", **{o.channel: o.id for o in program.orgs}}
    local = LocalSlack(signing_secret="s", bot_token=TOKEN, users={ALICE: "Alice", BOB: "Bob"}, channels=channels)
    async with serve_asgi(local.app) as base_url:
        local.base_url = base_url
        yield local


def make_desk(db: Database, slack: LocalSlack, program: ProgramConfig, clock: Clock) -> tuple[AlertDesk, Poster]:
    poster = Poster(client=AsyncWebClient(token=TOKEN, base_url=slack.api_url), post_interval=0.0)
    presenter = SlackAlerts(regions={o.id: o.aws.region for o in program.orgs})
    return AlertDesk(db=db, poster=poster, program=program, presenter=presenter, clock=clock), poster


@pytest.fixture
async def desk(db: Database, slack: LocalSlack, program: ProgramConfig) -> AsyncIterator[AlertDesk]:
    made, poster = make_desk(db, slack, program, Clock())
    yield made
    await poster.aclose()


def failed_node(node: str = "i-0aaa", at: datetime = T0, org: str = "kumo-labs") -> Episode:
    return Episode(
        org_id=org,
        backend="hyperpod",
        cluster_name="kumo-p5-train",
        node_key=node,
        kind="node",
        state="open",
        node_ids=[node],
        group_name="worker-group-1",
        instance_type="ml.p5.48xlarge",
        status="Failure",
        message="GPU XID 79",
        opened_at=at,
        failing_since=at,
        updated_at=at,
    )


async def posted(desk: AlertDesk, row: Episode) -> Episode:
    opened = await desk.open(row)
    assert opened is not None
    await desk.announce([opened], silence=None)
    assert opened.message_ts
    return opened


def escalations(slack: LocalSlack, program: ProgramConfig) -> list[Message]:
    return [m for m in slack.channel_messages(program.coordination_channel) if COORDINATION_TEXT in m.text]


def later(desk: AlertDesk, minutes: float) -> None:
    assert isinstance(desk.clock, Clock)
    desk.clock.now = T0 + timedelta(minutes=minutes)


async def test_an_unacknowledged_alert_escalates_once_mentioning_the_operators_with_its_link(
    desk: AlertDesk, slack: LocalSlack, program: ProgramConfig
) -> None:
    row = await posted(desk, failed_node())
    escalation = Escalation(desk=desk, presenter=SlackAlerts())
    later(desk, 29)
    assert await escalation.check() == 0 and not escalations(slack, program)
    later(desk, 30)
    assert await escalation.check() == 1
    [message] = escalations(slack, program)
    text = " ".join(b["text"]["text"] for b in message.blocks if "text" in b)
    assert f"<@{ALICE}>" in text and f"<@{BOB}>" not in text, "the org's operators, not its viewers"
    assert "kumo-p5-train" in text and "i-0aaa" in text and "30 min" in text
    link = await desk.permalink(row.channel_id, row.message_ts or "")
    assert link and f"<{link}|Open the alert>" in text, "a link to the alert (its permalink)"
    assert any(e["action_id"] == "alert_ack" for b in message.blocks if b["type"] == "actions" for e in b["elements"])
    later(desk, 90)
    assert await escalation.check() == 0 and len(escalations(slack, program)) == 1, "once"
    stored = await desk.episode(str(row.id))
    assert stored is not None and stored.escalated_at == T0 + timedelta(minutes=30)
    alert = next(m for m in slack.messages if m.ts == row.message_ts)
    footer = " ".join(e["text"] for b in alert.blocks if b["type"] == "context" for e in b["elements"])
    assert "escalated to the coordination channel at 2026-11-30 18:30" in footer, "in the program's time zone"
    assert any("Nobody acknowledged" in m.text for m in slack.messages if m.thread_ts == row.message_ts)


async def test_an_alert_acknowledged_before_the_deadline_never_escalates(
    desk: AlertDesk, slack: LocalSlack, program: ProgramConfig
) -> None:
    row = await posted(desk, failed_node())
    later(desk, 10)
    assert await desk.acknowledge(row, user_id=ALICE) is None
    escalation = Escalation(desk=desk, presenter=SlackAlerts())
    for minutes in (31, 120, 24 * 60):
        later(desk, minutes)
        assert await escalation.check() == 0
    assert not escalations(slack, program)


async def test_an_acknowledgement_racing_the_pass_wins_the_conditional_update(desk: AlertDesk, db: Database) -> None:
    """Read as due, acknowledged before the claim: the claim finds it acknowledged and takes nothing."""
    row = await posted(desk, failed_node())
    await desk.acknowledge(row, user_id=ALICE)
    async with db.session() as session:
        assert not await crud.claim_escalation(session, episode_id=row.id or 0, at=T0 + timedelta(minutes=31))


async def test_two_replicas_escalate_an_alert_once(
    db: Database, slack: LocalSlack, program: ProgramConfig, desk: AlertDesk
) -> None:
    await posted(desk, failed_node())
    clock = Clock()
    clock.now = T0 + timedelta(minutes=45)
    other, other_poster = make_desk(db, slack, program, clock)
    later(desk, 45)
    try:
        results = await asyncio.gather(
            Escalation(desk=desk, presenter=SlackAlerts()).check(),
            Escalation(desk=other, presenter=SlackAlerts()).check(),
        )
    finally:
        await other_poster.aclose()
    assert sorted(results) == [0, 1] and len(escalations(slack, program)) == 1


async def test_silenced_or_opted_out_alerts_do_not_escalate_and_a_refused_post_is_tried_again(
    desk: AlertDesk, slack: LocalSlack, program: ProgramConfig
) -> None:
    row = await posted(desk, failed_node())
    await desk.silence(row, user_id=ALICE, hours=4)
    quiet = Escalation(desk=desk, presenter=SlackAlerts())
    later(desk, 60)
    assert await quiet.check() == 0, "a silenced cluster: someone is on it"

    off = program.model_copy(
        update={"orgs": [o.model_copy(update={"escalate_after_minutes": 0}) for o in program.orgs]}
    )
    assert escalate_after(off.orgs[0]) is None

    other = await posted(desk, failed_node("i-0bbb", org="sakura-ai"))  # another org, not silenced
    slack.fail_next("chat.postMessage", status=500)
    later(desk, 61)
    assert await quiet.check() == 0, "Slack refused it"
    stored = await desk.episode(str(other.id))
    assert stored is not None and stored.escalated_at is None, "the claim is given back"
    assert await quiet.check() == 1 and len(escalations(slack, program)) == 1


@given(
    minutes=st.floats(min_value=0, max_value=600, allow_nan=False),
    after=st.one_of(st.none(), st.floats(min_value=1, max_value=300, allow_nan=False)),
    acked=st.booleans(),
    escalated=st.booleans(),
    silenced=st.booleans(),
    kind=st.sampled_from(["node", "cluster", "job", "faulty_node", "idle", "capacity"]),
)
def test_due_is_exactly_unacknowledged_unescalated_posted_and_old_enough(
    minutes: float, after: float | None, acked: bool, escalated: bool, silenced: bool, kind: str
) -> None:
    row = failed_node()
    row.id, row.kind, row.message_ts, row.channel_id = 7, kind, "1.000100", "C0KUMOLAB"
    row.acked_by = ALICE if acked else None
    row.escalated_at = T0 if escalated else None
    row.silenced = silenced
    limit = timedelta(minutes=after) if after is not None else None
    expected = (
        limit is not None
        and not (acked or escalated or silenced)
        and kind != "capacity"
        and timedelta(minutes=minutes) >= limit
    )
    assert due(row, after=limit, now=T0 + timedelta(minutes=minutes)) is expected


def test_an_alert_a_silence_held_back_is_due_counting_from_when_it_was_posted() -> None:
    """Held back 40 minutes, posted when the silence ended: 30 minutes from then, not from its failure."""
    row = failed_node()
    row.id, row.message_ts, row.channel_id = 7, "1.000100", "C0KUMOLAB"
    row.posted_at = T0 + timedelta(minutes=40)
    limit = timedelta(minutes=30)
    assert not due(row, after=limit, now=T0 + timedelta(minutes=45))
    assert due(row, after=limit, now=T0 + timedelta(minutes=70))


def test_operators_are_the_orgs_operators_only(program: ProgramConfig) -> None:
    # kumo-labs: alice, and koji from Kumo Labs' own workspace (Slack Connect); bob and mio are viewers
    assert operators(program.org("kumo-labs")) == [ALICE, "U0KOJI001"]
    assert operators(None) == []


async def _sql(database_url: str, *statements: str) -> list[tuple[object, ...]]:
    engine = create_async_engine(database_url)
    try:
        async with engine.begin() as connection:
            rows: list[tuple[object, ...]] = []
            for statement in statements:
                result = await connection.execute(sa.text(statement))
                rows = [tuple(row) for row in result.fetchall()] if result.returns_rows else []
            return rows
    finally:
        await engine.dispose()


def test_migration_0011_gives_older_episodes_no_escalation(database_url: str) -> None:
    """Episodes stored before 0011 read as never escalated, and keep an escalation once set."""
    upgrade(database_url, "0010")
    asyncio.run(
        _sql(
            database_url,
            "INSERT INTO episodes (org_id, backend, cluster_name, node_key, generation, kind, state, node_ids, "
            "opened_at, updated_at, group_name, instance_type, status, message, reopened, node_recovery, silenced, "
            "channel_id, node_hours_lost, cause, suspects) VALUES ('kumo-labs', 'hyperpod', 'kumo-p5', 'cluster', "
            "0, 'cluster', 'open', '[]', '2026-11-30 09:00:00', '2026-11-30 09:00:00', '', '', 'Failed', '', 0, '', "
            "false, '', 0, '', '[]')",
        )
    )
    upgrade(database_url)

    async def check() -> None:
        db = Database(url=database_url)
        try:
            async with db.session() as session:
                (old,) = await crud.open_episodes(session)
            assert old.escalated_at is None
        finally:
            await db.dispose()

    asyncio.run(check())
