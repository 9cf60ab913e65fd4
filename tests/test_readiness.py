"""GET /readyz (readiness) answers 503 while the database is unreachable; GET /healthz (liveness) keeps its
contract: 200 once the program file is loaded and migrations are applied, database or not.

The database goes away for real: the bot reaches Postgres through a TCP gate of the test's own, which is shut
(connections cut, new ones refused) and opened again, so the Postgres server the suite shares is never touched."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator

import httpx
import pytest
from sqlalchemy.engine import make_url

from bot.app import build_app, database_problem
from bot.config import Settings, load_program
from bot.resources import example_program
from sandbox.asgi_server import serve_asgi
from storage.db import Database


def _closed_port() -> int:
    """A port nothing listens on (bound, then released: connecting to it is refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


class TcpGate:
    """127.0.0.1:port forwarding to a target while open; shut, it cuts every connection and refuses new ones."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def open(self) -> None:
        self._server = await asyncio.start_server(self._forward, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def shut(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()
        await self._server.wait_closed()

    async def _forward(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            server_reader, server_writer = await asyncio.open_connection(*self.target)
        except OSError:
            client_writer.transport.abort()
            return
        self._writers |= {client_writer, server_writer}

        async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.IncompleteReadError):
                while data := await reader.read(65536):
                    writer.write(data)
                    await writer.drain()
            writer.transport.abort()

        await asyncio.gather(pipe(client_reader, server_writer), pipe(server_reader, client_writer))
        self._writers -= {client_writer, server_writer}


@contextlib.asynccontextmanager
async def silent_server() -> AsyncIterator[int]:
    """A server that accepts connections and never says a word: a database that hangs."""
    held: list[asyncio.StreamWriter] = []

    async def hold(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        for writer in held:
            writer.transport.abort()
        server.close()
        await server.wait_closed()


async def test_a_database_that_answers_is_no_problem(db: Database) -> None:
    assert await database_problem(db) is None


async def test_a_refused_connection_is_named_at_once() -> None:
    db = Database(url=f"postgresql+asyncpg://postgres@127.0.0.1:{_closed_port()}/test")
    try:
        started = time.monotonic()
        problem = await database_problem(db, timeout=5)
        assert problem is not None and "127.0.0.1" not in problem, "the reason, never the address"
        assert time.monotonic() - started < 3, "refused is known at once, not after the timeout"
    finally:
        await db.dispose()


async def test_a_database_that_never_answers_is_a_problem_after_the_timeout() -> None:
    async with silent_server() as port:
        db = Database(url=f"postgresql+asyncpg://postgres@127.0.0.1:{port}/test")
        try:
            started = time.monotonic()
            assert await database_problem(db, timeout=0.3) == "no answer in 0.3 s"
            assert time.monotonic() - started < 2
        finally:
            await db.dispose()


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
async def test_readyz_fails_while_the_database_is_unreachable_and_healthz_does_not(
    migrated_database_url: str,
) -> None:
    real = make_url(migrated_database_url)
    gate = TcpGate(real.host or "127.0.0.1", real.port or 5432)
    await gate.open()
    gated = real.set(host="127.0.0.1", port=gate.port).render_as_string(hide_password=False)
    settings = Settings(
        database_url=gated,
        slack_bot_token="xoxb-test",
        slack_signing_secret="secret",
        slack_api_url="http://127.0.0.1:9/api/",  # nothing listens: readiness must not depend on Slack
        pitcrew_monitor=False,
        pitcrew_digest=False,
    )
    pitcrew = build_app(settings=settings, program=load_program(example_program()))
    try:
        async with serve_asgi(pitcrew.asgi) as url, httpx.AsyncClient(base_url=url, timeout=10) as client:
            assert (await client.get("/healthz")).status_code == 200
            ready = await client.get("/readyz")
            assert (ready.status_code, ready.json()) == (200, {"status": "ready"})

            await gate.shut()
            down = await client.get("/readyz")
            assert down.status_code == 503
            assert down.json()["status"] == "database unreachable"
            assert str(gate.port) not in down.text, "the answer is public: no address"
            assert (await client.get("/healthz")).status_code == 200, "liveness does not ask the database"

            await gate.open()  # the same port: the pool's pre-ping replaces the connections cut above
            assert (await client.get("/readyz")).status_code == 200
    finally:
        await gate.shut()
