"""The approval desk: a change that meets a rule of `approvals:` waits here for its approvers, and runs by itself on
the last approval (issue 24).

Confirm on such a change (bot.operations answers NeedsApproval) stores one approval request per operation and
posts it in the plan's channel. Each click is judged by the pure state machine (bot.approvals.state) and kept with
the same rules against the database, across replicas: each approver's vote is one row (a repeated click counts
once), and a request ends in one conditional UPDATE from pending, so only one replica runs the change, through
the same planned -> running claim as Confirm. A vote is stored before it is counted, so of two last approvals
landing at once the later one always sees both. A rejected or expired request withdraws its plan (planned ->
cancelled): nothing can start it afterwards.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from bot.access import AccessPolicy
from bot.approvals.rules import may_approve
from bot.approvals.state import Request, Result, Status, Verdict, click
from bot.audit import AuditLog
from bot.operations import Decision, NeedsApproval, Operations, PlanUnknown, Started
from bot.publishing import Publisher, Reply
from storage import approvals as store
from storage.db import Database
from storage.models import Approval, ApprovalVote, Operation, Outcome, utcnow

log = logging.getLogger(__name__)

# The audit log's names for the steps (bot.audit_view); a button's own action id where a click is the step.
REQUEST = "approval_request"
APPROVE = "approval_approve"
REJECT = "approval_reject"
EXPIRE = "approval_expire"
MAX_APPROVAL_ID = 2**31 - 1  # an id from a button payload above this is no row's


class ApprovalPresenter(Protocol):
    """How a request reads (bot.slack.approvals.SlackApprovals): its message, in whatever state it is."""

    def request(
        self, approval: Approval, operation: Operation, approved_by: Sequence[str], run: Decision | None = None
    ) -> Reply:
        """`run`: what came of starting an approved change, said when it did not start."""
        ...


@dataclass(frozen=True)
class Requested:
    """Approval was asked (`first`), or had been already (a retry, a double click): the plan's buttons go."""

    approval: Approval
    operation: Operation
    first: bool
    replaces = True


@dataclass(frozen=True)
class Unknown:
    """The click names no request (a forged, stale or garbled payload)."""


@dataclass(frozen=True)
class Refused:
    reason: str


@dataclass(frozen=True)
class Closed:
    """Decided already: nothing changes."""

    approval: Approval


@dataclass(frozen=True)
class Expired:
    approval: Approval


@dataclass(frozen=True)
class Repeated:
    approval: Approval


@dataclass(frozen=True)
class Counted:
    approval: Approval
    approved_by: tuple[str, ...]


@dataclass(frozen=True)
class Rejected:
    approval: Approval


@dataclass(frozen=True)
class Approved:
    approval: Approval
    approved_by: tuple[str, ...]
    run: Decision  # what came of starting the change (Started, or why it could not start)


Vote = Unknown | Refused | Closed | Expired | Repeated | Counted | Rejected | Approved


def approval_id(value: object) -> int | None:
    """A request's id from a button's value or a modal's metadata (untrusted): a whole number in range, or None."""
    text = str(value or "").strip()
    if not text.isascii() or not text.isdigit() or len(text) > 10:
        return None
    number = int(text)
    return number if 0 < number <= MAX_APPROVAL_ID else None


def approvers_words(approvers: str, org_id: str) -> str:
    """Who may approve, in words."""
    if approvers == "operators":
        return f"an operator of `{org_id}` or a program admin"
    return "a program admin"


