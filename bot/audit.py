"""The audit log's writer: entries are queued by the handlers and written in batches by one task.

One INSERT per batch instead of a session and commit per command keeps bookkeeping from competing with
acking the next command (measured with bench/ack_latency.py). A batch waits at most FLUSH_SECONDS.

One bad row must not stop the log: a batch that fails is written again in halves, down to single rows,
and a row that fails on its own is counted (`write_failures`), logged once and dropped. Only when the
database itself is unreachable (the error says so, or the audit table cannot be read just after) are the
rows kept for the next flush, in a queue bounded at MAX_QUEUE (the
oldest go first, counted in `dropped`). Logs name the row and the error's class and first line, never
the statement or its parameters (SQLAlchemy's message carries both: a failed 500-row INSERT once logged
megabytes).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Any

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlmodel import select

from bot.actor import current_team
from storage import crud
from storage.db import Database
from storage.models import AuditEntry, Outcome

log = logging.getLogger(__name__)
FLUSH_SECONDS = 0.2
MAX_BATCH = 500
MAX_QUEUE = 10_000  # about a minute of a busy program's commands: enough for a database restart
RETRY_MAX_SECONDS = 30.0
# Set by `watch()` around one listener: a mutable flag, so entries recorded in tasks it spawned count too.
_RECORDED: ContextVar[list[bool] | None] = ContextVar("audit_recorded", default=None)


def _unreachable(error: BaseException) -> bool:
    """The database could not be reached or was busy (keep the rows), as opposed to refusing a row (drop it)."""
    if isinstance(error, DBAPIError) and error.connection_invalidated:
        return True
    return isinstance(error, (OperationalError, InterfaceError, OSError, TimeoutError))


def short_error(error: BaseException) -> str:
    """The error's class and the first line of the driver's own message: no SQL, no parameters."""
    origin = error.orig if isinstance(error, DBAPIError) and error.orig is not None else error
    lines = str(origin).strip().splitlines()
    first = lines[0][:200] if lines else ""
    return f"{type(origin).__name__}: {first}" if first else type(origin).__name__


class AuditLog:
    def __init__(self, *, db: Database, flush_seconds: float = FLUSH_SECONDS, max_queue: int = MAX_QUEUE) -> None:
        self._db = db
        self._flush_seconds = flush_seconds
        self._max_queue = max_queue
        self._pending: deque[dict[str, Any]] = deque()
        self._writer: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()  # one flush at a time: the timer, drain() and readers all flush
        self.write_failures = 0  # rows the database refused, each dropped after one try on its own
        self.dropped = 0  # rows pushed out of a full queue while the database was unreachable
        self.written = 0

    @property
    def queue_depth(self) -> int:
        return len(self._pending)

    @contextmanager
    def watch(self) -> Iterator[Callable[[], bool]]:
        """Within the block, tells whether anything was recorded (handlers.errors.guarded: a click that recorded
        nothing gets an entry of its own, so every click reaches the log)."""
        flag = [False]
        token = _RECORDED.set(flag)
        try:
            yield lambda: flag[0]
        finally:
            _RECORDED.reset(token)

    def record(
        self,
        *,
        at: datetime,
        user_id: str,
        channel_id: str,
        command: str,
        text: str,
        outcome: Outcome,
        org_id: str | None = None,
        detail: str = "",
        via: str = "",
        team_id: str | None = None,
    ) -> None:
        """Queue one entry. The actor's team is the request's (bot.actor) unless given; `via` names the
        transport of a command (slash, mention, dm)."""
        team_id = team_id or current_team()
        recorded = _RECORDED.get()
        if recorded is not None:
            recorded[0] = True
        if len(self._pending) >= self._max_queue:
            self._pending.popleft()
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:  # a line per thousand, not one per command
                log.error(
                    "audit queue full (%d entries): %d oldest entries dropped so far", self._max_queue, self.dropped
                )
        # Cut to the columns' sizes: a too-long value would fail the row on Postgres (SQLite ignores sizes).
        self._pending.append(
            {
                "at": at,
                "user_id": user_id[:24],
                "channel_id": channel_id[:24],
                "org_id": org_id[:40] if org_id is not None else None,
                "command": command[:32],
                "text": text[:1000],
                "outcome": outcome.value,
                "detail": detail[:2000],
                "team_id": team_id[:24] if team_id else None,
                "via": via[:16],
            }
        )
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write_soon())

    async def _write_soon(self) -> None:
        delay = self._flush_seconds
        while True:
            await asyncio.sleep(delay)
            await self.flush()
            if not self._pending:
                return
            delay = min(delay * 2, RETRY_MAX_SECONDS)  # the database is unreachable: try again, less often

    async def _insert(self, rows: list[dict[str, Any]]) -> None:
        async with self._db.session() as session:
            await crud.add_audit_rows(session, rows=rows)

    async def flush(self) -> None:
        async with self._lock:
            while self._pending:
                batch = [self._pending.popleft() for _ in range(min(MAX_BATCH, len(self._pending)))]
                if not await self._write(batch):
                    return

    async def _write(self, batch: list[dict[str, Any]]) -> bool:
        """Write a batch; a refused one is halved until the refused rows stand alone (about 2·log2(500)
        statements for one bad row among 500, where one by one took 500 commits). False when the database
        could not be reached: what is left is back at the head of the queue."""
        chunks = [batch]  # a stack, in order from its end
        while chunks:
            chunk = chunks.pop()
            left = [row for part in (chunk, *reversed(chunks)) for row in part]  # this chunk and all after it
            try:
                try:
                    await self._insert(chunk)
                except Exception as error:
                    unreachable = _unreachable(error) or not await self._reachable()
                    if not unreachable:
                        raise
                    self._keep(left, error)
                    return False
            except asyncio.CancelledError:  # close() during a write or its probe: the rows are flushed there
                self._pending.extendleft(reversed(left))
                raise
            except Exception as error:
                if len(chunk) == 1:
                    self._refused(chunk[0], error)
                else:
                    middle = len(chunk) // 2
                    chunks += [chunk[middle:], chunk[:middle]]  # the first half next
            else:
                self.written += len(chunk)
        return True

    async def _reachable(self) -> bool:
        """Whether the audit table can be read now: told apart by trying, since the error's class does not
        tell (asyncpg's refusals of a connection, "database is not accepting connections", "too many
        clients", "the database system is shutting down", come as the same DBAPIError as a refused row)."""
        try:
            async with self._db.session() as session:
                await session.exec(select(AuditEntry.id).limit(0))
        except Exception:
            return False
        return True

    def _refused(self, row: dict[str, Any], error: BaseException) -> None:
        """A row the database refuses on its own: counted, logged once by its facts (not its text), dropped."""
        self.write_failures += 1
        log.error(
            "audit entry not written and dropped (%s): %s by %r in %r at %s, outcome %s",
            short_error(error),
            repr(row["command"])[:40],
            row["user_id"],
            row["org_id"],
            row["at"].isoformat() if isinstance(row["at"], datetime) else row["at"],
            row["outcome"],
        )

    def _keep(self, rows: list[dict[str, Any]], error: BaseException) -> None:
        """Put rows back at the head for the next flush; the queue's bound still holds."""
        room = self._max_queue - len(self._pending)
        if len(rows) > room:
            self.dropped += len(rows) - room
            rows = rows[len(rows) - room :] if room > 0 else []
        self._pending.extendleft(reversed(rows))
        log.warning(
            "audit log: database unreachable, %d entries kept for later (%s)", len(self._pending), short_error(error)
        )

    async def close(self) -> None:
        if self._writer is not None and not self._writer.done():
            self._writer.cancel()
        await self.flush()
