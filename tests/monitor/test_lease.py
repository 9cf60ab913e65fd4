"""The leader lease: one replica holds it, another takes over after expiry, run() renews and releases.

Expiry is by the database's clock; the replicas' clocks here are injected, some of them minutes off."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text
from sqlmodel import select

from bot.monitor.lease import LeaderLease, default_holder
from storage.db import Database
from storage.models import Lease, utcnow

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


class SkewedClock:
    """Real time, off by a fixed offset (a replica whose clock is wrong)."""

    def __init__(self, offset: timedelta) -> None:
        self.offset = offset

    def __call__(self) -> datetime:
        return utcnow() + self.offset


async def database_now(db: Database) -> datetime:
    async with db.engine.connect() as connection:
        if connection.dialect.name == "postgresql":
            value = (await connection.execute(text("SELECT now()"))).scalar_one()
            return value.astimezone(UTC)
        value = (await connection.execute(text("SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')"))).scalar_one()
        return datetime.fromisoformat(value).replace(tzinfo=UTC)


async def stored_expiry(db: Database) -> datetime:
    async with db.session() as session:
        return (await session.exec(select(Lease).where(Lease.name == "monitors"))).one().expires_at


async def test_a_replica_with_a_fast_clock_cannot_take_a_live_lease(db: Database) -> None:
    a = LeaderLease(db=db, name="monitors", holder="a", ttl=15, renew_every=5, clock=SkewedClock(timedelta(0)))
    fast = SkewedClock(timedelta(minutes=10))  # by b's clock, a's lease ran out ten minutes ago
    b = LeaderLease(db=db, name="monitors", holder="b", ttl=15, renew_every=5, clock=fast)
    assert await a.try_acquire() is True
    assert await b.try_acquire() is False
    assert (a.held, b.held) == (True, False)
    expiry = await stored_expiry(db)
    db_now = await database_now(db)
    assert timedelta(seconds=14) < expiry - db_now <= timedelta(seconds=15), "stored by the database's clock"
    slow = LeaderLease(db=db, name="monitors", holder="c", ttl=15, renew_every=5, clock=SkewedClock(-fast.offset))
    assert await slow.try_acquire() is False, "nor one whose clock runs slow"


async def test_after_the_leader_stops_renewing_another_takes_over_once_the_database_says_it_expired(
    db: Database,
) -> None:
    ttl = 2.0
    # a's clock runs slow: by it, its lease would last ten more minutes; b's runs fast.
    a = LeaderLease(
        db=db, name="monitors", holder="a", ttl=ttl, renew_every=1, clock=SkewedClock(-timedelta(minutes=10))
    )
    b = LeaderLease(
        db=db, name="monitors", holder="b", ttl=ttl, renew_every=1, clock=SkewedClock(timedelta(minutes=10))
    )
    assert await a.try_acquire() is True  # and then a stalls: no renewal
    expiry = await stored_expiry(db)
    refused = 0
    deadline = time.monotonic() + 15
    while True:
        before = await database_now(db)
        won = await b.try_acquire()
        after = await database_now(db)
        if won:
            assert after >= expiry, "taken only once the database's clock passed the expiry"
            break
        assert before <= expiry, "refused only while the lease was live by the database's clock"
        refused += 1
        assert time.monotonic() < deadline, "b never took the expired lease"
        await asyncio.sleep(0.05)
    assert refused >= 1, "b was refused while a's lease was live"
    assert a.held is False, "by its own clock a stops counting as leader when its ttl has run out"
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


async def test_by_default_holding_is_timed_by_a_steady_clock_not_the_wall_clock(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A leader whose wall clock is stepped back (an NTP correction) right after renewing must not count
    itself leader past its ttl: that would make two leaders once the database lets another take over."""
    import bot.monitor.lease as lease_module

    steady = [1000.0]
    monkeypatch.setattr(lease_module.time, "monotonic", lambda: steady[0])
    a = LeaderLease(db=db, name="monitors", holder="a", ttl=15, renew_every=5)
    assert await a.try_acquire() is True and a.held
    steady[0] += 14
    assert a.held
    steady[0] += 2  # 16 s by the steady clock, whatever the wall clock did meanwhile
    assert a.held is False
