"""The culprit analysis against the simulated cluster: the right node and cause per fault, nobody blamed for
the normal life of a cluster (pauses, exporter gaps, replacements, per-GPU spread), tiny clusters, and the
faulty-node check's hysteresis."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.config import MetricsConfig
from bot.node_metrics.culprit import (
    FAULT_WINDOW,
    HEALTHY_BEFORE,
    assess_nodes,
    faulty_episodes,
    find_culprit,
)
from bot.node_metrics.prometheus import PrometheusReader
from bot.node_metrics.series import Cause, ClusterMetrics, Series, Signal
from sandbox.node_metrics import Gap, Hardware, Injected, NodeMetricsSimulator, Replacement

HOUR = 3600.0
T0 = 1_780_000_000.0  # a Unix time well inside the exporters' lives
EPISODE = T0 + 1.5 * HOUR  # the slowdown starts here
NODES = tuple(f"i-0{k:016x}" for k in range(0x3A0, 0x3A0 + 12))


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def culprit(metrics: ClusterMetrics, *, start: float = EPISODE, minutes: float = 20.0):  # type: ignore[no-untyped-def]
    return find_culprit(
        metrics,
        healthy_start=at(start) - HEALTHY_BEFORE,
        episode_start=at(start),
        episode_end=at(start + 60 * minutes),
    )


def cluster(nodes: tuple[str, ...] = NODES, **options: object) -> NodeMetricsSimulator:
    defaults: dict[str, object] = {"checkpoint_every": 1800.0, "evaluation_every": 3 * HOUR, "seed": 7}
    return NodeMetricsSimulator(cluster="kumo-train", nodes=nodes, **{**defaults, **options})  # type: ignore[arg-type]


def test_contract_constants() -> None:
    assert timedelta(hours=1) == HEALTHY_BEFORE
    assert timedelta(minutes=10) == FAULT_WINDOW


@pytest.mark.parametrize(
    ("fault", "cause", "evidence"),
    [
        (Injected(cause=Cause.THERMAL, node=NODES[4], start=EPISODE, end=None, gpu=3), Cause.THERMAL, "GPU 3 at 1,"),
        (Injected(cause=Cause.THERMAL, node=NODES[0], start=EPISODE, end=None, severity=0.35), Cause.THERMAL, "GPUs"),
        (Injected(cause=Cause.NETWORK, node=NODES[9], start=EPISODE, end=None, severity=0.4), Cause.NETWORK, "EFA "),
        (Injected(cause=Cause.GPU, node=NODES[2], start=EPISODE, end=None, gpu=5), Cause.GPU, "XID 79 on GPU 5"),
        (Injected(cause=Cause.GPU, node=NODES[2], start=EPISODE, end=None, gpu=1, xid=74), Cause.GPU, "XID 74"),
        (Injected(cause=Cause.GPU, node=NODES[7], start=EPISODE, end=None, gpu=6, xid=0), Cause.GPU, "GPU 6 at 0 %"),
        (
            Injected(cause=Cause.GPU_MEMORY, node=NODES[11], start=EPISODE, end=None, gpu=0, xid=95),
            Cause.GPU_MEMORY,
            "XID 95 on GPU 0",
        ),
    ],
    ids=["thermal-gpu", "thermal-node-mild", "network", "xid79", "xid74", "dead-gpu", "memory"],
)
def test_each_cause_names_its_node(fault: Injected, cause: Cause, evidence: str) -> None:
    sim = cluster()
    sim.inject(fault)
    metrics = sim.series(start=T0, end=EPISODE + 1800, step=30)
    verdict = culprit(metrics)
    assert verdict.cause is cause
    assert verdict.suspects == (fault.node,)
    assert evidence in verdict.evidence
    assert verdict.chart is not None and verdict.chart.node == fault.node
    assert len(verdict.chart.times) == len(verdict.chart.suspect) == len(verdict.chart.peers_median)
    assert verdict.chart.times[0] == pytest.approx(EPISODE - HOUR)  # the healthy window is on the chart too


def test_thermal_evidence_reads_like_the_issue() -> None:
    sim = cluster(noise=0.0, gpu_spread=0.0)
    sim.inject(Injected(cause=Cause.THERMAL, node=NODES[1], start=EPISODE, end=None, gpu=3, severity=1.0))
    verdict = culprit(sim.series(start=T0, end=EPISODE + 1800))
    assert verdict.evidence == "GPU 3 at 1,185 MHz and 92 °C, peers 1,980 MHz"
    chart = verdict.chart
    assert chart is not None and chart.signal is Signal.SM_CLOCK and chart.title == "SM clock of GPU 3 (MHz)"
    late = [s for t, s in zip(chart.times, chart.suspect, strict=True) if t > EPISODE + 60]
    assert max(late) < 1200 < min(p for p in chart.peers_median if p > 1000)


def test_network_evidence_and_chart() -> None:
    sim = cluster(noise=0.0, gpu_spread=0.0, checkpoint_every=None, evaluation_every=None)
    sim.inject(Injected(cause=Cause.NETWORK, node=NODES[5], start=EPISODE, end=None, severity=1.0))
    verdict = culprit(sim.series(start=T0, end=EPISODE + 1800))
    # 4 devices x (rx + tx) x 9 GB/s x the job's pace 0.6, and 0.2 of that on the faulty node; retransmits
    # 0.4 + 330 per device
    assert verdict.evidence == "EFA 8.6 GB/s vs peers 43.2 GB/s, retransmits 1,322/s"
    assert verdict.chart is not None and verdict.chart.title == "EFA traffic, rx + tx (GB/s)"


def test_input_is_every_node_waiting_alike() -> None:
    sim = cluster()
    sim.inject(Injected(cause=Cause.INPUT, node=None, start=EPISODE, end=None, severity=0.5))
    verdict = culprit(sim.series(start=T0, end=EPISODE + 1800))
    assert verdict.cause is Cause.INPUT and verdict.suspects == ()
    assert verdict.evidence.startswith("GPU utilization 68 % on every node (was 97 %)")
    assert verdict.evidence.endswith("EFA normal")


def test_a_job_that_is_down_is_not_starved() -> None:
    """While a replaced node boots every node idles: no suspect, and not `input` either."""
    sim = cluster(replacements=[Replacement(old=NODES[3], new="i-0ffffffffffffffff", at=EPISODE, boot_seconds=1500)])
    verdict = culprit(sim.series(start=T0, end=EPISODE + 1800), minutes=20)
    assert verdict.cause is Cause.UNKNOWN and verdict.suspects == ()
    assert "the job is not running" in verdict.evidence


def test_decoys_blame_nobody() -> None:
    new = "i-0fffffffffffffff0"
    sim = cluster(
        checkpoint_every=1200.0,
        checkpoint_seconds=240.0,
        evaluation_every=2 * HOUR,
        evaluation_seconds=540.0,
        pause_jitter=25.0,
        gpu_spread=2.0,
        noise=2.0,
        gaps=[
            Gap(node=NODES[0], start=EPISODE - 600, end=EPISODE + 240),
            Gap(node=NODES[1], start=EPISODE + 300, end=EPISODE + 900, exporter="dcgm"),
            Gap(node=NODES[2], start=EPISODE, end=EPISODE + 1200, exporter="efa"),
        ],
        replacements=[Replacement(old=NODES[6], new=new, at=EPISODE - 1800, boot_seconds=300)],
    )
    metrics = sim.series(start=T0, end=EPISODE + 2 * HOUR, step=30)
    for start in (EPISODE, EPISODE + 1800, EPISODE + 3600):
        verdict = culprit(metrics, start=start)
        assert verdict.suspects == (), verdict
        assert verdict.cause is Cause.UNKNOWN
    assert faulty_episodes(metrics) == []


def test_replaced_faulty_node_closes_its_episode_and_its_replacement_is_clean() -> None:
    new = "i-0fffffffffffffff1"
    sim = cluster(replacements=[Replacement(old=NODES[8], new=new, at=EPISODE + HOUR, boot_seconds=600)])
    sim.inject(Injected(cause=Cause.THERMAL, node=NODES[8], start=EPISODE, end=None, gpu=2))
    metrics = sim.series(start=T0, end=EPISODE + 2 * HOUR)
    (episode,) = faulty_episodes(metrics)
    assert episode.node == NODES[8] and episode.cause is Cause.THERMAL
    assert EPISODE <= episode.start.timestamp() <= EPISODE + 60
    assert episode.detected_at.timestamp() <= EPISODE + 10 * 60
    # it leaves at +1 h: gone from the 10-minute window 10 minutes later
    assert episode.end is not None and EPISODE + HOUR < episode.end.timestamp() <= EPISODE + HOUR + 11 * 60
    after = assess_nodes(metrics, at=at(EPISODE + 2 * HOUR))
    assert NODES[8] not in {a.node for a in after}
    assert all(a.fault is None for a in after) and any(a.node == new and a.clear for a in after)


def test_assess_nodes_hysteresis() -> None:
    sim = cluster(checkpoint_every=None, evaluation_every=None)
    fault = Injected(cause=Cause.NETWORK, node=NODES[3], start=EPISODE, end=EPISODE + HOUR, severity=0.8)
    sim.inject(fault)
    metrics = sim.series(start=T0, end=EPISODE + 2 * HOUR)

    def node3(seconds: float):  # type: ignore[no-untyped-def]
        (a,) = [a for a in assess_nodes(metrics, at=at(seconds)) if a.node == NODES[3]]
        return a

    assert node3(EPISODE - 60).clear
    assert node3(EPISODE + 3 * 60).fault is None and not node3(EPISODE + 3 * 60).clear  # too early to say
    opened = node3(EPISODE + 10 * 60).fault
    assert opened is not None and opened.cause is Cause.NETWORK and opened.since == at(EPISODE)
    assert opened.chart is not None and opened.chart.node == NODES[3]
    ending = node3(EPISODE + HOUR + 5 * 60)  # half the window healthy again: neither
    assert ending.fault is None and not ending.clear
    assert node3(EPISODE + HOUR + 10 * 60).clear
    (episode,) = faulty_episodes(metrics)
    assert episode.detected_at.timestamp() - EPISODE <= 7 * 60
    assert episode.end is not None and episode.end.timestamp() - (EPISODE + HOUR) <= 10 * 60
    assert all(a.fault is None for a in assess_nodes(metrics, at=at(EPISODE + 30 * 60)) if a.node != NODES[3])


def test_an_exporter_gap_neither_opens_nor_closes() -> None:
    sim = cluster(gaps=[Gap(node=NODES[4], start=EPISODE + 1200, end=EPISODE + 1200 + 540)])
    sim.inject(Injected(cause=Cause.THERMAL, node=NODES[4], start=EPISODE, end=None, gpu=7))
    metrics = sim.series(start=T0, end=EPISODE + HOUR)
    (episode,) = faulty_episodes(metrics)
    assert episode.end is None  # the gap did not close it
    (during,) = [a for a in assess_nodes(metrics, at=at(EPISODE + 1200 + 540)) if a.node == NODES[4]]
    assert not during.clear


def test_a_vanished_gpu_is_a_gpu_fault_even_without_the_xid_in_the_window() -> None:
    sim = cluster()
    sim.inject(Injected(cause=Cause.GPU, node=NODES[10], start=EPISODE - HOUR, end=None, gpu=7))
    metrics = sim.series(start=EPISODE - 15 * 60, end=EPISODE, step=30)  # live: the last minutes only
    faults = [a.fault for a in assess_nodes(metrics, at=at(EPISODE)) if a.fault is not None]
    assert [(f.node, f.cause) for f in faults] == [(NODES[10], Cause.GPU)]
    assert faults[0].evidence == "GPU 7 missing (peers report 8)"


def test_an_xid_there_all_along_is_no_suspect_of_a_new_slowdown() -> None:
    """Evidence already present through the healthy window did not slow the job now (issue 22): the fresh
    straggler is named alone, and an input slowdown with the same old XID is input, not gpu_memory."""
    sim = cluster()
    sim.inject(Injected(cause=Cause.GPU_MEMORY, node=NODES[0], start=T0, end=None, gpu=1, xid=63))
    sim.inject(Injected(cause=Cause.THERMAL, node=NODES[5], start=EPISODE, end=None, gpu=4))
    verdict = culprit(sim.series(start=T0, end=EPISODE + 1800))
    assert verdict.cause is Cause.THERMAL and verdict.suspects == (NODES[5],)
    starved = cluster()
    starved.inject(Injected(cause=Cause.GPU_MEMORY, node=NODES[0], start=T0, end=None, gpu=1, xid=48))
    starved.inject(Injected(cause=Cause.INPUT, node=None, start=EPISODE, end=None, severity=0.6))
    metrics = starved.series(start=T0, end=EPISODE + 1800)
    assert (culprit(metrics).cause, culprit(metrics).suspects) == (Cause.INPUT, ())
    # the faulty-node check has no healthy window: the XID is a fault of the node all the same
    assert [(e.node, e.cause) for e in faulty_episodes(metrics)] == [(NODES[0], Cause.GPU_MEMORY)]


def test_application_xids_blame_no_node() -> None:
    sim = cluster()
    sim.inject(Injected(cause=Cause.GPU_MEMORY, node=NODES[0], start=EPISODE, end=None, gpu=1, xid=13))
    metrics = sim.series(start=T0, end=EPISODE + 1800)
    assert culprit(metrics).suspects == ()
    assert faulty_episodes(metrics) == []


@pytest.mark.parametrize("slow", [0, 1])
def test_two_nodes_the_slow_one_is_named(slow: int) -> None:
    nodes = NODES[:2]
    sim = cluster(nodes)
    sim.inject(Injected(cause=Cause.THERMAL, node=nodes[slow], start=EPISODE, end=None, gpu=0, severity=0.6))
    metrics = sim.series(start=T0, end=EPISODE + 1800)
    verdict = culprit(metrics)
    assert (verdict.cause, verdict.suspects) == (Cause.THERMAL, (nodes[slow],))
    assert [e.node for e in faulty_episodes(metrics)] == [nodes[slow]]


def test_two_nodes_always_apart_are_not_a_new_culprit() -> None:
    """A two-node cluster whose one node has been slower since before the healthy window: the episode is not
    its doing (nothing changed), so nobody is named; the faulty-node check still flags it."""
    nodes = NODES[:2]
    sim = cluster(nodes)
    sim.inject(Injected(cause=Cause.THERMAL, node=nodes[1], start=T0, end=None, gpu=0, severity=0.6))
    metrics = sim.series(start=T0, end=EPISODE + 1800)
    assert culprit(metrics).suspects == ()
    assert [e.node for e in faulty_episodes(metrics)] == [nodes[1]]


def test_one_node_only_hard_evidence_counts() -> None:
    node = NODES[:1]
    throttled = cluster(node)
    throttled.inject(Injected(cause=Cause.THERMAL, node=node[0], start=EPISODE, end=None))
    assert culprit(throttled.series(start=T0, end=EPISODE + 1800)).suspects == ()  # no peers to compare with
    broken = cluster(node)
    broken.inject(Injected(cause=Cause.GPU, node=node[0], start=EPISODE, end=None, gpu=3))
    verdict = culprit(broken.series(start=T0, end=EPISODE + 1800))
    assert (verdict.cause, verdict.suspects) == (Cause.GPU, node)


def test_empty_and_unaligned_metrics() -> None:
    empty = ClusterMetrics(cluster="c", start=at(T0), end=at(T0 + HOUR), step_seconds=30, series=())
    assert culprit(empty, start=T0 + 1800, minutes=10).cause is Cause.UNKNOWN
    assert assess_nodes(empty, at=at(T0 + HOUR)) == [] and faulty_episodes(empty) == []
    # samples a few seconds off the grid (scrape jitter) still land on their step
    sim = cluster(NODES[:4])
    sim.inject(Injected(cause=Cause.GPU_MEMORY, node=NODES[2], start=EPISODE, end=None, gpu=4))
    metrics = sim.series(start=T0, end=EPISODE + 1800)
    shifted = ClusterMetrics(
        cluster=metrics.cluster,
        start=metrics.start,
        end=metrics.end,
        step_seconds=30,
        series=tuple(
            Series(signal=s.signal, node=s.node, device=s.device, times=tuple(t + 4 for t in s.times), values=s.values)
            for s in metrics.series
        ),
    )
    assert culprit(shifted).suspects == (NODES[2],)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes=st.integers(min_value=1, max_value=16),
    gpus=st.sampled_from([4, 8]),
    devices=st.integers(min_value=1, max_value=8),
    seed=st.integers(min_value=0, max_value=2**16),
    spread=st.floats(min_value=0.0, max_value=2.5),
    noise=st.floats(min_value=0.0, max_value=2.5),
    checkpoint=st.sampled_from([None, 900.0, 1800.0, 3600.0]),
    checkpoint_seconds=st.floats(min_value=30.0, max_value=400.0),
    jitter=st.floats(min_value=0.0, max_value=40.0),
    gap=st.tuples(
        st.integers(0, 15), st.floats(0, 2 * HOUR), st.floats(60, 1200), st.sampled_from(["dcgm", "efa", "both"])
    ),
    boost=st.sampled_from([1410.0, 1755.0, 1980.0]),
    evaluation=st.sampled_from([None, 3600.0, 7200.0]),
    replaced=st.one_of(st.none(), st.tuples(st.integers(0, 15), st.floats(0, 2 * HOUR), st.floats(60, 900))),
    spares=st.integers(min_value=0, max_value=8),
    app_xid=st.one_of(st.none(), st.tuples(st.integers(0, 15), st.sampled_from([13, 31, 43]))),
    step=st.sampled_from([30.0, 60.0]),
    episode=st.floats(min_value=1.0, max_value=1.6),
)
def test_healthy_clusters_blame_nobody(
    nodes: int,
    gpus: int,
    devices: int,
    seed: int,
    spread: float,
    noise: float,
    checkpoint: float | None,
    checkpoint_seconds: float,
    jitter: float,
    gap: tuple[int, float, float, str],
    boost: float,
    evaluation: float | None,
    replaced: tuple[int, float, float] | None,
    spares: int,
    app_xid: tuple[int, int] | None,
    step: float,
    episode: float,
) -> None:
    """Random healthy clusters among every decoy (pauses, gaps, a replacement, spares, an application XID):
    no suspect, no cause, no faulty node."""
    names = tuple(f"ip-10-0-{seed % 200}-{k}" for k in range(nodes))
    index, start, length, exporter = gap
    replacements = []
    if replaced is not None and nodes > 1:
        old, when, boot = replaced
        replacements.append(Replacement(old=names[old % nodes], new="ip-10-1-0-1", at=T0 + when, boot_seconds=boot))
    sim = NodeMetricsSimulator(
        cluster="c",
        nodes=names,
        gpus_per_node=gpus,
        efa_devices=[f"rdmap{k}" for k in range(devices)],
        seed=seed,
        hardware=Hardware(boost_mhz=boost, efa_bytes_per_s=1e9 * (1 + seed % 20)),
        gpu_spread=spread,
        noise=noise,
        checkpoint_every=checkpoint,
        checkpoint_seconds=checkpoint_seconds,
        pause_jitter=jitter,
        evaluation_every=evaluation,
        gaps=[Gap(node=names[index % nodes], start=T0 + start, end=T0 + start + length, exporter=exporter)],  # type: ignore[arg-type]
        replacements=replacements,
        spares=names[nodes - min(spares, nodes // 2) :] if spares else (),
    )
    if app_xid is not None:
        node, code = app_xid
        sim.inject(Injected(cause=Cause.GPU_MEMORY, node=names[node % nodes], start=T0 + 600, end=None, xid=code))
    metrics = sim.series(start=T0, end=T0 + 2 * HOUR, step=step)
    verdict = culprit(metrics, start=T0 + episode * HOUR, minutes=20)
    assert verdict.suspects == () and verdict.cause is Cause.UNKNOWN
    assert faulty_episodes(metrics) == []
    assert all(a.fault is None for a in assess_nodes(metrics, at=at(T0 + 2 * HOUR)))


def test_one_bad_efa_device_among_32() -> None:
    devices = [f"rdmap{k}s{k}" for k in range(32)]
    sim = cluster(efa_devices=devices)
    sim.inject(Injected(cause=Cause.NETWORK, node=NODES[6], start=EPISODE, end=None, device=17, severity=0.9))
    metrics = sim.series(start=T0, end=EPISODE + 1800)
    verdict = culprit(metrics)
    assert (verdict.cause, verdict.suspects) == (Cause.NETWORK, (NODES[6],))
    assert verdict.evidence.startswith("EFA device rdmap17s17 ")
    assert verdict.chart is not None and "rdmap17s17" in verdict.chart.title
    assert [(e.node, e.cause) for e in faulty_episodes(metrics)] == [(NODES[6], Cause.NETWORK)]


def test_xid_79_that_takes_the_whole_dcgm_exporter_down() -> None:
    """The XID shows on one scrape at most, then the node reports no GPU at all while the job hangs; an
    exporter restart on a healthy node elsewhere in the same hour is not that."""
    sim = cluster(gaps=[Gap(node=NODES[3], start=EPISODE - 1200, end=EPISODE - 600, exporter="dcgm")])
    sim.inject(Injected(cause=Cause.GPU, node=NODES[8], start=EPISODE, end=None, gpu=2, dcgm_lost=True))
    metrics = sim.series(start=T0, end=EPISODE + 1800)
    without_xid = ClusterMetrics(
        cluster=metrics.cluster,
        start=metrics.start,
        end=metrics.end,
        step_seconds=metrics.step_seconds,
        series=tuple(s for s in metrics.series if s.signal is not Signal.XID),
    )
    for data in (metrics, without_xid):
        verdict = culprit(data)
        assert (verdict.cause, verdict.suspects) == (Cause.GPU, (NODES[8],))
        assert [(e.node, e.cause) for e in faulty_episodes(data)] == [(NODES[8], Cause.GPU)]
    # the minute before the exporter went, the GPU showed dead beside working ones; after it, only the dark
    evidence = culprit(without_xid).evidence
    assert evidence.startswith(("GPU 2 at 0 % utilization", "all its GPU metrics gone while the job hangs"))
    late = ClusterMetrics(
        cluster=metrics.cluster,
        start=metrics.start,
        end=metrics.end,
        step_seconds=metrics.step_seconds,
        series=tuple(
            Series(
                signal=s.signal,
                node=s.node,
                device=s.device,
                times=tuple(t for t in s.times if t < EPISODE),
                values=tuple(v for t, v in zip(s.times, s.values, strict=True) if t < EPISODE),
            )
            if s.node == NODES[8] and not s.signal.is_counter
            else s
            for s in without_xid.series
        ),
    )  # the exporter gone at once, with the hang
    assert culprit(late).evidence.startswith("all its GPU metrics gone while the job hangs")


def test_an_intermittent_throttle_is_one_episode_not_a_flapping_one() -> None:
    sim = cluster()
    sim.inject(Injected(cause=Cause.THERMAL, node=NODES[2], start=EPISODE, end=EPISODE + HOUR, gpu=6, duty=0.75))
    metrics = sim.series(start=T0, end=EPISODE + 2 * HOUR)
    (episode,) = faulty_episodes(metrics)
    assert episode.node == NODES[2] and episode.end is not None
    # a throttle's alert closes once clear over two windows (it may come back after a quiet stretch)
    assert EPISODE + HOUR + 10 * 60 <= episode.end.timestamp() <= EPISODE + HOUR + 22 * 60


def test_a_job_down_while_a_node_is_faulty_does_not_close_its_alert() -> None:
    """Idle is no evidence of health: while the job is down for a replacement elsewhere, the faulty node's
    alert stays open (neither faulty nor clear)."""
    sim = cluster(
        checkpoint_every=None,
        replacements=[Replacement(old=NODES[0], new="i-0fffffffffffffff2", at=EPISODE + 1800, boot_seconds=900)],
    )
    sim.inject(Injected(cause=Cause.NETWORK, node=NODES[4], start=EPISODE, end=None, severity=0.7))
    (episode,) = faulty_episodes(sim.series(start=T0, end=EPISODE + 2 * HOUR))
    assert episode.node == NODES[4] and episode.end is None


def test_an_exporter_gap_in_the_middle_of_a_hang_is_not_the_culprit() -> None:
    sim = cluster(gaps=[Gap(node=NODES[1], start=EPISODE + 600, end=EPISODE + 1500, exporter="dcgm")])
    sim.inject(Injected(cause=Cause.GPU, node=NODES[9], start=EPISODE, end=None, gpu=4, xid=74))
    metrics = sim.series(start=T0, end=EPISODE + 1800)
    assert culprit(metrics).suspects == (NODES[9],)
    assert [(e.node, e.cause) for e in faulty_episodes(metrics)] == [(NODES[9], Cause.GPU)]


THROUGH_PROMETHEUS = [
    Injected(cause=Cause.THERMAL, node=NODES[1], start=EPISODE, end=None, gpu=2, severity=0.6),
    Injected(cause=Cause.NETWORK, node=NODES[4], start=EPISODE, end=None, severity=0.5),
    Injected(cause=Cause.GPU, node=NODES[0], start=EPISODE, end=None, gpu=3),
    Injected(cause=Cause.GPU_MEMORY, node=NODES[5], start=EPISODE, end=None, gpu=1, xid=64),
    Injected(cause=Cause.INPUT, node=None, start=EPISODE, end=None, severity=0.6),
]


async def test_through_a_real_prometheus_the_same_culprits(prometheus_with) -> None:  # type: ignore[no-untyped-def]
    """The simulated clusters backfilled into Prometheus and read back as the monitor reads them (counters
    through rate(), gaps, a replaced node) name the same node and cause as the simulator's own series."""
    clusters = []
    for k, fault in enumerate(THROUGH_PROMETHEUS):
        sim = NodeMetricsSimulator(
            cluster=f"train-{fault.cause.value}",
            nodes=NODES[:6],
            gpus_per_node=4,
            efa_devices=("rdmap0s31", "rdmap0s32"),
            seed=k,
            checkpoint_every=1800.0,
            gaps=[Gap(node=NODES[2], start=EPISODE - 900, end=EPISODE - 600)],
            replacements=[Replacement(old=NODES[3], new="i-0fffffffffffffff3", at=EPISODE - 1500, boot_seconds=300)],
        )
        sim.inject(fault)
        clusters.append(sim.series(start=EPISODE - HOUR - 600, end=EPISODE + 1200, step=30))
    url = prometheus_with(*clusters)
    reader = PrometheusReader(config=MetricsConfig(prometheus_url=url))
    try:
        for fault, direct in zip(THROUGH_PROMETHEUS, clusters, strict=True):
            read = await reader.cluster_metrics(direct.cluster, start=direct.start, end=direct.end)
            verdict = culprit(read, minutes=20)
            assert verdict.cause is fault.cause, (fault, verdict)
            assert verdict.suspects == (() if fault.node is None else (fault.node,))
            assert (verdict.cause, verdict.suspects) == (culprit(direct, minutes=20).cause, culprit(direct).suspects)
            opened = [(e.node, e.cause) for e in faulty_episodes(read)]
            assert opened == ([] if fault.node is None else [(fault.node, fault.cause)])
    finally:
        await reader.aclose()


