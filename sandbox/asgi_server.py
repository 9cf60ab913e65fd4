"""Run an ASGI app under uvicorn inside the current event loop.

Shared by the sandbox (`pitcrew demo`), the test suite and the benchmarks, which all need a real HTTP
server on a free port without leaving the caller's event loop.
"""

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator, Generator
from typing import Any

import uvicorn

from bot.listener import tcp_listener

logger = logging.getLogger(__name__)


class _EmbeddedServer(uvicorn.Server):
    """uvicorn's server, stopped by `stop()` at once rather than at its next 0.1 s tick and 0.1 s pause.

    The test suite starts and stops two servers per scenario; uvicorn's fixed pauses were most of each
    test's teardown. What shutdown does is uvicorn's own (close the listeners, ask every connection to
    finish, wait for them and their tasks within the graceful timeout, then the lifespan's shutdown),
    polled every few milliseconds."""

    _POLL_SECONDS = 0.005

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._exit = asyncio.Event()

    def stop(self) -> None:
        self.should_exit = True
        self._exit.set()

    # Several servers share one process in the sandbox; if each installed its own SIGINT handler they
    # would fight over it, so the embedding program owns signal handling instead.
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield

    async def main_loop(self) -> None:
        counter = 0
        while not await self.on_tick(counter):  # on_tick refreshes the Date header every 10th tick
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._exit.wait(), timeout=0.1)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.config.timeout_graceful_shutdown or 0)
        while (self.server_state.connections or self.server_state.tasks) and loop.time() < deadline:
            await asyncio.sleep(self._POLL_SECONDS)
        for task in self.server_state.tasks:
            task.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")
        for server in self.servers:
            await server.wait_closed()
        await self.lifespan.shutdown()


@contextlib.asynccontextmanager
async def serve_asgi(
    app: Any,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    log_level: str = "warning",
    startup_timeout: float = 30.0,  # bounds only a failing start; under CPU load a start took over 10 s
) -> AsyncIterator[str]:
    """Serve `app` on `host:port` (0 = any free port) and yield its base URL, e.g. "http://127.0.0.1:53121".

    The socket is bound here rather than by uvicorn so that a busy port raises OSError in the caller
    instead of uvicorn calling sys.exit() inside a task.
    """
    sock = tcp_listener(host, port)  # with TCP_NODELAY on what it accepts, as `pitcrew serve`'s
    bound_port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        host=host,
        port=bound_port,
        log_level=log_level,
        log_config=None,  # keep configure_logging's handler (JSON lines, secrets masked), not uvicorn's own
        lifespan="auto",
        timeout_graceful_shutdown=5,
    )
    server = _EmbeddedServer(config)
    task = asyncio.create_task(server.serve(sockets=[sock]), name=f"uvicorn:{host}:{bound_port}")
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + startup_timeout
        while not server.started:
            if task.done():
                task.result()  # re-raises the startup error, if any
                raise RuntimeError(f"uvicorn exited during startup on {host}:{bound_port}")
            if loop.time() > deadline:
                raise TimeoutError(f"uvicorn did not start within {startup_timeout}s on {host}:{bound_port}")
            await asyncio.sleep(0.01)
        shown_host = f"[{host}]" if ":" in host else host
        yield f"http://{shown_host}:{bound_port}"
    finally:
        server.stop()
        # asyncio.wait (not `await task`) so a cancellation of the caller still propagates.
        await asyncio.wait([task])
        sock.close()
        if not task.cancelled() and (error := task.exception()) is not None:
            logger.error("uvicorn on %s:%s stopped with an error", host, bound_port, exc_info=error)
