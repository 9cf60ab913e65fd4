"""Plain CRUD functions (session first, keyword-only) for tracking and the weekly digest: records,
requirements, cluster states (the usage ledger's steps), digest runs (the exactly-once claims) and quota
notices. Kept apart from storage.crud, which holds the cluster, alert and throughput tables.

Queries that feed the digest take a list of org ids and a window and aggregate in SQL, so building a digest
costs a handful of queries whatever the number of orgs and weeks stored."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import String, and_, case, column, delete, func, or_, text, type_coerce, update, values
from sqlalchemy import select as sa_select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql.elements import ColumnElement
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.crud import _dialect_insert
from storage.models import (
    ClusterState,
    DigestRun,
    DigestRunStatus,
    Episode,
    JobWeekMedian,
    Operation,
    OperationStatus,
    OrgRequirement,
    QuotaNotice,
    ThroughputHourly,
    ThroughputRollup,
    ThroughputSample,
    TrackRecord,
    UtcDateTime,
)

INCIDENT = "incident"
StateKey = tuple[str, str, str]  # (backend, cluster_name, instance_type)

# ------------------------------------------------------------------------------------------------ records


async def add_record(session: AsyncSession, *, record: TrackRecord) -> tuple[TrackRecord, bool]:
    """Store a record; (the record, True). A request already recorded (same request_key: a retried slash
    command or modal submission) stores nothing and returns (the first record, False)."""
    if record.request_key:
        existing = (
            await session.exec(select(TrackRecord).where(TrackRecord.request_key == record.request_key))
        ).first()
        if existing is not None:
            return existing, False
    session.add(record)
    try:
        await session.commit()
    except IntegrityError:
        await session.rollback()
        existing = (
            await session.exec(select(TrackRecord).where(TrackRecord.request_key == record.request_key))
        ).first()
        if existing is None:
            raise
        return existing, False
    await session.refresh(record)
    return record, True


async def get_record(session: AsyncSession, *, record_id: int) -> TrackRecord | None:
    return await session.get(TrackRecord, record_id)


async def resolve_record(session: AsyncSession, *, record_id: int, by: str, at: datetime) -> bool:
    """Resolve an open incident in one conditional UPDATE: True for the one caller that resolved it."""
    result = await session.exec(
        update(TrackRecord)
        .where(
            col(TrackRecord.id) == record_id,
            col(TrackRecord.kind) == INCIDENT,
            col(TrackRecord.resolved_at).is_(None),
        )
        .values(resolved_at=at, resolved_by=by)
    )
    await session.commit()
    return bool(result.rowcount)


async def records_between(
    session: AsyncSession, *, org_ids: Sequence[str], since: datetime, until: datetime, limit: int | None = None
) -> Sequence[TrackRecord]:
    """Records created in [since, until), newest first when limited (a listing), else oldest first."""
    query = select(TrackRecord).where(
        col(TrackRecord.org_id).in_(org_ids), col(TrackRecord.created_at) >= since, col(TrackRecord.created_at) < until
    )
    if limit is not None:
        newest = query.order_by(col(TrackRecord.created_at).desc(), col(TrackRecord.id).desc())
        return (await session.exec(newest.limit(limit))).all()
    return (await session.exec(query.order_by(col(TrackRecord.created_at), col(TrackRecord.id)))).all()


async def count_records_between(session: AsyncSession, *, org_id: str, since: datetime, until: datetime) -> int:
    query = select(func.count()).where(
        TrackRecord.org_id == org_id, col(TrackRecord.created_at) >= since, col(TrackRecord.created_at) < until
    )
    return int((await session.exec(query)).one())


async def open_incidents(session: AsyncSession, *, org_ids: Sequence[str], at: datetime) -> Sequence[TrackRecord]:
    """Incidents opened before `at` and not resolved by then, oldest first."""
    query = (
        select(TrackRecord)
        .where(
            col(TrackRecord.org_id).in_(org_ids),
            col(TrackRecord.kind) == INCIDENT,
            col(TrackRecord.created_at) < at,
            or_(col(TrackRecord.resolved_at).is_(None), col(TrackRecord.resolved_at) >= at),
        )
        .order_by(col(TrackRecord.created_at), col(TrackRecord.id))
    )
    return (await session.exec(query)).all()


async def resolved_between(
    session: AsyncSession, *, org_ids: Sequence[str], since: datetime, until: datetime
) -> Sequence[TrackRecord]:
    query = (
        select(TrackRecord)
        .where(
            col(TrackRecord.org_id).in_(org_ids),
            col(TrackRecord.kind) == INCIDENT,
            col(TrackRecord.resolved_at) >= since,
            col(TrackRecord.resolved_at) < until,
        )
        .order_by(col(TrackRecord.resolved_at))
    )
    return (await session.exec(query)).all()


# ------------------------------------------------------------------------------------------- requirements


async def requirements(session: AsyncSession, *, org_ids: Sequence[str]) -> Sequence[OrgRequirement]:
    query = select(OrgRequirement).where(col(OrgRequirement.org_id).in_(org_ids))
    return (await session.exec(query.order_by(col(OrgRequirement.org_id), col(OrgRequirement.key)))).all()


async def set_requirements(
    session: AsyncSession, *, org_id: str, pairs: Sequence[tuple[str, str]], by: str, at: datetime
) -> list[tuple[str, str | None, str]]:
    """Upsert requirements; returns (key, old value or None, new value) for those that changed."""
    current = {r.key: r for r in await requirements(session, org_ids=[org_id])}
    changed: list[tuple[str, str | None, str]] = []
    for key, value in pairs:
        row = current.get(key)
        if row is not None and row.value == value:
            continue
        changed.append((key, row.value if row else None, value))
        if row is None:
            session.add(OrgRequirement(org_id=org_id, key=key, value=value, set_by=by, set_at=at))
        else:
            row.value, row.set_by, row.set_at = value, by, at
    await session.commit()
    return changed


# ----------------------------------------------------------------------------------------- cluster states


async def _latest_states(
    session: AsyncSession, *, org_ids: Sequence[str], before: datetime | None
) -> list[ClusterState]:
    """The newest state of every (org, backend, cluster, type), optionally among those before a time.

    Rows are appended in time order by the leader's sweep, so the highest id of a key is its newest row."""
    newest = select(func.max(ClusterState.id)).where(col(ClusterState.org_id).in_(org_ids))
    if before is not None:
        newest = newest.where(col(ClusterState.at) < before)
    newest = newest.group_by(
        col(ClusterState.org_id),
        col(ClusterState.backend),
        col(ClusterState.cluster_name),
        col(ClusterState.instance_type),
    )
    query = select(ClusterState).where(col(ClusterState.id).in_(newest.scalar_subquery()))
    return list((await session.exec(query)).all())


