"""Throughput anomalies of one training job, against the job's own baseline. Pure: no I/O, standard library only.

Two kinds of anomaly:

- **stall**: the job is active and no progressing sample has arrived for `stall_after`. "Progressing" means a
  throughput of at least 5% of the baseline, so a job that keeps reporting zeros (or near-zeros) stalls just
  like a silent one. Its `start` is the last progressing sample; it ends at the next one.
- **slowdown**, found by either of two rules on the recent throughput (the median of the job's samples in the
  last 2 minutes, pauses left out):
  - *severe*: it stays below `drop_ratio` x baseline for `sustain` (a drop to half is told in 5 minutes);
  - *moderate or gradual*: a CUSUM of its log-deficit, `log(baseline / recent)` less an allowance, summed over
    time, reaches `CUSUM_LIMIT`. The allowance is `log(1 / 0.88)` or wider, the widest of: `NOISE_Z` x the
    job's own sample noise (the robust spread of the log-differences of successive healthy samples, so a drift
    or a decline is not noise: for a job noisier than +-15%), and `LEVEL_Z` x the spread of its healthy level
    (the robust standard deviation of its healthy 10-minute blocks' log-medians around their median, over this
    run and the job's earlier ones: a job whose rate moves by +-8% with its data mix, for hours, is not slow at
    the low end of that range), this one capped at `log(1 / 0.855)`, the widest allowance that still tells a
    steady decline to 50% over 2 hours by 25% down (and a drop to 70% within 10 minutes). A deficit counts at
    most as much as reaches the limit in `sustain` + 1 minute: deeper drops are the severe rule's, and a short
    deep dip is not a slowdown. At +-15% noise around a steady level a sustained drop to 70% is told within 10
    minutes, one to 75% within about 14, and a linear decline to 50% over 2 hours by the time it is about 23%
    down; above 88% nothing accumulates. (A job whose healthy level moves is told later, up to about 30% down.)
  Only time between samples counts: a gap longer than 2 minutes (a pause, absent or zeros) adds nothing, so the
  partial samples either side of a checkpoint are not slow minutes. Its `start` is the first slow sample (the
  severe rule) or the sample from which the CUSUM last rose from zero. It ends once the evidence that it is
  back adds up (hysteresis): each minute of recent throughput above the allowance counts by how far above it
  is, fully from the midpoint (halfway, in log, between the allowance and the baseline) up, until it is worth
  2 minutes at the midpoint; a dip below the allowance starts it again. So a recovery to the baseline closes
  in 2 minutes, while a level hovering at the allowance, in and out of it with its noise, stays one slowdown
  rather than many. `end` is then the first sample of that recovered run.

The baseline is anchored to the run: the larger of the median of the medians of the job's healthy 10-minute
blocks since its last `start`, and the median of its healthy samples of the last 30 minutes. So a slowdown, even
one that takes hours, never drags the baseline down with it, while a lasting rise (more nodes joining) moves it
within a quarter of an hour (a rise of more than 25% starts the blocks afresh). Healthy samples are those
taken while no anomaly is open and no severe slowdown is pending, at or above the severe threshold (for the
blocks: with the recent throughput above the allowance), pauses (near-zero samples) left out. A job that is
deliberately made slower should report a new `start`: that resets the job, and a new warm-up learns the new
baseline; without one, a lasting drop of more than about 12% is a slowdown.

Warm-up: after a `start` (or the first sample of a job never seen), there is no baseline, so no anomaly, until
the job has sent at least 5 progressing samples over 10 minutes from its first one. A job that goes silent for
`stall_after` after its first 5 samples gets its baseline then (from those samples), so a hang early in a run
is still a stall; a job that never sends a sample after `start` is not alerted (compiling or loading can take
that long). Checkpoint and evaluation pauses (zero or absent samples, shorter than `stall_after`) are neither
slow nor healthy samples: they open nothing and are not part of any median. After an `end` the job is
inactive and silence is not an anomaly; a sample after `end` starts the job again (with a new warm-up).

Any cadence (issue 23): the time scales follow the job's own reporting interval (the median of its last 15), so a
job reporting every 10 s and one reporting every 5 minutes get the same detection: time between samples counts up to
2.5 intervals (at least 2 minutes), the recent window holds 2.5 intervals, a block 6, the baseline window 10; a stall
needs `stall_after` (and, for a job reporting less often than every 2 minutes, one more interval: the sample after
a pause comes that much after it) and 2.5 intervals of silence. A job reporting less often than every 15 minutes gets
no slowdown judged, and `too_sparse` says why.

Slow from the start (issue 23): a run (after `start`, or a sample after `end`) is compared, once its first block is
in, with the last healthy run's baseline: on the same `nodes` at or below 70% of it, or at or below 50% when either
run did not say its nodes, it is a slowdown from the run's first sample (`restart`, its `baseline` the earlier rate),
held against that rate until the job is back near it. (A hang keeps the run's baseline, so a slow resumption after
one is an ordinary slowdown.) A run's first hours hold one or two of its data mixes, so its blocks may sit at the top
of the job's level range: on the same `nodes` as the last healthy run, as long as they sit above its centre (the
median of its blocks) by no more than the job's level range (`LEVEL_Z` x its spread), the level allowance is measured
from that centre, and the bottom of the range, where the last run was not slow, is not slow now either. On other nodes
(or nodes either run did not say), nothing places the run in the job's range: for its first 12 hours of healthy blocks
its level allowance is the widest (`LEVEL_ALLOWANCE_MAX`), when the job's level range is wider than a quiet job's.

Degradation (issue 23): a drop of 5% or more below the level of the 2 hours before, lasting 2 hours, judged at each
block on the blocks' medians, clear of their own noise (a job whose blocks wander more than 2% from one to the next,
or whose level steps by more than 2.5% an hour with its data mix, is not judged; a job is judged after a day; its
blocks' noise is the larger of the last 4 hours' and its usual over 2 days). It
ends once the level is back halfway. A slowdown (or a stall) closes it as it opens, and what follows a slowdown is
judged afresh: the same episode is never told twice.

A live monitor need not replay a whole run at each check: `snapshot()` is an independent copy of the detector,
and feeding it what comes after `seen_until` says exactly what feeding the original would.
"""

