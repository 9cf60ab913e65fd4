"""Stopping the leader's scheduler: a job under way (a sweep half through its AWS calls) ends before the clients
close, within a bound and under the lease, and nothing new starts once stopping has begun."""

from __future__ import annotations

import asyncio
import logging
from zoneinfo import ZoneInfo

import pytest

from bot.monitor.lease import LeaderLease
from bot.scheduler import LeaderScheduler
from storage.db import Database


async def leading_scheduler(db: Database, *, stop_grace: float) -> LeaderScheduler:
    lease = LeaderLease(db=db, name="monitor", holder="replica-a")
    assert await lease.try_acquire()
    scheduler = LeaderScheduler(
        monitors=None, lease=lease, sweep_seconds=60, throughput_seconds=60, tz=ZoneInfo("UTC"), stop_grace=stop_grace
    )
    await scheduler.start()
    return scheduler


class Sweep:
    """A job that waits, as a sweep waits on AWS, until released; it records how it ended."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.ended: list[str] = []

    async def __call__(self) -> int:
        self.entered.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.ended.append("cancelled")
            raise
        self.ended.append("finished")
        return 0


async def test_stop_waits_for_the_job_under_way_and_starts_no_other(db: Database) -> None:
    scheduler = await leading_scheduler(db, stop_grace=30.0)
    sweep = Sweep()
    # The scheduler runs each job through _on_leader (the lease check); a job started as it would be.
    job = asyncio.create_task(scheduler._on_leader("node sweep", sweep))
    await sweep.entered.wait()

    stopping = asyncio.create_task(scheduler.stop())
    done, _ = await asyncio.wait({stopping}, timeout=0.3)
    assert not done, "stop returned while a sweep was still using the clients it closes next"
    other = LeaderLease(db=db, name="monitor", holder="replica-b")
    assert not await other.try_acquire(), "another replica took the lease while this one's sweep was running"
    sweep.release.set()
    await asyncio.wait_for(stopping, timeout=10)
    assert sweep.ended == ["finished"] and job.done()
    assert await other.try_acquire(), "the lease is released once the sweep has ended"

    late = Sweep()
    late.release.set()
    await scheduler._on_leader("node sweep", late)
    assert late.ended == [], "a job started after stop began"


async def test_a_job_that_outlasts_the_grace_is_cancelled_and_named(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    scheduler = await leading_scheduler(db, stop_grace=0.2)
    sweep = Sweep()  # never released: an AWS call that hangs
    job = asyncio.create_task(scheduler._on_leader("throughput check", sweep))
    await sweep.entered.wait()

    with caplog.at_level(logging.WARNING, logger="bot.scheduler"):
        await asyncio.wait_for(scheduler.stop(), timeout=10)
    assert sweep.ended == ["cancelled"] and job.cancelled()
    assert "throughput check cut short" in caplog.text
