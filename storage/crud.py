"""Plain CRUD functions, session first, keyword-only."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import and_, case, delete, false, func, insert, or_, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import (
    ApiToken,
    AuditEntry,
    ClusterSeen,
    DoctorResult,
    Episode,
    EpisodeState,
    EventSeen,
    Lease,
    Operation,
    OperationStatus,
    Org,
    Silence,
    ThroughputHourly,
    ThroughputRollup,
    ThroughputSample,
)


async def sync_orgs(session: AsyncSession, *, orgs: Iterable[Org]) -> None:
    """Make the orgs table say what the program file says; orgs no longer listed are marked inactive.

    One upsert: replicas starting together on a new database each sync the same orgs, and a read-then-insert
    made all but one die on a duplicate key."""
    listed = {org.id: org for org in orgs}
    fields = ("name", "channel", "account_id", "region", "synced_at")
    if listed:
        rows = [
            {"id": org.id, "active": True, **{field: getattr(org, field) for field in fields}}
            for org in listed.values()
        ]
        statement = _dialect_insert(session)(Org).values(rows)
        statement = statement.on_conflict_do_update(
            index_elements=["id"], set_={field: statement.excluded[field] for field in (*fields, "active")}
        )
        await session.exec(statement)
    await session.exec(update(Org).where(col(Org.id).not_in(list(listed))).values(active=False))
    await session.commit()


async def list_orgs(session: AsyncSession, *, active_only: bool = True) -> Sequence[Org]:
    query = select(Org).order_by(col(Org.id))
    if active_only:
        query = query.where(col(Org.active).is_(True))
    return (await session.exec(query)).all()


async def record_clusters_seen(session: AsyncSession, *, rows: Sequence[ClusterSeen]) -> None:
    """Upsert clusters as last seen; one statement, safe when two replicas see the same cluster."""
    if not rows:
        return
    dialect = session.bind.dialect.name if session.bind else "sqlite"
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    values = [row.model_dump(exclude={"id"}) for row in rows]
    statement = insert(ClusterSeen).values(values)
    statement = statement.on_conflict_do_update(
        index_elements=["org_id", "backend", "name"],
        set_={
            key: statement.excluded[key]
            for key in (
                "status",
                "nodes_total",
                "nodes_healthy",
                "nodes_unhealthy",
                "compute_fleet",
                "instances",
                "last_seen_at",
            )
        },
    )
    await session.exec(statement)
    await session.commit()


async def forget_clusters_gone(session: AsyncSession, *, org_id: str, seen: Iterable[tuple[str, str]]) -> int:
    """Drop an org's clusters that a complete listing no longer has ((backend, name) pairs that stay)."""
    keep = set(seen)
    rows = (await session.exec(select(ClusterSeen).where(ClusterSeen.org_id == org_id))).all()
    gone = [row for row in rows if (row.backend, row.name) not in keep]
    for row in gone:
        await session.delete(row)
    if gone:
        await session.commit()
    return len(gone)


async def clusters_seen(session: AsyncSession, *, org_id: str | None = None) -> Sequence[ClusterSeen]:
    query = select(ClusterSeen).order_by(col(ClusterSeen.org_id), col(ClusterSeen.name))
    if org_id:
        query = query.where(ClusterSeen.org_id == org_id)
    return (await session.exec(query)).all()


async def add_audit_rows(session: AsyncSession, *, rows: Sequence[dict[str, Any]]) -> None:
    """Audit entries (AuditEntry's fields as dicts) in one INSERT: bot.audit's batched writer uses it."""
    if rows:
        await session.exec(insert(AuditEntry).values(list(rows)))
        await session.commit()


async def audit_entries(
    session: AsyncSession,
    *,
    org_id: str | None = None,
    user_id: str | None = None,
    since: datetime | None = None,
    matches: Sequence[tuple[str, str | None]] | None = None,
    limit: int = 100,
) -> Sequence[AuditEntry]:
    """The newest entries, filtered. `matches`: (command, first word of the text or None for any) pairs, an
    entry kept when it fits one (bot.audit_view.ACTIONS says which pairs an `--action` means)."""
    query = select(AuditEntry).order_by(col(AuditEntry.at).desc(), col(AuditEntry.id).desc()).limit(limit)
    if org_id:
        query = query.where(AuditEntry.org_id == org_id)
    if user_id:
        query = query.where(AuditEntry.user_id == user_id)
    if since:
        query = query.where(col(AuditEntry.at) >= since)
    if matches is not None:
        query = query.where(or_(false(), *(_audit_match(command, word) for command, word in matches)))
    return (await session.exec(query)).all()


