"""Storage -> facts: the few queries a digest or a tracking document needs, for every org at once.

Each query covers all the orgs asked for and one window, and the throughput query is aggregated by the
database (hourly means), so the cost grows with one week's events, not with the weeks stored."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, TypeVar

from bot.alerts.kind import Bucket
from bot.alerts.kinds import in_bucket
from bot.clusters.requests import operation_summary  # the one wording of a change, shared with the audit log
from bot.config import ProgramConfig
from bot.digest.facts import (
    Change,
    ClusterNow,
    Failure,
    IdleSpan,
    JobRate,
    OrgFacts,
    Record,
    RecordKind,
    Requirement,
    Stall,
    StateChange,
    Week,
)
from bot.digest.medians import weeks_medians
from bot.digest.weeks import previous_week
from storage import crud, tracking
from storage.db import Database
from storage.models import ClusterSeen, ClusterState, Episode, Operation, OrgRequirement, TrackRecord, utcnow


class _OfOrg(Protocol):
    @property
    def org_id(self) -> str: ...


_T = TypeVar("_T", bound=_OfOrg)


def record_fact(row: TrackRecord) -> Record:
    return Record(
        id=row.id or 0,
        org_id=row.org_id,
        kind=RecordKind(row.kind),
        text=row.text,
        created_by=row.created_by,
        created_at=row.created_at,
        resolved_at=row.resolved_at,
        resolved_by=row.resolved_by,
    )


def _state(row: ClusterState) -> StateChange:
    return StateChange(
        org_id=row.org_id,
        backend=row.backend,
        cluster_name=row.cluster_name,
        instance_type=row.instance_type,
        count=row.count,
        at=row.at,
    )


def _failure(row: Episode) -> Failure:
    return Failure(
        org_id=row.org_id,
        backend=row.backend,
        cluster_name=row.cluster_name,
        kind=row.kind,
        instance_type=row.instance_type,
        opened_at=row.opened_at,
        closed_at=row.closed_at,
        node_hours_lost=row.node_hours_lost,
    )


def _stall(row: Episode) -> Stall:
    return Stall(
        org_id=row.org_id,
        cluster_name=row.cluster_name,
        job=row.node_key,
        status=row.status,
        start=tracking.began(row),
        closed_at=row.closed_at,
    )


def _idle(row: Episode, now: datetime) -> IdleSpan:
    """An idle episode still open is idle until now (a digest of the running week counts no future hours)."""
    return IdleSpan(
        org_id=row.org_id,
        cluster_name=row.cluster_name,
        instance_type=row.instance_type,
        nodes=len(row.node_ids),
        since=row.failing_since or row.opened_at,
        until=row.closed_at or now,
    )


def _change(row: Operation) -> Change:
    return Change(
        org_id=row.org_id,
        kind=row.kind,
        cluster_name=row.cluster_name,
        status=row.status,
        at=row.updated_at,
        by=row.confirmed_by or row.requested_by,
        summary=operation_summary(row),
    )


def _requirement(row: OrgRequirement) -> Requirement:
    return Requirement(key=row.key, value=row.value, set_by=row.set_by, set_at=row.set_at)


def _cluster_now(row: ClusterSeen) -> ClusterNow:
    return ClusterNow(
        backend=row.backend,
        name=row.name,
        status=row.status,
        nodes_total=row.nodes_total,
        nodes_healthy=row.nodes_healthy,
        instances=dict(row.instances),
        last_seen_at=row.last_seen_at,
    )


async def gather(
    db: Database,
    *,
    program: ProgramConfig,
    since: datetime,
    until: datetime,
    org_ids: Sequence[str] | None = None,
    rates_week: Week | None = None,
    for_document: bool = False,
    now: datetime | None = None,
) -> list[OrgFacts]:
    """Facts of the given orgs (default: all, in program-file order) in [since, until).

    `rates_week`: compare jobs' median throughput in this week with the week before it (a week ended by
    `now`, default the clock's, is read from and stored in `job_week_medians`: bot.digest.medians).
    `for_document`: also requirements and clusters as last seen (the living document)."""
    now = now or utcnow()
    orgs = [o for o in program.orgs if org_ids is None or o.id in org_ids]
    ids = [o.id for o in orgs]
    rates: list[JobRate] = []
    requirements: list[OrgRequirement] = []
    clusters: list[ClusterSeen] = []
    async with db.session() as session:
        changes = await tracking.state_changes(session, org_ids=ids, since=since, until=until)
        records = await tracking.records_between(session, org_ids=ids, since=since, until=until)
        still_open = await tracking.open_incidents(session, org_ids=ids, at=until)
        resolved = await tracking.resolved_between(session, org_ids=ids, since=since, until=until)
        # Counted by kind: a kind in no digest bucket (a new one) is never counted as a node failure.
        failures = await tracking.episodes_overlapping(
            session, org_ids=ids, kinds=in_bucket(Bucket.FAILURE), since=since, until=until
        )
        stalls = await tracking.episodes_overlapping(
            session, org_ids=ids, kinds=in_bucket(Bucket.STALL), since=since, until=until
        )
        operations = await tracking.operations_finished(session, org_ids=ids, since=since, until=until)
        idle = await tracking.idle_episodes(session, org_ids=ids, since=since, until=until)
        if rates_week is not None:
            this, last = await weeks_medians(
                session, org_ids=ids, weeks=[rates_week, previous_week(rates_week)], now=now
            )
            rates = [
                JobRate(org_id=o, cluster_name=c, job=j, this_week=this.get((o, c, j)), last_week=last.get((o, c, j)))
                for o, c, j in sorted(this.keys() | last.keys())
            ]
        if for_document:
            requirements = list(await tracking.requirements(session, org_ids=ids))
            clusters = list(await crud.clusters_seen(session, org_id=ids[0] if len(ids) == 1 else None))

    grouped: dict[int, dict[str, list[_OfOrg]]] = {}

    def of(org_id: str, rows: Sequence[_T]) -> list[_T]:
        """Rows of one org; each sequence is grouped once (100 orgs must not scan every row 100 times)."""
        if id(rows) not in grouped:
            groups: dict[str, list[_OfOrg]] = defaultdict(list)
            for row in rows:
                groups[row.org_id].append(row)
            grouped[id(rows)] = groups
        return grouped[id(rows)].get(org_id, [])  # type: ignore[return-value]

    return [
        OrgFacts(
            org_id=org.id,
            name=org.name,
            channel=org.channel,
            quota=dict(org.quota),
            since=since,
            until=until,
            changes=tuple(_state(r) for r in of(org.id, changes)),
            records=tuple(record_fact(r) for r in of(org.id, records)),
            open_incidents=tuple(record_fact(r) for r in of(org.id, still_open)),
            resolved=tuple(record_fact(r) for r in of(org.id, resolved)),
            failures=tuple(_failure(r) for r in of(org.id, failures)),
            stalls=tuple(_stall(r) for r in of(org.id, stalls)),
            rates=tuple(of(org.id, rates)),
            operations=tuple(_change(r) for r in of(org.id, operations)),
            idle=tuple(_idle(r, now) for r in of(org.id, idle)),
            requirements=tuple(_requirement(r) for r in of(org.id, requirements)),
            clusters_now=tuple(_cluster_now(r) for r in of(org.id, clusters)),
        )
        for org in orgs
    ]


async def gather_week(
    db: Database,
    *,
    program: ProgramConfig,
    week: Week,
    org_ids: Sequence[str] | None = None,
    now: datetime | None = None,
) -> list[OrgFacts]:
    """Facts of one digest week (`now`: the clock, which tells whether the week has ended)."""
    return await gather(
        db, program=program, since=week.start, until=week.end, org_ids=org_ids, rates_week=week, now=now
    )
