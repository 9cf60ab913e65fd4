"""Approval requests and their votes (bot.approvals.desk): plain CRUD, session first, keyword-only.

Every write that decides something is one statement whose effect says who won: a request is added once per
operation (insert, or nothing), a vote once per approver (insert, or nothing), and a request ends once (a
conditional UPDATE from pending), so replicas and Slack retries cannot act twice."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import update
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import Approval, ApprovalVote

PENDING = "pending"  # bot.approvals.state.Status.PENDING (storage imports nothing of bot)


def _insert(session: AsyncSession) -> Any:
    dialect = session.bind.dialect.name if session.bind else "sqlite"
    return postgresql.insert if dialect == "postgresql" else sqlite.insert


async def add_approval(session: AsyncSession, *, approval: Approval) -> tuple[Approval, bool]:
    """Store the request for its operation: (the stored one, True) the first time; (the one there is, False)
    when a request for this operation exists already (a retry, a second replica, a double click)."""
    values = approval.model_dump(exclude={"id"})
    statement = _insert(session)(Approval).values(**values).on_conflict_do_nothing(index_elements=["operation_id"])
    result = await session.exec(statement)
    await session.commit()
    stored = await approval_for_operation(session, operation_id=approval.operation_id)
    if stored is None:  # removed in between: nothing a caller can act on
        raise LookupError(f"approval of {approval.operation_id} vanished")
    return stored, bool(result.rowcount)


async def get_approval(session: AsyncSession, *, approval_id: int) -> Approval | None:
    approval = await session.get(Approval, approval_id)
    if approval is not None:
        await session.refresh(approval)  # another replica may have ended it since this session read it
    return approval


async def approval_for_operation(session: AsyncSession, *, operation_id: str) -> Approval | None:
    query = select(Approval).where(col(Approval.operation_id) == operation_id)
    return (await session.exec(query.execution_options(populate_existing=True))).first()


async def add_vote(session: AsyncSession, *, vote: ApprovalVote) -> bool:
    """Record one approver's vote: True the first time, False if they voted on this request before."""
    values = vote.model_dump(exclude={"id"})
    statement = (
        _insert(session)(ApprovalVote)
        .values(**values)
        .on_conflict_do_nothing(index_elements=["approval_id", "user_id"])
    )
    result = await session.exec(statement)
    await session.commit()
    return bool(result.rowcount)


async def set_vote(session: AsyncSession, *, vote: ApprovalVote) -> None:
    """Record a vote whatever the person said before (a reject after one's own approval is a reject)."""
    values = vote.model_dump(exclude={"id"})
    statement = _insert(session)(ApprovalVote).values(**values)
    statement = statement.on_conflict_do_update(
        index_elements=["approval_id", "user_id"],
        set_={"vote": statement.excluded.vote, "reason": statement.excluded.reason, "at": statement.excluded.at},
    )
    await session.exec(statement)
    await session.commit()


async def votes(session: AsyncSession, *, approval_id: int) -> Sequence[ApprovalVote]:
    """The request's votes, in the order they came."""
    query = select(ApprovalVote).where(col(ApprovalVote.approval_id) == approval_id)
    query = query.order_by(col(ApprovalVote.at), col(ApprovalVote.id)).execution_options(populate_existing=True)
    return (await session.exec(query)).all()


async def end_approval(
    session: AsyncSession,
    *,
    approval_id: int,
    status: str,
    values: dict[str, Any],
    unexpired_at: datetime | None = None,
) -> bool:
    """End a pending request (approved, rejected, expired) in one conditional UPDATE: True for the one caller that
    ended it. `unexpired_at`: only if it has not expired by then (an approval never lands after its expiry)."""
    conditions = [col(Approval.id) == approval_id, col(Approval.status) == PENDING]
    if unexpired_at is not None:
        conditions.append(col(Approval.expires_at) > unexpired_at)
    result = await session.exec(update(Approval).where(*conditions).values(status=status, **values))
    await session.commit()
    return bool(result.rowcount)


async def set_message(session: AsyncSession, *, approval_id: int, channel_id: str, message_ts: str | None) -> None:
    """Where the request message is (edited as votes come, and when it ends)."""
    statement = update(Approval).where(col(Approval.id) == approval_id)
    await session.exec(statement.values(channel_id=channel_id, message_ts=message_ts))
    await session.commit()


async def pending_approvals(
    session: AsyncSession, *, now: datetime, org_ids: Sequence[str] | None = None
) -> Sequence[Approval]:
    """Requests still waiting at `now` (pending and not expired), of some orgs (None: every org), oldest first."""
    query = select(Approval).where(col(Approval.status) == PENDING, col(Approval.expires_at) > now)
    if org_ids is not None:
        query = query.where(col(Approval.org_id).in_(list(org_ids)))
    query = query.order_by(col(Approval.requested_at), col(Approval.id)).execution_options(populate_existing=True)
    return (await session.exec(query)).all()


async def expired_approvals(session: AsyncSession, *, now: datetime) -> Sequence[Approval]:
    """Requests still pending whose expiry has passed at `now` (the sweep ends them), oldest first."""
    query = select(Approval).where(col(Approval.status) == PENDING, col(Approval.expires_at) <= now)
    query = query.order_by(col(Approval.expires_at), col(Approval.id)).execution_options(populate_existing=True)
    return (await session.exec(query)).all()
