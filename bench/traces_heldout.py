"""A second, independent trace generator for `bench/stall_detection.py`: a held-out check, never tuned on.

It shares nothing with the main generator but the output format, and its noise model is different on purpose:

- cadence: each job reports every 10-60 s (its own), each interval jittered +-30%;
- noise: log-throughput is the job's level plus an autocorrelated wander (AR(1), correlation time 2-20 minutes,
  1-4 %) plus heavy-tailed sample noise (Student's t with 3 degrees of freedom, scale 1.5-6 %, clipped at
  +-35 %);
- data-mix shifts: every 2-10 hours the rate steps to 0.92-1.08 of the job's nominal rate, and stays there;
- dropped samples (1-3 % of them), exporter gaps of 1-4 minutes (a few a day), bursts of 2-5 duplicate rows
  (the same ts and value, 0.5 % of samples);
- checkpoints every 30-90 minutes (1-5 minutes, zeros or absent, partial samples either side) and long
  evaluation pauses every 6-12 hours (5-9 minutes, always absent);
- restarts (`end`, 5-40 minutes down, `start`, 1-15 minutes initialising, a 3-10 minute ramp), 1-4 a week, on
  0.5-2 x the nodes (which the samples' `nodes` say, as the README's client does: issue 23's rule tells a restart
  at half the rate without `nodes` as slow from the start);
- incidents, a week: 2 hangs (15-120 minutes; zeros or absent), 2 severe slowdowns (to 15-55 % for 15-90
  minutes), 2 moderate ones (to 61-70 % for 20-150 minutes) and 2 gradual ones (a linear decline to 50 % over
  1-3 hours, 20-60 minutes there, then back).

    from traces_heldout import plan_heldout
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

DAY = 24 * 3600.0
WEEK = 7 * DAY
DRIFT_CAP = 0.08  # the third generator's drift within a run stops here: a run that declines further is slow
KINDS = ("stall", "slowdown", "moderate", "gradual")


@dataclass
class Incident:
    job: int
    kind: str  # "stall" | "slowdown" | "moderate" | "gradual"
    start: float  # epoch seconds
    end: float
    decline: float = 0.0  # gradual: seconds from the start to 50 %


class Spans:
    """Sorted (start, end) spans, asked about in time order: amortised O(1) a question."""

    def __init__(self, spans: list[tuple[float, float]]) -> None:
        self.spans = sorted(spans)
        self.i = 0

    def at(self, ts: float) -> tuple[float, float] | None:
        spans = self.spans
        while self.i < len(spans) and spans[self.i][1] <= ts:
            self.i += 1
        j = self.i
        while j < len(spans) and spans[j][0] <= ts:  # spans may overlap
            if ts < spans[j][1]:
                return spans[j]
            j += 1
        return None


NODES = 16  # each job's first run; a restart on 0.5-2 x the nodes says so in its samples' `nodes` (issue 23)


def nodes_at(runs: list[tuple[float, int]], ts: float) -> int:
    """The nodes of the run under way at `ts` (the first run's before it began)."""
    at = bisect.bisect_right([start for start, _ in runs], ts) - 1
    return runs[max(0, at)][1] if runs else NODES


@dataclass
class HeldOutJob:
    index: int
    name: str
    seed: int
    epoch0: float
    seconds: float
    incidents: list[Incident] = field(default_factory=list)
    quiet: list[tuple[float, float, str]] = field(default_factory=list)  # healthy but quiet: restarts, pauses
    restarts: int = 0
    # the plan: (start, end, factor-or-None) spans that multiply the rate; None is "no sample"; 0.0 is zeros
    segments: list[tuple[float, float, float]] = field(default_factory=list)  # (start, end, rate) of each run
    events: list[tuple[float, str]] = field(default_factory=list)
    silent: list[tuple[float, float]] = field(default_factory=list)  # no samples
    zeros: list[tuple[float, float]] = field(default_factory=list)  # samples of 0
    edges: list[float] = field(default_factory=list)  # partial samples here (either side of a pause)
    ramps: list[tuple[float, float]] = field(default_factory=list)
    shifts: list[tuple[float, float]] = field(default_factory=list)  # (from, factor): data-mix steps
    nodes: list[tuple[float, int]] = field(default_factory=list)  # (start, nodes) of each run, as its samples say

    def nodes_at(self, ts: float) -> int:
        return nodes_at(self.nodes, ts)

    def factor(self, ts: float) -> float:
        """The incidents' multiplier at ts (1.0 outside them)."""
        for incident in self.incidents:
            if incident.start <= ts < incident.end:
                if incident.kind in ("slowdown", "moderate"):
                    return incident.decline  # the depth, stored there for these kinds
                if incident.kind == "gradual":
                    return max(0.5, 1 - 0.5 * (ts - incident.start) / incident.decline)
        return 1.0

    def rows(self) -> Iterator[tuple[float, int, float | None, str | None]]:
        rng = random.Random(self.seed)
        cadence = rng.uniform(10, 60)
        white = rng.uniform(0.015, 0.06)
        wander = rng.uniform(0.01, 0.04)
        tau = rng.uniform(120, 1200)
        drop = rng.uniform(0.01, 0.03)
        ar = 0.0
        silent, zeros = Spans(self.silent), Spans(self.zeros)
        edges = Spans([(e - cadence, e + cadence) for e in self.edges])
        events = sorted(self.events)
        ev = 0
        shifts = sorted(self.shifts)
        sh, mix = 0, 1.0
        ts = self.epoch0 + rng.uniform(0, cadence)
        end = self.epoch0 + self.seconds
        last = ts
        while ts < end:
            while ev < len(events) and events[ev][0] <= ts:
                yield events[ev][0], self.index, None, events[ev][1]
                ev += 1
            while sh < len(shifts) and shifts[sh][0] <= ts:
                mix = shifts[sh][1]
                sh += 1
            dt = ts - last
            last = ts
            rho = math.exp(-dt / tau)
            ar = rho * ar + math.sqrt(1 - rho * rho) * rng.gauss(0, wander)
            level = self._level(ts)
            if level is not None and silent.at(ts) is None and rng.random() >= drop:
                if zeros.at(ts) is not None:
                    value = 0.0
                else:
                    chi2 = sum(rng.gauss(0, 1) ** 2 for _ in range(3))
                    t3 = rng.gauss(0, 1) / math.sqrt(chi2 / 3)  # Student's t, 3 degrees of freedom
                    noise = max(-0.35, min(0.35, white * t3))
                    value = level * mix * self.factor(ts) * math.exp(ar + noise)
                    if edges.at(ts) is not None:
                        value *= rng.uniform(0.2, 1.0)
                copies = rng.randint(2, 5) if rng.random() < 0.005 else 1
                for _ in range(copies):
                    yield ts, self.index, value, None
            ts += cadence * rng.uniform(0.7, 1.3)
        while ev < len(events):
            yield events[ev][0], self.index, None, events[ev][1]
            ev += 1

    def _level(self, ts: float) -> float | None:
        for start, stop, rate in self.segments:
            if start <= ts < stop:
                for a, b in self.ramps:
                    if a <= ts < b:
                        return rate * (0.1 + 0.9 * (ts - a) / (b - a))
                return rate
        return None


def plan_heldout(index: int, epoch0: float, weeks: int, seed: int) -> HeldOutJob:
    rng = random.Random(seed)
    seconds = weeks * WEEK
    job = HeldOutJob(index, f"held-{index:03d}", rng.randrange(2**31), epoch0, seconds)
    rate = rng.uniform(3e4, 3e6)
    # runs: restarts 1-4 a week, at least 10 hours apart
    cuts: list[float] = []
    for _ in range(sum(rng.randint(1, 4) for _ in range(weeks))):
        for _ in range(1000):
            at = epoch0 + rng.uniform(6 * 3600, seconds - 6 * 3600)
            if all(abs(at - c) > 10 * 3600 for c in cuts):
                cuts.append(at)
                break
    cuts.sort()
    job.restarts = len(cuts)
    busy: list[tuple[float, float]] = []  # where nothing else may go: down, warming up, incidents
    begin = epoch0
    runs: list[tuple[float, float]] = []
    scale = 1.0
    for stop in [*cuts, epoch0 + seconds]:
        job.events.append((begin, "start"))
        job.nodes.append((begin, max(1, round(NODES * scale))))
        init = rng.uniform(60, 900)
        ramp = rng.uniform(180, 600)
        job.ramps.append((begin + init, begin + init + ramp))
        job.segments.append((begin + init, stop, rate))
        busy.append((begin, begin + init + ramp + 1800))
        runs.append((begin + init + ramp, stop))
        if stop < epoch0 + seconds:
            job.events.append((stop, "end"))
            down = rng.uniform(300, 2400)
            job.quiet.append((stop, stop + down + init + ramp, "restart"))
            busy.append((stop - 1800, stop + down))
            begin = stop + down
            more = rng.choice([0.5, 0.75, 1.0, 1.0, 1.0, 1.5, 2.0])
            rate, scale = rate * more, scale * more
    # data-mix shifts
    at = epoch0 + rng.uniform(2, 10) * 3600
    while at < epoch0 + seconds:
        job.shifts.append((at, rng.uniform(0.92, 1.08)))
        at += rng.uniform(2, 10) * 3600
    # incidents
    for kind in [k for _ in range(weeks) for k in KINDS for _ in range(2)]:
        for _ in range(1000):
            if kind == "stall":
                length, depth, decline = rng.uniform(15, 120) * 60, 0.0, 0.0
            elif kind == "slowdown":
                length, depth, decline = rng.uniform(15, 90) * 60, rng.uniform(0.15, 0.55), 0.0
            elif kind == "moderate":
                length, depth, decline = rng.uniform(20, 150) * 60, rng.uniform(0.61, 0.70), 0.0
            else:
                decline = rng.uniform(1, 3) * 3600
                length, depth = decline + rng.uniform(20, 60) * 60, 0.0
            run_start, run_stop = rng.choice(runs)
            lo, hi = run_start + 5400, run_stop - length - 1800
            if hi <= lo:
                continue
            start = rng.uniform(lo, hi)
            if any(start < b + 3600 and a < start + length + 3600 for a, b in busy):
                continue
            busy.append((start, start + length))
            if kind == "stall":
                (job.zeros if rng.random() < 0.3 else job.silent).append((start, start + length))
            # `decline` holds the depth of a step slowdown, the time to 50 % of a gradual one
            job.incidents.append(Incident(index, kind, start, start + length, decline if kind == "gradual" else depth))
            break
    job.incidents.sort(key=lambda incident: incident.start)
    # pauses: checkpoints and long evaluations, away from everything above
    pauses: list[tuple[float, float, bool]] = []
    at = epoch0 + rng.uniform(30, 90) * 60
    every = rng.uniform(30, 90) * 60
    as_zeros = rng.random() < 0.5
    while at < epoch0 + seconds:
        pauses.append((at, rng.uniform(1, 5) * 60, as_zeros))
        at += every * rng.uniform(0.9, 1.1)
    at = epoch0 + rng.uniform(6, 12) * 3600
    while at < epoch0 + seconds:
        pauses.append((at, rng.uniform(5, 9) * 60, False))
        at += rng.uniform(6, 12) * 3600
    pauses.sort()
    last_end = -math.inf
    for start, length, zeros in pauses:
        stop = start + length
        if start - last_end < 15 * 60 or stop >= epoch0 + seconds:
            continue
        overlaps = any(start < b + 120 and a < stop + 120 for a, b in busy)
        # pauses go on during slowdowns (not during hangs, restarts or warm-ups)
        in_slowdown = any(i.kind != "stall" and i.start + 120 < start and stop + 120 < i.end for i in job.incidents)
        if overlaps and not in_slowdown:
            continue
        last_end = stop
        (job.zeros if zeros else job.silent).append((start, stop))
        job.edges += [start, stop]
        job.quiet.append((start, stop, "pause"))
    # exporter gaps: 1-4 minutes, a few a day, 15 minutes away from pauses, hangs and restarts (a gap next to a
    # pause would be one silence longer than the pause, a hang the generator made rather than the detector missed)
    away = busy + [(a, b) for a, b, _ in job.quiet]
    at = epoch0 + rng.uniform(1, 8) * 3600
    while at < epoch0 + seconds:
        stop = at + rng.uniform(60, 240)
        if not any(at < b + 900 and a < stop + 900 for a, b in away):
            job.silent.append((at, stop))
        at += rng.uniform(4, 16) * 3600
    return job


# -- a third generator, shaped differently again: written after the held-out one's false alerts were fixed, to
# check that the fix did not fit that generator; never tuned on either ----------------------------------------


@dataclass
class ThirdJob:
    """A job whose healthy life has the shapes the other two generators lack:

    - cadence tied to progress: the trainer logs every N steps, so samples come every 10-40 s at the job's
      healthy rate and proportionally less often when it is slower, at most 2.5 x (a slowdown thins its own
      samples);
    - a bimodal rate: two interleaved data sources, alternating every 1-10 minutes, the second at 0.85-0.95
      of the first;
    - a slow drift within each run, linear, -4 % to +4 % a day (cache warming, fragmentation), reset by a
      restart, and at most +-8 % in all (DRIFT_CAP; uncapped, a run of 8 days declined by 26 %: by the
      detector's contract a slowdown, injected unlabelled);
    - noise regimes: log-normal sample noise that switches between calm (1-3 %) and turbulent (5-12 %) every
      3-12 hours; single-sample outliers (0.5 %: x1.3-2 or x0.3-0.7);
    - checkpoints every 20-60 minutes as a 30-90 s stall-free dip (one sample at 0.2-0.6, no gap) or a 1-3
      minute pause (absent), evaluations every 3-8 hours as a 4-7 minute pause (zeros);
    - restarts 1-3 a week, 2-20 minutes down, 3-20 minutes initialising, a ramp of 2-15 minutes, more often on
      fewer nodes (x0.5, 0.6, 0.75, 1, 1, 1.25, 1.5);
    - incidents as the other generators (2 of each kind a week; moderate to 61-70 %, gradual to 50 % over 1-3
      hours), stored the same way.
    """

    index: int
    name: str
    seed: int
    epoch0: float
    seconds: float
    incidents: list[Incident] = field(default_factory=list)
    quiet: list[tuple[float, float, str]] = field(default_factory=list)
    restarts: int = 0
    runs: list[tuple[float, float, float, float, float]] = field(default_factory=list)  # start, ready, stop, rate, ramp
    events: list[tuple[float, str]] = field(default_factory=list)
    silent: list[tuple[float, float]] = field(default_factory=list)
    zeros: list[tuple[float, float]] = field(default_factory=list)
    dips: list[float] = field(default_factory=list)  # one partial sample at the first sample after each of these
    nodes: list[tuple[float, int]] = field(default_factory=list)  # (start, nodes) of each run, as its samples say

    def nodes_at(self, ts: float) -> int:
        return nodes_at(self.nodes, ts)

    def factor(self, ts: float) -> float:
        for incident in self.incidents:
            if incident.start <= ts < incident.end:
                if incident.kind in ("slowdown", "moderate"):
                    return incident.decline
                if incident.kind == "gradual":
                    return max(0.5, 1 - 0.5 * (ts - incident.start) / incident.decline)
        return 1.0

    def rows(self) -> Iterator[tuple[float, int, float | None, str | None]]:
        rng = random.Random(self.seed)
        cadence = rng.uniform(10, 40)
        second = rng.uniform(0.85, 0.95)
        silent, zeros = Spans(self.silent), Spans(self.zeros)
        events = sorted(self.events)
        dips = sorted(self.dips)
        ev = dip = 0
        mode, mode_until = 1.0, self.epoch0
        calm, regime_until = True, self.epoch0
        drift_per_day = [rng.uniform(-0.04, 0.04) for _ in self.runs]
        ts = self.epoch0 + rng.uniform(0, cadence)
        end = self.epoch0 + self.seconds
        while ts < end:
            while ev < len(events) and events[ev][0] <= ts:
                yield events[ev][0], self.index, None, events[ev][1]
                ev += 1
            if ts >= mode_until:
                mode = second if mode == 1.0 else 1.0
                mode_until = ts + rng.uniform(60, 600)
            if ts >= regime_until:
                calm = not calm
                sigma = rng.uniform(0.01, 0.03) if calm else rng.uniform(0.05, 0.12)
                regime_until = ts + rng.uniform(3, 12) * 3600
            run = next((i for i, r in enumerate(self.runs) if r[0] <= ts < r[2]), None)
            progress = 1.0
            if run is not None and ts >= self.runs[run][1] - self.runs[run][4] and silent.at(ts) is None:
                _start, ready, _stop, rate, ramp = self.runs[run]
                level = rate * (1 + drift_per_day[run] * min((ts - ready) / DAY, DRIFT_CAP / 0.04))
                if ts < ready:
                    level *= 0.1 + 0.9 * (ts - (ready - ramp)) / ramp
                progress = self.factor(ts)
                if zeros.at(ts) is not None:
                    value = 0.0
                else:
                    value = level * mode * progress * math.exp(rng.gauss(0, sigma))
                    roll = rng.random()
                    if roll < 0.0025:
                        value *= rng.uniform(1.3, 2.0)
                    elif roll < 0.005:
                        value *= rng.uniform(0.3, 0.7)
                    while dip < len(dips) and dips[dip] <= ts:
                        value *= rng.uniform(0.2, 0.6)
                        dip += 1
                yield ts, self.index, value, None
            # the trainer logs every N steps: a slower job logs less often (at most 2.5 x less: the detector counts
            # no time across a gap over 2 minutes, so a job that logs less often than that is not slow to it)
            ts += cadence * rng.uniform(0.9, 1.1) / max(0.4, progress * mode)
        while ev < len(events):
            yield events[ev][0], self.index, None, events[ev][1]
            ev += 1


def plan_third(index: int, epoch0: float, weeks: int, seed: int) -> ThirdJob:
    rng = random.Random(seed)
    seconds = weeks * WEEK
    job = ThirdJob(index, f"third-{index:03d}", rng.randrange(2**31), epoch0, seconds)
    rate = rng.uniform(1e5, 5e6)
    cuts: list[float] = []
    for _ in range(sum(rng.randint(1, 3) for _ in range(weeks))):
        for _ in range(1000):
            at = epoch0 + rng.uniform(8 * 3600, seconds - 8 * 3600)
            if all(abs(at - c) > 12 * 3600 for c in cuts):
                cuts.append(at)
                break
    cuts.sort()
    job.restarts = len(cuts)
    busy: list[tuple[float, float]] = []
    begin = epoch0
    ready_spans: list[tuple[float, float]] = []
    scale = 1.0
    for stop in [*cuts, epoch0 + seconds]:
        job.events.append((begin, "start"))
        job.nodes.append((begin, max(1, round(NODES * scale))))
        ramp = rng.uniform(120, 900)
        ready = begin + rng.uniform(180, 1200) + ramp
        job.runs.append((begin, ready, stop, rate, ramp))
        busy.append((begin, ready + 1800))
        ready_spans.append((ready, stop))
        if stop < epoch0 + seconds:
            job.events.append((stop, "end"))
            down = rng.uniform(120, 1200)
            busy.append((stop - 1800, stop + down))
            begin = stop + down
            job.quiet.append((stop, begin, "restart"))
            more = rng.choice([0.5, 0.6, 0.75, 1.0, 1.0, 1.25, 1.5])
            rate, scale = rate * more, scale * more
    for run_index in range(1, len(job.runs)):  # a restart is quiet until its ramp is over
        start, ready = job.runs[run_index][0], job.runs[run_index][1]
        job.quiet.append((start, ready, "restart"))
    for kind in [k for _ in range(weeks) for k in KINDS for _ in range(2)]:
        for _ in range(1000):
            if kind == "stall":
                length, depth, decline = rng.uniform(15, 120) * 60, 0.0, 0.0
            elif kind == "slowdown":
                length, depth, decline = rng.uniform(15, 90) * 60, rng.uniform(0.15, 0.55), 0.0
            elif kind == "moderate":
                length, depth, decline = rng.uniform(20, 150) * 60, rng.uniform(0.61, 0.70), 0.0
            else:
                decline = rng.uniform(1, 3) * 3600
                length, depth = decline + rng.uniform(20, 60) * 60, 0.0
            run_start, run_stop = rng.choice(ready_spans)
            lo, hi = run_start + 5400, run_stop - length - 1800
            if hi <= lo:
                continue
            start = rng.uniform(lo, hi)
            if any(start < b + 3600 and a < start + length + 3600 for a, b in busy):
                continue
            busy.append((start, start + length))
            if kind == "stall":
                (job.zeros if rng.random() < 0.4 else job.silent).append((start, start + length))
            job.incidents.append(Incident(index, kind, start, start + length, decline if kind == "gradual" else depth))
            break
    job.incidents.sort(key=lambda incident: incident.start)
    # checkpoints (a dip or a short absent pause) and evaluations (zeros), away from restarts and hangs
    pauses: list[tuple[float, float, str]] = []
    at = epoch0 + rng.uniform(20, 60) * 60
    every = rng.uniform(20, 60) * 60
    while at < epoch0 + seconds:
        pauses.append((at, rng.uniform(30, 90) if rng.random() < 0.5 else rng.uniform(60, 180), "checkpoint"))
        at += every * rng.uniform(0.9, 1.1)
    at = epoch0 + rng.uniform(3, 8) * 3600
    while at < epoch0 + seconds:
        pauses.append((at, rng.uniform(240, 420), "evaluation"))
        at += rng.uniform(3, 8) * 3600
    pauses.sort()
    hangs = [(i.start, i.end) for i in job.incidents if i.kind == "stall"]
    downs = [(a, b) for a, b in busy if not any(i.start == a for i in job.incidents)]
    last_end = -math.inf
    for start, length, what in pauses:
        stop = start + length
        if start - last_end < 10 * 60 or stop >= epoch0 + seconds:
            continue
        if any(start < b + 300 and a < stop + 300 for a, b in hangs + downs):
            continue
        last_end = stop
        if what == "evaluation":
            job.zeros.append((start, stop))
        elif length <= 90:
            job.dips.append(start)  # the checkpoint is a slow step, no gap
        else:
            job.silent.append((start, stop))
        job.quiet.append((start, stop, "pause"))
    return job
