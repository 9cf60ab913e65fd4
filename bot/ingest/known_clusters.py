"""Which clusters an org has, for the ingest API's check of each sample's cluster.

The latest node sweep (the `clusters` table) answers first: no AWS call for the clusters it has seen. A
name it has not seen may be a cluster created since the last sweep, so AWS is asked then, through the fleet
(whose own short cache and shared passes apply), and its answer is kept for `cache_seconds`: a job posting
every 30 s with a typo costs one AWS listing a minute, not one per post. A kept listing does not refuse a
name no post was refused for yet (a cluster created since, e.g. launched a minute ago): AWS is asked again
then, at most every `recheck_seconds`.

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

MAX_REFUSED_KEPT = 10_000  # (org, name) pairs remembered as refused; older ones are dropped past this


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
        recheck_seconds: float = 2.0,
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
        self._recheck_seconds = recheck_seconds
        self._refused: dict[tuple[str, str], float] = {}  # (org, cluster name) -> when a post for it was refused

    async def check(self, org_id: str, names: Collection[str]) -> ClusterCheck:
        if not names:
            return ClusterCheck(frozenset(), ())
        async with self._db.session() as session:
            seen = {row.name for row in await crud.clusters_seen(session, org_id=org_id)}
        missing = set(names) - seen
        if not missing:
            return ClusterCheck(frozenset(), tuple(sorted(seen)))
        in_aws, complete = await self._in_aws(org_id, missing)
        unknown = missing - in_aws if complete else set()
        now = self._clock()
        if len(self._refused) > MAX_REFUSED_KEPT:
            self._refused = {k: t for k, t in self._refused.items() if now - t < self._cache_seconds}
        for name in unknown:
            self._refused[(org_id, name)] = now
        return ClusterCheck(frozenset(unknown), tuple(sorted(seen | in_aws)))

    def _needs_a_new_look(self, org_id: str, missing: Collection[str], listing: frozenset[str]) -> bool:
        """A kept listing lacks a name no post was refused for yet: the cluster may have been created since
        (a job on a cluster launched a minute ago must not wait out the cache); asked again unless the listing
        is only seconds old. A name refused already (a typo posted every 30 s) is refused from the cache."""
        asked = self._cache[org_id][0]
        if self._clock() - asked < self._recheck_seconds:
            return False
        return any(
            self._clock() - self._refused.get((org_id, name), -1e18) >= self._cache_seconds
            for name in missing
            if name not in listing
        )

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

    async def _in_aws(self, org_id: str, missing: Collection[str]) -> tuple[frozenset[str], bool]:
        """The org's cluster names in AWS, and whether that is all of them (False: AWS could not say)."""
        cached = self._fresh(org_id)
        again = cached is not None and self._needs_a_new_look(org_id, missing, cached)
        if cached is not None and not again:
            return cached, True
        if self._fleet is None:
            return frozenset(), False
        task = self._pending.get(org_id)
        if task is None:
            # A task of its own, shielded below: a listing this request stops waiting for still completes
            # and is kept for the next post (a slow AWS must not make every post wait, then learn nothing).
            # Asked again for a name the kept listing lacks: past the fleet's own cache too.
            task = asyncio.ensure_future(self._fleet.list_orgs([org_id], fresh=again))
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
