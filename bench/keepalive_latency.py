"""Benchmark (not a test): answers on a kept-alive connection, from the listener `pitcrew serve` makes
(bot.listener.tcp_listener) next to a socket made as before (proto 0), in the same run.

A load balancer in front of Pitcrew (an ALB, an ingress) keeps its connections to the target open, as the
local Slack's client does in the sandbox and the tests. asyncio sets TCP_NODELAY only on connections accepted
from a socket made with proto=IPPROTO_TCP; without it each answer, which uvicorn writes as headers and then a
body, waits for the client's delayed ACK.

Both servers are uvicorn serving Pitcrew's own `/healthz` route shape (a Starlette app that answers "ok"),
in this process's event loop; one httpx client per server keeps one connection open. Requests alternate
between the two so that machine noise hits both alike. Printed: p50 and p99 per listener and their ratio.

    .venv/bin/python bench/keepalive_latency.py [--n 300]
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import socket
import statistics
import sys
import time
from pathlib import Path

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.listener import tcp_listener  # noqa: E402
from sandbox.asgi_server import _EmbeddedServer  # noqa: E402


def _app() -> Starlette:
    async def healthz(_: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    return Starlette(routes=[Route("/healthz", healthz)])


def _proto_0_listener() -> socket.socket:
    """The listener as `pitcrew serve` made it before: socket(family, SOCK_STREAM), proto 0."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


async def _serve(sock: socket.socket) -> tuple[_EmbeddedServer, asyncio.Task[None], str]:
    import uvicorn

    port = sock.getsockname()[1]
    server = _EmbeddedServer(uvicorn.Config(_app(), host="127.0.0.1", port=port, log_level="warning", log_config=None))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    return server, task, f"http://127.0.0.1:{port}/healthz"


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


async def measure(n: int) -> None:
    listeners = {"tcp_listener (now)": tcp_listener("127.0.0.1", 0), "proto 0 (before)": _proto_0_listener()}
    served = {name: await _serve(sock) for name, sock in listeners.items()}
    times: dict[str, list[float]] = {name: [] for name in served}
    clients = {name: httpx.AsyncClient() for name in served}
    try:
        for name, (_, _, url) in served.items():  # open each kept-alive connection first
            (await clients[name].get(url)).raise_for_status()
        for _ in range(n):
            for name, (_, _, url) in served.items():
                started = time.perf_counter()
                (await clients[name].get(url)).raise_for_status()
                times[name].append((time.perf_counter() - started) * 1000)
    finally:
        for client in clients.values():
            await client.aclose()
        for server, task, _ in served.values():
            server.stop()
            await task
    now, before = times["tcp_listener (now)"], times["proto 0 (before)"]
    print(f"{platform.processor() or platform.machine()}, Python {platform.python_version()}, {n} requests each")
    for name, values in times.items():
        print(f"{name:<20} p50 {statistics.median(values):6.2f} ms   p99 {_pct(values, 99):6.2f} ms")
    print(f"ratio before / now: p50 x{statistics.median(before) / statistics.median(now):.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300, help="requests per listener")
    asyncio.run(measure(parser.parse_args().n))


if __name__ == "__main__":
    main()
