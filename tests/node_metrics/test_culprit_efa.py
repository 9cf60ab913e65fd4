"""The EFA rule when a node's NICs are unevenly used (issue 13's most serious open item): traffic on 4 of a p5's
32 devices, as NCCL may put it, or one device idle, is no network fault; a node waiting for data, as its
peers do, is `input`, and opens no faulty-node alert. A network fault needs retransmits up (or the node's
traffic far below its peers'); one device is compared with the same device on its peers.

The clusters come from the simulator, with each node's rx and tx re-split over its devices by a usage
pattern (the node's total unchanged)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.node_metrics.culprit import HEALTHY_BEFORE, faulty_episodes, find_culprit
from bot.node_metrics.series import Cause, ClusterMetrics, Series, Signal, Verdict
from sandbox.node_metrics import Injected, NodeMetricsSimulator

HOUR = 3600.0
T0 = 1_780_000_000.0
EPISODE = T0 + 1.5 * HOUR
NODES = tuple(f"i-0{k:016x}" for k in range(0x5B0, 0x5B0 + 10))


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def devices(count: int) -> list[str]:
    return [f"rdmap{k}s{k}" for k in range(count)]


def used_on(count: int, which: list[int]) -> np.ndarray:
    """A node's share per device: its traffic on `which` only (evenly), nothing on the others."""
    weights = np.zeros(count)
    weights[which] = count / len(which)
    return weights


def uneven(metrics: ClusterMetrics, shares: Mapping[str, np.ndarray]) -> ClusterMetrics:
    """Each node of `shares` with its rx and tx re-split over its devices by its weights (mean 1)."""
    names = sorted({s.device for s in metrics.series if s.signal.is_counter}, key=lambda d: int(d[5:].split("s")[0]))
    index = {d: k for k, d in enumerate(names)}
    out: list[Series] = []
    for s in metrics.series:
        weights = shares.get(s.node)
        if weights is None or s.signal not in (Signal.EFA_RX, Signal.EFA_TX):
            out.append(s)
            continue
        w = float(weights[index[s.device]])
        out.append(
            Series(signal=s.signal, node=s.node, device=s.device, times=s.times, values=tuple(v * w for v in s.values))
        )
    return ClusterMetrics(
        cluster=metrics.cluster,
        start=metrics.start,
        end=metrics.end,
        step_seconds=metrics.step_seconds,
        series=tuple(out),
    )


def culprit(metrics: ClusterMetrics, *, minutes: float = 20.0) -> Verdict:
    return find_culprit(
        metrics,
        healthy_start=at(EPISODE) - HEALTHY_BEFORE,
        episode_start=at(EPISODE),
        episode_end=at(EPISODE + 60 * minutes),
    )


def simulated(fault: Injected | None, *, count: int, seed: int = 5, nodes: tuple[str, ...] = NODES) -> ClusterMetrics:
    sim = NodeMetricsSimulator(
        cluster="kumo-p5", nodes=nodes, efa_devices=devices(count), seed=seed, checkpoint_every=1800.0
    )
    if fault is not None:
        sim.inject(fault)
    return sim.series(start=T0, end=EPISODE + 1800)


P5_SHARES = {
    NODES[0]: used_on(32, [0, 8, 16, 24]),  # NCCL on 4 of 32
    NODES[1]: used_on(32, [3, 11, 19, 27]),  # 4 others
    NODES[2]: used_on(32, [k for k in range(32) if k != 5]),  # one device idle
    NODES[3]: used_on(32, list(range(16))),  # half of them
}


@pytest.mark.parametrize("severity", [0.3, 0.6])
def test_an_input_slowdown_on_unevenly_used_nics_is_input(severity: float) -> None:
    """The known defect: a starved loader on p5 nodes whose traffic sits on 4, 16, 31 or 32 of their devices
    was `network` on the uneven ones, and opened faulty-node alerts on healthy nodes."""
    fault = Injected(cause=Cause.INPUT, node=None, start=EPISODE, end=None, severity=severity)
    metrics = uneven(simulated(fault, count=32), P5_SHARES)
    for minutes in (5, 10, 20):
        verdict = culprit(metrics, minutes=minutes)
        assert (verdict.cause, verdict.suspects) == (Cause.INPUT, ()), verdict
    assert faulty_episodes(metrics) == []


def test_unevenly_used_nics_of_a_healthy_cluster_blame_nobody() -> None:
    metrics = uneven(simulated(None, count=32), P5_SHARES)
    assert culprit(metrics).suspects == ()
    assert faulty_episodes(metrics) == []


def test_a_degraded_node_on_unevenly_used_nics_is_still_network() -> None:
    fault = Injected(cause=Cause.NETWORK, node=NODES[0], start=EPISODE, end=None, severity=0.6)
    metrics = uneven(simulated(fault, count=32), P5_SHARES)
    verdict = culprit(metrics)
    assert (verdict.cause, verdict.suspects) == (Cause.NETWORK, (NODES[0],)), verdict
    assert [(e.node, e.cause) for e in faulty_episodes(metrics)] == [(NODES[0], Cause.NETWORK)]