def _audit_match(command: str, word: str | None) -> Any:
    """An entry of `command` whose text starts with the word `word` (any case, after spaces)."""
    if word is None:
        return col(AuditEntry.command) == command
    first = func.lower(func.ltrim(col(AuditEntry.text)))
    pattern = word.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + " %"
    return and_(col(AuditEntry.command) == command, or_(first == word.lower(), first.like(pattern, escape="\\")))


async def add_operation(session: AsyncSession, *, operation: Operation) -> Operation:
    session.add(operation)
    await session.commit()
    return operation


async def get_operation(session: AsyncSession, *, operation_id: str) -> Operation | None:
    return await session.get(Operation, operation_id)


async def claim_operation(
    session: AsyncSession,
    *,
    operation_id: str,
    from_status: str,
    to_status: str,
    values: dict[str, Any],
) -> bool:
    """Move an operation from one status to another in one conditional UPDATE: True for the one caller
    that made the change, False for every other (a double click, a retry, another replica).

    Starting (to running) also fails when another operation of the same cluster is running: a partial unique
    index allows one running row per cluster, so two different plans confirmed at once cannot both start."""
    conditions = [col(Operation.id) == operation_id, col(Operation.status) == from_status]
    try:
        result = await session.exec(update(Operation).where(*conditions).values(status=to_status, **values))
        await session.commit()
    except IntegrityError:  # uq_operations_one_running: another change of this cluster started first
        await session.rollback()
        return False
    return bool(result.rowcount)


async def update_operation(session: AsyncSession, *, operation_id: str, values: dict[str, Any]) -> None:
    await session.exec(update(Operation).where(col(Operation.id) == operation_id).values(**values))
    await session.commit()


async def operations_with_status(session: AsyncSession, *, status: str) -> Sequence[Operation]:
    return (await session.exec(select(Operation).where(Operation.status == status))).all()


async def running_operation(session: AsyncSession, *, org_id: str, backend: str, cluster_name: str) -> Operation | None:
    query = select(Operation).where(
        Operation.org_id == org_id,
        Operation.backend == backend,
        Operation.cluster_name == cluster_name,
        Operation.status == OperationStatus.RUNNING.value,
    )
    return (await session.exec(query)).first()


async def planned_operations(
    session: AsyncSession, *, org_id: str, backend: str, cluster_name: str, since: datetime
) -> Sequence[Operation]:
    """A cluster's plans not yet decided, made after `since` (the others have expired)."""
    query = select(Operation).where(
        Operation.org_id == org_id,
        Operation.backend == backend,
        Operation.cluster_name == cluster_name,
        Operation.status == OperationStatus.PLANNED.value,
        col(Operation.requested_at) > since,
    )
    return (await session.exec(query.order_by(col(Operation.requested_at), col(Operation.id)))).all()


def _dialect_insert(session: AsyncSession) -> Any:
    """The dialect's INSERT (Postgres or SQLite), the one that has on_conflict_do_update/do_nothing."""
    dialect = session.bind.dialect.name if session.bind else "sqlite"
    return postgresql.insert if dialect == "postgresql" else sqlite.insert


def _episode_key(
    *, org_id: str, kind: str, backend: str, cluster_name: str, node_key: str, generation: int | None = None
) -> list[Any]:
    clauses = [
        col(Episode.org_id) == org_id,
        col(Episode.kind) == kind,
        col(Episode.backend) == backend,
        col(Episode.cluster_name) == cluster_name,
        col(Episode.node_key) == node_key,
    ]
    if generation is not None:
        clauses.append(col(Episode.generation) == generation)
    return clauses


