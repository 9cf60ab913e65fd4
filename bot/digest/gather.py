"""Storage -> facts: the few queries a digest or a tracking document needs, for every org at once.

Each query covers all the orgs asked for and one window, and the throughput query is aggregated by the
database (hourly means), so the cost grows with one week's events, not with the weeks stored."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

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
from bot.digest.goodput import STALL, GoodputFacts, Loss, Outage, Reported, Run, missing_fraction, runs_of
from bot.digest.medians import weeks_medians
from bot.digest.weeks import previous_week
from bot.monitor.throughput import WARMUP  # the stall detector's warm-up: a run is judged only after it
from storage import crud, tracking
from storage.db import Database
from storage.models import (
    ClusterSeen,
    ClusterState,
    Episode,
    EpisodeKind,
    Operation,
    OrgRequirement,
    TrackRecord,
    utcnow,
)


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
        nodes_unhealthy=row.nodes_unhealthy,
        compute_fleet=row.compute_fleet,
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
    """Facts of one digest week (`now`: the clock, which tells whether the week has ended), with goodput's for
    it and the week before (the section compares them)."""
    now = now or utcnow()
    facts = await gather(
        db, program=program, since=week.start, until=week.end, org_ids=org_ids, rates_week=week, now=now
    )
    goodput = await gather_goodput(
        db, program=program, since=previous_week(week).start, until=week.end, org_ids=org_ids, now=now
    )
    return [replace(f, goodput=goodput.get(f.org_id)) for f in facts]


# ------------------------------------------------------------------------------------------------ goodput

LOOK_BACK = timedelta(hours=1)  # a job reporting this long before the window was not (re)starting in it


def run_nodes(run: Run, said: Sequence[tuple[int, datetime, datetime]]) -> int | None:
    """Pure: the nodes a run's samples said (`said`: each number and the span of the samples that said it), the
    one whose span overlaps the run longest; None when none did (the run takes every accelerator node)."""
    overlaps = [(min(last, run.end) - max(first, run.start), count) for count, first, last in said]
    best = max((o for o in overlaps if o[0] >= timedelta(0)), default=None)
    return best[1] if best is not None else None


def stall_after(program: ProgramConfig, org_id: str) -> timedelta:
    """The org's `stall_after_minutes` (its own, or the program's)."""
    org = program.org(org_id)
    config = org.stall if org is not None and org.stall is not None else program.stall
    return timedelta(minutes=config.stall_after_minutes)


def _outage(row: Episode, until: datetime) -> Outage:
    return Outage(
        cluster_name=row.cluster_name,
        start=tracking.began(row),
        end=row.closed_at if row.closed_at is not None and row.closed_at < until else None,
        nodes=None if row.kind == EpisodeKind.CLUSTER.value else 1,
        instance_type=row.instance_type,
    )


async def gather_goodput(
    db: Database,
    *,
    program: ProgramConfig,
    since: datetime,
    until: datetime,
    org_ids: Sequence[str] | None = None,
    now: datetime | None = None,
) -> dict[str, GoodputFacts]:
    """Goodput's facts of the given orgs (default: all) over [since, min(until, now)): what has not happened yet
    counts nothing, so a running week is what it holds so far.

    Held: the usage ledger's states. Node failures: failure episodes from the failure to their closing (the
    successor running). Jobs at work: their one-minute rollups, in runs (bot.digest.goodput.runs_of) and
    `start` events (raw samples, while they are kept). Stalls, slowdowns and degradations: job episodes from
    when they began (`tracking.began`); a slowdown's missing fraction from the job's minutes during it against
    the hour before it (or after it)."""
    now = now or utcnow()
    until = min(until, now)
    orgs = [o for o in program.orgs if org_ids is None or o.id in org_ids]
    ids = [o.id for o in orgs]
    if until <= since or not ids:
        return {o.id: GoodputFacts(org_id=o.id, since=since, until=max(since, until)) for o in orgs}
    bounds = {o.id: stall_after(program, o.id) for o in orgs}
    fractions: dict[int, float] = {}
    async with db.session() as session:
        changes = await tracking.state_changes(session, org_ids=ids, since=since, until=until)
        failures = await tracking.episodes_overlapping(
            session, org_ids=ids, kinds=in_bucket(Bucket.FAILURE), since=since, until=until
        )
        episodes = await tracking.episodes_overlapping(
            session, org_ids=ids, kinds=in_bucket(Bucket.STALL), since=since, until=until
        )
        reported = await tracking.job_runs(session, org_ids=ids, since=since - LOOK_BACK, until=until)
        events = await tracking.job_events(session, org_ids=ids, since=since - LOOK_BACK, until=until)
        said = await tracking.job_nodes(session, org_ids=ids, since=since - LOOK_BACK, until=until)
        for row in episodes:
            if row.status != STALL and row.id is not None:
                start, end = tracking.began(row), min(row.closed_at or until, until)
                minutes = await tracking.job_minutes(
                    session,
                    org_id=row.org_id,
                    cluster=row.cluster_name,
                    job=row.node_key,
                    since=start - LOOK_BACK,
                    until=end + LOOK_BACK,
                )
                fractions[row.id] = missing_fraction(
                    [(n, t) for m, n, t in minutes if m < start],
                    [(n, t) for m, n, t in minutes if start <= m < end],
                    [(n, t) for m, n, t in minutes if m >= end],
                )
    stretches: dict[tuple[str, str, str], list[Reported]] = defaultdict(list)
    for stretch in reported:
        stretches[(stretch.org_id, stretch.cluster, stretch.job)].append(
            Reported(stretch.first, stretch.last, stretch.samples, stretch.spacing)
        )
    # Where a job (re)starts and warms up again: its `start` events, and the end of each of its stalls (a hung
    # job that reports again was restarted, from its last checkpoint).
    starts: dict[tuple[str, str, str], list[datetime]] = defaultdict(list)
    for event in events:
        if event.event == "start":
            starts[(event.org_id, event.cluster, event.job)].append(event.ts)
    for row in episodes:
        if row.status == STALL and row.closed_at is not None and row.closed_at < until:
            starts[(row.org_id, row.cluster_name, row.node_key)].append(row.closed_at)
    nodes_said: dict[tuple[str, str, str], list[tuple[int, datetime, datetime]]] = defaultdict(list)
    for org_id, cluster, job, count, first, last in said:
        nodes_said[(org_id, cluster, job)].append((count, first, last))
    runs: dict[str, list[Run]] = defaultdict(list)
    for (org_id, cluster, job), found in stretches.items():
        of_job = runs_of(
            found,
            starts.get((org_id, cluster, job), ()),
            cluster_name=cluster,
            job=job,
            stall_after=bounds[org_id],
            warmup=WARMUP,
        )
        told = nodes_said.get((org_id, cluster, job), [])
        runs[org_id] += [replace(run, nodes=run_nodes(run, told)) for run in of_job]
    by_org: dict[str, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for state in changes:
        by_org[state.org_id]["changes"].append(_state(state))
    for failure in failures:
        by_org[failure.org_id]["outages"].append(_outage(failure, until))
    for row in episodes:
        by_org[row.org_id]["losses"].append(
            Loss(
                cluster_name=row.cluster_name,
                job=row.node_key,
                kind=row.status or STALL,
                start=tracking.began(row),
                end=row.closed_at if row.closed_at is not None and row.closed_at < until else None,
                fraction=1.0 if row.status == STALL else fractions.get(row.id or 0, 0.0),
            )
        )
    return {
        o.id: GoodputFacts(
            org_id=o.id,
            since=since,
            until=until,
            changes=tuple(by_org[o.id]["changes"]),
            outages=tuple(by_org[o.id]["outages"]),
            runs=tuple(runs[o.id]),
            losses=tuple(by_org[o.id]["losses"]),
        )
        for o in orgs
    }