from __future__ import annotations

import bisect
import copy
import itertools
import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

NEAR_ZERO_RATIO = 0.05  # below this fraction of the baseline a sample is a pause (or a stall), not a slow sample
BASELINE_WINDOW = timedelta(minutes=30)  # the baseline is the median of healthy samples over this window
WARMUP = timedelta(minutes=10)  # after the first sample of a run, before the baseline exists
WARMUP_MIN_SAMPLES = 5  # ... and at least this many progressing samples
RECENT_WINDOW = timedelta(minutes=2)  # "recent throughput": the median of the samples in this window
RECOVER_FOR = timedelta(minutes=2)  # a slowdown ends once recent throughput is back this long
BLOCK = timedelta(minutes=10)  # the anchored baseline is the median of the medians of healthy blocks this long
BLOCK_MIN_SAMPLES = 5  # ... each of at least this many samples (a block cut short by a pause is dropped)
RISE_RESET = 1.25  # a block this much above the anchored baseline starts the blocks afresh (more nodes)
NOISE_BLOCKS = 6  # the job's noise: the median spread of its last this many blocks
ALLOWANCE = math.log(1 / 0.88)  # the least log-deficit the CUSUM lets pass: a quiet job's 12% wobble
NOISE_Z = 1.2  # ... or this many times the job's sample noise (the 2-minute median is about 0.6 x as noisy)
LEVEL_Z = 3.0  # ... or this many times the spread of its healthy 10-minute levels since the start (mix, wander)
LEVEL_ALLOWANCE_MAX = math.log(1 / 0.855)  # ... but no wider for that: the widest that still tells a decline to 50%
# over 2 hours by the time it is 25% down (the integral of its log-deficit past 0.855 reaches CUSUM_LIMIT just then)
UNPLACED_FOR = timedelta(hours=12)  # a run on other nodes is placed in the job's level range by this much of its blocks
LEVEL_MIN_BLOCKS = 3  # the level spread needs at least this many healthy blocks
CUSUM_LIMIT = 1.6  # log-deficit-minutes past the allowance that make a slowdown (70%: about 8 min, 75%: 11)
NEVER_BEFORE = timedelta(minutes=1)  # the CUSUM opens nothing sooner than `sustain` + this: deep drops are the
# severe rule's, so a deficit counts at most as much as reaches CUSUM_LIMIT in that time (a 5-minute dip is none)

# Cadence (issue 23): a job reporting every 10 s and one reporting every 5 minutes get the same detection, so the
# time scales above stretch with the job's own reporting interval (the median of its recent intervals).
INTERVALS_KEPT = 15  # the interval is the median of the job's last this many (kept across restarts: same exporter)
GAP_INTERVALS = 2.5  # time between samples counts up to this many intervals (at least RECENT_WINDOW): longer is a
# pause, as long as a stall would need (STALL_INTERVALS): the partial samples either side of it are no slow minutes
STALL_INTERVALS = 2.5  # a stall needs at least this many intervals without progress (and stall_after)
RECENT_INTERVALS = 2.5  # the recent window holds at least this many intervals (2-3 samples at a long cadence)
BLOCK_SAMPLES = BLOCK_MIN_SAMPLES + 1  # a block lasts at least this many intervals, so it can fill
WINDOW_INTERVALS = 10  # the baseline window lasts at least this many intervals
MAX_JUDGED_INTERVAL = timedelta(minutes=15)  # sparser than this, a slowdown cannot be told within reason: said once

# Slow from the start (issue 23): a run judged against the last healthy run of the same job, once its first block is in.
RESTART_SAME_NODES = 0.7  # on the same number of nodes, at or below this fraction of the last healthy run's rate
RESTART_UNKNOWN_NODES = 0.5  # ... or, when either run did not say its nodes, at or below this