async def add_episode(session: AsyncSession, *, episode: Episode) -> Episode | None:
    """Open an episode. None when its key (org, kind, backend, cluster, node_key, generation) is taken: the
    caller lost the race to another replica, which opened (and posts) it."""
    key = _episode_key(
        org_id=episode.org_id,
        kind=episode.kind,
        backend=episode.backend,
        cluster_name=episode.cluster_name,
        node_key=episode.node_key,
        generation=episode.generation,
    )
    session.add(episode)
    try:
        await session.commit()
    except IntegrityError:
        await session.rollback()
        taken = (await session.exec(select(Episode.id).where(*key))).first()
        if taken is None:
            raise  # another constraint failed: a bug, not a race
        return None
    return episode


async def get_episode(session: AsyncSession, *, episode_id: int) -> Episode | None:
    return await session.get(Episode, episode_id)


async def open_episodes(session: AsyncSession, *, org_id: str | None = None) -> Sequence[Episode]:
    query = select(Episode).where(Episode.state == EpisodeState.OPEN.value).order_by(col(Episode.id))
    if org_id:
        query = query.where(Episode.org_id == org_id)
    return (await session.exec(query)).all()


async def latest_episode(
    session: AsyncSession, *, org_id: str, backend: str, cluster_name: str, node_ids: Sequence[str]
) -> Episode | None:
    """The most recent episode (open or closed) of a cluster that concerns any of node_ids: opened by one of
    them, or one of them replaced a node of it. The JSON list is matched in Python, the same on every database
    (a cluster has at most a few hundred episodes)."""
    wanted = set(node_ids)
    if not wanted:
        return None
    query = (
        select(Episode)
        .where(Episode.org_id == org_id, Episode.backend == backend, Episode.cluster_name == cluster_name)
        .order_by(col(Episode.opened_at).desc(), col(Episode.id).desc())
    )
    for episode in (await session.exec(query)).all():
        if episode.node_key in wanted or wanted.intersection(episode.node_ids or ()):
            return episode
    return None


async def storm_episodes(session: AsyncSession, *, storm_id: int) -> Sequence[Episode]:
    """The episodes shown in one grouped storm message (storm_id is its first episode's id), in order."""
    query = (
        select(Episode)
        .where(or_(col(Episode.storm_id) == storm_id, col(Episode.id) == storm_id))
        .order_by(col(Episode.id))
    )
    return (await session.exec(query)).all()


async def next_generation(
    session: AsyncSession, *, org_id: str, kind: str, backend: str, cluster_name: str, node_key: str
) -> int:
    """The generation a new episode of this key gets: one past the last *closed* one (0 for the first).

    Open episodes are left out on purpose: two replicas opening the same failure at once both compute
    the generation the other may just have inserted, so the unique key lets exactly one of them win.
    Counting the other's fresh row would hand the loser the next generation and a second alert."""
    query = select(func.max(Episode.generation)).where(
        *_episode_key(org_id=org_id, kind=kind, backend=backend, cluster_name=cluster_name, node_key=node_key),
        Episode.state == "closed",
    )
    last = (await session.exec(query)).first()
    return 0 if last is None else int(last) + 1


async def update_episode(session: AsyncSession, *, episode_id: int, values: dict[str, Any]) -> None:
    await session.exec(update(Episode).where(col(Episode.id) == episode_id).values(**values))
    await session.commit()


async def close_episode(session: AsyncSession, *, episode_id: int, values: dict[str, Any]) -> bool:
    """Close an open episode in one conditional UPDATE (state open -> closed, plus values such as closed_at):
    True for the one caller that closed it, False for every other and for an episode already closed."""
    result = await session.exec(
        update(Episode)
        .where(col(Episode.id) == episode_id, col(Episode.state) == EpisodeState.OPEN.value)
        .values(**{**values, "state": EpisodeState.CLOSED.value})
    )
    await session.commit()
    return bool(result.rowcount)


async def episodes_between(
    session: AsyncSession, *, org_id: str | None, since: datetime, until: datetime
) -> Sequence[Episode]:
    """Episodes opened or closed in [since, until), oldest first; all orgs when org_id is None."""
    query = (
        select(Episode)
        .where(
            or_(
                (col(Episode.opened_at) >= since) & (col(Episode.opened_at) < until),
                (col(Episode.closed_at) >= since) & (col(Episode.closed_at) < until),
            )
        )
        .order_by(col(Episode.opened_at), col(Episode.id))
    )
    if org_id:
        query = query.where(Episode.org_id == org_id)
    return (await session.exec(query)).all()


async def add_silence(session: AsyncSession, *, silence: Silence) -> Silence:
    session.add(silence)
    await session.commit()
    return silence


