"""The leader lease: scheduled monitors run only on the replica that holds it.

Several replicas may serve the same Slack app; each would otherwise sweep every cluster and post the same
alert. One row in `leases` names the leader until it expires. The leader renews it every `renew_every`
seconds, well inside `ttl`; when it stops renewing (it crashed, lost the database, or was stopped), another
replica takes over once the lease has expired. A replica that cannot reach the database counts itself as
not holding the lease, and holding also ends by the replica's own clock when a renewal is overdue, so a
stalled leader stops acting as one no later than the others may take over. Acquiring and renewing is one
atomic statement (storage.crud.acquire_lease), so two replicas never both win.

Expiry is stored and compared by the database's clock (`now()` in SQL), which every replica shares; a
replica's own clock only measures how long its last renewal lasts (a duration, which an offset clock
still measures right, and by default a monotonic one, which a stepped wall clock does not move), so a
replica whose clock runs minutes fast cannot take a live lease.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from storage import crud
from storage.db import Database

log = logging.getLogger(__name__)
_STEADY_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


def steady_now() -> datetime:
    """A clock for durations only: time.monotonic as a datetime. The wall clock can be stepped (an NTP
    correction, a VM resumed); stepped back right after a renewal, it would keep a stalled leader counting
    itself leader after the database let another replica take over."""
    return _STEADY_EPOCH + timedelta(seconds=time.monotonic())


def default_holder() -> str:
    """This replica's name for the lease: host, process id and a random part (unique even across restarts
    that reuse a pid, and across containers that share a hostname)."""
    return f"{socket.gethostname()[:40]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class LeaderLease:
    def __init__(
        self,
        *,
        db: Database,
        name: str,
        holder: str,
        ttl: float = 15.0,
        renew_every: float = 5.0,
        clock: Callable[[], datetime] = steady_now,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if not 0 <= renew_every < ttl:
            raise ValueError(f"renew_every ({renew_every}) must be shorter than ttl ({ttl}): renew before expiry")
        self._db = db
        self.name = name
        self.holder = holder
        self._ttl = ttl
        self._renew_every = renew_every
        self._clock = clock
        self._sleep = sleep
        self._held = False
        self._held_until: datetime | None = None

    @property
    def held(self) -> bool:
        """True while the last attempt won the lease and its ttl has not run out since (by this clock)."""
        return self._held and self._held_until is not None and self._clock() < self._held_until

    async def try_acquire(self) -> bool:
        """One attempt to take or renew the lease; a database error counts as not holding it."""
        was_held = self._held
        now = self._clock()
        try:
            async with self._db.session() as session:
                won = await crud.acquire_lease(session, name=self.name, holder=self.holder, ttl_seconds=self._ttl)
        except Exception:
            log.exception("lease %s: could not acquire or renew; not leader until it works again", self.name)
            won = False
        self._held = won
        # Counted from before the attempt (by this replica's clock, which only measures the ttl's length here):
        # never later than the expiry the database recorded by its own clock.
        self._held_until = now + timedelta(seconds=self._ttl) if won else None
        if won and not was_held:
            log.info("lease %s: %s is the leader", self.name, self.holder)
        elif was_held and not won:
            log.warning("lease %s: %s is no longer the leader", self.name, self.holder)
        return won

    async def release(self) -> None:
        """Give the lease up (if held) so another replica takes over without waiting for the expiry."""
        if not self._held:
            return
        self._held = False
        self._held_until = None
        try:
            async with self._db.session() as session:
                await crud.release_lease(session, name=self.name, holder=self.holder)
        except Exception:
            log.exception("lease %s: could not release; it expires on its own", self.name)
        else:
            log.info("lease %s: %s released it", self.name, self.holder)

    async def run(self, stop: asyncio.Event) -> None:
        """Acquire and renew every renew_every seconds until stop is set; then release if held."""
        try:
            while not stop.is_set():
                await self.try_acquire()
                await self._pause(stop)
        finally:
            await self.release()

    async def _pause(self, stop: asyncio.Event) -> None:
        """Sleep renew_every, or less if stop is set meanwhile."""
        sleeper = asyncio.ensure_future(self._sleep(self._renew_every))
        stopper = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({sleeper, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeper, stopper):
                task.cancel()
            await asyncio.gather(sleeper, stopper, return_exceptions=True)
