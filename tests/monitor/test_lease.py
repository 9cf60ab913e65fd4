"""The leader lease: one replica holds it, another takes over after expiry, run() renews and releases."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from bot.monitor.lease import LeaderLease, default_holder
from storage.db import Database

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def lease(db: Database, holder: str, clock: Clock, **kwargs: float) -> LeaderLease:
    return LeaderLease(db=db, name="monitors", holder=holder, ttl=15, renew_every=5, clock=clock, **kwargs)


async def test_only_one_replica_holds_the_lease(db: Database) -> None:
    clock = Clock()
    a, b = lease(db, "a", clock), lease(db, "b", clock)
    assert (await a.try_acquire(), await b.try_acquire()) == (True, False)
    assert (a.held, b.held) == (True, False)
    clock.advance(5)
    assert (await a.try_acquire(), await b.try_acquire()) == (True, False), "renewed in time"
    clock.advance(14)
    assert await b.try_acquire() is False, "renewal at +5s holds it until +20s"
    assert a.held


async def test_another_replica_takes_over_after_expiry(db: Database) -> None:
    clock = Clock()
    a, b = lease(db, "a", clock), lease(db, "b", clock)
    assert await a.try_acquire() is True
    clock.advance(16)  # a stalled: no renewal
    assert a.held is False, "by its own clock a stops counting as leader when its ttl has run out"
    assert await b.try_acquire() is True
    assert await a.try_acquire() is False
    assert (a.held, b.held) == (False, True)


async def test_run_renews_until_stopped_then_releases(db: Database) -> None:
    clock = Clock()
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock.advance(seconds)
        await asyncio.sleep(0)

    a = lease(db, "a", clock, sleep=sleep)
    stop = asyncio.Event()
    task = asyncio.create_task(a.run(stop))
    while len(sleeps) < 5:  # several renewals: 25 s by the clock, longer than the ttl
        await asyncio.sleep(0.01)
    assert a.held
    b = lease(db, "b", clock)
    assert await b.try_acquire() is False, "renewed all along"
    stop.set()
    await asyncio.wait_for(task, timeout=5)
    assert a.held is False
    assert set(sleeps) == {5}
    assert await b.try_acquire() is True, "released on exit: taken over without waiting for the expiry"


async def test_run_stops_promptly_while_sleeping(db: Database) -> None:
    a = lease(db, "a", Clock())  # real asyncio.sleep of 5 s
    stop = asyncio.Event()
    task = asyncio.create_task(a.run(stop))
    while not a.held:
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(task, timeout=1)
    assert a.held is False


async def test_database_errors_count_as_not_held_and_never_end_the_loop() -> None:
    broken = Database(url="postgresql+asyncpg://postgres@127.0.0.1:1/test")  # nothing listens there
    clock = Clock()
    calls = 0

    async def sleep(seconds: float) -> None:
        nonlocal calls
        calls += 1
        clock.advance(seconds)
        await asyncio.sleep(0)

    a = lease(broken, "a", clock, sleep=sleep)
    try:
        assert await a.try_acquire() is False
        stop = asyncio.Event()
        task = asyncio.create_task(a.run(stop))
        while calls < 3:
            await asyncio.sleep(0.01)
        stop.set()
        await asyncio.wait_for(task, timeout=5)
        assert a.held is False
    finally:
        await broken.dispose()


def test_default_holder_is_unique_per_process_start() -> None:
    first, second = default_holder(), default_holder()
    assert first != second and len(first) <= 64
    assert first.split(":")[1].isdigit()


def test_renewing_must_come_before_expiry() -> None:
    with pytest.raises(ValueError, match="renew_every"):
        LeaderLease(db=object(), name="monitors", holder="a", ttl=5, renew_every=5)  # type: ignore[arg-type]
