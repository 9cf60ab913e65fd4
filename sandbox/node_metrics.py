"""Simulated per-node metrics of a training cluster: what the DCGM exporter and the EFA node exporter would
report for each node, GPU and EFA device, with faults injected on request (the sandbox's buttons, the tests,
`bench/culprit.py`).

The model is one synchronous data-parallel job on every node of the cluster:

- **Healthy, training**: every GPU near its boost clock (H100: 1,980 MHz, a few MHz below for some GPUs),
  55-75 °C, 520-680 W, utilization ~97 %, tensor activity at the job's level (0.3-0.7); every EFA device
  busy at the same rate in both directions, retransmits near 0. Each GPU has its own small, lasting
  offsets (some run a few degrees hotter, a few MHz slower: `gpu_spread` scales them) and every sample
  its own noise (`noise` scales it).
- **Faults** (`Injected`) change the faulty node *and its peers*, as synchronous training does:
  - `thermal`: the throttled GPU (or every GPU of the node when `gpu` is None) runs at
    `1 - 0.4 x severity` of its clock, at 83-92 °C; the job runs at that pace, so every other GPU's tensor
    activity drops by as much (they wait), while the straggler's own stays high;
  - `network`: the node's EFA traffic (or one device's: `device`) falls to `1 - 0.8 x severity` of its
    peers', retransmits rise to 30-330/s per device; the job slows to `1 - 0.4 x severity`, every node's
    tensor activity and traffic with it;
  - `input` (`node` None): every node waits for data alike: utilization, tensor activity, power and EFA
    traffic all fall to `1 - 0.6 x severity`;
  - `gpu`: XID 79 (the default: the GPU reports it for a minute, then its series vanish, fallen off the
    bus; with `dcgm_lost` the node's whole DCGM exporter goes with it), XID 74 (NVLink: the GPU stays,
    idle) or `xid=0` (a GPU dead without an XID: zero utilization, idle power); the job hangs: every
    other GPU spins in NCCL at 100 % utilization with no tensor activity and no EFA traffic;
  - `gpu_memory`: XID 48 (the default), 63, 64, 94 or 95 on the GPU (for `xid_seconds` only, if given: the
    gauge may show it for a scrape or two); the job goes on.
- **Decoys** (options, all normal life that must blame nobody): checkpoints and evaluations
  (`checkpoint_every`/`checkpoint_seconds`, `evaluation_every`/`evaluation_seconds`: every node idles
  together, each a few seconds early or late: `pause_jitter`), exporter gaps (`gaps`: a node's DCGM or EFA
  series, or both, missing for a while), node replacement (`replacements`: the old node's series end, the
  job is down while the new one boots, then the new node reports), spare nodes (`spares`: in the cluster,
  idle, not in the job) and the per-GPU spread above.

**Trainium** (`hardware=TRN1`): the same job on Trn1 nodes, as the Neuron monitor's Prometheus frontend reports
it: each NeuronCore's utilization (`gpus_per_node` is then the node's NeuronCores, 32: 16 devices of 2), each
Trainium device's ECC events (a few corrected ones now and then on some healthy devices), the node's hardware
execution errors, completed executions and execution latency, and its hardware info (16 devices, 2 cores each,
the instance type); no temperature, clock or power. While no Neuron process runs on a node (a spare, the job down
while a node boots) its Neuron series vanish but for the hardware info. Its faults (`Injected.neuron`):
  - `gpu`: `stuck_core` (NeuronCore `gpu` at zero while its siblings work; the job slows), `device_missing`
    (Trainium device `gpu` gone: the hardware info counts 15, its cores report nothing; the job slows) or
    `hardware_errors` (hardware execution errors, a retry each; the job slows a little);
  - `gpu_memory`: `ecc_uncorrected` (uncorrected HBM ECC events, or SRAM with `sram`, on device `gpu`, for
    `xid_seconds` if given) or `ecc_corrected` (corrected ones on device `gpu`, rising to 3-60 a minute over
    the fault's first 5 minutes); the job goes on, a little slower;
  - `network` and `input` as on GPUs; `thermal` is refused (Trn1 reports no temperature or clock).

Times are Unix seconds. `values_at(ts)` gives one scrape (rates for the counters), for the sandbox's live
exporter; `series(start=, end=, step=)` gives a window as `ClusterMetrics`, for backfill, tests and the bench.
The same seed gives the same cluster (per-GPU offsets are drawn per node name) and the same series."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Literal

import numpy as np

from bot.node_metrics.series import Cause, ClusterMetrics, Series, Signal

GPU_XIDS = (79, 74)  # fallen off the bus, NVLink error
MEMORY_XIDS = (48, 63, 64, 94, 95)  # double-bit ECC, row remapping, contained/uncontained ECC
XID_GONE_AFTER = 60.0  # seconds an XID-79 GPU still reports before its series vanish
GPU_SIGNALS = (Signal.TENSOR_ACTIVE, Signal.GPU_UTIL, Signal.SM_CLOCK, Signal.GPU_TEMP, Signal.POWER, Signal.XID)
EFA_SIGNALS = (Signal.EFA_RX, Signal.EFA_TX, Signal.EFA_RETRANS)
NEURON_FAULTS = {
    Cause.GPU: ("stuck_core", "device_missing", "hardware_errors"),
    Cause.GPU_MEMORY: ("ecc_uncorrected", "ecc_corrected"),
}
ECC_RAMP = 300.0  # seconds a rising corrected-ECC rate takes to reach its level


@dataclass(frozen=True)
class Injected:
    """A fault: on `node` (None for `input`: every node), from `start` to `end` (Unix seconds; None: until
    cleared), on GPU `gpu` (thermal: None throttles the whole node; gpu/gpu_memory: None means GPU 0),
    `severity` from 0 (nothing) to 1 (strong), `xid` the code for gpu/gpu_memory faults (None: 79 / 48).

    Beyond the contract, all optional: `device` (network: the index of the one EFA device that degrades,
    None: every device of the node), `duty` (the share of the time the fault is on, in bursts of 1-10
    minutes: an intermittent fault), `dcgm_lost` (gpu, XID 79: the driver falls over and takes the node's
    whole DCGM exporter with it, so the XID shows for one scrape and then the node reports no GPU at all),
    `xid_seconds` (how long the XID gauge shows the code from `start`; None: while the fault lasts)."""

    cause: Cause
    node: str | None
    start: float
    end: float | None
    gpu: int | None = None
    severity: float = 1.0
    xid: int | None = None
    device: int | None = None
    duty: float = 1.0
    dcgm_lost: bool = False
    xid_seconds: float | None = None
    neuron: str | None = None  # Trainium: the fault's shape (NEURON_FAULTS); None: the cause's first
    sram: bool = False  # Trainium ECC: in the device's SRAM rather than its HBM

    def active(self, times: np.ndarray) -> np.ndarray:
        end = np.inf if self.end is None else self.end
        on = (times >= self.start) & (times < end)
        if self.duty < 1.0:
            period = 120.0 + zlib.crc32(repr(self).encode()) % 480  # bursts of duty x 2-10 minutes
            on &= np.mod(times - self.start, period) < max(self.duty, 0.0) * period
        return on

    def xid_showing(self, times: np.ndarray) -> np.ndarray:
        if self.xid_seconds is None:
            return np.ones(times.shape, dtype=bool)
        return times < self.start + self.xid_seconds


@dataclass(frozen=True)
class Gap:
    """An exporter restart or outage: `node`'s series of `exporter` missing over [start, end)."""

    node: str
    start: float
    end: float
    exporter: Literal["dcgm", "efa", "both"] = "both"


