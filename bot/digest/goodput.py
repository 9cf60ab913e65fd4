"""Goodput: how much of the accelerator time an org held turned into training. Pure: facts in, hours out.

Per cluster, the window is cut wherever anything changes (a held count, a node failing or back, a job starting,
ending its warm-up, stalling or slowing down), and each piece's held accelerators are split, in this order:

1. **node failures**: accelerators of failed nodes, from the failure until the successor runs (a cluster-level
   failure takes the whole cluster);
2. what is left is *available*; each job at work takes its `nodes` (times the cluster's accelerators per node),
   or, without `nodes`, every available accelerator; jobs asking more than is available share it pro rata;
3. **idle**: available accelerators no job takes (held, no job);
4. each job's share goes to **stalls** while a stall episode of it is open (a hung job holds its nodes),
   else to **restarts and warm-up** from its (re)start until it is ready, else, while a slowdown or
   degradation is open, its missing fraction to **slowdowns** and the rest to **training**, else all to
   **training**.

So the six parts add up to the held accelerator-hours piece by piece, none is negative, and goodput =
training / held is between 0 and 100 %, or unknown (`Goodput.reported` False) when no job of the org was at
work by its throughput in the window: then training cannot be told from idle. Accelerator-hours are
instance-hours times the accelerators of the type (8 GPUs on a p5.48xlarge, 16 Trainium chips on a
trn1.32xlarge: `compute.accelerators`); types without accelerators (head, login, controller nodes) hold none.
"""

from __future__ import annotations

import bisect
import itertools
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.config import normalize_instance_type
from bot.digest.facts import (
    IDLE,
    NODE_FAILURES,
    PARTS,
    RESTARTS,
    SLOWDOWNS,
    STALLS,
    TRAINING,
    Goodput,
    GoodputFacts,
    Loss,
    Outage,
    Run,
    StateChange,
    Week,
)

__all__ = [
    "ACCELERATORS",
    "IDLE",
    "NODE_FAILURES",
    "PARTS",
    "RESTARTS",
    "SLOWDOWNS",
    "STALLS",
    "TRAINING",
    "Goodput",
    "GoodputFacts",
    "Loss",
    "Outage",
    "Reported",
    "Run",
    "accelerators",
    "combined",
    "goodput",
    "missing_fraction",
    "percent_text",
    "reported",
    "runs_of",
    "shares",
    "shown",
    "weekly",
]

# Accelerators per instance: GPUs, or Neuron devices for Trainium/Inferentia (what "GPU-hours lost" counts).
ACCELERATORS: dict[str, int] = {
    "p5.48xlarge": 8,
    "p5e.48xlarge": 8,
    "p5en.48xlarge": 8,
    "p4d.24xlarge": 8,
    "p4de.24xlarge": 8,
    "p6-b200.48xlarge": 8,
    "g5.48xlarge": 8,
    "g6e.48xlarge": 8,
    "trn1.32xlarge": 16,
    "trn1n.32xlarge": 16,
    "trn2.48xlarge": 16,
    "inf2.48xlarge": 12,
}


def accelerators(instance_type: str) -> int:
    """Accelerators in one instance; 0 for types not listed (head and login nodes have none)."""
    return ACCELERATORS.get(normalize_instance_type(instance_type), 0)


STALL = "stall"  # a Loss kind; any other kind (slowdown, degradation) loses its `fraction`
MINUTE = timedelta(minutes=1)
LOADING = timedelta(hours=6)  # a `start` this long before a job's first sample is not that run's (it never came)
PAUSE = 0.05  # a minute under this share of the job's usual rate is a pause (checkpoint, evaluation), as the
# stall detector's NEAR_ZERO_RATIO: not a rate to compare with


# ------------------------------------------------------------------------------------- from stored samples


@dataclass(frozen=True)
class Reported:
    """A stretch of a job's samples with no long gap between them (storage.tracking.SampleRun): the first and
    last minute that reported, and how many samples it holds."""

    first: datetime
    last: datetime
    samples: int
    spacing: timedelta | None = None  # between its samples where measured without gaps (its first and last hour)