async def record_cluster_states(
    session: AsyncSession, *, org_id: str, held: Mapping[StateKey, int], at: datetime
) -> list[ClusterState]:
    """Store what an org's clusters hold now (a complete listing): a row for each (cluster, type) whose count
    changed, and a 0 for each that held something and is gone. Returns the rows written."""
    last = {
        (s.backend, s.cluster_name, s.instance_type): s.count
        for s in await _latest_states(session, org_ids=[org_id], before=None)
    }
    rows = [
        ClusterState(org_id=org_id, backend=b, cluster_name=c, instance_type=t, count=n, at=at)
        for (b, c, t), n in sorted(held.items())
        if last.get((b, c, t), 0) != n
    ]
    rows += [
        ClusterState(org_id=org_id, backend=b, cluster_name=c, instance_type=t, count=0, at=at)
        for (b, c, t), n in sorted(last.items())
        if n and (b, c, t) not in held
    ]
    if rows:
        session.add_all(rows)
        await session.commit()
    return rows


async def state_changes(
    session: AsyncSession, *, org_ids: Sequence[str], since: datetime, until: datetime
) -> Sequence[ClusterState]:
    """The state each (cluster, type) was in at `since`, and every change in [since, until), oldest first."""
    before = [s for s in await _latest_states(session, org_ids=org_ids, before=since) if s.count]
    query = (
        select(ClusterState)
        .where(col(ClusterState.org_id).in_(org_ids), col(ClusterState.at) >= since, col(ClusterState.at) < until)
        .order_by(col(ClusterState.at), col(ClusterState.id))
    )
    return [*sorted(before, key=lambda s: (s.at, s.id or 0)), *(await session.exec(query)).all()]