@pytest.mark.parametrize("cause", [Cause.THERMAL, Cause.NETWORK, Cause.INPUT, None])
def test_spare_nodes_are_no_peers_and_never_blamed(cause: Cause | None) -> None:
    """Six of sixteen nodes run the job, ten are spares (idle throughout): the job's nodes are compared with
    each other, the spares with nobody."""
    nodes = tuple(f"i-0{k:016x}" for k in range(16))
    sim = cluster(nodes, spares=nodes[6:])
    if cause is Cause.INPUT:
        sim.inject(Injected(cause=cause, node=None, start=EPISODE, end=None, severity=0.6))
    elif cause is not None:
        sim.inject(Injected(cause=cause, node=nodes[3], start=EPISODE, end=None, gpu=1, severity=0.6))
    metrics = sim.series(start=T0, end=EPISODE + 1800)
    verdict = culprit(metrics)
    assert verdict.cause is (cause or Cause.UNKNOWN)
    assert verdict.suspects == ((nodes[3],) if cause in (Cause.THERMAL, Cause.NETWORK) else ())
    episodes = [(e.node, e.cause) for e in faulty_episodes(metrics)]
    assert episodes == ([(nodes[3], cause)] if cause in (Cause.THERMAL, Cause.NETWORK) else [])
    assert not any(a.clear or a.fault for a in assess_nodes(metrics, at=at(EPISODE)) if a.node in nodes[6:])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cause=st.sampled_from([Cause.GPU, Cause.GPU_MEMORY, Cause.THERMAL, Cause.NETWORK]),
    nodes=st.integers(min_value=3, max_value=24),
    gpus=st.sampled_from([4, 8]),
    devices=st.sampled_from([1, 2, 4, 16, 32]),
    seed=st.integers(min_value=0, max_value=2**16),
    severity=st.floats(min_value=0.5, max_value=1.0),
    noise=st.floats(min_value=0.3, max_value=2.0),
    where=st.integers(min_value=0, max_value=1000),
    shape=st.integers(min_value=0, max_value=2),
    lag=st.floats(min_value=-120.0, max_value=120.0),
)
def test_random_faults_name_their_node(
    cause: Cause,
    nodes: int,
    gpus: int,
    devices: int,
    seed: int,
    severity: float,
    noise: float,
    where: int,
    shape: int,
    lag: float,
) -> None:
    """Any clearly faulty node (severity from 0.5), in clusters of 3-24 nodes of any shape, with the
    throughput episode starting up to 2 minutes either side of the fault: named first, with its cause."""
    names = tuple(f"i-0{seed:08x}{k:08x}" for k in range(nodes))
    sim = NodeMetricsSimulator(
        cluster="c",
        nodes=names,
        gpus_per_node=gpus,
        efa_devices=[f"rdmap{k}" for k in range(devices)],
        seed=seed,
        noise=noise,
        checkpoint_every=1800.0,
        pause_jitter=10.0,
    )
    node, gpu = names[where % nodes], where % gpus
    if cause is Cause.GPU:
        fault = Injected(cause=cause, node=node, start=EPISODE, end=None, gpu=gpu, xid=(79, 74, 0)[shape])
    elif cause is Cause.GPU_MEMORY:
        fault = Injected(cause=cause, node=node, start=EPISODE, end=None, gpu=gpu, xid=(48, 63, 95)[shape])
    elif cause is Cause.THERMAL:
        fault = Injected(
            cause=cause, node=node, start=EPISODE, end=None, gpu=(gpu, None, gpu)[shape], severity=severity
        )
    else:
        device = where % devices if shape == 1 and devices > 1 else None
        fault = Injected(cause=cause, node=node, start=EPISODE, end=None, device=device, severity=severity)
    sim.inject(fault)
    metrics = sim.series(start=T0, end=EPISODE + 1800, step=30)
    verdict = culprit(metrics, start=EPISODE + lag, minutes=15)
    assert (verdict.cause, verdict.suspects[:1]) == (cause, (node,)), verdict


