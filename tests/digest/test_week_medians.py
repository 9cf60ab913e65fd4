"""Stored week medians (bot.digest.medians) on SQLite and Postgres: a finished week's figures are the same
whether computed live or read back from job_week_medians, for any generated hourly rollups; samples that
arrive late for a stored week are counted; the week still running is never stored. And the idle
accelerator instance-hours the digest reads from kind "idle" episodes."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete
from sqlmodel import select

from bot.config import ProgramConfig
from bot.digest.compute import build_digest
from bot.digest.facts import ProgramDigest, Week
from bot.digest.gather import gather_week
from bot.digest.render import SlackDigest
from bot.digest.weeks import parse_week, previous_week
from storage import crud
from storage.db import Database
from storage.models import Episode, JobWeekMedian, ThroughputHourly

TOKYO = ZoneInfo("Asia/Tokyo")
WEEK = parse_week("2026-W48", TOKYO)
BEFORE = previous_week(WEEK)
LIVE = BEFORE.start  # a clock at which both weeks are still running: every median computed live
LATER = WEEK.end + timedelta(hours=9)  # the Monday 09:00 the digest is due: both weeks have ended
ORGS = ("kumo-labs", "sora-ai")
PROGRAM = ProgramConfig.model_validate(
    {
        "name": "FM Accelerator",
        "timezone": "Asia/Tokyo",
        "coordination_channel": "C0PROGRAM",
        "admins": ["U0ADMIN01"],
        "orgs": [
            {
                "id": org,
                "name": org.title(),
                "channel": f"C0ORG{n}",
                "members": {f"U0M{n}": "operator"},
                "aws": {"account_id": f"{100000000000 + n}", "region": "us-east-1"},
            }
            for n, org in enumerate(ORGS)
        ],
    }
)

HourKey = tuple[str, str, str, int]  # org, cluster, job, hours after BEFORE.start (UTC hours)
# Hours from a day before the week before to a day after the digest week: rows outside both weeks must be left out.
hour_keys = st.tuples(
    st.sampled_from(ORGS),
    st.sampled_from(("p5-train", "trn1")),
    st.sampled_from(("llama-70b", "mixtral", "ablation")),
    st.integers(min_value=-24, max_value=int(BEFORE.hours + WEEK.hours) + 24),
)
hour_values = st.tuples(st.integers(min_value=1, max_value=60), st.floats(min_value=0, max_value=1e6, width=32))
hourly_rollups = st.dictionaries(hour_keys, hour_values, max_size=60)


def hour_rows(rollups: dict[HourKey, tuple[int, float]]) -> list[dict[str, object]]:
    return [
        {
            "org_id": org,
            "cluster": cluster,
            "job": job,
            "hour": BEFORE.start + timedelta(hours=offset),
            "count": count,
            "total": total * count,
        }
        for (org, cluster, job, offset), (count, total) in sorted(rollups.items())
    ]


async def add_hours(db: Database, rollups: dict[HourKey, tuple[int, float]]) -> None:
    """As ingest adds them (crud.upsert_hourly: a later batch adds its counts and sums to an hour's row)."""
    if rollups:
        async with db.session() as session:
            await crud.upsert_hourly(session, rows=hour_rows(rollups))
            await session.commit()


async def digest_at(db: Database, now: datetime, week: Week = WEEK) -> ProgramDigest:
    """The digest as the clock `now` builds it, goodput left out: it counts only what happened by `now`, which
    these tests move on purpose (the medians must not depend on it)."""
    facts = await gather_week(db, program=PROGRAM, week=week, now=now)
    return build_digest(program_name=PROGRAM.name, week=week, facts=[replace(f, goodput=None) for f in facts])


async def stored(db: Database) -> list[JobWeekMedian]:
    async with db.session() as session:
        return list((await session.exec(select(JobWeekMedian))).all())


async def empty(db: Database) -> None:
    async with db.session() as session:
        for table in (ThroughputHourly, JobWeekMedian, Episode):
            await session.exec(delete(table))
        await session.commit()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rollups=hourly_rollups, late=hourly_rollups)
