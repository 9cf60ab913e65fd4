"""SQLModel tables. Times are stored in UTC: timestamptz on Postgres, naive UTC text on SQLite."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, Column, DateTime, Index, UniqueConstraint
from sqlmodel import Field, SQLModel


def utcnow() -> datetime:
    return datetime.now(UTC)


def _utc_column(**kwargs: Any) -> Any:
    return Field(sa_column=Column(DateTime(timezone=True), **kwargs))


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
    user_id: str = Field(max_length=24, index=True)
    channel_id: str = Field(default="", max_length=24)
    org_id: str | None = Field(default=None, max_length=40)
    command: str = Field(max_length=32)
    text: str = Field(max_length=1000)
    outcome: str = Field(max_length=16)
    detail: str = Field(default="", max_length=2000)


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
    __table_args__ = (Index("ix_operations_status", "status"),)

    id: str = Field(primary_key=True, max_length=32)
    kind: str = Field(max_length=16)  # bot.clusters.progress.Kind: launch, scale, reboot, replace, delete, stop_fleet
    org_id: str = Field(max_length=40, index=True)
    backend: str = Field(max_length=16)
    cluster_name: str = Field(max_length=63)
    template: str = Field(default="", max_length=80)
    request: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    requested_by: str = Field(max_length=24)
    requested_at: datetime = _utc_column(nullable=False)
    channel_id: str = Field(max_length=24)
    status: str = Field(max_length=16)
    confirmed_by: str | None = Field(default=None, max_length=24)
    confirmed_at: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True)))
    message_ts: str | None = Field(default=None, max_length=32)  # the progress message, edited in place
    detail: str = Field(default="", max_length=2000)
    updated_at: datetime = _utc_column(nullable=False)
