"""An approval request's life, as a pure state machine: clicks in, a new state and what to say out.

A request is pending until `needed` distinct approvers have approved it (then approved: the change runs), anyone
allowed rejects it (rejected), or `expires_at` passes (expired: nothing runs). The requester never counts; only
allowed approvers' clicks count; a repeated click by one approver counts once; a click on a decided request
changes nothing. The desk (bot.approvals.desk) keeps the same rules against the database across replicas: each
approver's vote is one row, and each ending one conditional update.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum


class Status(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"  # the last approval came: the change runs (once)
    REJECTED = "rejected"
    EXPIRED = "expired"


class Verdict(StrEnum):
    APPROVE = "approve"
    REJECT = "reject"


class Result(StrEnum):
    """What came of one click."""

    SELF = "self"  # the requester: never their own approver
    NOT_APPROVER = "not_approver"
    EXPIRED = "expired"  # this click found it past its expiry: it ends now, nothing runs
    CLOSED = "closed"  # decided already (approved, rejected, expired): nothing changes
    REPEATED = "repeated"  # this approver approved already: counted once
    COUNTED = "counted"  # one more approval; more are needed
    APPROVED = "approved"  # the last approval: the change runs
    REJECTED = "rejected"


@dataclass(frozen=True)
class Request:
    requested_by: str
    needed: int
    expires_at: datetime
    status: Status = Status.PENDING
    approvals: tuple[str, ...] = ()  # distinct approvers, in the order they approved
    rejected_by: str | None = None
    reason: str = ""

    def expired_at(self, now: datetime) -> bool:
        return now >= self.expires_at


def click(
    request: Request, *, user: str, verdict: Verdict, allowed: bool, now: datetime, reason: str = ""
) -> tuple[Request, Result]:
    """One click by `user` (`allowed`: whether they are among the request's approvers) at `now`."""
    if request.status is not Status.PENDING:
        return request, Result.CLOSED
    if request.expired_at(now):
        return replace(request, status=Status.EXPIRED), Result.EXPIRED
    if user == request.requested_by:
        return request, Result.SELF
    if not allowed:
        return request, Result.NOT_APPROVER
    if verdict is Verdict.REJECT:
        return replace(request, status=Status.REJECTED, rejected_by=user, reason=reason), Result.REJECTED
    if user in request.approvals:
        return request, Result.REPEATED
    approvals = (*request.approvals, user)
    if len(approvals) >= request.needed:
        return replace(request, approvals=approvals, status=Status.APPROVED), Result.APPROVED
    return replace(request, approvals=approvals), Result.COUNTED


def sweep(request: Request, *, now: datetime) -> tuple[Request, bool]:
    """The expiry sweep: a pending request past its expiry ends (True: it just expired)."""
    if request.status is Status.PENDING and request.expired_at(now):
        return replace(request, status=Status.EXPIRED), True
    return request, False