async def held_now(session: AsyncSession, *, org_id: str) -> dict[str, int]:
    """Instances an org holds by type, as last recorded."""
    held: dict[str, int] = {}
    for state in await _latest_states(session, org_ids=[org_id], before=None):
        if state.count:
            held[state.instance_type] = held.get(state.instance_type, 0) + state.count
    return held


# ------------------------------------------------------------------------------------ episodes, operations


def began(episode: Episode) -> datetime:
    """When what an episode tells of began, which records, exports, the digest and the Home count from. A
    job's anomaly, a node's divergence from its peers and idleness began before they could be told: their
    `failing_since`, set when they open, is earlier than `opened_at` (a hang told ten minutes after its last
    good sample). A failure began when it was seen: its `failing_since` moves to each reopening, later, and a
    capacity notice's is when the capacity ends. So: whichever came first."""
    if episode.failing_since is not None and episode.failing_since < episode.opened_at:
        return episode.failing_since
    return episode.opened_at


# `began` in SQL, so a window's query finds an episode begun in it but told after it.
# Typed as the columns are, so SQLite compares the bound window with it in the columns' stored format.
_began_in_sql = type_coerce(
    case(
        (col(Episode.failing_since) < col(Episode.opened_at), col(Episode.failing_since)), else_=col(Episode.opened_at)
    ),
    UtcDateTime(),
)


async def episodes_overlapping(
    session: AsyncSession, *, org_ids: Sequence[str], kinds: Sequence[str], since: datetime, until: datetime
) -> Sequence[Episode]:
    """Episodes of those kinds under way at some point in [since, until), from when they began (`began`) to
    their closing; a kind not asked for is never counted."""
    query = (
        select(Episode)
        .where(
            col(Episode.org_id).in_(org_ids),
            col(Episode.kind).in_(kinds),
            _began_in_sql < until,
            or_(col(Episode.closed_at).is_(None), col(Episode.closed_at) >= since),
        )
        .order_by(_began_in_sql, col(Episode.id))
    )
    return (await session.exec(query)).all()


IDLE = "idle"  # the idle-accelerators alert kind (bot.alerts.kinds.idle)


async def idle_episodes(
    session: AsyncSession, *, org_ids: Sequence[str], since: datetime, until: datetime
) -> Sequence[Episode]:
    """Idle-accelerator episodes idle at some point in [since, until): idleness began (`began`) before
    `until` and had not ended (`closed_at`) by `since`. An episode is opened hours after its idleness began,
    so the opening alone would miss a week's last idle hours."""
    query = (
        select(Episode)
        .where(
            col(Episode.org_id).in_(org_ids),
            col(Episode.kind) == IDLE,
            _began_in_sql < until,
            or_(col(Episode.closed_at).is_(None), col(Episode.closed_at) > since),
        )
        .order_by(col(Episode.opened_at), col(Episode.id))
    )
    return (await session.exec(query)).all()


async def operations_finished(
    session: AsyncSession, *, org_ids: Sequence[str], since: datetime, until: datetime
) -> Sequence[Operation]:
    """Cluster changes that finished (done or failed) in [since, until), oldest first."""
    query = (
        select(Operation)
        .where(
            col(Operation.org_id).in_(org_ids),
            col(Operation.status).in_([OperationStatus.DONE.value, OperationStatus.FAILED.value]),
            col(Operation.updated_at) >= since,
            col(Operation.updated_at) < until,
        )
        .order_by(col(Operation.updated_at))
    )
    return (await session.exec(query)).all()


