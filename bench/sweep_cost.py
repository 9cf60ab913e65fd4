"""Benchmark (not a test): what one node-monitor sweep costs in AWS calls and wall time, next to a per-node sweep.

Every `monitor.node_sweep_seconds` the node monitor reads every org's clusters and nodes. Pitcrew reads a
HyperPod org with ListClusters (pages), then per cluster DescribeCluster and ListClusterNodes in pages of
100; a ParallelCluster org without its API with DescribeInstances (pages, by tag) and DescribeInstanceStatus
in batches of 100. So its calls should grow with clusters and pages, not with nodes. The peer, measured in
the same run on the same clients, is a naive per-node monitor: the same listing, then one describe per node
(HyperPod DescribeClusterNode; for an EC2-read ParallelCluster node, DescribeInstanceStatus of that one
instance).

Two workloads, each against a moto server in this process (`start_moto_server`, with Pitcrew's patches):

1. The sandbox program: program.example.yml seeded with `seed_program` (12 orgs, both backends, about
   150 nodes, with its injected faults). Each org's `parallelcluster_api` is dropped, so ParallelCluster
   clusters are read from EC2 tags and no API emulator is needed. One sweep is `Fleet.list_orgs(every org)`
   on a Fleet built as bot/app.py's `build_services` builds it (AwsAccounts + Fleet with the default
   Settings), with the cache off (cache_seconds=0); the peer runs its orgs on a thread pool of the same
   size. One sweep before timing builds clients and assumes roles.
2. One account with CLUSTERS HyperPod clusters of NODES ml.p5.48xlarge nodes each (one instance group;
   default 100 x 100 = 10,000 nodes), created once per run (the seeding time is printed). One sweep is
   `HyperPodBackend(org_id=..., sagemaker=client).list_clusters()`, in one thread, as the Fleet runs one org.

AWS calls are counted by operation with botocore `before-call` hooks on the clients' event emitters
(`before-send`, one per HTTP attempt, is counted too, so retries would show). Ours and the peer alternate
within each repetition (which goes first alternates too), so machine noise hits both alike. Printed per
workload: calls by operation, total calls and HTTP sends, wall time p50 (and min/max), ms per call, and
the naive/ours ratios of calls and of p50 time.

moto answers in this process, on the same cores, so a call costs a few milliseconds of CPU here where AWS
would cost a network round trip; the call counts carry over to AWS unchanged, the times only as ratios.

    .venv/bin/python bench/sweep_cost.py [--clusters 100 --nodes 100 --repeat 3 --program-repeat 15]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import boto3

from bot.clusters.accounts import CLIENT_CONFIG, AwsAccounts
from bot.clusters.fleet import Fleet
from bot.clusters.hyperpod import ORG_TAG, HyperPodBackend
from bot.clusters.model import Backend, Cluster
from bot.config import ProgramConfig, Settings, load_program
from sandbox.moto_support import reset_moto_server, start_moto_server
from sandbox.seed import seed_program
from sandbox.world import EXAMPLE_PROGRAM, aws_environment

BIG_REGION = "us-east-1"
BIG_ORG = "bench-org"
BIG_TYPE = "ml.p5.48xlarge"


class CallCounter:
    """AWS calls by "service:Operation" (before-call) and HTTP attempts (before-send), from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: Counter[str] = Counter()
        self._sends = 0

    def attach(self, events: Any) -> None:
        """Hook an event emitter: a botocore/boto3 session's (clients made later copy it) or a client's."""
        events.register("before-call", self._on_call)
        events.register("before-send", self._on_send)

    def _on_call(self, model: Any, **_: Any) -> None:  # must return None, or botocore skips the call
        with self._lock:
            self._calls[f"{model.service_model.service_name}:{model.name}"] += 1

    def _on_send(self, **_: Any) -> None:
        with self._lock:
            self._sends += 1

    def take(self) -> tuple[Counter[str], int]:
        """The calls and sends since the last take, and start counting afresh."""
        with self._lock:
            calls, sends = self._calls, self._sends
            self._calls, self._sends = Counter(), 0
        return calls, sends


@dataclass
class Sweep:
    seconds: float
    calls: Counter[str]
    sends: int
    clusters: int
    nodes: int


@dataclass
class Side:
    sweeps: list[Sweep]

    @property
    def p50(self) -> float:
        return statistics.median(s.seconds for s in self.sweeps)

    @property
    def total(self) -> int:
        return sum(self.sweeps[-1].calls.values())


