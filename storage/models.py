"""SQLModel tables. Times are stored in UTC: timestamptz on Postgres, naive UTC text on SQLite; they are
read back as aware UTC datetimes on both, so code never meets a naive one."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, DateTime, Dialect, Index, Integer, UniqueConstraint, text
from sqlalchemy.types import TypeDecorator
from sqlmodel import Field, SQLModel

from storage.text import StorableText


def utcnow() -> datetime:
    return datetime.now(UTC)


class UtcDateTime(TypeDecorator[datetime]):
    """DateTime(timezone=True) that always hands back aware UTC: SQLite stores no zone and returned naive
    values, which broke arithmetic against `utcnow()` (a closed episode's duration, for one)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _utc_column(**kwargs: Any) -> Any:
    return Field(sa_column=Column(UtcDateTime(), **kwargs))


def _text(max_length: int, **kwargs: Any) -> Any:
    """A VARCHAR(max_length) of user, Slack or AWS text, stored through `storage.text.storable` (NUL and lone
    surrogates replaced visibly): one such character must never make a row unstorable on Postgres."""
    return Field(sa_type=StorableText(max_length), max_length=max_length, **kwargs)


class Org(SQLModel, table=True):
    """An org as the program file last said; synced at every start."""

    __tablename__ = "orgs"

    id: str = Field(primary_key=True, max_length=40)
    name: str = Field(max_length=80)
    channel: str = Field(max_length=24)
    account_id: str = Field(max_length=12)
    region: str = Field(max_length=32)
    active: bool = True  # False once the org left the program file; its history stays
    synced_at: datetime = _utc_column(nullable=False)


class ClusterSeen(SQLModel, table=True):
    """A cluster as Pitcrew last saw it."""

    __tablename__ = "clusters"
    __table_args__ = (UniqueConstraint("org_id", "backend", "name", name="uq_clusters_org_backend_name"),)

    id: int | None = Field(default=None, primary_key=True)
    org_id: str = Field(foreign_key="orgs.id", index=True, max_length=40)
    backend: str = Field(max_length=16)
    name: str = Field(max_length=63)
    status: str = Field(max_length=40)
    nodes_total: int = 0
    nodes_healthy: int = 0
    nodes_unhealthy: int = 0  # the rest of nodes_total are in transition (bot.clusters.health)
    compute_fleet: str = _text(24, default="")  # ParallelCluster's computeFleetStatus; "" where there is none
    instances: dict[str, int] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    last_seen_at: datetime = _utc_column(nullable=False)


class Outcome(StrEnum):
    ALLOWED = "allowed"  # a read that was answered
    REFUSED = "refused"
    INVALID = "invalid"  # bad input; nothing done
    DONE = "done"
    FAILED = "failed"


class AuditEntry(SQLModel, table=True):
    """Every command and its outcome: who, which org, what they typed, what happened."""

    __tablename__ = "audit_log"
    __table_args__ = (Index("ix_audit_org_at", "org_id", "at"),)

    id: int | None = Field(default=None, primary_key=True)
    at: datetime = _utc_column(nullable=False, index=True)
    user_id: str = _text(24, index=True)
    channel_id: str = _text(24, default="")
    org_id: str | None = _text(40, default=None)
    command: str = _text(32)
    text: str = _text(1000)
    outcome: str = _text(16)
    detail: str = _text(2000, default="")
    # The actor's Slack workspace (Slack Connect members come from their own); None for rows from before it
    # was recorded, and for what no person did.
    team_id: str | None = _text(24, default=None)
    via: str = _text(16, default="")  # how the command came: "slash", "mention", "dm"; "" for clicks and forms


class OperationStatus(StrEnum):
    PLANNED = "planned"  # shown with Confirm/Cancel; nothing done yet
    CANCELLED = "cancelled"
    RUNNING = "running"  # confirmed, AWS asked; watched until done or failed (resumed after a restart)
    DONE = "done"
    FAILED = "failed"


class Operation(SQLModel, table=True):
    """A change to a cluster, from plan to outcome. Its id is the idempotency key: the Confirm button carries
    it, and confirming is one conditional UPDATE (planned -> running), so double clicks, Slack retries and
    several replicas start it once."""

    __tablename__ = "operations"
    __table_args__ = (
        Index("ix_operations_status", "status"),
        # One running change per cluster, enforced by the database (claim_operation relies on it).
        Index(
            "uq_operations_one_running",
            "org_id",
            "backend",
            "cluster_name",
            unique=True,
            sqlite_where=text("status = 'running'"),
            postgresql_where=text("status = 'running'"),
        ),
    )

    id: str = Field(primary_key=True, max_length=32)
    kind: str = _text(16)  # bot.clusters.progress.Kind: launch, scale, reboot, replace, delete, stop_fleet, start_fleet
    org_id: str = _text(40, index=True)
    backend: str = _text(16)
    cluster_name: str = _text(63)
    template: str = _text(80, default="")
    request: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    requested_by: str = _text(24)
    requested_at: datetime = _utc_column(nullable=False)
    channel_id: str = _text(24)
    status: str = _text(16)
    confirmed_by: str | None = _text(24, default=None)
    confirmed_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime()))
    message_ts: str | None = _text(32, default=None)  # the progress message, edited in place
    # When AWS accepted the change. A running operation without it was interrupted before AWS answered: a
    # restarted bot reports it as unknown rather than judging an unchanged cluster "done".
    started_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime()))
    detail: str = _text(2000, default="")
    updated_at: datetime = _utc_column(nullable=False)