def test_a_mild_throttle_is_named_in_an_episode_only_if_the_gpu_fell() -> None:
    """A GPU at 92 % of its clock: in an episode it is named when its own clock fell that far against the
    healthy window; one that has been that slow since before (binned low, or throttled for hours) is not the
    episode's culprit; neither opens a faulty-node alert (no healthy window there to tell it from a bin)."""
    fell = cluster()
    fell.inject(Injected(cause=Cause.THERMAL, node=NODES[7], start=EPISODE, end=None, gpu=5, severity=0.2))
    metrics = fell.series(start=T0, end=EPISODE + 1800)
    verdict = culprit(metrics)
    assert (verdict.cause, verdict.suspects) == (Cause.THERMAL, (NODES[7],))
    assert verdict.evidence.startswith("GPU 5 at 1,8")
    assert faulty_episodes(metrics) == []
    always = cluster()
    always.inject(Injected(cause=Cause.THERMAL, node=NODES[7], start=T0, end=None, gpu=5, severity=0.2))
    assert culprit(always.series(start=T0, end=EPISODE + 1800)).suspects == ()


def test_an_xid_shown_for_one_scrape_opens_and_then_closes_an_alert() -> None:
    sim = cluster(checkpoint_every=None)
    sim.inject(Injected(cause=Cause.GPU_MEMORY, node=NODES[2], start=EPISODE, end=None, gpu=6, xid=94, xid_seconds=25))
    (episode,) = faulty_episodes(sim.series(start=T0, end=EPISODE + HOUR))
    assert (episode.node, episode.cause, episode.evidence) == (NODES[2], Cause.GPU_MEMORY, "XID 94 on GPU 6")
    assert episode.detected_at.timestamp() - EPISODE <= 60
    assert episode.end is not None and episode.end.timestamp() - EPISODE <= 12 * 60
