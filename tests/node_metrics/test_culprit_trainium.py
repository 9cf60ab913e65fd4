"""The culprit on Trainium (issue 22): the Neuron monitor's series judged by the same peer comparison as DCGM's.
Each Trainium fault names its node and cause in words of NeuronCores and Trainium devices; `thermal` is never
said; an idle node (no Neuron process, so no Neuron series but its hardware info) is never blamed; hard faults
open a faulty-node alert at once. And the causes that hold on data nobody here made: evidence already there in
the healthy window, an XID's number, a hot straggler at low duty, too few judged steps."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import numpy as np
import pytest

from bot.node_metrics.culprit import HEALTHY_BEFORE, MIN_JUDGED, assess_nodes, faulty_episodes, find_culprit
from bot.node_metrics.series import Cause, ClusterMetrics, Series, Signal, Verdict
from sandbox.node_metrics import TRN1, TRN1_EFA, Gap, Hardware, Injected, NodeMetricsSimulator, Replacement

HOUR = 3600.0
T0 = 1_780_000_000.0
EPISODE = T0 + 1.5 * HOUR
NODES = tuple(f"i-0{k:016x}" for k in range(0x7A0, 0x7A0 + 10))


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def culprit(metrics: ClusterMetrics, *, start: float = EPISODE, minutes: float = 15.0) -> Verdict:
    return find_culprit(
        metrics, healthy_start=at(start) - HEALTHY_BEFORE, episode_start=at(start), episode_end=at(start + 60 * minutes)
    )


def trn1(nodes: tuple[str, ...] = NODES, hardware: Hardware = TRN1, **options: object) -> NodeMetricsSimulator:
    defaults: dict[str, object] = {"checkpoint_every": 1800.0, "seed": 5}
    return NodeMetricsSimulator(
        cluster="sakura-trn1",
        nodes=nodes,
        gpus_per_node=32,
        efa_devices=TRN1_EFA,
        hardware=hardware,
        **{**defaults, **options},  # type: ignore[arg-type]
    )


TRAINIUM_FAULTS = [
    (
        Injected(cause=Cause.GPU, node=NODES[3], start=EPISODE, end=None, gpu=7, neuron="stuck_core"),
        Cause.GPU,
        "NeuronCore 7 (Trainium device 3) stuck at 0 % utilization",
    ),
    (
        Injected(cause=Cause.GPU, node=NODES[4], start=EPISODE, end=None, gpu=5, neuron="device_missing"),
        Cause.GPU,
        "15 of 16 Trainium devices reported (trn1.32xlarge)",
    ),
    (
        Injected(cause=Cause.GPU, node=NODES[5], start=EPISODE, end=None, neuron="hardware_errors", severity=0.3),
        Cause.GPU,
        "hardware execution errors on its Trainium devices",
    ),
    (
        Injected(cause=Cause.GPU_MEMORY, node=NODES[6], start=EPISODE, end=None, gpu=9, neuron="ecc_uncorrected"),
        Cause.GPU_MEMORY,
        "uncorrected HBM ECC errors on Trainium device 9",
    ),
    (
        Injected(
            cause=Cause.GPU_MEMORY, node=NODES[1], start=EPISODE, end=None, gpu=12, neuron="ecc_uncorrected", sram=True
        ),
        Cause.GPU_MEMORY,
        "uncorrected SRAM ECC errors on Trainium device 12",
    ),
    (
        Injected(
            cause=Cause.GPU_MEMORY, node=NODES[7], start=EPISODE, end=None, gpu=2, neuron="ecc_corrected", severity=0.2
        ),
        Cause.GPU_MEMORY,
        "corrected HBM ECC errors on Trainium device 2 at",
    ),
    (Injected(cause=Cause.NETWORK, node=NODES[8], start=EPISODE, end=None, severity=0.6), Cause.NETWORK, "EFA "),
]


@pytest.mark.parametrize(
    ("fault", "cause", "evidence"),
    TRAINIUM_FAULTS,
    ids=["stuck-core", "device-missing", "hardware-errors", "ecc-hbm", "ecc-sram", "ecc-corrected", "network"],
)
def test_each_trainium_fault_names_its_node_in_neuron_words_and_opens_a_faulty_node_alert(
    fault: Injected, cause: Cause, evidence: str
) -> None:
    sim = trn1()
    sim.inject(fault)
    metrics = sim.series(start=T0, end=EPISODE + 1800, step=30)
    verdict = culprit(metrics)
    assert (verdict.cause, verdict.suspects) == (cause, (fault.node,)), verdict.evidence
    assert verdict.evidence.startswith(evidence) or evidence in verdict.evidence, verdict.evidence
    assert "GPU" not in verdict.evidence
    assert verdict.chart is not None and "GPU" not in verdict.chart.title
    (episode,) = faulty_episodes(metrics)
    assert (episode.node, episode.cause) == (fault.node, cause)
    hard = fault.neuron in ("device_missing", "hardware_errors", "ecc_uncorrected")
    # a hard fault opens at its first sample (rate() needs one scrape after the first event); the others
    # once they cover 60 % of the 10-minute window
    assert episode.detected_at.timestamp() - EPISODE <= (90 if hard else 9 * 60)


def test_input_on_trainium_is_every_neuroncore_waiting_alike() -> None:
    sim = trn1()
    sim.inject(Injected(cause=Cause.INPUT, node=None, start=EPISODE, end=None, severity=0.6))
    metrics = sim.series(start=T0, end=EPISODE + 1800)
    verdict = culprit(metrics)
    assert (verdict.cause, verdict.suspects) == (Cause.INPUT, ())
    assert verdict.evidence.startswith("NeuronCore utilization ") and "on every node" in verdict.evidence
    assert faulty_episodes(metrics) == []


def test_trainium_is_never_thermal_and_a_healthy_cluster_blames_nobody() -> None:
    with pytest.raises(ValueError, match="no thermal fault on Trainium"):
        trn1().inject(Injected(cause=Cause.THERMAL, node=NODES[0], start=EPISODE, end=None))
    sim = trn1(
        evaluation_every=2 * HOUR, replacements=[Replacement(old=NODES[2], new="i-0fffffffffffff001", at=T0 + HOUR)]
    )
    metrics = sim.series(start=T0, end=T0 + 4 * HOUR)
    assert not any(s.signal.family.value == "dcgm" for s in metrics.series)
    assert faulty_episodes(metrics) == [], "checkpoints, an evaluation, a replacement and ECC trickles: nothing"
    for start in (T0 + 1.2 * HOUR, T0 + 2 * HOUR, T0 + 3.1 * HOUR):
        verdict = culprit(metrics, start=start)
        assert verdict.suspects == () and verdict.cause is not Cause.THERMAL, verdict


def test_a_node_with_no_neuron_process_is_idle_not_dead() -> None:
    """The Neuron monitor drops every series but the hardware info while no Neuron process runs: a spare node,
    or every node while the job restarts, is idle, never blamed, and an idle stretch opens nothing."""
    sim = trn1(spares=[NODES[9]], checkpoint_every=None)
    metrics = sim.series(start=T0, end=EPISODE + 1800)
    spare = {s.signal for s in metrics.series if s.node == NODES[9]}
    assert Signal.NEURONCORE_UTIL not in spare and Signal.NEURON_DEVICES in spare and Signal.EFA_RX in spare
    sim.inject(Injected(cause=Cause.NETWORK, node=NODES[4], start=EPISODE, end=None, severity=0.6))
    metrics = sim.series(start=T0, end=EPISODE + 1800)
    assert culprit(metrics).suspects == (NODES[4],)
    assert [e.node for e in faulty_episodes(metrics)] == [NODES[4]]
    assessed = {a.node: a for a in assess_nodes(metrics, at=at(EPISODE + 1800))}
    assert assessed[NODES[9]].fault is None and not assessed[NODES[9]].clear, "idle: neither faulty nor clear"


def test_a_missing_device_of_an_unknown_type_is_told_by_its_peers() -> None:
    other = replace(TRN1, instance_type="trn9.future")
    sim = trn1(hardware=other)
    sim.inject(Injected(cause=Cause.GPU, node=NODES[2], start=EPISODE, end=None, gpu=0, neuron="device_missing"))
    verdict = culprit(sim.series(start=T0, end=EPISODE + 1800))
    assert verdict.suspects == (NODES[2],) and verdict.evidence == "15 of 16 Trainium devices reported (as its peers)"


def test_an_uncorrected_ecc_event_seen_briefly_opens_then_closes_and_a_trickle_opens_nothing() -> None:
    sim = trn1(checkpoint_every=None)
    fault = Injected(
        cause=Cause.GPU_MEMORY, node=NODES[0], start=EPISODE, end=None, gpu=4, neuron="ecc_uncorrected", xid_seconds=40
    )
    sim.inject(fault)
    (episode,) = faulty_episodes(sim.series(start=T0, end=EPISODE + HOUR))
    assert (episode.node, episode.cause) == (NODES[0], Cause.GPU_MEMORY)
    assert episode.end is not None and episode.end.timestamp() - EPISODE <= 20 * 60
    # the healthy devices' corrected events now and then (a few an hour) are no fault
    trickle = trn1(checkpoint_every=None, seed=11)
    metrics = trickle.series(start=T0, end=T0 + 3 * HOUR)
    rates = [v for s in metrics.series if s.signal is Signal.MEM_ECC_CORRECTED for v in s.values if v > 0]
    assert rates, "the simulator's healthy trickle is there"
    assert faulty_episodes(metrics) == []


def test_an_ecc_code_decides_over_the_hardware_errors_that_follow_it() -> None:
    sim = trn1()
    sim.inject(
        Injected(cause=Cause.GPU_MEMORY, node=NODES[3], start=EPISODE, end=None, gpu=6, neuron="ecc_uncorrected")
    )
    sim.inject(Injected(cause=Cause.GPU, node=NODES[3], start=EPISODE + 60, end=None, neuron="hardware_errors"))
    metrics = sim.series(start=T0, end=EPISODE + 1800)
    verdict = culprit(metrics)
    assert (verdict.cause, verdict.suspects) == (Cause.GPU_MEMORY, (NODES[3],)), verdict.evidence
    assert [(e.node, e.cause) for e in faulty_episodes(metrics)] == [(NODES[3], Cause.GPU_MEMORY)]


# -- causes that hold on data nobody here made (GPU) ---------------------------------------------------------


def gpu_cluster(**options: object) -> NodeMetricsSimulator:
    defaults: dict[str, object] = {"checkpoint_every": 1800.0, "seed": 9}
    return NodeMetricsSimulator(cluster="kumo-train", nodes=NODES, **{**defaults, **options})  # type: ignore[arg-type]


@pytest.mark.parametrize("xid", [48, 63, 64, 94, 95])
def test_a_memory_xid_whose_gpu_then_vanished_is_gpu_memory_as_its_number_says(xid: int) -> None:
    """XID 79's shape (the GPU's series end a minute later) after a memory XID: the number decides."""
    sim = gpu_cluster()
    sim.inject(Injected(cause=Cause.GPU_MEMORY, node=NODES[6], start=EPISODE, end=None, gpu=2, xid=xid))
    metrics = sim.series(start=T0, end=EPISODE + 1800)
    vanished = ClusterMetrics(
        cluster=metrics.cluster,
        start=metrics.start,
        end=metrics.end,
        step_seconds=metrics.step_seconds,
        series=tuple(
            _cut(s, EPISODE + 60) if (s.node, s.device) == (NODES[6], "2") and not s.signal.is_counter else s
            for s in metrics.series
        ),
    )
    verdict = culprit(vanished)
    assert (verdict.cause, verdict.suspects) == (Cause.GPU_MEMORY, (NODES[6],))
    assert verdict.evidence == f"XID {xid} on GPU 2, then the GPU vanished"
    assert [(e.node, e.cause) for e in faulty_episodes(vanished)] == [(NODES[6], Cause.GPU_MEMORY)]


def _cut(series: Series, until: float) -> Series:
    kept = [(t, v) for t, v in zip(series.times, series.values, strict=True) if t < until]
    return replace(series, times=tuple(t for t, _ in kept), values=tuple(v for _, v in kept))


def _low_duty(metrics: ClusterMetrics, node: str, gpu: str, utilization: float) -> ClusterMetrics:
    """The straggler's own utilization held at `utilization` % wherever it worked (its duty is low)."""
    out = []
    for s in metrics.series:
        if s.signal is Signal.GPU_UTIL and s.node == node and s.device == gpu:
            s = replace(s, values=tuple(min(v, utilization) for v in s.values))
        out.append(s)
    return replace(metrics, series=tuple(out))


