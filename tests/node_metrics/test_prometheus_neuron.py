"""The Neuron monitor's series through a real Prometheus (issue 22): a Trn1 cluster whose Neuron monitor is
scraped every 60 s and its EFA exporter every 15 s, read at the reader's 30 s step, has no holes; a node with no
Neuron process keeps only its hardware info; and what a prefix or a loose match would read (another cluster
whose name starts with this one's, an `event_type` or `error_type` that starts with a read one) is not read."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime

import httpx
import pytest

from bot.config import MetricsConfig
from bot.node_metrics.culprit import HEALTHY_BEFORE, faulty_episodes, find_culprit
from bot.node_metrics.prometheus import PrometheusReader
from bot.node_metrics.series import Cause, ClusterMetrics, Family, Signal
from sandbox.node_metrics import TRN1, TRN1_EFA, Injected, NodeMetricsSimulator
from sandbox.prometheus import openmetrics, prometheus_server

HOUR = 3600.0
T0 = 1_780_000_000.0
EPISODE = T0 + 1.5 * HOUR
END = EPISODE + 1200
NODES = tuple(f"i-0{k:016x}" for k in range(0x9B0, 0x9B0 + 6))
CLUSTER = "trn-a"


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def _only(metrics: ClusterMetrics, family: Family) -> ClusterMetrics:
    return replace(metrics, series=tuple(s for s in metrics.series if s.signal.family is family))


def _decoys() -> dict[str, list[str]]:
    """Lines a loose reader would take, by the family they go in: a steadily rising counter each."""
    times = [T0 + 60 * k for k in range(int((END - T0) // 60) + 1)]

    def rising(metric: str, labels: str) -> list[str]:
        return [f"{metric}{{{labels}}} {float(k)} {t!r}" for k, t in enumerate(times)]

    base = f'cluster="{CLUSTER}",instance_id="{NODES[0]}"'
    return {
        "hardware_ecc_events_total": rising(
            "hardware_ecc_events_total", f'{base},neuron_device_index="3",event_type="mem_ecc_uncorrected_total"'
        )
        + rising(
            "hardware_ecc_events_total",
            f'cluster="{CLUSTER}-2",instance_id="{NODES[1]}",neuron_device_index="0",event_type="mem_ecc_uncorrected"',
        ),
        "execution_errors_total": rising("execution_errors_total", f'{base},error_type="hardware_generic"')
        + rising("execution_errors_total", f'{base},error_type="numerical",runtime_tag="7"'),
    }


@pytest.fixture(scope="module")
def neuron_url() -> Iterator[str]:
    sim = NodeMetricsSimulator(
        cluster=CLUSTER,
        nodes=NODES,
        gpus_per_node=32,
        efa_devices=TRN1_EFA,
        hardware=TRN1,
        seed=4,
        spares=[NODES[5]],
        checkpoint_every=1800.0,
    )
    sim.inject(Injected(cause=Cause.GPU, node=NODES[2], start=EPISODE, end=None, gpu=17, neuron="stuck_core"))
    neuron = _only(sim.series(start=T0, end=END, step=60.0), Family.NEURON)  # scraped every minute
    efa = _only(sim.series(start=T0, end=END, step=15.0), Family.EFA)  # every 15 s
    lines = openmetrics([neuron, efa]).splitlines()
    for family, decoys in _decoys().items():
        where = lines.index(f"# TYPE {family} counter") + 1
        lines[where:where] = decoys
    with prometheus_server(history="\n".join(lines) + "\n") as url:
        yield url


def _read(url: str, start: float, end: float) -> ClusterMetrics:
    async def go() -> ClusterMetrics:
        reader = PrometheusReader(config=MetricsConfig(prometheus_url=url))
        try:
            return await reader.cluster_metrics(CLUSTER, start=at(start), end=at(end))
        finally:
            await reader.aclose()

    return asyncio.run(go())


def test_a_slow_neuron_scrape_reads_without_holes_and_an_idle_node_keeps_its_hardware_info(neuron_url: str) -> None:
    read = _read(neuron_url, EPISODE - 600, END)
    steps = round((END - (EPISODE - 600)) / 30) + 1
    util = [s for s in read.series if s.signal is Signal.NEURONCORE_UTIL]
    assert {s.node for s in util} == set(NODES[:5]), "the spare runs no Neuron process: no NeuronCore series"
    assert {len(s.times) for s in util} == {steps}, "a 60 s scrape read every 30 s: no step without a value"
    efa = [s for s in read.series if s.signal is Signal.EFA_RX]
    assert {len(s.times) for s in efa} == {steps}
    info = {s.node: s for s in read.series if s.signal is Signal.NEURON_DEVICES}
    assert set(info) == set(NODES) and {s.device for s in info.values()} == {"trn1.32xlarge"}
    assert all(set(s.values) == {16.0} for s in info.values())
    assert {s.values[0] for s in read.series if s.signal is Signal.NEURONCORES_PER_DEVICE} == {2.0}
    assert {s.device for s in read.series if s.signal is Signal.EXECUTION_LATENCY} == {"p50", "p99"}
    assert all(v > 0 for s in read.series if s.signal is Signal.EXECUTIONS for v in s.values[-5:])


def test_what_a_prefix_would_match_is_not_read(neuron_url: str) -> None:
    held = httpx.post(
        f"{neuron_url}/api/v1/query",
        data={
            "query": 'count by (error_type, event_type, cluster) ({__name__=~"execution_errors_total|hardware_ecc.*"})',
            "time": END,
        },
        timeout=10,
    ).json()["data"]["result"]
    kinds = {(r["metric"].get("cluster"), r["metric"].get("error_type") or r["metric"].get("event_type")) for r in held}
    assert {
        (CLUSTER, "hardware_generic"),
        (CLUSTER, "mem_ecc_uncorrected_total"),
        (f"{CLUSTER}-2", "mem_ecc_uncorrected"),
    } <= kinds
    read = _read(neuron_url, T0 + 600, END)
    errors = [s for s in read.series if s.signal is Signal.HARDWARE_ERRORS]
    assert errors and all(v == 0 for s in errors for v in s.values), "hardware_generic and numerical are not read"
    uncorrected = [s for s in read.series if s.signal in (Signal.MEM_ECC_UNCORRECTED, Signal.SRAM_ECC_UNCORRECTED)]
    assert uncorrected and all(v == 0 for s in uncorrected for v in s.values), "nor trn-a-2, nor ..._total"
    assert {s.node for s in read.series} == set(NODES)


def test_the_stuck_neuroncore_is_named_from_what_prometheus_serves(neuron_url: str) -> None:
    read = _read(neuron_url, T0, END)
    verdict = find_culprit(
        read, healthy_start=at(EPISODE) - HEALTHY_BEFORE, episode_start=at(EPISODE), episode_end=at(END)
    )
    assert (verdict.cause, verdict.suspects) == (Cause.GPU, (NODES[2],))
    assert verdict.evidence.startswith("NeuronCore 17 (Trainium device 8) stuck at 0 % utilization")
    assert [(e.node, e.cause) for e in faulty_episodes(read)] == [(NODES[2], Cause.GPU)]