@dataclass(frozen=True)
class Replacement:
    """`old` leaves the cluster at `at`; the job is down until `new` has booted (`boot_seconds`), then runs on it."""

    old: str
    new: str
    at: float
    boot_seconds: float = 480.0


@dataclass(frozen=True)
class Hardware:
    """The magnitudes of one instance type under a training load (defaults: P5, H100 SXM, 100 Gb/s EFA)."""

    boost_mhz: float = 1980.0
    idle_mhz: float = 345.0
    load_temp_c: tuple[float, float] = (55.0, 75.0)  # per GPU, drawn once
    idle_temp_c: float = 33.0
    load_power_w: tuple[float, float] = (520.0, 680.0)  # per GPU, drawn once
    idle_power_w: float = 72.0
    util_percent: float = 97.0
    tensor_active: tuple[float, float] = (0.3, 0.7)  # the job's level, drawn once per cluster
    efa_bytes_per_s: float = 9.0e9  # per device and direction while training (line rate 12.5 GB/s)
    retrans_per_s: float = 0.4  # per device, healthy
    trainium: bool = False  # NeuronCores and the Neuron monitor's series instead of GPUs and DCGM's
    instance_type: str = "p5.48xlarge"
    cores_per_device: int = 2  # Trainium: NeuronCores per device (gpus_per_node / this = devices)
    executions_per_s: float = 4.0  # Trainium: completed executions per second per node while training
    latency_s: float = 0.25  # Trainium: an execution's median latency