async def active_silence(
    session: AsyncSession,
    *,
    org_id: str,
    backend: str,
    cluster_name: str,
    now: datetime,
    also: Sequence[str] = (),
) -> Silence | None:
    """The latest silence set on a cluster that still runs at now (not past its time, not ended early).
    `also`: other backends whose same-named silences count too (a training job names its cluster only)."""
    query = (
        select(Silence)
        .where(
            Silence.org_id == org_id,
            col(Silence.backend).in_([backend, *also]),
            Silence.cluster_name == cluster_name,
            col(Silence.until) > now,
            col(Silence.ended_at).is_(None),
        )
        .order_by(col(Silence.created_at).desc(), col(Silence.id).desc())
    )
    return (await session.exec(query)).first()


async def episode_with_message(session: AsyncSession, *, channel_id: str, message_ts: str) -> Episode | None:
    """The episode whose own alert is that message (not one held back into its thread by a silence)."""
    query = (
        select(Episode)
        .where(
            Episode.channel_id == channel_id,
            Episode.message_ts == message_ts,
            col(Episode.silenced).is_(False),
        )
        .order_by(col(Episode.id))
    )
    return (await session.exec(query)).first()


async def get_silence(session: AsyncSession, *, silence_id: int) -> Silence | None:
    return await session.get(Silence, silence_id)


async def update_silence(session: AsyncSession, *, silence_id: int, values: dict[str, Any]) -> None:
    await session.exec(update(Silence).where(col(Silence.id) == silence_id).values(**values))
    await session.commit()


async def end_silence(session: AsyncSession, *, silence_id: int, by: str, now: datetime) -> bool:
    """End a running silence early, in one conditional UPDATE: True for the one caller that ended it, False
    when it had ended already (pressed before, or its time was up)."""
    result = await session.exec(
        update(Silence)
        .where(col(Silence.id) == silence_id, col(Silence.ended_at).is_(None), col(Silence.until) > now)
        .values(ended_at=now, ended_by=by)
    )
    await session.commit()
    return bool(result.rowcount)


async def confirmed_replacements(
    session: AsyncSession, *, org_id: str, backend: str, cluster_name: str, since: datetime
) -> Sequence[Operation]:
    """Replaces of a cluster's nodes that were confirmed and accepted by AWS (started_at set) since `since`:
    what tells a node's replacement from a node that merely joined its group."""
    query = (
        select(Operation)
        .where(
            Operation.org_id == org_id,
            Operation.backend == backend,
            Operation.cluster_name == cluster_name,
            Operation.kind == "replace",
            col(Operation.started_at).is_not(None),
            col(Operation.started_at) >= since,
        )
        .order_by(col(Operation.started_at))
    )
    return (await session.exec(query)).all()


def _database_now(session: AsyncSession, *, plus_seconds: float = 0.0) -> Any:
    """The database's current time (+ seconds) as SQL, comparable with and storable in a UtcDateTime column:
    timestamptz on Postgres; on SQLite the text SQLAlchemy stores there (UTC, six fractional digits)."""
    dialect = session.bind.dialect.name if session.bind else "sqlite"
    if dialect == "postgresql":
        return func.now() + timedelta(seconds=plus_seconds)
    # strftime's %f gives milliseconds (SS.SSS): padded to the microseconds SQLAlchemy writes, so the text
    # compares in time order with stored values.
    return func.strftime("%Y-%m-%d %H:%M:%f", "now", f"{plus_seconds:+.6f} seconds").op("||")("000")


async def acquire_lease(session: AsyncSession, *, name: str, holder: str, ttl_seconds: float) -> bool:
    """Take or renew a lease in one atomic statement: it goes to holder when nobody has it, when holder
    already has it (renewal: expiry moves to now + ttl), or when the other holder's expired. True if holder
    has it afterwards.

    "Now" is the database's clock, the one clock all replicas share: a replica whose own clock runs fast
    would otherwise call a live lease expired, and one running slow would hold an expired one."""
    expires_at = _database_now(session, plus_seconds=ttl_seconds)
    now = _database_now(session)
    statement = _dialect_insert(session)(Lease).values(name=name, holder=holder, expires_at=expires_at)
    statement = statement.on_conflict_do_update(
        index_elements=["name"],
        set_={"holder": holder, "expires_at": expires_at},
        where=or_(col(Lease.holder) == holder, col(Lease.expires_at) < now),
    ).returning(col(Lease.holder))
    row = (await session.exec(statement)).first()  # no row: the conflict's WHERE refused the update
    await session.commit()
    return row is not None and row[0] == holder


