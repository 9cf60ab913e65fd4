"""Benchmark (not a test): does the throughput detector catch hangs and slowdowns, quickly, and stay quiet otherwise?

Seeded traces of training jobs at 30-second cadence, each job with its own life:

- a rate of its own (50k-2M tokens/s), multiplicative noise of +-3% to +-15%, a +-5% daily drift;
- a `start`, then 2-12 minutes with no sample (initialising, compiling) and a 5-minute ramp from 10%;
- a checkpoint every 40-120 minutes and an evaluation every 3-8 hours, each a pause of 1-8 minutes that
  the job reports as zeros (half of the jobs) or not at all; the sample before and after a pause is partial;
- 1-3 restarts a week (`end`, 3-30 minutes down, `start`, warm-up), a third on more nodes (x1.5 or x2),
  one in ten on fewer (x0.75);
- injected, with known ground truth: 2 hangs a week (20-90 minutes of no samples, or zeros in 3 of 10;
  then the job resumes, or in half of them the operator sends `end` and restarts it) and 2 slowdowns
  (to 20-55% of the rate, for 20-120 minutes; checkpoints go on during them). Incidents start at least
  90 minutes after a start and 3 hours apart.

Both detectors see the same rows in the same run:

- **Pitcrew**: `bot.monitor.replay.replay` over the rows as CSV dicts (default thresholds: stall after
  10 min, drop ratio 0.6, sustain 5 min), exactly what `pitcrew throughput replay` runs.
- **Static alarm** (CloudWatch style): the threshold is half the median of the job's first hour of samples;
  one-minute datapoints (the mean of the minute's samples); missing data treated as breaching; ALARM when 5
  of 5 datapoints breach, OK at the first one that does not. Each OK -> ALARM is one alert. It does not see
  `start`/`end` (a CloudWatch alarm does not know about them).

An alert detected between an incident's start and its end (+1 minute) counts for that incident; the first one
gives the delay (from the incident's start: the first 30-second tick with no progress, or the first slow
one). Any other alert is a false alert. Printed: recall, median and max delay per kind, false alerts per
job-week, and for Pitcrew whether the alert named the right kind. `--sweep` also runs Pitcrew with
stall_after 6 and 8 minutes on the same traces, to show what a shorter stall_after costs.

    .venv/bin/python bench/stall_detection.py [--jobs 100] [--weeks 2] [--seed 1] [--sweep]
"""

from __future__ import annotations

import argparse
import heapq
import math
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.monitor.replay import replay
from bot.monitor.throughput import Thresholds

T0 = datetime(2026, 11, 2, tzinfo=UTC)  # a Monday
EPOCH0 = T0.timestamp()
TICK = 30  # seconds
PER_MIN = 60 // TICK
GRACE = 60  # seconds after an incident's end during which an alert still counts for it


@dataclass
class Incident:
    job: int
    kind: str  # "stall" | "slowdown"
    start: float  # epoch seconds
    end: float


@dataclass
class Job:
    index: int
    name: str
    offset: int  # seconds after each tick
    mult: list[float | None]  # per tick: rate x factors, or None for no sample
    events: dict[int, str]
    noise: float
    drift_phase: float
    incidents: list[Incident] = field(default_factory=list)
    restarts: int = 0
    quiet: list[tuple[float, float, str]] = field(default_factory=list)  # healthy but quiet: restarts, pauses


def minutes(m: float) -> int:
    return round(m * PER_MIN)


