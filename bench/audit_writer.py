"""What one unstorable row costs the audit writer, next to a row-by-row peer, on SQLite and Postgres.

Issue 11: one bad row used to stop the audit log for good (the batch went back to the head of the queue).
The writer now halves a refused batch down to the refused rows. Its peer writes a refused batch row by
row (one session and commit per row), the obvious alternative. Both are timed on the same database in the
same run, alternating, over batches of 500 rows: all good, and with one row the database refuses.

    .venv/bin/python bench/audit_writer.py [--postgres postgresql+asyncpg://postgres@127.0.0.1:5432/test]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from bot.audit import AuditLog
from storage import crud
from storage.db import Database
from storage.models import Outcome

BATCH = 500
ROUNDS = 7
AT = datetime(2026, 12, 1, tzinfo=UTC)


def _rows(bad: bool) -> list[dict[str, Any]]:
    rows = [
        {
            "at": AT + timedelta(seconds=n),
            "user_id": "U0ALICE01",
            "channel_id": "C0KUMOLAB",
            "command": "/cluster",
            "text": f"status kumo-p5-train {n}",
            "outcome": Outcome.ALLOWED,
            "org_id": "kumo-labs",
        }
        for n in range(BATCH)
    ]
    if bad:
        rows[BATCH // 2]["at"] = None  # NOT NULL: refused by both databases
    return rows


async def _halving(db: Database, rows: list[dict[str, Any]]) -> float:
    audit = AuditLog(db=db, flush_seconds=3600)
    for row in rows:
        audit.record(**row)
    started = time.perf_counter()
    await audit.flush()
    return time.perf_counter() - started


async def _row_by_row(db: Database, rows: list[dict[str, Any]]) -> float:
    """The peer: try the batch once, and when it is refused, each row in its own session."""
    values = [{**row, "outcome": row["outcome"].value} for row in rows]
    started = time.perf_counter()
    try:
        async with db.session() as session:
            await crud.add_audit_rows(session, rows=values)
    except Exception:
        for row in values:
            try:
                async with db.session() as session:
                    await crud.add_audit_rows(session, rows=[row])
            except Exception:
                pass
    return time.perf_counter() - started


async def _fresh_postgres(base: str) -> tuple[str, str]:
    name = f"bench_audit_{uuid.uuid4().hex[:8]}"
    admin = create_async_engine(base, isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        await conn.execute(text(f'CREATE DATABASE "{name}"'))
    await admin.dispose()
    return base.rsplit("/", 1)[0] + f"/{name}", name


async def _drop_postgres(base: str, name: str) -> None:
    admin = create_async_engine(base, isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        await conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    await admin.dispose()


async def _measure(label: str, url: str) -> None:
    db = Database(url=url)
    await db.upgrade()
    times: dict[tuple[str, bool], list[float]] = {}
    for _ in range(ROUNDS):
        for bad in (False, True):
            for name, writer in (("halving", _halving), ("row by row", _row_by_row)):
                times.setdefault((name, bad), []).append(await writer(db, _rows(bad)))
    await db.dispose()
    print(f"\n{label}: {BATCH} rows per batch, median of {ROUNDS} rounds (seconds)")
    print(f"{'':26}{'all good':>10}{'one bad row':>14}")
    for name in ("halving", "row by row"):
        good, bad_ = (statistics.median(times[(name, b)]) for b in (False, True))
        print(f"{'writer: ' + name:26}{good:10.3f}{bad_:14.3f}")
    ratio = statistics.median(times[("row by row", True)]) / statistics.median(times[("halving", True)])
    print(f"one bad row: row by row takes {ratio:.1f}x the halving writer's time")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", help="base URL of a Postgres server (a fresh database is created)")
    args = parser.parse_args()
    logging.getLogger("bot.audit").setLevel(logging.CRITICAL)  # the refused row's one line, times 28
    with tempfile.TemporaryDirectory() as folder:
        await _measure("SQLite", f"sqlite+aiosqlite:///{Path(folder) / 'bench.db'}")
    if args.postgres:
        url, name = await _fresh_postgres(args.postgres)
        try:
            await _measure("Postgres", url)
        finally:
            await _drop_postgres(args.postgres, name)


if __name__ == "__main__":
    asyncio.run(main())