P5 = Hardware()
TRN1 = Hardware(
    util_percent=82.0,
    tensor_active=(0.3, 0.7),
    efa_bytes_per_s=6.0e9,
    retrans_per_s=0.3,
    trainium=True,
    instance_type="trn1.32xlarge",
)
TRN1_EFA = tuple(f"rdmap{16 * (k // 4 + 1)}s{k % 4}" for k in range(8))  # trn1.32xlarge: 8 EFA devices


class NodeMetricsSimulator:
    """One cluster's per-node DCGM and EFA series (see the module docstring for the model)."""

    def __init__(
        self,
        *,
        cluster: str,
        nodes: Sequence[str],
        gpus_per_node: int = 8,
        efa_devices: Sequence[str] = ("rdmap0s31", "rdmap0s32", "rdmap0s33", "rdmap0s34"),
        seed: int = 0,
        hardware: Hardware = P5,
        gpu_spread: float = 1.0,
        noise: float = 1.0,
        checkpoint_every: float | None = None,
        checkpoint_seconds: float = 120.0,
        evaluation_every: float | None = None,
        evaluation_seconds: float = 420.0,
        pause_jitter: float = 5.0,
        gaps: Sequence[Gap] = (),
        replacements: Sequence[Replacement] = (),
        spares: Sequence[str] = (),
    ) -> None:
        if not nodes:
            raise ValueError("a cluster needs at least one node")
        if gpus_per_node < 1:
            raise ValueError("gpus_per_node must be at least 1")
        self.cluster = cluster
        self.initial_nodes = tuple(nodes)
        self.gpus_per_node = gpus_per_node
        self.efa_devices = tuple(efa_devices)
        self.seed = seed
        self.hardware = hardware
        self.gpu_spread = gpu_spread
        self.noise = noise
        self.checkpoint_every = checkpoint_every
        self.checkpoint_seconds = checkpoint_seconds
        self.evaluation_every = evaluation_every
        self.evaluation_seconds = evaluation_seconds
        self.pause_jitter = pause_jitter
        self.gaps = list(gaps)
        self.replacements = list(replacements)
        self.spares = frozenset(spares)
        self.faults: list[Injected] = []
        rng = np.random.default_rng([seed, 0])
        low, high = hardware.tensor_active
        self.tensor_level = float(rng.uniform(low, high))
        self._pause_phase = float(rng.uniform(0, 3600))

    # -- faults ---------------------------------------------------------------------------------------------

    def inject(self, fault: Injected) -> None:
        if fault.cause is Cause.INPUT:
            if fault.node is not None:
                raise ValueError("an input fault is on every node: give node=None")
        elif fault.node not in self.all_nodes:
            raise ValueError(f"{fault.node!r} is not a node of {self.cluster} ({', '.join(self.all_nodes)})")
        if fault.cause is Cause.UNKNOWN:
            raise ValueError("inject one of gpu, gpu_memory, thermal, network, input")
        if self.hardware.trainium:
            if fault.cause is Cause.THERMAL:
                raise ValueError("Trn1 reports no temperature, clock or power: no thermal fault on Trainium")
            shapes = NEURON_FAULTS.get(fault.cause, ())
            if shapes and fault.neuron is None:
                fault = replace(fault, neuron=shapes[0])
            elif fault.neuron is not None and fault.neuron not in shapes:
                raise ValueError(f"a Trainium {fault.cause.value} fault is one of {', '.join(shapes)}")
        self.faults.append(fault)

    def clear(self, *, at: float) -> None:
        """End every fault still open at `at`."""
        self.faults = [
            replace(fault, end=at) if fault.end is None or fault.end > at else fault
            for fault in self.faults
            if fault.start < at
        ]

    @property
    def all_nodes(self) -> tuple[str, ...]:
        return self.initial_nodes + tuple(r.new for r in self.replacements if r.new not in self.initial_nodes)

    # -- output ---------------------------------------------------------------------------------------------

    def values_at(self, ts: float) -> list[tuple[Signal, str, str, float]]:
        """One scrape at `ts`: (signal, node, device, value), rates for the EFA counters."""
        frame = self._frame(np.array([float(ts)]))
        out: list[tuple[Signal, str, str, float]] = []
        for (signal, node, device), (present, values) in frame.items():
            if present[0]:
                out.append((signal, node, device, float(values[0])))
        return out

    def series(self, *, start: float, end: float, step: float = 30.0) -> ClusterMetrics:
        """The cluster over [start, end] at `step` seconds, as the Prometheus reader would return it."""
        if end < start or step <= 0:
            raise ValueError("series needs start <= end and a positive step")
        times = start + step * np.arange(int(np.floor((end - start) / step + 1e-9)) + 1)
        frame = self._frame(times)
        out: list[Series] = []
        for (signal, node, device), (present, values) in frame.items():
            if present.any():
                out.append(
                    Series(
                        signal=signal,
                        node=node,
                        device=device,
                        times=tuple(times[present].tolist()),
                        values=tuple(values[present].tolist()),
                    )
                )
        return ClusterMetrics(
            cluster=self.cluster,
            start=datetime.fromtimestamp(start, UTC),
            end=datetime.fromtimestamp(end, UTC),
            step_seconds=step,
            series=tuple(out),
        )

    # -- the model ------------------------------------------------------------------------------------------

    def _static(self, node: str) -> dict[str, np.ndarray]:
        """A node's lasting per-GPU and per-device offsets (the healthy spread), the same for the same seed."""
        hw, spread = self.hardware, self.gpu_spread
        rng = np.random.default_rng([self.seed, zlib.crc32(node.encode())])
        g, d = self.gpus_per_node, len(self.efa_devices)
        temp_mid, temp_half = np.mean(hw.load_temp_c), (hw.load_temp_c[1] - hw.load_temp_c[0]) / 2
        power_mid, power_half = np.mean(hw.load_power_w), (hw.load_power_w[1] - hw.load_power_w[0]) / 2
        return {
            "temp": temp_mid + np.clip(rng.normal(0, temp_half / 2, g) * spread, -temp_half, temp_half),
            "power": power_mid + np.clip(rng.normal(0, power_half / 2, g) * spread, -power_half, power_half),
            "clock": -np.abs(rng.normal(0, 0.006 * hw.boost_mhz, g)) * spread,
            "tensor": np.clip(rng.normal(0, 0.02, g) * spread, -0.06, 0.06),
            "efa": 1 + np.clip(rng.normal(0, 0.03, (d,)) * spread, -0.08, 0.08),
            "jitter": rng.uniform(-1, 1) * np.ones(1),
            # Trainium: a few healthy devices count a corrected ECC event now and then (0.7-7 an hour).
            "ecc": np.where(rng.random(max(g // hw.cores_per_device, 1)) < 0.1, rng.uniform(2e-4, 2e-3), 0.0),
        }

    def _paused(self, times: np.ndarray, every: float | None, seconds: float, phase: float) -> np.ndarray:
        if not every:
            return np.zeros_like(times, dtype=bool)
        return np.mod(times - self._pause_phase - phase, every) < seconds

    def _frame(self, times: np.ndarray) -> dict[tuple[Signal, str, str], tuple[np.ndarray, np.ndarray]]:
        hw = self.hardware
        nodes = self.all_nodes
        n, g, d, t = len(nodes), self.gpus_per_node, len(self.efa_devices), len(times)
        index = {node: i for i, node in enumerate(nodes)}
        static = [self._static(node) for node in nodes]
        temp0 = np.stack([s["temp"] for s in static])[None]  # (1, N, G)
        power0 = np.stack([s["power"] for s in static])[None]
        clock0 = hw.boost_mhz + np.stack([s["clock"] for s in static])[None]
        tensor0 = np.clip(self.tensor_level + np.stack([s["tensor"] for s in static])[None], 0.05, 0.95)
        efa0 = hw.efa_bytes_per_s * np.stack([s["efa"] for s in static])[None]  # (1, N, D)

        # Who is in the cluster, and when the job is down while a node boots.
        present = np.ones((t, n), dtype=bool)
        for r in self.replacements:
            if r.old in index:
                present[:, index[r.old]] &= times < r.at
            present[:, index[r.new]] &= times >= r.at + r.boot_seconds
        job_down = np.zeros(t, dtype=bool)
        for r in self.replacements:
            job_down |= (times >= r.at) & (times < r.at + r.boot_seconds)

        # Pauses: every node idles together, each a few seconds early or late.
        jitter = np.array([s["jitter"][0] for s in static]) * self.pause_jitter  # (N,)
        shifted = times[:, None] - jitter[None, :]
        checkpoint = self._paused(shifted, self.checkpoint_every, self.checkpoint_seconds, 0.0) | job_down[:, None]
        checkpoint |= np.array([node in self.spares for node in nodes])[None, :]  # spares idle throughout
        evaluation = self._paused(shifted, self.evaluation_every, self.evaluation_seconds, 1234.0) & ~checkpoint

        # What the faults do to the job's pace, and to their own node.
        pace = np.ones(t)  # the job's speed, 1 = healthy (stragglers and slow links)
        feed = np.ones(t)  # the data loader's, 1 = healthy (input)
        hang = np.zeros(t, dtype=bool)
        straggler = np.zeros((t, n, g), dtype=bool)
        clock_factor = np.ones((t, n, g))
        hot = np.zeros((t, n, g))
        dead = np.zeros((t, n, g), dtype=bool)
        gone = np.zeros((t, n, g), dtype=bool)
        xid = np.zeros((t, n, g))
        efa_factor = np.ones((t, n, d))
        retrans_extra = np.zeros((t, n, d))
        dcgm_lost = np.zeros((t, n), dtype=bool)
        trainium = hw.trainium
        chips = max(g // hw.cores_per_device, 1)  # Trainium devices
        lost = np.zeros((t, n, chips), dtype=bool)  # Trainium devices gone
        hardware_errors = np.zeros((t, n))
        # Trainium ECC events/s per device: [corrected, uncorrected] x [HBM, SRAM]
        ecc_events = np.zeros((2, 2, t, n, chips))
        for fault in self.faults:
            on = fault.active(times)
            s = float(np.clip(fault.severity, 0.0, 1.0))
            if fault.cause is Cause.INPUT:
                feed = np.where(on, np.minimum(feed, 1 - 0.6 * s), feed)
                continue
            if fault.node not in index:
                continue
            i = index[fault.node]
            on = on & present[:, i]
            gpus = slice(None) if fault.gpu is None else slice(fault.gpu, fault.gpu + 1)
            if trainium and fault.cause in NEURON_FAULTS:
                unit = fault.gpu or 0
                if fault.neuron == "stuck_core":
                    pace = np.where(on, np.minimum(pace, 1 - 0.4 * s), pace)
                    dead[on, i, unit] = True
                elif fault.neuron == "device_missing":
                    pace = np.where(on, np.minimum(pace, 1 - 0.4 * s), pace)
                    lost[on, i, unit % chips] = True
                elif fault.neuron == "hardware_errors":
                    pace = np.where(on, np.minimum(pace, 1 - 0.25 * s), pace)
                    hardware_errors[on, i] += 0.02 + 0.3 * s
                elif fault.neuron == "ecc_uncorrected":
                    ecc_events[1, int(fault.sram), on & fault.xid_showing(times), i, unit % chips] += 0.02
                elif fault.neuron == "ecc_corrected":
                    ramp = np.clip((times - fault.start) / ECC_RAMP, 0.0, 1.0)
                    ecc_events[0, int(fault.sram), on, i, unit % chips] += ((0.05 + 0.95 * s) * ramp)[on]
                continue
            if fault.cause is Cause.THERMAL:
                ratio = 1 - 0.4 * s
                pace = np.where(on, np.minimum(pace, ratio), pace)
                straggler[on, i, gpus] = True
                clock_factor[on, i, gpus] = np.minimum(clock_factor[on, i, gpus], ratio)
                hot[on, i, gpus] = np.maximum(hot[on, i, gpus], 83 + 9 * s)
            elif fault.cause is Cause.NETWORK:
                pace = np.where(on, np.minimum(pace, 1 - 0.4 * s), pace)
                devices = slice(None) if fault.device is None else slice(fault.device, fault.device + 1)
                efa_factor[on, i, devices] *= 1 - 0.8 * s
                retrans_extra[on, i, devices] += 30 + 300 * s
            elif fault.cause is Cause.GPU:
                gpu = fault.gpu or 0
                code = 79 if fault.xid is None else fault.xid
                hang |= on
                dead[on, i, gpu] = True
                xid[on & fault.xid_showing(times), i, gpu] = code
                if code == 79:
                    gone[on & (times >= fault.start + XID_GONE_AFTER), i, gpu] = True
                    if fault.dcgm_lost:
                        dcgm_lost[on & (times >= fault.start + XID_GONE_AFTER), i] = True
            elif fault.cause is Cause.GPU_MEMORY:
                xid[on & fault.xid_showing(times), i, fault.gpu or 0] = 48 if fault.xid is None else fault.xid

        rng = np.random.default_rng([self.seed, int(times[0] * 1000) % (1 << 62), t])
        shape = (t, n, g)

        def noisy(scale: float, size: tuple[int, ...] = shape) -> np.ndarray:
            return rng.normal(0.0, scale * self.noise, size)

        pace3, feed3 = pace[:, None, None], feed[:, None, None]
        # Busy GPUs: the straggler works flat out at its low clock; the others wait for it (tensor activity
        # down, utilization not: NCCL kernels count as busy); a starved loader idles everyone alike.
        tensor = np.where(straggler, tensor0, tensor0 * pace3) * feed3
        util = np.broadcast_to(hw.util_percent * feed3, shape).copy()
        load = np.where(straggler, 1.0, 0.55 + 0.45 * pace3) * (0.25 + 0.75 * feed3)
        clock = clock0 * clock_factor
        power = hw.idle_power_w + (power0 - hw.idle_power_w) * load * np.where(straggler, clock_factor, 1.0)
        efa = efa0 * pace[:, None, None] * feed3 * efa_factor
        retrans = hw.retrans_per_s + retrans_extra * (1 + noisy(0.15, (t, n, d)))

        hang3 = hang[:, None, None]
        tensor = np.where(hang3, 0.01, tensor)
        util = np.where(hang3, 100.0, util)
        power = np.where(hang3, hw.idle_power_w + 0.3 * (power0 - hw.idle_power_w), power)
        efa = np.where(hang3, efa * 0.01, efa)

        ckpt, evl = checkpoint[:, :, None], evaluation[:, :, None]
        tensor = np.where(ckpt, 0.0, np.where(evl, tensor * 0.5, tensor))
        util = np.where(ckpt, 2.0, np.where(evl, util * 0.9, util))
        power = np.where(ckpt, hw.idle_power_w + 20, np.where(evl, power * 0.8, power))
        clock = np.where(ckpt, hw.idle_mhz, clock)
        efa = np.where(ckpt, efa * 0.02, np.where(evl, efa * 0.1, efa))

        tensor = np.where(dead, 0.0, tensor)
        util = np.where(dead, 0.0, util)
        power = np.where(dead, hw.idle_power_w * 0.8, power)
        clock = np.where(dead, hw.idle_mhz, clock)

        busy = (power - hw.idle_power_w) / np.maximum(power0 - hw.idle_power_w, 1.0)
        temp = hw.idle_temp_c + (temp0 - hw.idle_temp_c) * np.clip(busy, 0, 1.2)
        temp = np.maximum(temp, hot)

        tensor = np.round(np.clip(tensor + noisy(0.015) * (tensor > 0), 0.0, 1.0), 3)
        util = np.clip(np.round(util + noisy(1.0) * (util > 1)), 0, 100)
        clock = np.round(np.minimum(clock + noisy(0.004 * hw.boost_mhz), hw.boost_mhz) / 15) * 15
        temp = np.round(temp + noisy(0.7))
        power = np.round(np.maximum(power + noisy(12.0), 0.0), 1)
        rx = np.round(np.maximum(efa * (1 + noisy(0.03, (t, n, d))), 0.0))
        tx = np.round(np.maximum(efa * (1 + noisy(0.03, (t, n, d))), 0.0))
        retrans = np.round(np.maximum(retrans + noisy(0.3, (t, n, d)), 0.0), 2)

        dcgm_up = present & ~dcgm_lost
        efa_up = present.copy()
        for gap in self.gaps:
            if gap.node not in index:
                continue
            missing = (times >= gap.start) & (times < gap.end)
            if gap.exporter in ("dcgm", "both"):
                dcgm_up[missing, index[gap.node]] = False
            if gap.exporter in ("efa", "both"):
                efa_up[missing, index[gap.node]] = False

        frame: dict[tuple[Signal, str, str], tuple[np.ndarray, np.ndarray]] = {}
        if trainium:
            self._neuron_frame(
                frame,
                times=times,
                nodes=nodes,
                present=present,
                neuron_up=dcgm_up,
                runs=~(job_down[:, None] | np.array([node in self.spares for node in nodes])[None, :]),
                util=util,
                pace=pace * feed,
                working=~checkpoint & ~hang[:, None],
                missing=lost,
                hardware_errors=hardware_errors,
                ecc_events=ecc_events,
                static=static,
            )
            for i, node in enumerate(nodes):
                for k, device in enumerate(self.efa_devices):
                    for signal, values in {Signal.EFA_RX: rx, Signal.EFA_TX: tx, Signal.EFA_RETRANS: retrans}.items():
                        frame[(signal, node, device)] = (efa_up[:, i], values[:, i, k])
            return frame
        gpu_values = {
            Signal.TENSOR_ACTIVE: tensor,
            Signal.GPU_UTIL: util,
            Signal.SM_CLOCK: clock,
            Signal.GPU_TEMP: temp,
            Signal.POWER: power,
            Signal.XID: xid,
        }
        efa_values = {Signal.EFA_RX: rx, Signal.EFA_TX: tx, Signal.EFA_RETRANS: retrans}
        for i, node in enumerate(nodes):
            for k in range(g):
                up = dcgm_up[:, i] & ~gone[:, i, k]
                for signal, values in gpu_values.items():
                    frame[(signal, node, str(k))] = (up, values[:, i, k])
            for k, device in enumerate(self.efa_devices):
                for signal, values in efa_values.items():
                    frame[(signal, node, device)] = (efa_up[:, i], values[:, i, k])
        return frame

    def _neuron_frame(
        self,
        frame: dict[tuple[Signal, str, str], tuple[np.ndarray, np.ndarray]],
        *,
        times: np.ndarray,
        nodes: tuple[str, ...],
        present: np.ndarray,
        neuron_up: np.ndarray,
        runs: np.ndarray,
        util: np.ndarray,
        pace: np.ndarray,
        working: np.ndarray,
        missing: np.ndarray,
        hardware_errors: np.ndarray,
        ecc_events: np.ndarray,
        static: list[dict[str, np.ndarray]],
    ) -> None:
        """A Trainium cluster's Neuron monitor series into `frame`: `neuron_up` (steps, nodes) where its exporter
        answers, `runs` where a Neuron process runs on the node (else only the hardware info reports)."""
        hw = self.hardware
        t, n = len(times), len(nodes)
        per_device = hw.cores_per_device
        devices = missing.shape[2]
        rng = np.random.default_rng([self.seed, int(times[0] * 1000) % (1 << 62), t, 7])
        alive = neuron_up & runs
        executions = np.where(working, hw.executions_per_s * pace[:, None], 0.0)
        executions = np.round(np.maximum(executions * (1 + rng.normal(0, 0.02 * self.noise, (t, n))), 0.0), 3)
        latency = hw.latency_s / np.maximum(pace, 0.05)
        count = devices - missing.sum(axis=2)
        for i, node in enumerate(nodes):
            info = (neuron_up & present)[:, i]
            frame[(Signal.NEURON_DEVICES, node, hw.instance_type)] = (info, count[:, i].astype(float))
            frame[(Signal.NEURONCORES_PER_DEVICE, node, hw.instance_type)] = (info, np.full(t, float(per_device)))
            for k in range(util.shape[2]):
                up = alive[:, i] & ~missing[:, i, min(k // per_device, devices - 1)]
                frame[(Signal.NEURONCORE_UTIL, node, str(k))] = (up, np.round(util[:, i, k] / 100.0, 4))
            base = static[i]["ecc"]
            for dev in range(devices):
                up = alive[:, i] & ~missing[:, i, dev]
                for signal, (corrected, sram) in {
                    Signal.MEM_ECC_CORRECTED: (0, 0),
                    Signal.SRAM_ECC_CORRECTED: (0, 1),
                    Signal.MEM_ECC_UNCORRECTED: (1, 0),
                    Signal.SRAM_ECC_UNCORRECTED: (1, 1),
                }.items():
                    rate = ecc_events[corrected, sram, :, i, dev] + (base[dev] if (corrected, sram) == (0, 0) else 0.0)
                    frame[(signal, node, str(dev))] = (up, rate)
            frame[(Signal.HARDWARE_ERRORS, node, "")] = (alive[:, i], hardware_errors[:, i])
            frame[(Signal.EXECUTIONS, node, "")] = (alive[:, i], executions[:, i])
            for percentile, factor in (("p50", 1.0), ("p99", 1.35)):
                noisy = latency * factor * (1 + rng.normal(0, 0.03 * self.noise, t))
                frame[(Signal.EXECUTION_LATENCY, node, percentile)] = (alive[:, i], np.round(noisy, 4))
