"""One throughput check's reads of per-node metrics: each cluster's read at most once per check, over the
widest window any of its users asked for, and shared by them (the culprit of each job episode of that
cluster, and the faulty-node check).

Users first say what they want (`want`), then take it (`get`): the first `get` of a cluster reads
[earliest wanted start, end] from its org's Prometheus (bot.node_metrics.prometheus, the one layer that talks
to it), and every later `get` is served from that read, trimmed to its own window. A `get` asking for more
than was wanted reads again (so nothing is ever cut short), which the monitors avoid by wanting first.

A read that fails is remembered for the check as `ReadFailed` (one line: which URL, what went wrong), logged
once, and not retried within the check: the users say it in their alerts instead of a culprit."""

from __future__ import annotations

import asyncio
import logging
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol

from bot.node_metrics.prometheus import MetricsError
from bot.node_metrics.series import ClusterMetrics

log = logging.getLogger(__name__)


class MetricsReader(Protocol):
    """What is needed of bot.node_metrics.prometheus.PrometheusReader."""

    async def cluster_metrics(self, cluster: str, *, start: datetime, end: datetime) -> ClusterMetrics: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class ReadFailed:
    """Per-node metrics could not be read: `reason` is the one line MetricsError gave."""

    reason: str


def within(metrics: ClusterMetrics, *, start: datetime, end: datetime) -> ClusterMetrics:
    """The part of `metrics` in [start, end]; series with no sample there are left out. Times are ascending
    (series.py), so each series is cut by bisection, and one wholly inside is kept as it is."""
    low, high = start.timestamp(), end.timestamp()
    kept = []
    for one in metrics.series:
        first, last = bisect_left(one.times, low), bisect_right(one.times, high)
        if first >= last:
            continue
        if first == 0 and last == len(one.times):
            kept.append(one)
        else:
            kept.append(replace(one, times=one.times[first:last], values=one.values[first:last]))
    return replace(metrics, start=max(start, metrics.start), end=min(end, metrics.end), series=tuple(kept))


class MetricsReads:
    def __init__(self, *, readers: Mapping[str, MetricsReader], end: datetime) -> None:
        """`readers`: one per org with metrics (bot.node_metrics.prometheus.reader_for); `end`: the check's now."""
        self._readers = readers
        self._end = end
        self._wanted: dict[tuple[str, str], datetime] = {}
        self._read: dict[tuple[str, str], tuple[datetime, ClusterMetrics | ReadFailed]] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}
        self.reads: Counter[tuple[str, str]] = Counter()  # (org, cluster) -> reads this check (tests bound it)

    def has_metrics(self, org_id: str) -> bool:
        return org_id in self._readers

    def want(self, org_id: str, cluster: str, *, start: datetime) -> None:
        """Ask for [start, end] of a cluster, to be read by the first `get` of it; nothing for an org without
        metrics."""
        if org_id not in self._readers:
            return
        key = (org_id, cluster)
        self._wanted[key] = min(start, self._wanted.get(key, start))

    async def read_wanted(self, *, at_once: int = 4) -> None:
        """Read every cluster wanted, `at_once` at a time, so a check with many clusters waits for the slowest
        few rather than for all of them in turn."""
        gate = asyncio.Semaphore(at_once)

        async def one(org_id: str, cluster: str, start: datetime) -> None:
            async with gate:
                await self.get(org_id, cluster, start=start)

        await asyncio.gather(*(one(org, cluster, start) for (org, cluster), start in self._wanted.items()))

    async def get(self, org_id: str, cluster: str, *, start: datetime) -> ClusterMetrics | ReadFailed | None:
        """The cluster's metrics over [start, end], or why they could not be read; None when its org has no
        metrics (nothing to say)."""
        reader = self._readers.get(org_id)
        if reader is None:
            return None
        key = (org_id, cluster)
        async with self._locks.setdefault(key, asyncio.Lock()):
            done = self._read.get(key)
            if done is None or (done[0] > start and not isinstance(done[1], ReadFailed)):
                begin = min(start, self._wanted.get(key, start), done[0] if done else start)
                self._read[key] = done = (begin, await self._fetch(reader, org_id, cluster, begin))
        found = done[1]
        return found if isinstance(found, ReadFailed) else within(found, start=start, end=self._end)

    async def _fetch(
        self, reader: MetricsReader, org_id: str, cluster: str, start: datetime
    ) -> ClusterMetrics | ReadFailed:
        self.reads[(org_id, cluster)] += 1
        try:
            return await reader.cluster_metrics(cluster, start=start, end=self._end)
        except MetricsError as error:
            reason = str(error).splitlines()[0] if str(error) else type(error).__name__
            log.warning("per-node metrics of %s/%s could not be read: %s", org_id, cluster, reason)
            return ReadFailed(reason)
        except Exception as error:  # a reader's bug must not stop the check: logged whole, said in one line
            log.exception("reading per-node metrics of %s/%s failed", org_id, cluster)
            return ReadFailed(f"{type(error).__name__}: {error}".splitlines()[0][:300])
