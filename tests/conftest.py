"""Shared fixtures: databases (SQLite always, Postgres when PITCREW_TEST_POSTGRES_URL is set)."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[1]


async def _admin(url: str, sql: str) -> None:
    import asyncpg

    parsed = make_url(url)
    connection = await asyncpg.connect(
        host=parsed.host,
        port=parsed.port or 5432,
        user=parsed.username,
        password=parsed.password,
        database=parsed.database,
    )
    try:
        await connection.execute(sql)
    finally:
        await connection.close()


def _fresh_postgres(base_url: str) -> Iterator[str]:
    """A database of its own for one test, dropped afterwards, so runs never see each other's rows."""
    name = f"pitcrew_test_{uuid.uuid4().hex[:12]}"
    try:
        asyncio.run(_admin(base_url, f'CREATE DATABASE "{name}"'))
    except OSError as error:
        # Set but unreachable is a failure, not a skip: CI relies on these tests running.
        pytest.fail(f"PITCREW_TEST_POSTGRES_URL is set but Postgres is unreachable: {error}")
    try:
        yield make_url(base_url).set(database=name).render_as_string(hide_password=False)
    finally:
        asyncio.run(_admin(base_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'pitcrew.db'}"
        return
    base = os.environ.get("PITCREW_TEST_POSTGRES_URL")
    if not base:
        pytest.skip("PITCREW_TEST_POSTGRES_URL is not set")
    yield from _fresh_postgres(base)