async def release_lease(session: AsyncSession, *, name: str, holder: str) -> None:
    """Give a lease up, if holder has it (another holder's lease is left alone)."""
    await session.exec(delete(Lease).where(col(Lease.name) == name, col(Lease.holder) == holder))
    await session.commit()


async def mark_event_seen(session: AsyncSession, *, event_id: str, at: datetime) -> bool:
    """Record an event id: True the first time (handle it), False if any replica saw it before."""
    statement = (
        _dialect_insert(session)(EventSeen)
        .values(event_id=event_id, received_at=at)
        .on_conflict_do_nothing(index_elements=["event_id"])
    )
    result = await session.exec(statement)
    await session.commit()
    return bool(result.rowcount)


async def event_seen(session: AsyncSession, *, event_id: str) -> bool:
    """Whether an event id was marked seen (a read: mark_event_seen is what claims it)."""
    return await session.get(EventSeen, event_id) is not None


async def forget_events_seen(session: AsyncSession, *, before: datetime) -> int:
    """Drop event ids received before a time (past any redelivery); returns how many."""
    result = await session.exec(delete(EventSeen).where(col(EventSeen.received_at) < before))
    await session.commit()
    return int(result.rowcount or 0)


async def add_token(session: AsyncSession, *, token: ApiToken) -> ApiToken:
    """Store an API token (its hash; the token itself is never stored)."""
    session.add(token)
    await session.commit()
    return token


async def token_by_hash(session: AsyncSession, *, token_hash: str) -> ApiToken | None:
    """The token with this sha256 hex, unless it was revoked."""
    query = select(ApiToken).where(ApiToken.token_hash == token_hash, col(ApiToken.revoked_at).is_(None))
    return (await session.exec(query)).first()


# Rows per INSERT: well under the bound-parameter limits of SQLite (32766) and Postgres (32767).
_CHUNK = 500


def _minute(at: datetime) -> datetime:
    at = at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
    return at.replace(second=0, microsecond=0)


def _rollup_rows(samples: Sequence[ThroughputSample]) -> list[dict[str, Any]]:
    """The samples that carry a value, combined per (org, cluster, job, minute): one row per key, as one
    upsert must not touch a row twice (Postgres refuses that)."""
    rows: dict[tuple[str, str, str, datetime], dict[str, Any]] = {}
    for sample in samples:
        value = sample.value
        if value is None:
            continue
        key = (sample.org_id, sample.cluster, sample.job, _minute(sample.ts))
        row = rows.get(key)
        if row is None:
            rows[key] = {
                "org_id": key[0],
                "cluster": key[1],
                "job": key[2],
                "minute": key[3],
                "count": 1,
                "total": value,
                "min": value,
                "max": value,
            }
        else:
            row["count"] += 1
            row["total"] += value
            row["min"] = min(row["min"], value)
            row["max"] = max(row["max"], value)
    return list(rows.values())


