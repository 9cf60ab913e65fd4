"""Each org's reservations, read through its accounts and kept for a short while (one read serves the
listing, the Home tab, the plans and the notices of the next minute)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bot.capacity.aws import read_reservations
from bot.capacity.model import Reservation
from bot.clusters.accounts import AwsAccounts
from bot.clusters.fleet import Fleet, UnknownOrg, describe_error
from bot.config import ProgramConfig

log = logging.getLogger(__name__)
CACHE_SECONDS = 60.0
READ_SECONDS = 30.0  # an org's whole read (botocore retries within it); past that it counts as unreadable


@dataclass(frozen=True)
class OrgReservations:
    org_id: str
    reservations: tuple[Reservation, ...]
    error: str | None = None  # AWS could not be read: what it said


class CapacityService:
    """`await reservations(org_id)`: the org's reservations, soonest end first (cached CACHE_SECONDS)."""

    def __init__(
        self,
        *,
        program: ProgramConfig,
        accounts: AwsAccounts,
        fleet: Fleet,
        cache_seconds: float = CACHE_SECONDS,
        timeout: float = READ_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._program = program
        self._accounts = accounts
        self._fleet = fleet
        self._cache_seconds = cache_seconds
        self._timeout = timeout
        self._clock = clock
        self._cache: dict[str, tuple[float, list[Reservation]]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def forget(self, org_id: str | None = None) -> None:
        """Read again next time (None: every org)."""
        if org_id is None:
            self._cache.clear()
        else:
            self._cache.pop(org_id, None)

    async def reservations(self, org_id: str) -> list[Reservation]:
        org = self._program.org(org_id)
        if org is None:
            raise UnknownOrg(org_id)
        lock = self._locks.setdefault(org_id, asyncio.Lock())
        async with lock:  # one read per org at a time; the others wait and take it from the cache
            cached = self._cache.get(org_id)
            if cached is not None and self._clock() - cached[0] < self._cache_seconds:
                return list(cached[1])
            (listing,) = await self._fleet.list_orgs([org_id])

            def read() -> list[Reservation]:  # in a worker thread: clients (STS) and every call block
                configuration = getattr(self._fleet.backends(org)[1], "configuration", None)

                def config_of(name: str) -> str | None:
                    if configuration is None:  # no ParallelCluster API: matched by instance type and zone
                        return None
                    try:
                        return str(configuration(name))
                    except Exception as error:  # the targets are then matched by instance type and zone
                        log.warning("capacity: the configuration of %s/%s: %s", org_id, name, describe_error(error))
                        return None

                return read_reservations(
                    org,
                    sagemaker=self._accounts.client(org, "sagemaker"),
                    ec2=self._accounts.client(org, "ec2"),
                    clusters=listing.clusters,
                    configuration=config_of,
                )

            found = await asyncio.wait_for(asyncio.to_thread(read), self._timeout)
            self._cache[org_id] = (self._clock(), found)
            return list(found)

    async def many(self, org_ids: Sequence[str]) -> list[OrgReservations]:
        """Each org's reservations, or what kept them from being read; in the order asked."""

        async def one(org_id: str) -> OrgReservations:
            try:
                return OrgReservations(org_id, tuple(await self.reservations(org_id)))
            except Exception as error:
                log.warning("capacity of %s: %s", org_id, describe_error(error))
                return OrgReservations(org_id, (), describe_error(error))

        return list(await asyncio.gather(*(one(org_id) for org_id in org_ids)))
