"""Nodes that join while a job is slow (a replacement, a scale-up) are never blamed on comparisons they cannot
have, and their coming does not make the verdict flip (issue 13, seen in the sandbox: a stalled job's alert
said "Likely culprit: i-8b91 (network), then i-56c1, i-3d03", the replacement and two scale-up nodes, all
joined after the stall began; a minute later it said "names no single node").

The newcomers are built from `Series` as Prometheus serves a node that has just booted: no sample before it
joined; its EFA counters start from zero, so rate() has no value for its first two steps and a partial one
after; its traffic ramps up while NCCL connects and the loader fills, its GPUs already at work."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.node_metrics.culprit import HEALTHY_BEFORE, assess_nodes, faulty_episodes, find_culprit
from bot.node_metrics.series import Cause, ClusterMetrics, Series, Signal, Verdict
from sandbox.node_metrics import Injected, NodeMetricsSimulator

HOUR = 3600.0
T0 = 1_780_000_000.0
STALL = T0 + 1.5 * HOUR  # the job's throughput episode starts here
NODES = tuple(f"i-0{k:016x}" for k in range(0x3A0, 0x3A0 + 8))
JOINERS = ("i-08b91", "i-056c1", "i-03d03")  # the replacement and two scale-up nodes


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def joined(metrics: ClusterMetrics, joins: dict[str, float], *, ramp: float = 300.0) -> ClusterMetrics:
    """The metrics with each node of `joins` joined at its time: nothing before; EFA rate() gaps for its first
    two steps (two scrapes of a fresh counter), then a partial rate; traffic ramping up over `ramp` seconds."""
    step = metrics.step_seconds
    out: list[Series] = []
    for s in metrics.series:
        join = joins.get(s.node)
        if join is None:
            out.append(s)
            continue
        times = np.asarray(s.times)
        values = np.asarray(s.values, dtype=float)
        keep = times >= join
        if s.signal.is_counter:
            keep &= times >= join + 2 * step
            if s.signal is not Signal.EFA_RETRANS:
                warm = np.clip((times - join) / ramp, 0.02, 1.0)
                values = values * warm
        if keep.any():
            out.append(replace_values(s, times[keep], values[keep]))
    return ClusterMetrics(
        cluster=metrics.cluster,
        start=metrics.start,
        end=metrics.end,
        step_seconds=step,
        series=tuple(out),
    )


def replace_values(s: Series, times: np.ndarray, values: np.ndarray) -> Series:
    return Series(
        signal=s.signal, node=s.node, device=s.device, times=tuple(times.tolist()), values=tuple(values.tolist())
    )


def culprit(metrics: ClusterMetrics, *, end: float, start: float = STALL) -> Verdict:
    return find_culprit(metrics, healthy_start=at(start) - HEALTHY_BEFORE, episode_start=at(start), episode_end=at(end))


def stalled_cluster(
    fault: Injected | None, *, seed: int = 3, devices: int = 4, nodes: tuple[str, ...] = NODES
) -> NodeMetricsSimulator:
    sim = NodeMetricsSimulator(
        cluster="kumo-train",
        nodes=(*nodes, *JOINERS),
        efa_devices=[f"rdmap{k}s{k}" for k in range(devices)],
        seed=seed,
        checkpoint_every=1800.0,
    )
    if fault is not None:
        sim.inject(fault)
    return sim


def verdicts(metrics: ClusterMetrics, *, first: float = 2.0, last: float = 20.0) -> list[tuple[Cause, tuple[str, ...]]]:
    """The job alert's verdict as it is recomputed every minute of the episode."""
    return [
        (v.cause, v.suspects)
        for minute in np.arange(first, last + 1e-9, 1.0)
        for v in [culprit(metrics, end=STALL + 60 * minute)]
    ]