@dataclass(kw_only=True)
class ApprovalDesk:
    db: Database
    operations: Operations
    access: AccessPolicy
    audit: AuditLog
    poster: Publisher
    presenter: ApprovalPresenter
    clock: Callable[[], datetime] = utcnow
    on_change: Callable[[str | None], None] | None = None  # told the org when its pending approvals change (Home)

    # ------------------------------------------------------------------ who

    def may_approve(self, approval: Approval, user_id: str) -> bool:
        """Among the request's approvers (the requester is refused apart, by the state machine)."""
        role = self.access.role(user_id=user_id, org_id=approval.org_id)
        return may_approve(approvers=approval.approvers, admin=self.access.is_admin(user_id), role=role)

    def may_see(self, approval: Approval, user_id: str) -> bool:
        return approval.org_id in self.access.visible_orgs(user_id)

    # ------------------------------------------------------------------ asking

    async def confirm(
        self,
        operation_id: str,
        *,
        user_id: str,
        name_typed: bool = False,
        thread_ts: str | None = None,
    ) -> Decision | Requested:
        """Confirm, in front of bot.operations: a change that needs approval is not started but asked for."""
        decision = await self.operations.confirm(
            operation_id, user_id=user_id, name_typed=name_typed, thread_ts=thread_ts
        )
        if not isinstance(decision, NeedsApproval):
            return decision
        return await self.request(decision, user_id=user_id, thread_ts=thread_ts)

    async def request(self, need: NeedsApproval, *, user_id: str, thread_ts: str | None) -> Requested | Decision:
        """Store the request (once per operation) and post it where the plan is; audited as requested."""
        operation, rules = need.operation, self.operations.approvals
        if rules is None:  # the rules went between Confirm and here: nothing to wait for
            return PlanUnknown(run_again=True)
        now = self.clock()
        row = Approval(
            operation_id=operation.id,
            org_id=operation.org_id,
            requested_by=operation.requested_by,
            requested_at=now,
            rule=need.needed.rule,
            why=need.needed.why[:400],
            approvers=rules.approvers,
            needed=rules.count,
            expires_at=now + timedelta(minutes=rules.ttl_minutes),
            status=Status.PENDING.value,
            channel_id=operation.channel_id,
            thread_ts=thread_ts,
        )
        async with self.db.session() as session:
            approval, first = await store.add_approval(session, approval=row)
        if not first:
            return Requested(approval, operation, first=False)
        who = approvers_words(approval.approvers, approval.org_id)
        self.operations.record(
            operation,
            user_id=user_id,
            command=REQUEST,
            outcome=Outcome.ALLOWED,
            detail=f"needs approval: {approval.why}; {approval.needed} of {who}, until "
            f"{approval.expires_at:%Y-%m-%d %H:%M} UTC",
        )
        reply = self.presenter.request(approval, operation, ())
        try:
            ts = await self.poster.post(channel=operation.channel_id, reply=reply, thread_ts=thread_ts)
        except Exception:  # Home and /cluster approvals still show it; the approvers can act from there
            log.warning("could not post the approval request of %s in %s", operation.id, operation.channel_id)
            ts = None
        async with self.db.session() as session:
            await store.set_message(
                session, approval_id=approval.id or 0, channel_id=operation.channel_id, message_ts=ts
            )
        approval.message_ts = ts
        self._changed(approval)
        return Requested(approval, operation, first=True)

    # ------------------------------------------------------------------ votes

    async def vote(self, raw_id: object, *, user_id: str, verdict: Verdict, reason: str = "") -> Vote:
        """One click of Approve, or one submitted Reject (with its reason), by `user_id`."""
        key = approval_id(raw_id)
        if key is None:
            return Unknown()
        async with self.db.session() as session:
            approval = await store.get_approval(session, approval_id=key)
            votes = list(await store.votes(session, approval_id=key)) if approval else []
        operation = await self.operations.get(approval.operation_id) if approval else None
        if approval is None or operation is None:
            return Unknown()
        now = self.clock()
        _, result = click(
            self._domain(approval, votes),
            user=user_id,
            verdict=verdict,
            allowed=self.may_approve(approval, user_id),
            now=now,
            reason=reason,
        )
        command = APPROVE if verdict is Verdict.APPROVE else REJECT
        if result is Result.CLOSED:
            return Closed(approval)
        if result is Result.EXPIRED:
            await self._expire(approval, operation)
            return Expired(await self._reread(approval))
        if result is Result.SELF:
            said = "You asked for this change: someone else must approve it (nobody approves their own change)."
            self.operations.record(operation, user_id=user_id, command=command, outcome=Outcome.REFUSED, detail=said)
            return Refused(said)
        if result is Result.NOT_APPROVER:
            said = f"Only {approvers_words(approval.approvers, approval.org_id)} can approve or reject this change."
            self.operations.record(operation, user_id=user_id, command=command, outcome=Outcome.REFUSED, detail=said)
            return Refused(said)
        if result is Result.REPEATED:
            return Repeated(approval)
        if result is Result.REJECTED:
            return await self._reject(approval, operation, user_id=user_id, reason=reason, now=now)
        return await self._approve(approval, operation, user_id=user_id, now=now)

    async def open_reject(self, raw_id: object, *, user_id: str) -> tuple[Approval, Operation] | Vote:
        """Before the Reject form opens: the request and its change when `user_id` may reject it now, else what
        their click comes to (refused, decided, expired), as a submitted Reject would say it."""
        key = approval_id(raw_id)
        if key is None:
            return Unknown()
        async with self.db.session() as session:
            approval = await store.get_approval(session, approval_id=key)
        operation = await self.operations.get(approval.operation_id) if approval else None
        if approval is None or operation is None:
            return Unknown()
        now = self.clock()
        status = Status(approval.status)
        if status is Status.PENDING and approval.expires_at <= now:
            await self._expire(approval, operation)
            return Expired(await self._reread(approval))
        if status is not Status.PENDING:
            return Closed(approval)
        if user_id == approval.requested_by:
            return Refused("You asked for this change; to drop it, press Cancel on its plan or let it expire.")
        if not self.may_approve(approval, user_id):
            return Refused(f"Only {approvers_words(approval.approvers, approval.org_id)} can approve or reject this.")
        return approval, operation

    async def _approve(self, approval: Approval, operation: Operation, *, user_id: str, now: datetime) -> Vote:
        key = approval.id or 0
        vote = ApprovalVote(approval_id=key, user_id=user_id, vote=Verdict.APPROVE.value, at=now)
        async with self.db.session() as session:
            if not await store.add_vote(session, vote=vote):
                return Repeated(approval)
            # Counted after it is stored: of two last approvals at once, the later sees both.
            approved_by = self._approvers(approval, await store.votes(session, approval_id=key))
        if len(approved_by) < approval.needed:
            self.operations.record(
                operation,
                user_id=user_id,
                command=APPROVE,
                outcome=Outcome.ALLOWED,
                detail=f"approved ({len(approved_by)} of {approval.needed})",
            )
            current = await self._reread(approval)
            await self._show(current, operation, approved_by)
            self._changed(current)
            return Counted(current, approved_by)
        async with self.db.session() as session:
            won = await store.end_approval(
                session,
                approval_id=key,
                status=Status.APPROVED.value,
                values={"decided_by": user_id, "decided_at": now},
                unexpired_at=now,
            )
        if not won:  # another replica ended it (approved, rejected) or it expired in between
            current = await self._reread(approval)
            if current.status == Status.PENDING.value:
                await self._expire(current, operation)
                return Expired(await self._reread(current))
            return Counted(current, approved_by)
        self.operations.record(
            operation,
            user_id=user_id,
            command=APPROVE,
            outcome=Outcome.ALLOWED,
            detail=f"approved ({len(approved_by)} of {approval.needed}): the change runs",
        )
        current = await self._reread(approval)
        await self._show(current, operation, approved_by)
        self._changed(current)
        run = await self.operations.confirm(
            operation.id,
            user_id=user_id,
            name_typed=True,  # a delete's name was typed when its approval was asked
            thread_ts=approval.thread_ts,
            approved_by=approved_by,
        )
        if not isinstance(run, Started):  # e.g. cancelled meanwhile, or the cluster busy: said on the request
            await self._show(current, operation, approved_by, run)
        return Approved(current, approved_by, run)

    async def _reject(
        self, approval: Approval, operation: Operation, *, user_id: str, reason: str, now: datetime
    ) -> Vote:
        key = approval.id or 0
        async with self.db.session() as session:
            won = await store.end_approval(
                session,
                approval_id=key,
                status=Status.REJECTED.value,
                values={"decided_by": user_id, "decided_at": now, "reason": reason[:1000]},
                unexpired_at=now,
            )
            if won:
                vote = ApprovalVote(
                    approval_id=key, user_id=user_id, vote=Verdict.REJECT.value, reason=reason[:1000], at=now
                )
                await store.set_vote(session, vote=vote)
        if not won:
            current = await self._reread(approval)
            if current.status == Status.PENDING.value:
                await self._expire(current, operation)
                return Expired(await self._reread(current))
            return Closed(current)
        await self.operations.withdraw(operation.id, reason=f"approval rejected by {user_id}: {reason}")
        self.operations.record(
            operation, user_id=user_id, command=REJECT, outcome=Outcome.DONE, detail=f"rejected: {reason}"
        )
        current = await self._reread(approval)
        await self._show(current, operation, await self._approved_by(current))
        self._changed(current)
        return Rejected(current)

    # ------------------------------------------------------------------ expiry

    async def sweep(self) -> int:
        """End every pending request past its expiry (nothing runs); the number ended by this call."""
        now = self.clock()
        async with self.db.session() as session:
            due = list(await store.expired_approvals(session, now=now))
        ended = 0
        for approval in due:
            operation = await self.operations.get(approval.operation_id)
            if operation is not None and await self._expire(approval, operation):
                ended += 1
        return ended

    async def _expire(self, approval: Approval, operation: Operation) -> bool:
        """End a request past its expiry, once across replicas; its plan is withdrawn so nothing starts it."""
        now = self.clock()
        async with self.db.session() as session:
            won = await store.end_approval(
                session, approval_id=approval.id or 0, status=Status.EXPIRED.value, values={"decided_at": now}
            )
        if not won:
            return False
        await self.operations.withdraw(operation.id, reason="approval expired")
        self.operations.record(
            operation,
            user_id=approval.requested_by,
            command=EXPIRE,
            outcome=Outcome.REFUSED,
            detail=f"expired at {approval.expires_at:%Y-%m-%d %H:%M} UTC without enough approvals; nothing ran",
        )
        current = await self._reread(approval)
        await self._show(current, operation, await self._approved_by(current))
        self._changed(current)
        return True

    # ------------------------------------------------------------------ reading

    async def pending(self, *, user_id: str, approvable_only: bool = False) -> list[tuple[Approval, Operation]]:
        """Requests waiting now in the orgs `user_id` may see (`approvable_only`: those they may approve, not
        their own), oldest first, each with its change."""
        orgs = self.access.visible_orgs(user_id)
        if not orgs:
            return []
        async with self.db.session() as session:
            rows = list(await store.pending_approvals(session, now=self.clock(), org_ids=orgs))
        found = []
        for approval in rows:
            if approvable_only and (approval.requested_by == user_id or not self.may_approve(approval, user_id)):
                continue
            operation = await self.operations.get(approval.operation_id)
            if operation is not None:
                found.append((approval, operation))
        return found

    async def approved_by(self, approval: Approval) -> tuple[str, ...]:
        return await self._approved_by(approval)

    async def _approved_by(self, approval: Approval) -> tuple[str, ...]:
        async with self.db.session() as session:
            return self._approvers(approval, await store.votes(session, approval_id=approval.id or 0))

    @staticmethod
    def _approvers(approval: Approval, votes: Sequence[ApprovalVote]) -> tuple[str, ...]:
        return tuple(
            dict.fromkeys(
                v.user_id for v in votes if v.vote == Verdict.APPROVE.value and v.user_id != approval.requested_by
            )
        )

    def _domain(self, approval: Approval, votes: Sequence[ApprovalVote]) -> Request:
        return Request(
            requested_by=approval.requested_by,
            needed=approval.needed,
            expires_at=approval.expires_at,
            status=Status(approval.status),
            approvals=self._approvers(approval, votes),
            rejected_by=approval.decided_by if approval.status == Status.REJECTED.value else None,
            reason=approval.reason,
        )

    async def _reread(self, approval: Approval) -> Approval:
        async with self.db.session() as session:
            current = await store.get_approval(session, approval_id=approval.id or 0)
        return current or approval

    async def _show(
        self, approval: Approval, operation: Operation, approved_by: Sequence[str], run: Decision | None = None
    ) -> None:
        """Edit the request message to say where it stands; Slack failing never undoes a vote."""
        if not approval.message_ts or not approval.channel_id:
            return
        try:
            await self.poster.update(
                channel=approval.channel_id,
                ts=approval.message_ts,
                reply=self.presenter.request(approval, operation, approved_by, run),
            )
        except Exception:
            log.warning("could not edit the approval request %s", approval.id, exc_info=True)

    def _changed(self, approval: Approval) -> None:
        if self.on_change is not None:
            self.on_change(approval.org_id)
