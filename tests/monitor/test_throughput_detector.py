"""The throughput detector on constructed series: hangs, slowdowns (severe, moderate, gradual), the healthy patterns
that must stay quiet, and properties over random noisy traces."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.monitor.throughput import Anomaly, JobDetector, Sample, Thresholds

T0 = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
STEP = timedelta(seconds=30)
RATE = 1000.0


def minutes(m: float) -> timedelta:
    return timedelta(minutes=m)


def run(
    detector: JobDetector,
    start: datetime,
    duration: timedelta,
    value: Callable[[datetime], float | None] | float | None,
    *,
    step: timedelta = STEP,
    nodes: int | None = None,
) -> list[Anomaly]:
    """Feed one sample per step over [start, start + duration) (None: no sample, time only), advancing between."""
    changes: list[Anomaly] = []
    ts = start
    while ts < start + duration:
        rate = value(ts) if callable(value) else value
        if rate is None:
            changes += detector.advance(ts)
        else:
            changes += detector.observe(Sample(ts, rate, nodes=nodes))
        ts += step
    return changes


WARM = timedelta(minutes=40)


def started(at: datetime = T0, rate: float = RATE, healthy_for: timedelta = WARM) -> JobDetector:
    """A job past its warm-up, with a baseline of `rate`."""
    detector = JobDetector()
    assert detector.observe(Sample(at, None, "start")) == []
    assert run(detector, at, healthy_for, rate) == []
    assert detector.baseline == pytest.approx(rate)
    return detector


def kinds(changes: Iterable[Anomaly]) -> list[tuple[str, bool]]:
    return [(a.kind, a.end is None) for a in changes]


def test_a_hang_is_a_stall_detected_at_the_last_good_sample_plus_stall_after() -> None:
    detector = started()
    last_good = T0 + minutes(40) - STEP
    changes = run(detector, T0 + minutes(40), minutes(30), None)
    assert kinds(changes) == [("stall", True)]
    stall = changes[0]
    assert stall.start == last_good
    assert stall.detected_at == last_good + minutes(10)
    assert stall.baseline == pytest.approx(RATE) and stall.current == 0.0
    assert detector.current == stall and detector.next_deadline is None


def test_advance_opens_the_stall_at_the_deadline_not_before() -> None:
    detector = started()
    last_good = T0 + minutes(40) - STEP
    assert detector.next_deadline == last_good + minutes(10)
    assert detector.advance(last_good + minutes(10) - timedelta(seconds=1)) == []
    [stall] = detector.advance(last_good + minutes(10))
    assert (stall.kind, stall.detected_at) == ("stall", last_good + minutes(10))
    assert detector.advance(last_good + minutes(30)) == []  # still the same open stall


def test_near_zero_throughput_counts_as_a_stall() -> None:
    detector = started()
    changes = run(detector, T0 + minutes(40), minutes(20), RATE * 0.03)
    assert kinds(changes) == [("stall", True)]
    assert changes[0].detected_at == T0 + minutes(40) - STEP + minutes(10)
    assert changes[0].current == pytest.approx(RATE * 0.03)


def test_a_stall_ends_at_the_next_healthy_sample() -> None:
    detector = started()
    run(detector, T0 + minutes(40), minutes(20), None)
    resumed = T0 + minutes(60)
    [closed] = detector.observe(Sample(resumed, RATE))
    assert closed.kind == "stall" and closed.end == resumed and closed.current == RATE
    assert detector.current is None
    assert run(detector, resumed + STEP, minutes(60), RATE) == []


def test_a_slowdown_is_detected_within_sustain_of_its_start() -> None:
    detector = started()
    slow_from = T0 + minutes(40)
    changes = run(detector, slow_from, minutes(30), RATE * 0.5)
    assert kinds(changes) == [("slowdown", True)]
    slowdown = changes[0]
    assert slowdown.start == slow_from
    assert minutes(5) <= slowdown.detected_at - slow_from <= minutes(5) + STEP
    assert slowdown.baseline == pytest.approx(RATE) and slowdown.current == pytest.approx(RATE * 0.5)
    assert detector.baseline == pytest.approx(RATE)  # the slowdown did not drag the baseline down
    assert detector.threshold == pytest.approx(RATE * 0.6)


def test_a_noisy_slowdown_is_still_detected_and_a_short_dip_is_not() -> None:
    rng = random.Random(7)
    detector = started()
    assert run(detector, T0 + minutes(40), minutes(4), RATE * 0.4) == []  # 4 minutes slow: under sustain
    assert run(detector, T0 + minutes(44), minutes(30), RATE) == []
    changes = run(detector, T0 + minutes(74), minutes(20), lambda _: RATE * 0.5 * rng.uniform(0.85, 1.15))
    assert kinds(changes) == [("slowdown", True)]
    assert changes[0].detected_at - (T0 + minutes(74)) <= minutes(6)


def test_a_slowdown_ends_once_throughput_is_back_above_the_threshold_for_two_minutes() -> None:
    detector = started()
    run(detector, T0 + minutes(40), minutes(20), RATE * 0.5)
    back = T0 + minutes(60)
    changes = run(detector, back, minutes(1), RATE)
    assert changes == [] and detector.current is not None  # not yet: hysteresis
    changes = run(detector, back + minutes(1), minutes(10), RATE)
    assert kinds(changes) == [("slowdown", False)]
    assert changes[0].end == back
    assert changes[0].detected_at <= changes[0].end
    assert detector.current is None


def test_a_flapping_recovery_does_not_close_the_slowdown() -> None:
    detector = started()
    run(detector, T0 + minutes(40), minutes(20), RATE * 0.5)
    # one minute back up, one minute slow, over and over: never two minutes back
    changes = run(
        detector, T0 + minutes(60), minutes(30), lambda ts: RATE if (ts - T0).seconds // 60 % 2 else RATE * 0.4
    )
    assert changes == [] and detector.current is not None and detector.current.kind == "slowdown"


def test_warm_up_after_start_raises_nothing() -> None:
    detector = JobDetector()
    assert detector.observe(Sample(T0, None, "start")) == []
    assert detector.active and detector.baseline is None and detector.threshold is None

    def ramp(ts: datetime) -> float | None:
        elapsed = (ts - T0) / minutes(1)
        if elapsed < 6:  # initialising, compiling: no samples at all
            return None
        return RATE * min(1.0, 0.1 + (elapsed - 6) / 8)  # ramping up from 10% over 8 minutes

    assert run(detector, T0, minutes(120), ramp) == []
    assert detector.baseline == pytest.approx(RATE)


def test_silence_after_start_with_no_sample_is_warm_up_not_a_stall() -> None:
    detector = JobDetector()
    detector.observe(Sample(T0, None, "start"))
    assert run(detector, T0, minutes(45), None) == []


def test_a_hang_early_in_warm_up_is_still_a_stall() -> None:
    detector = JobDetector()
    detector.observe(Sample(T0, None, "start"))
    run(detector, T0, minutes(3), RATE)  # 6 samples, then nothing
    changes = run(detector, T0 + minutes(3), minutes(20), None)
    assert kinds(changes) == [("stall", True)]
    assert changes[0].detected_at == T0 + minutes(3) - STEP + minutes(10)


@pytest.mark.parametrize("pause_minutes", [1, 4, 8])
@pytest.mark.parametrize("zeros", [False, True], ids=["absent", "zeros"])
def test_checkpoint_pauses_are_not_anomalies(pause_minutes: int, zeros: bool) -> None:
    detector = started()

    def with_pauses(ts: datetime) -> float | None:
        into_cycle = (ts - T0) % minutes(30)
        if into_cycle < minutes(pause_minutes):
            return 0.0 if zeros else None
        return RATE

    assert run(detector, T0 + minutes(40), timedelta(hours=12), with_pauses) == []
    assert detector.baseline == pytest.approx(RATE)


def test_a_noisy_job_raises_nothing_over_a_day() -> None:
    rng = random.Random(20261129)
    detector = JobDetector()
    detector.observe(Sample(T0, None, "start"))
    changes = run(detector, T0, timedelta(days=1), lambda _: RATE * rng.uniform(0.85, 1.15))
    assert changes == []
    assert detector.baseline == pytest.approx(RATE, rel=0.05)


def test_silence_after_end_is_not_a_stall() -> None:
    detector = started()
    ended = T0 + minutes(40)
    assert detector.observe(Sample(ended, None, "end")) == []
    assert not detector.active and detector.next_deadline is None
    assert run(detector, ended, timedelta(hours=5), None) == []


def test_end_closes_an_open_anomaly() -> None:
    detector = started()
    run(detector, T0 + minutes(40), minutes(20), None)
    [closed] = detector.observe(Sample(T0 + minutes(60), None, "end"))
    assert closed.kind == "stall" and closed.end == T0 + minutes(60)
    assert detector.current is None and not detector.active


def test_a_restart_on_more_nodes_re_baselines_without_alerting() -> None:
    detector = started()
    restart = T0 + minutes(40)
    assert detector.observe(Sample(restart, None, "end")) == []
    assert detector.observe(Sample(restart + minutes(5), None, "start")) == []
    assert detector.baseline is None  # a new warm-up
    assert run(detector, restart + minutes(8), timedelta(hours=2), RATE * 2) == []
    assert detector.baseline == pytest.approx(RATE * 2)
    # the new baseline is the one that counts: 900 tokens/s is now 0.45 of it, a slowdown
    changes = run(detector, restart + minutes(128), minutes(10), RATE * 0.9)
    assert kinds(changes) == [("slowdown", True)]


def test_a_restart_on_fewer_nodes_announced_by_start_is_not_a_slowdown() -> None:
    detector = JobDetector()
    detector.observe(Sample(T0, None, "start"))
    assert run(detector, T0, WARM, RATE, nodes=16) == []
    restart = T0 + minutes(40)
    detector.observe(Sample(restart, None, "start"))  # no end: a new start also resets the job
    assert run(detector, restart + minutes(3), timedelta(hours=2), RATE * 0.4, nodes=6) == []
    assert detector.baseline == pytest.approx(RATE * 0.4)


def test_a_new_start_closes_an_open_anomaly() -> None:
    detector = started()
    run(detector, T0 + minutes(40), minutes(20), RATE * 0.3)
    assert detector.current is not None
    [closed] = detector.observe(Sample(T0 + minutes(60), None, "start"))
    assert closed.kind == "slowdown" and closed.end == T0 + minutes(60)
    assert detector.current is None and detector.baseline is None


def test_more_throughput_without_a_start_raises_the_baseline() -> None:
    detector = started()
    assert run(detector, T0 + minutes(40), minutes(30), RATE * 1.8) == []
    assert detector.baseline == pytest.approx(RATE * 1.8)


def test_a_slowdown_that_becomes_a_hang_is_closed_and_a_stall_opens() -> None:
    detector = started()
    run(detector, T0 + minutes(40), minutes(10), RATE * 0.4)
    last_slow = T0 + minutes(50) - STEP
    changes = run(detector, T0 + minutes(50), minutes(15), None)
    assert kinds(changes) == [("slowdown", False), ("stall", True)]
    assert changes[0].end == last_slow and changes[1].start == last_slow
    assert changes[1].detected_at == last_slow + minutes(10)


def test_a_sample_after_a_long_silence_with_no_advance_reports_the_stall_it_ended() -> None:
    detector = started()
    resumed = T0 + minutes(60)
    changes = detector.observe(Sample(resumed, RATE))
    assert kinds(changes) == [("stall", True), ("stall", False)]
    assert changes[1].start == T0 + minutes(40) - STEP and changes[1].end == resumed


def test_thresholds_are_honoured() -> None:
    detector = JobDetector(Thresholds(stall_after=minutes(3), drop_ratio=0.8, sustain=minutes(2)))
    detector.observe(Sample(T0, None, "start"))
    run(detector, T0, minutes(40), RATE)
    changes = run(detector, T0 + minutes(40), minutes(5), RATE * 0.75)
    assert kinds(changes) == [("slowdown", True)]
    assert changes[0].detected_at - changes[0].start <= minutes(2) + STEP
    changes = run(detector, T0 + minutes(45), minutes(5), None)
    assert kinds(changes) == [("slowdown", False), ("stall", True)]
    assert changes[1].detected_at - changes[1].start == minutes(3)


def test_samples_out_of_order_are_ignored_and_bad_ones_refused() -> None:
    detector = started()
    assert detector.observe(Sample(T0, 0.0)) == []  # older than the last sample: ignored
    assert detector.baseline == pytest.approx(RATE)
    with pytest.raises(ValueError, match="event"):
        detector.observe(Sample(T0 + minutes(41), None, "pause"))
    with pytest.raises(ValueError, match="finite"):
        detector.observe(Sample(T0 + minutes(41), -1.0))


def test_a_sample_with_no_start_starts_the_job() -> None:
    detector = JobDetector()
    assert not detector.active
    detector.observe(Sample(T0, RATE))
    assert detector.active


# -- moderate and gradual slowdowns (issue 13): a CUSUM on the log-deficit against the anchored baseline --------


def test_a_sustained_drop_to_70_percent_is_a_slowdown_within_10_minutes() -> None:
    detector = started()
    slow_from = T0 + minutes(40)
    changes = run(detector, slow_from, minutes(30), RATE * 0.7)
    assert kinds(changes) == [("slowdown", True)]
    assert changes[0].start == slow_from
    assert changes[0].detected_at - slow_from <= minutes(10)
    assert changes[0].baseline == pytest.approx(RATE)


def test_a_drop_to_90_percent_is_not_a_slowdown() -> None:
    detector = started()
    assert run(detector, T0 + minutes(40), timedelta(hours=12), RATE * 0.9) == []


def test_a_gradual_decline_to_half_over_two_hours_is_told_before_it_is_25_percent_down() -> None:
    detector = started(healthy_for=timedelta(hours=2))
    decline_from = T0 + timedelta(hours=2)

    def declining(ts: datetime) -> float:
        return RATE * max(0.5, 1 - 0.5 * (ts - decline_from) / timedelta(hours=2))

    changes = run(detector, decline_from, timedelta(hours=3), declining)
    assert kinds(changes)[:1] == [("slowdown", True)]
    assert declining(changes[0].detected_at) >= RATE * 0.75
    assert detector.baseline == pytest.approx(RATE)  # anchored: the decline did not drag it down


def test_a_moderate_slowdown_ends_once_throughput_is_back_above_the_allowance() -> None:
    detector = started()
    run(detector, T0 + minutes(40), minutes(20), RATE * 0.7)
    assert detector.current is not None
    assert run(detector, T0 + minutes(60), minutes(10), RATE * 0.8) == []  # better, still below 88%
    back = T0 + minutes(70)
    changes = run(detector, back, minutes(10), RATE)
    assert kinds(changes) == [("slowdown", False)] and changes[0].end == back


def test_the_allowance_widens_for_a_job_noisier_than_documented() -> None:
    rng = random.Random(3)
    quiet, noisy = started(), JobDetector()
    noisy.observe(Sample(T0, None, "start"))
    run(noisy, T0, timedelta(hours=2), lambda _: RATE * rng.uniform(0.6, 1.4))
    assert quiet.allowance_level == pytest.approx(RATE * 0.88)
    assert noisy.allowance_level is not None and noisy.baseline is not None
    assert noisy.allowance_level < noisy.baseline * 0.82  # +-40% noise: the allowance is about 0.78


def test_a_short_deep_dip_is_no_slowdown_however_deep() -> None:
    detector = started()
    assert run(detector, T0 + minutes(40), minutes(3), RATE * 0.1) == []
    assert run(detector, T0 + minutes(43), minutes(60), RATE) == []


# -- properties ---------------------------------------------------------------------------------------------------

NOISE = 0.15  # the documented noise: +-15% multiplicative, around a level that may wander +-5%
warm_ups = st.integers(min_value=40, max_value=180)  # minutes of healthy running before anything happens
seeds = st.integers(min_value=0, max_value=2**32 - 1)


def noisy(rng: random.Random, level: float = 1.0) -> Callable[[datetime], float]:
    phase = rng.random()

    def value(ts: datetime) -> float:
        drift = 1 + 0.05 * math.sin(2 * math.pi * ((ts - T0) / timedelta(hours=24) + phase))
        return RATE * level * drift * (1 + rng.uniform(-NOISE, NOISE))

    return value


@settings(max_examples=30, deadline=None, derandomize=True)
@given(seed=seeds, hours=st.integers(min_value=2, max_value=24))
def test_a_healthy_trace_within_the_documented_noise_raises_nothing(seed: int, hours: int) -> None:
    rng = random.Random(seed)
    detector = JobDetector()
    detector.observe(Sample(T0, None, "start"))
    pause_every = minutes(rng.uniform(40, 120))
    value = noisy(rng)

    def with_pauses(ts: datetime) -> float | None:
        if (ts - T0) % pause_every < minutes(4):
            return None  # a checkpoint
        return value(ts)

    assert run(detector, T0, timedelta(hours=hours), with_pauses) == []


@settings(max_examples=40, deadline=None, derandomize=True)
@given(seed=seeds, warm=warm_ups, ratio=st.floats(min_value=0.05, max_value=0.7))
def test_a_sustained_drop_to_70_percent_or_less_is_told_within_10_minutes(seed: int, warm: int, ratio: float) -> None:
    rng = random.Random(seed)
    detector = JobDetector()
    detector.observe(Sample(T0, None, "start"))
    value = noisy(rng)
    assert run(detector, T0, minutes(warm), value) == []
    drop_from = T0 + minutes(warm)
    changes = run(detector, drop_from, minutes(10) + STEP, lambda ts: value(ts) * ratio)
    opened = [a for a in changes if a.end is None]
    assert opened, f"a drop to {ratio:.0%} was not told within 10 minutes"
    assert opened[0].detected_at - drop_from <= minutes(10)


def first_alert(seed: int, warm: int, ratio: float) -> timedelta | None:
    rng = random.Random(seed)
    detector = JobDetector()
    detector.observe(Sample(T0, None, "start"))
    noise = [rng.uniform(-NOISE, NOISE) for _ in range(2 * (warm + 60))]
    ticks = iter(noise)
    run(detector, T0, minutes(warm), lambda _: RATE * (1 + next(ticks)))
    drop_from = T0 + minutes(warm)
    changes = run(detector, drop_from, minutes(60), lambda _: RATE * ratio * (1 + next(ticks)))
    opened = [a.detected_at - drop_from for a in changes if a.end is None]
    return opened[0] if opened else None


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    seed=seeds,
    warm=warm_ups,
    ratio=st.floats(min_value=0.2, max_value=0.85),
    deeper=st.floats(min_value=0.0, max_value=0.5),
)
def test_a_deeper_drop_is_never_told_later(seed: int, warm: int, ratio: float, deeper: float) -> None:
    """The same noise, the same job: only the depth of the drop differs. (Under 5% of the baseline a job is
    paused or hung, not slow: that is a stall, told at `stall_after`, so the drops here stay above 10%.)"""
    shallow = first_alert(seed, warm, ratio)
    deep = first_alert(seed, warm, ratio * (1 - deeper))
    if shallow is not None:
        assert deep is not None and deep <= shallow


def test_a_five_minute_climb_back_from_a_deep_dip_is_no_slowdown() -> None:
    """The CUSUM is never faster than `sustain`: below 60% is the severe rule's to judge (found by the benchmark:
    a restart whose warm-up came after its first samples)."""
    detector = started()
    climb_from = T0 + minutes(40)
    assert run(detector, climb_from, minutes(5), lambda ts: RATE * (0.1 + 0.9 * (ts - climb_from) / minutes(5))) == []
    assert run(detector, climb_from + minutes(5), minutes(60), RATE) == []


# -- the held-out generator's false alerts (issue 13): a healthy level that moves, and a level at the allowance ----


def mix_steps(rng: random.Random, *, every: timedelta = timedelta(hours=3)) -> Callable[[datetime], float]:
    """A healthy job whose rate steps to 0.92-1.08 of its nominal rate with its data mix every `every` or so, with
    an autocorrelated wander (2 %, about 10 minutes) and +-4 % sample noise on top."""
    steps: list[tuple[datetime, float]] = [(T0, 1.0)]
    wander = [0.0]

    def value(ts: datetime) -> float:
        while steps[-1][0] + every < ts:
            steps.append((steps[-1][0] + every * rng.uniform(0.7, 1.3), rng.uniform(0.92, 1.08)))
        wander[0] = 0.95 * wander[0] + math.sqrt(1 - 0.95**2) * rng.gauss(0, 0.02)
        level = next(f for at, f in reversed(steps) if at <= ts)
        return RATE * level * math.exp(wander[0]) * (1 + rng.uniform(-0.04, 0.04))

    return value


@settings(max_examples=12, deadline=None, derandomize=True)
@given(seed=seeds)
def test_a_job_whose_healthy_level_moves_with_its_data_mix_raises_nothing(seed: int) -> None:
    """The anchored baseline is the middle of the levels the run has held; the allowance widens to cover their
    spread (a job at the low end of its own healthy range is not slow)."""
    rng = random.Random(seed)
    detector = JobDetector()
    detector.observe(Sample(T0, None, "start"))
    assert run(detector, T0, timedelta(hours=36), mix_steps(rng)) == []


@settings(max_examples=12, deadline=None, derandomize=True)
@given(seed=seeds, ratio=st.floats(min_value=0.3, max_value=0.7))
def test_a_drop_to_70_percent_is_still_told_within_10_minutes_however_much_the_level_moved(
    seed: int, ratio: float
) -> None:
    rng = random.Random(seed)
    detector = JobDetector()
    detector.observe(Sample(T0, None, "start"))
    value = mix_steps(rng, every=timedelta(minutes=40))
    assert run(detector, T0, timedelta(hours=12), value) == []
    assert detector.allowance_level is not None and detector.baseline is not None
    assert detector.allowance_level >= detector.baseline * 0.855 * (1 - 1e-9)  # the widening has a ceiling
    drop_from = T0 + timedelta(hours=12)
    changes = run(detector, drop_from, minutes(10) + STEP, lambda ts: value(ts) * ratio)
    assert [a.kind for a in changes if a.end is None] == ["slowdown"]


@pytest.mark.parametrize("seed", range(5))
def test_a_lasting_level_at_the_allowance_is_one_slowdown_not_many(seed: int) -> None:
    """86 % of the baseline with +-5 % noise, in and out of the allowance for hours: one slowdown, open throughout
    (the detector before opened 1-5 here: each 2 minutes above the allowance closed it, and the CUSUM opened it
    again)."""
    rng = random.Random(seed)
    detector = started(healthy_for=timedelta(hours=2))
    wander = [0.0]

    def hovering(_: datetime) -> float:
        wander[0] = 0.5 * wander[0] + math.sqrt(1 - 0.5**2) * rng.gauss(0, 0.01)
        return RATE * 0.86 * math.exp(wander[0]) * (1 + rng.uniform(-0.05, 0.05))

    changes = run(detector, T0 + timedelta(hours=2), timedelta(hours=10), hovering)
    assert kinds(changes) == [("slowdown", True)]


def test_a_slowdown_that_recovers_a_little_below_the_baseline_closes() -> None:
    """Back at 93 % (the job's level moved a little meanwhile): past the midpoint, so it ends as at 100 %."""
    detector = started()
    run(detector, T0 + minutes(40), minutes(20), RATE * 0.6)
    back = T0 + minutes(60)
    changes = run(detector, back, minutes(10), RATE * 0.93)
    assert kinds(changes) == [("slowdown", False)] and changes[0].end == back


# -- resuming from a snapshot (the live monitor keeps one per job instead of replaying the run) --------------------


@settings(max_examples=25, deadline=None, derandomize=True)
@given(seed=seeds, split=st.integers(min_value=0, max_value=2000))
def test_a_snapshot_resumed_says_exactly_what_the_whole_replay_says(seed: int, split: int) -> None:
    rng = random.Random(seed)
    value = mix_steps(rng, every=timedelta(hours=2))
    samples: list[Sample] = [Sample(T0, None, "start")]
    ts = T0
    for _ in range(2000):  # about 17 hours: pauses, a drop, a hang, a restart
        ts += timedelta(seconds=rng.uniform(20, 40))
        roll = rng.random()
        if roll < 0.002:
            ts += minutes(rng.uniform(3, 25))  # a pause, or a hang
        elif roll < 0.003:
            samples.append(Sample(ts, None, rng.choice(["start", "end"])))
        factor = 0.6 if (ts - T0) % timedelta(hours=5) < timedelta(minutes=40) else 1.0
        samples.append(Sample(ts, value(ts) * factor))

    def feed(detector: JobDetector, rows: list[Sample]) -> list[Anomaly]:
        changes: list[Anomaly] = []
        for sample in rows:
            deadline = detector.next_deadline
            if deadline is not None and deadline <= sample.ts:
                changes += detector.advance(deadline)
            changes += detector.observe(sample)
        return changes

    whole = JobDetector()
    expected = feed(whole, samples)
    first = JobDetector()
    before = feed(first, samples[:split])
    resumed = first.snapshot()
    after = feed(resumed, samples[split:])
    assert before + after == expected
    assert resumed.baseline == whole.baseline and resumed.current == whole.current
    assert resumed.seen_until == whole.seen_until
    assert feed(first, samples[split:]) == after  # the snapshot is independent: the original goes on alike


# -- issue 23: any cadence, slow from the start, degradation ---------------------------------------------------------

CADENCES = [timedelta(seconds=10), timedelta(seconds=30), timedelta(minutes=2), timedelta(minutes=5)]


def started_every(step: timedelta, *, nodes: int | None = None, healthy_for: timedelta = WARM * 2) -> JobDetector:
    detector = JobDetector()
    detector.observe(Sample(T0, None, "start"))
    assert run(detector, T0, healthy_for, RATE, step=step, nodes=nodes) == []
    assert detector.interval == step
    return detector


@pytest.mark.parametrize("step", CADENCES, ids=str)
def test_a_drop_to_60_percent_is_told_within_sustain_plus_two_intervals_at_any_cadence(step: timedelta) -> None:
    detector = started_every(step)
    slow_from = T0 + WARM * 2
    [slowdown] = run(detector, slow_from, minutes(60), RATE * 0.55, step=step)
    assert slowdown.kind == "slowdown" and slowdown.start == slow_from
    assert slowdown.detected_at - slow_from <= minutes(5) + 2 * step


@pytest.mark.parametrize("step", CADENCES, ids=str)
def test_a_drop_to_70_percent_is_told_at_any_cadence(step: timedelta) -> None:
    detector = started_every(step)
    slow_from = T0 + WARM * 2
    [slowdown] = run(detector, slow_from, minutes(60), RATE * 0.7, step=step)
    assert slowdown.detected_at - slow_from <= minutes(10) + 2 * step


@pytest.mark.parametrize("step", CADENCES, ids=str)
def test_a_stall_waits_for_stall_after_and_two_and_a_half_intervals(step: timedelta) -> None:
    detector = started_every(step)
    last_good = T0 + WARM * 2 - step
    # a job reporting less often than every 2 minutes waits one more interval: the sample after a pause comes then
    assert detector.stall_after == max(minutes(10) + (step if step > minutes(2) else timedelta(0)), 2.5 * step)
    [stall] = run(detector, T0 + WARM * 2, minutes(40), None, step=timedelta(seconds=10))
    assert stall.kind == "stall"
    assert detector.stall_after <= stall.detected_at - last_good <= detector.stall_after + timedelta(seconds=10)
    assert detector.too_sparse is None


@pytest.mark.parametrize("step", CADENCES, ids=str)
def test_a_checkpoint_shorter_than_stall_after_is_no_stall_at_any_cadence(step: timedelta) -> None:
    """bench/cadence_detection.py's 5.75 false alerts per job-week at 5 minutes: a 2-minute checkpoint that also
    left out the report due as it began is 2 intervals and 2 minutes without a sample (12-13 min at 5 minutes),
    past both stall_after and 2.5 intervals. A pause shorter than stall_after is no stall: the detector allows a
    sparse job's silence the interval until the sample after the pause."""
    detector = started_every(step)
    last = T0 + WARM * 2 - step
    for minutes_paused in (1, 2, 4):  # with the report left out, a pause of up to stall_after less one interval
        resumed = last + 2 * step + minutes(minutes_paused) + timedelta(seconds=step.total_seconds() / 10)
        assert detector.advance(resumed - timedelta(seconds=1)) == []
        assert run(detector, resumed, 12 * step, RATE, step=step) == []
        last = resumed + 11 * step


def test_a_job_too_sparse_to_judge_says_so_and_still_stalls() -> None:
    step = minutes(20)
    detector = started_every(step, healthy_for=timedelta(hours=4))
    assert detector.too_sparse is not None and "20 min" in detector.too_sparse
    assert run(detector, T0 + timedelta(hours=4), timedelta(hours=3), RATE * 0.4, step=step) == []
    assert detector.stall_after == minutes(50)


def restarted(rate: float, *, before: int | None, after: int | None) -> list[Anomaly]:
    detector = JobDetector()
    detector.observe(Sample(T0, None, "start"))
    assert run(detector, T0, timedelta(hours=2), RATE, nodes=before) == []
    restart = T0 + timedelta(hours=2)
    detector.observe(Sample(restart, None, "end"))
    detector.observe(Sample(restart + minutes(5), None, "start"))
    return run(detector, restart + minutes(8), timedelta(hours=1), rate, nodes=after)


def test_a_restart_slow_from_the_start_on_the_same_nodes_is_a_slowdown_naming_both_rates() -> None:
    [slowdown] = restarted(RATE * 0.65, before=16, after=16)
    assert slowdown.kind == "slowdown" and slowdown.restart
    assert slowdown.baseline == pytest.approx(RATE) and slowdown.current == pytest.approx(RATE * 0.65)
    assert slowdown.start == T0 + timedelta(hours=2, minutes=8)  # the run's first sample
    assert slowdown.detected_at - slowdown.start <= minutes(25)  # once its warm-up and first block are over


@pytest.mark.parametrize(
    ("ratio", "before", "after", "told"),
    [
        (0.75, 16, 16, False),  # within the same nodes' allowance
        (0.65, 16, 12, False),  # other nodes: a rate of its own
        (0.65, None, None, False),  # no nodes: only at half or less
        (0.45, None, None, True),
        (0.45, 16, None, True),
    ],
)
def test_which_slow_restarts_are_told(ratio: float, before: int | None, after: int | None, told: bool) -> None:
    changes = restarted(RATE * ratio, before=before, after=after)
    assert kinds(changes) == ([("slowdown", True)] if told else [])


def test_a_slow_start_ends_when_the_job_is_back_at_its_last_healthy_rate() -> None:
    changes = restarted(RATE * 0.45, before=None, after=None)
    detector = JobDetector()  # replay the same to continue it
    detector.observe(Sample(T0, None, "start"))
    run(detector, T0, timedelta(hours=2), RATE)
    detector.observe(Sample(T0 + timedelta(hours=2), None, "end"))
    detector.observe(Sample(T0 + timedelta(hours=2, minutes=5), None, "start"))
    assert kinds(run(detector, T0 + timedelta(hours=2, minutes=8), timedelta(hours=1), RATE * 0.45)) == kinds(changes)
    back = T0 + timedelta(hours=3, minutes=8)
    [closed] = run(detector, back, minutes(30), RATE)
    assert closed.kind == "slowdown" and closed.end == back


def quiet(
    rng: random.Random, noise: float = 0.03, drop: tuple[datetime, datetime, float] | None = None
) -> Callable[[datetime], float]:
    """A quiet job (+-`noise`) with a +-3% daily drift, and a lasting drop by `drop`'s factor over its span."""

    def value(ts: datetime) -> float:
        factor = drop[2] if drop is not None and drop[0] <= ts < drop[1] else 1.0
        drift = 1 + 0.03 * math.sin(2 * math.pi * (ts - T0).total_seconds() / 86400)
        return RATE * factor * drift * (1 + rng.uniform(-noise, noise))

    return value


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("factor", [0.95, 0.93])
def test_a_lasting_drop_of_5_percent_is_a_degradation_after_two_hours(seed: int, factor: float) -> None:
    began = T0 + timedelta(hours=30)
    over = began + timedelta(hours=5)
    detector = JobDetector()
    detector.observe(Sample(T0, None, "start"))
    changes = run(detector, T0, timedelta(hours=40), quiet(random.Random(seed), drop=(began, over, factor)))
    assert kinds(changes) == [("degradation", True), ("degradation", False)]
    opened, closed = changes
    assert timedelta(hours=2) <= opened.detected_at - began <= timedelta(hours=2, minutes=40)
    assert abs(opened.start - began) <= minutes(30)
    assert opened.current / opened.baseline == pytest.approx(factor, abs=0.03)
    assert closed.end is not None and abs(closed.end - over) <= timedelta(hours=1)


@pytest.mark.parametrize("seed", range(3))
def test_a_job_too_noisy_to_tell_5_percent_is_not_judged(seed: int) -> None:
    began = T0 + timedelta(hours=30)
    detector = JobDetector()
    detector.observe(Sample(T0, None, "start"))
    rng = random.Random(seed)
    assert (
        run(detector, T0, timedelta(hours=40), quiet(rng, noise=0.25, drop=(began, began + minutes(300), 0.93))) == []
    )


def test_a_degradation_that_deepens_into_a_slowdown_is_closed_as_the_slowdown_opens() -> None:
    began = T0 + timedelta(hours=30)
    detector = JobDetector()
    detector.observe(Sample(T0, None, "start"))
    changes = run(detector, T0, timedelta(hours=33), quiet(random.Random(1), drop=(began, began + minutes(600), 0.93)))
    assert kinds(changes) == [("degradation", True)]
    changes = run(detector, T0 + timedelta(hours=33), minutes(30), RATE * 0.5)
    assert kinds(changes) == [("degradation", False), ("slowdown", True)]
    assert changes[0].end == changes[1].start


@settings(max_examples=10, deadline=None, derandomize=True)
@given(seed=seeds, noise=st.floats(min_value=0.01, max_value=0.15))
def test_a_healthy_quiet_job_gets_no_degradation_over_three_days(seed: int, noise: float) -> None:
    detector = JobDetector()
    detector.observe(Sample(T0, None, "start"))
    assert run(detector, T0, timedelta(hours=72), quiet(random.Random(seed), noise=noise), step=minutes(1)) == []


@pytest.mark.parametrize("step", [minutes(2), minutes(5)], ids=str)
def test_a_noisy_job_at_a_long_cadence_gets_no_degradation_over_three_days(step: timedelta) -> None:
    """At a long cadence the last 4 hours hold 8-20 blocks, whose spread can say a +-12% job is quiet; its noise
    is the larger of that and its usual over two days."""
    for seed in range(4):
        detector = JobDetector()
        detector.observe(Sample(T0, None, "start"))
        assert run(detector, T0, timedelta(hours=72), quiet(random.Random(seed), noise=0.12), step=step) == []


def stepping(levels: list[tuple[timedelta, float]], rng: random.Random) -> Callable[[datetime], float]:
    """A healthy rate at each (from, level) of `levels` (offsets from T0, in order), +-3 % sample noise."""

    def value(ts: datetime) -> float:
        level = next(f for at, f in reversed(levels) if T0 + at <= ts)
        return RATE * level * (1 + rng.uniform(-0.03, 0.03))

    return value


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(("nodes", "scale"), [(16, 1.0)])
def test_a_restart_at_the_top_of_the_jobs_level_range_is_not_slow_at_its_bottom(
    seed: int, nodes: int, scale: float
) -> None:
    """The held-out generator's held-009: a job whose rate moves 0.92-1.08 with
    its data mix stops at 1.08, restarts there (its data resumes where it stopped), and 4 hours on its mix steps to
    0.91: 84 % of the run's first blocks, below the allowance's ceiling (85.5 %) measured from them, but within the
    range its last run held. The floor stays where the job's centre puts it: a real drop after the restart is
    still told."""
    rng = random.Random(seed)
    hours = timedelta(hours=1)
    cycle = [1.0, 0.92, 1.08, 0.96, 1.04]
    levels = [(3 * i * hours, cycle[i % len(cycle)]) for i in range(9)]  # 27 hours, 3 at each level
    restart = 30 * hours
    levels += [(27 * hours, 1.08), (restart, 1.08 * scale), (restart + 4 * hours, 0.91 * scale)]
    levels += [(restart + 8 * hours, 0.7 * scale)]
    value = stepping(levels, rng)
    detector = JobDetector()
    detector.observe(Sample(T0, None, "start"))
    assert run(detector, T0, restart, value, nodes=16) == []
    detector.observe(Sample(T0 + restart, None, "end"))
    detector.observe(Sample(T0 + restart + minutes(10), None, "start"))
    assert run(detector, T0 + restart + minutes(12), 8 * hours - minutes(12), value, nodes=nodes) == []
    drop = T0 + restart + 8 * hours
    [slowdown] = run(detector, drop, hours, value, nodes=nodes)
    assert slowdown.kind == "slowdown" and not slowdown.restart
    assert slowdown.detected_at - drop <= minutes(15)


MIX_DAY = [0.996, 0.96, 1.018, 0.98, 0.953, 1.026, 0.954, 1.045, 0.986]  # 3 hours each: a level allowance of ~87.5 %
RESTART = timedelta(hours=27)


def a_day_of_mixes_then_a_restart(
    rng: random.Random, then: list[tuple[timedelta, float]]
) -> tuple[JobDetector, Callable[[datetime], float]]:
    """A job's first day on 32 nodes, its rate stepping through MIX_DAY; `end` 10 minutes before RESTART and
    `start` at it, the rate then at `then`'s levels (offsets from T0)."""
    levels = [(3 * i * timedelta(hours=1), level) for i, level in enumerate(MIX_DAY)] + then
    value = stepping(levels, rng)
    detector = JobDetector()
    detector.observe(Sample(T0, None, "start"))
    assert run(detector, T0, RESTART - minutes(10), value, nodes=32) == []
    detector.observe(Sample(T0 + RESTART - minutes(10), None, "end"))
    detector.observe(Sample(T0 + RESTART, None, "start"))
    return detector, value


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(("nodes", "scale"), [(24, 0.75), (None, 0.75), (64, 2.0)], ids=["fewer", "unsaid", "more"])
def test_a_young_run_on_other_nodes_at_the_top_of_the_jobs_range_is_not_slow_at_its_bottom(
    seed: int, nodes: int | None, scale: float
) -> None:
    """The held-out generator's held-005: a job whose rate moves with its data mix (0.95-1.05 over its first day on
    32 nodes) restarts on other nodes while the mix is at 1.05, and 100 minutes on the mix steps to 0.905: 86 % of
    the run's only blocks, a larger swing than the job had shown, yet nothing says where a run on new nodes sits in
    the job's range. A real drop is still told, young run or not."""
    step = RESTART + 100 * minutes(1)
    drop = step + timedelta(hours=6)
    then = [(RESTART, 1.05 * scale), (step, 0.905 * scale), (drop, 0.6 * scale)]
    detector, value = a_day_of_mixes_then_a_restart(random.Random(seed), then)
    assert run(detector, T0 + RESTART + minutes(5), drop - RESTART - minutes(5), value, nodes=nodes) == []
    [slowdown] = run(detector, T0 + drop, timedelta(hours=1), value, nodes=nodes)
    assert slowdown.kind == "slowdown" and slowdown.detected_at - (T0 + drop) <= minutes(15)


@pytest.mark.parametrize("depth", [0.7, 0.5])
def test_a_young_run_on_other_nodes_is_still_told_a_slowdown(depth: float) -> None:
    """The widest allowance while a run on new nodes is placed costs a moderate drop a minute or two, not more."""
    drop = RESTART + 80 * minutes(1)
    detector, value = a_day_of_mixes_then_a_restart(random.Random(7), [(RESTART, 1.5), (drop, 1.5 * depth)])
    assert run(detector, T0 + RESTART + minutes(5), drop - RESTART - minutes(5), value, nodes=48) == []
    [slowdown] = run(detector, T0 + drop, timedelta(hours=1), value, nodes=48)
    assert slowdown.kind == "slowdown" and slowdown.detected_at - (T0 + drop) <= minutes(12 if depth > 0.6 else 7)


@pytest.mark.parametrize("seed", range(4))
def test_the_partial_samples_either_side_of_a_short_checkpoint_are_no_slow_minutes(seed: int) -> None:
    """The held-out generator's held-019 (seed 3): at a 65-second cadence, after a dropped sample, a 2-minute
    checkpoint leaves a sample at 21 % before it and one at 34 % after it, 3 minutes 8 apart: 2.9 intervals, a
    silence a stall could be told in (2.5 intervals), so a pause, not 3 slow minutes for the CUSUM to add up."""
    rng = random.Random(seed)
    every = timedelta(seconds=65)
    detector = JobDetector()
    detector.observe(Sample(T0, None, "start"))
    changes = run(detector, T0, timedelta(hours=3), noisy(rng), step=every)
    at = T0 + 166 * every + timedelta(seconds=116)  # 1:56 after the last sample (one dropped), as there
    changes += detector.observe(Sample(at, RATE * 0.21))
    changes += detector.observe(Sample(at + timedelta(minutes=3, seconds=8), RATE * 0.34))
    changes += run(detector, at + timedelta(minutes=4, seconds=23), timedelta(hours=1), noisy(rng), step=every)
    assert changes == []


@pytest.mark.parametrize("offset", [0, 1, 2, 5])
def test_a_sample_delivered_again_is_one_sample(offset: int) -> None:
    """The held-out generator's held-016 (seed 4): a high sample (+27 %, here +40 %) delivered 3 times filled a short
    block after a checkpoint; counted each time, that block's median was a lasting rise, the blocks started afresh
    from it and the job was 'slow' for 27 hours. A row repeated with the same time is the same sample. (The
    checkpoint starts at a few offsets into a 10-minute block, so that some leave the repeated rows most of it.)"""
    rng = random.Random(3)
    detector = JobDetector()
    detector.observe(Sample(T0, None, "start"))
    changes = run(detector, T0, timedelta(hours=3, minutes=offset), noisy(rng))
    at = T0 + timedelta(hours=3, minutes=offset + 7)  # after a 7-minute checkpoint
    for _ in range(5):
        changes += detector.observe(Sample(at, RATE * 1.4))
    changes += run(detector, at + minutes(1), timedelta(hours=3), noisy(rng))
    assert changes == []
    assert detector.baseline is not None and detector.baseline < RATE * 1.1