def test_the_sandbox_stall_blames_none_of_the_nodes_that_joined_after_it() -> None:
    """The issue's case: the job slows (its loader starved), one node is replaced a minute in and two more
    join at +2 and +4 minutes. Every minute's verdict is the same, and names none of them."""
    sim = stalled_cluster(Injected(cause=Cause.INPUT, node=None, start=STALL, end=None, severity=0.5))
    joins = {JOINERS[0]: STALL + 60, JOINERS[1]: STALL + 120, JOINERS[2]: STALL + 240}
    metrics = joined(sim.series(start=T0, end=STALL + 1800), joins)
    seen = verdicts(metrics)
    assert set(seen) == {(Cause.INPUT, ())}, seen
    assert faulty_episodes(metrics) == []
    assert all(a.fault is None for minute in (5, 8, 12) for a in assess_nodes(metrics, at=at(STALL + 60 * minute)))


def test_a_straggler_is_named_alone_and_steadily_while_nodes_join() -> None:
    sim = stalled_cluster(Injected(cause=Cause.THERMAL, node=NODES[5], start=STALL, end=None, gpu=2, severity=0.7))
    joins = {JOINERS[0]: STALL + 30, JOINERS[1]: STALL + 90, JOINERS[2]: STALL + 150}
    metrics = joined(sim.series(start=T0, end=STALL + 1800), joins)
    seen = verdicts(metrics)
    assert set(seen) == {(Cause.THERMAL, (NODES[5],))}, seen
    assert [(e.node, e.cause) for e in faulty_episodes(metrics)] == [(NODES[5], Cause.THERMAL)]


def test_a_newcomer_is_still_named_on_evidence_of_its_own() -> None:
    """An XID 79 on a node that joined after the slowdown began names it: that needs no healthy window."""
    sim = stalled_cluster(Injected(cause=Cause.GPU, node=JOINERS[1], start=STALL + 400, end=None, gpu=4))
    joins = {JOINERS[0]: STALL - 20 * 60, JOINERS[1]: STALL + 120, JOINERS[2]: STALL + 180}
    metrics = joined(sim.series(start=T0, end=STALL + 1800), joins)
    verdict = culprit(metrics, start=STALL + 420, end=STALL + 1200)
    assert (verdict.cause, verdict.suspects) == (Cause.GPU, (JOINERS[1],))
    assert verdict.evidence.startswith("XID 79 on GPU 4")
    assert [(e.node, e.cause) for e in faulty_episodes(metrics)] == [(JOINERS[1], Cause.GPU)]


def test_a_node_that_joined_inside_the_healthy_window_and_settled_is_compared() -> None:
    """Joined 40 minutes before the slowdown, it has a healthy window of its own: its throttle is named."""
    sim = stalled_cluster(Injected(cause=Cause.THERMAL, node=JOINERS[0], start=STALL, end=None, gpu=1, severity=0.7))
    metrics = joined(sim.series(start=T0, end=STALL + 1800), {JOINERS[0]: STALL - 40 * 60})
    assert culprit(metrics, end=STALL + 900).suspects == (JOINERS[0],)


