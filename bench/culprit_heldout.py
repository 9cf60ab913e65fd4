"""A held-out generator for `bench/culprit.py`: per-node GPU and EFA metrics with known culprits, never tuned on.

Written from issue 13 and from how real clusters behave, without reading `bot/node_metrics/culprit.py` or
`sandbox/node_metrics.py`, so that a detector tuned on its own generator meets slowdowns that generator never
made. It shares nothing with them but the contract (`bot/node_metrics/series.py`).

## How the metrics are made

A cluster is 4-48 nodes (log-uniform) of one instance type: p4d (8 x A100, 1,410 MHz, 4 EFA devices), p5
(8 x H100, 1,980 MHz, 32 EFA devices), p5en (8 x H200, 1,980 MHz, 16 EFA devices), g6e.12xlarge (4 x L40S,
2,520 MHz, 1 EFA device) or g5.12xlarge (4 x A10G, 1,710 MHz, 1 EFA device). The job is synchronous
(data/tensor parallel): each step is compute (a share c = 0.6-0.85 of the step) then collectives, and every
step waits for the slowest GPU and the slowest link, so

    step time = c / (slowest GPU's speed) + (1 - c) / (slowest link's bandwidth factor);  rate = min(1 / step
    time, input limit) x (a cluster-wide software factor), relative to the healthy rate.

What each exporter would show follows from that, as DCGM and the EFA exporter measure it:

- `DCGM_FI_PROF_PIPE_TENSOR_ACTIVE` is the share of time the tensor cores are busy: the job's level (0.3-0.7),
  x a pipeline-stage factor per node (+-0-12 %, fixed: healthy nodes differ by nature), x rate / speed. So a
  straggler's own tensor activity stays high (it computes the whole time, slowly) while its peers' drops
  (they wait for it).
- `DCGM_FI_DEV_GPU_UTIL` counts any kernel, and NCCL kernels spin while waiting: it stays at 93-100 % on every
  node behind a straggler, a bad link or a hang. It only drops when the GPUs have nothing to run: waiting for
  data (input), checkpoints, evaluations.
- `DCGM_FI_DEV_SM_CLOCK` sits at the boost clock, quantized to 15 MHz, with power-management dips (2-5 % of the
  samples, 3-10 % down) and some GPUs binned 0.5-1.5 % lower; at idle it falls to the idle clock (or stays up,
  per cluster).
- `DCGM_FI_DEV_POWER_USAGE` follows utilization, tensor activity and clock; `DCGM_FI_DEV_GPU_TEMP` follows power
  with a 1-2 minute lag, plus a rack offset per node, a per-GPU offset and, on 40 % of the nodes, a GPU or two
  that runs 5-9 °C hotter by nature.
- `DCGM_FI_DEV_XID_ERRORS` is the last XID seen (0: none); it stays until the node reboots, or for a few
  samples only (both happen).
- EFA bytes/s are proportional to the job's rate (the bytes of a step are fixed), split over the devices with a
  fixed imbalance of +-8 %; retransmits are 0.01-1 /s per device, heavy-tailed.
- Noise is heavy-tailed (Student's t, 3 degrees of freedom) on every signal.

Each node's exporters (DCGM and EFA separately) are scraped every 15-60 s (per cluster), each scrape jittered
and at its own phase; a scrape that fails is a gap, and a series that leaves is marked stale at once, as
Prometheus does. Then, for 70 % of the clusters, what a reader gets from `/api/v1/query_range` at a 30 s step:
gauges are the latest sample within the 5-minute lookback, counters are `rate(x[2m])` (absent when the window
holds fewer than two samples, which happens at a 60 s scrape); for the other 30 %, the raw jittered samples
themselves (times differ from node to node) with counters as rates between consecutive samples. The metrics
start 0-5 minutes before `healthy_start` and end at `episode_end`. Values are rounded as exporters round them
(utilization, clock and temperature to integers, power to 0.1 W, rates to 4 significant digits), so that equal
values can share one float: 100 cases are ~24 M values, ~300 MB, ~10 s of CPU.

## Decoys, in every case and timeline at random (never the truth)

Checkpoints every 20-60 minutes (1-4 minutes, every node idle together), an evaluation (5-10 minutes, every node
at 35-65 % utilization with little EFA), exporter gaps on a healthy node (2-10 minutes, DCGM, EFA or both; on the
culprit too, 3-5 minutes, in 10 % of the cases), a healthy node replaced (it leaves, the job restarts for 6-15
minutes with every node idle, the new node joins cold and warms up), GPUs hot by nature, pipeline-stage
offsets, retransmit bursts on a healthy node (30-300 /s for 1-3 minutes, traffic unchanged), single-sample clock
dips, application XIDs 13/31/43 on a healthy GPU (a user's kernel fault, not the hardware) and cluster-wide
ambient heat. In a case they fall anywhere in the healthy window; in the episode window at most a quarter of it.

## The cases (`heldout_cases`): one throughput episode each; ground truth `cause` and `suspect`

The fault starts 0-3 minutes before `episode_start` (gradual ones 20-60 minutes before), and lasts past
`episode_end`; the healthy window (`healthy_start` = `episode_start` - 1 hour) is otherwise healthy.
Episodes last 10-45 minutes.

Each scenario, what happens, and its truth (cause; suspect):

- thermal_gpu_strong: one GPU throttles to 55-72 % of its clock at 88-96 °C. Thermal; its node.
- thermal_gpu_mild: one GPU at 84-89 % of its clock (1,700 of 1,980 MHz) at 81-88 °C. Thermal; its node.
- thermal_node_cooling: a node's cooling fails: all its GPUs at 60-85 % clock, 88-97 °C. Thermal; its node.
- thermal_intermittent: one GPU throttles on and off (on 40-70 % of the time, in 1-5 minute bursts). Thermal;
  its node.
- thermal_gradual: one GPU's clock declines linearly to 60-75 % over 25-70 minutes (a fan dying), from 20-60
  minutes before the episode. Thermal; its node.
- power_cap: a node's GPUs capped at 50-75 % of their working power: clock 66-84 %, temperature lower.
  Thermal; its node.
- network_device: one EFA device of a node carries 2-40 % of its share, 100-2,000 retransmits/s. Network; its
  node.
- network_node_mild: all of a node's EFA devices at 45-65 % of their peers', 15-80 retransmits/s. Network; its
  node.
- network_node_strong: all of a node's EFA devices at 10-35 % of their peers', 150-3,000 retransmits/s.
  Network; its node.
- gpu_xid79: XID 79 on one GPU (fallen off the bus), its series vanish 1-3 scrapes later (in 30 %, the node's
  whole DCGM exporter goes; at a 30 s query step the XID sample itself may not survive); the job hangs: every
  other GPU spins at ~100 % utilization with no tensor activity and no EFA traffic. GPU; its node.
- gpu_dead: one GPU at 0 % utilization, idle power and clock, no XID; the job hangs as above. GPU; its node.
- gpu_nvlink: XID 74 (NVLink) on one GPU; the job hangs as above: only the XID tells the node. GPU; its node.
- gpu_memory (twice as often): XID 48, 63, 64, 94 or 95 on one GPU, which keeps working (in 40 % the XID shows
  on 1-3 scrapes only); the job runs at 75-92 % (restarts, remaps) with every node alike. GPU memory; its node.
- input_strong: every node's utilization to 20-40 % of healthy, EFA bytes down with the rate (a step's bytes
  are fixed), retransmits normal. Input; none.
- input_mild: the same to 55-75 %. Input; none.
- cluster_network: every node's EFA down (30-60 %), retransmits up on every node (a fabric fault), utilization
  high. Unknown; none.
- ambient_hot: every GPU 8-14 °C hotter (the hall's cooling), every clock at 88-93 %, alike. Unknown; none.
- software: every node slows alike (55-80 %), utilization high, clocks, power, EFA and retransmits normal for
  that rate, and an application XID (13/31/43) on one GPU. Unknown; none.

Why `cluster_network` and `ambient_hot` are `unknown`: the issue's `network` and `thermal` are one node's, and
`input` is "utilization down everywhere, EFA normal"; a fabric-wide EFA drop with retransmits everywhere and
utilization high is none of these, and replacing a node would not help, so no suspect. Likewise an application
XID is a bug in the job, not a GPU to replace.

## The timelines (`heldout_timelines`): faulty nodes before they hurt, over 2-3.5 hours

0-3 persistent faults (on distinct nodes, 20-120 minutes, or to the end: `end` None), each one of: a throttled
GPU (strong, mild or intermittent), a power-capped node, a degraded EFA device or node, a gpu_memory XID that
stays, and XID 79 (the GPU's series vanish, the job hangs 10-30 minutes, then the node is replaced: the fault
ends when it leaves). Among decoys: all of the above, plus cluster-wide input slowdowns, fabric slowdowns,
ambient heat and software slowdowns (never a faulty node), throttles, retransmit bursts and dips of at most 3
minutes, and application XIDs that stay. `faulty` lists (node, cause, start, end) of the true faults only.

    from culprit_heldout import heldout_cases, heldout_timelines
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.node_metrics.series import Cause, ClusterMetrics, Series, Signal

# The contract's healthy window (culprit.HEALTHY_BEFORE), restated so that this file needs nothing of culprit.py.
HEALTHY_BEFORE = timedelta(hours=1)
QUERY_STEP = 30.0  # the reader's default query_range step
LOOKBACK = 300.0  # Prometheus' lookback delta for a gauge
RATE_WINDOW = 120.0  # rate(x[2m])
MINUTE = 60.0

TRAIN, IDLE, EVAL, HANG = 0, 1, 2, 3  # what the whole job is doing at a moment
APP_XIDS = (13, 31, 43)
MEMORY_XIDS = (48, 63, 64, 94, 95)


@dataclass(frozen=True)
class HeldoutCase:
    """One throughput episode and what truly caused it (`suspect` None for input and unknown)."""

    name: str
    metrics: ClusterMetrics
    healthy_start: datetime
    episode_start: datetime
    episode_end: datetime
    cause: Cause
    suspect: str | None


@dataclass(frozen=True)
class HeldoutTimeline:
    """Hours of a cluster's metrics and the nodes that truly diverge persistently: (node, cause, start, end),
    end None when the fault lasts to the end of the metrics. Decoys are not listed."""

    name: str
    metrics: ClusterMetrics
    faulty: tuple[tuple[str, Cause, datetime, datetime | None], ...]


@dataclass(frozen=True)
class Hardware:
    name: str
    gpus: int
    max_clock: float  # MHz, the boost clock a healthy GPU holds under load
    idle_clock: float
    tdp: float  # W
    idle_power: float
    throttle_temp: float  # °C where the clock starts to fall
    efa_devices: tuple[str, ...]
    efa_line_rate: float  # bytes/s per device
    weight: float  # how often a cluster is of this type


def _devices(count: int) -> tuple[str, ...]:
    return tuple(f"rdmap{16 * (i // 4 + 1)}s{27 + i % 4}" for i in range(count))


HARDWARE = (
    Hardware(
        name="p4d.24xlarge",
        gpus=8,
        max_clock=1410,
        idle_clock=210,
        tdp=400,
        idle_power=55,
        throttle_temp=85,
        efa_devices=_devices(4),
        efa_line_rate=12.5e9,
        weight=0.3,
    ),
    Hardware(
        name="p5.48xlarge",
        gpus=8,
        max_clock=1980,
        idle_clock=345,
        tdp=700,
        idle_power=70,
        throttle_temp=86,
        efa_devices=_devices(32),
        efa_line_rate=12.5e9,
        weight=0.2,
    ),
    Hardware(
        name="p5en.48xlarge",
        gpus=8,
        max_clock=1980,
        idle_clock=345,
        tdp=700,
        idle_power=75,
        throttle_temp=86,
        efa_devices=_devices(16),
        efa_line_rate=25e9,
        weight=0.2,
    ),
    Hardware(
        name="g6e.12xlarge",
        gpus=4,
        max_clock=2520,
        idle_clock=210,
        tdp=350,
        idle_power=35,
        throttle_temp=87,
        efa_devices=_devices(1),
        efa_line_rate=12.5e9,
        weight=0.15,
    ),
    Hardware(
        name="g5.12xlarge",
        gpus=4,
        max_clock=1710,
        idle_clock=210,
        tdp=300,
        idle_power=30,
        throttle_temp=84,
        efa_devices=_devices(1),
        efa_line_rate=5e9,
        weight=0.15,
    ),
)


@dataclass
class Fault:
    """A node's hardware fault, a cluster-wide condition (node None), or a decoy; `level(t)` says how much
    of it is on at t (0..1): spans for intermittent ones, a linear ramp for gradual ones."""

    kind: str
    start: float
    end: float = math.inf
    node: str | None = None
    gpus: tuple[int, ...] = ()
    devices: tuple[int, ...] = ()
    severity: float = 1.0  # a speed, bandwidth or rate factor (1 = no effect), per kind
    per_gpu: tuple[float, ...] = ()  # a severity per GPU of `gpus`, when they differ
    hot_to: float = 0.0  # °C a thermal fault drives the GPU to
    retrans: float = 0.0  # retransmits/s it adds per device
    xid: int = 0
    xid_samples: int = 0  # 0: the XID stays; n: it shows on n scrapes, then 0
    spans: tuple[tuple[float, float], ...] = ()  # intermittent: when it is on
    ramp: float = 0.0  # gradual: seconds from start to full severity

    def level(self, t: np.ndarray) -> np.ndarray:
        on = ((t >= self.start) & (t < self.end)).astype(float)
        if self.spans:
            inside = np.zeros_like(on)
            for a, b in self.spans:
                inside[(t >= a) & (t < b)] = 1.0
            on *= inside
        if self.ramp > 0:
            on *= np.clip((t - self.start) / self.ramp, 0.0, 1.0)
        return on

    def speed(self, t: np.ndarray, gpu_index: int) -> np.ndarray:
        severity = self.per_gpu[gpu_index] if self.per_gpu else self.severity
        return 1.0 - (1.0 - severity) * self.level(t)


@dataclass
class Node:
    id: str
    joined: float
    left: float
    tensor: np.ndarray  # (G,) the job's tensor activity on each GPU, stage factor included
    util: np.ndarray  # (G,) healthy utilization
    clock_bin: np.ndarray  # (G,) 1.0 or a little lower
    temp_offset: np.ndarray  # (G,) °C, rack + GPU + hot by nature
    power_share: np.ndarray  # (G,)
    efa_share: np.ndarray  # (D,)
    retrans_base: np.ndarray  # (D,)
    dcgm_gaps: list[tuple[float, float]] = field(default_factory=list)
    efa_gaps: list[tuple[float, float]] = field(default_factory=list)
    dcgm_gone: float = math.inf  # the whole DCGM exporter stops (after XID 79 in some cases)


@dataclass
class World:
    """One cluster's truth over time: its nodes, the job's pauses, the faults; `render` turns it into metrics."""

    rng: np.random.Generator
    hw: Hardware
    cluster: str
    start: float
    end: float
    scrape: float
    query_mode: bool
    compute_share: float
    job_power: float  # W a GPU draws at full work
    efa_bytes: float  # bytes/s per device at the healthy rate
    ambient: float
    idle_clock_drops: bool
    nodes: list[Node] = field(default_factory=list)
    pauses: list[tuple[float, float, int]] = field(default_factory=list)  # (start, end, IDLE|EVAL|HANG)
    restarts: list[tuple[float, float]] = field(default_factory=list)  # (resume time, ramp seconds)
    faults: list[Fault] = field(default_factory=list)

    # -- the job as a whole ----------------------------------------------------------------------------------

    def mode(self, t: np.ndarray) -> np.ndarray:
        mode = np.full(t.shape, TRAIN)
        for kind in (EVAL, IDLE, HANG):  # later wins: a hang outlasts a checkpoint
            for a, b, k in self.pauses:
                if k == kind:
                    mode[(t >= a) & (t < b)] = kind
        for f in self.faults:
            if f.kind in ("xid79", "gpu_dead", "nvlink"):
                mode[(t >= f.start) & (t < f.end)] = HANG
        return mode

    def rates(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The job's rate (relative to healthy) and the share of time its GPUs run a step (not waiting for data)."""
        speed = np.ones(t.shape)
        bandwidth = np.ones(t.shape)
        input_limit = np.full(t.shape, np.inf)
        software = np.ones(t.shape)
        for f in self.faults:
            if f.kind in ("thermal", "power_cap"):
                for i in range(len(f.gpus)):
                    speed = np.minimum(speed, f.speed(t, i))
            elif f.kind == "ambient":
                slowest = min(f.per_gpu, default=f.severity)
                speed = np.minimum(speed, 1.0 - (1.0 - slowest) * f.level(t))
            elif f.kind == "network":
                # one bad device of several slows only its share of the channels; a whole node's, all of them
                whole = len(f.devices) == len(self.hw.efa_devices)
                effective = f.severity if whole else 0.5 + 0.5 * f.severity
                bandwidth = np.minimum(bandwidth, 1.0 - (1.0 - effective) * f.level(t))
            elif f.kind == "cluster_network":
                bandwidth = np.minimum(bandwidth, 1.0 - (1.0 - f.severity) * f.level(t))
            elif f.kind == "input":
                on = f.level(t) > 0
                input_limit = np.where(on, np.minimum(input_limit, f.severity), input_limit)
            elif f.kind == "software":
                software = np.minimum(software, 1.0 - (1.0 - f.severity) * f.level(t))
        c = self.compute_share
        compute_rate = software / (c / speed + (1.0 - c) / bandwidth)
        rate = np.minimum(compute_rate, input_limit)
        active = rate / compute_rate
        warm = np.ones(t.shape)
        for resume, ramp in self.restarts:
            inside = (t >= resume) & (t < resume + ramp)
            warm[inside] = np.minimum(warm[inside], 0.1 + 0.9 * (t[inside] - resume) / ramp)
        return rate * warm, active

    # -- one node --------------------------------------------------------------------------------------------

    def gpu_values(self, node: Node, t: np.ndarray) -> dict[Signal, np.ndarray]:
        """Each DCGM signal of the node's GPUs at times t, shape (G, len(t))."""
        rng, hw = self.rng, self.hw
        gpus, n = hw.gpus, len(t)
        mode = self.mode(t)
        rate, active = self.rates(t)
        speed = np.ones((gpus, n))
        hot_to = np.zeros((gpus, n))
        cap = np.full((gpus, n), np.inf)
        xid = np.zeros((gpus, n))
        dead = np.zeros((gpus, n), dtype=bool)
        ambient = np.zeros(n)
        for f in self.faults:
            if f.kind == "ambient":
                ambient += f.hot_to * f.level(t)
                for g in range(gpus):
                    speed[g] = np.minimum(speed[g], f.speed(t, g % max(len(f.per_gpu), 1)))
            if f.node != node.id:
                continue
            if f.kind in ("thermal", "power_cap"):
                for i, g in enumerate(f.gpus):
                    speed[g] = np.minimum(speed[g], f.speed(t, i))
                    if f.kind == "thermal":
                        hot_to[g] = np.maximum(hot_to[g], f.hot_to * f.level(t))
                    else:
                        on = f.level(t) > 0
                        cap[g] = np.where(on, f.severity**1.7 * self.job_power * node.power_share[g], cap[g])
            elif f.kind in ("xid_memory", "xid_app", "xid79", "nvlink"):
                for g in f.gpus:
                    shown = (t >= f.start) & (t < f.end)  # a reboot clears it
                    if f.xid_samples:
                        first = int(np.searchsorted(t, f.start))
                        shown[first + f.xid_samples :] = False
                    xid[g] = np.where(shown, f.xid, xid[g])
            elif f.kind == "gpu_dead":
                for g in f.gpus:
                    dead[g] |= (t >= f.start) & (t < f.end)
        # the cluster's straggler sets the rate; each GPU's own speed sets how busy it is
        busy = np.clip(rate[None, :] / speed, 0.0, 1.0)
        tensor = node.tensor[:, None] * busy
        util = node.util[:, None] * active[None, :]
        train = mode == TRAIN
        tensor = np.where(train, tensor, 0.0)
        util = np.where(train, util, 0.0)
        eval_ = mode == EVAL
        tensor = np.where(eval_, node.tensor[:, None] * 0.2, tensor)
        util = np.where(eval_, rng.uniform(35, 65) * np.ones((gpus, 1)), util)
        hang = mode == HANG
        tensor = np.where(hang, 0.0, tensor)
        util = np.where(hang, 100.0, util)  # NCCL kernels spin, waiting for the lost rank
        idle = mode == IDLE
        util = np.where(idle, 2.0, util)
        tensor = np.where(dead, 0.0, tensor)
        util = np.where(dead, 0.0, util)
        # power: the share of full work, scaled by clock (dynamic power falls faster than the clock)
        work = np.clip(0.3 * util / 100.0 + 0.7 * tensor / np.maximum(node.tensor[:, None], 1e-3), 0.0, 1.1)
        work = np.where(hang & ~dead, 0.35, work)
        power = hw.idle_power + (self.job_power * node.power_share[:, None] - hw.idle_power) * work * speed**1.6
        power = np.minimum(power, cap)
        clock = hw.max_clock * node.clock_bin[:, None] * speed
        dips = rng.random((gpus, n)) < rng.uniform(0.02, 0.05)
        clock = np.where(dips, clock * rng.uniform(0.9, 0.97, (gpus, n)), clock)
        at_rest = (idle | dead) if self.idle_clock_drops else dead
        clock = np.where(at_rest, hw.idle_clock, clock)
        # temperature follows power with a lag; a thermal fault drives it up to its own level
        target = self.ambient + node.temp_offset[:, None] + ambient[None, :] + 45.0 * (power - hw.idle_power) / hw.tdp
        target = np.maximum(target, hot_to)
        temp = _lag(target, t, tau=rng.uniform(60, 120))
        noise = _noise(rng, (gpus, n))
        return {
            Signal.TENSOR_ACTIVE: np.round(np.clip(tensor * (1 + 0.03 * noise), 0.0, 0.99), 4),
            Signal.GPU_UTIL: np.round(np.clip(util + 1.5 * _noise(rng, (gpus, n)), 0, 100)),
            Signal.SM_CLOCK: np.round(np.clip(clock * (1 + 0.002 * noise), hw.idle_clock, hw.max_clock) / 15) * 15,
            Signal.GPU_TEMP: np.round(temp + 0.6 * _noise(rng, (gpus, n))),
            Signal.POWER: np.round(np.maximum(power * (1 + 0.025 * _noise(rng, (gpus, n))), hw.idle_power * 0.8), 1),
            Signal.XID: xid,
        }

    def efa_rates(self, node: Node, t: np.ndarray) -> dict[Signal, np.ndarray]:
        """The true per-second rate of each EFA counter of the node at times t, shape (D, len(t))."""
        rng = self.rng
        d, n = len(self.hw.efa_devices), len(t)
        mode = self.mode(t)
        rate, _ = self.rates(t)
        traffic = np.where(mode == TRAIN, rate, 0.0)
        traffic = np.where(mode == EVAL, 0.04, traffic)
        traffic = np.where(mode == IDLE, 0.01, traffic)
        traffic = np.where(mode == HANG, 0.002, traffic)
        factor = np.ones((d, n))
        retrans = node.retrans_base[:, None] * np.abs(1 + 0.8 * _noise(rng, (d, n))) * (traffic > 0.05)
        for f in self.faults:
            if f.kind == "cluster_network":
                retrans = retrans + f.retrans * f.level(t)[None, :] * rng.lognormal(0, 0.6, (d, n))
            if f.node != node.id:
                continue
            if f.kind in ("network", "retrans_burst"):
                on = f.level(t)
                for dev in f.devices:
                    if f.kind == "network":
                        factor[dev] *= 1.0 - (1.0 - f.severity) * on
                    retrans[dev] += f.retrans * on * rng.lognormal(0, 0.7, n)
        rx = self.efa_bytes * node.efa_share[:, None] * traffic[None, :] * factor
        rx = rx * np.exp(0.05 * _noise(rng, (d, n)))
        tx = rx * np.exp(0.01 * _noise(rng, (d, n)))
        return {Signal.EFA_RX: rx, Signal.EFA_TX: tx, Signal.EFA_RETRANS: retrans}

    # -- what a reader gets ----------------------------------------------------------------------------------

    def render(self, start: float, end: float) -> ClusterMetrics:
        rng = self.rng
        grid = np.arange(start, end + 1e-6, QUERY_STEP)
        grid_cache: dict[bytes, tuple[float, ...]] = {}
        interned: dict[float, float] = {}  # one object per distinct value: 20 M floats apart would take a gigabyte
        intern = interned.setdefault
        series: list[Series] = []
        for node in self.nodes:
            for exporter in ("dcgm", "efa"):
                attempts = _attempts(rng, start - 2 * RATE_WINDOW, end, self.scrape)
                alive = (attempts >= node.joined) & (attempts < node.left)
                gaps = node.dcgm_gaps if exporter == "dcgm" else node.efa_gaps
                for a, b in gaps:
                    alive &= ~((attempts >= a) & (attempts < b))
                if exporter == "dcgm":
                    alive &= attempts < node.dcgm_gone
                    values = self.gpu_values(node, attempts)
                    present = np.repeat(alive[None, :], self.hw.gpus, axis=0)
                    for f in self.faults:  # a GPU fallen off the bus: its series end 1-3 scrapes after the XID
                        if f.kind == "xid79" and f.node == node.id:
                            after = int(np.searchsorted(attempts, f.start)) + int(rng.integers(1, 4))
                            for g in f.gpus:
                                present[g, after:] = False
                    devices = [str(g) for g in range(self.hw.gpus)]
                else:
                    values = self.efa_rates(node, attempts)
                    present = np.repeat(alive[None, :], len(self.hw.efa_devices), axis=0)
                    devices = list(self.hw.efa_devices)
                raw_cache: dict[bytes, tuple[float, ...]] = {}
                for signal, array in values.items():
                    for i, device in enumerate(devices):
                        made = (
                            _query(signal, attempts, array[i], present[i], grid, grid_cache)
                            if self.query_mode
                            else _raw(signal, attempts, array[i], present[i], start, raw_cache)
                        )
                        if made is not None:
                            times, vals = made
                            vals = tuple(map(intern, vals, vals))
                            series.append(Series(signal=signal, node=node.id, device=device, times=times, values=vals))
        return ClusterMetrics(
            cluster=self.cluster,
            start=_dt(start),
            end=_dt(end),
            step_seconds=QUERY_STEP if self.query_mode else self.scrape,
            series=tuple(series),
        )


def _significant(values: np.ndarray, digits: int) -> np.ndarray:
    """`values` rounded to `digits` significant digits (so that equal values can be one object)."""
    magnitude = np.floor(np.log10(np.maximum(np.abs(values), 1e-300)))
    scale = 10.0 ** (magnitude - digits + 1)
    return np.where(values == 0, 0.0, np.round(values / scale) * scale)


def _noise(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Heavy-tailed unit noise: Student's t with 3 degrees of freedom, clipped at 6."""
    return np.clip(rng.standard_t(3, shape) / math.sqrt(3.0), -6.0, 6.0)


def _lag(target: np.ndarray, t: np.ndarray, *, tau: float) -> np.ndarray:
    """A first-order lag (a GPU heats and cools in a minute or two), from the first target on."""
    out = np.empty_like(target)
    value = target[:, 0].copy()
    previous = t[0]
    for k in range(target.shape[1]):
        alpha = 1.0 - math.exp(-max(t[k] - previous, 0.0) / tau)
        value = value + alpha * (target[:, k] - value)
        out[:, k] = value
        previous = t[k]
    return out


def _attempts(rng: np.random.Generator, start: float, end: float, interval: float) -> np.ndarray:
    """Scrape times: every `interval` at a phase of its own, each jittered (and now and then late)."""
    base = np.arange(start + rng.uniform(0, interval), end, interval)
    jitter = rng.normal(0, 0.03 * interval, base.shape) + (rng.random(base.shape) < 0.02) * rng.uniform(
        0, 0.4 * interval, base.shape
    )
    return np.maximum.accumulate(base + np.clip(jitter, -0.2 * interval, 0.45 * interval))


def _times(times: np.ndarray, keep: np.ndarray, cache: dict[bytes, tuple[float, ...]]) -> tuple[float, ...]:
    """`times[keep]` as a tuple, one object for every series kept alike (most are: it saves memory)."""
    key = keep.tobytes()
    if key not in cache:
        cache[key] = tuple(times[keep].tolist())
    return cache[key]


def _query(
    signal: Signal,
    attempts: np.ndarray,
    values: np.ndarray,
    present: np.ndarray,
    grid: np.ndarray,
    times_cache: dict[bytes, tuple[float, ...]],
) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """What /api/v1/query_range gives at `grid`: a gauge's latest sample in the lookback unless marked stale,
    a counter's rate over 2 minutes (absent with fewer than two samples in the window)."""
    index = np.arange(len(attempts))
    last_present = np.maximum.accumulate(np.where(present, index, -1))
    if signal.is_counter:
        counter = np.concatenate(([0.0], np.cumsum(values[:-1] * np.diff(attempts))))
        hi = np.searchsorted(attempts, grid, side="right") - 1
        lo = np.searchsorted(attempts, grid - RATE_WINDOW, side="right")
        next_present = np.minimum.accumulate(np.where(present, index, len(attempts))[::-1])[::-1]
        last = last_present[np.clip(hi, 0, None)]
        first = next_present[np.clip(lo, 0, len(attempts) - 1)]
        ok = (hi >= 0) & (first < last) & (last >= 0)
        first, last = first[ok], last[ok]
        out = _significant((counter[last] - counter[first]) / (attempts[last] - attempts[first]), 4)
    else:
        latest = np.searchsorted(attempts, grid, side="right") - 1
        ok = latest >= 0
        latest = np.clip(latest, 0, None)
        ok &= present[latest] & (grid - attempts[latest] < LOOKBACK)
        out = values[latest[ok]]
    if not ok.any():
        return None
    return _times(grid, ok, times_cache), tuple(out.tolist())


def _raw(
    signal: Signal,
    attempts: np.ndarray,
    values: np.ndarray,
    present: np.ndarray,
    start: float,
    times_cache: dict[bytes, tuple[float, ...]],
) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """The scraped samples themselves; a counter as the rate since the sample before."""
    keep = present & (attempts >= start)
    if signal.is_counter:
        counter = np.concatenate(([0.0], np.cumsum(values[:-1] * np.diff(attempts))))
        index = np.flatnonzero(present)
        previous = np.full(len(attempts), -1)
        previous[index[1:]] = index[:-1]
        keep &= previous >= 0
        before = previous[keep]
        out = _significant((counter[keep] - counter[before]) / (attempts[keep] - attempts[before]), 4)
    else:
        out = values[keep]
    if not keep.any():
        return None
    return _times(attempts, keep, times_cache), tuple(out.tolist())


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=UTC)


# -- building worlds -------------------------------------------------------------------------------------------


def _world(rng: np.random.Generator, *, start: float, end: float) -> World:
    hw = HARDWARE[rng.choice(len(HARDWARE), p=[h.weight for h in HARDWARE])]
    count = round(math.exp(rng.uniform(math.log(4), math.log(48))))
    world = World(
        rng=rng,
        hw=hw,
        cluster=f"{rng.choice(['llm', 'vlm', 'moe', 'speech', 'pretrain'])}-{rng.integers(1, 99)}",
        start=start,
        end=end,
        scrape=float(rng.choice([15.0, 20.0, 30.0, 30.0, 45.0, 60.0])),
        query_mode=bool(rng.random() < 0.7),
        compute_share=float(rng.uniform(0.6, 0.85)),
        job_power=float(hw.tdp * rng.uniform(0.6, 0.93)),
        efa_bytes=float(hw.efa_line_rate * rng.uniform(0.12, 0.5)),
        ambient=float(rng.uniform(25, 33)),
        idle_clock_drops=bool(rng.random() < 0.6),
    )
    job_tensor = rng.uniform(0.3, 0.7)
    staged = rng.random() < 0.4
    ids: set[str] = set()
    for _ in range(count):
        world.nodes.append(_node(rng, world, job_tensor, staged, ids, joined=-math.inf))
    # checkpoints all along
    t = start + rng.uniform(5, 40) * MINUTE
    while t < end:
        length = rng.uniform(1, 4) * MINUTE
        world.pauses.append((t, t + length, IDLE))
        t += length + rng.uniform(20, 60) * MINUTE
    return world


def _node(
    rng: np.random.Generator, world: World, job_tensor: float, staged: bool, ids: set[str], *, joined: float
) -> Node:
    hw = world.hw
    while (node_id := "i-0" + "".join(rng.choice(list("0123456789abcdef"), 16))) in ids:
        pass
    ids.add(node_id)
    g, d = hw.gpus, len(hw.efa_devices)
    stage = rng.uniform(0.88, 1.12) if staged else 1.0
    hot = np.zeros(g)
    if rng.random() < 0.4:
        hot[rng.choice(g, size=int(rng.integers(1, 3)), replace=False)] = rng.uniform(5, 9)
    clock_bin = np.where(rng.random(g) < 0.12, rng.uniform(0.985, 0.995, g), 1.0)
    return Node(
        id=node_id,
        joined=joined,
        left=math.inf,
        tensor=job_tensor * stage * rng.uniform(0.98, 1.02, g),
        util=rng.uniform(95, 100, g),
        clock_bin=clock_bin,
        temp_offset=rng.normal(0, 1.5) + rng.normal(0, 2.0, g) + hot,
        power_share=rng.uniform(0.97, 1.03, g),
        efa_share=rng.uniform(0.92, 1.08, d),
        retrans_base=rng.uniform(0.01, 1.0, d),
    )


def _healthy_node(world: World, avoid: Sequence[str], *, original: bool = False) -> Node:
    """A node still in the cluster, not in `avoid` (and there from the start, if `original`)."""
    choices = [
        n for n in world.nodes if n.id not in avoid and n.left == math.inf and not (original and n.joined > -math.inf)
    ]
    return choices[int(world.rng.integers(len(choices)))]


def _spans(rng: np.random.Generator, start: float, end: float, duty: float) -> tuple[tuple[float, float], ...]:
    spans, t = [], start
    while t < end:
        on = rng.uniform(1, 5) * MINUTE
        spans.append((t, t + on))
        t += on + on * (1 - duty) / duty * rng.uniform(0.6, 1.4)
    return tuple(spans)


def _hang_clear(world: World, start: float, end: float) -> None:
    """No checkpoint inside a hang: the job is stuck, it cannot save."""
    world.pauses = [p for p in world.pauses if p[1] <= start or p[0] >= end]


def _fault(rng: np.random.Generator, world: World, kind: str, node: Node, start: float, end: float) -> Fault:
    """A hardware fault of `kind` on `node` over [start, end) (`end` inf: to the end)."""
    hw, gpus = world.hw, world.hw.gpus
    one_gpu = (int(rng.integers(gpus)),)
    hot = hw.throttle_temp
    match kind:
        case "thermal_gpu_strong":
            return Fault(
                "thermal",
                start,
                end,
                node.id,
                one_gpu,
                severity=rng.uniform(0.55, 0.72),
                hot_to=hot + rng.uniform(3, 10),
            )
        case "thermal_gpu_mild":
            return Fault(
                "thermal",
                start,
                end,
                node.id,
                one_gpu,
                severity=rng.uniform(0.84, 0.89),
                hot_to=hot + rng.uniform(-3, 2),
            )
        case "thermal_node_cooling":
            return Fault(
                "thermal",
                start,
                end,
                node.id,
                tuple(range(gpus)),
                per_gpu=tuple(rng.uniform(0.6, 0.85, gpus)),
                hot_to=hot + rng.uniform(3, 11),
            )
        case "thermal_intermittent":
            return Fault(
                "thermal",
                start,
                end,
                node.id,
                one_gpu,
                severity=rng.uniform(0.55, 0.8),
                hot_to=hot + rng.uniform(2, 8),
                spans=_spans(rng, start, min(end, world.end), rng.uniform(0.4, 0.7)),
            )
        case "thermal_gradual":
            return Fault(
                "thermal",
                start,
                end,
                node.id,
                one_gpu,
                severity=rng.uniform(0.6, 0.75),
                hot_to=hot + rng.uniform(2, 8),
                ramp=rng.uniform(25, 70) * MINUTE,
            )
        case "power_cap":
            return Fault("power_cap", start, end, node.id, tuple(range(gpus)), severity=rng.uniform(0.66, 0.84))
        case "network_device":
            dev = (int(rng.integers(len(hw.efa_devices))),)
            return Fault(
                "network",
                start,
                end,
                node.id,
                devices=dev,
                severity=rng.uniform(0.02, 0.4),
                retrans=rng.uniform(100, 2000),
            )
        case "network_node_mild":
            return Fault(
                "network",
                start,
                end,
                node.id,
                devices=tuple(range(len(hw.efa_devices))),
                severity=rng.uniform(0.45, 0.65),
                retrans=rng.uniform(15, 80),
            )
        case "network_node_strong":
            return Fault(
                "network",
                start,
                end,
                node.id,
                devices=tuple(range(len(hw.efa_devices))),
                severity=rng.uniform(0.1, 0.35),
                retrans=rng.uniform(150, 3000),
            )
        case "gpu_xid79":
            if rng.random() < 0.3:
                node.dcgm_gone = start + world.scrape * 1.5
            _hang_clear(world, start, end)
            return Fault("xid79", start, end, node.id, one_gpu, xid=79)
        case "gpu_dead":
            _hang_clear(world, start, end)
            return Fault("gpu_dead", start, end, node.id, one_gpu)
        case "gpu_nvlink":
            _hang_clear(world, start, end)
            return Fault("nvlink", start, end, node.id, one_gpu, xid=74)
        case "gpu_memory":
            xid_samples = 0 if rng.random() < 0.6 else int(rng.integers(1, 4))
            return Fault(
                "xid_memory", start, end, node.id, one_gpu, xid=int(rng.choice(MEMORY_XIDS)), xid_samples=xid_samples
            )
    raise ValueError(f"no such fault: {kind}")


CAUSE_OF_FAULT = {
    "thermal_gpu_strong": Cause.THERMAL,
    "thermal_gpu_mild": Cause.THERMAL,
    "thermal_node_cooling": Cause.THERMAL,
    "thermal_intermittent": Cause.THERMAL,
    "thermal_gradual": Cause.THERMAL,
    "power_cap": Cause.THERMAL,
    "network_device": Cause.NETWORK,
    "network_node_mild": Cause.NETWORK,
    "network_node_strong": Cause.NETWORK,
    "gpu_xid79": Cause.GPU,
    "gpu_dead": Cause.GPU,
    "gpu_nvlink": Cause.GPU,
    "gpu_memory": Cause.GPU_MEMORY,
}
CLUSTER_WIDE = {
    "input_strong": Cause.INPUT,
    "input_mild": Cause.INPUT,
    "cluster_network": Cause.UNKNOWN,
    "ambient_hot": Cause.UNKNOWN,
    "software": Cause.UNKNOWN,
}
CASE_SCENARIOS = (*CAUSE_OF_FAULT, "gpu_memory", *CLUSTER_WIDE)  # gpu_memory twice: five XIDs to cover


def _cluster_condition(rng: np.random.Generator, world: World, kind: str, start: float, end: float) -> None:
    """A condition of the whole cluster (input, fabric, ambient heat, software): no single node to blame."""
    match kind:
        case "input_strong" | "input_mild":
            low, high = (0.2, 0.4) if kind == "input_strong" else (0.55, 0.75)
            world.faults.append(Fault("input", start, end, severity=rng.uniform(low, high)))
        case "cluster_network":
            world.faults.append(
                Fault("cluster_network", start, end, severity=rng.uniform(0.3, 0.6), retrans=rng.uniform(20, 200))
            )
        case "ambient_hot":
            level = rng.uniform(0.88, 0.93)
            per_gpu = tuple(np.clip(level + rng.normal(0, 0.006, world.hw.gpus), 0.85, 0.96))
            world.faults.append(
                Fault(
                    "ambient",
                    start,
                    end,
                    severity=level,
                    per_gpu=per_gpu,
                    hot_to=rng.uniform(8, 14),
                    ramp=rng.uniform(2, 10) * MINUTE,
                )
            )
        case "software":
            world.faults.append(Fault("software", start, end, severity=rng.uniform(0.55, 0.8)))
            node = _healthy_node(world, ())
            world.faults.append(
                Fault(
                    "xid_app",
                    start + rng.uniform(0, 5) * MINUTE,
                    math.inf,
                    node.id,
                    (int(rng.integers(world.hw.gpus)),),
                    xid=int(rng.choice(APP_XIDS)),
                )
            )
        case _:
            raise ValueError(f"no such condition: {kind}")


def _replace(rng: np.random.Generator, world: World, node: Node, at: float, ids: set[str]) -> Node:
    """The node leaves at `at`; the job restarts for 6-15 minutes; a new node joins cold and warms up."""
    node.left = at
    restart = rng.uniform(6, 15) * MINUTE
    world.pauses.append((at, at + restart, IDLE))
    world.restarts.append((at + restart, rng.uniform(2, 5) * MINUTE))
    template = world.nodes[0]
    newcomer = _node(rng, world, float(np.median(template.tensor)), False, ids, joined=at + rng.uniform(2, 6) * MINUTE)
    world.nodes.append(newcomer)
    return newcomer


def _decoys(
    rng: np.random.Generator, world: World, *, spans: Sequence[tuple[float, float]], avoid: Sequence[str], ids: set[str]
) -> None:
    """Scatter decoys in `spans` (where they may fall), never on the nodes in `avoid` (the culprits)."""

    def when(length: float) -> float | None:
        room = [(a, b) for a, b in spans if b - a > length + MINUTE]
        if not room:
            return None
        a, b = room[int(rng.integers(len(room)))]
        return float(rng.uniform(a, b - length))

    if rng.random() < 0.35 and (at := when(10 * MINUTE)) is not None:
        world.pauses.append((at, at + rng.uniform(5, 10) * MINUTE, EVAL))
    for _ in range(int(rng.integers(0, 3))):
        length = rng.uniform(2, 10) * MINUTE
        if (at := when(length)) is not None:
            node = _healthy_node(world, avoid)
            which = rng.choice(["dcgm", "efa", "both"])
            if which in ("dcgm", "both"):
                node.dcgm_gaps.append((at, at + length))
            if which in ("efa", "both"):
                node.efa_gaps.append((at, at + length))
    for _ in range(int(rng.integers(0, 3))):
        length = rng.uniform(1, 3) * MINUTE
        if (at := when(length)) is not None:
            node = _healthy_node(world, avoid)
            world.faults.append(
                Fault(
                    "retrans_burst",
                    at,
                    at + length,
                    node.id,
                    devices=(int(rng.integers(len(world.hw.efa_devices))),),
                    retrans=rng.uniform(30, 300),
                )
            )
    if rng.random() < 0.25 and (at := when(3 * MINUTE)) is not None:
        node = _healthy_node(world, avoid)
        stays = rng.random() < 0.6
        world.faults.append(
            Fault(
                "xid_app",
                at,
                math.inf,
                node.id,
                (int(rng.integers(world.hw.gpus)),),
                xid=int(rng.choice(APP_XIDS)),
                xid_samples=0 if stays else 2,
            )
        )
    if rng.random() < 0.3 and (at := when(2 * MINUTE)) is not None:  # a throttle too short to be a fault
        node = _healthy_node(world, avoid)
        world.faults.append(
            Fault(
                "thermal",
                at,
                at + rng.uniform(0.5, 2) * MINUTE,
                node.id,
                (int(rng.integers(world.hw.gpus)),),
                severity=rng.uniform(0.6, 0.85),
                hot_to=world.hw.throttle_temp + 2,
            )
        )
    if rng.random() < 0.2 and len(world.nodes) > 3 and (at := when(25 * MINUTE)) is not None:
        _replace(rng, world, _healthy_node(world, avoid), at, ids)


def _case(index: int, kind: str, rng: np.random.Generator) -> HeldoutCase:
    episode_start = 1_795_000_000.0 + float(rng.integers(0, 30 * 86400))
    episode_end = episode_start + rng.uniform(10, 45) * MINUTE
    healthy_start = episode_start - HEALTHY_BEFORE.total_seconds()
    metrics_start = healthy_start - rng.uniform(0, 5) * MINUTE
    world = _world(rng, start=metrics_start - 10 * MINUTE, end=episode_end)
    ids = {n.id for n in world.nodes}
    gradual = kind == "thermal_gradual"
    onset = episode_start - (rng.uniform(20, 60) if gradual else rng.uniform(0, 3)) * MINUTE
    culprit: Node | None = None
    if kind in CAUSE_OF_FAULT:
        culprit = world.nodes[int(rng.integers(len(world.nodes)))]
        world.faults.append(_fault(rng, world, kind, culprit, onset, math.inf))
        if kind == "gpu_memory":  # restarts and remaps cost the job a little, every node alike
            world.faults.append(Fault("software", onset, math.inf, severity=rng.uniform(0.75, 0.92)))
        if rng.random() < 0.1 and kind not in (
            "gpu_xid79",
            "gpu_dead",
            "gpu_nvlink",
        ):  # the culprit's exporter misses a few minutes too
            at = rng.uniform(episode_start, episode_end - 5 * MINUTE) if episode_end - episode_start > 6 * MINUTE else 0
            if at:
                gap = (at, at + rng.uniform(3, 5) * MINUTE)
                (culprit.efa_gaps if kind.startswith("network") else culprit.dcgm_gaps).append(gap)
    else:
        _cluster_condition(rng, world, kind, onset, math.inf)
    # decoys: anywhere in the healthy window, in at most a quarter of the episode window
    episode = episode_end - episode_start
    late = (episode_start + 0.1 * episode, episode_start + 0.35 * episode)
    hang = kind in ("gpu_xid79", "gpu_dead", "gpu_nvlink")
    spans = [(healthy_start, onset - 5 * MINUTE)] + ([] if hang or late[1] - late[0] < 3 * MINUTE else [late])
    _decoys(rng, world, spans=spans, avoid=(culprit.id,) if culprit else (), ids=ids)
    if rng.random() < 0.15 and kind not in CLUSTER_WIDE:  # ambient heat in the healthy window, mild
        at = rng.uniform(healthy_start, max(healthy_start + 1, onset - 25 * MINUTE))
        world.faults.append(
            Fault("ambient", at, at + 20 * MINUTE, severity=1.0, hot_to=rng.uniform(4, 8), ramp=5 * MINUTE)
        )
    # a checkpoint within the last minutes of a hang makes no sense, nor one in the episode of a short case
    if hang:
        _hang_clear(world, onset, math.inf)
    return HeldoutCase(
        name=f"{index:03d}-{kind}",
        metrics=world.render(metrics_start, episode_end),
        healthy_start=_dt(healthy_start),
        episode_start=_dt(episode_start),
        episode_end=_dt(episode_end),
        cause=CAUSE_OF_FAULT.get(kind) or CLUSTER_WIDE[kind],
        suspect=culprit.id if culprit else None,
    )


def heldout_cases(seed: int = 0, n: int = 100) -> list[HeldoutCase]:
    """`n` episodes, every scenario of the table in turn (shuffled), each with its own random cluster."""
    order = np.random.default_rng([seed, 0]).permutation(len(CASE_SCENARIOS))
    return [_case(i, CASE_SCENARIOS[order[i % len(order)]], np.random.default_rng([seed, 1, i])) for i in range(n)]


TIMELINE_FAULTS = (
    "thermal_gpu_strong",
    "thermal_gpu_mild",
    "thermal_intermittent",
    "power_cap",
    "network_device",
    "network_node_mild",
    "network_node_strong",
    "gpu_memory",
    "gpu_xid79",
)


def _timeline(index: int, rng: np.random.Generator) -> HeldoutTimeline:
    start = 1_795_000_000.0 + float(rng.integers(0, 30 * 86400))
    end = start + rng.uniform(2, 3.5) * 3600
    world = _world(rng, start=start - 10 * MINUTE, end=end)
    ids = {n.id for n in world.nodes}
    faulty: list[tuple[str, Cause, datetime, datetime | None]] = []
    busy: list[tuple[float, float]] = []  # hangs and their replacements: one at a time
    used: set[str] = set()
    for _ in range(int(rng.choice([0, 1, 1, 2, 2, 3]))):
        kind = TIMELINE_FAULTS[int(rng.integers(len(TIMELINE_FAULTS)))]
        node = _healthy_node(world, tuple(used), original=True)
        begin = start + rng.uniform(15, 0.8 * (end - start) / MINUTE) * MINUTE
        length = rng.uniform(20, 120) * MINUTE
        stop = begin + length if rng.random() < 0.6 else math.inf
        if kind == "gpu_xid79":
            hang_end = begin + rng.uniform(10, 30) * MINUTE
            if any(a < hang_end + 20 * MINUTE and begin < b for a, b in busy):
                continue
            busy.append((begin, hang_end + 20 * MINUTE))
            world.faults.append(_fault(rng, world, kind, node, begin, hang_end))
            if hang_end < end:
                _replace(rng, world, node, hang_end, ids)
            stop = hang_end
        else:
            fault = _fault(rng, world, kind, node, begin, stop)
            fault.xid_samples = 0  # a timeline's memory XID stays: the node diverges until it is rebooted
            world.faults.append(fault)
            if kind == "gpu_memory" and stop < end:  # the XID stays until the node is rebooted: it leaves
                node.left = stop
        used.add(node.id)
        faulty.append((node.id, CAUSE_OF_FAULT[kind], _dt(begin), _dt(stop) if stop < end else None))
    # cluster-wide conditions (never a faulty node)
    for kind in ("input_mild", "input_strong", "cluster_network", "ambient_hot", "software"):
        if rng.random() < 0.15:
            at = start + rng.uniform(0, (end - start) / MINUTE - 30) * MINUTE
            _cluster_condition(rng, world, kind, at, at + rng.uniform(10, 40) * MINUTE)
    free = [(start, end)]
    for _ in range(int(rng.integers(1, 4))):
        _decoys(rng, world, spans=free, avoid=tuple(used), ids=ids)
    return HeldoutTimeline(
        name=f"{index:03d}-timeline-{len(faulty)}", metrics=world.render(start, end), faulty=tuple(faulty)
    )


def heldout_timelines(seed: int = 0, n: int = 30) -> list[HeldoutTimeline]:
    """`n` clusters over 2-3.5 hours each, with 0-3 true faulty nodes among decoys."""
    return [_timeline(i, np.random.default_rng([seed, 2, i])) for i in range(n)]


def _summary(make: Callable[[], list[HeldoutCase]]) -> None:
    began = time.perf_counter()
    cases = make()
    took = time.perf_counter() - began
    values = sum(len(s.values) for c in cases for s in c.metrics.series)
    print(f"{len(cases)} cases in {took:.1f} s, {values / 1e6:.1f} M values")


if __name__ == "__main__":
    _summary(heldout_cases)