async def hourly_job_means(
    session: AsyncSession, *, org_ids: Sequence[str], since: datetime, until: datetime
) -> list[tuple[str, str, str, float]]:
    """(org, cluster, job, mean) for each hour a job reported in [since, until), from the hourly rollups kept
    at ingest: at most 168 rows per job and week, read by index, nothing grouped at query time."""
    query = select(
        ThroughputHourly.org_id,
        ThroughputHourly.cluster,
        ThroughputHourly.job,
        col(ThroughputHourly.total) / col(ThroughputHourly.count),
    ).where(
        col(ThroughputHourly.org_id).in_(org_ids),
        col(ThroughputHourly.hour) >= since,
        col(ThroughputHourly.hour) < until,
        col(ThroughputHourly.count) > 0,
    )
    return [(o, c, j, float(m)) for o, c, j, m in (await session.exec(query)).all()]


JobKey = tuple[str, str, str]  # (org_id, cluster, job)


async def hourly_job_rows(
    session: AsyncSession, *, org_ids: Sequence[str], since: datetime, until: datetime
) -> list[tuple[str, str, str, float, int]]:
    """`hourly_job_means` with each hour's count: (org, cluster, job, mean, count), the means computed by the
    same SQL expression, so the same floats."""
    table = ThroughputHourly.__table__.c  # type: ignore[attr-defined]
    query = sa_select(table.org_id, table.cluster, table.job, table.total / table.count, table["count"]).where(
        table.org_id.in_(org_ids), table.hour >= since, table.hour < until, table["count"] > 0
    )
    connection = await session.connection()  # five columns: more than sqlmodel's typed `exec` takes
    return [(o, c, j, float(m), int(n)) for o, c, j, m, n in (await connection.execute(query)).all()]


@dataclass(frozen=True)
class SampleRun:
    """A stretch of one job's samples with no hour between them without one: its first and last minute that
    reported, and how many samples it holds."""

    org_id: str
    cluster: str
    job: str
    first: datetime
    last: datetime
    samples: int
    # The time between its reports, measured where a gap is unlikely: the smaller spacing of the minutes that
    # reported in its first and last hour (its span over its count would count a gap inside it); None with fewer
    # than 2 such minutes in both.
    spacing: timedelta | None = None


async def job_runs(
    session: AsyncSession, *, org_ids: Sequence[str], since: datetime, until: datetime
) -> list[SampleRun]:
    """Each job's stretches of reporting in [since, until), oldest first: consecutive hours of the hourly rollups
    (split in SQL, gaps and islands, so a week is a row or two per job, not its 168 hours), their ends then read
    to the minute from the one-minute rollups (two indexed lookups per stretch). A stretch is split where a whole
    hour passed without a sample, so a gap of less than an hour can be inside one."""
    hourly = ThroughputHourly.__table__.c  # type: ignore[attr-defined]
    job = (hourly.org_id, hourly.cluster, hourly.job)
    previous = func.lag(hourly.hour).over(partition_by=job, order_by=hourly.hour)
    marked = (
        sa_select(
            *job,
            hourly.hour,
            hourly["count"],
            # An hour's step is 3600 s; half a minute over it leaves julianday's rounding out.
            case((previous.is_(None), 1), (_seconds(session, hourly.hour, previous) > 3630, 1), else_=0).label("new"),
        )
        .where(hourly.org_id.in_(org_ids), hourly.hour >= _hour(since), hourly.hour < until, hourly["count"] > 0)
        .subquery()
    )
    mine = (marked.c.org_id, marked.c.cluster, marked.c.job)
    numbered = sa_select(
        *mine,
        marked.c.hour,
        marked.c["count"],
        func.sum(marked.c.new).over(partition_by=mine, order_by=marked.c.hour).label("stretch"),
    ).subquery()
    stretches = sa_select(
        numbered.c.org_id,
        numbered.c.cluster,
        numbered.c.job,
        type_coerce(func.min(numbered.c.hour), UtcDateTime()),
        type_coerce(func.max(numbered.c.hour), UtcDateTime()),
        func.sum(numbered.c["count"]),
    ).group_by(numbered.c.org_id, numbered.c.cluster, numbered.c.job, numbered.c.stretch)
    connection = await session.connection()
    found = [(o, c, j, first, last, int(n)) for o, c, j, first, last, n in (await connection.execute(stretches)).all()]
    edges = await _edge_minutes(
        session, {(o, c, j, hour) for o, c, j, first, last, _ in found for hour in (first, last)}
    )
    runs = []
    for o, c, j, first_hour, last_hour, samples in found:
        head = edges.get((o, c, j, first_hour), (first_hour, first_hour, None))
        tail = edges.get((o, c, j, last_hour), (last_hour, last_hour, None))
        spacings = sorted(x for x in (head[2], tail[2]) if x is not None)
        first, last = max(head[0], since), min(tail[1], until)
        if first <= last:
            runs.append(SampleRun(o, c, j, first, last, samples, spacings[0] if spacings else None))
    return sorted(runs, key=lambda r: (r.org_id, r.cluster, r.job, r.first))