class EpisodeKind(StrEnum):
    NODE = "node"  # one node failed (and the nodes that replaced it, while they keep failing)
    CLUSTER = "cluster"  # a cluster-level failure, keyed "cluster"
    JOB = "job"  # a training job's throughput anomaly (stall or slowdown), keyed by the job's name
    FAULTY_NODE = "faulty_node"  # a node diverging from its peers' metrics, keyed by its instance id


class EpisodeState(StrEnum):
    OPEN = "open"
    CLOSED = "closed"


class Episode(SQLModel, table=True):
    """An alert (of one kind: bot.alerts.kinds) from opening to resolution, shown as one Slack thread edited
    in place. The unique key makes opening it idempotent across replicas: whoever inserts second loses the
    race. The kind leads the key, so two kinds of one cluster never share a key."""

    __tablename__ = "episodes"
    __table_args__ = (
        UniqueConstraint("org_id", "kind", "backend", "cluster_name", "node_key", "generation", name="uq_episode_key"),
        Index("ix_episodes_state", "state"),
        Index("ix_episodes_org_cluster", "org_id", "cluster_name"),
    )

    id: int | None = Field(default=None, primary_key=True)
    org_id: str = _text(40)
    backend: str = _text(16)  # the cluster's backend; for a job, "throughput" (a job names its cluster only)
    cluster_name: str = _text(63)
    node_key: str = _text(128)  # the instance id that opened it, "cluster", or a training job's name
    generation: int = 0  # 0 for the first episode of a key, +1 for each later one
    kind: str = _text(16)  # EpisodeKind
    state: str = _text(16)  # EpisodeState
    node_ids: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))  # last is current
    group_name: str = _text(63, default="")
    instance_type: str = _text(32, default="")
    status: str = _text(32, default="")  # last status AWS gave
    message: str = _text(1000, default="")
    opened_at: datetime = _utc_column(nullable=False)
    # When the current failure began: opened_at, or the last reopening (node hours lost count from it).
    failing_since: datetime | None = Field(default=None, sa_column=Column(UtcDateTime()))
    updated_at: datetime = _utc_column(nullable=False)
    closed_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime()))
    reopened: int = 0
    node_recovery: str = _text(16, default="")
    silenced: bool = False
    storm_id: int | None = None  # id of the first episode of a grouped storm message
    channel_id: str = _text(24, default="")
    message_ts: str | None = _text(32, default=None)
    coordination_ts: str | None = _text(32, default=None)
    acked_by: str | None = _text(24, default=None)
    acked_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime()))
    # When it was posted again in the coordination channel, nobody having acknowledged it (set once).
    escalated_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime()))
    node_hours_lost: float = 0.0
    # The failed node's group at the last look that still listed it (ids, and its target count): a node
    # that appears later, the group not having grown, is its replacement; one already there is not.
    group_nodes: list[str] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    group_target: int | None = None
    # The link to this episode's earlier message, when it reopened after closing and posted a new one.
    follows: str | None = Field(default=None, max_length=500)
    # Per-node metrics' verdict (bot.node_metrics): the bottleneck, and the nodes to blame, most likely first.
    cause: str = _text(16, default="")
    suspects: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False, server_default="[]"))
    # The escalation's message in the coordination channel, edited with the alert (acknowledged, over).
    escalation_ts: str | None = _text(32, default=None)
    # When its current message was posted, where that is not its opening or reopening: a failure a silence
    # held back is posted when the silence ends, and escalates counting from then.
    posted_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime()))
    # What failed (node and cluster kinds): the status and message when it failed, kept while `status` follows
    # the node (a replacement Pending, then Running), so a recovered alert still says what it was.
    failed_status: str = _text(32, default="")
    failed_message: str = _text(1000, default="")
    outcome: str = _text(500, default="")  # once closed, what it is now ("replaced by `i-…`, which is Running")
    # HyperPod's own word on a node alert's node (its health-monitoring agent: "HyperPod: <fault type> (<reason>)"),
    # shown beside AWS's status message; and the last deep health check's result ("" when none ran).
    diagnosis: str = _text(300, default="")
    # Watch (a node that only diverges): when to remind whoever pressed it (acked_by), if it is still open then.
    remind_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime()))