def hourly_rows(minutes: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Minute rollup rows folded per (org, cluster, job, hour): count and sum, one row per key."""
    rows: dict[tuple[str, str, str, datetime], dict[str, Any]] = {}
    for minute in minutes:
        key = (
            minute["org_id"],
            minute["cluster"],
            minute["job"],
            minute["minute"].replace(minute=0, second=0, microsecond=0),
        )
        row = rows.setdefault(
            key, {"org_id": key[0], "cluster": key[1], "job": key[2], "hour": key[3], "count": 0, "total": 0.0}
        )
        row["count"] += minute["count"]
        row["total"] += minute["total"]
    return list(rows.values())


async def upsert_hourly(session: AsyncSession, *, rows: Sequence[dict[str, Any]]) -> None:
    """Add counts and sums into the hourly rollups (no commit: part of the caller's transaction)."""
    table = ThroughputHourly.__table__.c  # type: ignore[attr-defined]
    for start in range(0, len(rows), _CHUNK):
        statement = _dialect_insert(session)(ThroughputHourly).values(list(rows[start : start + _CHUNK]))
        new = statement.excluded
        statement = statement.on_conflict_do_update(
            index_elements=["hour", "org_id", "cluster", "job"],
            set_={"count": table["count"] + new["count"], "total": table["total"] + new["total"]},
        )
        await session.exec(statement)


def _sample_key(org_id: str, cluster: str, job: str, ts: datetime) -> tuple[str, str, str, datetime]:
    return org_id, cluster, job, ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)


async def store_samples(session: AsyncSession, *, samples: Sequence[ThroughputSample]) -> list[ThroughputSample]:
    """Store raw samples and fold the new ones into their one-minute and one-hour rollups, in one transaction:
    all or nothing. A sample is unique by (org, cluster, job, ts): one already stored (a retried batch), or a
    repeat within the batch, is skipped, first one wins, and adds nothing to the rollups. Returns the samples
    that were stored now, in the order given.

    INSERT ... ON CONFLICT DO NOTHING RETURNING tells which rows are new, so two retries of one batch at once
    are safe too: on Postgres the second waits on the unique index for the first to commit, then skips."""
    unique: dict[tuple[str, str, str, datetime], ThroughputSample] = {}
    for sample in samples:
        unique.setdefault(_sample_key(sample.org_id, sample.cluster, sample.job, sample.ts), sample)
    if not unique:
        return []
    # Key order, in every transaction: two overlapping batches then wait on each other, never deadlock.
    keys = sorted(unique)
    stored: set[tuple[str, str, str, datetime]] = set()
    table = ThroughputSample.__table__.c  # type: ignore[attr-defined]
    try:
        for start in range(0, len(keys), _CHUNK):
            values = [unique[key].model_dump(exclude={"id"}) for key in keys[start : start + _CHUNK]]
            statement = (
                _dialect_insert(session)(ThroughputSample)
                .values(values)
                .on_conflict_do_nothing(index_elements=["org_id", "cluster", "job", "ts"])
                .returning(table["org_id"], table["cluster"], table["job"], table["ts"])
            )
            for org_id, cluster, job, ts in (await session.exec(statement)).all():
                stored.add(_sample_key(org_id, cluster, job, ts))
        new = [sample for key, sample in unique.items() if key in stored]
        rollups = sorted(_rollup_rows(new), key=lambda row: (row["org_id"], row["cluster"], row["job"], row["minute"]))
        rollup = ThroughputRollup.__table__.c  # type: ignore[attr-defined]
        for start in range(0, len(rollups), _CHUNK):
            upsert = _dialect_insert(session)(ThroughputRollup).values(rollups[start : start + _CHUNK])
            excluded = upsert.excluded
            upsert = upsert.on_conflict_do_update(
                index_elements=["org_id", "cluster", "job", "minute"],
                set_={
                    "count": rollup["count"] + excluded["count"],
                    "total": rollup["total"] + excluded["total"],
                    # CASE rather than LEAST/GREATEST (Postgres) or min()/max() of two (SQLite): both have it.
                    "min": case((excluded["min"] < rollup["min"], excluded["min"]), else_=rollup["min"]),
                    "max": case((excluded["max"] > rollup["max"], excluded["max"]), else_=rollup["max"]),
                },
            )
            await session.exec(upsert)
        hours = sorted(hourly_rows(rollups), key=lambda row: (row["hour"], row["org_id"], row["cluster"], row["job"]))
        await upsert_hourly(session, rows=hours)
        await session.commit()
    except BaseException:
        await session.rollback()
        raise
    return new


async def add_samples(session: AsyncSession, *, samples: Sequence[ThroughputSample]) -> int:
    """`store_samples`, counted: how many of the samples were new (the others were stored before)."""
    return len(await store_samples(session, samples=samples))


async def samples(
    session: AsyncSession, *, org_id: str, cluster: str, job: str | None, since: datetime, until: datetime
) -> Sequence[ThroughputSample]:
    """Raw samples of one cluster's jobs (job None: every job) with since <= ts < until, in time order."""
    query = (
        select(ThroughputSample)
        .where(
            ThroughputSample.org_id == org_id,
            ThroughputSample.cluster == cluster,
            col(ThroughputSample.ts) >= since,
            col(ThroughputSample.ts) < until,
        )
        .order_by(col(ThroughputSample.ts), col(ThroughputSample.id))
    )
    if job is not None:
        query = query.where(ThroughputSample.job == job)
    return (await session.exec(query)).all()


async def rollups(
    session: AsyncSession, *, org_id: str, cluster: str, job: str | None, since: datetime, until: datetime
) -> Sequence[ThroughputRollup]:
    """One-minute rollups of one cluster's jobs (job None: every job) with since <= minute < until, in time
    order (then by job)."""
    query = (
        select(ThroughputRollup)
        .where(
            ThroughputRollup.org_id == org_id,
            ThroughputRollup.cluster == cluster,
            col(ThroughputRollup.minute) >= since,
            col(ThroughputRollup.minute) < until,
        )
        .order_by(col(ThroughputRollup.minute), col(ThroughputRollup.job))
    )
    if job is not None:
        query = query.where(ThroughputRollup.job == job)
    return (await session.exec(query)).all()


async def active_jobs(session: AsyncSession, *, since: datetime) -> list[tuple[str, str, str]]:
    """(org, cluster, job) of every job with a raw sample at or after since, sorted."""
    query = (
        select(ThroughputSample.org_id, ThroughputSample.cluster, ThroughputSample.job)
        .where(col(ThroughputSample.ts) >= since)
        .distinct()
        .order_by(col(ThroughputSample.org_id), col(ThroughputSample.cluster), col(ThroughputSample.job))
    )
    return [(org, cluster, job) for org, cluster, job in (await session.exec(query)).all()]


async def prune_samples(session: AsyncSession, *, before: datetime) -> int:
    """Drop raw samples with ts before a time (retention); the rollups stay. Returns how many."""
    result = await session.exec(delete(ThroughputSample).where(col(ThroughputSample.ts) < before))
    await session.commit()
    return int(result.rowcount or 0)


async def latest_sample_times(
    session: AsyncSession, *, org_id: str, since: datetime | None = None
) -> dict[tuple[str, str], datetime]:
    """The newest raw sample's ts per (cluster, job) of one org (events included): where a pull of that
    job's history resumes. `since`: only samples from then on count (a pull looks back minutes, not the
    whole retention, so it need not scan two weeks of rows every minute)."""
    newest = func.max(ThroughputSample.ts)
    conditions: list[Any] = [col(ThroughputSample.org_id) == org_id]
    if since is not None:
        conditions.append(col(ThroughputSample.ts) >= since)
    query = (
        select(ThroughputSample.cluster, ThroughputSample.job, newest)
        .where(*conditions)
        .group_by(col(ThroughputSample.cluster), col(ThroughputSample.job))
    )
    found: dict[tuple[str, str], datetime] = {}
    for cluster, job, ts in (await session.exec(query)).all():
        if ts is not None:
            # max() hands back what the driver gives: SQLite has no zone (nor, through func.max, the column's
            # type decorator), so make it aware UTC here.
            found[(cluster, job)] = ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)
    return found