async def test_a_finished_week_reads_the_same_figures_stored_as_computed_live(
    db: Database, rollups: dict[HourKey, tuple[int, float]], late: dict[HourKey, tuple[int, float]]
) -> None:
    """The digest of a finished week, built three ways, is the same digest: computed live (the clock inside
    the weeks), the first time after they ended (computing and storing the medians), and again (read back).
    Then samples arrive late for the stored weeks (more counts in existing hours, and new hours and jobs):
    the next digest equals a live computation of the new rollups, to the bit."""
    await empty(db)
    await add_hours(db, rollups)
    live = await digest_at(db, LIVE)
    first = await digest_at(db, LATER)
    again = await digest_at(db, LATER)
    assert first == live
    assert again == live
    jobs = {(o, c, j) for o, c, j, offset in rollups if 0 <= offset < BEFORE.hours + WEEK.hours}
    assert {(r.org_id, r.cluster, r.job) for r in await stored(db)} == jobs
    assert all(r.week_start in (WEEK.start, BEFORE.start) and r.computed_at == LATER for r in await stored(db))

    await add_hours(db, late)
    assert await digest_at(db, LATER) == await digest_at(db, LIVE)
    assert await digest_at(db, LATER) == await digest_at(db, LIVE)  # and so once stored again


async def test_the_running_week_is_computed_live_and_never_stored(db: Database) -> None:
    await add_hours(db, {("kumo-labs", "p5-train", "llama-70b", int(BEFORE.hours) + 5): (10, 100.0)})
    running = WEEK.start + timedelta(days=3)
    digest = await digest_at(db, running)
    (job,) = digest.orgs[0].jobs
    assert job.this_week == 100.0 and job.last_week is None
    assert await stored(db) == []  # the week before had no samples, the digest week is still running
    await add_hours(db, {("kumo-labs", "p5-train", "llama-70b", int(BEFORE.hours) + 6): (10, 300.0)})
    (job,) = (await digest_at(db, running)).orgs[0].jobs
    assert job.this_week == 200.0  # the new hour counted at once


async def test_a_late_sample_in_a_stored_hour_changes_the_stored_median(db: Database) -> None:
    hour = int(BEFORE.hours) + 5
    await add_hours(db, {("kumo-labs", "p5-train", "llama-70b", hour): (10, 100.0)})
    (job,) = (await digest_at(db, LATER)).orgs[0].jobs
    assert job.this_week == 100.0
    # Ten samples of 400 tokens/s reach the same hour days later (a job that buffered them): (1000 + 4000) / 20.
    await add_hours(db, {("kumo-labs", "p5-train", "llama-70b", hour): (10, 400.0)})
    (job,) = (await digest_at(db, LATER + timedelta(days=2))).orgs[0].jobs
    assert job.this_week == 250.0
    (row,) = await stored(db)
    assert (row.median, row.hours, row.samples, row.computed_at) == (250.0, 1, 20, LATER + timedelta(days=2))


async def test_a_digest_of_some_orgs_stores_and_reads_only_theirs(db: Database) -> None:
    hour = int(BEFORE.hours) + 5
    await add_hours(
        db,
        {("kumo-labs", "p5-train", "llama-70b", hour): (10, 100.0), ("sora-ai", "trn1", "mixtral", hour): (5, 50.0)},
    )
    facts = await gather_week(db, program=PROGRAM, week=WEEK, org_ids=["sora-ai"], now=LATER)
    assert [(r.org_id, r.job, r.this_week) for f in facts for r in f.rates] == [("sora-ai", "mixtral", 50.0)]
    assert [r.org_id for r in await stored(db)] == ["sora-ai"]
    whole = await digest_at(db, LATER)
    assert [(s.org_id, [j.this_week for j in s.jobs]) for s in whole.orgs] == [
        ("kumo-labs", [100.0]),
        ("sora-ai", [50.0]),
    ]


# ------------------------------------------------------------------------------------------------ idle hours


def idle_episode(
    *,
    org: str = "kumo-labs",
    cluster: str = "p5-train",
    since: datetime,
    opened: datetime | None = None,
    closed: datetime | None = None,
    nodes: int = 4,
    kind: str = "idle",
    instance_type: str = "ml.p5.48xlarge",
    generation: int = 0,
) -> Episode:
    opened = opened or since + timedelta(hours=2)
    return Episode(
        org_id=org,
        backend="hyperpod",
        cluster_name=cluster,
        node_key="cluster",
        generation=generation,
        kind=kind,
        state="closed" if closed else "open",
        node_ids=[f"i-{n:017x}" for n in range(nodes)],
        instance_type=instance_type,
        opened_at=opened,
        failing_since=since,
        updated_at=closed or opened,
        closed_at=closed,
    )


