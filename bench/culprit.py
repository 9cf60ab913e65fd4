"""Benchmark (not a test): does the peer comparison name the right node and cause, and open faulty-node alerts
for real faults only?

Generated cluster-days from `sandbox.node_metrics.NodeMetricsSimulator`, each with five faults (one of each
cause, in a random order, 20-90 minutes each, 1.5-3 hours apart, in the shapes `_fault` says) among decoys:
checkpoints and evaluations (every node idles together, each a few seconds early or late), exporter gaps (DCGM, EFA or
both, 1-12 minutes), replaced nodes (the old one vanishes, the job is down while the new one boots, then
it reports) and healthy per-GPU spread.

Two generators, reported separately:

- **main**: 16-32 P5 nodes x 8 GPUs, 4 EFA devices, 30-second steps, severities 0.5-1, the simulator's
  default noise and spread (x0.7-1.3);
- **shifted**: shaped differently on purpose: 4-40 nodes of 4 or 8 GPUs, other hardware (A100-like at
  1,410 MHz and 250-400 W, H100 at 1,755 MHz, H200-like at 1,980 MHz and 700 W), 1-32 EFA devices at other
  rates, 30- or 60-second steps, severities 0.15-1 (mild to strong), noise and spread x0.3-3, pauses of
  0.5-8 minutes every 15-120 minutes jittered up to 45 s, more gaps and replacements.

And, when `bench/culprit_heldout.py` is there (written by another helper from the issue, without reading this
code), its episodes and faulty-node timelines; `--heldout-seed` picks the draw. Its first run informed
changes to the analysis (docs/benchmarks.md says which): it is no longer a blind check.

Per fault, one throughput episode as the monitor would see it: it starts within 2 minutes of the fault and is
analysed at 5-20 minutes, with the hour before it as the healthy window, on 30-second data
(`find_culprit`). Decoy episodes (windows with no fault: at gaps, replacements and random times) should name
nobody. Per cluster-day, `faulty_episodes` over the whole day (a check every minute, a 10-minute window):
an episode on a faulty node opened between the fault's start and its end + 10 minutes is a true positive
(the first one per fault; a second is a flap, counted false), any other is a false positive; an input fault
is on every node, so any episode it opens is false. Delay: detected_at - the fault's start.

The naive peer in the same run: blame the node with the lowest median GPU utilization over the episode
(cause unknown); as a faulty-node detector, open on a node whose median utilization over the window is below
0.8 x the median node's, close when it is not.

Timing: `find_culprit` on 32 nodes x 8 GPUs over a 2-hour window at 30 s (the median of 20 runs), plus
`assess_nodes` on a 10-minute window and `faulty_episodes` over a cluster-day.

    .venv/bin/python bench/culprit.py [--days 10] [--shifted-days 10] [--seed 1] [--heldout-seed 1] [--no-heldout]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.node_metrics.culprit import FAULT_WINDOW, HEALTHY_BEFORE, assess_nodes, faulty_episodes, find_culprit
from bot.node_metrics.series import Cause, ClusterMetrics, FaultEpisode, Signal
from sandbox.node_metrics import NEURON_FAULTS, TRN1, Gap, Hardware, Injected, NodeMetricsSimulator, Replacement

DAY = 86400.0
T0 = datetime(2026, 11, 2, tzinfo=UTC).timestamp()
CAUSES = (Cause.GPU, Cause.GPU_MEMORY, Cause.THERMAL, Cause.NETWORK, Cause.INPUT)
# Trainium has no thermal (Trn1 reports no temperature or clock): a second device fault in its place.
TRAINIUM_CAUSES = (Cause.GPU, Cause.GPU_MEMORY, Cause.GPU, Cause.NETWORK, Cause.INPUT)
UTILIZATION = (Signal.GPU_UTIL, Signal.NEURONCORE_UTIL)  # the naive peer's signal, in % (NeuronCores x 100)
MINDER = {"precision": 0.904, "f1": 0.893, "seconds": 3.6}  # NSDI'25, ByteDance's production figures


@dataclass
class Episode:
    """One throughput episode to analyse: the truth (node None: no single node; cause None: a decoy)."""

    metrics_of: Callable[[], ClusterMetrics]
    start: float
    end: float
    node: str | None
    cause: Cause | None
    label: str  # e.g. "thermal s=0.42", "decoy: gap"
    severity: float = 1.0
    accelerator: str = "gpu"  # or "trainium"


@dataclass
class ClusterDay:
    sim: NodeMetricsSimulator
    start: float
    end: float
    step: float
    faults: list[Injected]
    episodes: list[Episode] = field(default_factory=list)
    accelerator: str = "gpu"


# -- the generators -----------------------------------------------------------------------------------------


def _instance(rng: random.Random) -> str:
    return "i-0" + "".join(rng.choice("0123456789abcdef") for _ in range(16))


def _fault(
    cause: Cause,
    node: str,
    start: float,
    end: float,
    gpus: int,
    devices: int,
    severity: float,
    rng: random.Random,
    *,
    trainium: bool = False,
) -> Injected:
    """One fault of `cause`, in one of its shapes: XID 79 (a third of them taking the node's whole DCGM
    exporter down), 74 or a dead GPU without XID; one of the memory XIDs (a third shown for 30-120 s only);
    a throttled GPU or node (a quarter of them intermittent, on 50-90 % of the time); a node's or (with
    several devices) one device's degraded EFA."""
    if cause is Cause.INPUT:
        return Injected(cause=cause, node=None, start=start, end=end, severity=severity)
    if trainium and cause in NEURON_FAULTS:
        # Trainium: a stuck NeuronCore, a missing device, hardware execution errors; uncorrected ECC (HBM or
        # SRAM, a third of them for 30-120 s only) or a rising corrected-ECC rate.
        shape = rng.choice(NEURON_FAULTS[cause])
        shown = rng.uniform(30, 120) if shape == "ecc_uncorrected" and rng.random() < 0.33 else None
        unit = rng.randrange(gpus) if shape == "stuck_core" else rng.randrange(max(gpus // TRN1.cores_per_device, 1))
        return Injected(
            cause=cause,
            node=node,
            start=start,
            end=end,
            gpu=unit,
            severity=severity,
            neuron=shape,
            sram=rng.random() < 0.4,
            xid_seconds=shown,
        )
    if cause is Cause.GPU:
        xid = rng.choice([79, 74, 0])
        lost = xid == 79 and rng.random() < 0.33
        return Injected(cause=cause, node=node, start=start, end=end, gpu=rng.randrange(gpus), xid=xid, dcgm_lost=lost)
    if cause is Cause.GPU_MEMORY:
        shown = rng.uniform(30, 120) if rng.random() < 0.3 else None  # a third show the XID for a scrape or few
        xid = rng.choice([48, 63, 64, 94, 95])
        return Injected(
            cause=cause, node=node, start=start, end=end, gpu=rng.randrange(gpus), xid=xid, xid_seconds=shown
        )
    if cause is Cause.NETWORK:
        device = rng.randrange(devices) if devices > 1 and rng.random() < 0.4 else None
        return Injected(cause=cause, node=node, start=start, end=end, device=device, severity=severity)
    gpu = None if rng.random() < 0.25 else rng.randrange(gpus)
    duty = rng.uniform(0.5, 0.9) if rng.random() < 0.25 else 1.0
    return Injected(cause=cause, node=node, start=start, end=end, gpu=gpu, severity=severity, duty=duty)


def _day(
    rng: random.Random,
    *,
    seed: int,
    nodes: int,
    gpus: int,
    devices: int,
    hardware: Hardware,
    step: float,
    severity: tuple[float, float],
    noise: float,
    spread: float,
    checkpoint: tuple[float, float],
    evaluation: tuple[float, float],
    jitter: float,
    gaps: int,
    replacements: int,
) -> ClusterDay:
    start = T0 + rng.randrange(0, 30) * DAY
    end = start + DAY
    names = [_instance(rng) for _ in range(nodes)]
    # Replacements (healthy nodes leave, a new one joins) and gaps, spread over the day.
    replaced: list[Replacement] = []
    for old in rng.sample(names, replacements):
        replaced.append(
            Replacement(
                old=old, new=_instance(rng), at=start + rng.uniform(1.5, 23) * 3600, boot_seconds=rng.uniform(240, 900)
            )
        )
    everyone = names + [r.new for r in replaced]
    gap_list = [
        Gap(
            node=rng.choice(everyone),
            start=(g := start + rng.uniform(0, DAY)),
            end=g + rng.uniform(60, 720),
            exporter=rng.choice(["dcgm", "efa", "both"]),
        )
        for _ in range(gaps)
    ]
    sim = NodeMetricsSimulator(
        cluster=f"cluster-{seed}",
        nodes=names,
        gpus_per_node=gpus,
        efa_devices=[f"rdmap{k}s{31 + k}" for k in range(devices)],
        seed=seed,
        hardware=hardware,
        gpu_spread=spread,
        noise=noise,
        checkpoint_every=rng.uniform(*checkpoint) * 60,
        checkpoint_seconds=rng.uniform(60, 300) if checkpoint[1] <= 90 else rng.uniform(30, 480),
        evaluation_every=rng.uniform(*evaluation) * 3600,
        evaluation_seconds=rng.uniform(300, 540),
        pause_jitter=jitter,
        gaps=gap_list,
        replacements=replaced,
    )
    # Five faults, one of each cause, 1.5-3 hours apart (room for decoy episodes), on nodes not replaced.
    stable = [n for n in names if n not in {r.old for r in replaced}]
    trainium = hardware.trainium
    order = list(TRAINIUM_CAUSES if trainium else CAUSES)
    rng.shuffle(order)
    day = ClusterDay(sim=sim, start=start, end=end, step=step, faults=[], accelerator=accelerator(hardware))
    t = start + 1.5 * 3600
    for cause in order:
        length = rng.uniform(20, 90) * 60
        fault = _fault(
            cause, rng.choice(stable), t, t + length, gpus, devices, rng.uniform(*severity), rng, trainium=trainium
        )
        sim.inject(fault)
        day.faults.append(fault)
        t += length + rng.uniform(90, 180) * 60
    for fault in day.faults:
        ep_start = fault.start + rng.uniform(-120, 120)
        ep_end = min(fault.start + rng.uniform(300, 1200), (fault.end or end) - 30)
        label = f"{fault.cause.value}" + (f" {fault.neuron}" if fault.neuron else "") + (" sram" if fault.sram else "")
        label += f" xid {fault.xid}" if fault.xid is not None else ""
        label += " (DCGM lost)" if fault.dcgm_lost else ""
        label += f" (device {fault.device})" if fault.device is not None else ""
        label += f" (duty {fault.duty:.2f})" if fault.duty < 1 else ""
        label += f" (XID for {fault.xid_seconds:.0f} s)" if fault.xid_seconds is not None else ""
        day.episodes.append(_episode(day, ep_start, ep_end, fault.node, fault.cause, label, fault.severity))
    # Decoy episodes: at gaps, replacements (once the new node is up, and while it boots) and random times.
    busy = [(f.start - 1800, (f.end or end) + 1800) for f in day.faults]
    candidates = [(g.start - 60, "decoy: gap") for g in gap_list]
    candidates += [(r.at - 120, "decoy: replacement") for r in replaced]
    candidates += [(r.at + r.boot_seconds + 60, "decoy: new node") for r in replaced]
    candidates += [(start + rng.uniform(3600, DAY - 1800), "decoy: random") for _ in range(6)]
    for at, label in candidates:
        if start + HEALTHY_BEFORE.total_seconds() <= at <= end - 1200 and not any(
            a <= at + 1200 and at <= b for a, b in busy
        ):
            day.episodes.append(_episode(day, at, at + rng.uniform(300, 1200), None, None, label))
    return day


def _episode(
    day: ClusterDay, start: float, end: float, node: str | None, cause: Cause | None, label: str, severity: float = 1.0
) -> Episode:
    healthy = start - HEALTHY_BEFORE.total_seconds()

    def metrics() -> ClusterMetrics:
        return day.sim.series(start=healthy, end=end, step=30.0)

    return Episode(
        metrics_of=metrics,
        start=start,
        end=end,
        node=node,
        cause=cause,
        label=label,
        severity=severity,
        accelerator=day.accelerator,
    )


def accelerator(hardware: Hardware) -> str:
    return "trainium" if hardware.trainium else "gpu"


def main_days(seed: int, count: int) -> list[ClusterDay]:
    rng = random.Random(seed)
    return [
        _day(
            rng,
            seed=seed * 1000 + k,
            nodes=rng.randint(16, 32),
            gpus=8,
            devices=4,
            hardware=Hardware(),
            step=30.0,
            severity=(0.5, 1.0),
            noise=rng.uniform(0.7, 1.3),
            spread=rng.uniform(0.7, 1.3),
            checkpoint=(30, 90),
            evaluation=(4, 8),
            jitter=rng.uniform(3, 15),
            gaps=rng.randint(3, 8),
            replacements=rng.randint(1, 2),
        )
        for k in range(count)
    ]


def main_trainium_days(seed: int, count: int) -> list[ClusterDay]:
    """The main generator's Trn1 cluster-days: as its P5 ones, on trn1.32xlarge (8 EFA devices) or trn1n.32xlarge
    (16) nodes of 32 NeuronCores (16 Trainium devices of 2)."""
    rng = random.Random(seed + 104729)
    days = []
    for k in range(count):
        trn1n = rng.random() < 0.5
        hardware = replace(TRN1, instance_type="trn1n.32xlarge") if trn1n else TRN1
        days.append(
            _day(
                rng,
                seed=seed * 1000 + 200 + k,
                nodes=rng.randint(16, 32),
                gpus=32,
                devices=16 if trn1n else 8,
                hardware=hardware,
                step=30.0,
                severity=(0.5, 1.0),
                noise=rng.uniform(0.7, 1.3),
                spread=rng.uniform(0.7, 1.3),
                checkpoint=(30, 90),
                evaluation=(4, 8),
                jitter=rng.uniform(3, 15),
                gaps=rng.randint(3, 8),
                replacements=rng.randint(1, 2),
            )
        )
    return days


def shifted_trainium_days(seed: int, count: int) -> list[ClusterDay]:
    """The shifted generator's Trn1 cluster-days: 4-40 nodes, NeuronCores at 55-95 % when training, EFA at
    3-11 GB/s per device, 30- or 60-second steps, severities 0.15-1, noise and spread x0.3-3."""
    rng = random.Random(seed + 15485863)
    days = []
    for k in range(count):
        trn1n = rng.random() < 0.5
        hardware = replace(
            TRN1,
            instance_type="trn1n.32xlarge" if trn1n else "trn1.32xlarge",
            util_percent=rng.uniform(55, 95),
            efa_bytes_per_s=rng.uniform(3e9, 11e9),
            retrans_per_s=rng.uniform(0.1, 1.5),
            executions_per_s=rng.uniform(1, 10),
        )
        days.append(
            _day(
                rng,
                seed=seed * 1000 + 700 + k,
                nodes=rng.randint(4, 40),
                gpus=32,
                devices=16 if trn1n else 8,
                hardware=hardware,
                step=rng.choice([30.0, 60.0]),
                severity=(0.15, 1.0),
                noise=rng.uniform(0.3, 3.0),
                spread=rng.uniform(0.3, 3.0),
                checkpoint=(15, 120),
                evaluation=(2, 10),
                jitter=rng.uniform(0, 45),
                gaps=rng.randint(5, 15),
                replacements=rng.randint(0, 3),
            )
        )
    return days


HARDWARE = (
    Hardware(
        boost_mhz=1410,
        idle_mhz=210,
        load_temp_c=(45, 70),
        idle_temp_c=30,
        load_power_w=(250, 400),
        idle_power_w=55,
        util_percent=92,
        tensor_active=(0.2, 0.5),
        efa_bytes_per_s=5.5e9,
        retrans_per_s=0.1,
    ),
    Hardware(
        boost_mhz=1755,
        idle_mhz=345,
        load_temp_c=(50, 80),
        load_power_w=(420, 650),
        util_percent=99,
        tensor_active=(0.4, 0.8),
        efa_bytes_per_s=3.0e9,
        retrans_per_s=1.5,
    ),
    Hardware(
        boost_mhz=1980,
        idle_mhz=345,
        load_temp_c=(60, 82),
        idle_temp_c=38,
        load_power_w=(600, 700),
        idle_power_w=110,
        util_percent=95,
        tensor_active=(0.35, 0.65),
        efa_bytes_per_s=11.0e9,
        retrans_per_s=0.8,
    ),
)


def shifted_days(seed: int, count: int) -> list[ClusterDay]:
    rng = random.Random(seed + 7919)
    days = []
    for k in range(count):
        gpus = rng.choice([4, 8])
        days.append(
            _day(
                rng,
                seed=seed * 1000 + 500 + k,
                nodes=rng.randint(4, 40),
                gpus=gpus,
                devices=rng.choice([1, 2, 4, 8, 16, 32]),
                hardware=rng.choice(HARDWARE),
                step=rng.choice([30.0, 60.0]),
                severity=(0.15, 1.0),
                noise=rng.uniform(0.3, 3.0),
                spread=rng.uniform(0.3, 3.0),
                checkpoint=(15, 120),
                evaluation=(2, 10),
                jitter=rng.uniform(0, 45),
                gaps=rng.randint(5, 15),
                replacements=rng.randint(0, 3),
            )
        )
    return days


# -- the naive peer -----------------------------------------------------------------------------------------


def _util_by_node(metrics: ClusterMetrics, start: float, end: float) -> dict[str, float]:
    values: dict[str, list[float]] = {}
    for s in metrics.series:
        if s.signal in UTILIZATION:
            values.setdefault(s.node, []).extend(v for t, v in zip(s.times, s.values, strict=True) if start <= t <= end)
    return {node: float(np.median(v)) for node, v in values.items() if v}


def naive_suspect(metrics: ClusterMetrics, start: float, end: float) -> str | None:
    util = _util_by_node(metrics, start, end)
    return min(util, key=util.__getitem__) if util else None


def naive_episodes(
    metrics: ClusterMetrics, *, every: float = 60.0, window: float = FAULT_WINDOW.total_seconds()
) -> list[FaultEpisode]:
    per_node: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for s in metrics.series:
        if s.signal in UTILIZATION:
            times, values = per_node.get(s.node, (np.array([]), np.array([])))
            per_node[s.node] = (np.concatenate([times, s.times]), np.concatenate([values, s.values]))
    start, end = metrics.start.timestamp(), metrics.end.timestamp()
    opened: dict[str, float] = {}
    out: list[FaultEpisode] = []
    for check in np.arange(start + window, end + 1, every):
        medians = {}
        for node, (times, values) in per_node.items():
            inside = values[(times > check - window) & (times <= check)]
            if inside.size:
                medians[node] = float(np.median(inside))
        if not medians:
            continue
        typical = float(np.median(list(medians.values())))
        for node in set(opened) | set(medians):
            low = node in medians and medians[node] < 0.8 * typical
            if node in opened and not low:
                began = _dt(opened.pop(node))
                out.append(FaultEpisode(node, Cause.UNKNOWN, "", start=began, detected_at=began, end=_dt(check)))
            elif node not in opened and low:
                opened[node] = check
    out += [FaultEpisode(n, Cause.UNKNOWN, "", start=_dt(t), detected_at=_dt(t), end=None) for n, t in opened.items()]
    return out


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(float(ts), UTC)


# -- scoring ------------------------------------------------------------------------------------------------


@dataclass
class Scores:
    node_faults: int = 0
    top1: int = 0
    naive_top1: int = 0
    causes: int = 0
    cause_right: int = 0
    decoys: int = 0
    decoys_blamed: int = 0
    naive_decoys_blamed: int = 0
    by_label: Counter[str] = field(default_factory=Counter)
    right_by_label: Counter[str] = field(default_factory=Counter)
    cause_by_label: Counter[str] = field(default_factory=Counter)  # the cause right, whatever the node
    misses: list[str] = field(default_factory=list)
    tp: int = 0
    fp: int = 0
    fp_kinds: Counter[str] = field(default_factory=Counter)
    injected: int = 0
    found: int = 0
    episode_cause_right: int = 0
    delays: list[float] = field(default_factory=list)
    naive_tp: int = 0
    naive_fp: int = 0
    naive_found: int = 0
    naive_delays: list[float] = field(default_factory=list)
    by_severity: dict[str, list[int]] = field(default_factory=dict)

    def severity_bin(self, label: str, severity: float, right: bool) -> None:
        key = f"{label}: severity {'<0.3' if severity < 0.3 else '0.3-0.5' if severity < 0.5 else '>=0.5'}"
        counts = self.by_severity.setdefault(key, [0, 0])
        counts[0] += 1
        counts[1] += int(right)


def score_episodes(days: Sequence[ClusterDay], scores: Scores) -> None:
    for day in days:
        for ep in day.episodes:
            metrics = ep.metrics_of()
            verdict = find_culprit(
                metrics,
                healthy_start=_dt(ep.start) - HEALTHY_BEFORE,
                episode_start=_dt(ep.start),
                episode_end=_dt(ep.end),
            )
            naive = naive_suspect(metrics, ep.start, ep.end)
            if ep.cause is None:
                scores.decoys += 1
                scores.decoys_blamed += bool(verdict.suspects)
                scores.naive_decoys_blamed += naive is not None
                if verdict.suspects:
                    scores.misses.append(
                        f"{ep.label}: blamed {verdict.suspects[0]} ({verdict.cause.value}: {verdict.evidence})"
                    )
                continue
            scores.causes += 1
            right_cause = verdict.cause is ep.cause
            scores.cause_right += right_cause
            base = ep.cause.value
            scores.by_label[base] += 1
            scores.cause_by_label[base] += right_cause
            if ep.node is not None:
                scores.node_faults += 1
                top = bool(verdict.suspects) and verdict.suspects[0] == ep.node
                scores.top1 += top
                scores.naive_top1 += naive == ep.node
                right = top and right_cause
            else:
                right = right_cause and not verdict.suspects
            scores.right_by_label[base] += right
            if ep.cause in (Cause.THERMAL, Cause.NETWORK, Cause.INPUT):
                scores.severity_bin(base, ep.severity, right)
            if not right:
                got = f"{verdict.cause.value} {verdict.suspects[:1]}"
                scores.misses.append(f"{ep.label} s={ep.severity:.2f}: got {got} ({verdict.evidence})")


def _match(
    episodes: Sequence[FaultEpisode], faults: Sequence[Injected], window: float
) -> tuple[int, int, list[float], int, Counter[str], int]:
    node_faults = [f for f in faults if f.node is not None]
    claimed: set[int] = set()
    tp = fp = cause_right = 0
    kinds: Counter[str] = Counter()
    delays: list[float] = []
    for e in episodes:
        d = e.detected_at.timestamp()
        match = next(
            (
                k
                for k, f in enumerate(node_faults)
                if f.node == e.node and f.start <= d <= (f.end or np.inf) + window and k not in claimed
            ),
            None,
        )
        if match is None:
            fp += 1
            during = next((f for f in faults if f.start <= d <= (f.end or np.inf) + window), None)
            kinds["during " + during.cause.value if during else "no fault"] += 1
            continue
        claimed.add(match)
        tp += 1
        delays.append((d - node_faults[match].start) / 60)
        cause_right += e.cause is node_faults[match].cause
    return tp, fp, delays, len(claimed), kinds, cause_right


def score_faulty(days: Sequence[ClusterDay], scores: Scores) -> float:
    took = 0.0
    window = FAULT_WINDOW.total_seconds()
    for day in days:
        metrics = day.sim.series(start=day.start, end=day.end, step=day.step)
        t = time.perf_counter()
        episodes = faulty_episodes(metrics)
        took += time.perf_counter() - t
        tp, fp, delays, found, kinds, cause_right = _match(episodes, day.faults, window)
        scores.tp += tp
        scores.fp += fp
        scores.fp_kinds.update(kinds)
        scores.found += found
        scores.delays += delays
        scores.episode_cause_right += cause_right
        scores.injected += sum(f.node is not None for f in day.faults)
        ntp, nfp, ndelays, nfound, _, _ = _match(naive_episodes(metrics), day.faults, window)
        scores.naive_tp += ntp
        scores.naive_fp += nfp
        scores.naive_found += nfound
        scores.naive_delays += ndelays
    return took / max(len(days), 1)


# -- reporting ----------------------------------------------------------------------------------------------


def _row(label: str, pitcrew: str, naive: str) -> None:
    print(f"{label:<34} Pitcrew {pitcrew:<22} naive {naive}")


def _pct(a: int, b: int) -> str:
    return f"{100 * a / b:.1f} % ({a}/{b})" if b else "n/a"


def _ratio(a: int, b: int) -> str:
    return f"{a / b:.3f}" if b else "n/a"


def _f1(tp: int, fp: int, found: int, injected: int) -> str:
    p = tp / (tp + fp) if tp + fp else 0.0
    r = found / injected if injected else 0.0
    return f"{2 * p * r / (p + r):.3f}" if p + r else "0.000"


def _p(values: Sequence[float], q: float) -> str:
    return f"{np.percentile(values, q):.1f}" if values else "n/a"


def report(name: str, s: Scores, per_day: float, days: int) -> None:
    print(f"\n== {name}: {days} cluster-days, {s.causes} fault episodes, {s.decoys} decoy episodes ==")
    _row("top-1 suspect (node faults)", _pct(s.top1, s.node_faults), _pct(s.naive_top1, s.node_faults))
    print(f"cause                            Pitcrew {_pct(s.cause_right, s.causes)}   naive 0.0 % (always unknown)")
    _row("decoy episodes blaming a node", _pct(s.decoys_blamed, s.decoys), _pct(s.naive_decoys_blamed, s.decoys))
    print(
        "cause right, per cause: "
        + ", ".join(f"{c} {_pct(s.cause_by_label[c], s.by_label[c])}" for c in sorted(s.by_label))
    )
    print(
        "right node and cause, per cause: "
        + ", ".join(f"{c} {_pct(s.right_by_label[c], s.by_label[c])}" for c in sorted(s.by_label))
    )
    for key in sorted(s.by_severity):
        n, right = s.by_severity[key]
        print(f"    {key}: {_pct(right, n)}")
    print(
        f"faulty_node  Pitcrew precision {_ratio(s.tp, s.tp + s.fp)} recall {_ratio(s.found, s.injected)} "
        f"F1 {_f1(s.tp, s.fp, s.found, s.injected)} (tp {s.tp}, fp {s.fp}, faults {s.injected}); cause right "
        f"{_pct(s.episode_cause_right, s.tp)}; delay p50 {_p(s.delays, 50)} / p90 {_p(s.delays, 90)} min"
    )
    if s.fp_kinds:
        print("    false positives: " + ", ".join(f"{k} {v}" for k, v in s.fp_kinds.most_common()))
    print(
        f"faulty_node  naive   precision {_ratio(s.naive_tp, s.naive_tp + s.naive_fp)} "
        f"recall {_ratio(s.naive_found, s.injected)} "
        f"F1 {_f1(s.naive_tp, s.naive_fp, s.naive_found, s.injected)} (tp {s.naive_tp}, fp {s.naive_fp}); "
        f"delay p50 {_p(s.naive_delays, 50)} / p90 {_p(s.naive_delays, 90)} min"
    )
    print(f"faulty_episodes over one cluster-day: {per_day * 1000:.0f} ms (mean)")
    for miss in s.misses[:12]:
        print("    miss: " + miss)
    if len(s.misses) > 12:
        print(f"    ... and {len(s.misses) - 12} more")
    SUMMARY.append((name, s))


SUMMARY: list[tuple[str, Scores]] = []  # every report's scores, for the table at the end


def summary() -> None:
    """One line per generator and accelerator: what docs/benchmarks.md quotes."""
    print("\n== summary: top-1 / cause / faulty_node P, R (naive: top-1, P, R) ==")
    for name, s in SUMMARY:
        print(
            f"{name:<28} top-1 {_pct(s.top1, s.node_faults):<18} cause {_pct(s.cause_right, s.causes):<18} "
            f"P {_ratio(s.tp, s.tp + s.fp)} R {_ratio(s.found, s.injected)} · naive top-1 "
            f"{_pct(s.naive_top1, s.node_faults)}, P {_ratio(s.naive_tp, s.naive_tp + s.naive_fp)} "
            f"R {_ratio(s.naive_found, s.injected)}"
        )


def timing(runs: int = 20) -> None:
    rng = random.Random(5)
    nodes = [_instance(rng) for _ in range(32)]
    sim = NodeMetricsSimulator(cluster="timing", nodes=nodes, seed=5, checkpoint_every=1800.0)
    start = T0
    sim.inject(Injected(cause=Cause.THERMAL, node=nodes[7], start=start + 3600, end=None, gpu=2))
    metrics = sim.series(start=start, end=start + 7200, step=30.0)
    points = sum(len(s.times) for s in metrics.series)
    took = []
    for _ in range(runs):
        t = time.perf_counter()
        verdict = find_culprit(
            metrics, healthy_start=_dt(start), episode_start=_dt(start + 3600), episode_end=_dt(start + 7200)
        )
        took.append(time.perf_counter() - t)
    assert verdict.suspects[:1] == (nodes[7],)
    window = sim.series(start=start + 6600, end=start + 7200, step=30.0)
    live = []
    for _ in range(runs):
        t = time.perf_counter()
        assess_nodes(window, at=_dt(start + 7200))
        live.append(time.perf_counter() - t)
    print(
        f"find_culprit, 32 nodes x 8 GPUs x 4 EFA, 2 h at 30 s ({len(metrics.series):,} series, {points:,} samples): "
        f"median {statistics.median(took) * 1000:.0f} ms, max {max(took) * 1000:.0f} ms over {runs} runs "
        f"(Minder: {MINDER['seconds']} s per detection)"
    )
    print(f"assess_nodes, the same cluster, 10-minute window: median {statistics.median(live) * 1000:.1f} ms")


def _external(filename: str) -> Any | None:
    """Another author's generator beside this file (bench/culprit_heldout.py, bench/culprit_third.py), if there."""
    path = Path(__file__).resolve().parent / filename
    if not path.exists():
        return None
    name = path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--days", type=int, default=10, help="GPU cluster-days of the main generator")
    parser.add_argument("--shifted-days", type=int, default=10, help="GPU cluster-days of the shifted generator")
    parser.add_argument("--trn-days", type=int, default=6, help="Trainium cluster-days of the main generator")
    parser.add_argument("--shifted-trn-days", type=int, default=6, help="Trainium cluster-days, shifted")
    parser.add_argument("--third-seed", type=int, default=1, help="the third generator's draw")
    parser.add_argument("--no-third", action="store_true")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--heldout-seed", type=int, default=1)
    parser.add_argument("--no-heldout", action="store_true")
    args = parser.parse_args()
    print(
        f"{platform.node()} · {platform.machine()} · {os.cpu_count()} cpus · Python {platform.python_version()} "
        f"· numpy {np.__version__}"
    )
    began = time.perf_counter()
    timing()
    for name, make, count in (
        ("main · gpu", main_days, args.days),
        ("main · trainium", main_trainium_days, args.trn_days),
        ("shifted · gpu", shifted_days, args.shifted_days),
        ("shifted · trainium", shifted_trainium_days, args.shifted_trn_days),
    ):
        days = make(args.seed, count)
        if not days:
            continue
        scores = Scores()
        score_episodes(days, scores)
        per_day = score_faulty(days, scores)
        report(name, scores, per_day, len(days))
    heldout = None if args.no_heldout else _external("culprit_heldout.py")
    if heldout is not None:
        run_heldout(heldout, args.heldout_seed)
    third = None if args.no_third else _external("culprit_third.py")
    if third is not None:
        run_heldout(third, args.third_seed, name="third")
    summary()
    print(f"\nbench took {time.perf_counter() - began:.0f} s")


def run_heldout(module: Any, seed: int, *, name: str = "held-out") -> None:
    """Another generator's cases (one episode each) and timelines (faulty nodes over hours), scored as above,
    per accelerator (a case's `accelerator`, "gpu" when it has none)."""
    make_cases = getattr(module, "third_cases", None) or module.heldout_cases
    make_timelines = getattr(module, "third_timelines", None) or getattr(module, "heldout_timelines", None)
    cases = make_cases(seed)
    by_accelerator: dict[str, list[Any]] = {}
    for case in cases:
        by_accelerator.setdefault(getattr(case, "accelerator", "gpu"), []).append(case)
    timelines = make_timelines(seed) if make_timelines is not None else []
    timelines_by: dict[str, list[Any]] = {}
    for timeline in timelines:
        timelines_by.setdefault(getattr(timeline, "accelerator", "gpu"), []).append(timeline)
    for accelerator in sorted(set(by_accelerator) | set(timelines_by)):
        s = _score_cases(by_accelerator.get(accelerator, []), f"{name} · {accelerator}", seed)
        _score_timelines(timelines_by.get(accelerator, []), s, f"{name} · {accelerator}")
        SUMMARY.append((f"{name} · {accelerator}", s))


def _score_cases(cases: Sequence[Any], title: str, seed: int) -> Scores:
    s = Scores()
    if not cases:
        return s
    scenario_total: Counter[str] = Counter()
    scenario_right: Counter[str] = Counter()
    took = []
    for case in cases:
        t = time.perf_counter()
        verdict = find_culprit(
            case.metrics,
            healthy_start=case.healthy_start,
            episode_start=case.episode_start,
            episode_end=case.episode_end,
        )
        took.append(time.perf_counter() - t)
        naive = naive_suspect(case.metrics, case.episode_start.timestamp(), case.episode_end.timestamp())
        scenario = case.name.split("-", 1)[-1]
        scenario_total[scenario] += 1
        s.causes += 1
        right_cause = verdict.cause is case.cause
        s.cause_right += right_cause
        s.by_label[case.cause.value] += 1
        s.cause_by_label[case.cause.value] += right_cause
        if case.suspect is not None:
            s.node_faults += 1
            top = bool(verdict.suspects) and verdict.suspects[0] == case.suspect
            s.top1 += top
            s.naive_top1 += naive == case.suspect
            right = top and right_cause
        else:
            s.decoys += 1  # no single node to blame: naming one is a false blame
            s.decoys_blamed += bool(verdict.suspects)
            s.naive_decoys_blamed += naive is not None
            right = right_cause and not verdict.suspects
        s.right_by_label[case.cause.value] += right
        scenario_right[scenario] += right
        if not right:
            s.misses.append(
                f"{case.name}: want {case.cause.value} {case.suspect}, got {verdict.cause.value} "
                f"{verdict.suspects[:1]} ({verdict.evidence})"
            )
    print(f"\n== {title} (seed {seed}): {len(cases)} episodes ==")
    _row("top-1 suspect (node faults)", _pct(s.top1, s.node_faults), _pct(s.naive_top1, s.node_faults))
    print(
        f"cause                            Pitcrew {_pct(s.cause_right, s.causes)}   naive "
        f"{_pct(sum(c.cause is Cause.UNKNOWN for c in cases), len(cases))} (always unknown)"
    )
    print(
        f"no-single-node episodes blaming a node  Pitcrew {_pct(s.decoys_blamed, s.decoys)}   naive "
        f"{_pct(s.naive_decoys_blamed, s.decoys)}"
    )
    print(
        "cause right, per cause: "
        + ", ".join(f"{c} {_pct(s.cause_by_label[c], s.by_label[c])}" for c in sorted(s.by_label))
    )
    print(
        "right node and cause, per scenario: "
        + ", ".join(f"{k} {scenario_right[k]}/{scenario_total[k]}" for k in sorted(scenario_total))
    )
    print(f"find_culprit per episode: median {statistics.median(took) * 1000:.0f} ms, max {max(took) * 1000:.0f} ms")
    for miss in s.misses[:40]:
        print("    miss: " + miss)
    return s


def _score_timelines(timelines: Sequence[Any], s: Scores, title: str) -> None:
    if not timelines:
        return
    window = FAULT_WINDOW.total_seconds()
    misses: list[str] = []
    for timeline in timelines:
        faults = [
            Injected(cause=cause, node=node, start=start.timestamp(), end=None if end is None else end.timestamp())
            for node, cause, start, end in timeline.faulty
        ]
        episodes = faulty_episodes(timeline.metrics)
        tp, fp, delays, found, _, cause_right = _match(episodes, faults, window)
        s.tp += tp
        s.fp += fp
        s.found += found
        s.delays += delays
        s.episode_cause_right += cause_right
        s.injected += len(faults)
        for e in episodes:
            d = e.detected_at.timestamp()
            if not any(f.node == e.node and f.start <= d <= (f.end or np.inf) + window for f in faults):
                misses.append(
                    f"{timeline.name}: false {e.node} {e.cause.value} at {e.detected_at:%H:%M} ({e.evidence})"
                )
        for f in faults:
            if not any(
                e.node == f.node and f.start <= e.detected_at.timestamp() <= (f.end or np.inf) + window
                for e in episodes
            ):
                misses.append(f"{timeline.name}: missed {f.node} {f.cause.value} from {_dt(f.start):%H:%M}")
        ntp, nfp, ndelays, nfound, _, _ = _match(naive_episodes(timeline.metrics), faults, window)
        s.naive_tp += ntp
        s.naive_fp += nfp
        s.naive_found += nfound
        s.naive_delays += ndelays
    print(f"\n== {title} timelines: {len(timelines)}, {s.injected} true faulty nodes ==")
    print(
        f"faulty_node  Pitcrew precision {_ratio(s.tp, s.tp + s.fp)} recall {_ratio(s.found, s.injected)} "
        f"F1 {_f1(s.tp, s.fp, s.found, s.injected)} (tp {s.tp}, fp {s.fp}); cause right "
        f"{_pct(s.episode_cause_right, s.tp)}; delay p50 {_p(s.delays, 50)} / p90 {_p(s.delays, 90)} min"
    )
    print(
        f"faulty_node  naive   precision {_ratio(s.naive_tp, s.naive_tp + s.naive_fp)} recall "
        f"{_ratio(s.naive_found, s.injected)} F1 {_f1(s.naive_tp, s.naive_fp, s.naive_found, s.injected)} "
        f"(tp {s.naive_tp}, fp {s.naive_fp})"
    )
    for miss in misses[:30]:
        print("    " + miss)


if __name__ == "__main__":
    main()