async def org_tokens(session: AsyncSession, *, org_id: str) -> Sequence[ApiToken]:
    """An org's ingest tokens, newest first (revoked ones included, marked by revoked_at)."""
    query = select(ApiToken).where(ApiToken.org_id == org_id).order_by(col(ApiToken.created_at).desc())
    return (await session.exec(query)).all()


async def revoke_tokens(session: AsyncSession, *, prefix: str, at: datetime) -> int:
    """Revoke the active tokens shown as `prefix` (the characters `token list` prints); how many."""
    result = await session.exec(
        update(ApiToken).where(col(ApiToken.prefix) == prefix, col(ApiToken.revoked_at).is_(None)).values(revoked_at=at)
    )
    await session.commit()
    return int(result.rowcount or 0)


async def claim_unposted(session: AsyncSession, *, episode_id: int) -> bool:
    """Take the posting of an episode whose alert never reached Slack: one conditional UPDATE, so of several
    replicas (or a sweep and a check) exactly one posts it. The claim marks message_ts "" until it is set."""
    result = await session.exec(
        update(Episode).where(col(Episode.id) == episode_id, col(Episode.message_ts).is_(None)).values(message_ts="")
    )
    await session.commit()
    return bool(result.rowcount)


async def claim_held(session: AsyncSession, *, episode_id: int, at: datetime) -> bool:
    """Take the posting of an open episode a silence held back, now that no silence holds it: one conditional
    UPDATE (still open and held back -> not silenced, no message yet, posted at `at`), so of several replicas
    (or a monitor and an Unsilence) exactly one posts it."""
    result = await session.exec(
        update(Episode)
        .where(
            col(Episode.id) == episode_id,
            col(Episode.silenced).is_(True),
            col(Episode.state) == EpisodeState.OPEN.value,
        )
        .values(silenced=False, message_ts=None, posted_at=at, updated_at=at)
    )
    await session.commit()
    return bool(result.rowcount)


