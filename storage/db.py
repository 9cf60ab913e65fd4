"""Async engine and sessions, and migrations applied with Alembic."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine
from sqlmodel.ext.asyncio.session import AsyncSession

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    # Alembic's ini interpolation treats % specially; URLs may carry %-escapes.
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    """Apply migrations (blocking; env.py runs its own event loop)."""
    command.upgrade(alembic_config(database_url), revision)


class Database:
    """One engine per process, created by the caller (never at import time)."""

    def __init__(self, *, url: str, echo: bool = False) -> None:
        self.url = url
        connect_args = {"timeout": 30} if url.startswith("sqlite") else {}
        self.engine: AsyncEngine = create_async_engine(url, echo=echo, connect_args=connect_args)
        self._sessions = async_sessionmaker(self.engine, class_=AsyncSession, expire_on_commit=False)

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        async with self._sessions() as session:
            yield session

    async def upgrade(self) -> None:
        # Alembic's env.py calls asyncio.run, which cannot nest in a running loop: use a worker thread.
        await asyncio.to_thread(upgrade, self.url)

    async def dispose(self) -> None:
        await self.engine.dispose()
