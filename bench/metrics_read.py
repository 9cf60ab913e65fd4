"""Benchmark (not a test): how long reading one cluster's per-node metrics takes, before and after the faster
reader, side by side in the same run against the same real Prometheus.

One generated cluster (`sandbox.node_metrics.NodeMetricsSimulator`, 32 P5 nodes x 8 GPUs x 4 EFA devices,
1,920 series) over 4 hours at 30-second steps, backfilled into a real Prometheus (`sandbox.prometheus`:
promtool, then /usr/bin/prometheus on a free port). Read with `PrometheusReader.cluster_metrics` over the last
10 minutes, 2 hours and 4 hours of it:

- **before**: bot/node_metrics/prometheus.py as it was at OLD_READER (a float() per point in Python), loaded
  from git history (`git show`) as a module of its own;
- **after, cold**: today's reader, nothing remembered (a restart, the replay, the first check);
- **after, next check**: today's reader as the live monitor has it (`remember=True`, `reader_for`): the same
  window read a minute earlier, so only the last REREAD + 1 minute is asked of Prometheus.

And `bot.monitor.metrics_reads.within` (a ClusterMetrics cut to a window) on a day of the same cluster, cut to
its last 70 minutes (an episode's healthy hour and its first 10 minutes), before (OLD_WITHIN, a Python loop
over every sample) and after (bisection).

Each figure is the median of --runs runs, the before and after runs interleaved so that the machine's load
falls on both alike; every answer of today's reader is checked equal to the old reader's.

    .venv/bin/python bench/metrics_read.py [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.config import MetricsConfig  # noqa: E402
from bot.monitor.metrics_reads import within  # noqa: E402
from bot.node_metrics.prometheus import PrometheusReader  # noqa: E402
from bot.node_metrics.series import ClusterMetrics  # noqa: E402
from sandbox.node_metrics import NodeMetricsSimulator  # noqa: E402
from sandbox.prometheus import openmetrics, prometheus_server  # noqa: E402

OLD_READER = "b7f8886"  # the last commit of bot/node_metrics/prometheus.py before the numpy parse
OLD_WITHIN = "28b8c7d"  # the last commit of bot/monitor/metrics_reads.py before the bisection
NODES = 32
HOURS = 4
STEP = 30.0
END = datetime(2026, 11, 30, 12, tzinfo=UTC)
WINDOWS = (timedelta(minutes=10), timedelta(hours=2), timedelta(hours=4))
CLUSTER = "p5-train"


def load_old(commit: str, path: str) -> ModuleType:
    """`path` as it was at `commit`, from git history, as a module of its own."""
    try:
        source = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{commit}:{path}"], check=True, capture_output=True, text=True
        ).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        raise SystemExit(f"cannot read {path} from git ({commit}): {error}") from None
    spec = importlib.util.spec_from_loader(f"{Path(path).stem}_at_{commit}", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    exec(compile(source, f"{commit}:{path}", "exec"), module.__dict__)
    return module


def simulated(hours: float) -> ClusterMetrics:
    nodes = [f"i-{index:017x}" for index in range(NODES)]
    simulator = NodeMetricsSimulator(cluster=CLUSTER, nodes=nodes, seed=1)
    end = END.timestamp()
    return simulator.series(start=end - hours * 3600, end=end, step=STEP)


async def timed(action: Awaitable[Any]) -> tuple[float, Any]:
    """How long awaiting `action` (a coroutine: it starts running only when awaited) takes, and its answer."""
    began = time.perf_counter()
    answer = await action
    return time.perf_counter() - began, answer


def points(metrics: ClusterMetrics) -> int:
    return sum(len(one.times) for one in metrics.series)


async def reads(url: str, runs: int) -> list[tuple[str, int, int, float, float, float]]:
    old_module = load_old(OLD_READER, "bot/node_metrics/prometheus.py")
    config = MetricsConfig(prometheus_url=url)
    old = old_module.PrometheusReader(config=config)
    cold = PrometheusReader(config=config)
    live = PrometheusReader(config=config, remember=True)
    rows = []
    try:
        for window in WINDOWS:
            start, end = END - window, END
            before, after, next_check = [], [], []
            answer: ClusterMetrics | None = None
            for _ in range(runs):
                took, expected = await timed(old.cluster_metrics(CLUSTER, start=start, end=end))
                before.append(took)
                took, answer = await timed(cold.cluster_metrics(CLUSTER, start=start, end=end))
                after.append(took)
                if answer != expected:
                    raise SystemExit(f"today's reader answers otherwise than {OLD_READER}'s over {window}")
                # The check a minute before (not timed), then this one.
                await live.cluster_metrics(CLUSTER, start=start, end=end - timedelta(minutes=1))
                took, incremental = await timed(live.cluster_metrics(CLUSTER, start=start, end=end))
                next_check.append(took)
                if incremental != expected:
                    raise SystemExit(f"the remembering reader answers otherwise than a full read over {window}")
            assert answer is not None
            minutes = window.total_seconds() / 60
            label = f"{minutes / 60:g} h" if minutes >= 60 else f"{minutes:g} min"
            rows.append(
                (
                    label,
                    len(answer.series),
                    points(answer),
                    statistics.median(before),
                    statistics.median(after),
                    statistics.median(next_check),
                )
            )
    finally:
        for reader in (old, cold, live):
            await reader.aclose()
    return rows


def cuts(runs: int) -> tuple[int, float, float]:
    old_within = load_old(OLD_WITHIN, "bot/monitor/metrics_reads.py").within
    day = simulated(24)
    start, end = END - timedelta(minutes=70), END
    before, after = [], []
    for _ in range(runs):
        began = time.perf_counter()
        expected = old_within(day, start=start, end=end)
        before.append(time.perf_counter() - began)
        began = time.perf_counter()
        cut = within(day, start=start, end=end)
        after.append(time.perf_counter() - began)
        if cut != expected:
            raise SystemExit("today's within cuts otherwise than the old one")
    return points(day), statistics.median(before), statistics.median(after)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each read; the median is reported")
    args = parser.parse_args()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC · {platform.node()} · {platform.machine()} · "
        f"{os.cpu_count()} cpus · load {load:.1f} · Python {platform.python_version()}"
    )
    history = simulated(HOURS)
    print(f"cluster: {NODES} nodes x 8 GPUs x 4 EFA, {len(history.series):,} series, {HOURS} h at {STEP:g} s")
    with prometheus_server(history=openmetrics([history])) as url:
        rows = asyncio.run(reads(url, args.runs))
    print(f"\nPrometheusReader.cluster_metrics, median of {args.runs} (seconds)")
    print("| window | series | points | before | after, cold | after, next check (remembered) |")
    print("|---|---|---|---|---|---|")
    for label, series, count, before, after, next_check in rows:
        print(
            f"| {label} | {series:,} | {count:,} | {before:.2f} | {after:.2f} ({before / after:.1f}x) "
            f"| {next_check:.2f} ({before / next_check:.1f}x) |"
        )
    count, before, after = cuts(args.runs)
    print(f"\nwithin: a day ({count:,} points) cut to its last 70 minutes, median of {args.runs} (seconds)")
    print("| before | after |")
    print("|---|---|")
    print(f"| {before:.3f} | {after:.4f} ({before / after:,.0f}x) |")


if __name__ == "__main__":
    main()