class Silence(SQLModel, table=True):
    """Alerts of one cluster (node, cluster and throughput alike, whichever alert it was set from) silenced
    until a time or until someone presses Unsilence; what they would have posted goes to the thread it was
    set from."""

    __tablename__ = "silences"
    __table_args__ = (Index("ix_silences_org_backend_cluster", "org_id", "backend", "cluster_name"),)

    id: int | None = Field(default=None, primary_key=True)
    org_id: str = _text(40)
    backend: str = _text(16)
    cluster_name: str = _text(63)
    until: datetime = _utc_column(nullable=False)
    set_by: str = _text(24)
    channel_id: str = _text(24, default="")
    thread_ts: str = _text(32, default="")  # the alert message the silence was set from
    created_at: datetime = _utc_column(nullable=False)
    message_ts: str | None = Field(default=None, max_length=32)  # its own message, with the Unsilence button
    ended_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime()))  # Unsilence pressed
    ended_by: str | None = Field(default=None, max_length=24)


class Lease(SQLModel, table=True):
    """A named lease (the monitors' leader lease): held by one holder until it expires unless renewed."""

    __tablename__ = "leases"

    name: str = Field(primary_key=True, max_length=64)
    holder: str = Field(max_length=64)
    expires_at: datetime = _utc_column(nullable=False)


class EventSeen(SQLModel, table=True):
    """Ids of events already handled: EventBridge via SQS delivers at least once, to any replica, and Slack
    retries an Events API delivery it thinks was lost (ids `slack:Ev…`, bot.transports)."""

    __tablename__ = "events_seen"

    event_id: str = Field(primary_key=True, max_length=128)
    received_at: datetime = _utc_column(nullable=False)