async def latest_activity(session: AsyncSession, *, org_id: str, cluster: str, since: datetime) -> datetime | None:
    """When any job of one cluster last reported from `since` on: its newest raw sample (events included),
    else its newest one-minute rollup's end (rollups outlive the raw retention); None when neither. Read per
    cluster on the samples' (org, cluster, job, ts) index, so an idle cluster costs a short range each time
    (the idle check passes the open notice's start, or the cluster's launch)."""
    newest_ts = (
        await session.exec(
            select(func.max(ThroughputSample.ts)).where(
                col(ThroughputSample.org_id) == org_id,
                col(ThroughputSample.cluster) == cluster,
                col(ThroughputSample.ts) >= since,
            )
        )
    ).first()
    if newest_ts is None:
        minute = (
            await session.exec(
                select(func.max(ThroughputRollup.minute)).where(
                    col(ThroughputRollup.org_id) == org_id,
                    col(ThroughputRollup.cluster) == cluster,
                    col(ThroughputRollup.minute) >= since,
                )
            )
        ).first()
        newest_ts = minute + timedelta(minutes=1) if minute is not None else None
    if newest_ts is None:
        return None
    # max() hands back what the driver gives (SQLite: no zone), as in latest_sample_times: aware UTC here.
    return newest_ts.replace(tzinfo=UTC) if newest_ts.tzinfo is None else newest_ts.astimezone(UTC)


async def claim_escalation(session: AsyncSession, *, episode_id: int, at: datetime) -> bool:
    """Take the escalation of an alert: one conditional UPDATE (still open, unacknowledged, not escalated ->
    escalated_at), so of several replicas exactly one posts it, and an Acknowledge that landed first wins."""
    result = await session.exec(
        update(Episode)
        .where(
            col(Episode.id) == episode_id,
            col(Episode.state) == EpisodeState.OPEN.value,
            col(Episode.acked_by).is_(None),
            col(Episode.escalated_at).is_(None),
        )
        .values(escalated_at=at)
    )
    await session.commit()
    return bool(result.rowcount)


async def claim_reminder(session: AsyncSession, *, episode_id: int, due: datetime) -> bool:
    """Take a Watch's reminder that is due: one conditional UPDATE (still open, remind_at set and past ->
    remind_at NULL), so of several replicas exactly one posts it."""
    result = await session.exec(
        update(Episode)
        .where(
            col(Episode.id) == episode_id,
            col(Episode.state) == EpisodeState.OPEN.value,
            col(Episode.remind_at).is_not(None),
            col(Episode.remind_at) <= due,
        )
        .values(remind_at=None)
    )
    await session.commit()
    return bool(result.rowcount)


async def put_doctor_results(session: AsyncSession, *, results: Sequence[DoctorResult]) -> None:
    """Each org's last doctor run, replacing the one before (an upsert: replicas and the CLI may race)."""
    if not results:
        return
    rows = [{"org_id": r.org_id, "ran_at": r.ran_at, "ok": r.ok, "problems": r.problems} for r in results]
    statement = _dialect_insert(session)(DoctorResult).values(rows)
    statement = statement.on_conflict_do_update(
        index_elements=["org_id"], set_={key: statement.excluded[key] for key in ("ran_at", "ok", "problems")}
    )
    await session.exec(statement)
    await session.commit()


async def doctor_results(session: AsyncSession, *, org_ids: Sequence[str] | None = None) -> Sequence[DoctorResult]:
    query = select(DoctorResult).order_by(col(DoctorResult.org_id))
    if org_ids is not None:
        query = query.where(col(DoctorResult.org_id).in_(list(org_ids)))
    return (await session.exec(query)).all()
