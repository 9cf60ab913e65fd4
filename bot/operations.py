"""Cluster changes from plan to outcome: proposed with a Confirm button, started exactly once, watched.

Launch, scale, reboot, replace, delete and stopping or starting a ParallelCluster compute fleet all go the same
way. Confirming is one conditional UPDATE of the operation's row (planned -> running), so a double click, a
Slack retry or a second replica finds the row already claimed and starts nothing. A plan expires `plan_ttl`
after it was made (its quota check and prices were true then); its Confirm then starts nothing. Nor does the
Confirm of a node plan whose nodes left since it was made (bot.clusters.pending). A running operation is
watched by polling AWS with backoff, its progress message edited in place; running operations are picked up
again when the bot starts, so a restart neither forgets nor repeats them.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol
from zoneinfo import ZoneInfo

from bot.access import AccessPolicy, Action
from bot.approvals.rules import Needed, needed
from bot.audit import AuditLog
from bot.audit_view import CANCEL, CONFIRM  # the buttons' action ids, the audit log's command names
from bot.clusters import requests
from bot.clusters.fleet import Fleet, describe_error, request_id
from bot.clusters.model import Backend, Cluster
from bot.clusters.pending import NODE_KINDS, moved
from bot.clusters.progress import Kind, State, Watch, judge
from bot.clusters.templates import PriceTable
from bot.config import ApprovalsConfig
from bot.iam.denied import AccessProblem
from bot.mrkdwn import escape
from bot.publishing import Publisher, Reply
from storage import crud
from storage.db import Database
from storage.models import Operation, OperationStatus, Outcome, utcnow

log = logging.getLogger(__name__)

STUCK_AFTER = timedelta(minutes=90)  # no visible change for this long: the change is reported as failed
# A deep health check shows no change while it runs (its nodes stay DeepHealthCheckInProgress) and may take hours.
CHECK_STUCK_AFTER = timedelta(hours=6)
PLAN_TTL = timedelta(minutes=30)  # the default of PITCREW_PLAN_TTL_MINUTES


Phase = Literal["started", "finished"]


class NothingStarted(Exception):
    """AWS accepted the call but acted on nothing (every node of a batch failed)."""


# What came of a Confirm or Cancel click; bot.slack.operations renders each. `replaces`: the answer takes the
# plan message's place (its buttons go), else it goes to the clicker alone.


@dataclass(frozen=True)
class PlanUnknown:
    run_again: bool  # say to run the command again (Confirm) or not (Cancel)
    replaces = False


@dataclass(frozen=True)
class NameNotTyped:
    """A delete confirmed other than by typing the cluster's name in its form."""

    replaces = False


@dataclass(frozen=True)
class NotAllowed:
    reason: str
    replaces = False


@dataclass(frozen=True)
class PlanExpired:
    why: str  # "plan expired at HH:MM (N min after it was made)"
    replaces = True


@dataclass(frozen=True)
class OtherChangeRunning:
    running: Operation
    replaces = False


@dataclass(frozen=True)
class AlreadyDecided:
    noun: str
    state: str | None  # what it is now (Confirm says it); None: decided, however (Cancel)
    by: str | None  # who confirmed it, if anyone
    replaces = False


@dataclass(frozen=True)
class StartFailed:
    noun: str
    cluster_name: str
    reason: str  # AWS's refusal (as describe_error says it), or why the stored request could not be sent
    refused: bool = False  # Pitcrew's role lacks the permission (bot.iam.denied): audited as refused
    replaces = True


@dataclass(frozen=True)
class PlanMoved:
    """The plan's nodes (or its cluster) are gone since it was made: nothing was sent, and the plan is withdrawn."""

    noun: str
    why: str  # "`i-0abc` is no longer in `org/cluster` (replaced or removed since the plan was made)"
    replaces = True


@dataclass(frozen=True)
class NeedsApproval:
    """The change meets a rule of `approvals:`: Confirm does not start it; bot.approvals.desk asks for approval."""

    operation: Operation
    needed: Needed
    replaces = False


@dataclass(frozen=True)
class Started:
    operation: Operation
    replaces = True


@dataclass(frozen=True)
class Cancelled:
    operation: Operation
    by: str
    replaces = True


Decision = (
    PlanUnknown
    | NameNotTyped
    | NotAllowed
    | PlanExpired
    | OtherChangeRunning
    | AlreadyDecided
    | StartFailed
    | PlanMoved
    | NeedsApproval
    | Started
    | Cancelled
)

