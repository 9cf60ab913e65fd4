"""Async engine and sessions, and migrations applied with Alembic.

Replicas started together on a new database all run the migrations at start; unserialised, two of them
create the same tables at once and one dies on a duplicate key. So the upgrade runs under a lock: a
session-level Postgres advisory lock held on the migration connection (storage/migrations/env.py takes it
with `migration_lock`), a file lock beside a SQLite file, and a process lock for threads of one process
(Alembic keeps its migration context in a module global). Whoever comes second finds the schema at head.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import AsyncIterator
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from filelock import FileLock
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, async_sessionmaker, create_async_engine
from sqlmodel.ext.asyncio.session import AsyncSession

MIGRATIONS = Path(__file__).parent / "migrations"
# The advisory lock's key: any fixed bigint that nothing else in the database uses ("pitcrewM" as bytes).
MIGRATION_LOCK_KEY = 8100133375272384333
_IN_PROCESS = threading.Lock()


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    # Alembic's ini interpolation treats % specially; URLs may carry %-escapes.
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


@functools.cache
def head_revision() -> str | None:
    """The newest migration's revision (read once per process: Alembic loads every migration file to find it)."""
    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


def sqlite_lock_path(database_url: str) -> Path | None:
    """`<db file>.migrate.lock` for a SQLite file; None for an in-memory SQLite or another database."""
    url = make_url(database_url)
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    if url.database.startswith("file:") or url.query.get("mode") == "memory":
        return None  # a URI filename (shared memory and the like): nothing on disk to lock beside
    return Path(url.database).with_name(Path(url.database).name + ".migrate.lock")


def upgrade(database_url: str, revision: str = "head") -> None:
    """Apply migrations (blocking; env.py runs its own event loop), one process and one thread at a time."""
    lock_path = sqlite_lock_path(database_url)
    file_lock: AbstractContextManager[object] = FileLock(lock_path) if lock_path else nullcontext()
    with _IN_PROCESS, file_lock:
        command.upgrade(alembic_config(database_url), revision)


@asynccontextmanager
async def migration_lock(connection: AsyncConnection) -> AsyncIterator[None]:
    """On Postgres, hold the migrations' advisory lock on this connection for the block (other replicas'
    upgrades wait for it); elsewhere nothing (SQLite is locked by a file in `upgrade`).

    Session-level (pg_advisory_lock, not the _xact_ kind) so it spans the transactions Alembic commits; the
    transaction that took it is committed at once, so Alembic starts and commits its own. A process that
    dies holding it loses its connection, and Postgres releases the lock with it."""
    if connection.dialect.name != "postgresql":
        yield
        return
    await connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
    await connection.commit()
    try:
        yield
    finally:
        await connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": MIGRATION_LOCK_KEY})
        await connection.commit()


class Database:
    """One engine per process, created by the caller (never at import time)."""

    def __init__(self, *, url: str, echo: bool = False) -> None:
        self.url = url
        sqlite = url.startswith("sqlite")
        connect_args = {"timeout": 30} if sqlite else {}
        # pool_pre_ping: after a Postgres restart or failover every pooled connection is dead, and without a
        # check each would fail one command, lease renewal or audit flush before the pool replaced it. A SQLite
        # file has no server to lose, so there the ping would only be one more statement per session.
        self.engine: AsyncEngine = create_async_engine(
            url, echo=echo, connect_args=connect_args, pool_pre_ping=not sqlite
        )
        self._sessions = async_sessionmaker(self.engine, class_=AsyncSession, expire_on_commit=False)

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        async with self._sessions() as session:
            yield session

    async def revision(self) -> str | None:
        """The revision the database is at, or None when it was never migrated."""
        try:
            async with self.engine.connect() as connection:
                rows = (await connection.execute(text("SELECT version_num FROM alembic_version"))).all()
        except DBAPIError:  # no alembic_version table yet
            return None
        return str(rows[0][0]) if len(rows) == 1 else None

    async def upgrade(self) -> None:
        """Bring the database to head. One already there (every start but the first after a release) is left
        alone: one query instead of Alembic's loading every migration file and running its environment."""
        if await self.revision() == head_revision():
            return
        # Alembic's env.py calls asyncio.run, which cannot nest in a running loop: use a worker thread.
        await asyncio.to_thread(upgrade, self.url)

    async def dispose(self) -> None:
        await self.engine.dispose()
