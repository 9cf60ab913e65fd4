"""Alert storage on SQLite and Postgres: episodes opened once across replicas, closed once, found by any of
their nodes; silences; events seen once; the leader lease."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy import inspect
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import create_async_engine

from storage import crud
from storage.db import Database, upgrade
from storage.models import Episode, Silence

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
KEY = {"org_id": "kumo-labs", "backend": "hyperpod", "cluster_name": "kumo-p5"}


def utc(at: datetime | None) -> datetime | None:
    """SQLite gives naive UTC back, Postgres aware: compare them as aware."""
    return at if at is None or at.tzinfo else at.replace(tzinfo=UTC)


def episode(node_key: str = "i-0aaa", generation: int = 0, at: datetime = T0, **values: object) -> Episode:
    fields: dict[str, object] = {
        **KEY,
        "node_key": node_key,
        "generation": generation,
        "kind": "cluster" if node_key == "cluster" else "node",
        "state": "open",
        "node_ids": [] if node_key == "cluster" else [node_key],
        "group_name": "workers",
        "instance_type": "ml.p5.48xlarge",
        "status": "Failure",
        "opened_at": at,
        "updated_at": at,
        **values,
    }
    return Episode.model_validate(fields)


async def add(db: Database, row: Episode) -> Episode:
    async with db.session() as session:
        added = await crud.add_episode(session, episode=row)
    assert added is not None and added.id is not None
    return added


async def test_migrations_create_the_alert_tables_and_are_idempotent(db: Database) -> None:
    await db.upgrade()
    async with db.engine.connect() as connection:
        tables = await connection.run_sync(lambda sync: set(inspect(sync).get_table_names()))
        unique = await connection.run_sync(lambda sync: inspect(sync).get_unique_constraints("episodes"))
    assert {"episodes", "silences", "leases", "events_seen"} <= tables
    assert [c["name"] for c in unique] == ["uq_episode_key"]


async def test_an_episode_is_opened_once_when_two_replicas_race(db: Database) -> None:
    async def open_one(replica: str) -> Episode | None:
        async with db.session() as session:
            return await crud.add_episode(session, episode=episode(message=f"seen by {replica}"))

    results = await asyncio.gather(open_one("a"), open_one("b"))
    assert sum(r is None for r in results) == 1, "exactly one replica loses the race"
    winner = next(r for r in results if r is not None)
    async with db.session() as session:
        rows = await crud.open_episodes(session)
        stored = await crud.get_episode(session, episode_id=winner.id or 0)
    assert [r.id for r in rows] == [winner.id]
    assert stored is not None and stored.message == winner.message and stored.node_ids == ["i-0aaa"]
    assert utc(stored.opened_at) == T0


async def test_next_generation_is_one_past_the_last_closed_episode_of_one_key(db: Database) -> None:
    async with db.session() as session:
        assert await crud.next_generation(session, **KEY, kind="node", node_key="i-0aaa") == 0
    await add(db, episode("i-0aaa", 0, state="closed"))
    await add(db, episode("i-0aaa", 1))
    await add(db, episode("cluster", 0))
    async with db.session() as session:
        # The open generation 1 is not skipped: a replica racing to open it again must collide with it.
        assert await crud.next_generation(session, **KEY, kind="node", node_key="i-0aaa") == 1
        assert await crud.next_generation(session, **KEY, kind="cluster", node_key="cluster") == 0
        assert await crud.next_generation(session, **KEY, kind="node", node_key="i-0bbb") == 0
        other_backend = {**KEY, "backend": "pcluster"}
        assert await crud.next_generation(session, **other_backend, kind="node", node_key="i-0aaa") == 0


async def test_latest_episode_is_found_by_any_of_its_nodes(db: Database) -> None:
    first = await add(db, episode("i-0aaa", 0, node_ids=["i-0aaa", "i-0bbb"], state="closed"))
    await add(db, episode("i-0ccc", 0, at=T0 + timedelta(minutes=1)))
    async with db.session() as session:
        by_replacement = await crud.latest_episode(session, **KEY, node_ids=["i-0bbb"])
        by_opener = await crud.latest_episode(session, **KEY, node_ids=["i-0zzz", "i-0aaa"])
        unknown = await crud.latest_episode(session, **KEY, node_ids=["i-0zzz"])
        elsewhere = await crud.latest_episode(session, **{**KEY, "cluster_name": "other"}, node_ids=["i-0bbb"])
    assert by_replacement is not None and by_replacement.id == first.id, "found by a later node id"
    assert by_opener is not None and by_opener.id == first.id
    assert unknown is None and elsewhere is None

    later = await add(db, episode("i-0bbb", 0, at=T0 + timedelta(hours=1), node_ids=["i-0bbb"]))
    async with db.session() as session:
        newest = await crud.latest_episode(session, **KEY, node_ids=["i-0bbb"])
    assert newest is not None and newest.id == later.id, "the most recent one wins"


async def test_an_episode_is_closed_once_and_updated(db: Database) -> None:
    opened = await add(db, episode())
    episode_id = opened.id or 0
    async with db.session() as session:
        await crud.update_episode(
            session,
            episode_id=episode_id,
            values={"node_ids": ["i-0aaa", "i-0bbb"], "acked_by": "U0ALICE01", "acked_at": T0, "reopened": 1},
        )

    async def close(i: int) -> bool:
        async with db.session() as session:
            return await crud.close_episode(
                session,
                episode_id=episode_id,
                values={"closed_at": T0 + timedelta(minutes=i), "node_hours_lost": 0.5 + i},
            )

    results = await asyncio.gather(*(close(i) for i in range(5)))
    assert sorted(results) == [False] * 4 + [True]
    async with db.session() as session:
        stored = await crud.get_episode(session, episode_id=episode_id)
        still_open = await crud.open_episodes(session)
        again = await crud.close_episode(session, episode_id=episode_id, values={})
    assert stored is not None and stored.state == "closed" and stored.closed_at is not None
    assert stored.node_ids == ["i-0aaa", "i-0bbb"] and stored.acked_by == "U0ALICE01" and stored.reopened == 1
    assert still_open == [] and again is False


async def test_open_episodes_and_episodes_between_filter_by_org_and_window(db: Database) -> None:
    old = await add(db, episode("i-0old", at=T0 - timedelta(days=10), state="closed", closed_at=T0 - timedelta(days=9)))
    closed_in = await add(
        db, episode("i-0late", at=T0 - timedelta(days=8), state="closed", closed_at=T0 + timedelta(days=1))
    )
    opened_in = await add(db, episode("i-0new", at=T0 + timedelta(days=2)))
    other = await add(db, episode("i-0oth", at=T0 + timedelta(days=3), org_id="sakura-ai"))
    async with db.session() as session:
        week = await crud.episodes_between(session, org_id=None, since=T0, until=T0 + timedelta(days=7))
        kumo_week = await crud.episodes_between(session, org_id="kumo-labs", since=T0, until=T0 + timedelta(days=7))
        kumo_open = await crud.open_episodes(session, org_id="kumo-labs")
        all_open = await crud.open_episodes(session)
    assert [e.id for e in week] == [closed_in.id, opened_in.id, other.id]
    assert [e.id for e in kumo_week] == [closed_in.id, opened_in.id]
    assert old.id not in {e.id for e in week}
    assert [e.id for e in kumo_open] == [opened_in.id]
    assert {e.id for e in all_open} == {opened_in.id, other.id}


async def test_the_latest_running_silence_applies(db: Database) -> None:
    def silence(created: datetime, until: datetime, **values: str) -> Silence:
        fields: dict[str, object] = {
            **KEY,
            "until": until,
            "set_by": "U0ALICE01",
            "channel_id": "C0KUMOLAB",
            "thread_ts": "1764493200.000100",
            "created_at": created,
            **values,
        }
        return Silence.model_validate(fields)

    async with db.session() as session:
        await crud.add_silence(session, silence=silence(T0, T0 + timedelta(hours=4)))
        await crud.add_silence(session, silence=silence(T0 + timedelta(hours=1), T0 + timedelta(hours=2), set_by="U02"))
        await crud.add_silence(session, silence=silence(T0, T0 + timedelta(hours=9), backend="pcluster"))
    async with db.session() as session:
        at_90m = await crud.active_silence(session, **KEY, now=T0 + timedelta(minutes=90))
        at_3h = await crud.active_silence(session, **KEY, now=T0 + timedelta(hours=3))
        at_5h = await crud.active_silence(session, **KEY, now=T0 + timedelta(hours=5))
    assert at_90m is not None and at_90m.set_by == "U02", "the latest one set wins"
    assert at_3h is not None and at_3h.set_by == "U0ALICE01" and utc(at_3h.until) == T0 + timedelta(hours=4)
    assert at_3h.thread_ts == "1764493200.000100"
    assert at_5h is None, "a silence on the other backend's same-named cluster does not count"


async def test_an_event_is_seen_once_across_concurrent_deliveries(db: Database) -> None:
    async def mark(event_id: str) -> bool:
        async with db.session() as session:
            return await crud.mark_event_seen(session, event_id=event_id, at=T0)

    results = await asyncio.gather(*(mark("evt-1") for _ in range(5)))
    assert sorted(results) == [False] * 4 + [True]
    async with db.session() as session:
        assert await crud.event_seen(session, event_id="evt-1") is True
        assert await crud.event_seen(session, event_id="evt-2") is False
    assert await mark("evt-2") is True
    assert await mark("evt-1") is False
    async with db.session() as session:
        assert await crud.forget_events_seen(session, before=T0 + timedelta(days=1)) == 2
    assert await mark("evt-1") is True


async def test_the_lease_is_held_by_one_holder_until_released(db: Database) -> None:
    # Expiry is by the database's clock: tests/monitor/test_lease.py waits for it.
    async def acquire(holder: str) -> bool:
        async with db.session() as session:
            return await crud.acquire_lease(session, name="monitors", holder=holder, ttl_seconds=600)

    assert await acquire("a") is True
    assert await acquire("b") is False, "valid: refused"
    assert await acquire("a") is True, "renewed"
    async with db.session() as session:
        await crud.release_lease(session, name="monitors", holder="b")  # not b's: nothing happens
    assert await acquire("b") is False
    async with db.session() as session:
        await crud.release_lease(session, name="monitors", holder="a")
    assert await acquire("b") is True, "released: free at once"
    assert await acquire("a") is False


async def test_concurrent_acquires_of_a_free_lease_have_one_winner(db: Database) -> None:
    async def acquire(holder: str) -> bool:
        async with db.session() as session:
            return await crud.acquire_lease(session, name="monitors", holder=holder, ttl_seconds=15)

    results = await asyncio.gather(*(acquire(f"replica-{i}") for i in range(5)))
    assert sorted(results) == [False] * 4 + [True]


async def test_storm_episodes_are_the_members_of_one_grouped_message(db: Database) -> None:
    first = await add(db, episode("i-0aaa", failing_since=T0))
    second = await add(db, episode("i-0bbb"))
    alone = await add(db, episode("i-0ccc"))
    for member in (first, second):
        async with db.session() as session:
            await crud.update_episode(session, episode_id=member.id or 0, values={"storm_id": first.id})
    async with db.session() as session:
        members = await crud.storm_episodes(session, storm_id=first.id or 0)
        stored = await crud.get_episode(session, episode_id=first.id or 0)
    assert [m.id for m in members] == [first.id, second.id]
    assert alone.id not in {m.id for m in members}
    assert stored is not None and utc(stored.failing_since) == T0


async def test_a_silence_holds_its_clusters_job_alerts_and_ends_early_once(db: Database) -> None:
    """Issue 11: a silence set on a node alert holds the same cluster's throughput alerts (and the other way
    round), and Unsilence ends it in one conditional UPDATE: the first press ends it, the next finds it ended."""

    def silence(backend: str, **values: object) -> Silence:
        fields: dict[str, object] = {
            **KEY,
            "backend": backend,
            "until": T0 + timedelta(hours=1),
            "set_by": "U0ALICE01",
            "channel_id": "C0KUMOLAB",
            "thread_ts": "1764493200.000100",
            "created_at": T0,
            **values,
        }
        return Silence.model_validate(fields)

    async with db.session() as session:
        on_node = await crud.add_silence(session, silence=silence("hyperpod"))
    at = T0 + timedelta(minutes=5)
    cluster = {"org_id": "kumo-labs", "cluster_name": "kumo-p5", "now": at}
    async with db.session() as session:
        for_job = await crud.active_silence(session, backend="throughput", also=("hyperpod", "pcluster"), **cluster)
        alone = await crud.active_silence(session, backend="throughput", **cluster)
    assert for_job is not None and for_job.id == on_node.id and alone is None

    ends = await asyncio.gather(
        *(
            _end(db, on_node.id or 0, by)
            for by in ("U0ALICE01", "U0ADMIN01", "U0ALICE01")  # two people, and a double click, at once
        )
    )
    assert sorted(ends) == [False, False, True]
    async with db.session() as session:
        after = await crud.active_silence(session, backend="hyperpod", **cluster)
        ended = await crud.get_silence(session, silence_id=on_node.id or 0)
    assert after is None and ended is not None and utc(ended.ended_at) == at

    async with db.session() as session:  # a silence past its time cannot be ended again
        old = await crud.add_silence(session, silence=silence("throughput", until=T0 - timedelta(minutes=1)))
    assert not await _end(db, old.id or 0, "U0ALICE01")


async def _end(db: Database, silence_id: int, by: str) -> bool:
    async with db.session() as session:
        return await crud.end_silence(session, silence_id=silence_id, by=by, now=T0 + timedelta(minutes=5))


async def test_the_alert_a_silence_was_set_from_is_found_by_its_message(db: Database) -> None:
    own = await add(db, episode("i-0own", channel_id="C0KUMOLAB", message_ts="1.000100"))
    await add(db, episode("i-0held", channel_id="C0KUMOLAB", message_ts="1.000100", silenced=True))
    async with db.session() as session:
        found = await crud.episode_with_message(session, channel_id="C0KUMOLAB", message_ts="1.000100")
        none = await crud.episode_with_message(session, channel_id="C0KUMOLAB", message_ts="2.000100")
    assert found is not None and found.id == own.id and none is None


async def _sql(database_url: str, *statements: str) -> list[tuple[object, ...]]:
    """Run raw SQL on a database at an older revision (the ORM knows only the newest); the last one's rows."""
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


