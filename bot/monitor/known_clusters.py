"""Which clusters an org has, for the ingest API's check of each sample's cluster.

The latest node sweep (the `clusters` table) answers first: no AWS call for the clusters it has seen. A
name it has not seen may be a cluster created since the last sweep, so AWS is asked then, through the fleet
(whose own short cache and shared passes apply), and its answer is kept for `cache_seconds`: a job posting
every 30 s with a typo costs one AWS listing a minute, not one per post.

When AWS cannot say (unreachable, throttled, one backend failing, slower than `aws_timeout`), the sample is
accepted: losing a job's throughput during an AWS outage is worse than storing a typo now and then.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

from bot.clusters.fleet import OrgClusters
from storage import crud
from storage.db import Database

log = logging.getLogger(__name__)


class ClusterLister(Protocol):
    """What is needed of bot.clusters.fleet.Fleet."""

    async def list_orgs(self, org_ids: Sequence[str], *, fresh: bool = False) -> list[OrgClusters]: ...


@dataclass(frozen=True)
class ClusterCheck:
    unknown: frozenset[str]  # of the names asked about, those the org does not have
    clusters: tuple[str, ...]  # the org's cluster names known (sorted), for the refusal's text


class KnownClusters:
    def __init__(
        self,
        *,
        db: Database,
        fleet: ClusterLister | None,
        cache_seconds: float = 60.0,
        aws_timeout: float = 3.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`fleet` None: no AWS to ask (the sweep alone decides what is known, and the rest is accepted).
        `aws_timeout` bounds the wait for AWS within one request (a training script's POST times out in a
        few seconds); a listing still under way goes on, and its answer serves the next posts."""
        self._db = db
        self._fleet = fleet
        self._cache_seconds = cache_seconds
        self._aws_timeout = aws_timeout
        self._clock = clock
        self._cache: dict[str, tuple[float, frozenset[str]]] = {}  # org -> (asked at, its cluster names in AWS)
        self._warned: dict[str, float] = {}  # org -> when "AWS cannot say" was last logged
        self._pending: dict[str, asyncio.Future[list[OrgClusters]]] = {}  # org -> its listing under way

    async def check(self, org_id: str, names: Collection[str]) -> ClusterCheck:
        if not names:
            return ClusterCheck(frozenset(), ())
        async with self._db.session() as session:
            seen = {row.name for row in await crud.clusters_seen(session, org_id=org_id)}
        missing = set(names) - seen
        if not missing:
            return ClusterCheck(frozenset(), tuple(sorted(seen)))
        in_aws, complete = await self._in_aws(org_id)
        unknown = missing - in_aws if complete else set()
        return ClusterCheck(frozenset(unknown), tuple(sorted(seen | in_aws)))

    def _fresh(self, org_id: str) -> frozenset[str] | None:
        cached = self._cache.get(org_id)
        return cached[1] if cached is not None and self._clock() - cached[0] < self._cache_seconds else None

    def _listed(self, org_id: str, asked: float, task: asyncio.Future[list[OrgClusters]]) -> None:
        """A listing done, whether or not a request still waits for it: a complete one is kept."""
        if self._pending.get(org_id) is task:
            del self._pending[org_id]
        if task.cancelled() or task.exception() is not None:
            return
        [listing] = task.result()
        if not listing.errors:
            self._cache[org_id] = (asked, frozenset(cluster.name for cluster in listing.clusters))

    async def _in_aws(self, org_id: str) -> tuple[frozenset[str], bool]:
        """The org's cluster names in AWS, and whether that is all of them (False: AWS could not say)."""
        cached = self._fresh(org_id)
        if cached is not None:
            return cached, True
        if self._fleet is None:
            return frozenset(), False
        task = self._pending.get(org_id)
        if task is None:
            # A task of its own, shielded below: a listing this request stops waiting for still completes
            # and is kept for the next post (a slow AWS must not make every post wait, then learn nothing).
            task = asyncio.ensure_future(self._fleet.list_orgs([org_id]))
            self._pending[org_id] = task
            task.add_done_callback(functools.partial(self._listed, org_id, self._clock()))
        listing: OrgClusters | None = None
        try:
            [listing] = await asyncio.wait_for(asyncio.shield(task), self._aws_timeout)
        except TimeoutError:
            problem = f"AWS did not answer within {self._aws_timeout:g} s"
        except Exception as error:  # anything the fleet did not turn into an error line: accept, say why
            problem = f"{type(error).__name__}: {error}"
        else:
            problem = "; ".join(listing.errors)
        names = frozenset(cluster.name for cluster in listing.clusters) if listing else frozenset()
        if listing is not None and not listing.errors:
            return names, True
        now = self._clock()
        if now - self._warned.get(org_id, -1e18) >= self._cache_seconds:
            self._warned[org_id] = now
            log.warning("ingest: cannot check %s's cluster names in AWS (%s); accepting them", org_id, problem)
        return names, False
