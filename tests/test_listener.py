"""The listening socket of `pitcrew serve` and the sandbox's servers: what it accepts answers without Nagle's wait.

Before, every answer on a kept-alive connection took 44 ms (the client's delayed ACK): asyncio only sets
TCP_NODELAY on connections of a socket made with proto=IPPROTO_TCP, and ours was made with proto 0."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

import pytest

from bot import cli
from bot.listener import tcp_listener


async def _accepted_nodelay(listener: socket.socket) -> int:
    """TCP_NODELAY of the connection asyncio accepts on `listener`, as uvicorn serves it (`sockets=`)."""
    seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted = writer.get_extra_info("socket")
        seen.set_result(accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    server = await asyncio.start_server(accept, sock=listener)
    host, port = listener.getsockname()[:2]
    try:
        _, writer = await asyncio.open_connection(host, port)
        value = await asyncio.wait_for(seen, 10)
        writer.close()
        return value
    finally:
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize("make", [tcp_listener, cli._listener], ids=["tcp_listener", "pitcrew serve"])
async def test_connections_accepted_on_the_listener_send_at_once(make: Callable[[str, int], socket.socket]) -> None:
    listener = make("127.0.0.1", 0)
    assert await _accepted_nodelay(listener) != 0


async def test_a_socket_made_with_proto_0_gets_no_tcp_nodelay_so_the_test_can_tell() -> None:
    plain = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    plain.bind(("127.0.0.1", 0))
    assert await _accepted_nodelay(plain) == 0


def test_a_busy_port_raises_and_leaves_no_socket_open() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError):
            tcp_listener("127.0.0.1", port)
        with pytest.raises(cli.PortUnavailable):
            cli._listener("127.0.0.1", port)