class ApiToken(SQLModel, table=True):
    """A per-org bearer token for the HTTP ingest API. Only its sha256 is stored; the token itself is printed
    once by `pitcrew token create ORG`. `prefix` (its first characters) tells tokens apart in lists."""

    __tablename__ = "api_tokens"
    __table_args__ = (UniqueConstraint("token_hash", name="uq_api_tokens_token_hash"),)

    id: int | None = Field(default=None, primary_key=True)
    org_id: str = Field(max_length=40, index=True)
    token_hash: str = Field(max_length=64)  # sha256 hex of the token
    prefix: str = Field(max_length=12)
    created_at: datetime = _utc_column(nullable=False)
    created_by: str = _text(64, default="")
    revoked_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime()))


# BIGINT on Postgres; SQLite autoincrements only an INTEGER PRIMARY KEY (its rowid, 64-bit anyway).
_BIG_ID = BigInteger().with_variant(Integer(), "sqlite")


class ThroughputSample(SQLModel, table=True):
    """One raw throughput sample of a training job (posted to the ingest API or pulled from CloudWatch).
    Kept for PITCREW_THROUGHPUT_RAW_DAYS; the one-minute rollups outlive it. A sample carries one value,
    tokens_per_second or samples_per_second, or none when it only marks an event (job start or end)."""

    __tablename__ = "throughput_samples"
    __table_args__ = (
        # Unique: a retried ingest batch is stored once (INSERT ... ON CONFLICT DO NOTHING on this key).
        Index("ix_throughput_samples_key_ts", "org_id", "cluster", "job", "ts", unique=True),
        Index("ix_throughput_samples_ts", "ts"),
    )

    id: int | None = Field(default=None, sa_column=Column(_BIG_ID, primary_key=True, autoincrement=True))
    org_id: str = Field(max_length=40)
    cluster: str = Field(max_length=63)
    job: str = Field(max_length=128)
    ts: datetime = _utc_column(nullable=False)
    tokens_per_second: float | None = None
    samples_per_second: float | None = None
    step: int | None = Field(default=None, sa_column=Column(BigInteger(), nullable=True))
    event: str | None = Field(default=None, max_length=8)  # "start" | "end"
    received_at: datetime = _utc_column(nullable=False)
    nodes: int | None = None  # the nodes the job runs on, when its sender says (a slow restart on the same nodes)

    @property
    def value(self) -> float | None:
        """The sample's throughput, whichever unit it came in."""
        return self.tokens_per_second if self.tokens_per_second is not None else self.samples_per_second


class ThroughputRollup(SQLModel, table=True):
    """One minute of one job's throughput (samples that carry a value): count, sum, min, max. Upserted with
    every ingested batch, so several batches in one minute combine; kept after the raw samples are pruned."""

    __tablename__ = "throughput_rollups"
    __table_args__ = (Index("ix_throughput_rollups_minute", "minute"),)

    org_id: str = Field(primary_key=True, max_length=40)
    cluster: str = Field(primary_key=True, max_length=63)
    job: str = Field(primary_key=True, max_length=128)
    minute: datetime = Field(sa_column=Column(UtcDateTime(), primary_key=True))  # ts floored to the minute
    count: int = 0
    total: float = 0.0  # sum of the values
    min: float = 0.0
    max: float = 0.0

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0


class ThroughputHourly(SQLModel, table=True):
    """One hour of one job's throughput (count and sum), upserted with the minute rollups at ingest. The
    weekly digest reads these: a week is 168 rows per job instead of 10,080 minutes to group.

    The hour leads the primary key: the digest asks for one window across every org, which is then one range
    of the key (led by the org, SQLite walked every hour of every org's year to find one week)."""

    __tablename__ = "throughput_hourly"
    # The key and the count: a week's count, which tells a digest whether its stored medians (job_week_medians)
    # still hold, is read from the index alone (SQLite looked up 100 k rows for it: 0.44 s instead of 0.02 s).
    __table_args__ = (Index("ix_throughput_hourly_counts", "hour", "org_id", "cluster", "job", "count"),)

    hour: datetime = Field(sa_column=Column(UtcDateTime(), primary_key=True))  # ts floored to the hour (UTC)
    org_id: str = Field(primary_key=True, max_length=40)
    cluster: str = Field(primary_key=True, max_length=63)
    job: str = Field(primary_key=True, max_length=128)
    count: int = 0
    total: float = 0.0


