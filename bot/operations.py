"""Cluster changes from plan to outcome: proposed with a Confirm button, started exactly once, watched.

Confirming is one conditional UPDATE of the operation's row (planned -> running), so a double click, a
Slack retry or a second replica finds the row already claimed and starts nothing. A running operation is
watched by polling AWS with backoff, its progress message edited in place; running operations are picked
up again when the bot starts, so a restart neither forgets nor repeats them.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from zoneinfo import ZoneInfo

from bot.access import AccessPolicy, Action
from bot.audit import AuditLog
from bot.clusters.fleet import Fleet, describe_error
from bot.clusters.model import Backend, Cluster
from bot.clusters.plans import LaunchPlan
from bot.slack import blocks
from bot.slack.blocks import Reply, escape
from bot.slack.poster import Poster
from storage import crud
from storage.db import Database
from storage.models import Operation, OperationStatus, Outcome, utcnow

log = logging.getLogger(__name__)

CONFIRM_LAUNCH = "launch_confirm"
CANCEL_LAUNCH = "launch_cancel"
DONE_STATUSES = {"InService", "CREATE_COMPLETE"}
FAILED_STATUSES = {"Failed", "CREATE_FAILED", "DELETE_COMPLETE"}
MISSING_POLLS = 10  # a created cluster not seen after this many polls is reported as lost


@dataclass
class Operations:
    db: Database
    fleet: Fleet
    poster: Poster
    audit: AuditLog
    access: AccessPolicy
    tz: ZoneInfo
    clock: Callable[[], datetime] = utcnow
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    first_poll: float = 2.0
    max_poll: float = 30.0
    _watchers: dict[str, asyncio.Task[None]] = field(default_factory=dict)

    async def propose_launch(self, plan: LaunchPlan, *, user_id: str, channel_id: str) -> Operation:
        now = self.clock()
        request = plan.request or {"clusterName": plan.name, "clusterConfiguration": plan.cluster_yaml}
        operation = Operation(
            id=uuid.uuid4().hex,
            kind="launch",
            org_id=plan.org.id,
            backend=plan.template.backend,
            cluster_name=plan.name,
            template=plan.template.key,
            request=request,
            requested_by=user_id,
            requested_at=now,
            channel_id=channel_id,
            status=OperationStatus.PLANNED.value,
            updated_at=now,
        )
        async with self.db.session() as session:
            return await crud.add_operation(session, operation=operation)

    async def _get(self, operation_id: str) -> Operation | None:
        async with self.db.session() as session:
            return await crud.get_operation(session, operation_id=operation_id)

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

    def _record(self, operation: Operation, *, user_id: str, command: str, outcome: Outcome, detail: str) -> None:
        self.audit.record(
            at=self.clock(),
            user_id=user_id,
            channel_id=operation.channel_id,
            command=command,
            text=f"{operation.kind} {operation.org_id}/{operation.cluster_name} ({operation.template})",
            outcome=outcome,
            org_id=operation.org_id,
            detail=detail,
        )

    def _may_decide(self, operation: Operation, user_id: str) -> str | None:
        """Why `user_id` may not confirm or cancel this operation, or None."""
        if user_id != operation.requested_by and not self.access.is_admin(user_id):
            return f"Only <@{operation.requested_by}>, who asked for it, or a program admin can decide on this launch."
        decision = self.access.decide(user_id=user_id, action=Action.OPERATE, org_id=operation.org_id)
        return None if decision.allowed else decision.reason

    async def confirm(self, operation_id: str, *, user_id: str) -> tuple[Reply, bool]:
        """The answer for the clicker, and whether it replaces the plan message (True once it started)."""
        operation = await self._get(operation_id)
        if operation is None:
            return blocks.problem("This plan is not known (any more); run the command again."), False
        refusal = self._may_decide(operation, user_id)
        if refusal:
            self._record(operation, user_id=user_id, command=CONFIRM_LAUNCH, outcome=Outcome.REFUSED, detail=refusal)
            return blocks.refusal(refusal), False
        if not await self._claim(
            operation.id, OperationStatus.RUNNING, confirmed_by=user_id, confirmed_at=self.clock()
        ):
            current = await self._get(operation.id)
            state = current.status if current else "gone"
            by = f" by <@{current.confirmed_by}>" if current and current.confirmed_by else ""
            return blocks.problem(f"This launch is already {state}{by}; nothing more was done."), False
        self._record(operation, user_id=user_id, command=CONFIRM_LAUNCH, outcome=Outcome.ALLOWED, detail="confirmed")
        operation.confirmed_by = user_id
        try:
            ts: str | None = await self.poster.post(
                channel=operation.channel_id, reply=blocks.operation_progress(operation, "Asking AWS to create it…")
            )
        except Exception:  # Slack being unreachable must not leave a claimed operation that never ran
            log.exception("could not post the progress message of %s", operation.id)
            ts = None
        operation.message_ts = ts
        await self._set(operation.id, message_ts=ts)
        try:
            await self.fleet.launch(operation.org_id, Backend(operation.backend), operation.request)
        except Exception as error:
            reason = describe_error(error)
            await self._finish(operation, OperationStatus.FAILED, f"AWS refused the launch: {reason}")
            return blocks.refusal(f"The launch of `{operation.cluster_name}` failed: {reason}"), True
        self._watch(operation)
        return blocks.operation_decided(operation, "confirmed"), True

    async def cancel(self, operation_id: str, *, user_id: str) -> tuple[Reply, bool]:
        operation = await self._get(operation_id)
        if operation is None:
            return blocks.problem("This plan is not known (any more)."), False
        refusal = self._may_decide(operation, user_id)
        if refusal:
            return blocks.refusal(refusal), False
        if not await self._claim(operation.id, OperationStatus.CANCELLED, confirmed_by=user_id):
            return blocks.problem("This launch was already decided; nothing more was done."), False
        self._record(operation, user_id=user_id, command=CANCEL_LAUNCH, outcome=Outcome.DONE, detail="cancelled")
        return blocks.operation_decided(operation, "cancelled", by=user_id), True

    def _watch(self, operation: Operation) -> None:
        if operation.id not in self._watchers:
            task = asyncio.get_running_loop().create_task(self._follow(operation))
            self._watchers[operation.id] = task
            task.add_done_callback(lambda _: self._watchers.pop(operation.id, None))

    async def _follow(self, operation: Operation) -> None:
        delay, last, missing = self.first_poll, "", 0
        while True:
            try:
                cluster = await self.fleet.get(operation.org_id, Backend(operation.backend), operation.cluster_name)
            except Exception as error:  # AWS hiccups: keep watching, say nothing new
                log.warning("watching %s: %s", operation.cluster_name, describe_error(error))
                cluster = None
            else:
                missing = missing + 1 if cluster is None else 0
            status = cluster.status if cluster else ""
            if status and status != last:
                last = status
                await self._show(operation, cluster)
            if status in DONE_STATUSES and cluster is not None:
                await self._finish(operation, OperationStatus.DONE, blocks.progress_line(cluster))
                return
            if status in FAILED_STATUSES or missing >= MISSING_POLLS:
                reason = (cluster.failure_message if cluster else "") or status or "the cluster disappeared"
                await self._finish(operation, OperationStatus.FAILED, reason)
                return
            await self.sleep(delay)
            delay = min(delay * 2, self.max_poll)

    async def _show(self, operation: Operation, cluster: Cluster | None) -> None:
        if operation.message_ts:
            line = blocks.progress_line(cluster) if cluster else "Waiting for AWS to show it…"
            await self.poster.update(
                channel=operation.channel_id, ts=operation.message_ts, reply=blocks.operation_progress(operation, line)
            )

    async def _finish(self, operation: Operation, status: OperationStatus, detail: str) -> None:
        await self._set(operation.id, status=status.value, detail=detail[:2000])
        operation.status = status.value
        if operation.message_ts:
            line = f"Done: {detail}" if status is OperationStatus.DONE else f"Failed: {escape(detail)}"
            await self.poster.update(
                channel=operation.channel_id, ts=operation.message_ts, reply=blocks.operation_progress(operation, line)
            )
        outcome = Outcome.DONE if status is OperationStatus.DONE else Outcome.FAILED
        self._record(
            operation,
            user_id=operation.confirmed_by or operation.requested_by,
            command=operation.kind,
            outcome=outcome,
            detail=detail,
        )

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
