"""The simulated per-node metrics: healthy magnitudes of a P5 cluster, what each fault does to the faulty node
and to its peers, and the decoys (pauses, gaps, replacement) that the analysis must not blame."""

from __future__ import annotations

import statistics

import pytest

from bot.node_metrics.series import Cause, ClusterMetrics, Signal
from sandbox.node_metrics import Gap, Hardware, Injected, NodeMetricsSimulator, Replacement

NODES = [f"i-{k:017x}" for k in range(6)]
HOUR = 3600.0


def values(
    metrics: ClusterMetrics,
    signal: Signal,
    node: str,
    device: str | None = None,
    *,
    after: float = 0.0,
    before: float = float("inf"),
) -> list[float]:
    return [
        v
        for s in metrics.series
        if s.signal is signal and s.node == node and (device is None or s.device == device)
        for t, v in zip(s.times, s.values, strict=True)
        if after <= t < before
    ]


def simulator(**options: object) -> NodeMetricsSimulator:
    return NodeMetricsSimulator(cluster="kumo-train", nodes=NODES, seed=3, **options)  # type: ignore[arg-type]


def test_healthy_p5_magnitudes() -> None:
    metrics = simulator().series(start=0, end=HOUR, step=30)
    assert metrics.nodes() == tuple(sorted(NODES))
    assert len(metrics.series) == len(NODES) * (8 * 6 + 4 * 3)
    everyone = list(NODES)
    clocks = [v for n in everyone for v in values(metrics, Signal.SM_CLOCK, n)]
    temps = [v for n in everyone for v in values(metrics, Signal.GPU_TEMP, n)]
    power = [v for n in everyone for v in values(metrics, Signal.POWER, n)]
    tensor = [v for n in everyone for v in values(metrics, Signal.TENSOR_ACTIVE, n)]
    util = [v for n in everyone for v in values(metrics, Signal.GPU_UTIL, n)]
    efa = [v for n in everyone for v in values(metrics, Signal.EFA_RX, n)]
    retrans = [v for n in everyone for v in values(metrics, Signal.EFA_RETRANS, n)]
    assert min(clocks) >= 1900 and max(clocks) <= 1980
    assert min(temps) >= 50 and max(temps) <= 80
    assert min(power) >= 400 and max(power) <= 720
    assert 0.25 <= statistics.median(tensor) <= 0.75
    assert statistics.median(util) >= 94
    assert 7e9 <= statistics.median(efa) <= 12.5e9  # under the 100 Gb/s line rate
    assert max(retrans) < 5
    assert not any(values(metrics, Signal.XID, n) != [0.0] * len(values(metrics, Signal.XID, n)) for n in NODES)


def test_thermal_slows_the_gpu_and_makes_the_peers_wait() -> None:
    sim = simulator()
    sim.inject(Injected(cause=Cause.THERMAL, node=NODES[2], start=HOUR, end=None, gpu=3, severity=1.0))
    metrics = sim.series(start=0, end=2 * HOUR, step=30)
    before, after = {"before": HOUR}, {"after": HOUR}
    hot_clock = statistics.median(values(metrics, Signal.SM_CLOCK, NODES[2], "3", **after))
    assert hot_clock < 0.7 * 1980
    assert statistics.median(values(metrics, Signal.GPU_TEMP, NODES[2], "3", **after)) >= 88
    peer_tensor_before = statistics.median(values(metrics, Signal.TENSOR_ACTIVE, NODES[0], **before))
    peer_tensor_after = statistics.median(values(metrics, Signal.TENSOR_ACTIVE, NODES[0], **after))
    assert peer_tensor_after < 0.7 * peer_tensor_before  # the peers wait
    own = statistics.median(values(metrics, Signal.TENSOR_ACTIVE, NODES[2], "3", **after))
    assert own > 0.9 * peer_tensor_before  # the straggler itself stays busy
    assert statistics.median(values(metrics, Signal.SM_CLOCK, NODES[0], **after)) >= 1950


def test_network_fault_lowers_one_nodes_efa_and_raises_retransmits() -> None:
    sim = simulator()
    sim.inject(Injected(cause=Cause.NETWORK, node=NODES[4], start=HOUR, end=1.5 * HOUR, severity=0.5))
    metrics = sim.series(start=0, end=2 * HOUR, step=30)
    during = {"after": HOUR, "before": 1.5 * HOUR}
    faulty = statistics.median(values(metrics, Signal.EFA_TX, NODES[4], **during))
    peer = statistics.median(values(metrics, Signal.EFA_TX, NODES[1], **during))
    assert faulty == pytest.approx(0.6 * peer, rel=0.1)
    assert statistics.median(values(metrics, Signal.EFA_RETRANS, NODES[4], **during)) > 100
    assert max(values(metrics, Signal.EFA_RETRANS, NODES[4], after=1.5 * HOUR)) < 5  # ended
    assert max(values(metrics, Signal.EFA_RETRANS, NODES[1], **during)) < 5


def test_xid_79_reports_then_the_gpu_vanishes_and_the_job_hangs() -> None:
    sim = simulator()
    sim.inject(Injected(cause=Cause.GPU, node=NODES[1], start=HOUR, end=None, gpu=5))
    metrics = sim.series(start=0, end=1.5 * HOUR, step=30)
    assert set(values(metrics, Signal.XID, NODES[1], "5", after=HOUR)) == {79.0}
    assert max(s.times[-1] for s in metrics.series if s.node == NODES[1] and s.device == "5") < HOUR + 61
    assert min(s.times[-1] for s in metrics.series if s.node == NODES[1] and s.device == "4") == 1.5 * HOUR
    peers = values(metrics, Signal.TENSOR_ACTIVE, NODES[0], after=HOUR + 60)
    assert max(peers) < 0.08 and min(values(metrics, Signal.GPU_UTIL, NODES[0], after=HOUR + 60)) >= 95


