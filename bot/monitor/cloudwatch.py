"""Throughput pulled from CloudWatch: an org's `throughput: {namespace, metric, dimensions}` source read with
get_metric_data on the monitor schedule, stored like samples posted to the ingest API (same table, same
one-minute rollups), so the stall detector cannot tell them apart.

A dimension value "*" is a wildcard: list_metrics resolves it into the concrete metrics (one per cluster or
job, say), and each becomes its own (cluster, job) series. Datapoints are one-minute averages, stamped with
the start of their minute. A pull resumes each series after its newest stored sample, so pulling twice
stores nothing twice (the rollups add up whatever is stored, and would double count).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.clusters.accounts import AwsAccounts
from bot.config import OrgConfig, ProgramConfig, ThroughputSource
from storage import crud
from storage.db import Database
from storage.models import ThroughputSample, utcnow

log = logging.getLogger(__name__)

WILDCARD = "*"
PERIOD = 60  # seconds: one datapoint per minute, the rollups' grain
STAT = "Average"
MAX_QUERIES = 500  # MetricDataQueries per get_metric_data call (the API's limit)
RECENTLY_ACTIVE = "PT3H"  # list_metrics's only choice: skip metrics of jobs that ended long ago
CLUSTER_DIMENSIONS = ("Cluster", "ClusterName")
JOB_DIMENSIONS = ("Job", "JobName")
UNKNOWN_CLUSTER = "unknown"
_NOT_CLUSTER = re.compile(r"[^A-Za-z0-9-]")
_NOT_JOB = re.compile(r"[^A-Za-z0-9._:/-]")
_MINUTE = timedelta(minutes=1)


def _utc(at: datetime) -> datetime:
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def floor_minute(at: datetime) -> datetime:
    return _utc(at).replace(second=0, microsecond=0)


def ceil_minute(at: datetime) -> datetime:
    floored = floor_minute(at)
    return floored if floored == _utc(at) else floored + _MINUTE


def _metric_key(dimensions: Sequence[dict[str, str]], metric_name: str) -> tuple[str, str]:
    """(cluster, job) of one concrete metric, in the characters and lengths the samples table allows."""
    values = {d["Name"]: d["Value"] for d in dimensions}
    cluster_dim = next((name for name in CLUSTER_DIMENSIONS if values.get(name)), None)
    job_dim = next((name for name in JOB_DIMENSIONS if values.get(name)), None)
    cluster = values[cluster_dim] if cluster_dim else UNKNOWN_CLUSTER
    if job_dim:
        job = values[job_dim]
    else:
        rest = [values[name] for name in sorted(values) if name != cluster_dim and values[name]]
        job = "/".join(rest) or metric_name
    cluster = _NOT_CLUSTER.sub("-", cluster)[:63] or UNKNOWN_CLUSTER
    job = _NOT_JOB.sub("-", job)[:128] or "-"
    return cluster, job


def _concrete_metrics(cloudwatch: Any, source: ThroughputSource) -> list[list[dict[str, str]]]:
    """The dimension lists of the metrics the source names: itself when no value is a wildcard, else every
    metric list_metrics finds with the fixed values and any value of the wildcard dimensions (metrics that
    carry more dimensions, such as Job under {Cluster: "*"}, included)."""
    if WILDCARD not in source.dimensions.values():
        return [[{"Name": name, "Value": value} for name, value in source.dimensions.items()]]
    filters = [
        {"Name": name} if value == WILDCARD else {"Name": name, "Value": value}
        for name, value in source.dimensions.items()
    ]
    found: list[list[dict[str, str]]] = []
    seen: set[tuple[tuple[str, str], ...]] = set()
    request: dict[str, Any] = {
        "Namespace": source.namespace,
        "MetricName": source.metric,
        "Dimensions": filters,
        "RecentlyActive": RECENTLY_ACTIVE,
    }
    for page in cloudwatch.get_paginator("list_metrics").paginate(**request):
        for metric in page.get("Metrics", []):
            dimensions = [{"Name": d["Name"], "Value": d["Value"]} for d in metric.get("Dimensions", [])]
            key = tuple(sorted((d["Name"], d["Value"]) for d in dimensions))
            if key not in seen:
                seen.add(key)
                found.append(dimensions)
    return found


def _chunks(items: Sequence[Any], size: int) -> Iterator[tuple[int, Sequence[Any]]]:
    for start in range(0, len(items), size):
        yield start, items[start : start + size]


def read_metric(
    cloudwatch: Any, source: ThroughputSource, *, org_id: str, since: datetime, until: datetime
) -> list[ThroughputSample]:
    """The source's one-minute averages in [since, until) as samples, in time order per series (synchronous:
    boto3; run it in a worker thread). Only whole minutes are read: since is rounded up and until down to
    the minute, as CloudWatch itself would round a start time down (and so return a minute before since)."""
    start, end = ceil_minute(since), floor_minute(until)
    if start >= end:
        return []
    metrics = _concrete_metrics(cloudwatch, source)
    now = utcnow()
    found: list[ThroughputSample] = []
    for offset, batch in _chunks(metrics, MAX_QUERIES):
        queries = [
            {
                "Id": f"m{offset + index}",
                "MetricStat": {
                    "Metric": {"Namespace": source.namespace, "MetricName": source.metric, "Dimensions": dims},
                    "Period": PERIOD,
                    "Stat": STAT,
                },
                "ReturnData": True,
            }
            for index, dims in enumerate(batch)
        ]
        keys = {query["Id"]: _metric_key(dims, source.metric) for query, dims in zip(queries, batch, strict=True)}
        request: dict[str, Any] = {
            "MetricDataQueries": queries,
            "StartTime": start,
            "EndTime": end,
            "ScanBy": "TimestampAscending",
        }
        while True:
            answer = cloudwatch.get_metric_data(**request)
            for result in answer.get("MetricDataResults", []):
                cluster, job = keys[result["Id"]]
                for ts, value in zip(result.get("Timestamps", []), result.get("Values", []), strict=False):
                    at = _utc(ts)
                    if start <= at < end:
                        found.append(
                            ThroughputSample(
                                org_id=org_id,
                                cluster=cluster,
                                job=job,
                                ts=at,
                                tokens_per_second=float(value),
                                received_at=now,
                            )
                        )
            token = answer.get("NextToken")
            if not token:
                break
            request["NextToken"] = token
    # Pages of one query continue its series: order by time per series, whatever order the pages came in.
    found.sort(key=lambda sample: (sample.cluster, sample.job, sample.ts))
    return found


def _describe(error: BaseException) -> str:
    """The error's class and, for an AWS error, its code: one line for the log."""
    response = getattr(error, "response", None)
    code = response.get("Error", {}).get("Code") if isinstance(response, dict) else None
    return f"{type(error).__name__} ({code})" if code else type(error).__name__