# Degradation (issue 23): a small, lasting drop, judged on the blocks' medians (their logs).
DEG_WINDOW = timedelta(hours=2)  # the drop must hold this long ...
DEG_REFERENCE = timedelta(hours=2)  # ... against the level of this long just before it
DEG_DROP = math.log(1 / 0.955)  # the window's median this far below the reference's (a 5% drop, less a little noise)
DEG_BELOW = math.log(1 / 0.975)  # ... with DEG_LASTING of its blocks at least this far below (the whole 2 h is down)
DEG_LASTING = 0.75
DEG_MAX_NOISE = 0.02  # a job whose blocks' medians wander more than this from one to the next cannot tell 5%
DEG_Z = 4.0  # and the drop must be this many standard errors of the difference of the two medians
DEG_STEP = timedelta(hours=1)  # the job's level steps: its last hour's median against the hour before, at each block
DEG_STEPS_KEPT = timedelta(hours=48)  # ... over this long (kept across restarts: the data mix is the job's)
DEG_CALM_FOR = timedelta(hours=24)  # ... at least this long, before a job is judged
DEG_STEP_QUANTILE = 0.9  # the job is judged while this quantile of those steps (in log) is within DEG_MAX_STEP: a
DEG_MAX_STEP = math.log(1.025)  # smooth daily drift moves a level by 1-2% an hour, a data mix by 5-8% at once
DEG_RECOVER = timedelta(hours=1)  # a degradation ends once this long's median is back halfway (in log) to the
# reference, or has risen by half the drop over the hour before (a daily drift may have moved the level meanwhile)
DEG_HOLD = timedelta(hours=4)  # the rise as a degradation ends is no swing

STALL = "stall"
SLOWDOWN = "slowdown"
DEGRADATION = "degradation"
EVENTS = ("start", "end")


@dataclass(frozen=True)
class Thresholds:
    stall_after: timedelta = timedelta(minutes=10)
    drop_ratio: float = 0.6
    sustain: timedelta = timedelta(minutes=5)


DEFAULT_THRESHOLDS = Thresholds()


@dataclass(frozen=True)
class Sample:
    ts: datetime  # aware UTC
    value: float | None  # tokens/s (or samples/s); None on start/end rows
    event: str | None = None  # "start" | "end" | None
    nodes: int | None = None  # the nodes the job runs on, when its samples say


@dataclass(frozen=True)
class Anomaly:
    kind: str  # "stall" | "slowdown" | "degradation"
    start: datetime  # when it began: the last good sample (stall) or the first slow sample (slowdown)
    detected_at: datetime  # when the detector could first say so (the alert time)
    end: datetime | None  # when it ended (None while open)
    baseline: float  # the job's healthy throughput when it began
    current: float  # the latest throughput seen (0.0 for a stall with no samples)
    restart: bool = False  # a slowdown of a run that started slow: `baseline` is the last healthy run's rate


def _median(ordered: list[float]) -> float:
    n = len(ordered)
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _deviation(ordered: list[float], centre: float) -> float:
    """The median absolute deviation of sorted values from `centre`, in O(n): the deviations either side of it
    come out in order, nearest first, merged until the middle one."""
    count = len(ordered)
    right = bisect.bisect_left(ordered, centre)
    left = right - 1
    deviations: list[float] = []
    while len(deviations) <= count // 2:
        if right < count and (left < 0 or ordered[right] - centre <= centre - ordered[left]):
            deviations.append(ordered[right] - centre)
            right += 1
        else:
            deviations.append(centre - ordered[left])
            left -= 1
    return deviations[-1] if count % 2 else (deviations[-2] + deviations[-1]) / 2


def _block_noise(blocks: Iterable[tuple[datetime, float]]) -> float:
    """One block's noise (its log-median's standard deviation), from the spread of successive blocks' differences,
    so that a level that moves is left out (at least 3 blocks)."""
    logs = [v for _, v in blocks]
    diffs = sorted(abs(b - a) for a, b in itertools.pairwise(logs))
    return 1.4826 * _median(diffs) / math.sqrt(2)