class TrackRecord(SQLModel, table=True):
    """A tracking record of an org: a note, milestone, incident, lesson, or a requirement change.

    `request_key` is the Slack request that created it (the slash command's trigger id, or the modal's view
    id): unique, so a retried request records once."""

    __tablename__ = "track_records"
    __table_args__ = (
        Index("ix_track_records_org_created", "org_id", "created_at"),
        Index("ix_track_records_created", "created_at"),
        UniqueConstraint("request_key", name="uq_track_records_request_key"),
    )

    id: int | None = Field(default=None, primary_key=True)
    org_id: str = _text(40)
    kind: str = _text(16)  # bot.digest.facts.RecordKind
    text: str = _text(2000)
    created_by: str = _text(24)
    created_at: datetime = _utc_column(nullable=False)
    channel_id: str = _text(24, default="")
    request_key: str | None = _text(64, default=None)
    resolved_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime()))
    resolved_by: str | None = _text(24, default=None)


class OrgRequirement(SQLModel, table=True):
    """An org's stated requirement (model size, framework, instance type and count, storage, deadline...)."""

    __tablename__ = "org_requirements"

    org_id: str = _text(40, primary_key=True)
    key: str = _text(40, primary_key=True)
    value: str = _text(200)
    set_by: str = _text(24)
    set_at: datetime = _utc_column(nullable=False)


class ClusterState(SQLModel, table=True):
    """From `at` on, a cluster held `count` instances of a type. Written by the node sweep only when a count
    changes (a deleted cluster gets 0), so instance-hours are the integral of these steps."""

    __tablename__ = "cluster_states"
    __table_args__ = (
        Index("ix_cluster_states_org_at", "org_id", "at"),
        Index("ix_cluster_states_key_at", "org_id", "backend", "cluster_name", "instance_type", "at"),
    )

    id: int | None = Field(default=None, sa_column=Column(_BIG_ID, primary_key=True, autoincrement=True))
    org_id: str = Field(max_length=40)
    backend: str = Field(max_length=16)
    cluster_name: str = Field(max_length=63)
    instance_type: str = Field(max_length=32)
    count: int = 0
    at: datetime = _utc_column(nullable=False)


class DigestRunStatus(StrEnum):
    CLAIMED = "claimed"  # being posted by `claimed_by`
    POSTED = "posted"
    SKIPPED = "skipped"  # Pitcrew was down past the grace period; said in the next digest
    FAILED = "failed"  # Slack refused it; `detail` says why


class DigestRun(SQLModel, table=True):
    """One posting of one week's digest to one channel. The unique (week, channel, attempt) key is the claim:
    the scheduler, `/digest send` and every replica insert attempt 0, so each digest is posted once; `/digest
    send --force` inserts the next attempt. channel "*" marks a skipped week."""

    __tablename__ = "digest_runs"
    __table_args__ = (UniqueConstraint("week", "channel", "attempt", name="uq_digest_runs_week_channel_attempt"),)

    id: int | None = Field(default=None, primary_key=True)
    week: str = Field(max_length=8, index=True)  # "2026-W48"
    channel: str = _text(24)
    attempt: int = 0
    status: str = Field(max_length=16)  # DigestRunStatus
    claimed_by: str = _text(64)  # the replica, or the Slack user who sent it
    claimed_at: datetime = _utc_column(nullable=False)
    posted_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime()))
    message_ts: str | None = _text(32, default=None)
    detail: str = _text(1000, default="")