def test_a_hot_throttled_straggler_at_low_duty_is_thermal_and_opens_a_faulty_node_alert() -> None:
    sim = gpu_cluster(gpus_per_node=1)
    sim.inject(Injected(cause=Cause.THERMAL, node=NODES[4], start=EPISODE, end=None, gpu=0, severity=0.8))
    metrics = _low_duty(sim.series(start=T0, end=EPISODE + HOUR), NODES[4], "0", 35.0)
    verdict = culprit(metrics)
    assert (verdict.cause, verdict.suspects) == (Cause.THERMAL, (NODES[4],)), verdict.evidence
    assert [(e.node, e.cause) for e in faulty_episodes(metrics)] == [(NODES[4], Cause.THERMAL)]


def test_an_intermittent_hot_throttle_at_low_duty_cycle_opens_a_faulty_node_alert() -> None:
    """On a third of the time, in bursts: never 60 % of a window, but hot each time it throttles."""
    sim = gpu_cluster(checkpoint_every=None)
    sim.inject(Injected(cause=Cause.THERMAL, node=NODES[2], start=EPISODE, end=EPISODE + HOUR, gpu=6, duty=0.35))
    (episode,) = faulty_episodes(sim.series(start=T0, end=EPISODE + 2 * HOUR))
    assert (episode.node, episode.cause) == (NODES[2], Cause.THERMAL)
    assert episode.end is not None and episode.end.timestamp() <= EPISODE + HOUR + 22 * 60