async def test_idle_instance_hours_per_org_are_each_episode_nodes_times_its_idle_span_within_the_week(
    db: Database,
) -> None:
    start, end = WEEK.start, WEEK.end
    episodes = [
        # idle from before the week, a job reported 4 h into it: 3 nodes x 4 h
        idle_episode(since=start - timedelta(hours=6), closed=start + timedelta(hours=4), nodes=3),
        # idle the week's last hour, its notice posted after the week ended: 2 nodes x 1 h
        idle_episode(
            since=end - timedelta(hours=1), opened=end + timedelta(hours=1), nodes=2, cluster="p5-dev", generation=1
        ),
        # idle all week on Trainium, still idle: 8 x 168 h
        idle_episode(cluster="trn1", since=start - timedelta(days=2), nodes=8, instance_type="trn1.32xlarge"),
        # not counted: over before the week, idle only after it, another kind, another org's channel
        idle_episode(since=start - timedelta(days=3), closed=start - timedelta(days=2), cluster="old"),
        idle_episode(since=end + timedelta(minutes=1), cluster="next"),
        idle_episode(since=start, closed=end, kind="node", cluster="failed"),
        idle_episode(org="sora-ai", since=start + timedelta(hours=10), closed=start + timedelta(hours=15), nodes=1),
    ]
    async with db.session() as session:
        session.add_all(episodes)
        await session.commit()
    digest = await digest_at(db, LATER)
    kumo, sora = digest.orgs
    assert kumo.idle_hours == {"p5.48xlarge": 3 * 4 + 2 * 1, "trn1.32xlarge": 8 * 168}
    assert sora.idle_hours == {"p5.48xlarge": 5}
    assert digest.totals.idle_instance_hours == 14 + 8 * 168 + 5
    assert kumo.failures.count == 1  # the node failure: idle episodes are idle hours, not failures


# ------------------------------------------------------------------------------------------------ week end


async def test_the_catch_up_stores_the_week_that_just_ended_once_so_the_posted_digest_reads_it(db: Database) -> None:
    from slack_sdk.web.async_client import AsyncWebClient

    from bot.digest.weekly import WeeklyDigest
    from bot.slack.poster import Poster

    hour = int(BEFORE.hours) + 5
    await add_hours(db, {("kumo-labs", "p5-train", "llama-70b", hour): (10, 100.0)})
    moment = WEEK.end + timedelta(minutes=4)  # Monday 00:04 in Tokyo; the digest is due at 09:00
    # Nothing is posted by keeping medians: the client points at no server.
    poster = Poster(client=AsyncWebClient(token="xoxb-never-used", base_url="http://127.0.0.1:9/"))
    digest = WeeklyDigest(
        db=db, poster=poster, program=PROGRAM, presenter=SlackDigest(), holder="replica-1", clock=lambda: moment
    )
    assert await digest.catch_up() is None  # nothing due yet
    assert [(r.week_start, r.job, r.median, r.samples) for r in await stored(db)] == [
        (WEEK.start, "llama-70b", 100.0, 10)
    ]
    assert await digest.keep_medians() is False  # once per week and replica
    moment = LATER
    built = await digest.build(WEEK)
    assert [(j.job, j.this_week, j.last_week) for j in built.orgs[0].jobs] == [("llama-70b", 100.0, None)]
    without_goodput = replace(
        built,
        orgs=tuple(replace(o, goodput=None, goodput_last_week=None) for o in built.orgs),
        totals=replace(built.totals, goodput=None),
    )
    assert without_goodput == await digest_at(db, LIVE)


async def test_a_digest_of_the_running_week_counts_idle_hours_until_now_only(db: Database) -> None:
    async with db.session() as session:
        session.add(idle_episode(since=WEEK.start + timedelta(hours=10), nodes=2))
        await session.commit()
    digest = await digest_at(db, WEEK.start + timedelta(hours=16))
    assert digest.orgs[0].idle_hours == {"p5.48xlarge": 2 * 6}


# ------------------------------------------------------------------------------------------------ migration


def test_migration_0012_keeps_the_hourly_rollups_and_the_first_digest_stores_their_medians(database_url: str) -> None:
    """Rollups stored before 0012 are read by the first digest after it (nothing is backfilled: the digest
    computes and stores the weeks it reads); 0012 goes down and up again."""
    from alembic import command

    from storage.db import alembic_config, upgrade

    upgrade(database_url, "0011")

    async def before() -> None:
        db = Database(url=database_url)
        try:
            await add_hours(db, {("kumo-labs", "p5-train", "llama-70b", int(BEFORE.hours) + 5): (10, 100.0)})
        finally:
            await db.dispose()

    asyncio.run(before())
    upgrade(database_url)

    async def after() -> None:
        db = Database(url=database_url)
        try:
            assert await stored(db) == []
            (job,) = (await digest_at(db, LATER)).orgs[0].jobs
            assert job.this_week == 100.0
            assert [(r.job, r.samples) for r in await stored(db)] == [("llama-70b", 10)]
        finally:
            await db.dispose()

    asyncio.run(after())
    command.downgrade(alembic_config(database_url), "0011")
    upgrade(database_url)
    asyncio.run(after())
