"""The audit log's writer: entries are queued by the handlers and written in batches by one task.

One INSERT per batch instead of a session and commit per command keeps bookkeeping from competing with
acking the next command (measured with bench/ack_latency.py). A batch waits at most FLUSH_SECONDS.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import Any

from storage import crud
from storage.db import Database
from storage.models import Outcome

log = logging.getLogger(__name__)
FLUSH_SECONDS = 0.2
MAX_BATCH = 500


class AuditLog:
    def __init__(self, *, db: Database, flush_seconds: float = FLUSH_SECONDS) -> None:
        self._db = db
        self._flush_seconds = flush_seconds
        self._pending: list[dict[str, Any]] = []
        self._writer: asyncio.Task[None] | None = None

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
    ) -> None:
        self._pending.append(
            {
                "at": at,
                "user_id": user_id,
                "channel_id": channel_id,
                "org_id": org_id,
                "command": command,
                "text": text[:1000],
                "outcome": outcome.value,
                "detail": detail[:2000],
            }
        )
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write_soon())

    async def _write_soon(self) -> None:
        await asyncio.sleep(self._flush_seconds)
        await self.flush()

    async def flush(self) -> None:
        while self._pending:
            batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
            try:
                async with self._db.session() as session:
                    await crud.add_audit_rows(session, rows=batch)
            except Exception:
                log.exception("could not write %d audit entries", len(batch))
                self._pending[:0] = batch  # keep them for the next flush
                return

    async def close(self) -> None:
        if self._writer is not None and not self._writer.done():
            self._writer.cancel()
        await self.flush()
