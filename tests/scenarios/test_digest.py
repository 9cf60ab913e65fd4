"""The weekly digest end to end: built from stored records, posted on schedule exactly once (also with two
app instances on one database, and Postgres in CI), caught up after a restart within the grace period and
skipped beyond it, each org's channel getting its own section only, and `/digest preview|send`.

Time is a fake clock on the digest and the record book (APScheduler's own tests inject clocks the same way):
the week under test is 2026-W47 in Asia/Tokyo, whose digest is due Monday 2026-11-23 09:00 JST."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from bot.digest.facts import RecordKind
from bot.digest.render import SlackDigest
from bot.digest.weekly import WeeklyDigest, digest_trigger
from bot.digest.weeks import due_at, parse_week
from sandbox.slack import Message
from sandbox.world import Sandbox
from storage import tracking
from storage.db import Database
from storage.models import Episode
from tests.scenarios.conftest import ADMIN, COORDINATION, ask, body

TOKYO = ZoneInfo("Asia/Tokyo")
WEEK = parse_week("2026-W47", TOKYO)
DUE = due_at(WEEK, "mon 09:00")
ALICE, BOB = "U0ALICE01", "U0BOB0001"
KUMO, SAKURA = "C0KUMOLAB", "C0SAKURA1"


def set_clock(world: Sandbox, moment: datetime) -> None:
    services = world.pitcrew.services
    services.digest.clock = services.records.clock = lambda: moment


async def seed_week(world: Sandbox) -> None:
    """A week of Kumo Labs: 8 p5 nodes held all week, 16 from Thursday; a milestone, an incident, a lesson,
    and a node failure of two hours. Sakura AI: a note only."""
    services = world.pitcrew.services
    book = services.records
    for offset, org, kind, text in [
        (1, "kumo-labs", RecordKind.MILESTONE, "Finished the 1T-token pretraining checkpoint"),
        (2, "kumo-labs", RecordKind.INCIDENT, "FSx throughput dropped during checkpoint writes"),
        (3, "kumo-labs", RecordKind.LESSON, "Stage datasets to FSx before scaling out"),
        (4, "sakura-ai", RecordKind.NOTE, "Neuron SDK upgrade planned"),
    ]:
        book.clock = lambda offset=offset: WEEK.start + timedelta(days=offset)  # type: ignore[misc]
        await book.add(org_id=org, kind=kind, text=text, user_id=ALICE, channel_id="", request_key=None)
    async with services.db.session() as session:
        key = ("hyperpod", "kumo-p5-train", "p5.48xlarge")
        await tracking.record_cluster_states(
            session, org_id="kumo-labs", held={key: 8}, at=WEEK.start - timedelta(days=1)
        )
        await tracking.record_cluster_states(
            session, org_id="kumo-labs", held={key: 16}, at=WEEK.start + timedelta(days=3)
        )
        opened = WEEK.start + timedelta(days=2)
        session.add(
            Episode(
                org_id="kumo-labs",
                backend="hyperpod",
                cluster_name="kumo-p5-train",
                node_key="i-0123456789abcdef0",
                kind="node",
                state="closed",
                instance_type="p5.48xlarge",
                opened_at=opened,
                failing_since=opened,
                updated_at=opened + timedelta(hours=2),
                closed_at=opened + timedelta(hours=2),
                node_hours_lost=2.0,
            )
        )
        await session.commit()


def summaries(world: Sandbox) -> list[Message]:
    return [m for m in world.slack.channel_messages(COORDINATION) if m.thread_ts is None and "Weekly digest" in m.text]


def replies_in(world: Sandbox, parent: Message) -> list[Message]:
    return [m for m in world.slack.messages if m.thread_ts == parent.ts and m.ts != parent.ts]


def top_level(world: Sandbox, channel: str) -> list[Message]:
    return [m for m in world.slack.channel_messages(channel) if m.thread_ts is None and m.ephemeral_to is None]


async def test_the_schedule_fires_once_a_week_at_its_time_and_posts_once(sandbox: Sandbox) -> None:
    trigger = digest_trigger("mon 09:00", TOKYO)
    fires, previous, moment = [], None, WEEK.start
    while moment < WEEK.end + timedelta(days=7):  # two weeks, minute by minute as a scheduler would wake
        due = trigger.get_next_fire_time(previous, moment)
        if due is not None and due <= moment:
            fires.append(due)
            previous = due
        moment += timedelta(minutes=1)
    assert [f.astimezone(UTC) for f in fires] == [DUE - timedelta(days=7), DUE], "Monday 09:00 JST, once a week"

    await seed_week(sandbox)
    set_clock(sandbox, DUE)
    first = await sandbox.pitcrew.services.digest.scheduled()
    again = await sandbox.pitcrew.services.digest.scheduled()
    assert first.week == "2026-W47" and COORDINATION in first.posted and KUMO in first.posted
    assert not again.posted and set(again.already) == set(first.posted)
    (summary,) = summaries(sandbox)
    assert "2026-W47" in summary.text
    thread = replies_in(sandbox, summary)
    assert any(m.files for m in thread), "the program chart and the org charts are in the thread"
    assert {"Kumo Labs", "Sakura AI"} <= {
        name for m in thread for name in ("Kumo Labs", "Sakura AI") if name in body(m)
    }
    kumo = top_level(sandbox, KUMO)
    assert len(kumo) == 1 and "Finished the 1T-token pretraining checkpoint" in body(kumo[0])
    assert "FSx throughput dropped" in body(kumo[0]) and "Stage datasets" in body(kumo[0])


async def test_an_org_channel_gets_its_own_section_only(sandbox: Sandbox) -> None:
    await seed_week(sandbox)
    set_clock(sandbox, DUE)
    await sandbox.pitcrew.services.digest.scheduled()
    for channel, mine, others in [
        (KUMO, "Kumo Labs", ("Sakura AI", "Neuron SDK")),
        (SAKURA, "Sakura AI", ("Kumo Labs", "FSx")),
    ]:
        posted = [m for m in sandbox.slack.channel_messages(channel) if m.ephemeral_to is None]
        text = "\n".join(body(m) for m in posted)
        assert mine in text
        assert not any(other in text for other in others), f"{channel} sees another org's details"
    kumo_chart = [m for m in sandbox.slack.channel_messages(KUMO) if m.files]
    assert len(kumo_chart) == 1 and kumo_chart[0].files[0]["filename"] == "kumo-labs-2026-W47.png"


async def test_two_instances_on_one_database_post_each_digest_once(
    sandbox_factory: Callable[..., Any], database_url: str
) -> None:
    async with sandbox_factory(database_url=database_url) as world:
        await world.pitcrew.ready.wait()
        await seed_week(world)
        services = world.pitcrew.services
        other_db = Database(url=database_url)
        try:
            other = WeeklyDigest(
                db=other_db,
                poster=services.poster,
                program=services.program,
                presenter=SlackDigest(),
                holder="replica-2",
                clock=lambda: DUE,
            )
            set_clock(world, DUE)
            reports = await asyncio.gather(services.digest.scheduled(), other.scheduled(), services.digest.scheduled())
            assert await other.catch_up() is None, "a catch-up after the posting does nothing"
        finally:
            await other_db.dispose()
        posted = [channel for report in reports for channel in report.posted]
        assert sorted(posted) == sorted({COORDINATION, *(o.channel for o in services.program.orgs)})
        assert len(summaries(world)) == 1
        assert len(top_level(world, KUMO)) == 1


async def test_a_restart_within_grace_posts_and_beyond_grace_skips_and_says_so(
    sandbox_factory: Callable[..., Any], tmp_path: Path
) -> None:
    async with sandbox_factory() as world:
        await world.pitcrew.ready.wait()
        await seed_week(world)
        digest = world.pitcrew.services.digest
        set_clock(world, DUE - timedelta(minutes=1))
        assert await digest.catch_up() is None, "not due yet"
        set_clock(world, DUE + timedelta(hours=3))
        said = await digest.catch_up()
        assert said is not None and "posted" in said
        assert len(summaries(world)) == 1
        assert await digest.catch_up() is None, "posted already: a second catch-up does nothing"

    fresh = f"sqlite+aiosqlite:///{tmp_path / 'down-13-hours.db'}"
    async with sandbox_factory(database_url=fresh) as world:  # another program: its bot was down for 13 hours
        await world.pitcrew.ready.wait()
        digest = world.pitcrew.services.digest
        set_clock(world, DUE - timedelta(days=7))
        await digest.scheduled()  # W46, on time: this installation was running before
        set_clock(world, DUE + timedelta(hours=13))
        said = await digest.catch_up()
        assert said is not None and "skipped" in said
        assert not [s for s in summaries(world) if "2026-W47" in s.text] and len(top_level(world, KUMO)) == 1
        set_clock(world, DUE + timedelta(days=7))  # the next week's digest is on time and says what was missed
        await digest.scheduled()
        (summary,) = [s for s in summaries(world) if "2026-W48" in s.text]
        assert "2026-W48" in summary.text and "2026-W47" in body(summary)
        set_clock(world, DUE + timedelta(days=14))
        await digest.scheduled()
        later = [s for s in summaries(world) if "2026-W49" in s.text]
        assert later and "2026-W47" not in body(later[0]), "a skipped week is reported once"


async def digest_command(world: Sandbox, text: str, *, user: str = ADMIN, channel: str = COORDINATION) -> Message:
    """`/digest ...`: the caller's own answer. Not `ask`: a send posts in many channels by design, and a preview's
    chart goes to a direct message (files cannot be ephemeral)."""
    before = len(world.slack.messages)
    response = await world.slack.send_command(user_id=user, channel_id=channel, command="/digest", text=text)
    assert response.status_code == 200 and not response.content

    def answer(message: Message) -> bool:
        return message.ephemeral_to == user and message.via != "command"

    reply = await world.slack.wait_for(answer, since=before, timeout=60)
    await world.pitcrew.services.drain()
    return reply


async def test_digest_send_is_for_admins_posts_once_and_force_posts_again(sandbox: Sandbox) -> None:
    await seed_week(sandbox)
    set_clock(sandbox, DUE + timedelta(hours=1))
    refused = await ask(sandbox, user=ALICE, channel=KUMO, text="send", command="/digest")
    assert "Only program admins" in body(refused) and summaries(sandbox) == []
    sent = await digest_command(sandbox, "send")
    assert "posted" in body(sent) and len(summaries(sandbox)) == 1
    again = await digest_command(sandbox, "send")
    assert "already posted" in body(again) and "--force" in body(again)
    assert len(summaries(sandbox)) == 1
    forced = await digest_command(sandbox, "send --force")
    assert "posted" in body(forced) and len(summaries(sandbox)) == 2
    assert len(top_level(sandbox, KUMO)) == 2


async def test_digest_preview_is_private_scoped_to_what_the_caller_may_see_and_has_a_chart(sandbox: Sandbox) -> None:
    await seed_week(sandbox)
    set_clock(sandbox, DUE + timedelta(days=1))
    preview = await digest_command(sandbox, "preview", user=BOB, channel=KUMO)
    assert preview.ephemeral_to == BOB
    assert "Finished the 1T-token pretraining checkpoint" in body(preview) and "Sakura" not in body(preview)
    chart = await sandbox.slack.wait_for(lambda m: bool(m.files) and m.channel.startswith("D"), timeout=15)
    assert chart.files[0]["filename"] == "kumo-labs-2026-W47.png"
    assert summaries(sandbox) == [] and top_level(sandbox, KUMO) == [], "a preview posts nothing in channels"
    refused = await digest_command(sandbox, "preview sakura-ai", user=BOB, channel=KUMO)
    assert "no access" in body(refused)
    program = await digest_command(sandbox, "preview --week 2026-W47")
    assert "2026-W47" in body(program) and "Stage datasets" in body(program), "every lesson in the summary"
    bad = await digest_command(sandbox, "preview --week 2027-W53")
    assert "Usage:" in body(bad) and "2027-W53" in body(bad)


async def test_a_channel_slack_refused_is_posted_by_the_catch_up_and_nothing_twice(sandbox: Sandbox) -> None:
    await seed_week(sandbox)
    set_clock(sandbox, DUE)
    sandbox.slack.fail_next("chat.postMessage", status=500)  # the program summary, the first post, is refused
    first = await sandbox.pitcrew.services.digest.scheduled()
    assert first.failed == (COORDINATION,) and KUMO in first.posted
    assert summaries(sandbox) == []
    set_clock(sandbox, DUE + timedelta(minutes=10))
    said = await sandbox.pitcrew.services.digest.catch_up()
    assert said is not None and "posted" in said
    assert len(summaries(sandbox)) == 1 and len(top_level(sandbox, KUMO)) == 1, "each channel once"
    assert await sandbox.pitcrew.services.digest.catch_up() is None


async def test_a_claim_left_by_a_replica_that_died_is_taken_over_after_30_minutes(sandbox: Sandbox) -> None:
    await seed_week(sandbox)
    services = sandbox.pitcrew.services
    async with services.db.session() as session:  # claimed at the due time, then the replica was killed
        await tracking.claim_digest_run(session, week=WEEK.label, channel=COORDINATION, by="dead-replica", at=DUE)
    set_clock(sandbox, DUE + timedelta(minutes=10))
    await services.digest.catch_up()
    assert summaries(sandbox) == [], "a claim 10 minutes old may still be posting"
    set_clock(sandbox, DUE + timedelta(minutes=45))
    await services.digest.catch_up()
    assert len(summaries(sandbox)) == 1


async def test_the_week_posted_is_the_one_whose_digest_fell_due(sandbox: Sandbox) -> None:
    digest = sandbox.pitcrew.services.digest
    digest.schedule = "sun 23:30"  # due on the Sunday after the week ends, at 23:30 JST
    sunday = datetime(2026, 11, 29, 23, 30, tzinfo=TOKYO)  # the Sunday ending 2026-W48: W47's digest is due
    assert digest.due_week(sunday).label == "2026-W47"
    assert digest.due_week(sunday + timedelta(minutes=40)).label == "2026-W47", "40 min late: still W47, not W48"
    assert digest.due_week(sunday - timedelta(minutes=1)).label == "2026-W46"
    digest.schedule = "fri 17:00"
    assert digest.due_week(datetime(2026, 11, 27, 17, 0, tzinfo=TOKYO)).label == "2026-W47"
    assert digest.due_week(datetime(2026, 11, 30, 10, 0, tzinfo=TOKYO)).label == "2026-W47", "Monday after: W47"


async def test_a_preview_of_a_week_to_come_is_refused_with_the_usage_line(sandbox: Sandbox) -> None:
    set_clock(sandbox, DUE + timedelta(days=1))  # Tuesday of 2026-W48
    for week in ("2026-W49", "2027-W10"):
        future = body(await digest_command(sandbox, f"preview kumo-labs --week {week}"))
        assert f"`{week}` has not begun yet" in future and "2026-W48" in future, future
        assert "Usage: /digest preview" in future and "Weekly digest" not in future
    running = body(await digest_command(sandbox, "preview kumo-labs --week 2026-W48"))
    assert "has not begun" not in running and "2026-W48" in running, "the running week: what it holds so far"