def describe_each_node(backend: Any, clusters: Sequence[Cluster], sagemaker: Any, ec2: Any) -> None:
    """The naive monitor's extra: one describe per node, after the listing."""
    for cluster in clusters:
        for node in cluster.nodes:
            if backend.backend is Backend.HYPERPOD:
                sagemaker.describe_cluster_node(ClusterName=cluster.name, NodeId=node.node_id)
            else:
                ec2.describe_instance_status(InstanceIds=[node.node_id], IncludeAllInstances=True)


def timed(counter: CallCounter, run: Callable[[], list[Cluster]]) -> Sweep:
    counter.take()
    started = time.perf_counter()
    clusters = run()
    seconds = time.perf_counter() - started
    calls, sends = counter.take()
    return Sweep(seconds, calls, sends, len(clusters), sum(len(c.nodes) for c in clusters))


async def timed_async(counter: CallCounter, run: Callable[[], Any]) -> Sweep:
    counter.take()
    started = time.perf_counter()
    clusters: list[Cluster] = await run()
    seconds = time.perf_counter() - started
    calls, sends = counter.take()
    return Sweep(seconds, calls, sends, len(clusters), sum(len(c.nodes) for c in clusters))


def alternate(repeat: int, ours: Callable[[], Sweep], naive: Callable[[], Sweep]) -> tuple[Side, Side]:
    sides = (Side([]), Side([]))
    for round_ in range(repeat):
        order = [(0, ours), (1, naive)] if round_ % 2 == 0 else [(1, naive), (0, ours)]
        for index, run in order:
            sides[index].sweeps.append(run())
    return sides


def report(title: str, ours: Side, naive: Side) -> dict[str, float]:
    for side in (ours, naive):  # the same AWS state every time: the counts must not move between sweeps
        if len({tuple(sorted(s.calls.items())) for s in side.sweeps}) != 1:
            print(f"  note: call counts varied between sweeps: {[sum(s.calls.values()) for s in side.sweeps]}")
    last = ours.sweeps[-1]
    print(f"\n{title}: {last.clusters} clusters, {last.nodes} nodes per sweep; {len(ours.sweeps)} sweeps each")
    operations = sorted(set(ours.sweeps[-1].calls) | set(naive.sweeps[-1].calls))
    print(f"  {'calls per sweep':<40} {'ours':>8} {'naive':>8}")
    for op in operations:
        print(f"  {op:<40} {ours.sweeps[-1].calls.get(op, 0):>8} {naive.sweeps[-1].calls.get(op, 0):>8}")
    print(f"  {'total calls':<40} {ours.total:>8} {naive.total:>8}")
    print(f"  {'HTTP sends (retries would show here)':<40} {ours.sweeps[-1].sends:>8} {naive.sweeps[-1].sends:>8}")
    for name, side in (("ours", ours), ("naive", naive)):
        times = [s.seconds * 1000 for s in side.sweeps]
        print(
            f"  wall time {name:<6} p50 {side.p50 * 1000:9.1f} ms  (min {min(times):.1f}, max {max(times):.1f})"
            f"  {side.p50 * 1000 / side.total:.2f} ms per call"
        )
    ratios = {"calls": naive.total / ours.total, "time": naive.p50 / ours.p50}
    print(f"  naive / ours: calls x{ratios['calls']:.1f}, p50 time x{ratios['time']:.1f}")
    return ratios


# --- workload 1: the sandbox program ------------------------------------------------------------------


def program_without_api() -> ProgramConfig:
    """The example program with no ParallelCluster API: its clusters are read from EC2 tags."""
    return load_program(EXAMPLE_PROGRAM).with_aws(
        lambda org: {"parallelcluster_api": None} if org.aws.parallelcluster_api else {}
    )


async def program_sweeps(repeat: int, counter: CallCounter) -> tuple[Side, Side]:
    program = program_without_api()
    settings = Settings(pitcrew_cache_seconds=0.0)
    base = boto3.Session()
    counter.attach(base.events)  # every org client is made from this session, after this line
    accounts = AwsAccounts(base_session=base)
    fleet = Fleet(  # as build_services builds it
        program=program,
        accounts=accounts,
        concurrency=settings.pitcrew_org_concurrency,
        timeout=settings.pitcrew_org_timeout,
        cache_seconds=settings.pitcrew_cache_seconds,
    )
    org_ids = [org.id for org in program.orgs]
    pool = ThreadPoolExecutor(max_workers=settings.pitcrew_org_concurrency, thread_name_prefix="naive")

    async def ours() -> list[Cluster]:
        listings = await fleet.list_orgs(org_ids)
        errors = [f"{listing.org}: {error}" for listing in listings for error in listing.errors]
        if errors:
            raise RuntimeError(f"sweep had errors: {errors}")
        return [cluster for listing in listings for cluster in listing.clusters]

    def naive_org(org_id: str) -> list[Cluster]:
        org = program.org(org_id)
        assert org is not None
        found: list[Cluster] = []
        for backend in fleet.backends(org):  # the same clients and listing as ours
            clusters = backend.list_clusters()
            sagemaker = accounts.client(org, "sagemaker")
            ec2 = accounts.client(org, "ec2")
            describe_each_node(backend, clusters, sagemaker, ec2)
            found += clusters
        return found

    async def naive() -> list[Cluster]:
        loop = asyncio.get_running_loop()
        parts = await asyncio.gather(*(loop.run_in_executor(pool, naive_org, org_id) for org_id in org_ids))
        return [cluster for part in parts for cluster in part]

    try:
        await ours()  # warm-up: assume every role, build every client, load service models
        await naive()
        sides: tuple[Side, Side] = (Side([]), Side([]))
        for round_ in range(repeat):
            order = [(0, ours), (1, naive)] if round_ % 2 == 0 else [(1, naive), (0, ours)]
            for index, run in order:
                sides[index].sweeps.append(await timed_async(counter, run))
        return sides
    finally:
        fleet.close()
        pool.shutdown()