def plan_job(index: int, ticks: int, rng: random.Random) -> Job:
    """One job's whole trace, as a rate multiplier per tick plus events, with its incidents."""
    mult: list[float | None] = [None] * ticks
    events: dict[int, str] = {}
    blocked = bytearray(ticks)  # 1 where pauses may not go (down, warming up, hanging)
    job = Job(index, f"job-{index:03d}", rng.randrange(TICK), mult, events, rng.uniform(0.03, 0.15), rng.random())
    level = rng.uniform(5e4, 2e6)

    def run_from(start: int, level: float, until: int) -> int:
        """A start at `start`, running to `until`: no samples while initialising, then a ramp; returns when the
        ramp ends."""
        events[start] = "start"
        init = minutes(rng.uniform(2, 12))
        ramp = minutes(5)
        for i in range(start, min(until, start + init + ramp)):
            blocked[i] = 1
        for i in range(start + init, until):
            mult[i] = level
        for k in range(ramp):
            if start + init + k < until:
                mult[start + init + k] = level * (0.1 + 0.9 * k / ramp)
        return start + init + ramp

    # restarts: 1-3 a week, at least 12 hours apart and away from the ends of the trace
    weeks = ticks / minutes(7 * 24 * 60)
    count = sum(rng.randint(1, 3) for _ in range(math.ceil(weeks)))
    restarts: list[int] = []
    for _ in range(10_000):
        if len(restarts) == count:
            break
        r = rng.randrange(minutes(6 * 60), ticks - minutes(6 * 60))
        if all(abs(r - other) > minutes(12 * 60) for other in restarts):
            restarts.append(r)
    restarts.sort()
    job.restarts = len(restarts)
    starts, ends, levels = [0], [*restarts, ticks], [level]
    for r in restarts:
        gap = minutes(rng.uniform(3, 30))
        roll = rng.random()
        level *= 1.5 if roll < 0.17 else 2.0 if roll < 0.33 else 0.75 if roll < 0.43 else 1.0
        starts.append(r + gap)
        levels.append(level)
    ready = []
    for seg, (start, end, seg_level) in enumerate(zip(starts, ends, levels, strict=True)):
        ready.append(run_from(start, seg_level, end))
        if seg:
            job.quiet.append((tick_time(job, ends[seg - 1]), tick_time(job, ready[-1]), "restart"))
        if seg + 1 < len(starts):
            events[end] = "end"
            for i in range(end, starts[seg + 1]):
                blocked[i] = 1

    # incidents: 2 hangs and 2 slowdowns a week, >= 90 min after a start (2 h after the first), 3 h apart
    wanted = ["stall", "slowdown"] * round(2 * weeks)
    placed: list[tuple[int, int, str]] = []  # (tick, segment, kind)
    for kind in wanted:
        for _ in range(10_000):
            seg = rng.randrange(len(starts))
            lo = starts[seg] + minutes(120 if seg == 0 else 90)
            hi = ends[seg] - minutes(150)
            if hi <= lo:
                continue
            at = rng.randrange(lo, hi)
            if all(abs(at - other) >= minutes(180) for other, _, _ in placed):
                placed.append((at, seg, kind))
                break
    # hangs first, in time order: an operator's restart after a hang refills the rest of its segment
    for at, seg, kind in sorted(placed, key=lambda p: (p[2] != "stall", p[0])):
        if kind == "stall":
            duration = minutes(rng.uniform(20, 90))
            zeros = rng.random() < 0.3
            for i in range(at - minutes(15), at + duration + minutes(15)):
                blocked[i] = 1
            for i in range(at, at + duration):
                mult[i] = 0.0 if zeros else None
            if rng.random() < 0.5:  # the operator ends the job and restarts it
                stop = at + duration
                events[stop] = "end"
                gap = minutes(rng.uniform(2, 5))
                for i in range(stop, stop + gap):
                    mult[i] = None
                back = run_from(stop + gap, levels[seg], ends[seg])
                for i in range(stop, back + minutes(15)):
                    blocked[i] = 1
        else:
            duration = minutes(rng.uniform(20, 120))
            factor = rng.uniform(0.2, 0.55)
            for i in range(at, at + duration):
                m = mult[i]
                if m is not None:
                    mult[i] = m * factor
        job.incidents.append(Incident(index, kind, tick_time(job, at), tick_time(job, at + duration)))
    job.incidents.sort(key=lambda incident: incident.start)

    # pauses: checkpoints and evaluations, 1-8 minutes, at least 15 minutes apart, never in the blocked ticks
    zeros = rng.random() < 0.5
    pauses: list[tuple[int, int]] = []
    every = minutes(rng.uniform(40, 120))
    at = ready[0] + every
    while at < ticks:
        pauses.append((at, minutes(rng.uniform(1, 8))))
        at += round(every * rng.uniform(0.95, 1.05))
    every = minutes(rng.uniform(180, 480))
    at = ready[0] + every
    while at < ticks:
        pauses.append((at, minutes(rng.uniform(2, 8))))
        at += every
    pauses.sort()
    last_end = -minutes(60)
    for at, length in pauses:
        if at - last_end < minutes(15) or at + length + 1 >= ticks or any(blocked[at - 1 : at + length + 1]):
            continue
        last_end = at + length
        job.quiet.append((tick_time(job, at), tick_time(job, at + length), "pause"))
        for i in range(at, at + length):
            mult[i] = 0.0 if zeros and mult[i] is not None else None
        for edge in (at - 1, at + length):
            m = mult[edge]
            if m:
                mult[edge] = m * rng.uniform(0.2, 1.0)
    return job


