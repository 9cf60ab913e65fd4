"""After the database ends its connections (a Postgres restart or failover, an admin's
pg_terminate_backend), the next session works: the pool checks a connection before handing it out, so a
command, a lease renewal or an audit flush does not fail once per pooled connection."""

from __future__ import annotations

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