# --- workload 2: many big HyperPod clusters in one account --------------------------------------------


def seed_big(client: Any, clusters: int, nodes: int) -> float:
    started = time.perf_counter()
    account = "123456789012"
    for index in range(clusters):
        client.create_cluster(
            ClusterName=f"sweep-{index:03d}",
            InstanceGroups=[
                {
                    "InstanceGroupName": "workers",
                    "InstanceType": BIG_TYPE,
                    "InstanceCount": nodes,
                    "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-bench-lifecycle/", "OnCreate": "on_create.sh"},
                    "ExecutionRole": f"arn:aws:iam::{account}:role/SageMakerHyperPodExecutionRole",
                    "ThreadsPerCore": 1,
                }
            ],
            VpcConfig={"SecurityGroupIds": ["sg-0123456789abcdef0"], "Subnets": ["subnet-0123456789abcdef0"]},
            Orchestrator={"Slurm": {"SlurmConfigStrategy": "Managed"}},
            NodeRecovery="Automatic",
            Tags=[{"Key": ORG_TAG, "Value": BIG_ORG}],
        )
    return time.perf_counter() - started


def big_sweeps(endpoint: str, clusters: int, nodes: int, repeat: int, counter: CallCounter) -> tuple[Side, Side]:
    reset_moto_server(endpoint)  # workload 1's clusters are gone: this account holds only ours
    client = boto3.Session().client("sagemaker", region_name=BIG_REGION, config=CLIENT_CONFIG)
    seconds = seed_big(client, clusters, nodes)
    print(f"\nseeded {clusters} HyperPod clusters x {nodes} nodes in {seconds:.2f} s", flush=True)
    counter.attach(client.meta.events)
    backend = HyperPodBackend(org_id=BIG_ORG, sagemaker=client)

    def naive() -> list[Cluster]:
        found = backend.list_clusters()
        describe_each_node(backend, found, client, None)
        return found

    backend.list_clusters()  # warm-up
    return alternate(repeat, lambda: timed(counter, backend.list_clusters), lambda: timed(counter, naive))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clusters", type=int, default=100, help="HyperPod clusters in workload 2")
    parser.add_argument("--nodes", type=int, default=100, help="nodes per cluster in workload 2")
    parser.add_argument("--repeat", type=int, default=3, help="sweeps of each kind in workload 2")
    parser.add_argument("--program-repeat", type=int, default=15, help="sweeps of each kind in workload 1")
    args = parser.parse_args()
    print(
        f"{platform.node()} · {platform.machine()} · {os.cpu_count()} cpus · Python {platform.python_version()}"
        f" · {platform.platform()}"
    )
    started = time.perf_counter()
    server, endpoint = start_moto_server()
    try:
        with aws_environment(endpoint):
            report_seed = seed_program(load_program(EXAMPLE_PROGRAM), endpoint_url=endpoint)
            print(f"seeded the example program ({len(report_seed.clusters)} clusters) in {report_seed.seconds:.1f} s")
            counter = CallCounter()
            ours, naive = asyncio.run(program_sweeps(args.program_repeat, counter))
            report("1. sandbox program, Fleet.list_orgs(12 orgs), cache off", ours, naive)
            big_counter = CallCounter()
            ours, naive = big_sweeps(endpoint, args.clusters, args.nodes, args.repeat, big_counter)
            report(
                f"2. {args.clusters} HyperPod clusters x {args.nodes} nodes, HyperPodBackend.list_clusters()",
                ours,
                naive,
            )
    finally:
        server.stop()
    print(f"\nwhole run: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
