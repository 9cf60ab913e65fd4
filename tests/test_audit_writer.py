"""The audit writer: a row the database refuses costs that row only (logged once, counted, no SQL in the
log); rows are kept while the database is unreachable, in a bounded queue."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from bot.audit import AuditLog
from storage import crud
from storage.db import Database
from storage.models import Outcome
from tests.conftest import _admin

AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _record(audit: AuditLog, n: int, **overrides: Any) -> None:
    values: dict[str, Any] = {
        "at": AT + timedelta(seconds=n),
        "user_id": "U0ALICE01",
        "channel_id": "C0KUMOLAB",
        "command": "/cluster",
        "text": f"status kumo-p5-train {n}",
        "outcome": Outcome.ALLOWED,
        "org_id": "kumo-labs",
    }
    audit.record(**{**values, **overrides})


async def _texts(db: Database) -> list[str]:
    async with db.session() as session:
        return sorted(entry.text for entry in await crud.audit_entries(session, limit=1000))


async def test_a_refused_row_costs_only_itself(db: Database, caplog: pytest.LogCaptureFixture) -> None:
    audit = AuditLog(db=db, flush_seconds=3600)  # flushed by the test, not the timer
    for n in range(5):
        _record(audit, n)
    _record(audit, 99, at=None, text="the one row the database refuses")  # NOT NULL: refused on both databases
    _record(audit, 6, text="status \x00")  # storable since the column type replaces the NUL
    for n in range(7, 10):
        _record(audit, n)
    with caplog.at_level(logging.INFO, logger="bot.audit"):
        await audit.flush()
        await audit.flush()  # nothing left to retry: the refused row is not tried again
    texts = await _texts(db)
    assert len(texts) == 9 and "status \u2400" in texts
    assert "the one row the database refuses" not in texts
    assert (audit.write_failures, audit.queue_depth, audit.dropped) == (1, 0, 0)
    failures = [r for r in caplog.records if "not written" in r.getMessage()]
    assert len(failures) == 1, [r.getMessage() for r in caplog.records]
    logged = "\n".join(r.getMessage() + (r.exc_text or "") for r in caplog.records)
    assert "IntegrityError" in logged or "NotNullViolation" in logged
    for leak in ("INSERT", "[SQL", "parameters", "the one row the database refuses", "kumo-p5-train"):
        assert leak not in logged  # never the statement, never the rows' values
    assert all(r.exc_info is None for r in caplog.records)  # no traceback: its message carries the SQL


async def test_each_refused_row_is_isolated_and_the_rest_written_in_order(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    audit = AuditLog(db=db, flush_seconds=3600)
    refused = {3, 4, 17}
    for n in range(20):
        _record(audit, n, **({"at": None} if n in refused else {}))
    with caplog.at_level(logging.INFO, logger="bot.audit"):
        await audit.flush()
    assert await _texts(db) == sorted(f"status kumo-p5-train {n}" for n in range(20) if n not in refused)
    assert (audit.write_failures, audit.written, audit.queue_depth) == (3, 17, 0)
    assert len([r for r in caplog.records if "not written" in r.getMessage()]) == 3


async def test_rows_wait_in_a_bounded_queue_while_the_database_is_unreachable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "not-yet"  # SQLite cannot open a file in a folder that does not exist
    url = f"sqlite+aiosqlite:///{folder / 'pitcrew.db'}"
    database = Database(url=url)
    audit = AuditLog(db=database, flush_seconds=3600, max_queue=10)
    try:
        with caplog.at_level(logging.INFO, logger="bot.audit"):
            for n in range(25):
                _record(audit, n)
            assert (audit.queue_depth, audit.dropped) == (10, 15)  # the oldest went first
            await audit.flush()
        assert (audit.queue_depth, audit.write_failures) == (10, 0)  # kept, not counted as refused
        assert "INSERT" not in caplog.text and "[SQL" not in caplog.text

        folder.mkdir()
        await database.upgrade()
        await audit.flush()
        assert audit.queue_depth == 0
        assert await _texts(database) == sorted(f"status kumo-p5-train {n}" for n in range(15, 25))
    finally:
        await database.dispose()


async def test_the_timer_writes_without_anyone_flushing(db: Database) -> None:
    audit = AuditLog(db=db, flush_seconds=0.01)
    _record(audit, 1)
    assert audit.queue_depth == 1
    assert audit._writer is not None
    await audit._writer  # the timer's own flush, bounded by the test's timeout
    assert audit.queue_depth == 0 and await _texts(db) == ["status kumo-p5-train 1"]


async def _refuse_connections(database_url: str, refuse: bool) -> None:
    """Make the test's database unreachable as a real outage does: on Postgres it stops accepting connections
    (ALLOW_CONNECTIONS binds superusers too, unlike CONNECTION LIMIT) and its sessions are ended; SQLite's file
    moves away (a new empty file has no tables)."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        path = Path(url.database or "")
        aside = path.with_name(path.name + ".aside")
        path.rename(aside) if refuse else aside.rename(path)
        return
    admin = url.set(database="postgres").render_as_string(hide_password=False)
    name = url.database
    await _admin(admin, f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS {"false" if refuse else "true"}')
    if refuse:
        await _admin(admin, f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'")


async def test_rows_wait_while_the_database_refuses_connections_and_are_written_after(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    database = Database(url=database_url)
    await database.upgrade()
    audit = AuditLog(db=database, flush_seconds=3600, max_queue=30)
    try:
        for n in range(5):
            _record(audit, n)
        await audit.flush()
        await _refuse_connections(database_url, True)
        try:
            with caplog.at_level(logging.INFO, logger="bot.audit"):
                for n in range(5, 45):
                    _record(audit, n)
                await audit.flush()
                await audit.flush()
            # Kept, not dropped as refused rows; bounded; a line per flush, not one per row.
            assert (audit.queue_depth, audit.write_failures, audit.dropped) == (30, 0, 10)
            assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) <= 4, caplog.text
        finally:
            await _refuse_connections(database_url, False)
        await audit.flush()
        assert audit.queue_depth == 0 and audit.write_failures == 0
        kept = [f"status kumo-p5-train {n}" for n in (*range(5), *range(15, 45))]
        assert await _texts(database) == sorted(kept)
    finally:
        await database.dispose()


async def test_rows_are_kept_when_the_writer_is_cancelled_while_it_checks_the_database(db: Database) -> None:
    """close() cancels a write in flight; one cancelled while it tells a refused row from an unreachable
    database (the probe after a failed INSERT) keeps the batch for close's own flush, as during the INSERT."""
    probing = asyncio.Event()

    class SlowProbe(AuditLog):
        async def _reachable(self) -> bool:
            probing.set()
            await asyncio.Event().wait()  # until cancelled
            return True

    audit = SlowProbe(db=db, flush_seconds=3600)
    _record(audit, 1, at=None)  # refused (NOT NULL): the probe runs
    _record(audit, 2)
    writer = asyncio.ensure_future(audit.flush())
    await asyncio.wait_for(probing.wait(), timeout=10)
    writer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await writer
    assert audit.queue_depth == 2, "both rows kept, in order"
