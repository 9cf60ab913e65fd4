"""What tracking and the weekly digest are made of: plain frozen dataclasses.

Storage is read by `bot.digest.gather` into the *facts* below (one `OrgFacts` per org and window); pure code
in `bot.digest.compute` turns facts into *sections* (`OrgSection`, `ProgramDigest`, `TrackingDoc`); renderers
(`bot.digest.render` for Block Kit, `bot.digest.markdown` for the exported document, `bot.digest.charts` for
PNGs) only format sections. Nothing here touches Slack, AWS or a database.

Every datetime is aware UTC; shown in the program timezone by the renderers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo

from bot.clusters.health import ClusterHealth, seen_health


class RecordKind(StrEnum):
    NOTE = "note"
    MILESTONE = "milestone"
    INCIDENT = "incident"  # open until `/track resolve ID`
    LESSON = "lesson"
    REQUIREMENT = "requirement"  # written by `/track require`: "model_size = 175B (was 70B)"


# Kinds a person types after /track; `requirement` records come from `/track require`.
TYPED_KINDS = (RecordKind.NOTE, RecordKind.MILESTONE, RecordKind.INCIDENT, RecordKind.LESSON)


@dataclass(frozen=True)
class Week:
    """An ISO week in the program timezone: Monday 00:00 local to the next Monday 00:00 local (exclusive).

    `start` and `end` are aware UTC. In a zone with daylight saving a week can last 167 or 169 hours."""

    label: str  # "2026-W48"
    start: datetime
    end: datetime
    tz: ZoneInfo

    @property
    def hours(self) -> float:
        return (self.end - self.start).total_seconds() / 3600

    @property
    def days(self) -> tuple[date, ...]:
        """The seven local dates of the week, Monday first."""
        first = self.start.astimezone(self.tz).date()
        return tuple(first + timedelta(days=n) for n in range(7))


@dataclass(frozen=True)
class Record:
    """A tracking record typed by a person (or a requirement change)."""

    id: int
    org_id: str
    kind: RecordKind
    text: str
    created_by: str
    created_at: datetime
    resolved_at: datetime | None = None  # incidents only
    resolved_by: str | None = None


@dataclass(frozen=True)
class Requirement:
    key: str  # "model_size", "framework", "instance_type", "instance_count", "storage", "deadline", ...
    value: str
    set_by: str
    set_at: datetime


@dataclass(frozen=True)
class StateChange:
    """From `at` on, `cluster_name` held `count` instances of `instance_type` (until the next change of the same
    cluster and type). Written by the node sweep only when a count changes; a deleted cluster gets count 0."""

    org_id: str
    backend: str
    cluster_name: str
    instance_type: str  # without the `ml.` prefix
    count: int
    at: datetime


@dataclass(frozen=True)
class Failure:
    """A node-failure (or cluster-failure) alert episode."""

    org_id: str
    backend: str
    cluster_name: str
    kind: str  # "node" | "cluster"
    instance_type: str  # "" when unknown
    opened_at: datetime
    closed_at: datetime | None
    node_hours_lost: float


@dataclass(frozen=True)
class Stall:
    """A throughput episode of a training job: `status` "stall" or "slowdown". `start`: when the anomaly
    began (a hang at its last good sample), before it was told; it lasted from there to `closed_at`."""

    org_id: str
    cluster_name: str
    job: str
    status: str
    start: datetime
    closed_at: datetime | None


@dataclass(frozen=True)
class JobRate:
    """A job's median throughput (tokens/s, or samples/s for jobs that report those) in the week and the week
    before; None where it reported nothing. Medians are of hourly means, computed in SQL."""

    org_id: str
    cluster_name: str
    job: str
    this_week: float | None
    last_week: float | None


@dataclass(frozen=True)
class IdleSpan:
    """An idle-accelerators episode: `nodes` accelerator nodes of a cluster ran no job from `since` until
    `until` (when a job reported again; for an episode still open, when the facts were gathered; None: open,
    counted to the end of the window)."""

    org_id: str
    cluster_name: str
    instance_type: str
    nodes: int
    since: datetime
    until: datetime | None


@dataclass(frozen=True)
class Change:
    """A cluster change Pitcrew made (an operation that finished, done or failed)."""

    org_id: str
    kind: str  # launch, scale, reboot, replace, delete, stop_fleet
    cluster_name: str
    status: str  # "done" | "failed"
    at: datetime  # when it finished
    by: str  # who confirmed it
    summary: str  # "scale kumo-labs/kumo-p5-train worker-group-1 32→34"


@dataclass(frozen=True)
class ClusterNow:
    """A cluster as Pitcrew last saw it (for the living document)."""

    backend: str
    name: str
    status: str
    nodes_total: int
    nodes_healthy: int
    instances: Mapping[str, int]
    last_seen_at: datetime
    nodes_unhealthy: int = 0
    compute_fleet: str = ""  # ParallelCluster's computeFleetStatus ("STOPPED", ...); "" where there is none

    @property
    def health(self) -> ClusterHealth:
        """Its health and colour by the one rule every view uses (bot.clusters.health)."""
        return seen_health(
            backend=self.backend,
            status=self.status,
            compute_fleet=self.compute_fleet,
            total=self.nodes_total,
            healthy=self.nodes_healthy,
            unhealthy=self.nodes_unhealthy,
        )


@dataclass(frozen=True)
class OrgFacts:
    """Everything about one org in one window [since, until), as stored.

    `changes`: for each (cluster, type), the last StateChange before `since` (the state the window starts in)
    and every StateChange inside the window, oldest first. `records`: records created in the window.
    `open_incidents`: incidents not resolved at `until`, of any age. `resolved`: incidents resolved in the
    window. `failures`/`stalls`: episodes opened in the window, or still open at its start.
    `rates`: one per job that reported in the window or the one before it."""

    org_id: str
    name: str
    channel: str
    quota: Mapping[str, int]
    since: datetime
    until: datetime
    changes: tuple[StateChange, ...] = ()
    records: tuple[Record, ...] = ()
    open_incidents: tuple[Record, ...] = ()
    resolved: tuple[Record, ...] = ()
    failures: tuple[Failure, ...] = ()
    stalls: tuple[Stall, ...] = ()
    rates: tuple[JobRate, ...] = ()
    operations: tuple[Change, ...] = ()
    idle: tuple[IdleSpan, ...] = ()  # idle-accelerator episodes open at some point in the window
    # Digest facts only: goodput's, from the week before this one to the end of this one (or now, if sooner).
    goodput: GoodputFacts | None = None
    # For the living document only (empty in digest facts):
    requirements: tuple[Requirement, ...] = ()
    clusters_now: tuple[ClusterNow, ...] = ()


# ------------------------------------------------------------------------------------------------ goodput

TRAINING = "training"
NODE_FAILURES = "node failures"
STALLS = "stalls"
SLOWDOWNS = "slowdowns"
RESTARTS = "restarts and warm-up"
IDLE = "idle"
PARTS = (TRAINING, NODE_FAILURES, STALLS, SLOWDOWNS, RESTARTS, IDLE)


@dataclass(frozen=True)
class Run:
    """A job at work on a cluster from `start` to `end`: restarting and warming up until `ready`. `nodes`: the
    nodes its samples say it runs on; None: every accelerator node of the cluster."""

    cluster_name: str
    job: str
    start: datetime
    ready: datetime
    end: datetime
    nodes: int | None = None


@dataclass(frozen=True)
class Outage:
    """A failed node (`nodes` 1) or a failed cluster (`nodes` None) from the failure until the successor runs
    (`end` None: not yet, counted to the end of the facts' window)."""

    cluster_name: str
    start: datetime
    end: datetime | None
    nodes: int | None = 1
    instance_type: str = ""  # its accelerators per node; "" or a type without any: the cluster's average


@dataclass(frozen=True)
class Loss:
    """A throughput episode of a job: a stall loses all of the job's share while it lasts, a slowdown or a
    degradation its missing `fraction` (1 - rate / baseline, in [0, 1])."""

    cluster_name: str
    job: str
    kind: str  # "stall" | "slowdown" | "degradation"
    start: datetime
    end: datetime | None  # None: still open, counted to the end of the facts' window
    fraction: float = 1.0


@dataclass(frozen=True)
class GoodputFacts:
    """What goodput is computed from, for one org over [since, until): `changes` as `OrgFacts.changes` (the
    state each cluster and type was in at `since`, and every change after); the rest overlapping the window."""

    org_id: str
    since: datetime
    until: datetime
    changes: tuple[StateChange, ...] = ()
    outages: tuple[Outage, ...] = ()
    runs: tuple[Run, ...] = ()
    losses: tuple[Loss, ...] = ()


@dataclass(frozen=True)
class Goodput:
    """Accelerator-hours of one org over [since, until): held, and the six parts it was spent on.

    `reported`: some job of the org was at work by its throughput in the window (a run of its samples or a
    throughput episode). Without one Pitcrew cannot tell training from idle (every held hour lands in idle),
    so goodput is unknown, not 0 %: the parts still add up to held."""

    since: datetime
    until: datetime
    held: float
    training: float = 0.0
    node_failures: float = 0.0
    stalls: float = 0.0
    slowdowns: float = 0.0
    restarts: float = 0.0
    idle: float = 0.0
    reported: bool = True

    @property
    def percent(self) -> float | None:
        """training / held in percent; None when nothing was held or no job reported (`reported`)."""
        if self.held <= 0 or not self.reported:
            return None
        return min(100.0, max(0.0, 100.0 * self.training / self.held))

    def parts(self) -> tuple[tuple[str, float], ...]:
        """(name, accelerator-hours) in PARTS order."""
        values = (self.training, self.node_failures, self.stalls, self.slowdowns, self.restarts, self.idle)
        return tuple(zip(PARTS, values, strict=True))


# ------------------------------------------------------------------------------------------------ sections


@dataclass(frozen=True)
class UsageLine:
    """Instance-hours of one instance type in a window, against the quota (instances held at once times hours)."""

    instance_type: str
    instance_hours: float
    quota: int | None  # None: the type is not under quota (head, login, controller nodes)
    quota_hours: float | None  # quota times hours in the window
    share: float | None  # instance_hours / quota_hours; None without a quota (or a quota of 0)


@dataclass(frozen=True)
class QuotaBar:
    """What a usage chart sets against quota: the types under quota only, on both sides (head, controller and
    login nodes have no quota-hours, and their hours against P5 quota-hours showed orgs at 96 % as over)."""

    types: tuple[str, ...]  # the types counted; every type used where the org has no quota
    instance_hours: float
    quota: int  # instances at once, summed over `types`
    quota_hours: float | None  # None: nothing to set the hours against


@dataclass(frozen=True)
class ClusterAtEnd:
    """A cluster's instances by type at the end of the window (clusters holding nothing are left out)."""

    backend: str
    cluster_name: str
    instances: Mapping[str, int]


@dataclass(frozen=True)
class FailureSummary:
    count: int  # episodes opened in the window
    recovered: int  # episodes closed in the window
    mean_time_to_recovery: timedelta | None  # over those closed in the window
    node_hours_lost: float
    gpu_hours_lost: float  # node-hours times accelerators per instance (GPUs, or Trainium chips)
    still_open: int  # open at the end of the window
    repeated: tuple[str, ...]  # clusters with 2 or more failures in the window


@dataclass(frozen=True)
class JobTrend:
    cluster_name: str
    job: str
    this_week: float | None
    last_week: float | None
    ratio: float | None  # this_week / last_week when both are known and last_week > 0


@dataclass(frozen=True)
class OrgSection:
    org_id: str
    name: str
    channel: str
    clusters: tuple[ClusterAtEnd, ...]
    nodes_by_type: Mapping[str, int]  # at the end of the window, summed over clusters
    usage: tuple[UsageLine, ...]  # quota'd types first, then others; by type name
    daily_hours: tuple[tuple[date, Mapping[str, float]], ...]  # local date -> instance-hours by type (charts)
    failures: FailureSummary
    jobs: tuple[JobTrend, ...]
    stalls: tuple[Stall, ...]
    milestones: tuple[Record, ...]
    incidents_opened: tuple[Record, ...]
    incidents_resolved: tuple[Record, ...]
    incidents_open: tuple[Record, ...]
    notes: tuple[Record, ...]
    lessons: tuple[Record, ...]
    requirement_changes: tuple[Record, ...]
    changes: tuple[Change, ...]
    attention: tuple[str, ...]  # why this org needs attention ("2 open incidents", ...); empty: it does not
    idle_hours: Mapping[str, float] = field(default_factory=dict)  # idle accelerator instance-hours by type
    goodput: Goodput | None = None  # the week's (a running week's so far); None where it was not gathered
    goodput_last_week: Goodput | None = None

    @property
    def quiet(self) -> bool:
        """Nothing happened and nothing is held: the digest says so in one line."""
        return not (
            self.clusters
            or any(u.instance_hours for u in self.usage)
            or self.failures.count
            or self.failures.still_open
            or self.jobs
            or self.stalls
            or self.milestones
            or self.incidents_opened
            or self.incidents_resolved
            or self.incidents_open
            or self.notes
            or self.lessons
            or self.requirement_changes
            or self.changes
        )


@dataclass(frozen=True)
class ProgramTotals:
    clusters: int
    nodes_by_type: Mapping[str, int]
    instance_hours_by_type: Mapping[str, float]
    failures: int
    gpu_hours_lost: float
    stalls: int
    incidents_open: int
    milestones: int
    idle_instance_hours: float = 0.0
    goodput: Goodput | None = None  # every reporting org's together (None when no section has it)


@dataclass(frozen=True)
class ProgramDigest:
    program_name: str
    week: Week
    orgs: tuple[OrgSection, ...]  # in program-file order
    totals: ProgramTotals
    attention: tuple[tuple[str, tuple[str, ...]], ...]  # (org_id, reasons) for orgs that need attention
    lessons: tuple[Record, ...]  # every lesson of the week, all orgs, oldest first
    skipped_weeks: tuple[str, ...] = ()  # earlier weeks whose digest was never posted ("2026-W47")

    def org(self, org_id: str) -> OrgSection | None:
        return next((o for o in self.orgs if o.org_id == org_id), None)


@dataclass(frozen=True)
class HistoryEntry:
    """One dated line of an org's history: a record, a cluster change, a failure or a stall."""

    at: datetime
    kind: str  # a RecordKind value, "change", "failure", "stall", or "resolved" (an incident resolved)
    text: str
    by: str = ""  # Slack user id, when a person did it
    ref: str = ""  # "#12" for records


@dataclass(frozen=True)
class TrackingDoc:
    """An org's living document: what `/track doc ORG` shows and `pitcrew track export` writes."""

    org_id: str
    name: str
    generated_at: datetime
    requirements: tuple[Requirement, ...]
    clusters: tuple[ClusterNow, ...]
    quota: Mapping[str, int]
    held: Mapping[str, int]  # instances held now, by type (from clusters)
    usage: tuple[UsageLine, ...]  # over the document's window
    usage_window: tuple[datetime, datetime]
    open_incidents: tuple[Record, ...]
    history: tuple[HistoryEntry, ...]  # newest first
    notes: tuple[str, ...] = field(default=())  # caveats to show (e.g. "usage counted since 2026-11-20")