def test_a_warming_newcomer_opens_no_faulty_node_alert_nor_closes_one() -> None:
    """The faulty-node check on a 10-minute window: a node that joined inside it, warming up with little
    EFA traffic, is neither faulty nor (yet) clear; once settled it is judged like the others."""
    sim = stalled_cluster(None)
    metrics = joined(sim.series(start=T0, end=STALL + 1800), {JOINERS[0]: STALL}, ramp=480.0)
    (early,) = [a for a in assess_nodes(metrics, at=at(STALL + 6 * 60)) if a.node == JOINERS[0]]
    assert early.fault is None and not early.clear
    (later,) = [a for a in assess_nodes(metrics, at=at(STALL + 25 * 60)) if a.node == JOINERS[0]]
    assert later.fault is None and later.clear
    assert faulty_episodes(metrics) == []


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cause=st.sampled_from([None, Cause.INPUT, Cause.THERMAL, Cause.NETWORK]),
    seed=st.integers(min_value=0, max_value=2**16),
    devices=st.sampled_from([1, 2, 4, 16, 32]),
    established=st.integers(min_value=3, max_value=8),
    joins=st.lists(st.floats(min_value=-240.0, max_value=900.0), min_size=1, max_size=3),
    ramp=st.floats(min_value=60.0, max_value=600.0),
    where=st.integers(min_value=0, max_value=100),
)
def test_nodes_joining_around_a_slowdown_never_take_the_blame(
    cause: Cause | None,
    seed: int,
    devices: int,
    established: int,
    joins: list[float],
    ramp: float,
    where: int,
) -> None:
    """Any number of nodes joining from 4 minutes before a slowdown to 15 minutes into it, warming up over 1-10
    minutes, in clusters of 3-8 settled nodes with 1-32 EFA devices: no newcomer is ever a suspect, and every
    minute's verdict from the fifth on is the one it would be without them."""
    nodes = NODES[:established]
    culprit_node = nodes[where % established]
    fault = None
    if cause is Cause.INPUT:
        fault = Injected(cause=cause, node=None, start=STALL, end=None, severity=0.6)
    elif cause is Cause.THERMAL:
        fault = Injected(cause=cause, node=culprit_node, start=STALL, end=None, gpu=where % 8, severity=0.8)
    elif cause is Cause.NETWORK:
        fault = Injected(cause=cause, node=culprit_node, start=STALL, end=None, severity=0.8)
    sim = stalled_cluster(fault, seed=seed, devices=devices, nodes=nodes)
    raw = sim.series(start=T0, end=STALL + 1500)
    metrics = joined(raw, {JOINERS[k]: STALL + t for k, t in enumerate(joins)}, ramp=ramp)
    without = ClusterMetrics(
        cluster=raw.cluster,
        start=raw.start,
        end=raw.end,
        step_seconds=raw.step_seconds,
        series=tuple(s for s in raw.series if s.node in nodes),
    )
    with_them, alone = verdicts(metrics, first=5.0), verdicts(without, first=5.0)
    assert not any(set(suspects) & set(JOINERS) for _, suspects in with_them), with_them
    assert with_them == alone
    expected = {None: (Cause.UNKNOWN, ()), Cause.INPUT: (Cause.INPUT, ())}.get(cause, (cause, (culprit_node,)))
    assert set(with_them) == {expected}, with_them
    assert not any(e.node in JOINERS for e in faulty_episodes(metrics))


def test_a_newcomer_bringing_its_gpus_up_is_not_missing_one_but_one_that_never_comes_is() -> None:
    """A node's DCGM exporter may report its GPUs one by one for its first minute: no GPU is gone. A
    replacement that never reports GPU 6 (fallen off the bus before it joined) is a GPU fault once settled."""
    sim = stalled_cluster(Injected(cause=Cause.INPUT, node=None, start=STALL, end=None, severity=0.5))
    join = STALL + 60
    metrics = joined(sim.series(start=T0, end=STALL + 1800), {JOINERS[0]: join})

    def without(node: str, gpu: str, *, until: float) -> ClusterMetrics:
        series = []
        for s in metrics.series:
            if s.node == node and s.device == gpu and not s.signal.is_counter:
                kept = [(t, v) for t, v in zip(s.times, s.values, strict=True) if t >= until]
                if not kept:
                    continue
                s = replace_values(s, np.array([t for t, _ in kept]), np.array([v for _, v in kept]))
            series.append(s)
        return ClusterMetrics(
            cluster=metrics.cluster,
            start=metrics.start,
            end=metrics.end,
            step_seconds=metrics.step_seconds,
            series=tuple(series),
        )

    slow_start = without(JOINERS[0], "6", until=join + 90)
    for minute in (2, 3, 10):
        assert JOINERS[0] not in culprit(slow_start, end=STALL + 60 * minute).suspects
    assert not any(e.node == JOINERS[0] for e in faulty_episodes(slow_start))
    never = without(JOINERS[0], "6", until=STALL + 7200)
    verdict = culprit(never, end=STALL + 15 * 60)
    assert (verdict.cause, verdict.suspects[:1]) == (Cause.GPU, (JOINERS[0],)), verdict
    assert verdict.evidence == "GPU 6 missing (peers report 8)"
    assert [(e.node, e.cause) for e in faulty_episodes(never)] == [(JOINERS[0], Cause.GPU)]