def _hour(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def _seconds(session: AsyncSession, later: Any, earlier: Any) -> ColumnElement[Any]:
    """`later - earlier` in seconds, in the session's SQL (SQLite keeps datetimes as ISO text)."""
    if session.bind is not None and session.bind.dialect.name == "postgresql":
        return func.extract("epoch", later - earlier)
    return (func.julianday(later) - func.julianday(earlier)) * 86400.0


async def _edge_minutes(
    session: AsyncSession, hours: set[tuple[str, str, str, datetime]]
) -> dict[tuple[str, str, str, datetime], tuple[datetime, datetime, timedelta | None]]:
    """The first and last minute that reported in each (org, cluster, job, hour), and the spacing of the minutes
    that reported there (None with fewer than 2), from the one-minute rollups: the hours given as a VALUES list
    joined on the rollups' key, so each is a range of its primary key."""
    rollup = ThroughputRollup.__table__.c  # type: ignore[attr-defined]
    found: dict[tuple[str, str, str, datetime], tuple[datetime, datetime, timedelta | None]] = {}
    wanted = sorted(hours)
    connection = await session.connection()
    for start in range(0, len(wanted), _EDGE_CHUNK):
        chunk = wanted[start : start + _EDGE_CHUNK]
        edges = (
            values(
                column("org_id", String()),
                column("cluster", String()),
                column("job", String()),
                column("hour", UtcDateTime()),
                column("next_hour", UtcDateTime()),
                name="edges",
            )
            .data([(o, c, j, hour, hour + timedelta(hours=1)) for o, c, j, hour in chunk])
            .cte("edges")  # WITH edges(org_id, ...) AS (VALUES ...): SQLite names no columns of VALUES AS x(...)
        )
        query = (
            sa_select(
                edges.c.org_id,
                edges.c.cluster,
                edges.c.job,
                type_coerce(edges.c.hour, UtcDateTime()),
                type_coerce(func.min(rollup.minute), UtcDateTime()),
                type_coerce(func.max(rollup.minute), UtcDateTime()),
                func.count(),  # minutes that reported: a burst of samples in one minute is one report
            )
            .select_from(edges)
            .join(
                ThroughputRollup.__table__,  # type: ignore[attr-defined]
                and_(
                    rollup.org_id == edges.c.org_id,
                    rollup.cluster == edges.c.cluster,
                    rollup.job == edges.c.job,
                    rollup.minute >= edges.c.hour,
                    rollup.minute < edges.c.next_hour,
                    rollup["count"] > 0,
                ),
            )
            .group_by(edges.c.org_id, edges.c.cluster, edges.c.job, edges.c.hour)
        )
        for o, c, j, hour, first, last, minutes in (await connection.execute(query)).all():
            spacing = (last - first) / (int(minutes) - 1) if int(minutes) >= 2 and last > first else None
            found[(o, c, j, hour)] = (first, last, spacing)
    return found


_EDGE_CHUNK = 1000  # hours per VALUES list: 5 parameters each, well under SQLite's 32,766


async def job_events(
    session: AsyncSession, *, org_ids: Sequence[str], since: datetime, until: datetime
) -> Sequence[ThroughputSample]:
    """The `start` and `end` samples of those orgs' jobs in [since, until) (raw samples: kept for
    PITCREW_THROUGHPUT_RAW_DAYS), oldest first."""
    query = (
        select(ThroughputSample)
        .where(
            col(ThroughputSample.org_id).in_(org_ids),
            col(ThroughputSample.event).is_not(None),
            col(ThroughputSample.ts) >= since,
            col(ThroughputSample.ts) < until,
        )
        .order_by(col(ThroughputSample.ts))
    )
    return (await session.exec(query)).all()


async def job_nodes(
    session: AsyncSession, *, org_ids: Sequence[str], since: datetime, until: datetime
) -> list[tuple[str, str, str, int, datetime, datetime]]:
    """(org, cluster, job, nodes, first, last): the span of raw samples in [since, until) that said each number of
    nodes, per job (a few rows a job: grouped in SQL), for goodput's accelerators per run."""
    sample = ThroughputSample.__table__.c  # type: ignore[attr-defined]
    query = (
        sa_select(
            sample.org_id,
            sample.cluster,
            sample.job,
            sample.nodes,
            type_coerce(func.min(sample.ts), UtcDateTime()),
            type_coerce(func.max(sample.ts), UtcDateTime()),
        )
        .where(sample.org_id.in_(org_ids), sample.nodes.is_not(None), sample.ts >= since, sample.ts < until)
        .group_by(sample.org_id, sample.cluster, sample.job, sample.nodes)
    )
    connection = await session.connection()
    return [(o, c, j, int(n), first, last) for o, c, j, n, first, last in (await connection.execute(query)).all()]


async def job_minutes(
    session: AsyncSession, *, org_id: str, cluster: str, job: str, since: datetime, until: datetime
) -> list[tuple[datetime, int, float]]:
    """(minute, count, total) of one job's rollups in [since, until), oldest first (a slowdown's rate and the
    rate before it)."""
    query = (
        select(ThroughputRollup.minute, ThroughputRollup.count, ThroughputRollup.total)
        .where(
            ThroughputRollup.org_id == org_id,
            ThroughputRollup.cluster == cluster,
            ThroughputRollup.job == job,
            col(ThroughputRollup.minute) >= since,
            col(ThroughputRollup.minute) < until,
            col(ThroughputRollup.count) > 0,
        )
        .order_by(col(ThroughputRollup.minute))
    )
    return [(m, int(n), float(t)) for m, n, t in (await session.exec(query)).all()]


async def job_sample_counts(
    session: AsyncSession, *, org_ids: Sequence[str], since: datetime, until: datetime
) -> dict[JobKey, int]:
    """Samples each job reported in [since, until), summed from the hourly rollups in SQL: one row per job
    (600 at 100 orgs), which tells whether a stored week is still what the rollups say."""
    total = func.sum(col(ThroughputHourly.count)).label("samples")
    query = (
        select(ThroughputHourly.org_id, ThroughputHourly.cluster, ThroughputHourly.job, total)
        .where(
            col(ThroughputHourly.org_id).in_(org_ids),
            col(ThroughputHourly.hour) >= since,
            col(ThroughputHourly.hour) < until,
            col(ThroughputHourly.count) > 0,
        )
        .group_by(col(ThroughputHourly.org_id), col(ThroughputHourly.cluster), col(ThroughputHourly.job))
    )
    return {(o, c, j): int(n) for o, c, j, n in (await session.exec(query)).all()}


async def week_sample_count(session: AsyncSession, *, org_ids: Sequence[str], since: datetime, until: datetime) -> int:
    """Samples those orgs' jobs reported in [since, until), in all: one number, read from the hourly rollups'
    count index alone (ix_throughput_hourly_counts)."""
    query = select(func.coalesce(func.sum(col(ThroughputHourly.count)), 0)).where(
        col(ThroughputHourly.org_id).in_(org_ids),
        col(ThroughputHourly.hour) >= since,
        col(ThroughputHourly.hour) < until,
        col(ThroughputHourly.count) > 0,
    )
    return int((await session.exec(query)).one())


async def window_sample_counts(
    session: AsyncSession, *, org_ids: Sequence[str], windows: Sequence[tuple[datetime, datetime]]
) -> list[int]:
    """`week_sample_count` of each window [since, until), in one query over their span (meant for windows side
    by side: a week and the one before it), from the count index alone."""
    if not windows:
        return []
    hour, count = col(ThroughputHourly.hour), col(ThroughputHourly.count)
    which = case(
        *[(and_(hour >= since, hour < until), index) for index, (since, until) in enumerate(windows)], else_=-1
    ).label("week_index")
    query = (
        select(which, func.sum(count))
        .where(
            col(ThroughputHourly.org_id).in_(org_ids),
            hour >= min(since for since, _ in windows),
            hour < max(until for _, until in windows),
            count > 0,
        )
        .group_by(text("week_index"))
    )
    sums = {int(index): int(total) for index, total in (await session.exec(query)).all()}
    return [sums.get(index, 0) for index in range(len(windows))]


async def job_week_medians_of(
    session: AsyncSession, *, org_ids: Sequence[str], windows: Sequence[tuple[datetime, datetime]]
) -> dict[tuple[datetime, datetime], list[JobWeekMedian]]:
    """The stored medians of several weeks (by their UTC bounds) for those orgs, in one query, by week."""
    query = select(JobWeekMedian).where(
        col(JobWeekMedian.week_start).in_([since for since, _ in windows]), col(JobWeekMedian.org_id).in_(org_ids)
    )
    by_week: dict[tuple[datetime, datetime], list[JobWeekMedian]] = {window: [] for window in windows}
    for row in (await session.exec(query)).all():
        if (row.week_start, row.week_end) in by_week:
            by_week[(row.week_start, row.week_end)].append(row)
    return by_week


async def job_week_medians(
    session: AsyncSession, *, org_ids: Sequence[str], week_start: datetime, week_end: datetime
) -> Sequence[JobWeekMedian]:
    """The stored medians of one week (by its UTC bounds) for those orgs."""
    query = select(JobWeekMedian).where(
        col(JobWeekMedian.week_start) == week_start,
        col(JobWeekMedian.week_end) == week_end,
        col(JobWeekMedian.org_id).in_(org_ids),
    )
    return (await session.exec(query)).all()


async def store_job_week_medians(session: AsyncSession, *, rows: Sequence[Mapping[str, Any]]) -> None:
    """Store (or replace: the week's count changed since) job-week medians, given as JobWeekMedian's columns,
    in one executemany. Two replicas storing one week at once write the same values; the later one wins."""
    if not rows:
        return
    statement = _dialect_insert(session)(JobWeekMedian)
    statement = statement.on_conflict_do_update(
        index_elements=["week_start", "week_end", "org_id", "cluster", "job"],
        set_={name: statement.excluded[name] for name in ("median", "hours", "samples", "computed_at")},
    )
    connection = await session.connection()
    await connection.execute(statement, list(rows))
    await session.commit()


# ------------------------------------------------------------------------------------------- digest runs


async def claim_digest_run(
    session: AsyncSession, *, week: str, channel: str, by: str, at: datetime, attempt: int = 0
) -> DigestRun | None:
    """Claim the posting of a week's digest to a channel: the row, or None when it is already claimed (posted,
    being posted, or skipped) by anyone. The unique key decides between racing replicas."""
    run = DigestRun(
        week=week, channel=channel, attempt=attempt, status=DigestRunStatus.CLAIMED.value, claimed_by=by, claimed_at=at
    )
    session.add(run)
    try:
        await session.commit()
    except IntegrityError:
        await session.rollback()
        return None
    await session.refresh(run)
    return run


async def finish_digest_run(session: AsyncSession, *, run_id: int, values: dict[str, Any]) -> None:
    await session.exec(update(DigestRun).where(col(DigestRun.id) == run_id).values(**values))
    await session.commit()


async def release_digest_run(session: AsyncSession, *, run_id: int) -> None:
    """Give a claim back (the post failed before anything reached Slack), so a later try may post."""
    run = await session.get(DigestRun, run_id)
    if run is not None:
        await session.delete(run)
        await session.commit()


async def digest_runs(session: AsyncSession, *, week: str | None = None) -> Sequence[DigestRun]:
    query = select(DigestRun).order_by(col(DigestRun.claimed_at), col(DigestRun.id))
    if week is not None:
        query = query.where(DigestRun.week == week)
    return (await session.exec(query)).all()


async def next_attempt(session: AsyncSession, *, week: str, channel: str) -> int:
    query = select(func.max(DigestRun.attempt)).where(DigestRun.week == week, DigestRun.channel == channel)
    latest = (await session.exec(query)).one()
    return 0 if latest is None else int(latest) + 1


async def unreported_skips(session: AsyncSession, *, before_week: str) -> Sequence[DigestRun]:
    """Weeks recorded as skipped (channel "*") that no posted digest has mentioned yet."""
    query = (
        select(DigestRun)
        .where(
            DigestRun.channel == "*",
            DigestRun.status == DigestRunStatus.SKIPPED.value,
            col(DigestRun.week) < before_week,
            col(DigestRun.message_ts).is_(None),  # set to the digest that reported it
        )
        .order_by(col(DigestRun.week))
    )
    return (await session.exec(query)).all()


# ------------------------------------------------------------------------------------------ quota notices


async def quota_notices(session: AsyncSession, *, org_id: str) -> Sequence[QuotaNotice]:
    return (await session.exec(select(QuotaNotice).where(QuotaNotice.org_id == org_id))).all()


async def add_quota_notice(session: AsyncSession, *, notice: QuotaNotice) -> bool:
    """True for the one caller that stored it (and so posts it); False when it was already given."""
    statement = _dialect_insert(session)(QuotaNotice).values(**notice.model_dump()).on_conflict_do_nothing()
    result = await session.exec(statement)
    await session.commit()
    return bool(result.rowcount)


async def clear_quota_notices(session: AsyncSession, *, org_id: str, instance_type: str, above: int) -> None:
    """Forget notices of levels above `above` (the org holds less now), so a new crossing is announced."""
    await session.exec(
        delete(QuotaNotice).where(
            col(QuotaNotice.org_id) == org_id,
            col(QuotaNotice.instance_type) == instance_type,
            col(QuotaNotice.level) > above,
        )
    )
    await session.commit()


async def release_stale_claims(session: AsyncSession, *, week: str, before: datetime) -> int:
    """Forget claims of a week taken before `before` that never posted a message: their claimer died (a
    deploy, a crash) between claiming and posting, so nobody else would ever post that channel."""
    result = await session.exec(
        delete(DigestRun).where(
            col(DigestRun.week) == week,
            col(DigestRun.status) == DigestRunStatus.CLAIMED.value,
            col(DigestRun.message_ts).is_(None),
            col(DigestRun.claimed_at) < before,
        )
    )
    await session.commit()
    return int(result.rowcount or 0)


async def posted_before(session: AsyncSession, *, week: str) -> bool:
    """Whether any digest of an earlier week was claimed here: a new installation has no weeks to miss."""
    query = select(DigestRun.id).where(col(DigestRun.week) < week).limit(1)
    return (await session.exec(query)).first() is not None
