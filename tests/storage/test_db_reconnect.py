"""After the database ends its connections (a Postgres restart or failover, an admin's
pg_terminate_backend), the next session works: the pool checks a connection before handing it out, so a
command, a lease renewal or an audit flush does not fail once per pooled connection."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import make_url

from storage.db import Database
from tests.conftest import _admin


async def test_a_session_after_the_database_ended_every_connection_works(db: Database) -> None:
    async with db.session() as session:
        assert (await session.exec(text("SELECT 1"))).scalar() == 1  # type: ignore[call-overload]
    url = make_url(db.url)
    if url.get_backend_name() == "postgresql":
        admin = url.set(database="postgres").render_as_string(hide_password=False)
        await _admin(admin, f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{url.database}'")
    for _ in range(3):
        async with db.session() as session:
            assert (await session.exec(text("SELECT 1"))).scalar() == 1  # type: ignore[call-overload]


async def test_a_sqlite_session_runs_only_its_own_statements(tmp_path: Path) -> None:
    """No ping before each SQLite session: a file has no server to lose (Postgres's ping is what the test above
    relies on), and on SQLite it was one more statement for every session, doubling the smallest."""
    db = Database(url=f"sqlite+aiosqlite:///{tmp_path / 'p.db'}")
    statements: list[str] = []  # what SQLite itself was asked to run (its trace callback sees pings too)
    try:
        async with db.session() as session:  # the pool's one connection, traced from now on
            raw = await (await session.connection()).get_raw_connection()
            await raw.driver_connection.set_trace_callback(statements.append)
        statements.clear()
        async with db.session() as session:
            await session.exec(text("SELECT 3"))  # type: ignore[call-overload]
    finally:
        await db.dispose()
    assert [s for s in statements if s.startswith("SELECT")] == ["SELECT 3"], statements