class JobDetector:
    """One job's detector, incremental: feed samples in time order, and advance time between them.

    `observe` and `advance` return the anomalies that call opened (end None) or closed (end set). A sample
    older than the previous sample is ignored; a sample older than the last `advance` is still taken (a
    late delivery), so a caller may advance on a clock and feed samples as they arrive.
    """

    def __init__(self, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> None:
        self.thresholds = thresholds
        self._deficit_cap = CUSUM_LIMIT / ((thresholds.sustain + NEVER_BEFORE) / timedelta(minutes=1))
        self._active = False
        self._last_sample_ts: datetime | None = None
        self._open: Anomaly | None = None
        self._prior_spread = 0.0  # the level spread of the job's earlier runs (a restart keeps its workload)
        self._level_spread = 0.0
        self._intervals: deque[float] = deque(maxlen=INTERVALS_KEPT)  # seconds between successive samples
        self._interval_s: float | None = None  # their median
        self._prior_rate: float | None = None  # the last healthy run's baseline ...
        self._prior_nodes: int | None = None  # ... and the nodes it ran on, if it said
        self._prior_centre: float | None = None  # ... and the median of its blocks: where its level sat, mid-range
        self._steps: deque[tuple[datetime, float, float]] = deque()  # (block end, |level step|, block noise then)
        self._deg_hold_until: datetime | None = None
        self._degraded: Anomaly | None = None
        self._deg_reference = 0.0  # an open degradation's reference level (log) ...
        self._deg_drop = 0.0  # ... and how far below it the job was as it was told
        self._established = False
        self._reference: float | None = None
        self._nodes: int | None = None
        self._prev_value_ts: datetime | None = None
        self._reset()

    # -- public state -------------------------------------------------------------------------------

    @property
    def seen_until(self) -> datetime | None:
        """The ts of the latest sample or event taken (older ones are ignored from now on)."""
        return self._last_sample_ts

    def snapshot(self) -> JobDetector:
        """An independent copy to resume from: feeding it what comes after `seen_until` (and advancing it) says
        exactly what feeding this detector would. A monitor keeps one per job, so a check feeds only the new
        samples instead of replaying the whole run, and the anchored baseline reaches back to the run's `start`
        however long ago that was. Plain data, about 6 KB; `pickle` serializes it."""
        return copy.deepcopy(self)

    @property
    def current(self) -> Anomaly | None:
        """The open anomaly, if any (with the latest throughput as `current`); a degradation only when nothing
        worse is open."""
        return self._open or self._degraded

    @property
    def interval(self) -> timedelta | None:
        """The job's own reporting interval: the median of its last few intervals between samples."""
        return None if self._interval_s is None else timedelta(seconds=self._interval_s)

    @property
    def too_sparse(self) -> str | None:
        """Why slowdowns are not judged for this job, when its samples are too far apart; else None."""
        if self._interval_s is None or self._interval_s <= MAX_JUDGED_INTERVAL.total_seconds():
            return None
        return (
            f"samples every {self._interval_s / 60:.0f} min: too far apart to judge a slowdown "
            f"(at most every {MAX_JUDGED_INTERVAL.total_seconds() / 60:.0f} min); only stalls are told"
        )

    def _scaled(self, floor: timedelta, intervals: float) -> timedelta:
        """`floor`, or `intervals` of the job's own reporting interval if that is longer."""
        if self._interval_s is None:
            return floor
        return max(floor, timedelta(seconds=intervals * self._interval_s))

    @property
    def stall_after(self) -> timedelta:
        """The silence that makes a stall for this job: `stall_after`, and for a job reporting less often than
        every RECENT_WINDOW one more of its intervals; never less than 2.5 of its intervals. A pause is silent
        for its own length and the interval until the sample after it: `stall_after` allows that interval for
        a job reporting every minute or two (what it was set for), but at a 5-minute cadence a checkpoint of 2
        minutes, with the report due as it began left out, is 12-13 minutes without a sample: a pause shorter
        than `stall_after`, which is no stall."""
        if self._interval_s is None:
            return self.thresholds.stall_after
        interval = timedelta(seconds=self._interval_s)
        extra = interval if interval > RECENT_WINDOW else timedelta(0)
        return max(self.thresholds.stall_after + extra, STALL_INTERVALS * interval)

    @property
    def baseline(self) -> float | None:
        """The job's healthy throughput, anchored to the run (see the module's docstring)."""
        return self._anchor() if self._established else None

    @property
    def allowance_level(self) -> float | None:
        """The throughput under which the CUSUM accumulates (and over which a slowdown recovers)."""
        baseline = self.baseline
        return None if baseline is None else baseline * self._allowance_ratio

    @property
    def threshold(self) -> float | None:
        baseline = self.baseline
        return None if baseline is None else baseline * self.thresholds.drop_ratio

    @property
    def active(self) -> bool:
        """Started (a `start` event or a sample) and not ended."""
        return self._active

    @property
    def next_deadline(self) -> datetime | None:
        """The earliest time at which `advance` could open a stall, if no sample comes before; None if never."""
        if not self._active or self._last_good is None or (self._open is not None and self._open.kind == STALL):
            return None
        if not self._established and len(self._sorted) < WARMUP_MIN_SAMPLES:
            return None
        return self._last_good + self.stall_after

    # -- input --------------------------------------------------------------------------------------

    def observe(self, sample: Sample) -> list[Anomaly]:
        """Take one sample (or a start/end event); returns the anomalies it opened or closed."""
        event, value, ts = sample.event, sample.value, sample.ts
        if event is not None and event not in EVENTS:
            raise ValueError(f"unknown event {event!r} (expected 'start', 'end' or None)")
        if value is not None and not (value >= 0 and math.isfinite(value)):
            raise ValueError(f"throughput must be a finite number >= 0, not {value!r}")
        if self._last_sample_ts is not None and ts < self._last_sample_ts:
            return []
        self._last_sample_ts = ts
        changes: list[Anomaly] = []
        if event == "start":
            changes += self._close(ts) + self._close_degradation(ts)
            self._reset()
            self._active = True
        if value is not None and event is None and ts == self._prev_value_ts:
            return []  # a second sample at the same time (a retried delivery, a duplicated row): one sample, not two
        if value is not None:
            if not self._active:  # a sample from a job never started, or after its end: an implicit start
                self._reset()
                self._active = True
            if sample.nodes is not None:
                self._nodes = sample.nodes
            if self._prev_value_ts is not None:
                self._intervals.append((ts - self._prev_value_ts).total_seconds())
                self._interval_s = _median(sorted(self._intervals))
            self._prev_value_ts = ts
            changes += self._sample(ts, value)
        if event == "end":
            changes += self._close(ts) + self._close_degradation(ts)
            self._reset()
            self._active = False
        return changes

    def advance(self, now: datetime) -> list[Anomaly]:
        """Time passing with no sample: opens a stall once the last progressing sample is `stall_after` old."""
        if not self._active or self._last_good is None:
            return []
        silent_for = now - self._last_good
        if not self._established:
            self._maybe_establish(now)
            if not self._established:
                return []
        if silent_for < self.stall_after or (self._open is not None and self._open.kind == STALL):
            return []
        changes = []
        last_good = self._last_good
        changes += self._close_degradation(last_good)
        if self._open is not None:  # a slowdown that became a hang
            changes += self._close(max(self._open.start, last_good))
        latest = self._latest if self._latest_ts is not None and self._latest_ts > last_good else 0.0
        baseline = self._anchor()
        self._open = Anomaly(STALL, last_good, now, None, baseline, latest)
        self._reference = None  # a hang ends a slow start's slowdown: after it, the run is judged as it is
        self._clear_slow_tracking()
        changes.append(self._open)
        return changes

    # -- internals ----------------------------------------------------------------------------------

    def _reset(self) -> None:
        """Forget the run: a new warm-up and a new baseline follow (the caller closes any open anomaly). How much
        the job's healthy level moves is kept: a restart changes its rate (its nodes), not its data. So is the
        rate of a healthy run (one that did not start slow, with a block of its own), for the next run's check."""
        self._prior_spread = max(self._prior_spread, self._level_spread)
        if self._established and self._reference is None and self._blocks_median is not None:
            self._prior_rate, self._prior_nodes = self._anchor(), self._nodes
            self._prior_centre = self._blocks_median
        self._reference = None  # a slow start's slowdown holds the last healthy run's rate as the baseline
        self._restart_judged = False
        self._nodes = None
        self._prev_value_ts = None
        self._deg_blocks: deque[tuple[datetime, float]] = deque()  # (block end, log median), the last 4 hours
        self._pending_degradation: list[Anomaly] = []
        self._established = False
        self._window: deque[tuple[datetime, float]] = deque()  # healthy samples, oldest first
        self._sorted: list[float] = []  # the same values, sorted
        self._first_sample: datetime | None = None
        self._last_good: datetime | None = None  # the last progressing sample
        self._latest = 0.0
        self._latest_ts: datetime | None = None
        self._max_seen = 0.0
        self._recent: deque[tuple[datetime, float]] = deque()
        self._blocks: list[float] = []  # medians of the healthy blocks since the start (or the last rise), sorted
        self._block_logs: list[float] = []  # ... and their logs
        self._block: list[float] = []  # the healthy samples of the block being filled
        self._block_end: datetime | None = None
        self._blocks_median: float | None = None
        self._noise: deque[float] = deque(maxlen=NOISE_BLOCKS)  # the sample noise measured at the last blocks
        self._level_spread = 0.0  # the robust spread of the healthy blocks' log-medians around their median
        self._set_allowance()
        self._clear_slow_tracking()

    def _clear_slow_tracking(self) -> None:
        self._recent = deque()
        self._raw_slow_since: datetime | None = None  # first sample of the current run of slow samples
        self._raw_ok_since: datetime | None = None  # first sample of the current run at/above the allowance
        self._raw_low_since: datetime | None = None  # ... and of the current run below it
        self._raw_slow_time = timedelta(0)  # ... and how long it has lasted, pauses left out
        self._pending_since: datetime | None = None  # a slowdown that has not lasted `sustain` yet
        self._pending_time = timedelta(0)
        self._recovery = 0.0  # an open slowdown's evidence of being back (log-ratio-minutes past the midpoint)
        self._recovered_at: datetime | None = None  # the sample from which that evidence last rose from zero
        self._cusum = 0.0  # log-deficit-minutes past the allowance
        self._cusum_since: datetime | None = None  # the sample from which it last rose from zero

    def _close(self, end: datetime) -> list[Anomaly]:
        if self._open is None:
            return []
        closed = replace(self._open, end=max(end, self._open.start), current=self._latest)
        self._open = None
        self._clear_slow_tracking()
        return [closed]

    def _anchor(self) -> float:
        recent = _median(self._sorted)
        anchor = recent if self._blocks_median is None else max(self._blocks_median, recent)
        return anchor if self._reference is None else max(anchor, self._reference)

    def _measure_noise(self, values: list[float]) -> None:
        """The job's sample noise, from healthy samples in time order: the MAD of successive log-differences, so
        that a level that moves (a drift, a decline) does not count as noise; it widens a noisy job's allowance."""
        if len(values) < BLOCK_MIN_SAMPLES:
            return
        steps = sorted(abs(math.log(b / a)) for a, b in itertools.pairwise(values))
        self._noise.append(1.4826 * _median(steps) / math.sqrt(2))  # scaled to one sample's standard deviation
        self._set_allowance()

    def _measure_level_spread(self) -> None:
        """The spread of the job's healthy level at the CUSUM's own time scale: the robust standard deviation of
        its blocks' log-medians around their median, since the start. A data-mix change that moves the rate by
        a few percent for hours, or a slow wander, is part of the job's healthy range, not a deficit; a decline
        adds at most the few blocks it spends above the allowance, which a median-based spread shrugs off."""
        logs = self._block_logs
        if len(logs) < LEVEL_MIN_BLOCKS or self._blocks_median is None:
            self._level_spread = 0.0
        else:
            self._level_spread = 1.4826 * _deviation(logs, math.log(self._blocks_median))
        self._set_allowance()

    def _set_allowance(self) -> None:
        noise = NOISE_Z * _median(sorted(self._noise)) if self._noise else 0.0
        spread = LEVEL_Z * max(self._level_spread, self._prior_spread)
        level = min(LEVEL_ALLOWANCE_MAX, spread) + self._level_lift(spread)
        if self._unplaced(spread):
            level = max(level, LEVEL_ALLOWANCE_MAX)
        self._allowance_value = max(ALLOWANCE, noise, level)
        self._allowance_ratio = math.exp(-self._allowance_value)

    def _unplaced(self, spread: float) -> bool:
        """Whether this run's place in the job's level range is unknown: a young run (less than UNPLACED_FOR of
        healthy blocks) of a job whose level moves more than a quiet job's (its range wider than ALLOWANCE), on other
        nodes than the last healthy run, or on nodes either did not say. Its first hours hold one or two of the job's
        data mixes, and on other nodes nothing says whether they sit at the top of its range or the bottom; so its
        allowance is the widest, until its own blocks show its range."""
        if self._prior_centre is None or self._reference is not None or spread <= ALLOWANCE:
            return False
        if self._nodes is not None and self._nodes == self._prior_nodes:
            return False  # the same nodes: `_level_lift` places the run
        return len(self._blocks) * self._block_length() < UNPLACED_FOR

    def _level_lift(self, spread: float) -> float:
        """How far (in log) this run's blocks sit above the job's centre (the last healthy run's blocks' median),
        within its level range (`spread`), when both runs said the same nodes: the level allowance is then measured
        from that centre. A run's first hours hold one or two of its data mixes, so a restart at the top of the
        job's range would otherwise put the floor there, and the bottom of the range (where the last run was not
        slow) below it. Only on known, equal nodes: applied to every run whose rate is a little higher (the main
        generator's, no nodes), it let moderate slowdowns and declines through later."""
        median = self._blocks_median
        if self._prior_centre is None or median is None or self._reference is not None:
            return 0.0
        if self._nodes is None or self._nodes != self._prior_nodes:
            return 0.0
        return min(max(0.0, math.log(median / self._prior_centre)), spread)

    def _add_to_block(self, ts: datetime, value: float, level: float) -> None:
        """A healthy sample for the anchored baseline; a block full of them (by time) becomes one median, unless
        that is below the allowance `level` (a decline under way). The whole block is judged, not each sample:
        leaving out a noisy job's low samples one by one would ratchet its baseline up."""
        if self._block_end is None or ts >= self._block_end:
            median = _median(sorted(self._block)) if len(self._block) >= BLOCK_MIN_SAMPLES else 0.0
            if median > 0:
                self._degradation_block(ts, median)
            if median >= level:
                if self._blocks_median is not None and median > RISE_RESET * self._blocks_median:
                    self._blocks = []  # a lasting rise: the run's earlier blocks no longer say what healthy is
                    self._block_logs = []
                bisect.insort(self._blocks, median)
                bisect.insort(self._block_logs, math.log(median))
                self._blocks_median = _median(self._blocks)
                self._measure_level_spread()
                self._measure_noise(self._block)
            self._block, self._block_end = [], ts + self._block_length()
        self._block.append(value)

    def _maybe_establish(self, now: datetime) -> None:
        if self._first_sample is None or len(self._sorted) < WARMUP_MIN_SAMPLES:
            return
        assert self._last_good is not None
        if now - self._first_sample >= WARMUP or now - self._last_good >= self.stall_after:
            self._established = True
            self._measure_noise([v for _, v in self._window])

    def _remember(self, ts: datetime, value: float) -> None:
        """Add a healthy sample to the baseline window, dropping those older than the window (keeping a few)."""
        window, ordered = self._window, self._sorted
        horizon = ts - self._scaled(BASELINE_WINDOW, WINDOW_INTERVALS)
        while len(window) >= WARMUP_MIN_SAMPLES and window[0][0] < horizon:
            _, old = window.popleft()
            del ordered[bisect.bisect_left(ordered, old)]
        window.append((ts, value))
        bisect.insort(ordered, value)

    def _sample(self, ts: datetime, value: float) -> list[Anomaly]:
        changes = self.advance(ts)  # a silence that ran out before this sample is a stall first
        self._latest, self._latest_ts = value, ts
        if not self._established:
            if value > 0 and value >= NEAR_ZERO_RATIO * self._max_seen:
                self._max_seen = max(self._max_seen, value)
                if self._first_sample is None:
                    self._first_sample = ts
                self._last_good = ts
                self._remember(ts, value)
            self._maybe_establish(ts)
            return changes
        baseline = _median(self._sorted)  # the anchor, inline: this is the path every sample takes
        if self._blocks_median is not None and self._blocks_median > baseline:
            baseline = self._blocks_median
        if self._reference is not None and self._reference > baseline:
            baseline = self._reference
        if value < NEAR_ZERO_RATIO * baseline or value == 0:  # a pause, or a hang that reports zeros
            if self._open is not None:
                self._open = replace(self._open, current=value)
            return changes
        # the time since the previous progressing sample counts towards `sustain` (and the recovery) unless it
        # was longer than the recent window: a pause (absent or zero samples) is neither slow nor recovered time
        # (up to GAP_INTERVALS of the job's own interval: at a 5-minute cadence every interval counts)
        previous = self._last_good
        gap_bound = self._scaled(RECENT_WINDOW, GAP_INTERVALS)
        step = ts - previous if previous is not None and ts - previous <= gap_bound else timedelta(0)
        self._last_good = ts
        if self._open is not None and self._open.kind == STALL:
            changes += self._close(ts)
        if self.too_sparse is not None:  # too far apart to judge a slowdown (said once, by `too_sparse`): stalls only
            self._remember(ts, value)
            return changes
        threshold = baseline * self.thresholds.drop_ratio
        level = baseline * self._allowance_ratio  # the allowance as a throughput
        slow = value < threshold
        if slow:
            if self._raw_slow_since is None:
                self._raw_slow_since, self._raw_slow_time = ts, timedelta(0)
            else:
                self._raw_slow_time += step
        else:
            self._raw_slow_since = None
        if value < level:
            self._raw_ok_since = None
            if self._raw_low_since is None:
                self._raw_low_since = ts
        else:
            self._raw_low_since = None
            if self._raw_ok_since is None:
                self._raw_ok_since = ts
        recent = self._recent
        recent.append((ts, value))
        horizon = ts - self._scaled(RECENT_WINDOW, RECENT_INTERVALS)
        while recent[0][0] < horizon:
            recent.popleft()
        smoothed = value if len(recent) == 1 else _median(sorted(v for _, v in recent))
        low = smoothed < level  # the log-deficit is past the allowance
        if self._open is not None:  # an open slowdown
            self._open = replace(self._open, current=value)
            # back once the evidence adds up: the recent throughput's log-margin over the allowance, summed over
            # time, a minute at or above the midpoint (halfway, in log, between the allowance and the baseline)
            # counting fully and nothing more, until it is worth RECOVER_FOR there; just above the allowance that
            # takes longer, and any dip below it starts again. So a level hovering at the allowance, in and out of
            # it with its noise, stays one slowdown, not many.
            half = self._allowance_value / 2
            gain = min(1.0, math.log(smoothed / level) / half)
            recovery = 0.0 if low else max(0.0, self._recovery + step / RECOVER_FOR * gain)
            if recovery > 0 and self._recovery == 0:
                self._recovered_at = self._raw_ok_since or ts
            self._recovery = recovery
            if recovery >= 1 - 1e-9:
                assert self._recovered_at is not None
                self._reference = None  # a slow start that came back to the last healthy run's rate: healthy now
                changes += self._close(self._recovered_at)
            return changes
        cusum = self._cusum
        if low or cusum > 0:  # (most samples of a healthy job: neither, and nothing to add)
            deficit = min(math.log(baseline / smoothed), self._allowance_value + self._deficit_cap)
            cusum = max(0.0, cusum + step.total_seconds() / 60 * (deficit - self._allowance_value))
            if cusum > 0 and (self._cusum == 0 or self._cusum_since is None):
                self._cusum_since = self._raw_low_since or ts  # the first low sample of those that moved the median
            self._cusum = cusum
        if smoothed < threshold:
            if self._pending_since is None:
                self._pending_since = self._raw_slow_since or ts
                self._pending_time = self._raw_slow_time if self._raw_slow_since is not None else timedelta(0)
            else:
                self._pending_time += step
            if self._pending_time >= self.thresholds.sustain:
                changes += self._open_slowdown(self._pending_since, ts, baseline, value)
            elif cusum >= CUSUM_LIMIT:
                assert self._cusum_since is not None
                changes += self._open_slowdown(min(self._cusum_since, self._pending_since), ts, baseline, value)
            return changes
        self._pending_since = None
        if cusum >= CUSUM_LIMIT:
            assert self._cusum_since is not None
            return changes + self._open_slowdown(self._cusum_since, ts, baseline, value)
        if not slow:
            self._remember(ts, value)
            if self._block_end is not None and ts < self._block_end:
                self._block.append(value)
            else:
                self._add_to_block(ts, value, level)
                changes += self._judge_restart(ts, value)
                changes += self._pending_degradation
                self._pending_degradation = []
        return changes

    def _open_slowdown(
        self, start: datetime, ts: datetime, baseline: float, value: float, *, restart: bool = False
    ) -> list[Anomaly]:
        changes = self._close_degradation(start)  # the same episode, now a slowdown: told once, as that
        self._open = Anomaly(SLOWDOWN, start, ts, None, baseline, value, restart)
        self._pending_since = None
        self._cusum, self._cusum_since = 0.0, None
        self._deg_blocks.clear()  # what follows a slowdown is judged afresh, never the slowdown's tail
        return [*changes, self._open]

    def _judge_restart(self, ts: datetime, value: float) -> list[Anomaly]:
        """Once, as the run's first block is in: a run that started slow against the last healthy run. On the same
        nodes at or below RESTART_SAME_NODES of its rate (or RESTART_UNKNOWN_NODES when the nodes are not known)
        is a slowdown from the run's first sample, its baseline the last healthy run's rate; on other nodes, a
        rate of its own. Held (as `_reference`) until the job is back near that rate or starts again."""
        if self._restart_judged or self._blocks_median is None:
            return []
        self._restart_judged = True
        prior, rate = self._prior_rate, self._blocks_median
        if prior is None or self._open is not None or self._first_sample is None:
            return []
        if self._nodes is not None and self._prior_nodes is not None:
            if self._nodes != self._prior_nodes:
                return []
            limit = RESTART_SAME_NODES
        else:
            limit = RESTART_UNKNOWN_NODES
        if rate > limit * prior:
            return []
        self._reference = prior
        self._clear_slow_tracking()
        return self._open_slowdown(self._first_sample, ts, prior, value, restart=True)

    # -- degradation ----------------------------------------------------------------------------------

    def _close_degradation(self, end: datetime) -> list[Anomaly]:
        if self._degraded is None:
            return []
        closed = replace(self._degraded, end=max(end, self._degraded.start), current=self._latest)
        self._degraded = None
        self._deg_hold_until = end + DEG_HOLD
        return [closed]

    def _degradation_block(self, ts: datetime, median: float) -> None:
        """A completed block (`median` of its samples, ending at `ts`) for the degradation rule: its window (the
        last DEG_WINDOW) against the reference (the DEG_REFERENCE before it). Told when the window's median is
        DEG_DROP below the reference's, most of its blocks clearly below, the difference clear of the blocks'
        own noise, the job's blocks quiet enough (DEG_MAX_NOISE) and its level calm (over the last DEG_STEPS_KEPT,
        and at least DEG_CALM_FOR, most of its hourly steps within DEG_MAX_STEP: a job whose rate steps with its
        data mix is not judged). Pure bookkeeping: what opens or
        closes waits in `_pending_degradation` for the sample being taken."""
        blocks = self._deg_blocks
        log_median = math.log(median)
        blocks.append((ts, log_median))
        while blocks and blocks[0][0] <= ts - DEG_WINDOW - DEG_REFERENCE:
            blocks.popleft()
        if self._open is not None:
            return
        held = self._deg_hold_until is not None and ts < self._deg_hold_until
        last_hour = sorted(v for at, v in blocks if at > ts - DEG_STEP)
        hour_before = sorted(v for at, v in blocks if ts - 2 * DEG_STEP < at <= ts - DEG_STEP)
        if self._degraded is None and not held and last_hour and hour_before and len(blocks) > 2:
            # how much the level steps on its own (a degradation and its recovery left out), and one block's noise
            self._steps.append((ts, abs(_median(last_hour) - _median(hour_before)), _block_noise(blocks)))
            while self._steps[0][0] <= ts - DEG_STEPS_KEPT:
                self._steps.popleft()
        if self._degraded is not None:
            recent = _median(sorted(v for at, v in blocks if at > ts - DEG_RECOVER))
            before = [v for at, v in blocks if ts - 2 * DEG_RECOVER < at <= ts - DEG_RECOVER]
            rose = bool(before) and recent - _median(sorted(before)) >= self._deg_drop / 2
            if rose or recent >= self._deg_reference - self._deg_drop / 2:
                back_from = next(at for at, _ in blocks if at > ts - DEG_RECOVER)
                self._pending_degradation += self._close_degradation(back_from - self._block_length())
            else:
                self._degraded = replace(self._degraded, current=median)
            return
        window = [(at, v) for at, v in blocks if at > ts - DEG_WINDOW]
        reference = [v for at, v in blocks if at <= ts - DEG_WINDOW]
        wanted = max(3, int(0.6 * (DEG_WINDOW / self._block_length())))
        if len(window) < wanted or len(reference) < wanted:
            return
        ref = _median(sorted(reference))
        now = _median(sorted(v for _, v in window))
        drop = ref - now
        if drop < DEG_DROP or not self._steps or ts - self._steps[0][0] < DEG_CALM_FOR:
            return
        steps = sorted(step for _, step, _ in self._steps)
        if steps[int(DEG_STEP_QUANTILE * (len(steps) - 1))] > DEG_MAX_STEP:
            return  # the job's level steps by this much on its own: a 5% drop cannot be told from its data mix
        # one block's noise: the last 4 hours' say, or the job's usual over DEG_STEPS_KEPT if more (at a long cadence
        # the 4 hours hold 8 blocks, whose spread alone can say a +-12% job is quiet)
        noise = max(_block_noise(blocks), _median(sorted(noise for _, _, noise in self._steps)))
        error = 1.25 * noise * math.sqrt(1 / len(window) + 1 / len(reference))  # of the two medians' difference
        below = [at for at, v in window if v <= ref - DEG_BELOW]
        if noise > DEG_MAX_NOISE or drop < DEG_Z * error or len(below) < DEG_LASTING * len(window):
            return
        start = below[0] - self._block_length()
        if ts - start < DEG_WINDOW:  # not down since the window's start: it has not lasted DEG_WINDOW yet
            return
        self._deg_reference, self._deg_drop = ref, drop
        self._degraded = Anomaly(DEGRADATION, start, ts, None, math.exp(ref), median)
        self._pending_degradation.append(self._degraded)

    def _block_length(self) -> timedelta:
        return self._scaled(BLOCK, BLOCK_SAMPLES)
