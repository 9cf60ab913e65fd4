"""Replicas started together on a new database all come up: migrations run one at a time (a Postgres
advisory lock, a file lock beside a SQLite file), and the others find the schema at head."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from sqlalchemy import inspect, text

from sandbox.world import EXAMPLE_PROGRAM
from storage.db import Database, head_revision, sqlite_lock_path, upgrade

ROOT = Path(__file__).resolve().parents[2]
PITCREW = ROOT / ".venv" / "bin" / "pitcrew"
HEAD = head_revision()

# A child that says it is ready, waits for the go, then upgrades: all of them start the upgrade together
# rather than one import time apart.
UPGRADE_ON_GO = """
import sys, time
from pathlib import Path
ready, go, url = sys.argv[1:4]
from storage.db import upgrade
Path(ready).touch()
deadline = time.monotonic() + 60
while not Path(go).exists():
    if time.monotonic() > deadline:
        sys.exit("never told to go")
    time.sleep(0.005)
upgrade(url)
"""


async def _schema(url: str) -> tuple[list[str], set[str]]:
    db = Database(url=url)
    try:
        async with db.engine.connect() as connection:
            versions = [row[0] for row in await connection.execute(text("SELECT version_num FROM alembic_version"))]
            tables = set(await connection.run_sync(lambda sync: inspect(sync).get_table_names()))
        return versions, tables
    finally:
        await db.dispose()


def assert_at_head(url: str) -> None:
    versions, tables = asyncio.run(_schema(url))
    assert versions == [HEAD], "one version row, at head"
    assert {"orgs", "audit_log", "operations", "leases"} <= tables


def wait_for(condition: object, *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.05)


def test_four_processes_upgrading_a_new_database_at_once_all_succeed(database_url: str, tmp_path: Path) -> None:
    ready = [tmp_path / f"ready-{i}" for i in range(4)]
    go = tmp_path / "go"
    children = [
        subprocess.Popen(
            [sys.executable, "-c", UPGRADE_ON_GO, str(flag), str(go), database_url],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for flag in ready
    ]
    try:
        wait_for(lambda: all(flag.exists() for flag in ready), timeout=60, what="four children ready")
        go.touch()
        outcomes = [(child.wait(timeout=60), child.stderr.read() if child.stderr else "") for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
    assert [code for code, _ in outcomes] == [0, 0, 0, 0], "\n".join(err for _, err in outcomes)
    assert_at_head(database_url)


def test_threads_of_one_process_upgrading_at_once_all_succeed(database_url: str) -> None:
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def run() -> None:
        try:
            barrier.wait(timeout=30)
            upgrade(database_url)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors and not any(thread.is_alive() for thread in threads)
    assert_at_head(database_url)


def test_the_sqlite_lock_file_sits_beside_the_database(tmp_path: Path) -> None:
    assert sqlite_lock_path(f"sqlite+aiosqlite:///{tmp_path / 'p.db'}") == tmp_path / "p.db.migrate.lock"
    assert sqlite_lock_path("sqlite+aiosqlite://") is None
    assert sqlite_lock_path("sqlite+aiosqlite:///:memory:") is None
    assert sqlite_lock_path("postgresql+asyncpg://postgres@127.0.0.1/test") is None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def replicas(database_url: str, moto_endpoint: str, tmp_path: Path) -> Iterator[list[tuple[int, Path, int]]]:
    """Three `pitcrew serve` processes started at once on the same new database: (port, log file, pid)."""
    # The example program with its first org only: each replica assumes every org's role and makes its clients
    # at start, and the leader sweeps them all; twelve orgs made these six processes 8 % of the suite's CPU.
    program = yaml.safe_load(EXAMPLE_PROGRAM.read_text())
    program["orgs"] = program["orgs"][:1]
    program_file = tmp_path / "program.yml"
    program_file.write_text(yaml.safe_dump(program))
    env = {
        **os.environ,  # AWS variables aimed at the test's moto server, so the leader's sweeps stay local
        "DATABASE_URL": database_url,
        "PITCREW_CONFIG": str(program_file),
        "SLACK_BOT_TOKEN": "xoxb-test",
        "SLACK_SIGNING_SECRET": "test-secret",
        "SLACK_API_URL": "http://127.0.0.1:9/api/",  # nothing listens: no replica needs Slack to start
    }
    started = []
    for i in range(3):
        port, log = _free_port(), tmp_path / f"replica-{i}.log"
        with log.open("w") as out:
            process = subprocess.Popen(
                [str(PITCREW), "serve", "--port", str(port)], cwd=tmp_path, env=env, stdout=out, stderr=out
            )
        started.append((process, port, log))
    try:
        yield [(port, log, process.pid) for process, port, log in started]
    finally:
        for process, _, _ in started:
            process.terminate()
        for process, _, _ in started:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


async def _lease_holders(url: str) -> list[str]:
    db = Database(url=url)
    try:
        async with db.engine.connect() as connection:
            rows = await connection.execute(text("SELECT holder FROM leases WHERE name = 'monitor'"))
            return [row[0] for row in rows]
    finally:
        await db.dispose()


def test_three_replicas_started_at_once_on_a_new_database_all_come_up_with_one_leader(
    replicas: list[tuple[int, Path, int]], database_url: str
) -> None:
    started = time.monotonic()
    for port, log, _ in replicas:
        wait_for(lambda port=port: _healthy(port), timeout=45, what=f"replica on {port} healthy\n{log.read_text()}")
    up_after = time.monotonic() - started
    holders: list[str] = []

    def one_holder() -> bool:
        holders[:] = asyncio.run(_lease_holders(database_url))
        return len(holders) == 1

    wait_for(one_holder, timeout=15, what="a lease row")
    pids = {pid for _, _, pid in replicas}
    assert int(holders[0].split(":")[1]) in pids, "the lease is held by one of the three"
    logs = [log.read_text() for _, log, _ in replicas]
    leaders = [text_ for text_ in logs if "is the leader" in text_]
    assert len(leaders) == 1, "exactly one replica took the lease"
    assert not any("Traceback" in text_ for text_ in logs), "\n".join(logs)
    assert up_after < 45