class CloudWatchPull:
    """Pulls every org's CloudWatch throughput source into the samples table."""

    def __init__(
        self,
        *,
        db: Database,
        accounts: AwsAccounts,
        program: ProgramConfig,
        clock: Callable[[], datetime] = utcnow,
        lookback: timedelta = timedelta(minutes=30),
    ) -> None:
        self._db = db
        self._accounts = accounts
        self._program = program
        self._clock = clock
        self._lookback = lookback

    async def pull(self) -> int:
        """Every org with a `throughput` source: new datapoints read and stored; how many stored in all.
        One org's failure is logged and leaves the others be."""
        orgs = [org for org in self._program.orgs if org.throughput is not None]
        if not orgs:
            return 0
        now = _utc(self._clock())
        stored = await asyncio.gather(*(self._pull_org(org, now) for org in orgs))
        return sum(stored)

    async def _pull_org(self, org: OrgConfig, now: datetime) -> int:
        source = org.throughput
        assert source is not None
        try:
            oldest = now - self._lookback
            async with self._db.session() as session:
                latest = await crud.latest_sample_times(session, org_id=org.id, since=oldest)

            def read() -> list[ThroughputSample]:
                cloudwatch = self._accounts.client(org, "cloudwatch")  # may assume the org's role: blocking
                return read_metric(cloudwatch, source, org_id=org.id, since=oldest, until=now)

            pulled = await asyncio.to_thread(read)
            # Each series resumes after its newest stored sample (the read starts at the oldest any series
            # may need, as a wildcard can bring series never seen before).
            second = timedelta(seconds=1)
            new = [
                sample
                for sample in pulled
                if sample.ts >= max(oldest, latest.get((sample.cluster, sample.job), oldest - second) + second)
            ]
            if not new:
                return 0
            async with self._db.session() as session:
                return await crud.add_samples(session, samples=new)
        except Exception as error:
            log.warning("CloudWatch throughput pull of %s failed: %s", org.id, _describe(error))
            return 0
