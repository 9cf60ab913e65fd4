"""The alert desk's one lifecycle, shown with a throwaway kind defined here: a new kind is its kind (a
frozen dataclass), its presenter, and its registration. Real parts: SQLite and Postgres, the local Slack
over HTTP, the real poster (no pacing: each post goes at once)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.alerts.desk import UNPOSTED_GRACE, AlertDesk, AlreadyAcknowledged, AlreadySilenced
from bot.alerts.kind import Action, AlertView, Bucket
from bot.alerts.kinds import KINDS
from bot.config import ProgramConfig, load_program
from bot.digest.gather import gather
from bot.slack.alerts import PRESENTERS, SlackAlerts
from bot.slack.blocks import Reply, section
from bot.slack.poster import Poster
from sandbox.asgi_server import serve_asgi
from sandbox.slack import LocalSlack, Message
from sandbox.world import EXAMPLE_PROGRAM
from storage.db import Database
from storage.models import Episode

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
TOKEN = "xoxb-test-token"
ALICE, BOB = "U0ALICE", "U0BOB"


# ------------------------------------------------------------------ the throwaway kind: all a new kind is


@dataclass(frozen=True)
class CanaryKind:
    """Its kind module: name, digest bucket (none: the digest must not count it), buttons."""

    name: str = "canary"
    bucket: Bucket | None = None
    source: str | None = None
    reads_cluster: bool = False

    def actions(self, rows: Sequence[Episode]) -> tuple[Action, ...]:
        return (Action.ACKNOWLEDGE, Action.SILENCE)


class CanaryPresenter:
    """Its presenter."""

    def alert(self, view: AlertView) -> Reply:
        row = view.first
        text = f"canary {row.node_key} of {row.cluster_name} is {row.state}" + (
            f" · acknowledged by <@{row.acked_by}>" if row.acked_by else ""
        )
        return Reply(text=text, blocks=[section(text)], public=True)

    def coordination(self, view: AlertView, *, channel: str) -> Reply:
        text = f"canary {view.first.node_key}: {view.first.state} · <#{channel}>"
        return Reply(text=text, blocks=[section(text)], public=True)

    def held_back(self, row: Any) -> str:
        return f"canary `{row.node_key}`"


CANARY = CanaryKind()
# Its registration: the kind beside the others, its presenter beside theirs.
WITH_CANARY = ({**KINDS, CANARY.name: CANARY}, {**PRESENTERS, CANARY.name: CanaryPresenter()})


# ------------------------------------------------------------------ fixtures


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


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
async def desk(db: Database, slack: LocalSlack, program: ProgramConfig) -> AsyncIterator[AlertDesk]:
    poster = Poster(client=AsyncWebClient(token=TOKEN, base_url=slack.api_url), post_interval=0.0)
    kinds, presenters = WITH_CANARY
    yield AlertDesk(
        db=db, poster=poster, program=program, presenter=SlackAlerts(presenters=presenters), kinds=kinds, clock=Clock()
    )
    await poster.aclose()


def canary(program: ProgramConfig, key: str = "tweety", at: datetime = T0) -> Episode:
    return Episode(
        org_id=program.orgs[0].id,
        backend="hyperpod",
        cluster_name="aviary",
        node_key=key,
        kind=CANARY.name,
        state="open",
        node_ids=[],
        status="silent",
        message="stopped singing",
        opened_at=at,
        failing_since=at,
        updated_at=at,
    )


def canary_messages(slack: LocalSlack, channel: str) -> list[Message]:
    return [m for m in slack.channel_messages(channel) if m.text.startswith("canary") and m.thread_ts is None]


def thread(slack: LocalSlack, channel: str, ts: str | None) -> list[str]:
    return [m.text for m in slack.channel_messages(channel) if m.thread_ts == ts]


# ------------------------------------------------------------------ the lifecycle


async def test_a_new_kind_is_opened_once_and_posted_with_its_coordination_line(
    desk: AlertDesk, slack: LocalSlack, program: ProgramConfig
) -> None:
    row = await desk.open(canary(program))
    assert row is not None and row.channel_id == program.orgs[0].channel
    assert await desk.open(canary(program)) is None  # another replica opening the same: it posts nothing
    await desk.announce([row], silence=await desk.silence_for(row.org_id, row.backend, row.cluster_name))
    [alert] = canary_messages(slack, row.channel_id)
    assert alert.ts == row.message_ts and "is open" in alert.text
    assert [m.ts for m in canary_messages(slack, program.coordination_channel)] == [row.coordination_ts]


async def test_an_alert_slack_refused_is_posted_once_after_the_grace_period(
    desk: AlertDesk, slack: LocalSlack, program: ProgramConfig
) -> None:
    row = await desk.open(canary(program))
    assert row is not None
    slack.fail_next("chat.postMessage", status=500)
    await desk.announce([row], silence=None)
    assert row.message_ts is None and not canary_messages(slack, row.channel_id)
    await desk.retry_unposted([row])  # within the grace: the opener's own post is not raced
    assert not canary_messages(slack, row.channel_id)
    assert isinstance(desk.clock, Clock)
    desk.clock.now = T0 + UNPOSTED_GRACE + timedelta(seconds=1)
    stored = await desk.episode(str(row.id))
    assert stored is not None
    await desk.retry_unposted([stored])
    again = await desk.episode(str(row.id))
    assert again is not None
    await desk.retry_unposted([again])  # posted now: a second look posts nothing more
    [alert] = canary_messages(slack, row.channel_id)
    assert alert.ts == stored.message_ts and len(canary_messages(slack, program.coordination_channel)) == 1


async def test_acknowledged_once_silenced_once_then_held_back_and_closed(
    desk: AlertDesk, slack: LocalSlack, program: ProgramConfig
) -> None:
    row = await desk.open(canary(program))
    assert row is not None
    await desk.announce([row], silence=None)
    channel = row.channel_id

    assert await desk.acknowledge(row, user_id=ALICE) is None
    assert await desk.acknowledge(row, user_id=BOB) == AlreadyAcknowledged(by=ALICE, at=T0)
    [alert] = canary_messages(slack, channel)
    assert alert.edits == 1 and f"acknowledged by <@{ALICE}>" in alert.text
    assert any("acknowledged this" in text for text in thread(slack, channel, row.message_ts))

    until, why_not = await desk.silence(row, user_id=ALICE, hours=4)
    assert why_not is None and until == T0 + timedelta(hours=4)
    _, again = await desk.silence(row, user_id=BOB, hours=1)
    assert isinstance(again, AlreadySilenced) and again.by == ALICE

    # A new canary of the silenced cluster: no message of its own, one line in the silenced alert's thread.
    second = await desk.open(canary(program, "polly"))
    assert second is not None
    await desk.announce([second], silence=await desk.silence_for(second.org_id, second.backend, "aviary"))
    assert second.silenced and second.message_ts == row.message_ts
    assert [m.text for m in canary_messages(slack, channel)] == [alert.text]
    assert any("Held back" in text and "canary polly" in text for text in thread(slack, channel, row.message_ts))

    assert await desk.close(row, {"closed_at": T0, "updated_at": T0})
    assert not await desk.close(row, {"closed_at": T0, "updated_at": T0})  # another replica closed it first
    await desk.note(row, "sings again", cluster=None, silence=None)
    [alert] = canary_messages(slack, channel)
    assert "is closed" in alert.text and "sings again" in thread(slack, channel, row.message_ts)
    [line] = canary_messages(slack, program.coordination_channel)
    assert "closed" in line.text


async def test_the_digest_counts_a_new_kind_in_no_bucket_not_as_a_node_failure(
    desk: AlertDesk, db: Database, program: ProgramConfig
) -> None:
    assert await desk.open(canary(program)) is not None
    node = canary(program, "i-0aaa")
    node.kind, node.node_ids, node.node_key = "node", ["i-0aaa"], "i-0aaa"
    assert await desk.open(node) is not None
    [facts, *_] = await gather(db, program=program, since=T0 - timedelta(days=1), until=T0 + timedelta(days=1))
    assert [f.kind for f in facts.failures] == ["node"]  # the canary counted nowhere
    assert facts.stalls == ()
