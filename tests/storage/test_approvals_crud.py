"""Approval requests and votes on SQLite and Postgres: migration 0019 matches the models, one request per
operation, one vote per approver, and a request ends once."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from sqlalchemy import inspect

from storage import approvals as store
from storage.db import Database
from storage.models import Approval, ApprovalVote

T0 = datetime(2026, 12, 7, 1, 0, tzinfo=UTC)


def request(operation_id: str = "a" * 32, *, expires: timedelta = timedelta(hours=1)) -> Approval:
    return Approval(
        operation_id=operation_id,
        org_id="kumo-labs",
        requested_by="U0ALICE01",
        requested_at=T0,
        rule="delete",
        why="every cluster delete needs approval",
        approvers="admins",
        needed=2,
        expires_at=T0 + expires,
        status="pending",
        channel_id="C0KUMOLAB",
    )


async def test_the_migration_makes_the_tables_the_models_describe(db: Database) -> None:
    def shape(sync: object) -> dict[str, set[str]]:
        inspector = inspect(sync)
        return {table: {c["name"] for c in inspector.get_columns(table)} for table in ("approvals", "approval_votes")}

    async with db.engine.connect() as connection:
        columns = await connection.run_sync(shape)
    assert columns["approvals"] == set(Approval.model_fields)
    assert columns["approval_votes"] == set(ApprovalVote.model_fields)


async def test_one_request_per_operation_one_vote_per_person_and_one_end(db: Database) -> None:
    async with db.session() as session:
        first, added = await store.add_approval(session, approval=request())
        again, added_again = await store.add_approval(session, approval=request())
    assert added and not added_again and again.id == first.id
    key = first.id or 0
    vote = ApprovalVote(approval_id=key, user_id="U0ADMIN01", vote="approve", at=T0)
    async with db.session() as session:
        assert await store.add_vote(session, vote=vote)
        assert not await store.add_vote(session, vote=ApprovalVote(**vote.model_dump(exclude={"id"})))
        await store.set_vote(
            session,
            vote=ApprovalVote(approval_id=key, user_id="U0ADMIN01", vote="reject", reason="why", at=T0),
        )
        (kept,) = await store.votes(session, approval_id=key)
    assert (kept.vote, kept.reason) == ("reject", "why")

    async def end(status: str) -> bool:
        async with db.session() as session:
            return await store.end_approval(session, approval_id=key, status=status, values={}, unexpired_at=T0)

    assert sorted(await asyncio.gather(end("approved"), end("rejected"), end("approved"))) == [False, False, True]
    async with db.session() as session:
        ended = await store.get_approval(session, approval_id=key)
        assert await store.pending_approvals(session, now=T0) == []
    assert ended is not None and ended.status in ("approved", "rejected")


async def test_an_expired_request_is_not_pending_and_cannot_be_approved(db: Database) -> None:
    async with db.session() as session:
        approval, _ = await store.add_approval(session, approval=request("b" * 32, expires=timedelta(minutes=5)))
        assert [a.id for a in await store.pending_approvals(session, now=T0, org_ids=["kumo-labs"])] == [approval.id]
        assert await store.pending_approvals(session, now=T0, org_ids=["sakura-ai"]) == []
        later = T0 + timedelta(minutes=5)
        assert await store.pending_approvals(session, now=later) == []
        assert [a.id for a in await store.expired_approvals(session, now=later)] == [approval.id]
        approved = await store.end_approval(
            session, approval_id=approval.id or 0, status="approved", values={}, unexpired_at=later
        )
    assert not approved, "an approval never lands after the expiry"