APPROVAL_RUN = "approval_run"  # the audit entry of an approved change starting by itself (bot.audit_view)


class ProgressPresenter(Protocol):
    """How a running change reads (bot.slack.operations.SlackProgress): its progress message, and the lines
    it shows, which are also what the operation's row and the audit log keep of how it ended."""

    def progress(self, operation: Operation, line: str) -> Reply:
        """The progress message, edited in place as the change moves."""
        ...

    def standing(self, operation: Operation, cluster: Cluster | None) -> str:
        """Where the change stands, from the cluster as AWS shows it now."""
        ...

    def cluster_line(self, cluster: Cluster) -> str:
        """The cluster's state in one line (said when the change is done)."""
        ...

    def failed_nodes(self, failed: Sequence[requests.NodeFailure]) -> str:
        """The nodes AWS would not replace or reboot, and why."""
        ...


@dataclass
class Operations:
    db: Database
    fleet: Fleet
    poster: Publisher
    audit: AuditLog
    access: AccessPolicy
    tz: ZoneInfo
    presenter: ProgressPresenter
    clock: Callable[[], datetime] = utcnow
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    first_poll: float = 2.0
    max_poll: float = 30.0
    plan_ttl: timedelta = PLAN_TTL
    on_change: Callable[[str | None], None] | None = None  # told the org when a change finishes (Home)
    # Told when a change has started (AWS accepted it) and when it has finished: the alerts that follow it
    # (bot.alerts.checks: a deep health check's result in the alerts of its nodes).
    on_progress: Callable[[Operation, Phase], Awaitable[None]] | None = None
    # The program file's `approvals:` rules and the prices its cost rule reads (bot.approvals.rules): a change
    # that meets one is not started by Confirm, only once approved (bot.approvals.desk).
    approvals: ApprovalsConfig | None = None
    prices: PriceTable | None = None
    _watchers: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    _plan_locks: dict[tuple[str, str, str], asyncio.Lock] = field(default_factory=dict)

    async def propose(
        self,
        *,
        kind: Kind,
        org_id: str,
        backend: Backend,
        cluster_name: str,
        request: dict[str, Any],
        user_id: str,
        channel_id: str,
        template: str = "",
        operation_id: str | None = None,
    ) -> Operation:
        """Store a planned change; nothing is asked of AWS until it is confirmed. `operation_id`: the id to
        store it under (derived from the request by callers that must propose once per request), else new."""
        now = self.clock()
        operation = Operation(
            id=operation_id or uuid.uuid4().hex,
            kind=kind.value,
            org_id=org_id,
            backend=backend.value,
            cluster_name=cluster_name,
            template=template,
            request=request,
            requested_by=user_id,
            requested_at=now,
            channel_id=channel_id,
            status=OperationStatus.PLANNED.value,
            updated_at=now,
        )
        async with self.db.session() as session:
            return await crud.add_operation(session, operation=operation)

    async def busy(self, *, org_id: str, backend: Backend, cluster_name: str) -> Operation | None:
        """The change already running on this cluster, if any: one at a time, as AWS itself insists."""
        async with self.db.session() as session:
            return await crud.running_operation(
                session, org_id=org_id, backend=backend.value, cluster_name=cluster_name
            )

    async def get(self, operation_id: str) -> Operation | None:
        async with self.db.session() as session:
            return await crud.get_operation(session, operation_id=operation_id)

    async def pending(self, *, org_id: str, backend: Backend, cluster_name: str) -> list[Operation]:
        """The cluster's plans that wait for Confirm (neither decided nor expired), oldest first."""
        async with self.db.session() as session:
            return list(
                await crud.planned_operations(
                    session,
                    org_id=org_id,
                    backend=backend.value,
                    cluster_name=cluster_name,
                    since=self.clock() - self.plan_ttl,
                )
            )

    def expires_at(self, operation: Operation) -> datetime:
        return operation.requested_at + self.plan_ttl

    def plan_lock(self, *, org_id: str, backend: Backend, cluster_name: str) -> asyncio.Lock:
        """Held while a plan of the cluster is checked against the pending ones and stored: two clicks at once
        on this replica make one plan (bot.clusters.changes settles a race between replicas after storing)."""
        return self._plan_locks.setdefault((org_id, backend.value, cluster_name), asyncio.Lock())

    async def withdraw(self, operation_id: str, *, reason: str) -> bool:
        """Cancel a plan nobody has decided on (one that lost a race with another for the same thing)."""
        return await self._claim(operation_id, OperationStatus.CANCELLED, detail=reason[:2000])

    async def _claim(self, operation_id: str, to: OperationStatus, **values: object) -> bool:
        async with self.db.session() as session:
            return await crud.claim_operation(
                session,
                operation_id=operation_id,
                from_status=OperationStatus.PLANNED.value,
                to_status=to.value,
                values={"updated_at": self.clock(), **values},
            )

    async def _set(self, operation_id: str, **values: object) -> None:
        async with self.db.session() as session:
            await crud.update_operation(
                session, operation_id=operation_id, values={"updated_at": self.clock(), **values}
            )

    def record(self, operation: Operation, *, user_id: str, command: str, outcome: Outcome, detail: str) -> None:
        """An audit entry about this operation (the handlers' modal and refusals use it too)."""
        self.audit.record(
            at=self.clock(),
            user_id=user_id,
            channel_id=operation.channel_id,
            command=command,
            text=requests.operation_summary(operation),
            outcome=outcome,
            org_id=operation.org_id,
            detail=detail,
        )

    def may_decide(self, operation: Operation, user_id: str) -> str | None:
        """Why `user_id` may not confirm or cancel this operation, or None."""
        if user_id != operation.requested_by and not self.access.is_admin(user_id):
            noun = Kind(operation.kind).noun
            return f"Only <@{operation.requested_by}>, who asked for it, or a program admin can decide on this {noun}."
        decision = self.access.decide(user_id=user_id, action=Action.OPERATE, org_id=operation.org_id)
        return None if decision.allowed else decision.reason

    def needs_approval(self, operation: Operation) -> Needed | None:
        """The rule of `approvals:` this planned change meets, or None (bot.approvals.rules, on the stored request,
        so the plan's button and this gate never disagree)."""
        if self.approvals is None or self.prices is None:
            return None
        return needed(self.approvals, kind=operation.kind, request=operation.request or {}, prices=self.prices)

    async def confirm(
        self,
        operation_id: str,
        *,
        user_id: str,
        name_typed: bool = False,
        thread_ts: str | None = None,
        approved_by: Sequence[str] = (),
    ) -> Decision:
        """What came of the click (bot.slack.operations renders it); `replaces` once it started.

        `name_typed`: confirmed from the delete modal, where the cluster's name was typed; a delete is
        started in no other way, whatever a button payload says. `thread_ts`: the thread the plan is in (a
        plan asked for by @mention is in the mention's thread): its progress goes there too. `approved_by`: the
        approvers of a change that needed approval (bot.approvals.desk, on the last approval; `user_id` is the
        last of them): it runs with its requester's rights, and the approval's own expiry, not the plan's,
        decided whether it was in time. Without it a change that needs approval is not started (NeedsApproval)."""
        operation = await self.get(operation_id)
        if operation is None:
            return PlanUnknown(run_again=True)
        noun = Kind(operation.kind).noun
        if operation.kind == Kind.DELETE.value and not name_typed:
            return NameNotTyped()
        refusal = self.may_decide(operation, operation.requested_by if approved_by else user_id)
        if refusal:
            self.record(operation, user_id=user_id, command=CONFIRM, outcome=Outcome.REFUSED, detail=refusal)
            return NotAllowed(refusal)
        if not approved_by:
            expired = self.expired(operation, user_id=user_id, command=CONFIRM)
            if expired:
                return expired
            need = self.needs_approval(operation) if operation.status == OperationStatus.PLANNED.value else None
            if need is not None:
                return NeedsApproval(operation, need)
        if operation.status == OperationStatus.PLANNED.value and operation.kind != Kind.LAUNCH.value:
            other = await self.busy(
                org_id=operation.org_id, backend=Backend(operation.backend), cluster_name=operation.cluster_name
            )
            if other is not None:
                return OtherChangeRunning(other)
            gone = await self._moved(operation)
            if gone and await self._claim(
                operation.id, OperationStatus.CANCELLED, confirmed_by=user_id, detail=f"not sent: {gone}"[:2000]
            ):
                # Sending it would ask AWS to act on instances that are not there: it would refuse, and the
                # plan would be kept as a failed change. Refused here instead, and the plan's buttons go.
                detail = f"not sent: {gone}"
                self.record(operation, user_id=user_id, command=CONFIRM, outcome=Outcome.REFUSED, detail=detail)
                return PlanMoved(noun=noun, why=gone)
        if not await self._claim(
            operation.id, OperationStatus.RUNNING, confirmed_by=user_id, confirmed_at=self.clock()
        ):
            current = await self.get(operation.id)
            if current is not None and current.status == OperationStatus.PLANNED.value:  # lost to another change
                other = await self.busy(
                    org_id=operation.org_id, backend=Backend(operation.backend), cluster_name=operation.cluster_name
                )
                if other is not None:
                    return OtherChangeRunning(other)
            state = current.status if current else "gone"
            return AlreadyDecided(noun=noun, state=state, by=current.confirmed_by if current else None)
        if approved_by:
            approvers = ", ".join(f"<@{approver}>" for approver in approved_by)
            self.record(
                operation,
                user_id=operation.requested_by,
                command=APPROVAL_RUN,
                outcome=Outcome.ALLOWED,
                detail=f"approved by {approvers}; started",
            )
        else:
            self.record(operation, user_id=user_id, command=CONFIRM, outcome=Outcome.ALLOWED, detail="confirmed")
        operation.confirmed_by = user_id
        operation.status = OperationStatus.RUNNING.value
        ts = await self._post_progress(operation, user_id, thread_ts)
        operation.message_ts = ts
        await self._set(operation.id, message_ts=ts, channel_id=operation.channel_id)
        try:
            detail = await self._start(operation)
        except requests.BadRequest as bad:  # AWS was not asked: say so, not "AWS refused"
            reason = f"its stored request cannot be read: {bad}"
            await self._finish(operation, OperationStatus.FAILED, reason)
            return StartFailed(noun=noun, cluster_name=operation.cluster_name, reason=reason)
        except AccessProblem as problem:  # Pitcrew's role may not: refused, and nothing was changed
            await self._finish(operation, OperationStatus.FAILED, str(problem), refused=True)
            return StartFailed(noun=noun, cluster_name=operation.cluster_name, reason=str(problem), refused=True)
        except Exception as error:
            reason = describe_error(error) if not isinstance(error, NothingStarted) else str(error)
            rid = request_id(error)
            await self._finish(operation, OperationStatus.FAILED, f"AWS refused: {reason}", request_id=rid)
            return StartFailed(noun=noun, cluster_name=operation.cluster_name, reason=reason)
        operation.started_at = self.clock()  # AWS answered: from here a resumed watch may judge it
        operation.detail = detail or operation.detail
        await self._set(operation.id, started_at=operation.started_at, detail=operation.detail[:2000])
        self._watch(operation)
        await self._tell(operation, "started")
        return Started(operation)

    async def _moved(self, operation: Operation) -> str | None:
        """Why a node plan can no longer be sent as it was made (bot.clusters.pending.moved), read from the
        cluster as AWS shows it now; None for other plans, and when the cluster cannot be read (AWS then
        answers the request for itself)."""
        if Kind(operation.kind) not in NODE_KINDS:
            return None
        backend = Backend(operation.backend)
        try:
            request = requests.from_json(Kind(operation.kind), backend, operation.request)
            cluster = await self.fleet.get(operation.org_id, backend, operation.cluster_name)
        except requests.BadRequest:
            return None  # the start says it cannot be read
        except Exception as error:
            log.warning("reading %s before confirming: %s", operation.cluster_name, describe_error(error))
            return None
        if not isinstance(request, requests.NodeRequest):
            return None
        return moved(request, cluster, ref=f"{operation.org_id}/{operation.cluster_name}")

    def expired(self, operation: Operation, *, user_id: str, command: str) -> PlanExpired | None:
        """If the plan expired: the answer (audited as refused), which replaces the plan so its buttons go and
        nobody confirms yesterday's quota and prices later either. Asked by Confirm and by Delete… (a delete
        plan's Confirm), so no form opens for a plan that can no longer be confirmed."""
        expired = self._expired(operation)
        if not expired:
            return None
        self.record(operation, user_id=user_id, command=command, outcome=Outcome.REFUSED, detail=expired)
        return PlanExpired(expired)

    def _expired(self, operation: Operation) -> str | None:
        """Why a plan may no longer be confirmed ("plan expired at HH:MM (N min after it was made)"), or None."""
        if operation.status != OperationStatus.PLANNED.value:
            return None  # decided already: the claim below says how
        expires_at = operation.requested_at + self.plan_ttl
        now = self.clock()
        if now < expires_at:
            return None
        local = expires_at.astimezone(self.tz)
        shown = f"{local:%H:%M}" if local.date() == now.astimezone(self.tz).date() else f"{local:%Y-%m-%d %H:%M}"
        minutes = int(self.plan_ttl.total_seconds() // 60)
        return f"plan expired at {shown} ({minutes} min after it was made)"

    async def _post_progress(self, operation: Operation, user_id: str, thread_ts: str | None = None) -> str | None:
        """Post the progress message in the plan's channel or, where Pitcrew may not post (a private channel
        it is not in, say), in the confirmer's DM. Slack failing never leaves a claimed change unstarted."""
        first = self.presenter.progress(operation, "Asking AWS…")
        try:
            return await self.poster.post(channel=operation.channel_id, reply=first, thread_ts=thread_ts)
        except Exception:
            log.warning("could not post progress of %s in %s; trying a DM", operation.id, operation.channel_id)
        try:
            dm = await self.poster.open_dm(user_id)
            ts = await self.poster.post(channel=dm, reply=first)
        except Exception:
            log.exception("could not post the progress message of %s", operation.id)
            return None
        operation.channel_id = dm
        return ts

    async def _start(self, operation: Operation) -> str:
        """Ask AWS for the change; the request ids (for the audit) or "". Raises what AWS raised."""
        kind, org_id, name = Kind(operation.kind), operation.org_id, operation.cluster_name
        backend = Backend(operation.backend)
        request = requests.from_json(kind, backend, operation.request)
        if isinstance(request, requests.LaunchRequest):
            await self.fleet.launch(org_id, backend, request)
            return ""
        if isinstance(request, requests.ScaleRequest):
            rid = await self.fleet.resize(org_id, backend, name, group=request.group, count=request.count)
            return f"request {rid}" if rid else ""
        if isinstance(request, requests.DeleteRequest):
            rid = await self.fleet.delete(org_id, backend, name)
            return f"request {rid}" if rid else ""
        if isinstance(request, requests.StopFleetRequest):
            await self.fleet.stop_fleet(org_id, backend, name)
            return ""
        if isinstance(request, requests.StartFleetRequest):
            await self.fleet.start_fleet(org_id, backend, name)
            return ""
        if isinstance(request, requests.CheckRequest):  # all or nothing: AWS refuses the call or takes every node
            nodes = tuple(zip(request.node_groups, request.node_ids, strict=True))
            rid = await self.fleet.health_check(org_id, name, checks=request.checks, nodes=nodes)
            operation.request = requests.to_json(replace(request, successful=request.node_ids, failed=()))
            await self._set(operation.id, request=operation.request)
            return f"request {rid}" if rid else ""
        result = await self.fleet.node_batch(
            org_id, backend, name, replace=kind is Kind.REPLACE, node_ids=request.node_ids
        )
        answered = replace(request, successful=result.successful, failed=result.failed)
        operation.request = requests.to_json(answered)
        await self._set(operation.id, request=operation.request)
        rids = ", ".join(result.request_ids)
        if not result.successful:
            raise NothingStarted(self.presenter.failed_nodes(result.failed) + f" (requests {rids})")
        return f"requests {rids}" if rids else ""

    async def cancel(self, operation_id: str, *, user_id: str) -> Decision:
        operation = await self.get(operation_id)
        if operation is None:
            return PlanUnknown(run_again=False)
        refusal = self.may_decide(operation, user_id)
        if refusal:
            self.record(operation, user_id=user_id, command=CANCEL, outcome=Outcome.REFUSED, detail=refusal)
            return NotAllowed(refusal)
        if not await self._claim(operation.id, OperationStatus.CANCELLED, confirmed_by=user_id):
            return AlreadyDecided(noun=Kind(operation.kind).noun, state=None, by=None)
        self.record(operation, user_id=user_id, command=CANCEL, outcome=Outcome.DONE, detail="cancelled")
        return Cancelled(operation, by=user_id)

    def _watch(self, operation: Operation) -> None:
        if operation.id not in self._watchers:
            task = asyncio.get_running_loop().create_task(self._follow(operation))
            self._watchers[operation.id] = task
            task.add_done_callback(lambda _: self._watchers.pop(operation.id, None))

    async def _follow(self, operation: Operation) -> None:
        delay, last, watch = self.first_poll, "", Watch()
        kind, backend = Kind(operation.kind), Backend(operation.backend)
        if operation.started_at is None:
            # The bot stopped between claiming it and AWS's answer: whether AWS acted is unknown, so it is not
            # called done (an unchanged cluster would look done) nor started again.
            reason = "the bot stopped while asking AWS; whether the change was made is unknown: check /cluster status"
            await self._finish(operation, OperationStatus.FAILED, reason)
            return
        try:
            request = requests.from_json(kind, backend, operation.request)
        except requests.BadRequest as bad:
            await self._finish(operation, OperationStatus.FAILED, f"its stored request cannot be read: {bad}")
            return
        moved_at = self.clock()
        while True:
            try:
                cluster = await self.fleet.get(operation.org_id, backend, operation.cluster_name)
            except Exception as error:  # AWS hiccups: keep watching, say nothing new
                log.warning("watching %s: %s", operation.cluster_name, describe_error(error))
            else:
                verdict = judge(kind, request, cluster, watch)
                if verdict.state is State.DONE:
                    line = " · ".join(
                        filter(None, [self.presenter.cluster_line(cluster) if cluster else "", verdict.reason])
                    )
                    await self._finish(operation, OperationStatus.DONE, line)
                    return
                if verdict.state is State.FAILED:
                    await self._finish(operation, OperationStatus.FAILED, verdict.reason)
                    return
                line = self.presenter.standing(operation, cluster)
                if line != last:
                    last, moved_at = line, self.clock()
                    await self._show(operation, line)
                elif self.clock() - moved_at > (stuck := CHECK_STUCK_AFTER if kind is Kind.CHECK else STUCK_AFTER):
                    # e.g. a scale AWS cannot fill (no capacity): stop holding the cluster's one-change lock.
                    minutes = int(stuck.total_seconds() // 60)
                    reason = f"no progress for {minutes} minutes; AWS shows: {line}"
                    await self._finish(operation, OperationStatus.FAILED, reason)
                    return
            await self.sleep(delay)
            delay = min(delay * 2, self.max_poll)

    async def _show(self, operation: Operation, line: str) -> None:
        """Edit the progress message; Slack failing (message deleted, channel archived) never stops the watch."""
        if not operation.message_ts:
            return
        try:
            await self.poster.update(
                channel=operation.channel_id, ts=operation.message_ts, reply=self.presenter.progress(operation, line)
            )
        except Exception:
            log.warning("could not edit the progress message of %s", operation.id, exc_info=True)

    async def _finish(
        self, operation: Operation, status: OperationStatus, detail: str, *, request_id: str = "", refused: bool = False
    ) -> None:
        await self._set(operation.id, status=status.value, detail=detail[:2000])
        operation.status = status.value
        done = status is OperationStatus.DONE
        started = f"; {operation.detail}" if operation.detail else ""
        rid = f" (request {request_id})" if request_id else ""
        # Recorded before the message says so: whoever reads "Done" can find it in the audit log.
        self.record(
            operation,
            user_id=operation.confirmed_by or operation.requested_by,
            command=operation.kind,
            outcome=Outcome.DONE if done else Outcome.REFUSED if refused else Outcome.FAILED,
            detail=f"{detail}{rid}{started}",
        )
        shown = "Refused" if refused else "Failed"
        await self._show(operation, f"Done: {detail}" if done else f"{shown}: {escape(detail)}")
        if self.on_change is not None:
            self.on_change(operation.org_id)
        await self._tell(operation, "finished")

    async def _tell(self, operation: Operation, phase: Phase) -> None:
        """Tell `on_progress`; its failing never stops a change or its watch."""
        if self.on_progress is None:
            return
        try:
            await self.on_progress(operation, phase)
        except Exception:
            log.exception("telling the %s of %s failed", phase, operation.id)

    async def resume(self) -> int:
        """Watch again what was running when the bot stopped; never start it again."""
        async with self.db.session() as session:
            running = await crud.operations_with_status(session, status=OperationStatus.RUNNING.value)
        for operation in running:
            self._watch(operation)
        return len(running)

    async def close(self) -> None:
        """Stop watching (running operations are resumed on the next start)."""
        for task in list(self._watchers.values()):
            task.cancel()
        await asyncio.gather(*self._watchers.values(), return_exceptions=True)
