"""tests/waiting.py: a condition is waited for, bounded, and a timeout says what was awaited."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tests.waiting import wait_for, wait_until


async def test_waits_for_a_later_change_sync_or_async() -> None:
    box: list[int] = []
    asyncio.get_running_loop().call_later(0.05, box.append, 7)
    assert await wait_for(lambda: box[:1], timeout=5) == [7]

    async def doubled() -> int | None:
        return box[0] * 2 if box else None

    assert await wait_for(doubled, timeout=5) == 14


async def test_a_timeout_names_what_was_awaited() -> None:
    with pytest.raises(TimeoutError, match=r"waited 0\.05s for 3 rows \(have 1\)"):
        await wait_for(lambda: None, timeout=0.05, what=lambda: "3 rows (have 1)")


def test_wait_until_without_a_loop() -> None:
    done = threading.Event()
    threading.Timer(0.05, done.set).start()
    assert wait_until(done.is_set, timeout=5, what="the timer") is True
    with pytest.raises(TimeoutError, match=r"waited 0\.01s for never"):
        wait_until(lambda: False, timeout=0.01, what="never")