def test_migration_0009_names_every_job_episode_and_keys_episodes_by_kind(database_url: str) -> None:
    """Job episodes stored before 0009 may be known by their backend alone: they get kind "job"; then the
    kind is part of the unique key, so two kinds of one cluster may share a node key, one kind may not."""
    upgrade(database_url, "0008")
    columns = (
        "org_id, backend, cluster_name, node_key, generation, kind, state, node_ids, opened_at, updated_at, "
        "group_name, instance_type, status, message, reopened, node_recovery, silenced, channel_id, node_hours_lost"
    )
    insert = (
        f"INSERT INTO episodes ({columns}) VALUES "
        "('kumo-labs', '{backend}', 'kumo-p5', '{key}', 0, '{kind}', 'open', '[]', '2026-11-30 09:00:00', "
        "'2026-11-30 09:00:00', '', '', '', '', 0, '', false, '', 0)"
    )

    def run(*statements: str) -> list[tuple[object, ...]]:
        return asyncio.run(_sql(database_url, *statements))

    run(
        insert.format(backend="throughput", key="run-1", kind="node"),
        insert.format(backend="throughput", key="run-2", kind="job"),
        insert.format(backend="hyperpod", key="i-0aaa", kind="node"),
    )
    upgrade(database_url, "0009")
    kinds = run("SELECT node_key, kind FROM episodes ORDER BY node_key")
    assert kinds == [("i-0aaa", "node"), ("run-1", "job"), ("run-2", "job")]
    run(insert.format(backend="hyperpod", key="i-0aaa", kind="idle"))  # another kind, same key
    with pytest.raises(IntegrityError):
        run(insert.format(backend="hyperpod", key="i-0aaa", kind="node"))