def test_a_throttle_that_comes_back_after_a_quiet_stretch_longer_than_the_window_is_one_alert() -> None:
    """Three hot bursts of 4 minutes, 13 minutes apart: the alert stays open across the quiet stretches (a
    window clear, but not the one before it too) and closes once two windows are clear."""
    sim = gpu_cluster(checkpoint_every=None)
    for k in range(3):
        burst = EPISODE + k * 17 * 60
        sim.inject(Injected(cause=Cause.THERMAL, node=NODES[2], start=burst, end=burst + 7 * 60, gpu=6))
    (episode,) = faulty_episodes(sim.series(start=T0, end=EPISODE + 2 * HOUR))
    assert (episode.node, episode.cause) == (NODES[2], Cause.THERMAL)
    last = EPISODE + 2 * 17 * 60 + 7 * 60
    assert episode.end is not None and last + 10 * 60 <= episode.end.timestamp() <= last + 22 * 60


def test_a_short_hot_throttle_opens_nothing() -> None:
    sim = gpu_cluster(checkpoint_every=None)
    sim.inject(Injected(cause=Cause.THERMAL, node=NODES[2], start=EPISODE, end=EPISODE + 150, gpu=6))
    assert faulty_episodes(sim.series(start=T0, end=EPISODE + HOUR)) == []


