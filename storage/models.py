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
