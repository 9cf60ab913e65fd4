"""The TCP socket Pitcrew's HTTP servers listen on, bound before uvicorn starts (a busy port is then the caller's
one clear line, not uvicorn's exit inside a task)."""

from __future__ import annotations

import socket


def tcp_listener(host: str, port: int) -> socket.socket:
    """A socket bound to host:port (0: any free port), inheritable, for uvicorn's `sockets=`; OSError if taken.

    Made with proto=IPPROTO_TCP on purpose: asyncio sets TCP_NODELAY on an accepted connection only when its
    socket says so, and a socket made with proto 0 passes that on to every connection it accepts. Without
    TCP_NODELAY each answer on a kept-alive connection (a load balancer's, Slack's, the local Slack's) waited for
    the client's delayed ACK: 40 ms more per request, since uvicorn writes headers and body apart."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: restart past TIME_WAIT
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock
