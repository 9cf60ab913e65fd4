"""A third generator for `bench/culprit.py` (issue 22): per-node metrics of GPU and Trainium clusters, each fault
as another author imagines it, mixed causes, nodes joining mid-episode. Its first run is reported as it came out
(docs/benchmarks.md); nothing in the analysis was tuned on it before that.

It shares nothing with `sandbox/node_metrics.py` or `bench/culprit_heldout.py` but the contract
(`bot/node_metrics/series.py`): its own model of a job, its own exporters, and what Prometheus answers the
reader, emulated from raw scrapes.

## The exporters and what the reader gets

Every node's exporters are scraped on their own clock: DCGM every 10-30 s, EFA every 15-30 s, the Neuron monitor
every 30-60 s (never faster than the node's EFA: slower is the normal case), each at its own phase with +-2 s of
jitter. From the raw scrapes, what `PrometheusReader` would get at its 30 s step: a gauge is the last sample in
the 45 s before the step (90 s for the Neuron monitor), an XID the largest in that window, a counter the
increase between the first and last sample in the 2 minutes before the step (4 for the Neuron monitor, whose
counters are discrete events), over their time apart, nothing with fewer than two samples, a counter reset
(an exporter restart) read as a restart from zero. A series absent at a scrape (a GPU fallen off the bus, no
Neuron process running) gives no sample.

## The job

One synchronous job on the cluster's nodes (spares excepted). Its pace is set by the slowest rank and the
slowest link: pace = 1 / (c / slowest unit speed + (1 - c) / slowest link), c = 0.55-0.8, times an input
limit; checkpoints every 25-70 minutes (40 s to 4 minutes, every unit idle); a restart (1-4 per day: no process
on any node for 2-6 minutes, and on Trainium no Neuron series but the hardware info). GPUs: utilization 90-100 %
while training (NCCL kernels count as work), tensor activity the job's level x pace / own speed, clock at its
bin (a GPU may be binned up to 3 % low), power and temperature following the work. NeuronCores: utilization
55-95 % while training, lower on a pipeline stage's cores (up to -15 %). EFA traffic in proportion to the pace,
spread over the devices NCCL uses (all of them, or only half on some clusters), retransmits 0-2 /s.

## Faults, as this author sees them (cause; suspect)

GPU:
- `hw_slowdown`: a GPU in hardware slowdown: its clock at 45-75 % and 87-97 °C, and its own DCGM utilization
  reads low (30-60 %: the slowdown inserts idle cycles). thermal; its node.
- `fan_failing`: 2-4 GPUs of a node heat up over 8-15 minutes, their clocks sagging to 70-85 %. thermal.
- `thermal_cycling`: one GPU throttles to 55-75 % in 1-4 minute bursts, on 25-50 % of the time, hot each time.
  thermal.
- `xid79`: XID 79, the GPU's series end one or two scrapes later, the job hangs (every other GPU at ~100 % with
  no tensor activity, EFA idle). gpu.
- `nvlink`: XID 74, the job hangs. gpu.
- `gpu_dropped`: no XID, the GPU's series end, the job hangs. gpu.
- `row_remap_reset`: XID 63 or 64, then the GPU resets: its series gone for 1-3 minutes, back, the XID kept.
  gpu_memory (as the XID's number says).
- `dbe_kill`: XID 48, 94 or 95, then the GPU idles (its process killed: 0 %, idle power) and the job hangs.
  gpu_memory.
- `link_flap`: one EFA device drops to nothing for 20-60 s at a time, every 1-3 minutes, retransmits 50-500 /s
  on it. network.
- `link_degraded`: a node's EFA at 30-65 % with 20-400 retransmits/s. network.
- `input`: the loader starves every rank alike (pace 35-75 %). input; none.
- `software`: the job slows alike everywhere (a slower kernel), nothing else moves. unknown; none.
Trainium:
- `core_stuck`: a NeuronCore at zero, its siblings at work (a little less busy: they wait); the job slows to
  50-80 %. gpu.
- `device_gone`: the Neuron monitor restarts and counts 15 devices; the lost device's cores report nothing; the
  job goes on slower. gpu.
- `hw_errors`: hardware execution errors, 1-20 a minute, a retry each (the job at 70-90 %). gpu.
- `hbm_uncorrected` / `sram_uncorrected`: 1-6 uncorrected ECC events on one device over the episode. gpu_memory.
- `corrected_rising`: one device's corrected ECC events rise from 0.2-1 to 5-60 a minute over 10-30 minutes,
  begun 0-15 minutes before the episode. gpu_memory.
- `efa_degraded`: one Trn1 node's EFA (its 8 or 16 devices, or one of them) down to 20-60 % with retransmits
  30-600 /s. network.
- `input`, `software` as on GPUs.
Mixed (the truth is the new fault's):
- `input_old_xid`: input, and a healthy node shows XID 48 on a GPU since hours before. input; none.
- `input_binned`: input, and a GPU binned at 86-89 % of its peers' clock since ever. input; none.
- `thermal_old_xid`: `hw_slowdown` on one node, an old XID 63 on another. thermal; the first.
- `network_joiners`: `link_degraded` while 1-3 nodes join the job mid-episode (their exporters start then, EFA
  from zero, their units busy at once). network; the degraded node.
- `input_joiners`, `xid79_joiner`: the same with input, with an XID 79.
- Trainium: `input_old_ecc` (a device with corrected ECC at 2-6 a minute since ever), `stuck_joiners`,
  `efa_after_restart` (the job restarted 10-30 minutes before the episode: no Neuron series for minutes),
  `ecc_then_errors` (uncorrected HBM ECC, then hardware execution errors on the same node: gpu_memory).

Decoys in every case: checkpoints, exporter gaps of 1-8 minutes on healthy nodes (a whole node's DCGM, EFA or
Neuron monitor), retransmit bursts of 1-2 minutes, application XIDs 13/31/43 that stay, short throttles (under 2
minutes, hot), a spare node (no job: idle, and on Trainium no Neuron process), corrected-ECC trickles on healthy
Trainium devices (a few an hour).

## Timelines (`third_timelines`): faulty nodes over 2-3 hours

0-3 faults on distinct nodes, each lasting 25-90 minutes or to the end: hw_slowdown, thermal_cycling, link_degraded,
dbe_kill (the node replaced 15-30 minutes later: it leaves), xid79 (the same) on GPUs; core_stuck, device_gone,
hw_errors, hbm_uncorrected and sram_uncorrected (events every 2-6 minutes while they last), corrected_rising,
efa_degraded on Trainium. Among the decoys above, plus cluster-wide input and software slowdowns and restarts.

    from culprit_third import third_cases, third_timelines
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.node_metrics.series import Cause, ClusterMetrics, Series, Signal

STEP = 30.0  # the reader's step
HEALTHY = 3600.0  # the contract's healthy window before an episode
MINUTE = 60.0
GAUGE_WINDOW = {"dcgm": 45.0, "neuron": 90.0}
RATE_WINDOW = {"efa": 120.0, "neuron": 240.0}
APP_XIDS = (13, 31, 43)
TRN_EFA = {"trn1.32xlarge": 8, "trn1n.32xlarge": 16}
GPU_TYPES = (  # name, GPUs, boost MHz, idle MHz, W at work, W idle, EFA devices, EFA bytes/s per device
    ("p5.48xlarge", 8, 1980.0, 345.0, 640.0, 70.0, 32, 3.0e9),
    ("p4d.24xlarge", 8, 1410.0, 210.0, 360.0, 55.0, 4, 9.0e9),
    ("p5en.48xlarge", 8, 1980.0, 345.0, 660.0, 75.0, 16, 6.0e9),
    ("g6e.12xlarge", 4, 2520.0, 210.0, 300.0, 35.0, 1, 8.0e9),
)


@dataclass(frozen=True)
class ThirdCase:
    """One throughput episode and its truth (suspect None: no single node). Its metrics are made when asked
    (the last case's are kept), so a run holds one case's series at a time."""

    name: str
    accelerator: str
    seed: tuple[int, ...]
    healthy_start: datetime
    episode_start: datetime
    episode_end: datetime
    cause: Cause
    suspect: str | None

    @property
    def metrics(self) -> ClusterMetrics:
        global _LAST
        if _LAST is None or _LAST[0] != self.seed:
            _LAST = (self.seed, _render_case(self.seed))
        return _LAST[1]


@dataclass(frozen=True)
class ThirdTimeline:
    name: str
    accelerator: str
    metrics: ClusterMetrics
    faulty: tuple[tuple[str, Cause, datetime, datetime | None], ...]


_LAST: tuple[tuple[int, ...], ClusterMetrics] | None = None


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(float(ts), UTC)


# -- the world ----------------------------------------------------------------------------------------------


@dataclass
class Node:
    id: str
    joined: float
    left: float = math.inf
    spare: bool = False
    bin: np.ndarray = field(default_factory=lambda: np.ones(1))  # per unit: clock (GPU) or utilization (NeuronCore)
    heat: np.ndarray = field(default_factory=lambda: np.zeros(1))  # per unit, °C above the hall
    share: np.ndarray = field(default_factory=lambda: np.ones(1))  # per EFA device: its share of the node's traffic
    trickle: np.ndarray = field(default_factory=lambda: np.zeros(1))  # per Trainium device: corrected ECC /s
    gaps: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    intervals: dict[str, float] = field(default_factory=dict)
    phase: float = 0.0


@dataclass
class Fault:
    kind: str
    start: float
    end: float = math.inf
    node: str | None = None
    unit: int = 0
    units: tuple[int, ...] = ()
    level: float = 1.0  # a speed or bandwidth factor, or an event rate
    xid: int = 0
    bursts: tuple[tuple[float, float], ...] = ()  # when an intermittent fault is on
    events: tuple[float, ...] = ()  # discrete events (ECC, errors)
    rise: tuple[float, float] = (0.0, 0.0)  # a rising rate: events a minute, from and to

    def on(self, t: np.ndarray) -> np.ndarray:
        inside = (t >= self.start) & (t < self.end)
        if self.bursts:
            burst = np.zeros(t.shape, dtype=bool)
            for a, b in self.bursts:
                burst |= (t >= a) & (t < b)
            inside &= burst
        return inside


@dataclass
class World:
    rng: np.random.Generator
    accelerator: str
    instance_type: str
    units: int
    boost: float
    idle_clock: float
    work_power: float
    idle_power: float
    efa_devices: int
    efa_rate: float
    compute_share: float
    util_level: float
    tensor_level: float
    used_devices: int  # EFA devices NCCL uses (the first ones)
    start: float
    end: float
    nodes: list[Node] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    checkpoints: list[tuple[float, float]] = field(default_factory=list)
    restarts: list[tuple[float, float]] = field(default_factory=list)  # no process on any node

    @property
    def trainium(self) -> bool:
        return self.accelerator == "trainium"

    # -- the job ---------------------------------------------------------------------------------------------

    def _within(self, t: np.ndarray, spans: Sequence[tuple[float, float]]) -> np.ndarray:
        out = np.zeros(t.shape, dtype=bool)
        for a, b in spans:
            out |= (t >= a) & (t < b)
        return out

    def state(self, t: np.ndarray) -> dict[str, np.ndarray]:
        """The whole job at times t: its pace (1 healthy), its input limit, whether it hangs, pauses, restarts."""
        speed = np.ones(t.shape)
        link = np.ones(t.shape)
        limit = np.ones(t.shape)
        soft = np.ones(t.shape)
        hang = np.zeros(t.shape, dtype=bool)
        for f in self.faults:
            on = f.on(t)
            if f.kind in ("hw_slowdown", "thermal_cycling", "fan_failing"):
                speed = np.where(on, np.minimum(speed, self._speed(f, t)), speed)
            elif f.kind in ("core_stuck", "device_gone") or f.kind == "hw_errors":
                speed = np.where(on, np.minimum(speed, f.level), speed)
            elif f.kind in ("link_degraded", "efa_degraded"):
                link = np.where(on, np.minimum(link, f.level), link)
            elif f.kind == "link_flap":
                link = np.where(on, np.minimum(link, 0.75), link)
            elif f.kind == "input":
                limit = np.where(on, np.minimum(limit, f.level), limit)
            elif f.kind == "software":
                soft = np.where(on, np.minimum(soft, f.level), soft)
            elif f.kind in ("xid79", "nvlink", "gpu_dropped", "dbe_kill"):
                hang |= on
        c = self.compute_share
        compute = soft / (c / speed + (1 - c) / link)
        pace = np.minimum(compute, limit)
        restart = self._within(t, self.restarts)
        pause = self._within(t, self.checkpoints) | restart
        return {"pace": pace, "fed": pace / compute, "hang": hang & ~restart, "pause": pause, "restart": restart}

    def _speed(self, f: Fault, t: np.ndarray) -> np.ndarray:
        if f.kind == "fan_failing":
            ramp = np.clip((t - f.start) / (f.xid or 600), 0.0, 1.0)  # xid holds the ramp's seconds here
            return 1.0 - (1.0 - f.level) * ramp
        return np.full(t.shape, f.level)

    # -- one node's exporters --------------------------------------------------------------------------------

    def _mine(self, node: Node) -> list[Fault]:
        return [f for f in self.faults if f.node == node.id]

    def in_job(self, node: Node, t: np.ndarray) -> np.ndarray:
        return (t >= node.joined) & (t < node.left) & (not node.spare)

    def dcgm(self, node: Node, t: np.ndarray, st: dict[str, np.ndarray]) -> tuple[dict[Signal, np.ndarray], np.ndarray]:
        """DCGM at scrape times t: values (units, len(t)) and presence (units, len(t))."""
        rng, g, n = self.rng, self.units, len(t)
        working = self.in_job(node, t) & ~st["pause"]
        speed = np.ones((g, n))
        hot = np.zeros((g, n))
        own_duty = np.ones((g, n))
        xid = np.zeros((g, n))
        dead = np.zeros((g, n), dtype=bool)
        present = np.ones((g, n), dtype=bool)
        for f in self._mine(node):
            on = f.on(t)
            if f.kind in ("hw_slowdown", "thermal_cycling", "fan_failing"):
                for u in f.units or (f.unit,):
                    s = self._speed(f, t)
                    speed[u] = np.where(on, np.minimum(speed[u], s), speed[u])
                    hot[u] = np.where(on, np.maximum(hot[u], 87 + 10 * (1 - s)), hot[u])
                    if f.kind == "hw_slowdown":
                        own_duty[u] = np.where(on, 0.3 + 0.3 * (s - 0.45) / 0.3, own_duty[u])
            elif f.kind == "short_throttle":
                speed[f.unit] = np.where(on, np.minimum(speed[f.unit], f.level), speed[f.unit])
                hot[f.unit] = np.where(on, 90.0, hot[f.unit])
            elif f.kind in ("xid79", "nvlink", "row_remap_reset", "dbe_kill", "app_xid", "old_xid"):
                shown = (t >= f.start) & (t < f.end)
                xid[f.unit] = np.where(shown, f.xid, xid[f.unit])
                if f.kind == "xid79":
                    present[f.unit] &= ~(t >= f.start + f.level)  # level: seconds until its series end
                elif f.kind == "row_remap_reset":
                    present[f.unit] &= ~((t >= f.start + 20) & (t < f.start + 20 + f.level))
                elif f.kind == "dbe_kill":
                    dead[f.unit] |= shown & (t >= f.start + 15)
            elif f.kind == "gpu_dropped":
                present[f.unit] &= ~on
            elif f.kind == "binned":
                speed[f.unit] = np.minimum(speed[f.unit], f.level)
        for f in self._mine(node):
            if f.kind == "nvlink":  # the GPU stays, idle, the others spin
                dead[f.unit] |= f.on(t)
        pace, hang = st["pace"][None, :], st["hang"][None, :]
        util = np.where(working, self.util_level * st["fed"] * own_duty, 0.0)
        util = np.where(hang & working, 99.0, util)
        util = np.where(dead, 0.0, util)
        util = np.clip(util + rng.normal(0, 1.0, (g, n)) * (util > 0), 0, 100)
        tensor = np.where(working & ~hang, self.tensor_level * np.clip(pace / speed, 0, 1.2), 0.0)
        tensor = np.where(dead, 0.0, tensor)
        clock = self.boost * node.bin[:, None] * speed
        clock = np.where(working | hang, clock, self.idle_clock)
        clock = np.where(dead, self.idle_clock, clock)
        clock = np.round(np.minimum(clock * (1 + rng.normal(0, 0.003, (g, n))), self.boost) / 15) * 15
        work = np.where(working, 0.35 + 0.65 * np.clip(tensor / self.tensor_level, 0, 1), 0.0)
        work = np.where(hang & working, 0.4, work)
        work = np.where(dead, 0.0, work)
        power = self.idle_power + (self.work_power - self.idle_power) * work * speed**1.5
        power = power * (1 + rng.normal(0, 0.02, (g, n)))
        temp = 30 + node.heat[:, None] + 40 * (power - self.idle_power) / (self.work_power - self.idle_power)
        temp = np.maximum(temp, hot) + rng.normal(0, 0.5, (g, n))
        values = {
            Signal.TENSOR_ACTIVE: np.round(np.clip(tensor, 0, 1), 3),
            Signal.GPU_UTIL: np.round(util),
            Signal.SM_CLOCK: clock,
            Signal.GPU_TEMP: np.round(temp),
            Signal.POWER: np.round(power, 1),
            Signal.XID: xid,
        }
        alive = (t >= node.joined) & (t < node.left)
        return values, present & alive[None, :] & ~self._gap(node, "dcgm", t)[None, :]

    def _gap(self, node: Node, exporter: str, t: np.ndarray) -> np.ndarray:
        return self._within(t, node.gaps.get(exporter, []))

    def efa(self, node: Node, t: np.ndarray, st: dict[str, np.ndarray]) -> tuple[dict[Signal, np.ndarray], np.ndarray]:
        """EFA rates (bytes/s, packets/s) per device at scrape times t, and presence per time."""
        rng, d, n = self.rng, self.efa_devices, len(t)
        working = self.in_job(node, t) & ~st["pause"] & ~st["hang"]
        traffic = np.where(working, self.efa_rate * st["pace"], 0.0)[None, :] * node.share[:, None]
        factor = np.ones((d, n))
        retrans = np.abs(rng.normal(0, 0.6, (d, n))) * (traffic > 0)
        for f in self._mine(node):
            on = f.on(t)
            if f.kind in ("link_degraded", "efa_degraded"):
                for dev in f.units or range(d):
                    factor[dev] = np.where(on, f.level * (1 + rng.normal(0, 0.05, n)), factor[dev])
                    retrans[dev] += np.where(on & working, f.xid * rng.lognormal(0, 0.4, n), 0.0)
            elif f.kind == "link_flap":
                flap = on & (np.mod(t - f.start, f.level) < f.xid)  # level: period, xid: seconds down
                factor[f.unit] = np.where(flap, 0.0, factor[f.unit])
                retrans[f.unit] += np.where(on & working, rng.uniform(50, 500), 0.0)
            elif f.kind == "retrans_burst":
                retrans[f.unit] += np.where(on, f.level, 0.0)
        rx = traffic * factor * (1 + rng.normal(0, 0.03, (d, n)))
        tx = traffic * factor * (1 + rng.normal(0, 0.03, (d, n)))
        alive = (t >= node.joined) & (t < node.left) & ~self._gap(node, "efa", t)
        return {Signal.EFA_RX: np.maximum(rx, 0), Signal.EFA_TX: np.maximum(tx, 0), Signal.EFA_RETRANS: retrans}, alive

    def neuron(
        self, node: Node, t: np.ndarray, st: dict[str, np.ndarray]
    ) -> tuple[
        dict[Signal, np.ndarray],
        dict[Signal, np.ndarray],
        dict[tuple[Signal, int], tuple[float, ...]],
        np.ndarray,
        np.ndarray,
        np.ndarray,
    ]:
        """The Neuron monitor at scrape times t: gauges and event rates by signal, single events (uncorrected
        ECC: each counted once) by signal and device, the cores' presence (cores, len(t)), whether a Neuron
        process runs (len(t)), and the exporter's presence (len(t))."""
        rng, cores, n = self.rng, self.units, len(t)
        devices = cores // 2
        runs = self.in_job(node, t) & ~st["restart"]
        working = runs & ~st["pause"]
        util = np.where(working, self.util_level * node.bin[:, None] * st["fed"][None, :], 0.0)
        util = np.where(runs & st["pause"], rng.uniform(0, 2, (cores, n)), util)
        present = np.ones((cores, n), dtype=bool)
        count = np.full(n, float(devices))
        hardware = np.zeros(n)
        ecc = {
            Signal.MEM_ECC_CORRECTED: np.zeros((devices, n)),
            Signal.SRAM_ECC_CORRECTED: np.zeros((devices, n)),
            Signal.MEM_ECC_UNCORRECTED: np.zeros((devices, n)),
            Signal.SRAM_ECC_UNCORRECTED: np.zeros((devices, n)),
        }
        ecc[Signal.MEM_ECC_CORRECTED] += node.trickle[:, None]
        single: dict[tuple[Signal, int], tuple[float, ...]] = {}
        for f in self._mine(node):
            on = f.on(t)
            if f.kind == "core_stuck":
                util[f.unit] = np.where(on & runs, 0.0, util[f.unit])
                sibling = f.unit ^ 1
                util[sibling] = np.where(on & working, util[sibling] * 0.8, util[sibling])
            elif f.kind == "device_gone":
                count = np.where(t >= f.start, devices - 1.0, count)
                present[2 * f.unit : 2 * f.unit + 2] &= ~(t >= f.start)
            elif f.kind == "hw_errors":
                hardware += np.where(on & runs, f.xid / 60.0, 0.0)  # xid: errors a minute
            elif f.kind in ("hbm_uncorrected", "sram_uncorrected", "corrected_rising", "old_corrected"):
                signal = {
                    "hbm_uncorrected": Signal.MEM_ECC_UNCORRECTED,
                    "sram_uncorrected": Signal.SRAM_ECC_UNCORRECTED,
                    "corrected_rising": Signal.MEM_ECC_CORRECTED if f.xid == 0 else Signal.SRAM_ECC_CORRECTED,
                    "old_corrected": Signal.MEM_ECC_CORRECTED,
                }[f.kind]
                if f.kind == "corrected_rising":
                    grow = np.clip((t - f.start) / (f.level * 60), 0, 1)
                    low, high = f.rise
                    rate = (low * (high / low) ** grow) / 60.0
                    ecc[signal][f.unit] += np.where(on, rate, 0.0)
                elif f.kind == "old_corrected":
                    ecc[signal][f.unit] += np.where(on, f.level / 60.0, 0.0)
                else:
                    single[(signal, f.unit)] = single.get((signal, f.unit), ()) + f.events
        latency = np.where(working, 0.2 / np.maximum(st["pace"], 0.05), 0.2)
        util = np.clip(util * (1 + rng.normal(0, 0.03, (cores, n))), 0, 100)
        executions = np.where(working & ~st["hang"], 5.0 * st["pace"], 0.0)
        gauges = {
            Signal.NEURONCORE_UTIL: np.round(util / 100.0, 4),
            Signal.NEURON_DEVICES: count,
            Signal.EXECUTION_LATENCY: np.round(latency * (1 + rng.normal(0, 0.05, n)), 4),
        }
        events = {**ecc, Signal.HARDWARE_ERRORS: hardware[None, :], Signal.EXECUTIONS: executions[None, :]}
        alive = (t >= node.joined) & (t < node.left) & ~self._gap(node, "neuron", t)
        return gauges, events, single, present, runs & alive, alive


# -- what the reader gets from Prometheus -------------------------------------------------------------------


def _scrapes(rng: np.random.Generator, start: float, end: float, interval: float, phase: float) -> np.ndarray:
    times = np.arange(start - 300 + phase % interval, end + 1e-6, interval)
    return np.sort(times + rng.uniform(-2, 2, times.size))


def _last_over_time(
    times: np.ndarray, values: np.ndarray, present: np.ndarray, grid: np.ndarray, window: float, biggest: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    t, v = times[present], values[present]
    if not t.size:
        return np.empty(0), np.empty(0)
    hi = np.searchsorted(t, grid, side="right") - 1
    ok = (hi >= 0) & (t[np.maximum(hi, 0)] > grid - window)
    if biggest:
        lo = np.searchsorted(t, grid - window, side="right")
        out = np.array([v[a : b + 1].max() if b >= a else np.nan for a, b in zip(lo, hi, strict=True)])
    else:
        out = v[np.maximum(hi, 0)]
    return grid[ok], out[ok]


def _rate(
    times: np.ndarray, totals: np.ndarray, present: np.ndarray, grid: np.ndarray, window: float
) -> tuple[np.ndarray, np.ndarray]:
    """rate() from a counter's samples: the increase (a drop is a reset from zero) over the time between the
    window's first and last sample, nothing with fewer than two."""
    t, v = times[present], totals[present]
    if t.size < 2:
        return np.empty(0), np.empty(0)
    step = np.diff(v)
    increase = np.concatenate([[0.0], np.where(step >= 0, step, v[1:])])
    cumulative = np.cumsum(increase)
    lo = np.searchsorted(t, grid - window, side="right")
    hi = np.searchsorted(t, grid, side="right") - 1
    ok = hi - lo >= 1
    lo, hi = np.minimum(lo, t.size - 1), np.maximum(hi, 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = (cumulative[hi] - cumulative[lo]) / (t[hi] - t[lo])
    return grid[ok], rate[ok]


def _counter(
    rng: np.random.Generator,
    times: np.ndarray,
    rate: np.ndarray,
    present: np.ndarray,
    events: bool,
    single: Sequence[float] = (),
) -> np.ndarray:
    """A counter's totals at its scrapes from its rate: bytes accumulate, events arrive (Poisson), and each of
    `single` counts once at the first scrape after it; a counter restarts from zero after an absence (its
    exporter or process restarted)."""
    dt = np.diff(times, prepend=times[0])
    grown = rate * dt
    if events:
        grown = rng.poisson(np.maximum(grown, 0.0)).astype(float)
    if len(single):
        at = np.searchsorted(times, np.asarray(single), side="left")
        np.add.at(grown, at[at < times.size], 1.0)
    totals = np.zeros(times.size)
    total = 0.0
    was = False
    for k in range(times.size):
        if not present[k]:
            was = False
            continue
        total = total + grown[k] if was else 0.0
        totals[k] = total
        was = True
    return totals


def render(world: World, start: float, end: float) -> ClusterMetrics:
    rng = world.rng
    grid = np.arange(start, end + 1e-6, STEP)
    series: list[Series] = []

    def add(signal: Signal, node: str, device: str, made: tuple[np.ndarray, np.ndarray]) -> None:
        times, values = made
        if times.size:
            series.append(
                Series(signal, node, device, tuple(times.tolist()), tuple(np.asarray(values, float).tolist()))
            )

    for node in world.nodes:
        # EFA
        t = _scrapes(rng, start, end, node.intervals["efa"], node.phase)
        st = world.state(t)
        rates, alive = world.efa(node, t, st)
        for signal, per_device in rates.items():
            for d in range(world.efa_devices):
                totals = _counter(rng, t, per_device[d], alive, events=False)
                add(signal, node.id, f"rdmap{d // 4}s{d % 4}", _rate(t, totals, alive, grid, RATE_WINDOW["efa"]))
        if not world.trainium:
            t = _scrapes(rng, start, end, node.intervals["dcgm"], node.phase * 1.7)
            st = world.state(t)
            values, present = world.dcgm(node, t, st)
            for signal, per_unit in values.items():
                for u in range(world.units):
                    made = _last_over_time(
                        t, per_unit[u], present[u], grid, GAUGE_WINDOW["dcgm"], biggest=signal is Signal.XID
                    )
                    add(signal, node.id, str(u), made)
            continue
        t = _scrapes(rng, start, end, node.intervals["neuron"], node.phase * 2.3)
        st = world.state(t)
        gauges, events, single, cores, runs, alive = world.neuron(node, t, st)
        window = GAUGE_WINDOW["neuron"]
        for u in range(world.units):
            made = _last_over_time(t, gauges[Signal.NEURONCORE_UTIL][u], cores[u] & runs, grid, window)
            add(Signal.NEURONCORE_UTIL, node.id, str(u), made)
        gone = {f.unit: f.start for f in world._mine(node) if f.kind == "device_gone"}
        for signal in (
            Signal.MEM_ECC_CORRECTED,
            Signal.SRAM_ECC_CORRECTED,
            Signal.MEM_ECC_UNCORRECTED,
            Signal.SRAM_ECC_UNCORRECTED,
        ):
            for d in range(world.units // 2):
                seen = runs & (t < gone.get(d, math.inf))
                totals = _counter(rng, t, events[signal][d], seen, events=True, single=single.get((signal, d), ()))
                add(signal, node.id, str(d), _rate(t, totals, seen, grid, RATE_WINDOW["neuron"]))
        for signal in (Signal.HARDWARE_ERRORS, Signal.EXECUTIONS):
            totals = _counter(rng, t, events[signal][0], runs, events=signal is Signal.HARDWARE_ERRORS)
            add(signal, node.id, "", _rate(t, totals, runs, grid, RATE_WINDOW["neuron"]))
        latency = _last_over_time(t, gauges[Signal.EXECUTION_LATENCY], runs, grid, window)
        add(Signal.EXECUTION_LATENCY, node.id, "p50", latency)
        made = _last_over_time(t, gauges[Signal.NEURON_DEVICES], alive, grid, window)
        add(Signal.NEURON_DEVICES, node.id, world.instance_type, made)
        add(Signal.NEURONCORES_PER_DEVICE, node.id, world.instance_type, (made[0], np.full(made[0].size, 2.0)))
    return ClusterMetrics(cluster="third", start=_dt(start), end=_dt(end), step_seconds=STEP, series=tuple(series))


# -- making a world -----------------------------------------------------------------------------------------


def _id(rng: np.random.Generator) -> str:
    return "i-0" + "".join("0123456789abcdef"[k] for k in rng.integers(0, 16, 16))


def _node(rng: np.random.Generator, world: World, joined: float) -> Node:
    units = world.units
    if world.trainium:
        stage = rng.uniform(0.85, 1.0)  # a pipeline stage's cores are a little less busy
        bin_ = np.clip(stage + rng.normal(0, 0.02, units), 0.6, 1.0)
        trickle = np.where(rng.random(units // 2) < 0.15, rng.uniform(1, 6, units // 2) / 3600.0, 0.0)
    else:
        bin_ = 1.0 - np.abs(rng.normal(0, 0.01, units)).clip(0, 0.03)
        trickle = np.zeros(1)
    share = np.zeros(world.efa_devices)
    share[: world.used_devices] = rng.uniform(0.9, 1.1, world.used_devices)
    dcgm = float(rng.uniform(10, 30))
    efa = float(rng.uniform(15, 30))
    return Node(
        id=_id(rng),
        joined=joined,
        bin=bin_,
        heat=rng.uniform(0, 12) + rng.normal(0, 2, units),
        share=share,
        trickle=trickle,
        intervals={"dcgm": dcgm, "efa": efa, "neuron": float(rng.uniform(max(30.0, efa), 60.0))},
        phase=float(rng.uniform(0, 60)),
    )


def _world(rng: np.random.Generator, accelerator: str, start: float, end: float) -> World:
    if accelerator == "trainium":
        kind = str(rng.choice(list(TRN_EFA)))
        world = World(
            rng=rng,
            accelerator=accelerator,
            instance_type=kind,
            units=32,
            boost=0.0,
            idle_clock=0.0,
            work_power=0.0,
            idle_power=0.0,
            efa_devices=TRN_EFA[kind],
            efa_rate=float(rng.uniform(3e9, 10e9)),
            compute_share=float(rng.uniform(0.55, 0.8)),
            util_level=float(rng.uniform(55, 95)),
            tensor_level=0.0,
            used_devices=TRN_EFA[kind],
            start=start,
            end=end,
        )
        size = int(rng.integers(4, 25))
    else:
        name, gpus, boost, idle, power, idle_power, devices, rate = GPU_TYPES[int(rng.integers(len(GPU_TYPES)))]
        world = World(
            rng=rng,
            accelerator=accelerator,
            instance_type=name,
            units=gpus,
            boost=boost,
            idle_clock=idle,
            work_power=power,
            idle_power=idle_power,
            efa_devices=devices,
            efa_rate=rate,
            compute_share=float(rng.uniform(0.55, 0.8)),
            util_level=float(rng.uniform(90, 100)),
            tensor_level=float(rng.uniform(0.3, 0.7)),
            used_devices=devices if rng.random() < 0.7 else max(devices // 2, 1),
            start=start,
            end=end,
        )
        size = int(rng.integers(4, 33))
    for _ in range(size):
        world.nodes.append(_node(rng, world, joined=start - 7200))
    if rng.random() < 0.3:
        world.nodes[-1].spare = True
    at = start + rng.uniform(0, 70) * MINUTE
    while at < end:
        world.checkpoints.append((at, at + rng.uniform(40, 240)))
        at += rng.uniform(25, 70) * MINUTE
    return world


def _healthy(world: World, avoid: Sequence[str]) -> Node:
    candidates = [n for n in world.nodes if not n.spare and n.id not in avoid and n.left == math.inf]
    return candidates[int(world.rng.integers(len(candidates)))]


def _bursts(rng: np.random.Generator, start: float, end: float, duty: float) -> tuple[tuple[float, float], ...]:
    out, at = [], start
    while at < end:
        on = rng.uniform(1, 4) * MINUTE
        out.append((at, at + on))
        at += on / duty
    return tuple(out)


def _fault(rng: np.random.Generator, world: World, kind: str, node: Node, start: float, end: float) -> Fault:
    units = world.units
    one = int(rng.integers(units))
    device = int(rng.integers(max(units // 2, 1)))
    match kind:
        case "hw_slowdown":
            return Fault(kind, start, end, node.id, one, level=float(rng.uniform(0.45, 0.75)))
        case "fan_failing":
            picked = tuple(int(u) for u in rng.choice(units, size=min(units, int(rng.integers(2, 5))), replace=False))
            ramp = int(rng.uniform(8, 15) * MINUTE)
            return Fault(kind, start, end, node.id, units=picked, level=float(rng.uniform(0.7, 0.85)), xid=ramp)
        case "thermal_cycling":
            duty = float(rng.uniform(0.25, 0.5))
            return Fault(
                kind,
                start,
                end,
                node.id,
                one,
                level=float(rng.uniform(0.55, 0.75)),
                bursts=_bursts(rng, start, min(end, world.end), duty),
            )
        case "xid79":
            return Fault(
                kind, start, end, node.id, one, xid=79, level=float(rng.uniform(1, 2.5)) * node.intervals["dcgm"]
            )
        case "nvlink":
            return Fault(kind, start, end, node.id, one, xid=74)
        case "gpu_dropped":
            return Fault(kind, start, end, node.id, one)
        case "row_remap_reset":
            return Fault(
                kind, start, end, node.id, one, xid=int(rng.choice([63, 64])), level=float(rng.uniform(60, 180))
            )
        case "dbe_kill":
            return Fault(kind, start, end, node.id, one, xid=int(rng.choice([48, 94, 95])))
        case "link_flap":
            return Fault(
                kind,
                start,
                end,
                node.id,
                int(rng.integers(world.used_devices)),
                level=float(rng.uniform(60, 180)),
                xid=int(rng.uniform(20, 60)),
            )
        case "link_degraded" | "efa_degraded":
            whole = rng.random() < 0.7
            picked = () if whole else (int(rng.integers(world.used_devices)),)
            low, high = (0.3, 0.65) if kind == "link_degraded" else (0.2, 0.6)
            retrans = int(rng.uniform(20, 400) if kind == "link_degraded" else rng.uniform(30, 600))
            return Fault(kind, start, end, node.id, units=picked, level=float(rng.uniform(low, high)), xid=retrans)
        case "core_stuck":
            return Fault(kind, start, end, node.id, one, level=float(rng.uniform(0.5, 0.8)))
        case "device_gone":  # the Neuron monitor restarts to count its devices again: a scrape or two missing
            node.gaps.setdefault("neuron", []).append((start, start + 1.5 * node.intervals["neuron"]))
            return Fault(kind, start, end, node.id, device, level=float(rng.uniform(0.6, 0.9)))
        case "hw_errors":
            return Fault(kind, start, end, node.id, level=float(rng.uniform(0.7, 0.9)), xid=int(rng.integers(1, 21)))
        case "hbm_uncorrected" | "sram_uncorrected":
            stop = min(end, world.end)
            count = int(rng.integers(1, 7))
            events = tuple(
                sorted(float(x) for x in rng.uniform(start, max(start + 60, min(stop, start + 1200)), count))
            )
            return Fault(kind, start, end, node.id, device, events=(start, *events))
        case "corrected_rising":
            low, high = float(rng.uniform(0.2, 1.0)), float(rng.uniform(5, 60))
            return Fault(
                kind,
                start,
                end,
                node.id,
                device,
                level=float(rng.uniform(10, 30)),
                xid=int(rng.random() < 0.3),
                rise=(low, high),
            )
    raise ValueError(kind)


CAUSE = {
    "hw_slowdown": Cause.THERMAL,
    "fan_failing": Cause.THERMAL,
    "thermal_cycling": Cause.THERMAL,
    "xid79": Cause.GPU,
    "nvlink": Cause.GPU,
    "gpu_dropped": Cause.GPU,
    "row_remap_reset": Cause.GPU_MEMORY,
    "dbe_kill": Cause.GPU_MEMORY,
    "link_flap": Cause.NETWORK,
    "link_degraded": Cause.NETWORK,
    "core_stuck": Cause.GPU,
    "device_gone": Cause.GPU,
    "hw_errors": Cause.GPU,
    "hbm_uncorrected": Cause.GPU_MEMORY,
    "sram_uncorrected": Cause.GPU_MEMORY,
    "corrected_rising": Cause.GPU_MEMORY,
    "efa_degraded": Cause.NETWORK,
}
GPU_SCENARIOS = (
    "hw_slowdown", "fan_failing", "thermal_cycling", "xid79", "nvlink", "gpu_dropped", "row_remap_reset", "dbe_kill",
    "link_flap", "link_degraded", "input", "software",
    "input_old_xid", "input_binned", "thermal_old_xid", "network_joiners", "input_joiners", "xid79_joiner",
)  # fmt: skip
TRAINIUM_SCENARIOS = (
    "core_stuck", "device_gone", "hw_errors", "hbm_uncorrected", "sram_uncorrected", "corrected_rising",
    "efa_degraded", "input", "software",
    "input_old_ecc", "stuck_joiners", "efa_after_restart", "ecc_then_errors",
)  # fmt: skip


def _decoys(rng: np.random.Generator, world: World, avoid: Sequence[str], spans: Sequence[tuple[float, float]]) -> None:
    def when(length: float) -> float | None:
        room = [(a, b) for a, b in spans if b - a > length + MINUTE]
        if not room:
            return None
        a, b = room[int(rng.integers(len(room)))]
        return float(rng.uniform(a, b - length))

    exporters = ["efa", "neuron"] if world.trainium else ["efa", "dcgm"]
    for _ in range(int(rng.integers(0, 4))):
        length = rng.uniform(1, 8) * MINUTE
        if (at := when(length)) is not None:
            node = _healthy(world, avoid)
            node.gaps.setdefault(str(rng.choice(exporters)), []).append((at, at + length))
    for _ in range(int(rng.integers(0, 3))):
        length = rng.uniform(1, 2) * MINUTE
        if (at := when(length)) is not None:
            node = _healthy(world, avoid)
            world.faults.append(
                Fault(
                    "retrans_burst",
                    at,
                    at + length,
                    node.id,
                    int(rng.integers(world.efa_devices)),
                    level=float(rng.uniform(30, 300)),
                )
            )
    if not world.trainium:
        if rng.random() < 0.35 and (at := when(MINUTE)) is not None:
            node = _healthy(world, avoid)
            world.faults.append(
                Fault("app_xid", at, math.inf, node.id, int(rng.integers(world.units)), xid=int(rng.choice(APP_XIDS)))
            )
        if rng.random() < 0.35 and (at := when(2 * MINUTE)) is not None:
            node = _healthy(world, avoid)
            world.faults.append(
                Fault(
                    "short_throttle", at, at + rng.uniform(30, 110), node.id, int(rng.integers(world.units)), level=0.7
                )
            )


def _joiners(rng: np.random.Generator, world: World, start: float, end: float) -> None:
    """1-3 nodes join the job between start and end (a scale-up): their exporters start then."""
    for _ in range(int(rng.integers(1, 4))):
        world.nodes.append(_node(rng, world, joined=float(rng.uniform(start, max(start + 60, end - 120)))))


def _case(index: int, accelerator: str, kind: str, seed: tuple[int, ...]) -> tuple[ThirdCase, World, float, float]:
    rng = np.random.default_rng(list(seed))
    episode_start = 1_800_000_000.0 + float(rng.integers(0, 20 * 86400))
    episode_end = episode_start + rng.uniform(8, 30) * MINUTE
    healthy_start = episode_start - HEALTHY
    world = _world(rng, accelerator, healthy_start - 10 * MINUTE, episode_end)
    onset = episode_start - rng.uniform(0, 3) * MINUTE
    culprit: Node | None = None
    avoid: list[str] = []
    primary = {
        "input_old_xid": "input", "input_binned": "input", "thermal_old_xid": "hw_slowdown",
        "network_joiners": "link_degraded", "input_joiners": "input", "xid79_joiner": "xid79",
        "input_old_ecc": "input", "stuck_joiners": "core_stuck", "efa_after_restart": "efa_degraded",
        "ecc_then_errors": "hbm_uncorrected",
    }.get(kind, kind)  # fmt: skip
    if primary == "corrected_rising":
        onset = episode_start - rng.uniform(0, 15) * MINUTE
    if primary in CAUSE:
        culprit = _healthy(world, ())
        avoid.append(culprit.id)
        world.faults.append(_fault(rng, world, primary, culprit, onset, math.inf))
        cause, suspect = CAUSE[primary], culprit.id
    elif primary == "input":
        world.faults.append(Fault("input", onset, math.inf, level=float(rng.uniform(0.35, 0.75))))
        cause, suspect = Cause.INPUT, None
    else:  # software
        world.faults.append(Fault("software", onset, math.inf, level=float(rng.uniform(0.55, 0.85))))
        cause, suspect = Cause.UNKNOWN, None
    if kind == "input_old_xid":
        old = _healthy(world, avoid)
        world.faults.append(
            Fault("old_xid", world.start - 3 * 3600, math.inf, old.id, int(rng.integers(world.units)), xid=48)
        )
    elif kind == "input_binned":
        old = _healthy(world, avoid)
        world.faults.append(
            Fault(
                "binned",
                world.start - 3 * 3600,
                math.inf,
                old.id,
                int(rng.integers(world.units)),
                level=float(rng.uniform(0.86, 0.89)),
            )
        )
    elif kind == "thermal_old_xid":
        old = _healthy(world, avoid)
        world.faults.append(
            Fault("old_xid", world.start - 3 * 3600, math.inf, old.id, int(rng.integers(world.units)), xid=63)
        )
    elif kind in ("network_joiners", "input_joiners", "xid79_joiner", "stuck_joiners"):
        _joiners(rng, world, episode_start, episode_end)
    elif kind == "input_old_ecc":
        old = _healthy(world, avoid)
        world.faults.append(
            Fault(
                "old_corrected",
                world.start - 3 * 3600,
                math.inf,
                old.id,
                int(rng.integers(16)),
                level=float(rng.uniform(2, 6)),
            )
        )
    elif kind == "efa_after_restart":
        at = episode_start - rng.uniform(10, 30) * MINUTE
        world.restarts.append((at, at + rng.uniform(2, 6) * MINUTE))
    elif kind == "ecc_then_errors" and culprit is not None:
        world.faults.append(
            Fault("hw_errors", onset + 60, math.inf, culprit.id, level=0.85, xid=int(rng.integers(2, 12)))
        )
    _decoys(rng, world, avoid, [(healthy_start, onset - 5 * MINUTE)])
    case = ThirdCase(
        name=f"{index:03d}-{accelerator}-{kind}",
        accelerator=accelerator,
        seed=seed,
        healthy_start=_dt(healthy_start),
        episode_start=_dt(episode_start),
        episode_end=_dt(episode_end),
        cause=cause,
        suspect=suspect,
    )
    return case, world, healthy_start - 5 * MINUTE, episode_end


def _render_case(seed: tuple[int, ...]) -> ClusterMetrics:
    index, accelerator, kind = _CASES[seed]
    _, world, start, end = _case(index, accelerator, kind, seed)
    return render(world, start, end)


_CASES: dict[tuple[int, ...], tuple[int, str, str]] = {}


def third_cases(seed: int = 1, n: int = 120) -> list[ThirdCase]:
    """`n` episodes, half GPU and half Trainium, every scenario in turn (shuffled), each its own cluster."""
    order = np.random.default_rng([seed, 3, 0])
    gpu = [GPU_SCENARIOS[k] for k in order.permutation(len(GPU_SCENARIOS))]
    trn = [TRAINIUM_SCENARIOS[k] for k in order.permutation(len(TRAINIUM_SCENARIOS))]
    cases = []
    for i in range(n):
        accelerator = "gpu" if i % 2 == 0 else "trainium"
        scenarios = gpu if accelerator == "gpu" else trn
        kind = scenarios[(i // 2) % len(scenarios)]
        key = (seed, 3, 1, i)
        _CASES[key] = (i, accelerator, kind)
        cases.append(_case(i, accelerator, kind, key)[0])
    return cases


TIMELINE_FAULTS = {
    "gpu": ("hw_slowdown", "thermal_cycling", "link_degraded", "dbe_kill", "xid79"),
    "trainium": (
        "core_stuck", "device_gone", "hw_errors", "hbm_uncorrected", "sram_uncorrected", "corrected_rising",
        "efa_degraded",
    ),
}  # fmt: skip


def _timeline(index: int, accelerator: str, rng: np.random.Generator) -> ThirdTimeline:
    start = 1_800_000_000.0 + float(rng.integers(0, 20 * 86400))
    end = start + rng.uniform(2, 3) * 3600
    world = _world(rng, accelerator, start - 10 * MINUTE, end)
    faulty: list[tuple[str, Cause, datetime, datetime | None]] = []
    used: list[str] = []
    hang_until = -math.inf
    for _ in range(int(rng.choice([0, 1, 1, 2, 2, 3]))):
        kind = str(rng.choice(TIMELINE_FAULTS[accelerator]))
        node = _healthy(world, used)
        begin = start + rng.uniform(15, 0.75 * (end - start) / MINUTE) * MINUTE
        stop = begin + rng.uniform(25, 90) * MINUTE if rng.random() < 0.6 else math.inf
        if kind in ("xid79", "dbe_kill"):
            if begin < hang_until + 20 * MINUTE:
                continue
            stop = begin + rng.uniform(15, 30) * MINUTE  # the node is replaced: it leaves, the job restarts
            hang_until = stop
            node.left = stop
            world.restarts.append((stop, stop + rng.uniform(3, 6) * MINUTE))
            world.nodes.append(_node(rng, world, joined=stop + 2 * MINUTE))
        fault = _fault(rng, world, kind, node, begin, stop)
        if kind in ("hbm_uncorrected", "sram_uncorrected"):  # recurring while it lasts
            last = min(stop, end)
            fault.events = tuple(np.arange(begin, last, rng.uniform(2, 6) * MINUTE).tolist())
        world.faults.append(fault)
        used.append(node.id)
        faulty.append((node.id, CAUSE[kind], _dt(begin), _dt(stop) if stop < end else None))
    for kind, level in (("input", (0.4, 0.75)), ("software", (0.55, 0.85))):
        if rng.random() < 0.2:
            at = start + rng.uniform(0, (end - start) / MINUTE - 40) * MINUTE
            world.faults.append(Fault(kind, at, at + rng.uniform(10, 40) * MINUTE, level=float(rng.uniform(*level))))
    if rng.random() < 0.4:
        at = start + rng.uniform(10, (end - start) / MINUTE - 20) * MINUTE
        if not any(a - 600 < at < b + 600 for a, b in world.restarts):
            world.restarts.append((at, at + rng.uniform(2, 6) * MINUTE))
    for _ in range(int(rng.integers(1, 3))):
        _decoys(rng, world, used, [(start, end)])
    if rng.random() < 0.3:
        _joiners(rng, world, start + 20 * MINUTE, end - 20 * MINUTE)
    return ThirdTimeline(
        name=f"{index:03d}-{accelerator}-timeline-{len(faulty)}",
        accelerator=accelerator,
        metrics=render(world, start, end),
        faulty=tuple(faulty),
    )


def third_timelines(seed: int = 1, n: int = 24) -> list[ThirdTimeline]:
    """`n` clusters over 2-3 hours, half GPU, half Trainium, 0-3 true faulty nodes each among decoys."""
    return [_timeline(i, "gpu" if i % 2 == 0 else "trainium", np.random.default_rng([seed, 3, 2, i])) for i in range(n)]


if __name__ == "__main__":
    import time

    began = time.perf_counter()
    made = third_cases(1, 6)
    for case in made:
        values = sum(len(s.values) for s in case.metrics.series)
        print(case.name, case.cause.value, case.suspect, f"{values / 1e6:.2f} M values")
    print(f"{time.perf_counter() - began:.1f} s")