def tick_time(job: Job, tick: int) -> float:
    return EPOCH0 + tick * TICK + job.offset


def job_rows(job: Job, seed: int) -> Iterator[tuple[float, int, float | None, str | None]]:
    """(epoch seconds, job index, value, event) in time order."""
    rng = random.Random(seed * 1_000_003 + job.index)
    noise, phase = job.noise, job.drift_phase
    day = 24 * 3600
    for tick, m in enumerate(job.mult):
        ts = EPOCH0 + tick * TICK + job.offset
        event = job.events.get(tick)
        if event is not None:
            yield ts, job.index, None, event
        elif m is not None:
            drift = 1 + 0.05 * math.sin(2 * math.pi * (ts / day + phase))
            yield ts, job.index, m * drift * (1 + rng.uniform(-noise, noise)), None


def all_rows(jobs: list[Job], seed: int) -> Iterator[tuple[float, int, float | None, str | None]]:
    return heapq.merge(*(job_rows(job, seed) for job in jobs))


def as_csv_rows(jobs: list[Job], seed: int) -> Iterator[dict[str, str]]:
    names = [job.name for job in jobs]
    cache: dict[float, str] = {}
    for ts, index, value, event in all_rows(jobs, seed):
        text = cache.get(ts)
        if text is None:
            if len(cache) > 10_000:
                cache.clear()
            text = cache[ts] = datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        yield {
            "ts": text,
            "org": "bench",
            "cluster": "p5",
            "job": names[index],
            "tokens_per_second": "" if value is None else f"{value:.1f}",
            "event": event or "",
        }


def pitcrew_alerts(jobs: list[Job], seed: int, thresholds: Thresholds) -> tuple[list[tuple[int, float, str]], float]:
    index = {job.name: job.index for job in jobs}
    started = time.perf_counter()
    alerts = [
        (index[e["job"]], datetime.fromisoformat(e["detected_at"]).timestamp(), e["kind"])
        for e in replay(as_csv_rows(jobs, seed), thresholds)
    ]
    return alerts, time.perf_counter() - started