def test_retransmits_on_the_few_devices_a_node_uses_count_for_the_whole_node() -> None:
    """A node on 4 of its 32 devices (its peers on all 32), all of its traffic down to 60 % of its peers', 40
    retransmits/s on each of the four (none on the idle ones): over 32 devices that is 5/s each, but the
    node's 160/s against its peers' 13/s is retransmits up: `network`, the whole node."""
    shares = {NODES[2]: used_on(32, [1, 9, 17, 25])}
    fault = Injected(cause=Cause.NETWORK, node=NODES[2], start=EPISODE, end=None, severity=0.5)
    metrics = uneven(simulated(fault, count=32), shares)
    used = {f"rdmap{k}s{k}" for k in (1, 9, 17, 25)}
    series = tuple(
        Series(
            signal=s.signal,
            node=s.node,
            device=s.device,
            times=s.times,
            values=tuple(v * (40 / 180 if s.device in used else 0.0) for v in s.values),
        )
        if s.node == NODES[2] and s.signal is Signal.EFA_RETRANS
        else s
        for s in metrics.series
    )
    metrics = ClusterMetrics(
        cluster=metrics.cluster, start=metrics.start, end=metrics.end, step_seconds=metrics.step_seconds, series=series
    )
    verdict = culprit(metrics)
    assert (verdict.cause, verdict.suspects) == (Cause.NETWORK, (NODES[2],)), verdict
    assert verdict.evidence.startswith("EFA ") and not verdict.evidence.startswith("EFA device")
    assert [(e.node, e.cause) for e in faulty_episodes(metrics)] == [(NODES[2], Cause.NETWORK)]


def test_one_bad_device_is_compared_with_the_same_device_on_its_peers() -> None:
    """Every node carries most of its traffic on 4 of 32 devices; one of those four degrades on one node with
    retransmits: named, device and all. The node's idle devices are not 'below' anything."""
    shares = {node: used_on(32, [2, 10, 18, 26]) for node in NODES}
    fault = Injected(cause=Cause.NETWORK, node=NODES[7], start=EPISODE, end=None, device=18, severity=0.7)
    metrics = uneven(simulated(fault, count=32), shares)
    verdict = culprit(metrics)
    assert (verdict.cause, verdict.suspects) == (Cause.NETWORK, (NODES[7],)), verdict
    assert verdict.evidence.startswith("EFA device rdmap18s18 ")
    assert [(e.node, e.cause) for e in faulty_episodes(metrics)] == [(NODES[7], Cause.NETWORK)]


def test_a_device_idle_without_retransmits_is_not_a_network_fault() -> None:
    """One device of one node stops carrying traffic (NCCL moved its channels) with no retransmits: below the
    same device on its peers, but nothing is lost; not `network`, whatever the job does."""
    shares = {NODES[4]: used_on(4, [0, 1, 3])}
    fault = Injected(cause=Cause.INPUT, node=None, start=EPISODE, end=None, severity=0.5)
    for f in (None, fault):
        metrics = uneven(simulated(f, count=4), shares)
        assert NODES[4] not in culprit(metrics).suspects
        assert faulty_episodes(metrics) == []


def pattern(count: int, kind: str, rng: np.random.Generator) -> np.ndarray:
    if kind == "even":
        return np.ones(count)
    if kind == "subset":  # NCCL on a few devices, which ones per node
        k = int(rng.integers(1, max(count // 2, 1) + 1))
        return used_on(count, sorted(rng.choice(count, size=k, replace=False).tolist()))
    if kind == "one_idle" and count > 1:
        idle = int(rng.integers(count))
        return used_on(count, [d for d in range(count) if d != idle])
    weights = rng.dirichlet(np.full(count, 0.5)) * count  # skewed: some devices far busier than others
    return weights


PATTERNS = ("even", "subset", "one_idle", "skewed")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    count=st.sampled_from([1, 2, 4, 8, 16, 32]),
    nodes=st.integers(min_value=3, max_value=10),
    seed=st.integers(min_value=0, max_value=2**16),
    kinds=st.lists(st.sampled_from(PATTERNS), min_size=10, max_size=10),
    uneven_share=st.floats(min_value=0.0, max_value=0.5),
    cause=st.sampled_from([None, Cause.INPUT, Cause.NETWORK]),
    severity=st.floats(min_value=0.3, max_value=1.0),
    where=st.integers(min_value=0, max_value=100),
)
def test_uneven_nics_never_make_a_network_fault_and_hide_none(
    count: int,
    nodes: int,
    seed: int,
    kinds: list[str],
    uneven_share: float,
    cause: Cause | None,
    severity: float,
    where: int,
) -> None:
    """Clusters of 3-10 nodes with 1-32 EFA devices, up to half of the nodes using their NICs unevenly (a few
    devices, one idle, skewed): healthy or starved for data, nobody is blamed and no faulty-node alert opens;
    a node whose EFA degrades (severity 0.5-1, retransmits up) is named `network`."""
    names = NODES[:nodes]
    rng = np.random.default_rng(seed)
    odd = names[: int(uneven_share * nodes)]
    shares = {node: pattern(count, kinds[k], rng) for k, node in enumerate(odd)}
    suspect = names[where % nodes]
    fault = None
    if cause is Cause.INPUT:
        fault = Injected(cause=cause, node=None, start=EPISODE, end=None, severity=max(severity, 0.4))
    elif cause is Cause.NETWORK:
        fault = Injected(cause=cause, node=suspect, start=EPISODE, end=None, severity=max(severity, 0.5))
    metrics = uneven(simulated(fault, count=count, seed=seed, nodes=names), shares)
    verdict = culprit(metrics, minutes=15)
    episodes = [(e.node, e.cause) for e in faulty_episodes(metrics)]
    if cause is Cause.NETWORK:
        assert (verdict.cause, verdict.suspects) == (Cause.NETWORK, (suspect,)), verdict
        assert episodes == [(suspect, Cause.NETWORK)]
    else:
        assert verdict.suspects == (), verdict
        assert verdict.cause is (cause or Cause.UNKNOWN)
        assert episodes == []