def test_memory_xid_and_a_dead_gpu_without_xid() -> None:
    sim = simulator()
    sim.inject(Injected(cause=Cause.GPU_MEMORY, node=NODES[0], start=HOUR, end=None, gpu=2, xid=94))
    sim.inject(Injected(cause=Cause.GPU, node=NODES[3], start=1.5 * HOUR, end=None, gpu=1, xid=0))
    metrics = sim.series(start=0, end=2 * HOUR, step=30)
    assert set(values(metrics, Signal.XID, NODES[0], "2", after=HOUR)) == {94.0}
    assert set(values(metrics, Signal.XID, NODES[0], "2", before=HOUR)) == {0.0}
    assert set(values(metrics, Signal.XID, NODES[3], "1")) == {0.0}
    assert max(values(metrics, Signal.GPU_UTIL, NODES[3], "1", after=1.5 * HOUR)) == 0
    assert max(values(metrics, Signal.POWER, NODES[3], "1", after=1.5 * HOUR)) < 100


def test_input_starves_every_node_alike() -> None:
    sim = simulator()
    sim.inject(Injected(cause=Cause.INPUT, node=None, start=HOUR, end=None, severity=1.0))
    metrics = sim.series(start=0, end=2 * HOUR, step=30)
    for node in NODES:
        assert statistics.median(values(metrics, Signal.GPU_UTIL, node, after=HOUR)) < 45
        assert statistics.median(values(metrics, Signal.GPU_UTIL, node, before=HOUR)) > 94
        assert statistics.median(values(metrics, Signal.EFA_RETRANS, node, after=HOUR)) < 5


def test_checkpoints_idle_every_node_together() -> None:
    sim = simulator(checkpoint_every=1800.0, checkpoint_seconds=120.0, pause_jitter=0.0)
    metrics = sim.series(start=0, end=2 * HOUR, step=30)
    idle_steps = {
        node: {
            t
            for s in metrics.series
            if s.signal is Signal.GPU_UTIL and s.node == node
            for t, v in zip(s.times, s.values, strict=True)
            if v < 10
        }
        for node in NODES
    }
    assert 12 <= len(idle_steps[NODES[0]]) <= 20  # four 2-minute checkpoints in 2 hours
    assert all(steps == idle_steps[NODES[0]] for steps in idle_steps.values())


def test_gaps_and_replacement_remove_series() -> None:
    new = "i-0ffffffffffffffff"
    sim = simulator(
        gaps=[Gap(node=NODES[0], start=HOUR, end=HOUR + 300, exporter="dcgm")],
        replacements=[Replacement(old=NODES[5], new=new, at=HOUR, boot_seconds=600)],
    )
    metrics = sim.series(start=0, end=2 * HOUR, step=30)
    gpu_times = {t for s in metrics.series if s.node == NODES[0] and s.signal is Signal.GPU_UTIL for t in s.times}
    efa_times = {t for s in metrics.series if s.node == NODES[0] and s.signal is Signal.EFA_RX for t in s.times}
    assert not any(HOUR <= t < HOUR + 300 for t in gpu_times) and HOUR + 150 in efa_times
    assert max(t for s in metrics.series if s.node == NODES[5] for t in s.times) < HOUR
    assert min(t for s in metrics.series if s.node == new for t in s.times) == HOUR + 600
    # while the new node boots the job is down: every remaining node idles
    assert max(values(metrics, Signal.GPU_UTIL, NODES[1], after=HOUR, before=HOUR + 600)) < 10


def test_values_at_is_one_scrape_and_clear_ends_faults() -> None:
    sim = simulator(hardware=Hardware(boost_mhz=1410.0), gpus_per_node=4, efa_devices=("rdmap0s31",))
    sim.inject(Injected(cause=Cause.THERMAL, node=NODES[0], start=100.0, end=None, gpu=None))
    scrape = sim.values_at(200.0)
    assert len(scrape) == len(NODES) * (4 * 6 + 3)
    hot = [v for sig, node, _, v in scrape if sig is Signal.SM_CLOCK and node == NODES[0]]
    assert len(hot) == 4 and max(hot) < 1000
    sim.clear(at=300.0)
    assert sim.faults[0].end == 300.0
    cooled = [v for sig, node, _, v in sim.values_at(400.0) if sig is Signal.SM_CLOCK and node == NODES[0]]
    assert min(cooled) > 1350


def test_same_seed_same_series_and_bad_faults_refused() -> None:
    assert simulator().series(start=0, end=600) == simulator().series(start=0, end=600)
    sim = simulator()
    with pytest.raises(ValueError, match="not a node"):
        sim.inject(Injected(cause=Cause.THERMAL, node="i-nope", start=0, end=None))
    with pytest.raises(ValueError, match="node=None"):
        sim.inject(Injected(cause=Cause.INPUT, node=NODES[0], start=0, end=None))


def test_a_series_arrays_are_its_samples_made_once_and_read_only() -> None:
    """The culprit analysis and each faulty-node assessment grid the same series: the arrays are made once."""
    from bot.node_metrics.series import Series, Signal

    series = Series(signal=Signal.GPU_UTIL, node="i-1", device="0", times=(60.0, 120.0), values=(97.5, 12.0))
    times, values = series.arrays
    assert series.arrays[0] is times and series.arrays[1] is values
    assert times.tolist() == [60.0, 120.0] and values.tolist() == [97.5, 12.0]
    with pytest.raises(ValueError):
        values[0] = 0.0  # a check cannot change what the next one reads
    assert series == Series(signal=Signal.GPU_UTIL, node="i-1", device="0", times=(60.0, 120.0), values=(97.5, 12.0))
