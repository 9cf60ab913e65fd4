"""Waiting for asynchronous work in tests: poll a condition until it holds, bounded, never a bare sleep.

For messages and modals of the local Slack, use its own `LocalSlack.wait_for` / `wait_for_view` (woken by
each change, no polling). This is for the rest: rows a background writer puts in the database, a task's
side effect, a thread's state.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

# Generous: a condition that holds returns at once, so the bound only matters on a loaded machine
# (2 cores shared by several suites), where a few seconds of scheduling delay are normal.
DEFAULT_TIMEOUT = 15.0


async def wait_for(
    predicate: Callable[[], T | Awaitable[T | None] | None],
    *,
    timeout: float = DEFAULT_TIMEOUT,
    interval: float = 0.02,
    what: str | Callable[[], str] = "the condition",
) -> T:
    """The first truthy value of `predicate()` (sync or async), checked every `interval` seconds; a
    TimeoutError naming `what` (a text, or a function describing the state) after `timeout` seconds.
    Checked once more at the deadline, so a change at the last moment still counts."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        late = loop.time() >= deadline
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]  # truthy: not None
        if late:
            described = what() if callable(what) else what
            raise TimeoutError(f"waited {timeout}s for {described}")
        await asyncio.sleep(min(interval, max(0.0, deadline - loop.time())))


def wait_until(
    predicate: Callable[[], T | None], *, timeout: float = DEFAULT_TIMEOUT, interval: float = 0.02, what: str = ""
) -> T:
    """wait_for for code without an event loop (a thread, a subprocess)."""
    deadline = time.monotonic() + timeout
    while True:
        late = time.monotonic() >= deadline
        value = predicate()
        if value:
            return value
        if late:
            raise TimeoutError(f"waited {timeout}s for {what or 'the condition'}")
        time.sleep(min(interval, max(0.0, deadline - time.monotonic())))
