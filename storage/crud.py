"""Plain CRUD functions, session first, keyword-only."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import insert, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import AuditEntry, ClusterSeen, Operation, OperationStatus, Org


async def sync_orgs(session: AsyncSession, *, orgs: Iterable[Org]) -> None:
    """Make the orgs table say what the program file says; orgs no longer listed are marked inactive."""
    listed = {org.id: org for org in orgs}
    existing = {org.id: org for org in (await session.exec(select(Org))).all()}
    for org_id, org in listed.items():
        row = existing.get(org_id)
        if row is None:
            session.add(org)
        else:
            for field in ("name", "channel", "account_id", "region", "synced_at"):
                setattr(row, field, getattr(org, field))
            row.active = True
    for org_id, row in existing.items():
        if org_id not in listed:
            row.active = False
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
            for key in ("status", "nodes_total", "nodes_healthy", "instances", "last_seen_at")
        },
    )
    await session.exec(statement)
    await session.commit()


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
    limit: int = 100,
) -> Sequence[AuditEntry]:
    query = select(AuditEntry).order_by(col(AuditEntry.at).desc(), col(AuditEntry.id).desc()).limit(limit)
    if org_id:
        query = query.where(AuditEntry.org_id == org_id)
    if user_id:
        query = query.where(AuditEntry.user_id == user_id)
    if since:
        query = query.where(col(AuditEntry.at) >= since)
    return (await session.exec(query)).all()


async def add_operation(session: AsyncSession, *, operation: Operation) -> Operation:
    session.add(operation)
    await session.commit()
    return operation


async def get_operation(session: AsyncSession, *, operation_id: str) -> Operation | None:
    return await session.get(Operation, operation_id)


async def claim_operation(
    session: AsyncSession, *, operation_id: str, from_status: str, to_status: str, values: dict[str, Any]
) -> bool:
    """Move an operation from one status to another in one conditional UPDATE: True for the one caller
    that made the change, False for every other (a double click, a retry, another replica)."""
    result = await session.exec(
        update(Operation)
        .where(col(Operation.id) == operation_id, col(Operation.status) == from_status)
        .values(status=to_status, **values)
    )
    await session.commit()
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
