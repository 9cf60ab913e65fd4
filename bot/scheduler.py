"""What the leader replica runs on a schedule (APScheduler): the monitors (a node sweep every
`monitor.node_sweep_seconds`, the CloudWatch throughput pull, the throughput check (with, for orgs with
per-node metrics, each job alert's culprit and the faulty-node check: bot.monitor.faulty) and, when
`monitor.event_queue_url` is set, a consumer of the EventBridge queue, by long polling) and the weekly digest
with its catch-up. `PITCREW_MONITOR=false` leaves out the monitors, `PITCREW_DIGEST=false` the digest.

A replica that does not hold the lease keeps trying to take it and does nothing else, so a dozen
replicas sweep like one; when the leader dies, another takes over once its lease expires.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol
from zoneinfo import ZoneInfo

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger

from bot.alerts.escalation import Escalation
from bot.capacity.monitor import CHECK_SECONDS as CAPACITY_CHECK_SECONDS
from bot.capacity.monitor import CapacityMonitor
from bot.clusters.fleet import describe_error
from bot.digest.weekly import WeeklyDigest, digest_trigger
from bot.monitor.cloudwatch import CloudWatchPull
from bot.monitor.events import EventQueue
from bot.monitor.jobs import ThroughputMonitor
from bot.monitor.lease import LeaderLease
from bot.monitor.nodes import NodeMonitor

log = logging.getLogger(__name__)
FIRST_SWEEP_DELAY = 5.0  # seconds after start: let the lease settle and the AWS sessions warm up
CATCH_UP_SECONDS = 600  # how often the leader looks for a digest that fell due unposted
# At stop, a job under way (a sweep half through its AWS calls) is waited for this long before it is cancelled: the
# AWS and Slack clients close after it, and a sweep that ran on into closed clients logged every org it had left as
# failing. Below the 30 s that ECS and Kubernetes give a container between SIGTERM and SIGKILL.
STOP_GRACE_SECONDS = 20.0


@dataclass(frozen=True, kw_only=True)
class Monitors:
    """The monitors the leader runs: node sweeps and events, the CloudWatch pull, throughput checks."""

    nodes: NodeMonitor
    throughput: ThroughputMonitor
    cloudwatch: CloudWatchPull
    queue: EventQueue | None = None
    capacity: CapacityMonitor | None = None  # reserved capacity's ending notices
    escalation: Escalation | None = None  # unacknowledged alerts posted again in the coordination channel
    approvals: ApprovalSweep | None = None  # approval requests past their expiry ended (nothing runs)


class ApprovalSweep(Protocol):
    """bot.approvals.desk.ApprovalDesk: ends the requests past their expiry (also checked at every click)."""

    async def sweep(self) -> int: ...


class LeaderScheduler:
    def __init__(
        self,
        *,
        monitors: Monitors | None,
        lease: LeaderLease,
        sweep_seconds: int,
        throughput_seconds: float,
        tz: ZoneInfo,
        digest: WeeklyDigest | None = None,
        stop_grace: float = STOP_GRACE_SECONDS,
    ) -> None:
        self._monitors = monitors
        self._throughput_seconds = throughput_seconds
        self._lease = lease
        self._sweep_seconds = sweep_seconds
        self._tz = tz
        self._digest = digest
        self._stop = asyncio.Event()
        self._stop_grace = stop_grace
        self._stopping = False
        self._running: set[asyncio.Task[object]] = set()  # the jobs under way, waited for at stop
        self._lease_task: asyncio.Task[None] | None = None
        self._consumer: asyncio.Task[None] | None = None
        # Its own thread: a long poll blocks up to 20 s, and the loop's default executor is waited for at exit.
        self._queue_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="events")
        self.scheduler = AsyncIOScheduler(timezone=tz)

    @property
    def lease(self) -> LeaderLease:
        """The lease its jobs run under: "monitor" where the monitors run, else "digest"."""
        return self._lease

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._lease_task = loop.create_task(self._lease.run(self._stop))
        # Each job acts only on the leader; a slow run is not stacked on by the next one (max_instances=1).
        monitors = self._monitors
        jobs: list[tuple[str, Callable[[], Awaitable[object]], float, float]] = (
            [
                ("node sweep", monitors.nodes.sweep, self._sweep_seconds, FIRST_SWEEP_DELAY),
                ("CloudWatch throughput pull", monitors.cloudwatch.pull, self._sweep_seconds, FIRST_SWEEP_DELAY),
                ("throughput check", monitors.throughput.check, self._throughput_seconds, FIRST_SWEEP_DELAY),
            ]
            if monitors
            else []
        )
        if monitors is not None and monitors.capacity is not None:
            jobs.append(("capacity check", monitors.capacity.check, CAPACITY_CHECK_SECONDS, FIRST_SWEEP_DELAY))
        if monitors is not None and monitors.escalation is not None:  # as often as the sweep looks at nodes
            jobs.append(("alert escalation", monitors.escalation.check, self._sweep_seconds, FIRST_SWEEP_DELAY))
        if monitors is not None and monitors.approvals is not None:  # as often as the sweep looks at nodes
            jobs.append(("approval expiry", monitors.approvals.sweep, self._sweep_seconds, FIRST_SWEEP_DELAY))
        for name, work, seconds, first in jobs:
            self.scheduler.add_job(
                self._on_leader,
                IntervalTrigger(seconds=seconds, timezone=self._tz),
                args=(name, work),
                id=name.replace(" ", "_"),
                next_run_time=datetime.now(self._tz) + timedelta(seconds=first),
                max_instances=1,
                coalesce=True,
            )
        if self._digest is not None:
            self._schedule_digest(self._digest)
        self.scheduler.start()
        if monitors is not None and monitors.queue is not None:
            self._consumer = loop.create_task(self._consume(monitors.nodes, monitors.queue))

    def _schedule_digest(self, digest: WeeklyDigest) -> None:
        """The weekly digest at `digest.schedule`, and a catch-up at start and every few minutes, for a digest
        that fell due while no replica was leading (a restart, a failover): both on the leader only."""
        self.scheduler.add_job(
            self._on_leader,
            digest_trigger(digest.schedule, self._tz),
            args=("weekly digest", digest.scheduled),
            id="weekly_digest",
            max_instances=1,
            coalesce=True,
            misfire_grace_time=int(digest.grace.total_seconds()),
        )
        self.scheduler.add_job(
            self._on_leader,
            IntervalTrigger(seconds=CATCH_UP_SECONDS, timezone=self._tz),
            args=("digest catch-up", digest.catch_up),
            id="digest_catch_up",
            next_run_time=datetime.now(self._tz) + timedelta(seconds=FIRST_SWEEP_DELAY),
            max_instances=1,
            coalesce=True,
        )

    async def stop(self) -> None:
        self._stopping = True  # no job starts from here on
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)  # AsyncIOScheduler's jobs are tasks: `wait` waits for none of them
        if self._consumer is not None:
            self._consumer.cancel()  # a long poll may take 20 s to return; its messages come back later
        # The lease is renewed meanwhile, so no other replica starts the same sweep while this one ends it.
        await self._finish_running()
        self._stop.set()
        self._queue_thread.shutdown(wait=False, cancel_futures=True)
        # The lease loop ends on the event and releases the lease, so another replica takes over at once.
        await asyncio.gather(*(t for t in (self._lease_task, self._consumer) if t), return_exceptions=True)

    async def _finish_running(self) -> None:
        """Let the jobs under way finish (their clients still open), for at most `stop_grace`; then cancel them."""
        if not self._running:  # a job leaves the set as it ends (its `finally` in _on_leader)
            return
        _, late = await asyncio.wait(set(self._running), timeout=self._stop_grace)
        for task in late:
            log.warning("stopping: %s cut short after %.0f s", task.get_name(), self._stop_grace)
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)

    async def _on_leader(self, name: str, work: Callable[[], Awaitable[object]]) -> None:
        """Run a scheduled job if this replica leads; a failure is logged and the next run tries again."""
        if not self._lease.held or self._stopping:
            return
        task = asyncio.current_task()
        if task is not None:
            task.set_name(name)
            self._running.add(task)
        try:
            result = await work()
        except Exception:
            log.exception("%s failed", name)
            return
        finally:
            if task is not None:
                self._running.discard(task)
        if result:  # something changed: a report with news, or a count above 0
            log.info("%s: %s", name, result)

    async def _consume(self, monitor: NodeMonitor, queue: EventQueue) -> None:
        while not self._stop.is_set():
            if not self._lease.held:
                await asyncio.sleep(1.0)
                continue
            try:
                received = await asyncio.get_running_loop().run_in_executor(self._queue_thread, queue.receive)
            except Exception as error:
                log.warning("reading the event queue: %s", describe_error(error))
                await asyncio.sleep(5.0)
                continue
            done = []
            for message in received:
                if message.hint is None:
                    if message.problem:
                        log.warning("event %s ignored: %s", message.message_id, message.problem)
                    done.append(message.receipt_handle)
                    continue
                try:
                    outcome = await monitor.handle_event(message.hint)
                except Exception as error:  # left on the queue: it comes back after its visibility timeout
                    log.warning("event %s not handled yet: %s", message.hint.event_id, describe_error(error))
                    continue
                log.info("event %s (%s): %s", message.hint.event_id, message.hint.detail_type, outcome)
                done.append(message.receipt_handle)
            if done:
                try:
                    await asyncio.get_running_loop().run_in_executor(self._queue_thread, queue.delete, done)
                except Exception as error:
                    log.warning("deleting handled events: %s", describe_error(error))