def interval(reported: Sequence[Reported]) -> timedelta:
    """A job's usual time between samples (1 minute at least: the rollups' grain): the median of its stretches'
    measured spacings; without any, the median of the mean intervals within its stretches (each weighted by how
    many it spans) and the gaps between them."""
    measured = sorted(r.spacing for r in reported if r.spacing is not None)
    if measured:
        return max(MINUTE, measured[len(measured) // 2])
    weighted: list[tuple[float, int]] = []
    for stretch in reported:
        if stretch.samples >= 2:
            weighted.append(
                ((stretch.last - stretch.first).total_seconds() / (stretch.samples - 1), stretch.samples - 1)
            )
    for before, after in itertools.pairwise(reported):
        weighted.append(((after.first - before.last).total_seconds(), 1))
    if not weighted:
        return MINUTE
    weighted.sort()
    half, seen = sum(w for _, w in weighted) / 2, 0
    for seconds, weight in weighted:
        seen += weight
        if seen >= half:
            return max(MINUTE, timedelta(seconds=seconds))
    return MINUTE  # not reached: the weights add up past half


def runs_of(
    reported: Sequence[Reported],
    starts: Sequence[datetime],
    *,
    cluster_name: str,
    job: str,
    stall_after: timedelta,
    warmup: timedelta,
    nodes: int | None = None,
) -> tuple[Run, ...]:
    """A job's runs from the minutes it reported (oldest first) and its `start` events.

    Stretches closer than its own bound (`stall_after`, or 2.5 of its intervals if longer: the stall detector's)
    are one run: a job reporting every 5 minutes is at work between its samples. A `start` begins a run: one
    in a gap reaches back to it (loading and compiling count as restarting), one inside a stretch splits it. A
    run lasts one interval past its last sample, and is warming up until `warmup` (or 4 intervals: the
    detector's 5 samples) after its first sample."""
    usual = interval(reported)
    bound = max(stall_after, usual * 2.5)
    events = sorted(starts)
    merged: list[tuple[datetime, datetime, datetime]] = []  # (start, first sample, last sample)
    for stretch in sorted(reported, key=lambda r: r.first):
        after = merged[-1][2] if merged else None
        restarted = [e for e in events if (after is None or after < e) and e <= stretch.first]
        if merged and after is not None and stretch.first - after <= bound and not restarted:
            start, first, last = merged[-1]
            merged[-1] = (start, first, max(last, stretch.last))
            continue
        begin = restarted[-1] if restarted and stretch.first - restarted[-1] <= LOADING else stretch.first
        merged.append((begin, stretch.first, stretch.last))
    # A start inside a run splits it there.
    split: list[tuple[datetime, datetime, datetime]] = []
    for start, first, last in merged:
        for event in (e for e in events if first < e <= last):
            split.append((start, first, event))
            start = first = event
        split.append((start, first, last))
    runs: list[Run] = []
    for index, (start, first, last) in enumerate(split):
        end = last + min(usual, bound)
        if index + 1 < len(split):
            end = min(end, split[index + 1][0])
        end = max(end, start)
        ready = min(end, max(start, first + max(warmup, usual * 4)))
        runs.append(Run(cluster_name, job, start, ready, end, nodes))
    return tuple(runs)


def missing_fraction(
    before: Sequence[tuple[int, float]], during: Sequence[tuple[int, float]], after: Sequence[tuple[int, float]] = ()
) -> float:
    """A slowdown's missing fraction, 1 - its rate / the job's rate before it, from (count, total) minutes: the
    rate during it is their mean; the rate before is the median of the minutes' means before it (after it when
    none were before), pauses (under 5 % of that median) left out. 0 when either is unknown."""
    baseline = _healthy(before) or _healthy(after)
    count = sum(n for n, _ in during)
    if not baseline or count <= 0:
        return 0.0
    rate = sum(total for _, total in during) / count
    return min(1.0, max(0.0, 1.0 - rate / baseline))


def _healthy(minutes: Sequence[tuple[int, float]]) -> float | None:
    means = sorted(total / n for n, total in minutes if n > 0)
    if not means:
        return None
    median = statistics.median(means)
    working = [m for m in means if m >= PAUSE * median]
    return statistics.median(working) if working and median > 0 else None


# ------------------------------------------------------------------------------------------------ arithmetic


def _covers(start: datetime, end: datetime | None, moment: datetime) -> bool:
    return start <= moment and (end is None or moment < end)


@dataclass
class _Cluster:
    steps: dict[tuple[str, str], list[StateChange]]  # (backend, type) -> changes, oldest first
    outages: list[Outage]
    runs: list[Run]
    losses: list[Loss]

    def held(self, moment: datetime) -> tuple[float, int]:
        """(accelerators, accelerator nodes) held at `moment`."""
        accels, nodes = 0.0, 0
        for (_, instance_type), steps in self.steps.items():
            per_node = accelerators(instance_type)
            if not per_node:
                continue
            index = bisect.bisect_right([s.at for s in steps], moment) - 1
            if index >= 0:
                count = max(steps[index].count, 0)
                accels += count * per_node
                nodes += count
        return accels, nodes


def _clusters(facts: GoodputFacts) -> dict[str, _Cluster]:
    clusters: dict[str, _Cluster] = defaultdict(lambda: _Cluster({}, [], [], []))
    for change in facts.changes:
        key = (change.backend, normalize_instance_type(change.instance_type))
        clusters[change.cluster_name].steps.setdefault(key, []).append(change)
    for cluster in clusters.values():
        for steps in cluster.steps.values():
            steps.sort(key=lambda s: s.at)  # stable: of two changes at one instant the later listed wins
    for outage in facts.outages:
        clusters[outage.cluster_name].outages.append(outage)
    for run in facts.runs:
        clusters[run.cluster_name].runs.append(run)
    for loss in facts.losses:
        clusters[loss.cluster_name].losses.append(loss)
    return clusters


def _cuts(cluster: _Cluster, since: datetime, until: datetime) -> list[datetime]:
    moments: set[datetime] = {since, until}
    moments.update(s.at for steps in cluster.steps.values() for s in steps)
    for outage in cluster.outages:
        moments.update(m for m in (outage.start, outage.end) if m is not None)
    for run in cluster.runs:
        moments.update((run.start, run.ready, run.end))
    for loss in cluster.losses:
        moments.update(m for m in (loss.start, loss.end) if m is not None)
    return sorted(m for m in moments if since <= m <= until)


def _split(cluster: _Cluster, moment: datetime) -> dict[str, float]:
    """The accelerators held at `moment` (constant until the next cut), by part."""
    held, nodes = cluster.held(moment)
    if held <= 0 or nodes <= 0:
        return {}
    per_node = held / nodes
    failed = 0.0
    for outage in cluster.outages:
        if _covers(outage.start, outage.end, moment):
            if outage.nodes is None:
                failed = held
                break
            failed += outage.nodes * (accelerators(outage.instance_type) or per_node)
    failed = min(failed, held)
    available = held - failed
    # The jobs at work: a run covers the moment, or an episode does (a hung job still holds its nodes).
    jobs: dict[str, Run | None] = {run.job: run for run in cluster.runs if _covers(run.start, run.end, moment)}
    losses = [loss for loss in cluster.losses if _covers(loss.start, loss.end, moment)]
    for loss in losses:
        jobs.setdefault(loss.job, _last_run(cluster.runs, loss.job, moment))
    demand = {job: available if run is None or run.nodes is None else run.nodes * per_node for job, run in jobs.items()}
    total = sum(demand.values())
    scale = min(1.0, available / total) if total > 0 else 0.0
    parts = dict.fromkeys(PARTS, 0.0)
    parts[NODE_FAILURES] = failed
    used = 0.0
    for job, run in jobs.items():
        share = demand[job] * scale
        used += share
        mine = [loss for loss in losses if loss.job == job]
        if any(loss.kind == STALL for loss in mine):
            parts[STALLS] += share
        elif run is not None and run.start <= moment < run.ready:
            parts[RESTARTS] += share
        elif mine:
            missing = min(1.0, max(0.0, max(loss.fraction for loss in mine)))
            parts[SLOWDOWNS] += share * missing
            parts[TRAINING] += share * (1.0 - missing)
        else:
            parts[TRAINING] += share
    parts[IDLE] = max(0.0, available - used)
    return parts


def _last_run(runs: Iterable[Run], job: str, moment: datetime) -> Run | None:
    """The job's run most recently begun before `moment`: its nodes stand for the job's while it hangs. Its
    warm-up is over (the moment is past its end), so it never makes the moment a warm-up."""
    before = [r for r in runs if r.job == job and r.start <= moment]
    return max(before, key=lambda r: r.start) if before else None


def goodput(facts: GoodputFacts, since: datetime | None = None, until: datetime | None = None) -> Goodput:
    """The org's goodput over [since, until) (default: the facts' window; never past it: what is still open
    counts to the facts' `until`, not beyond)."""
    start = max(since or facts.since, facts.since)
    end = min(until or facts.until, facts.until)
    seconds = dict.fromkeys(PARTS, 0.0)
    held = 0.0
    if end > start:
        for cluster in _clusters(facts).values():
            cuts = _cuts(cluster, start, end)
            for left, right in itertools.pairwise(cuts):
                span = (right - left).total_seconds()
                for part, accels in _split(cluster, left).items():
                    seconds[part] += accels * span
                    held += accels * span
    hours = {part: value / 3600 for part, value in seconds.items()}
    return Goodput(
        reported=reported(facts, start, end),
        since=start,
        until=max(end, start),
        held=held / 3600,
        training=hours[TRAINING],
        node_failures=hours[NODE_FAILURES],
        stalls=hours[STALLS],
        slowdowns=hours[SLOWDOWNS],
        restarts=hours[RESTARTS],
        idle=hours[IDLE],
    )


def reported(facts: GoodputFacts, since: datetime, until: datetime) -> bool:
    """Whether some job of the org was at work by its throughput in [since, until): one of its runs or
    throughput episodes overlaps it (a job hung all week reported nothing, yet is known to be stalled)."""
    return any(run.start < until and since < run.end for run in facts.runs) or any(
        loss.start < until and (loss.end is None or since < loss.end) for loss in facts.losses
    )


def weekly(facts: GoodputFacts, weeks: Sequence[Week]) -> tuple[tuple[Week, Goodput], ...]:
    """Goodput of each week (a running week: so far), from one gathering of facts spanning them."""
    return tuple((week, goodput(facts, week.start, week.end)) for week in weeks)


def combined(values: Iterable[Goodput], since: datetime, until: datetime) -> Goodput:
    """Several orgs' goodput over one window as one (a program's): each part summed; reported if any was."""
    every = list(values)
    return Goodput(
        reported=any(v.reported for v in every),
        since=since,
        until=until,
        held=sum(v.held for v in every),
        training=sum(v.training for v in every),
        node_failures=sum(v.node_failures for v in every),
        stalls=sum(v.stalls for v in every),
        slowdowns=sum(v.slowdowns for v in every),
        restarts=sum(v.restarts for v in every),
        idle=sum(v.idle for v in every),
    )


# ------------------------------------------------------------------------------------------------ showing


def shown(value: Goodput, decimals: int = 1) -> tuple[float, tuple[tuple[str, float], ...]]:
    """(held, parts) rounded to `decimals` so that the rounded parts add up to the rounded held exactly (the
    largest remainders are rounded up): a reader who adds the parts finds the held figure."""
    unit = 10**decimals
    held_units = round(value.held * unit)
    raw = [(name, hours * unit) for name, hours in value.parts()]
    floors = [math.floor(units) for _, units in raw]
    left = held_units - sum(floors)
    order = sorted(range(len(raw)), key=lambda i: (-(raw[i][1] - floors[i]), i))
    for index in order[: max(left, 0)]:
        floors[index] += 1
    # Float error could leave the floors above the rounded held by a unit: take it from the largest part.
    while sum(floors) > held_units and max(floors) > 0:
        floors[floors.index(max(floors))] -= 1
    return held_units / unit, tuple((name, floors[i] / unit) for i, (name, _) in enumerate(raw))


def percent_text(value: Goodput) -> str:
    """ "87.3 %" (one decimal, 0.0 to 100.0), or "n/a" when nothing was held or no job reported."""
    percent = value.percent
    return "n/a" if percent is None else f"{percent:.1f} %"


def shares(value: Goodput) -> Mapping[str, float]:
    """Each part as a share of held, in percent (all 0 when nothing was held): the stacked bar's segments."""
    if value.held <= 0:
        return dict.fromkeys(PARTS, 0.0)
    return {name: 100.0 * hours / value.held for name, hours in value.parts()}