def test_a_verdict_needs_enough_judged_steps() -> None:
    sim = gpu_cluster(checkpoint_every=None)
    sim.inject(Injected(cause=Cause.THERMAL, node=NODES[5], start=EPISODE, end=None, gpu=1))
    metrics = sim.series(start=T0, end=EPISODE + 1800)
    too_short = (MIN_JUDGED - 2) * 30 / 60
    assert culprit(metrics, minutes=too_short).suspects == ()
    assert culprit(metrics, minutes=3).suspects == (NODES[5],)
    assert np.isclose(MIN_JUDGED * 30, 120)


def test_a_fault_begun_inside_the_healthy_window_is_still_the_new_one() -> None:
    """A throttle from 40 minutes before the episode (the throughput episode started late) covers most of the
    healthy window, but not its start: it is the culprit, unlike one there before the window began."""
    sim = gpu_cluster()
    sim.inject(Injected(cause=Cause.THERMAL, node=NODES[3], start=EPISODE - 40 * 60, end=None, gpu=2, severity=0.7))
    assert culprit(sim.series(start=T0, end=EPISODE + 1800)).suspects == (NODES[3],)
    before = gpu_cluster()
    before.inject(Injected(cause=Cause.THERMAL, node=NODES[3], start=T0, end=None, gpu=2, severity=0.7))
    assert culprit(before.series(start=T0, end=EPISODE + 1800)).suspects == ()


def test_a_dcgm_gap_that_begins_with_a_hang_another_node_explains_is_not_a_fault() -> None:
    """XID 79 on one node hangs the job; another node's DCGM exporter restarts at that very moment: the hang is
    the XID's, and the dark node gets no alert of its own."""
    sim = gpu_cluster(
        checkpoint_every=None, gaps=[Gap(node=NODES[8], start=EPISODE + 20, end=EPISODE + 900, exporter="dcgm")]
    )
    sim.inject(Injected(cause=Cause.GPU, node=NODES[1], start=EPISODE, end=EPISODE + 1200, gpu=3))
    metrics = sim.series(start=T0, end=EPISODE + HOUR)
    assert [(e.node, e.cause) for e in faulty_episodes(metrics)] == [(NODES[1], Cause.GPU)]
    assert culprit(metrics).suspects[:1] == (NODES[1],)


def test_a_faulty_nodes_alert_stays_open_while_another_node_hangs_the_job() -> None:
    """A hung job moves no EFA traffic: a degraded link cannot be compared then, and that is no sign of health.
    Its alert stays open through another node's XID 79 hang, and the hang's node gets its own."""
    sim = gpu_cluster(checkpoint_every=None)
    sim.inject(Injected(cause=Cause.NETWORK, node=NODES[4], start=EPISODE, end=None, severity=0.7))
    hang = (EPISODE + 1800, EPISODE + 3600)
    sim.inject(Injected(cause=Cause.GPU, node=NODES[7], start=hang[0], end=hang[1], gpu=1))
    metrics = sim.series(start=T0, end=EPISODE + 2 * HOUR)
    # while it hangs, no traffic moves on any node, and no packet is resent
    silent = tuple(
        replace(s, values=tuple(0.0 if hang[0] <= t < hang[1] else v for t, v in zip(s.times, s.values, strict=True)))
        if s.signal.is_counter
        else s
        for s in metrics.series
    )
    episodes = faulty_episodes(replace(metrics, series=silent))
    assert sorted((e.node, e.cause, e.end is None) for e in episodes) == sorted(
        [(NODES[4], Cause.NETWORK, True), (NODES[7], Cause.GPU, False)]
    )