def test_migration_0010_gives_older_episodes_no_cause_and_no_suspects(database_url: str) -> None:
    """Episodes stored before per-node metrics read as not assessed ("" and []), and new ones keep theirs."""
    upgrade(database_url, "0009")
    asyncio.run(
        _sql(
            database_url,
            "INSERT INTO episodes (org_id, backend, cluster_name, node_key, generation, kind, state, node_ids, "
            "opened_at, updated_at, group_name, instance_type, status, message, reopened, node_recovery, silenced, "
            "channel_id, node_hours_lost) VALUES ('kumo-labs', 'throughput', 'kumo-p5', 'run-1', 0, 'job', 'open', "
            "'[]', '2026-11-30 09:00:00', '2026-11-30 09:00:00', '', '', 'slowdown', '', 0, '', false, '', 0)",
        )
    )
    upgrade(database_url)

    async def check() -> None:
        db = Database(url=database_url)
        try:
            async with db.session() as session:
                (old,) = await crud.open_episodes(session)
                assert (old.cause, old.suspects) == ("", [])
                old.cause, old.suspects = "thermal", ["i-0abc", "i-0def"]
                session.add(old)
                await session.commit()
            async with db.session() as session:
                (again,) = await crud.open_episodes(session)
            assert (again.cause, again.suspects) == ("thermal", ["i-0abc", "i-0def"])
        finally:
            await db.dispose()

    asyncio.run(check())
