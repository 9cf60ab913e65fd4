"""The fleet against a seeded moto: concurrency, the short-lived cache, one AWS pass for concurrent asks."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import boto3

from bot.clusters.accounts import AwsAccounts
from bot.clusters.fleet import Fleet
from bot.config import ProgramConfig
from tests.conftest import SeededAws


def without_pcluster_api(program: ProgramConfig) -> ProgramConfig:
    """Every org read through EC2 tags: these tests are about the fleet, not the ParallelCluster API."""
    return program.with_aws(lambda _: {"parallelcluster_api": None})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class InFlight:
    """Requests on the wire at once (inside the added round trip), and the most there were."""

    now: int = 0
    peak: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def counting_accounts(
    network_delay: float = 0.0, in_flight: InFlight | None = None
) -> tuple[AwsAccounts, Counter[str]]:
    """AwsAccounts whose every AWS operation is counted, through botocore's own event hooks, and that
    can add a network round trip's delay to every request (moto answers in-process, far faster than AWS),
    counting the requests in that round trip together in `in_flight`."""
    calls: Counter[str] = Counter()
    session = boto3.Session()
    wire = in_flight or InFlight()

    def count(model: Any, **_: Any) -> None:
        calls[model.name] += 1

    def delay(**_: Any) -> None:
        with wire.lock:
            wire.now += 1
            wire.peak = max(wire.peak, wire.now)
        time.sleep(network_delay)
        with wire.lock:
            wire.now -= 1

    session.events.register("before-call", count)
    if network_delay:
        session.events.register("before-send", delay)
    return AwsAccounts(base_session=session), calls


async def test_concurrent_asks_share_one_pass_and_the_cache_expires(seeded_aws: SeededAws) -> None:
    accounts, calls = counting_accounts()
    clock = Clock()
    fleet = Fleet(program=without_pcluster_api(seeded_aws.program), accounts=accounts, cache_seconds=10, clock=clock)
    orgs = [org.id for org in seeded_aws.program.orgs]
    try:
        first, second = await asyncio.gather(fleet.list_orgs(orgs), fleet.list_orgs(orgs))
        one_pass = calls["ListClusters"]
        assert one_pass == len(orgs)  # one HyperPod ListClusters per org, although asked twice at once
        assert [r.clusters for r in first] == [r.clusters for r in second]
        assert not any(r.errors for r in first)
        clock.now += 9
        cached = await fleet.list_orgs(orgs)
        assert calls["ListClusters"] == one_pass and all(r.cached for r in cached)
        found = await fleet.find("kumo-p5-train", orgs)  # served from the listing too
        assert [c.ref for c in found.found] == ["kumo-labs/kumo-p5-train"] and calls["DescribeCluster"] == len(
            [c for c in seeded_aws.report.clusters if c.backend == "hyperpod"]
        )
        clock.now += 2
        fresh = await fleet.list_orgs(orgs)
        assert calls["ListClusters"] == 2 * one_pass and not any(r.cached for r in fresh)
    finally:
        fleet.close()


async def test_no_cache_asks_every_time_and_all_orgs_at_once(seeded_aws: SeededAws) -> None:
    wire = InFlight()
    accounts, calls = counting_accounts(network_delay=0.1, in_flight=wire)  # a cross-region round trip
    fleet = Fleet(program=without_pcluster_api(seeded_aws.program), accounts=accounts, cache_seconds=0)
    orgs = [org.id for org in seeded_aws.program.orgs]
    try:
        await fleet.warm()  # roles assumed (every org's at once), clients built: what a running bot has
        wire.peak = 0
        await fleet.list_orgs(["kumo-labs"])
        await fleet.list_orgs(["kumo-labs"])
        assert calls["ListClusters"] == 2
        assert wire.peak == 1, "one org asks one request at a time"
        results = await fleet.list_orgs(orgs)
        assert len(results) == 12 and not any(r.errors for r in results)
        assert calls["ListClusters"] == 2 + len(orgs)
        # All at once: the orgs' requests were on the wire together, so a sweep costs about one org's round trips,
        # not twelve. Counted, not timed (a timed bound, together < 0.4 x one by one, failed on a loaded machine,
        # where the CPU that moto and botocore spend per call outweighs the round trip). Threads that start a
        # little apart still overlap inside a 0.1 s round trip.
        assert wire.peak >= len(orgs) // 2, wire.peak
    finally:
        fleet.close()