class QuotaNotice(SQLModel, table=True):
    """A one-time notice that an org holds 80% or 100% of its quota of a type. Deleted when it holds less
    again, so the next crossing is announced once more."""

    __tablename__ = "quota_notices"

    org_id: str = Field(primary_key=True, max_length=40)
    instance_type: str = Field(primary_key=True, max_length=32)
    level: int = Field(primary_key=True)  # 80 or 100
    held: int
    quota: int
    at: datetime = _utc_column(nullable=False)


class JobWeekMedian(SQLModel, table=True):
    """A training job's median hourly throughput in one finished digest week (a week of the program timezone,
    by its UTC bounds), stored the first time a digest reads that week so later digests read 600 rows
    instead of grouping 100 k hourly ones. `samples` is the sum of the week's hourly counts when it was
    computed: ingest accepts samples days late, so a digest recomputes a job-week whose count has changed."""

    __tablename__ = "job_week_medians"

    week_start: datetime = Field(sa_column=Column(UtcDateTime(), primary_key=True))
    week_end: datetime = Field(sa_column=Column(UtcDateTime(), primary_key=True))
    org_id: str = Field(primary_key=True, max_length=40)
    cluster: str = Field(primary_key=True, max_length=63)
    job: str = Field(primary_key=True, max_length=128)
    median: float
    hours: int  # hourly means the median is of
    samples: int  # sum of the week's hourly counts it was computed from
    computed_at: datetime = _utc_column(nullable=False)


class DoctorResult(SQLModel, table=True):
    """An org's last `pitcrew doctor` (or `/cluster doctor`) run: whether every check passed and, if not, the
    lines that failed. One row per org (and one for the program's own checks), replaced by each run."""

    __tablename__ = "doctor_results"

    org_id: str = Field(primary_key=True, max_length=40)
    ran_at: datetime = _utc_column(nullable=False)
    ok: bool
    problems: str = _text(4000, default="")  # one failing check per line: "NAME: what is wrong and the fix"


class Approval(SQLModel, table=True):
    """A change waiting for approval (bot.approvals): one per operation, so a retried or repeated "Request
    approval" finds the one there is. It ends in one conditional UPDATE from pending (approved, rejected,
    expired), so the change it holds runs at most once across replicas."""

    __tablename__ = "approvals"
    __table_args__ = (
        UniqueConstraint("operation_id", name="uq_approvals_operation"),
        Index("ix_approvals_status_expires", "status", "expires_at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    operation_id: str = _text(32)
    org_id: str = _text(40)
    requested_by: str = _text(24)  # the change's requester: never its approver
    requested_at: datetime = _utc_column(nullable=False)
    rule: str = _text(40)  # the `approvals:` key the change met ("launch_over_usd_per_day")
    why: str = _text(400)  # "estimated $21,000/day > $5,000"
    approvers: str = _text(16)  # "admins" | "operators", as the program file said when it was asked
    needed: int  # distinct approvals it takes
    expires_at: datetime = _utc_column(nullable=False)
    status: str = _text(16)  # bot.approvals.state.Status
    channel_id: str = _text(24, default="")  # where the request message is
    message_ts: str | None = _text(32, default=None)
    thread_ts: str | None = _text(32, default=None)  # the plan's thread, where its progress goes too
    decided_by: str | None = _text(24, default=None)  # the last approver, or who rejected it
    decided_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime()))
    reason: str = _text(1000, default="")  # a rejection's reason


class ApprovalVote(SQLModel, table=True):
    """One approver's click on an approval request: one row per person, so a repeated click counts once."""

    __tablename__ = "approval_votes"
    __table_args__ = (UniqueConstraint("approval_id", "user_id", name="uq_approval_votes_user"),)

    id: int | None = Field(default=None, primary_key=True)
    approval_id: int = Field(index=True)
    user_id: str = _text(24)
    vote: str = _text(16)  # bot.approvals.state.Verdict
    reason: str = _text(1000, default="")
    at: datetime = _utc_column(nullable=False)
