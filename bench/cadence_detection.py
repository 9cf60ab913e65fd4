"""Benchmark (not a test), issue 23: slowdowns at every cadence, slow restarts, small lasting drops; today's detector
(the commit before issue 23, `TODAY`, loaded from git) next to Pitcrew's, on the same rows in the same run.

Seeded jobs at one cadence each (10 s, 30 s, 2 min, 5 min; +-10 % jitter), each with its own rate, multiplicative
noise (+-2 % to +-12 %), a +-3 % daily drift and checkpoints (absent for 1-6 minutes, less at a long cadence so
the silence stays under `stall_after`, every 1-2 hours). Per job-week,
injected with known ground truth: one hang (30-60 min absent), one severe slowdown (to 40-55 % for 30-90 min),
one moderate one (to 62-70 % for 30-90 min), one restart that comes back slow on the same nodes (`end`, 10 min, `start`
at 55-68 % of the rate, for 3 hours, then `end`/`start` back at the rate; samples carry `nodes`) and one lasting
drop of 5-8 % for 3-6 hours (a degradation). As many healthy jobs (restarts on the same or on more nodes, no
incidents) give the false alerts: any alert on them, and any alert outside an incident (+2 intervals) on the others.

    .venv/bin/python bench/cadence_detection.py [--jobs 6] [--weeks 1] [--seed 1]
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import random
import statistics
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from stall_detection import load_old_detector, old_factory

from bot.monitor.replay import replay
from bot.monitor.throughput import Thresholds

TODAY = "b25ea98"  # the last commit with the detector before issue 23
CADENCES = (10, 30, 120, 300)
KINDS = ("stall", "slowdown", "moderate", "restart", "degradation")
EXPECTED = {"stall": "stall", "degradation": "degradation"}
EPOCH0 = datetime(2026, 11, 2, tzinfo=UTC).timestamp()
DAY = 86400.0


@dataclass
class Job:
    name: str
    cadence: int
    healthy: bool
    rows: list[tuple[float, float | None, str | None, int]] = field(default_factory=list)
    incidents: list[tuple[str, float, float]] = field(default_factory=list)


def plan(index: int, cadence: int, weeks: int, healthy: bool, rng: random.Random) -> Job:
    job = Job(f"c{cadence}-{'h' if healthy else 'i'}{index:02d}", cadence, healthy)
    rate, noise, phase, nodes = rng.uniform(5e4, 2e6), rng.uniform(0.02, 0.12), rng.random(), 16
    end = EPOCH0 + weeks * 7 * DAY
    # incidents: a day apart, each at least 30 h after the start (a day of calm before a degradation is judged)
    spans: list[tuple[str, float, float, float]] = []  # (kind, start, end, factor)
    if not healthy:
        at = EPOCH0 + 30 * 3600
        for _week in range(weeks):
            for kind in rng.sample(KINDS, len(KINDS)):
                length = {"stall": rng.uniform(30, 60), "restart": 180, "degradation": rng.uniform(180, 360)}.get(
                    kind, rng.uniform(30, 90)
                )
                factor = {
                    "stall": 0.0,
                    "slowdown": rng.uniform(0.4, 0.55),
                    "moderate": rng.uniform(0.62, 0.7),
                    "restart": rng.uniform(0.55, 0.68),
                    "degradation": rng.uniform(0.92, 0.95),
                }[kind]
                spans.append((kind, at, at + length * 60, factor))
                at += 30 * 3600 * rng.uniform(0.9, 1.1) / 1.0
    restarts = [] if not healthy else [EPOCH0 + rng.uniform(1, 6) * DAY for _ in range(rng.randint(1, 2))]
    ts = EPOCH0 + rng.uniform(0, cadence)
    job.rows.append((ts, None, "start", nodes))
    pause_at = ts + rng.uniform(3600, 7200)
    span_i = 0
    while ts < end:
        ts += cadence * rng.uniform(0.9, 1.1)
        while span_i < len(spans) and spans[span_i][2] < ts:
            span_i += 1
        span = spans[span_i] if span_i < len(spans) and spans[span_i][1] <= ts else None
        if restarts and ts >= restarts[0]:
            restarts.pop(0)
            job.rows.append((ts, None, "end", nodes))
            if rng.random() < 0.5:
                rate, nodes = rate * 2, nodes * 2
            ts += 600
            job.rows.append((ts, None, "start", nodes))
            ts += 300
            continue
        if span is not None and span[0] == "restart" and not any(r[2] == "end" and r[0] >= span[1] for r in job.rows):
            job.rows.append((span[1], None, "end", nodes))
            job.rows.append((span[1] + 600, None, "start", nodes))
            ts = span[1] + 900
        if span is not None and span[0] == "restart" and ts >= span[2]:
            job.rows.append((ts, None, "end", nodes))
            ts += 600
            job.rows.append((ts, None, "start", nodes))
            ts += 300
            span_i += 1
            continue
        if ts >= pause_at:
            ts += rng.uniform(60, max(60, 420 - cadence))  # the silence (pause + interval) stays under 10 min
            pause_at = ts + rng.uniform(3600, 7200)
            continue
        if span is not None and span[0] == "stall":
            continue
        factor = span[3] if span is not None else 1.0
        drift = 1 + 0.03 * math.sin(2 * math.pi * (ts / DAY + phase))
        job.rows.append((ts, rate * factor * drift * (1 + rng.uniform(-noise, noise)), None, nodes))
    for kind, start, stop, _ in spans:
        job.incidents.append((kind, start, stop))
    job.rows.sort(key=lambda row: row[0])
    return job


def csv_rows(jobs: list[Job]) -> Iterator[dict[str, str]]:
    merged = sorted((row, job.name) for job in jobs for row in job.rows)
    for (ts, value, event, nodes), name in merged:
        stamp = datetime.fromtimestamp(ts, UTC)
        yield {
            "ts": stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "org": "bench",
            "cluster": "c",
            "job": name,
            "tokens_per_second": "" if value is None else f"{value:.1f}",
            "event": event or "",
            "nodes": str(nodes),
        }


def score(jobs: list[Job], episodes: list[dict[str, object]], weeks: int) -> dict[str, str]:
    by_job: dict[str, list[tuple[float, str]]] = {}
    for e in episodes:
        at = datetime.fromisoformat(str(e["detected_at"])).timestamp()
        by_job.setdefault(str(e["job"]), []).append((at, str(e["kind"])))
    found = {kind: [0, 0] for kind in KINDS}
    delays: dict[str, list[float]] = {kind: [] for kind in KINDS}
    false = degradations = 0
    for job in jobs:
        alerts = sorted(by_job.get(job.name, []))
        used = set()
        for kind, start, stop in job.incidents:
            expected = EXPECTED.get(kind, "slowdown")
            grace = 2 * job.cadence + (1800 if kind == "restart" else 0)
            inside = [(at, k) for at, k in alerts if start <= at <= stop + grace and k == expected]
            used.update(at for at, _ in inside)
            found[kind][1] += 1
            if inside:
                found[kind][0] += 1
                delays[kind].append((inside[0][0] - start) / 60)
        for at, k in alerts:
            if at not in used and not any(s <= at <= e + 2 * job.cadence for _, s, e in job.incidents):
                if k == "degradation":
                    degradations += 1
                else:
                    false += 1
    cells = {}
    for kind in KINDS:
        f, t = found[kind]
        d = sorted(delays[kind])
        cells[kind] = f"{f}/{t}" + (f", {statistics.median(d):.0f}/{d[-1]:.0f} min" if d else "")
    job_weeks = len(jobs) * weeks
    cells["false"] = f"{false / job_weeks:.2f}"
    cells["degr"] = f"{degradations / job_weeks:.2f}"
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=6, help="jobs with incidents per cadence (as many healthy)")
    parser.add_argument("--weeks", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(f"{platform.node()} · {platform.machine()} · {os.cpu_count()} cpus · Python {platform.python_version()}")
    today = old_factory(load_old_detector(TODAY))
    print(
        "| cadence | detector | hangs | severe (40-55%) | moderate (62-70%) | slow restart (55-68%) "
        "| degradation (5-8%) | false alerts / job-week | degradation notices / job-week, healthy |"
    )
    print("|---" * 9 + "|")
    for cadence in CADENCES:
        rng = random.Random(args.seed * 1009 + cadence)
        jobs = [plan(i, cadence, args.weeks, False, rng) for i in range(args.jobs)]
        healthy = [plan(i, cadence, args.weeks, True, rng) for i in range(args.jobs)]
        for name, factory in (("Pitcrew", None), (f"today ({TODAY})", today)):
            rows = list(csv_rows(jobs + healthy))
            episodes = list(
                replay(rows, Thresholds()) if factory is None else replay(rows, Thresholds(), detector=factory)
            )
            got = score(jobs, episodes, args.weeks)
            quiet = score(healthy, episodes, args.weeks)
            cells = [got[k] for k in KINDS]
            false = float(got["false"]) * len(jobs) + float(quiet["false"]) * len(healthy)
            print(
                f"| {cadence} s | {name} | "
                + " | ".join(cells)
                + f" | {false / (len(jobs) + len(healthy)):.2f} | {quiet['degr']} |"
            )
    print("\ncells: told/injected, delay p50/max from the incident's start (a slow restart: from its `start`)")


if __name__ == "__main__":
    main()
