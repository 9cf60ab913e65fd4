"""Throughput storage on SQLite and Postgres: samples and their one-minute rollups stored together (all or
nothing), rollups combined across batches, a sample stored once however often it is sent (retries, repeats,
retries at once), active jobs, retention of raw samples; API tokens."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta, timezone

import pytest
import sqlalchemy as sa
from sqlalchemy import inspect, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import create_async_engine
from sqlmodel import col, func, select

from storage import crud
from storage.db import Database, upgrade
from storage.models import ApiToken, ThroughputHourly, ThroughputRollup, ThroughputSample

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
ORG, CLUSTER = "kumo-labs", "kumo-p5"


def sample(
    at: datetime, value: float | None = 100.0, *, job: str = "run-1", cluster: str = CLUSTER, **values: object
) -> ThroughputSample:
    fields: dict[str, object] = {
        "org_id": ORG,
        "cluster": cluster,
        "job": job,
        "ts": at,
        "tokens_per_second": value,
        "received_at": at,
        **values,
    }
    return ThroughputSample.model_validate(fields)


async def add(db: Database, *rows: ThroughputSample) -> int:
    async with db.session() as session:
        return await crud.add_samples(session, samples=rows)


async def all_rollups(db: Database, job: str | None = None) -> list[ThroughputRollup]:
    async with db.session() as session:
        found = await crud.rollups(
            session, org_id=ORG, cluster=CLUSTER, job=job, since=T0 - timedelta(days=1), until=T0 + timedelta(days=1)
        )
    return list(found)


async def count_samples(db: Database) -> int:
    async with db.session() as session:
        return int((await session.exec(select(func.count()).select_from(ThroughputSample))).one())


async def test_migrations_create_the_throughput_tables(db: Database) -> None:
    await db.upgrade()  # idempotent
    async with db.engine.connect() as connection:
        tables = await connection.run_sync(lambda sync: set(inspect(sync).get_table_names()))
        indexes = await connection.run_sync(lambda sync: inspect(sync).get_indexes("throughput_samples"))
        rollup_pk = await connection.run_sync(lambda sync: inspect(sync).get_pk_constraint("throughput_rollups"))
    assert {"api_tokens", "throughput_samples", "throughput_rollups"} <= tables
    assert {(tuple(i["column_names"]), bool(i["unique"])) for i in indexes} == {
        (("org_id", "cluster", "job", "ts"), True),
        (("ts",), False),
    }
    assert rollup_pk["constrained_columns"] == ["org_id", "cluster", "job", "minute"]


async def test_rollups_combine_two_batches_in_the_same_minute(db: Database) -> None:
    assert await add(db, sample(T0 + timedelta(seconds=5), 100.0), sample(T0 + timedelta(seconds=35), 300.0)) == 2
    # The second batch: the same minute (one sample lower, one higher), the next minute, an event without a
    # value (no rollup), and another job.
    second = [
        sample(T0 + timedelta(seconds=50), 50.0),
        sample(T0 + timedelta(seconds=55), 400.0),
        sample(T0 + timedelta(minutes=1, seconds=1), 200.0),
        sample(T0 + timedelta(minutes=1, seconds=2), None, event="end"),
        sample(T0 + timedelta(seconds=10), 7.0, job="run-2"),
    ]
    assert await add(db, *second) == 5

    rows = await all_rollups(db, job="run-1")
    assert [(r.minute, r.count, r.total, r.min, r.max) for r in rows] == [
        (T0, 4, 850.0, 50.0, 400.0),
        (T0 + timedelta(minutes=1), 1, 200.0, 200.0, 200.0),
    ]
    assert rows[0].mean == pytest.approx(212.5)
    assert [(r.job, r.minute) for r in await all_rollups(db)] == [
        ("run-1", T0),
        ("run-2", T0),
        ("run-1", T0 + timedelta(minutes=1)),
    ]


async def test_samples_come_back_in_time_order_with_their_fields(db: Database) -> None:
    await add(
        db,
        sample(T0 + timedelta(seconds=30), samples_per_second=12.5, value=None, step=2**40),
        sample(T0, None, event="start"),
        sample(T0 + timedelta(seconds=10), 99.0, job="run-2"),
    )
    async with db.session() as session:
        run1 = await crud.samples(
            session, org_id=ORG, cluster=CLUSTER, job="run-1", since=T0, until=T0 + timedelta(minutes=1)
        )
        both = await crud.samples(
            session, org_id=ORG, cluster=CLUSTER, job=None, since=T0, until=T0 + timedelta(hours=1)
        )
        later = await crud.samples(
            session,
            org_id=ORG,
            cluster=CLUSTER,
            job=None,
            since=T0 + timedelta(seconds=10),
            until=T0 + timedelta(hours=1),
        )
        other_org = await crud.samples(
            session, org_id="sakura-ai", cluster=CLUSTER, job=None, since=T0, until=T0 + timedelta(hours=1)
        )
    assert [(s.ts, s.event, s.value, s.step) for s in run1] == [
        (T0, "start", None, None),
        (T0 + timedelta(seconds=30), None, 12.5, 2**40),
    ]
    assert run1[1].samples_per_second == 12.5 and run1[1].tokens_per_second is None
    assert all(s.id is not None and s.ts.tzinfo is not None for s in run1)
    assert [s.job for s in both] == ["run-1", "run-2", "run-1"]
    assert [s.ts for s in later] == [T0 + timedelta(seconds=10), T0 + timedelta(seconds=30)]
    assert other_org == []


async def test_a_failing_batch_stores_nothing_neither_samples_nor_rollups(db: Database) -> None:
    await add(db, sample(T0, 100.0))
    before = [(r.count, r.total) for r in await all_rollups(db)]
    good = sample(T0 + timedelta(seconds=20), 500.0)
    # 600 more samples: the first INSERT of 500 rows runs, then the second fails on the NOT NULL.
    many = [sample(T0 + timedelta(minutes=1, milliseconds=i), 1.0) for i in range(600)]
    broken = many[-1]
    broken.received_at = None  # type: ignore[assignment]
    with pytest.raises(IntegrityError):
        await add(db, good, *many)
    assert await count_samples(db) == 1
    assert [(r.count, r.total) for r in await all_rollups(db)] == before == [(1, 100.0)]
    # The session is usable again and the database unharmed.
    assert await add(db, good) == 1
    assert [(r.count, r.total) for r in await all_rollups(db)] == [(2, 600.0)]


async def all_hourly(db: Database) -> list[tuple[datetime, str, int, float]]:
    async with db.session() as session:
        rows = (await session.exec(select(ThroughputHourly).order_by(col(ThroughputHourly.hour)))).all()
    return [(r.hour, r.job, r.count, r.total) for r in rows]


def batch() -> list[ThroughputSample]:
    return [
        sample(T0, None, event="start"),
        sample(T0 + timedelta(seconds=30), 100.0),
        sample(T0 + timedelta(seconds=60), 300.0),
        sample(T0 + timedelta(seconds=30), 7.0, job="run-2"),
    ]


async def test_a_retried_batch_is_stored_once_and_the_rollups_do_not_change(db: Database) -> None:
    assert await add(db, *batch()) == 4
    minutes = [(r.minute, r.job, r.count, r.total, r.min, r.max) for r in await all_rollups(db)]
    hours = await all_hourly(db)
    assert minutes == [
        (T0, "run-1", 1, 100.0, 100.0, 100.0),
        (T0, "run-2", 1, 7.0, 7.0, 7.0),
        (T0 + timedelta(minutes=1), "run-1", 1, 300.0, 300.0, 300.0),
    ]
    assert hours == [(T0, "run-1", 2, 400.0), (T0, "run-2", 1, 7.0)]

    async with db.session() as session:
        assert await crud.store_samples(session, samples=batch()) == []  # the retry: nothing new
    assert await count_samples(db) == 4
    assert [(r.minute, r.job, r.count, r.total, r.min, r.max) for r in await all_rollups(db)] == minutes
    assert await all_hourly(db) == hours


async def test_a_retry_with_new_samples_stores_and_rolls_up_only_the_new_ones(db: Database) -> None:
    await add(db, *batch())
    retry = [*batch(), sample(T0 + timedelta(seconds=45), 200.0)]
    async with db.session() as session:
        new = await crud.store_samples(session, samples=retry)
    assert [(s.ts, s.value) for s in new] == [(T0 + timedelta(seconds=45), 200.0)]
    assert await count_samples(db) == 5
    first_minute = (await all_rollups(db, job="run-1"))[0]
    assert (first_minute.count, first_minute.total, first_minute.max) == (2, 300.0, 200.0)
    assert (T0, "run-1", 3, 600.0) in await all_hourly(db)


async def test_a_repeat_within_one_batch_is_stored_once_and_the_first_wins(db: Database) -> None:
    at = T0 + timedelta(seconds=30)
    # The same instant written in another zone is the same sample.
    later_zone = at.astimezone(timezone(timedelta(hours=9)))
    async with db.session() as session:
        new = await crud.store_samples(
            session, samples=[sample(at, 100.0), sample(later_zone, 999.0), sample(at, 5.0, job="run-2")]
        )
    assert [(s.job, s.value) for s in new] == [("run-1", 100.0), ("run-2", 5.0)]
    async with db.session() as session:
        stored = await crud.samples(session, org_id=ORG, cluster=CLUSTER, job=None, since=T0, until=at + timedelta(1))
    assert [(s.job, s.value) for s in stored] == [("run-1", 100.0), ("run-2", 5.0)]
    assert [(r.job, r.count, r.total) for r in await all_rollups(db)] == [("run-1", 1, 100.0), ("run-2", 1, 5.0)]


async def test_retries_sent_at_once_are_stored_once(db: Database) -> None:
    rows = [sample(T0 + timedelta(seconds=i), float(i), job=f"job-{i % 4}") for i in range(600)]

    async def send() -> int:
        async with db.session() as session:
            return len(await crud.store_samples(session, samples=rows))

    stored = await asyncio.gather(*(send() for _ in range(4)))
    assert sum(stored) == 600 and sorted(stored)[:3] == [0, 0, 0]
    assert await count_samples(db) == 600
    rollups = await all_rollups(db)
    assert sum(r.count for r in rollups) == 600
    assert sum(r.total for r in rollups) == pytest.approx(sum(range(600)))
    assert sum(count for _, _, count, _ in await all_hourly(db)) == 600


def test_migration_0007_keeps_the_first_of_samples_stored_twice(database_url: str) -> None:
    """Duplicates stored by retries before 0007 are removed (the lowest id stays), then the key is unique."""
    upgrade(database_url, "0006")

    async def run(*statements: str) -> list[tuple[object, ...]]:
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

    insert = (
        "INSERT INTO throughput_samples (org_id, cluster, job, ts, tokens_per_second, received_at) "
        "VALUES ('kumo-labs', 'kumo-p5', '{job}', '2026-11-30 09:00:00', {value}, '2026-11-30 09:00:00')"
    )
    asyncio.run(
        run(
            insert.format(job="run-1", value=1),
            insert.format(job="run-1", value=2),
            insert.format(job="run-2", value=3),
            insert.format(job="run-1", value=4),
        )
    )
    upgrade(database_url)
    kept = asyncio.run(run("SELECT job, tokens_per_second FROM throughput_samples ORDER BY id"))
    assert kept == [("run-1", 1.0), ("run-2", 3.0)]
    with pytest.raises(IntegrityError):
        asyncio.run(run(insert.format(job="run-2", value=5)))


async def test_an_empty_batch_stores_nothing(db: Database) -> None:
    assert await add(db) == 0
    assert await count_samples(db) == 0


async def test_a_large_batch_is_stored_in_chunks(db: Database) -> None:
    rows = [sample(T0 + timedelta(seconds=i), float(i), job=f"job-{i % 3}") for i in range(1200)]
    assert await add(db, *rows) == 1200
    assert await count_samples(db) == 1200
    rollups = await all_rollups(db)
    assert sum(r.count for r in rollups) == 1200
    assert sum(r.total for r in rollups) == pytest.approx(sum(range(1200)))
    assert len(rollups) == 3 * 20  # 3 jobs, 20 minutes


async def test_active_jobs_are_those_with_a_sample_since(db: Database) -> None:
    await add(
        db,
        sample(T0 - timedelta(hours=2), 1.0, job="old"),
        sample(T0, 1.0, job="run-b"),
        sample(T0 + timedelta(minutes=1), 1.0, job="run-a"),
        sample(T0 + timedelta(minutes=2), 1.0, job="run-a"),
        sample(T0, None, job="starting", event="start", cluster="kumo-trn1"),
    )
    async with db.session() as session:
        active = await crud.active_jobs(session, since=T0)
        none = await crud.active_jobs(session, since=T0 + timedelta(hours=1))
    assert active == [(ORG, CLUSTER, "run-a"), (ORG, CLUSTER, "run-b"), (ORG, "kumo-trn1", "starting")]
    assert none == []


async def test_prune_drops_old_raw_samples_and_keeps_rollups(db: Database) -> None:
    await add(db, sample(T0 - timedelta(days=20), 10.0), sample(T0 - timedelta(days=1), 20.0), sample(T0, 30.0))
    async with db.session() as session:
        assert await crud.prune_samples(session, before=T0 - timedelta(days=14)) == 1
        assert await crud.prune_samples(session, before=T0 - timedelta(days=14)) == 0
        kept = await crud.samples(
            session, org_id=ORG, cluster=CLUSTER, job=None, since=T0 - timedelta(days=30), until=T0 + timedelta(days=1)
        )
        rollups = await crud.rollups(
            session, org_id=ORG, cluster=CLUSTER, job=None, since=T0 - timedelta(days=30), until=T0 + timedelta(days=1)
        )
    assert [s.value for s in kept] == [20.0, 30.0]
    assert [r.total for r in rollups] == [10.0, 20.0, 30.0]


async def test_tokens_are_found_by_hash_until_revoked(db: Database) -> None:
    async with db.session() as session:
        token = await crud.add_token(
            session,
            token=ApiToken(org_id=ORG, token_hash="a" * 64, prefix="pct_abcdefgh", created_at=T0, created_by="ops"),
        )
        found = await crud.token_by_hash(session, token_hash="a" * 64)
        assert found is not None and found.org_id == ORG and found.created_at == T0
        assert await crud.token_by_hash(session, token_hash="b" * 64) is None
        await session.exec(update(ApiToken).where(col(ApiToken.id) == token.id).values(revoked_at=T0))
        await session.commit()
        assert await crud.token_by_hash(session, token_hash="a" * 64) is None


async def test_a_token_hash_is_unique(db: Database) -> None:
    async with db.session() as session:
        await crud.add_token(session, token=ApiToken(org_id=ORG, token_hash="c" * 64, prefix="p", created_at=T0))
    async with db.session() as session:
        with pytest.raises(IntegrityError):
            await crud.add_token(
                session, token=ApiToken(org_id="sakura-ai", token_hash="c" * 64, prefix="p", created_at=T0)
            )