class StaticAlarm:
    """CloudWatch style: 5 of 5 one-minute datapoints below half the early median; missing data breaches."""

    def __init__(self) -> None:
        self.first: float | None = None
        self.early: list[float] = []
        self.threshold: float | None = None
        self.minute: int | None = None  # the minute being accumulated
        self.total = 0.0
        self.count = 0
        self.run = 0
        self.alarm = False
        self.alerts: list[float] = []

    def sample(self, ts: float, value: float) -> None:
        if self.threshold is None:
            if self.first is None:
                self.first = ts
            if ts - self.first < 3600:
                if value > 0:
                    self.early.append(value)
                return
            self.threshold = statistics.median(self.early) / 2
            self.minute = int(ts // 60)
        self.close_until(int(ts // 60))
        self.total += value
        self.count += 1

    def close_until(self, minute: int) -> None:
        """Evaluate every datapoint before `minute`."""
        if self.minute is None or self.threshold is None:
            return
        while self.minute < minute:
            breaching = self.count == 0 or self.total / self.count < self.threshold
            if breaching:
                self.run += 1
                if self.run >= 5 and not self.alarm:
                    self.alarm = True
                    self.alerts.append((self.minute + 1) * 60.0)  # the datapoint is complete at the minute's end
            else:
                self.run = 0
                self.alarm = False
            self.minute += 1
            self.total, self.count = 0.0, 0


def static_alerts(jobs: list[Job], seed: int, ticks: int) -> tuple[list[tuple[int, float, str]], float]:
    started = time.perf_counter()
    alarms = [StaticAlarm() for _ in jobs]
    for ts, index, value, _event in all_rows(jobs, seed):
        if value is not None:
            alarms[index].sample(ts, value)
    end_minute = int((EPOCH0 + ticks * TICK) // 60)
    alerts: list[tuple[int, float, str]] = []
    for index, alarm in enumerate(alarms):
        alarm.close_until(end_minute)
        alerts += [(index, at, "alarm") for at in alarm.alerts]
    return alerts, time.perf_counter() - started


@dataclass
class Score:
    recall: dict[str, tuple[int, int]]
    delays: dict[str, list[float]]
    right_kind: int
    matched: int
    false_alerts: int
    extra_alerts: int
    causes: dict[str, int]


def score(jobs: list[Job], incidents: list[Incident], alerts: list[tuple[int, float, str]]) -> Score:
    quiet = [job.quiet for job in jobs]
    by_job: dict[int, list[tuple[float, str]]] = {}
    for job, at, kind in alerts:
        by_job.setdefault(job, []).append((at, kind))
    used: set[tuple[int, float]] = set()
    recall = {"stall": (0, 0), "slowdown": (0, 0)}
    delays: dict[str, list[float]] = {"stall": [], "slowdown": []}
    right_kind = matched = extra = 0
    for incident in incidents:
        inside = sorted(
            (at, kind) for at, kind in by_job.get(incident.job, []) if incident.start <= at <= incident.end + GRACE
        )
        found, total = recall[incident.kind]
        recall[incident.kind] = (found + bool(inside), total + 1)
        for at, _ in inside:
            used.add((incident.job, at))
        if inside:
            matched += 1
            extra += len(inside) - 1
            delays[incident.kind].append((inside[0][0] - incident.start) / 60)
            right_kind += inside[0][1] == incident.kind
    causes: dict[str, int] = {}
    for job, at, _ in alerts:
        if (job, at) in used:
            continue
        # what was the job doing in the 10 minutes before the alert?
        cause = next((kind for start, end, kind in quiet[job] if start - 60 <= at and end >= at - 600), "running")
        causes[cause] = causes.get(cause, 0) + 1
    return Score(recall, delays, right_kind, matched, sum(causes.values()), extra, causes)


def delays(values: list[float]) -> str:
    if not values:
        return "n/a"
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return f"{statistics.median(ordered):.2f} / {p90:.2f} / {ordered[-1]:.2f}"


def report(name: str, result: Score, job_weeks: float, rate: float) -> None:
    cells = [name]
    for kind in ("stall", "slowdown"):
        found, total = result.recall[kind]
        cells += [f"{found}/{total} ({100 * found / total:.1f}%)", delays(result.delays[kind])]
    causes = ", ".join(f"{count} {cause}" for cause, count in sorted(result.causes.items())) or "none"
    cells += [f"{result.false_alerts / job_weeks:.2f} ({causes})", f"{rate:,.0f}"]
    print("| " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--weeks", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sweep", action="store_true", help="also run Pitcrew with stall_after 6 and 8 minutes")
    args = parser.parse_args()
    print(f"{platform.node()} · {platform.machine()} · {os.cpu_count()} cpus · Python {platform.python_version()}")
    ticks = minutes(args.weeks * 7 * 24 * 60)
    rng = random.Random(args.seed)
    started = time.perf_counter()
    jobs = [plan_job(index, ticks, random.Random(rng.random())) for index in range(args.jobs)]
    incidents = [incident for job in jobs for incident in job.incidents]
    rows = sum(1 for _ in all_rows(jobs, args.seed))
    job_weeks = args.jobs * args.weeks
    hangs = sum(i.kind == "stall" for i in incidents)
    print(
        f"{args.jobs} jobs x {args.weeks} weeks = {job_weeks} job-weeks, {rows:,} rows, "
        f"{sum(job.restarts for job in jobs)} restarts, {hangs} hangs, {len(incidents) - hangs} slowdowns "
        f"(planned in {time.perf_counter() - started:.1f} s)"
    )
    runs: list[tuple[str, Thresholds | None]] = [("Pitcrew (10 / 0.6 / 5 min)", Thresholds())]
    if args.sweep:
        runs += [
            ("Pitcrew, stall_after 8 min", Thresholds(stall_after=timedelta(minutes=8))),
            ("Pitcrew, stall_after 6 min", Thresholds(stall_after=timedelta(minutes=6))),
        ]
    runs.append(("static alarm (5 of 5, 1 min)", None))
    print(
        "\n| detector | hangs found | hang delay p50 / p90 / max (min) | slowdowns found "
        "| slowdown delay p50 / p90 / max (min) | false alerts per job-week (what the job was doing) | rows/s |"
    )
    print("|---|---|---|---|---|---|---|")
    notes = []
    for name, thresholds in runs:
        if thresholds is None:
            alerts, elapsed = static_alerts(jobs, args.seed, ticks)
        else:
            alerts, elapsed = pitcrew_alerts(jobs, args.seed, thresholds)
        result = score(jobs, incidents, alerts)
        report(name, result, job_weeks, rows / elapsed)
        kind = f"named the right kind for {result.right_kind} of {result.matched}; " if thresholds else ""
        notes.append(f"{name}: {kind}{result.extra_alerts} extra alerts within incidents; {elapsed:.1f} s")
    print("\nrows/s include generating the rows (and, for Pitcrew, formatting them as CSV dicts and parsing them)")
    for note in notes:
        print(note)


if __name__ == "__main__":
    main()
