"""Tracking storage on SQLite and Postgres: records stored once per request, incidents resolved once, the
digest's window queries, requirements, the cluster-state ledger, digest runs claimed once across replicas, and
quota notices given once."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text
from sqlmodel import func, select
from sqlmodel.ext.asyncio.session import AsyncSession

from bot.alerts.kind import Bucket
from bot.alerts.kinds import in_bucket
from storage import crud, tracking
from storage.db import Database
from storage.models import (
    ClusterState,
    DigestRun,
    Episode,
    Operation,
    QuotaNotice,
    ThroughputRollup,
    TrackRecord,
)

T0 = datetime(2026, 11, 23, tzinfo=UTC)  # Monday of 2026-W48
T1 = T0 + timedelta(days=7)
ORG, OTHER = "kumo-labs", "sora-ai"
WEEK = "2026-W48"

K1 = ("hyperpod", "kumo-p5", "ml.p5.48xlarge")
K2 = ("hyperpod", "kumo-p5", "ml.c5.xlarge")
K3 = ("eks", "kumo-eks", "p5.48xlarge")
K4 = ("hyperpod", "kumo-p5b", "ml.p5.48xlarge")  # another cluster of K1's type
K5 = ("eks", "kumo-eks", "p4d.24xlarge")

FAILURES, STALLS = in_bucket(Bucket.FAILURE), in_bucket(Bucket.STALL)  # the digest's two buckets


# ------------------------------------------------------------------------------------------------ helpers


def record(
    at: datetime, kind: str = "note", *, org: str = ORG, key: str | None = None, **values: object
) -> TrackRecord:
    fields: dict[str, object] = {
        "org_id": org,
        "kind": kind,
        "text": f"{kind} at {at.isoformat()}",
        "created_by": "U01ALICE",
        "created_at": at,
        "channel_id": "C0KUMO",
        "request_key": key,
        **values,
    }
    return TrackRecord.model_validate(fields)


async def add(db: Database, row: TrackRecord) -> TrackRecord:
    async with db.session() as session:
        stored, new = await tracking.add_record(session, record=row)
    assert new and stored.id is not None
    return stored


async def count(db: Database, table: type) -> int:
    async with db.session() as session:
        return int((await session.exec(select(func.count()).select_from(table))).one())


def texts(rows: Sequence[TrackRecord]) -> list[str]:
    return [r.text for r in rows]


def states(rows: Sequence[ClusterState]) -> list[tuple[tuple[str, str, str], int, datetime]]:
    return [((s.backend, s.cluster_name, s.instance_type), s.count, s.at) for s in rows]


async def hold(db: Database, held: dict[tuple[str, str, str], int], at: datetime, org: str = ORG) -> list[ClusterState]:
    async with db.session() as session:
        return await tracking.record_cluster_states(session, org_id=org, held=held, at=at)


def episode(
    node_key: str, opened: datetime, closed: datetime | None = None, *, backend: str = "hyperpod", org: str = ORG
) -> Episode:
    return Episode(
        org_id=org,
        backend=backend,
        cluster_name="kumo-p5",
        node_key=node_key,
        generation=0,
        kind="job" if backend == "throughput" else "cluster" if node_key == "cluster" else "node",
        state="open" if closed is None else "closed",
        node_ids=[] if node_key == "cluster" or backend == "throughput" else [node_key],
        group_name="workers",
        instance_type="ml.p5.48xlarge",
        status="Failure",
        message="",
        opened_at=opened,
        failing_since=opened,
        updated_at=closed or opened,
        closed_at=closed,
        reopened=0,
        node_recovery="",
        silenced=False,
        channel_id="C0KUMO",
        node_hours_lost=0.0,
    )


def operation(op_id: str, status: str, updated: datetime, *, org: str = ORG) -> Operation:
    return Operation(
        id=op_id,
        kind="scale",
        org_id=org,
        backend="hyperpod",
        cluster_name=f"cluster-{op_id}",  # one running change per cluster: give each its own
        template="",
        request={"count": 4},
        requested_by="U01ALICE",
        requested_at=updated - timedelta(minutes=5),
        channel_id="C0KUMO",
        status=status,
        detail="",
        updated_at=updated,
    )


def rollup(
    job: str, minute: datetime, n: int, total: float, *, org: str = ORG, cluster: str = "kumo-p5"
) -> ThroughputRollup:
    return ThroughputRollup(org_id=org, cluster=cluster, job=job, minute=minute, count=n, total=total, min=0.0, max=0.0)


async def claim(
    db: Database,
    week: str = WEEK,
    channel: str = "C0COORD",
    *,
    by: str = "replica-a",
    at: datetime = T0,
    attempt: int = 0,
) -> DigestRun | None:
    async with db.session() as session:
        return await tracking.claim_digest_run(session, week=week, channel=channel, by=by, at=at, attempt=attempt)


async def runs(db: Database, week: str | None = None) -> list[DigestRun]:
    async with db.session() as session:
        return list(await tracking.digest_runs(session, week=week))


def notice(level: int, instance_type: str = "ml.p5.48xlarge", *, held: int = 8, org: str = ORG) -> QuotaNotice:
    return QuotaNotice(org_id=org, instance_type=instance_type, level=level, held=held, quota=10, at=T0)


async def notices(db: Database, org: str = ORG) -> list[tuple[str, int, int]]:
    async with db.session() as session:
        rows = await tracking.quota_notices(session, org_id=org)
    return sorted((n.instance_type, n.level, n.held) for n in rows)


# ------------------------------------------------------------------------------------------------ records


async def test_add_record_stores_it_and_returns_it_as_new(db: Database) -> None:
    async with db.session() as session:
        stored, new = await tracking.add_record(session, record=record(T0, "milestone", key="trigger-1"))
    assert new is True
    assert stored.id is not None and stored.kind == "milestone" and stored.request_key == "trigger-1"
    async with db.session() as session:
        got = await tracking.get_record(session, record_id=stored.id)
        missing = await tracking.get_record(session, record_id=stored.id + 1000)
    assert got is not None and got.text == stored.text and got.created_at == T0 and got.resolved_at is None
    assert missing is None


async def test_a_retried_request_is_recorded_once(db: Database) -> None:
    first = await add(db, record(T0, key="trigger-1", text="first"))
    async with db.session() as session:
        again, new = await tracking.add_record(session, record=record(T0 + timedelta(seconds=3), key="trigger-1"))
    assert new is False
    assert again.id == first.id and again.text == "first" and again.created_at == T0
    assert await count(db, TrackRecord) == 1


async def test_records_without_a_request_key_are_all_stored(db: Database) -> None:
    one = await add(db, record(T0, text="same"))
    two = await add(db, record(T0, text="same"))
    assert one.id != two.id
    assert await count(db, TrackRecord) == 2


async def test_a_request_raced_by_two_replicas_is_recorded_once(db: Database) -> None:
    async def add_one(replica: str) -> tuple[TrackRecord, bool]:
        async with db.session() as session:
            return await tracking.add_record(session, record=record(T0, key="view-7", text=f"by {replica}"))

    results = await asyncio.gather(add_one("a"), add_one("b"))
    assert sorted(new for _, new in results) == [False, True]
    assert results[0][0].id == results[1][0].id
    winner = next(row for row, new in results if new)
    assert next(row for row, new in results if not new).text == winner.text
    assert await count(db, TrackRecord) == 1


async def test_an_incident_is_resolved_once(db: Database) -> None:
    incident = await add(db, record(T0, "incident"))
    async with db.session() as session:
        assert await tracking.resolve_record(
            session, record_id=incident.id or 0, by="U02BOB", at=T0 + timedelta(hours=1)
        )
    async with db.session() as session:
        assert not await tracking.resolve_record(session, record_id=incident.id or 0, by="U03CAROL", at=T1)
    async with db.session() as session:
        stored = await tracking.get_record(session, record_id=incident.id or 0)
    assert stored is not None
    assert stored.resolved_at == T0 + timedelta(hours=1) and stored.resolved_by == "U02BOB"


async def test_only_incidents_that_exist_can_be_resolved(db: Database) -> None:
    note = await add(db, record(T0, "note"))
    async with db.session() as session:
        assert not await tracking.resolve_record(session, record_id=note.id or 0, by="U02BOB", at=T0)
        assert not await tracking.resolve_record(session, record_id=(note.id or 0) + 1000, by="U02BOB", at=T0)
    async with db.session() as session:
        stored = await tracking.get_record(session, record_id=note.id or 0)
    assert stored is not None and stored.resolved_at is None and stored.resolved_by is None


async def test_records_between_is_a_half_open_window_of_the_orgs_asked(db: Database) -> None:
    for row in [
        record(T0 + timedelta(hours=2), text="two hours in"),
        record(T0 - timedelta(seconds=1), text="just before"),
        record(T0, text="at the start"),
        record(T0 + timedelta(hours=1), text="an hour in"),
        record(T0 + timedelta(hours=1), text="an hour in, second"),
        record(T1 - timedelta(seconds=1), text="last second"),
        record(T1, text="at the end"),
        record(T0 + timedelta(hours=3), org=OTHER, text="another org"),
        record(T0 + timedelta(hours=4), org="third-org", text="a third org"),
    ]:
        await add(db, row)
    async with db.session() as session:
        window = await tracking.records_between(session, org_ids=[ORG], since=T0, until=T1)
        both = await tracking.records_between(session, org_ids=[ORG, OTHER], since=T0, until=T1)
        newest = await tracking.records_between(session, org_ids=[ORG], since=T0, until=T1, limit=2)
        none = await tracking.records_between(session, org_ids=[], since=T0, until=T1)
    assert texts(window) == ["at the start", "an hour in", "an hour in, second", "two hours in", "last second"]
    assert texts(both) == [
        "at the start",
        "an hour in",
        "an hour in, second",
        "two hours in",
        "another org",
        "last second",
    ]
    assert texts(newest) == ["last second", "two hours in"]
    assert list(none) == []


async def test_count_records_between_counts_one_org_in_the_window(db: Database) -> None:
    for at in [T0 - timedelta(seconds=1), T0, T0 + timedelta(days=1), T1 - timedelta(seconds=1), T1]:
        await add(db, record(at))
    await add(db, record(T0 + timedelta(days=2), "incident"))
    await add(db, record(T0 + timedelta(days=2), org=OTHER))
    async with db.session() as session:
        assert await tracking.count_records_between(session, org_id=ORG, since=T0, until=T1) == 4
        assert await tracking.count_records_between(session, org_id=OTHER, since=T0, until=T1) == 1
        assert await tracking.count_records_between(session, org_id="nobody", since=T0, until=T1) == 0
        assert await tracking.count_records_between(session, org_id=ORG, since=T1, until=T1 + timedelta(days=1)) == 1


async def test_open_incidents_are_those_opened_before_and_not_resolved_by_then(db: Database) -> None:
    at = T0 + timedelta(days=3)
    rows = [
        record(T0 + timedelta(days=1), "incident", text="still open"),
        record(T0, "incident", text="resolved later", resolved_at=at + timedelta(hours=1), resolved_by="U02BOB"),
        record(T0 - timedelta(days=1), "incident", text="resolved before", resolved_at=at - timedelta(seconds=1)),
        record(at, "incident", text="opened at that moment"),
        record(at + timedelta(hours=1), "incident", text="opened after"),
        record(T0, "note", text="a note"),
        record(T0, "incident", org=OTHER, text="another org's"),
    ]
    for row in rows:
        await add(db, row)
    async with db.session() as session:
        open_then = await tracking.open_incidents(session, org_ids=[ORG], at=at)
        open_in_both = await tracking.open_incidents(session, org_ids=[ORG, OTHER], at=at)
        open_later = await tracking.open_incidents(session, org_ids=[ORG], at=T1)
    assert texts(open_then) == ["resolved later", "still open"]  # oldest first
    assert texts(open_in_both) == ["resolved later", "another org's", "still open"]
    assert texts(open_later) == ["still open", "opened at that moment", "opened after"]


async def test_resolved_between_lists_incidents_resolved_in_the_window(db: Database) -> None:
    def resolved(at: datetime, text: str, kind: str = "incident", org: str = ORG) -> TrackRecord:
        return record(T0 - timedelta(days=5), kind, org=org, text=text, resolved_at=at, resolved_by="U02BOB")

    for row in [
        resolved(T0 + timedelta(days=2), "second"),
        resolved(T0, "first"),
        resolved(T0 - timedelta(seconds=1), "before"),
        resolved(T1, "at the end"),
        resolved(T0 + timedelta(days=1), "a note", kind="note"),
        resolved(T0 + timedelta(days=1), "another org's", org=OTHER),
        record(T0 + timedelta(days=1), "incident", text="unresolved"),
    ]:
        await add(db, row)
    async with db.session() as session:
        found = await tracking.resolved_between(session, org_ids=[ORG], since=T0, until=T1)
        both = await tracking.resolved_between(session, org_ids=[ORG, OTHER], since=T0, until=T1)
    assert texts(found) == ["first", "second"]
    assert texts(both) == ["first", "another org's", "second"]


# ------------------------------------------------------------------------------------------- requirements


async def test_set_requirements_returns_what_changed_and_upserts(db: Database) -> None:
    later = T0 + timedelta(days=1)
    async with db.session() as session:
        first = await tracking.set_requirements(
            session, org_id=ORG, pairs=[("model_size", "70B"), ("framework", "jax")], by="U01ALICE", at=T0
        )
    assert first == [("model_size", None, "70B"), ("framework", None, "jax")]
    async with db.session() as session:
        second = await tracking.set_requirements(
            session,
            org_id=ORG,
            pairs=[("model_size", "175B"), ("framework", "jax"), ("deadline", "2027-01-15")],
            by="U02BOB",
            at=later,
        )
    assert second == [("model_size", "70B", "175B"), ("deadline", None, "2027-01-15")]
    async with db.session() as session:
        unchanged = await tracking.set_requirements(
            session, org_id=ORG, pairs=[("framework", "jax")], by="U03CAROL", at=T1
        )
        await tracking.set_requirements(session, org_id=OTHER, pairs=[("framework", "pytorch")], by="U09", at=T0)
    assert unchanged == []
    async with db.session() as session:
        mine = await tracking.requirements(session, org_ids=[ORG])
        both = await tracking.requirements(session, org_ids=[OTHER, ORG])
    assert [(r.key, r.value, r.set_by, r.set_at) for r in mine] == [
        ("deadline", "2027-01-15", "U02BOB", later),
        ("framework", "jax", "U01ALICE", T0),  # set to the same value again: untouched
        ("model_size", "175B", "U02BOB", later),
    ]
    assert [(r.org_id, r.key) for r in both] == [
        (ORG, "deadline"),
        (ORG, "framework"),
        (ORG, "model_size"),
        (OTHER, "framework"),
    ]


# ----------------------------------------------------------------------------------------- cluster states


async def test_record_cluster_states_writes_only_changes(db: Database) -> None:
    first = await hold(db, {K1: 4, K2: 2, K3: 0}, T0)
    assert states(first) == [(K2, 2, T0), (K1, 4, T0)]  # sorted by key; a 0 never held is not written
    assert all(s.id is not None and s.org_id == ORG for s in first)

    assert await hold(db, {K1: 4, K2: 2, K3: 0}, T0 + timedelta(minutes=1)) == []

    at = T0 + timedelta(minutes=2)
    assert states(await hold(db, {K1: 6, K2: 2}, at)) == [(K1, 6, at)]

    gone = T0 + timedelta(minutes=3)
    assert states(await hold(db, {K1: 6}, gone)) == [(K2, 0, gone)]  # K2's cluster type is gone: a 0
    assert await hold(db, {K1: 6}, T0 + timedelta(minutes=4)) == []  # still gone: nothing more

    back = T0 + timedelta(minutes=5)
    assert states(await hold(db, {K1: 6, K2: 1}, back)) == [(K2, 1, back)]
    assert await count(db, ClusterState) == 5


async def test_record_cluster_states_keeps_orgs_apart(db: Database) -> None:
    await hold(db, {K1: 4}, T0)
    assert states(await hold(db, {K1: 4}, T0, org=OTHER)) == [(K1, 4, T0)]  # the other org had nothing
    assert states(await hold(db, {}, T0 + timedelta(hours=1), org=OTHER)) == [(K1, 0, T0 + timedelta(hours=1))]
    async with db.session() as session:
        assert await tracking.held_now(session, org_id=ORG) == {"ml.p5.48xlarge": 4}
        assert await tracking.held_now(session, org_id=OTHER) == {}


async def test_held_now_sums_the_latest_counts_by_type(db: Database) -> None:
    async with db.session() as session:
        assert await tracking.held_now(session, org_id=ORG) == {}
    await hold(db, {K1: 4, K2: 2, K3: 1}, T0)
    await hold(db, {K1: 6, K4: 3, K3: 1}, T0 + timedelta(hours=1))  # K2 gone (0), K4 added
    async with db.session() as session:
        held = await tracking.held_now(session, org_id=ORG)
    assert held == {"ml.p5.48xlarge": 9, "p5.48xlarge": 1}


async def test_state_changes_give_the_state_at_the_start_then_the_changes_oldest_first(db: Database) -> None:
    timeline = [
        (T0 - timedelta(days=3), {K5: 2}),
        (T0 - timedelta(days=2), {K5: 2, K1: 4, K2: 2}),
        (T0 - timedelta(days=1), {K5: 2, K1: 4}),  # K2 -> 0 before the window: not in its starting state
        (T0, {K5: 2, K1: 4, K4: 3}),
        (T0 + timedelta(hours=1), {K5: 2, K1: 6, K4: 3}),
        (T0 + timedelta(hours=2), {K5: 2, K1: 6, K4: 3, K3: 1}),
        (T1, {K5: 2, K4: 3, K3: 1}),  # K1 -> 0 at the window's end: excluded
        (T1 + timedelta(days=1), {}),
    ]
    for at, held in timeline:
        await hold(db, held, at)
    await hold(db, {K1: 9}, T0 - timedelta(days=4), org=OTHER)
    await hold(db, {K1: 8}, T0 + timedelta(hours=3), org=OTHER)

    async with db.session() as session:
        changes = await tracking.state_changes(session, org_ids=[ORG], since=T0, until=T1)
        both = await tracking.state_changes(session, org_ids=[ORG, OTHER], since=T0, until=T1)
    assert states(changes) == [
        (K5, 2, T0 - timedelta(days=3)),
        (K1, 4, T0 - timedelta(days=2)),
        (K4, 3, T0),
        (K1, 6, T0 + timedelta(hours=1)),
        (K3, 1, T0 + timedelta(hours=2)),
    ]
    assert [(s.org_id, s.count, s.at) for s in both] == [
        (OTHER, 9, T0 - timedelta(days=4)),
        (ORG, 2, T0 - timedelta(days=3)),
        (ORG, 4, T0 - timedelta(days=2)),
        (ORG, 3, T0),
        (ORG, 6, T0 + timedelta(hours=1)),
        (ORG, 1, T0 + timedelta(hours=2)),
        (OTHER, 8, T0 + timedelta(hours=3)),
    ]


# ------------------------------------------------------------------------------------ episodes, operations


async def test_episodes_overlapping_splits_the_digest_buckets(db: Database) -> None:
    rows = [
        episode("i-closed-inside", T0 - timedelta(days=1), T0 + timedelta(days=1)),
        episode("i-still-open", T0 + timedelta(days=2)),
        episode("i-closed-before", T0 - timedelta(days=3), T0 - timedelta(hours=1)),
        episode("i-opened-after", T1 + timedelta(hours=1)),
        episode("i-opened-at-the-end", T1),
        episode("cluster", T0 - timedelta(days=2)),
        episode("i-other-org", T0 + timedelta(days=1), org=OTHER),
        episode("run-1", T0 + timedelta(hours=1), T0 + timedelta(hours=3), backend="throughput"),
        episode("run-2", T0 - timedelta(days=2), T0 - timedelta(days=1), backend="throughput"),
        episode("run-3", T0 - timedelta(days=2), backend="throughput"),
    ]
    async with db.session() as session:
        session.add_all(rows)
        await session.commit()
    async with db.session() as session:
        nodes = await tracking.episodes_overlapping(session, org_ids=[ORG], kinds=FAILURES, since=T0, until=T1)
        jobs = await tracking.episodes_overlapping(session, org_ids=[ORG], kinds=STALLS, since=T0, until=T1)
        both = await tracking.episodes_overlapping(session, org_ids=[ORG, OTHER], kinds=FAILURES, since=T0, until=T1)
    assert [e.node_key for e in nodes] == ["cluster", "i-closed-inside", "i-still-open"]
    assert nodes[1].closed_at == T0 + timedelta(days=1) and nodes[2].closed_at is None
    assert [e.node_key for e in jobs] == ["run-3", "run-1"]
    assert [e.node_key for e in both] == ["cluster", "i-closed-inside", "i-other-org", "i-still-open"]


async def test_episodes_are_in_the_window_they_began_in_not_only_the_one_they_were_told_in(db: Database) -> None:
    """A hang that began at the week's last minute and was told ten minutes later is the week's; a node
    failure reopened after the week began was under way since its opening (issue 21)."""
    hang = episode("run-late", T1 + timedelta(minutes=9), backend="throughput")
    hang.failing_since = T1 - timedelta(minutes=1)
    told_after = episode("run-after", T1 + timedelta(minutes=20), backend="throughput")
    told_after.failing_since = T1 + timedelta(minutes=5)
    reopened = episode("i-reopened", T0 - timedelta(days=1))
    reopened.failing_since, reopened.reopened = T0 + timedelta(days=1), 1
    async with db.session() as session:
        session.add_all([hang, told_after, reopened])
        await session.commit()
    async with db.session() as session:
        jobs = await tracking.episodes_overlapping(session, org_ids=[ORG], kinds=STALLS, since=T0, until=T1)
        nodes = await tracking.episodes_overlapping(session, org_ids=[ORG], kinds=FAILURES, since=T0, until=T1)
    assert [e.node_key for e in jobs] == ["run-late"]
    assert tracking.began(jobs[0]) == T1 - timedelta(minutes=1)
    assert [e.node_key for e in nodes] == ["i-reopened"] and tracking.began(nodes[0]) == T0 - timedelta(days=1)


async def test_operations_finished_are_done_or_failed_in_the_window(db: Database) -> None:
    rows = [
        operation("op-done", "done", T0 + timedelta(hours=1)),
        operation("op-failed", "failed", T0 + timedelta(hours=2)),
        operation("op-running", "running", T0 + timedelta(hours=3)),
        operation("op-cancelled", "cancelled", T0 + timedelta(hours=4)),
        operation("op-planned", "planned", T0 + timedelta(hours=5)),
        operation("op-before", "done", T0 - timedelta(seconds=1)),
        operation("op-at-end", "done", T1),
        operation("op-at-start", "done", T0),
        operation("op-other-org", "done", T0 + timedelta(hours=1), org=OTHER),
    ]
    async with db.session() as session:
        session.add_all(rows)
        await session.commit()
    async with db.session() as session:
        found = await tracking.operations_finished(session, org_ids=[ORG], since=T0, until=T1)
    assert [(o.id, o.status, o.updated_at) for o in found] == [
        ("op-at-start", "done", T0),
        ("op-done", "done", T0 + timedelta(hours=1)),
        ("op-failed", "failed", T0 + timedelta(hours=2)),
    ]


async def store_rollups(session: AsyncSession, rows: list[ThroughputRollup]) -> None:
    """Minute rollups and their hours, as ingest (crud.add_samples) keeps both."""
    session.add_all(rows)
    await crud.upsert_hourly(session, rows=crud.hourly_rows([row.model_dump() for row in rows]))
    await session.commit()


async def test_hourly_job_means_weight_minutes_by_their_counts(db: Database) -> None:
    def at(hour: int, minute: int) -> datetime:
        return T0.replace(hour=hour, minute=minute)

    rows = [
        # run-1: 09h (200+400)/(2+1) = 200, not the mean of means (250); 10h 500/5 = 100; 11h 900/3 = 300
        rollup("run-1", at(9, 0), 2, 200.0),
        rollup("run-1", at(9, 30), 1, 400.0),
        rollup("run-1", at(10, 0), 4, 400.0),
        rollup("run-1", at(10, 59), 1, 100.0),
        rollup("run-1", at(11, 15), 3, 900.0),
        # run-2: 09h 300/4 = 75; 10h 150; 11h 10
        rollup("run-2", at(9, 5), 1, 50.0),
        rollup("run-2", at(9, 6), 3, 250.0),
        rollup("run-2", at(10, 10), 2, 300.0),
        rollup("run-2", at(11, 59), 1, 10.0),
        # outside the window [09:00, 12:00), another org, a minute with no values
        rollup("run-1", at(8, 59), 1, 9999.0),
        rollup("run-1", at(12, 0), 1, 9999.0),
        rollup("run-1", at(10, 0), 1, 9999.0, org=OTHER),
        rollup("run-3", at(10, 0), 0, 0.0),
    ]
    async with db.session() as session:
        await store_rollups(session, rows)
    async with db.session() as session:
        means = await tracking.hourly_job_means(session, org_ids=[ORG], since=at(9, 0), until=at(12, 0))
    assert sorted(means) == [
        (ORG, "kumo-p5", "run-1", 100.0),
        (ORG, "kumo-p5", "run-1", 200.0),
        (ORG, "kumo-p5", "run-1", 300.0),
        (ORG, "kumo-p5", "run-2", 10.0),
        (ORG, "kumo-p5", "run-2", 75.0),
        (ORG, "kumo-p5", "run-2", 150.0),
    ]
    assert all(isinstance(mean, float) for *_, mean in means)


async def test_hourly_job_means_group_by_cluster_and_across_days(db: Database) -> None:
    rows = [
        rollup("run-1", T0.replace(hour=9), 1, 100.0),
        rollup("run-1", T0.replace(hour=9, minute=1), 1, 300.0, cluster="kumo-p5b"),
        rollup("run-1", T0.replace(hour=9) + timedelta(days=1), 1, 500.0),  # the same hour, the next day
    ]
    async with db.session() as session:
        await store_rollups(session, rows)
    async with db.session() as session:
        means = await tracking.hourly_job_means(session, org_ids=[ORG], since=T0, until=T1)
    assert sorted(means) == [
        (ORG, "kumo-p5", "run-1", 100.0),
        (ORG, "kumo-p5", "run-1", 500.0),
        (ORG, "kumo-p5b", "run-1", 300.0),
    ]


async def test_hourly_job_means_are_utc_hours_whatever_the_session_time_zone(db: Database) -> None:
    if db.engine.dialect.name != "postgresql":
        pytest.skip("SQLite has no session time zone: it groups the stored UTC text")
    hour = T0.replace(hour=9)
    async with db.session() as session:
        await store_rollups(
            session, [rollup("run-1", hour, 1, 100.0), rollup("run-1", hour.replace(minute=45), 1, 300.0)]
        )
    async with db.session() as session:
        await session.exec(text("SET TIME ZONE 'Asia/Kolkata'"))  # a server or role configured so
        means = await tracking.hourly_job_means(session, org_ids=[ORG], since=hour, until=hour.replace(hour=10))
    assert means == [(ORG, "kumo-p5", "run-1", 200.0)]


# ------------------------------------------------------------------------------------------- digest runs


async def test_a_digest_run_is_claimed_once_per_week_channel_and_attempt(db: Database) -> None:
    first = await claim(db)
    assert first is not None and first.id is not None
    assert (first.week, first.channel, first.attempt, first.status) == (WEEK, "C0COORD", 0, "claimed")
    assert (first.claimed_by, first.claimed_at, first.message_ts) == ("replica-a", T0, None)

    assert await claim(db, by="replica-b") is None
    other_channel = await claim(db, channel="C0KUMO", by="replica-b")
    assert other_channel is not None and other_channel.channel == "C0KUMO"

    async with db.session() as session:
        assert await tracking.next_attempt(session, week=WEEK, channel="C0COORD") == 1
        assert await tracking.next_attempt(session, week=WEEK, channel="C0NEW") == 0
    forced = await claim(db, attempt=1, by="U01ALICE")
    assert forced is not None and forced.attempt == 1
    async with db.session() as session:
        assert await tracking.next_attempt(session, week=WEEK, channel="C0COORD") == 2
    assert await claim(db, attempt=1) is None
    assert [(r.channel, r.attempt, r.claimed_by) for r in await runs(db)] == [
        ("C0COORD", 0, "replica-a"),
        ("C0KUMO", 0, "replica-b"),
        ("C0COORD", 1, "U01ALICE"),
    ]


async def test_a_digest_run_raced_by_two_replicas_is_claimed_once(db: Database) -> None:
    async def claim_one(replica: str) -> DigestRun | None:
        async with db.session() as session:
            return await tracking.claim_digest_run(session, week=WEEK, channel="C0COORD", by=replica, at=T0)

    results = await asyncio.gather(claim_one("replica-a"), claim_one("replica-b"))
    assert sum(r is None for r in results) == 1, "exactly one replica wins the claim"
    winner = next(r for r in results if r is not None)
    assert [(r.id, r.claimed_by) for r in await runs(db, WEEK)] == [(winner.id, winner.claimed_by)]


async def test_finish_and_release_digest_runs(db: Database) -> None:
    run = await claim(db)
    assert run is not None and run.id is not None
    posted_at = T0 + timedelta(minutes=1)
    async with db.session() as session:
        await tracking.finish_digest_run(
            session, run_id=run.id, values={"status": "posted", "posted_at": posted_at, "message_ts": "1764.0001"}
        )
    (stored,) = await runs(db, WEEK)
    assert (stored.status, stored.posted_at, stored.message_ts, stored.claimed_by) == (
        "posted",
        posted_at,
        "1764.0001",
        "replica-a",
    )
    assert await claim(db) is None  # posted: still claimed

    failed = await claim(db, channel="C0KUMO")
    assert failed is not None and failed.id is not None
    async with db.session() as session:
        await tracking.release_digest_run(session, run_id=failed.id)
        await tracking.release_digest_run(session, run_id=failed.id + 1000)  # gone already: nothing to do
    assert [r.channel for r in await runs(db, WEEK)] == ["C0COORD"]
    again = await claim(db, channel="C0KUMO", by="replica-b")
    assert again is not None and again.claimed_by == "replica-b"
    assert [r.channel for r in await runs(db, WEEK)] == ["C0COORD", "C0KUMO"]


async def test_digest_runs_filter_by_week_oldest_claim_first(db: Database) -> None:
    await claim(db, "2026-W48", "C0B", at=T0 + timedelta(hours=2))
    await claim(db, "2026-W47", "C0A", at=T0 - timedelta(days=7))
    await claim(db, "2026-W48", "C0A", at=T0 + timedelta(hours=1))
    await claim(db, "2026-W48", "C0C", at=T0 + timedelta(hours=1))
    assert [r.channel for r in await runs(db, "2026-W48")] == ["C0A", "C0C", "C0B"]
    assert [(r.week, r.channel) for r in await runs(db, "2026-W47")] == [("2026-W47", "C0A")]
    assert await runs(db, "2026-W49") == []
    assert [(r.week, r.channel) for r in await runs(db)] == [
        ("2026-W47", "C0A"),
        ("2026-W48", "C0A"),
        ("2026-W48", "C0C"),
        ("2026-W48", "C0B"),
    ]


async def test_unreported_skips_are_skipped_weeks_no_digest_mentioned(db: Database) -> None:
    async def run(week: str, channel: str, status: str, message_ts: str | None = None) -> None:
        claimed = await claim(db, week, channel)
        assert claimed is not None
        async with db.session() as session:
            values = {"status": status, "message_ts": message_ts}
            await tracking.finish_digest_run(session, run_id=claimed.id or 0, values=values)

    await run("2026-W45", "*", "skipped")
    await run("2026-W43", "*", "skipped")
    await run("2026-W46", "*", "skipped", message_ts="1764.0001")  # reported by a later digest
    await run("2026-W47", "C0COORD", "skipped")  # not the skip marker's channel
    await run("2026-W44", "*", "posted")
    await run("2026-W48", "*", "skipped")  # not before the week asked
    async with db.session() as session:
        skips = await tracking.unreported_skips(session, before_week="2026-W48")
        later = await tracking.unreported_skips(session, before_week="2026-W49")
        earlier = await tracking.unreported_skips(session, before_week="2026-W43")
    assert [(r.week, r.channel, r.status) for r in skips] == [
        ("2026-W43", "*", "skipped"),
        ("2026-W45", "*", "skipped"),
    ]
    assert [r.week for r in later] == ["2026-W43", "2026-W45", "2026-W48"]
    assert list(earlier) == []


# ------------------------------------------------------------------------------------------ quota notices


async def test_a_quota_notice_is_given_once(db: Database) -> None:
    async with db.session() as session:
        assert await tracking.add_quota_notice(session, notice=notice(80)) is True
    async with db.session() as session:
        assert await tracking.add_quota_notice(session, notice=notice(80, held=9)) is False
        assert await tracking.add_quota_notice(session, notice=notice(100, held=10)) is True
        assert await tracking.add_quota_notice(session, notice=notice(80, "ml.c5.xlarge")) is True
        assert await tracking.add_quota_notice(session, notice=notice(80, org=OTHER)) is True
    assert await notices(db) == [("ml.c5.xlarge", 80, 8), ("ml.p5.48xlarge", 80, 8), ("ml.p5.48xlarge", 100, 10)]
    async with db.session() as session:
        (stored,) = await tracking.quota_notices(session, org_id=OTHER)
    assert (stored.level, stored.held, stored.quota, stored.at) == (80, 8, 10, T0)


async def test_clear_quota_notices_forgets_the_levels_above(db: Database) -> None:
    async with db.session() as session:
        for row in [notice(80), notice(100), notice(80, "ml.c5.xlarge"), notice(100, org=OTHER)]:
            assert await tracking.add_quota_notice(session, notice=row)
    async with db.session() as session:
        await tracking.clear_quota_notices(session, org_id=ORG, instance_type="ml.p5.48xlarge", above=80)
    assert await notices(db) == [("ml.c5.xlarge", 80, 8), ("ml.p5.48xlarge", 80, 8)]
    async with db.session() as session:
        assert await tracking.add_quota_notice(session, notice=notice(100, held=10)) is True  # announced again
        await tracking.clear_quota_notices(session, org_id=ORG, instance_type="ml.p5.48xlarge", above=0)
    assert await notices(db) == [("ml.c5.xlarge", 80, 8)]
    assert await notices(db, OTHER) == [("ml.p5.48xlarge", 100, 8)]
