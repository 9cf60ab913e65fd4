"""The culprit: which node, and which bottleneck, is behind a slowdown; and which nodes are faulty before it hurts.

One comparison for every accelerator. A GPU cluster is read from DCGM, a Trainium cluster from the Neuron
monitor (bot.node_metrics.series: the same per-node shape); an accelerator *unit* below is a GPU or a
NeuronCore (its utilization ratio held as %), and the EFA rules are the same on both.

Peer comparison, step by step: at each step every node is compared with the median of the *other* nodes at
work at that same step (utilization 50 % or more, 30 % for NeuronCores; a spare node or one idle between jobs
is no reference), so a checkpoint or an evaluation, where every node idles together, moves the reference with
the node and blames nobody. A node is judged only at steps where it and at least two peers (one, with two
nodes) are at work, so the second a node enters a pause before the others is no divergence either.
Missing samples (an exporter restart, a node that has left or not yet joined) are simply not judged; a
Trainium node with no Neuron process reports no NeuronCore at all (its hardware info stays): idle, not dead.
A node that joins inside the data (a replacement, a scale-up) warms up for 5 minutes from its first sample
(its EFA counters start from zero, rate() has no value and then a partial one, NCCL connects): over that
stretch it is no peer and is not compared (only a GPU that reported and left counts as gone); a node there
from the data's first step is taken as settled.

What a node shows, per step:

- `gpu`: an XID 79 (fallen off the bus) or 74 (NVLink) on one of its GPUs; a GPU that stopped reporting
  while the node's others still do (it reported earlier, or it leaves a hole in the GPU indices, or its
  peers report it); a GPU at no utilization and at most half the power of its node's working GPUs; every
  GPU of the node gone while its EFA still reports and the job hangs, the two begun within 2 minutes of each
  other (its peers at 80 % utilization or more with no tensor activity: NCCL spinning). On Trainium: a
  Trainium device missing (the hardware info's `neuron_device_count` under its instance type's 16, or under
  its peers' for a type not known here), a NeuronCore stuck at 5 % or less while its node's cores work,
  hardware execution errors (`execution_errors_total{error_type="hardware"}` rising; the application's
  error types are not read). A NeuronCore that does not report is no fault: the monitor reports the cores
  in use only;
- `gpu_memory`: an XID 48, 63, 64, 94 or 95 (ECC, row remapping); other XIDs (13, 31, 43, ...) are the
  application's and blame no node. On Trainium: uncorrected ECC events (HBM or SRAM) on a device, or one
  device's corrected events rising against its peers: 5 or more over the last 10 minutes, at 5 times its
  peers' mean device (a lone event, or a healthy device's few an hour, is none);
- `thermal`: a working GPU's SM clock below 0.9 of its peers' median clock (in an episode, also below 0.95
  of it when its median ratio to its peers fell as far against the healthy window); or below 0.9 *with heat*
  (8 °C or more above its peers), whatever its own utilization or its node's, while its peers work: a
  straggler at low duty is still thermal. Never on Trainium (Trn1 exports no temperature, clock or power);
- `network`: the node's EFA traffic (rx + tx) below 0.85 of its peers' with retransmits up there (over 10/s
  and 5 times its peers'): the whole node as its mean device (its total over the devices it
  reports: NICs need not be evenly used, NCCL may use 4 of a p5's 32) against the peers' mean device, with
  its total retransmits against theirs; or one device (so one bad link among 32 shows) against the same
  device on its peers (devices matched by their exact name), with that device's retransmits. Without
  retransmits, only a whole node below half of its peers' traffic; a device idle, or a node using fewer
  devices, is none.

`find_culprit` names the nodes that show one of these over at least a third of the episode's judged steps,
and over 4 judged steps at least (a verdict needs enough of them: a healthy node shows next to none; a
throttle with heat that came back, two bursts or more, over a fifth), or hard evidence (an XID, a missing
device, hardware errors, uncorrected ECC: a discrete event, one sample is enough, and one in the 5 minutes
before the episode's start counts, since the throughput episode starts after its trigger). What was already
there through the healthy window (over half of the steps it could show on before those 5 minutes, and over
half of its first quarter: it predates the window) and is no worse now is no suspect: the job ran at its
healthy rate with it (an XID 48 from hours before, a GPU binned low, a device with a steady trickle of
corrected ECC); what began inside the window (a fan dying over the last 40 minutes) is still new. A hang
another node's own evidence explains (its XID, its GPU gone or dead) is not blamed on a node whose DCGM
exporter went dark with it. Most likely first: a GPU or Trainium device fault,
then memory, then thermal, then network; a node showing an error code (an XID, an ECC event) is blamed on
the code, whatever followed it (a memory XID whose GPU then vanished or idled is `gpu_memory`, as its number
says; uncorrected ECC followed by hardware execution errors likewise). A node with no settled sample in the
healthy window (one that joined during the episode, or just before it) is named on its own evidence only
(XIDs, GPUs, devices, errors): thermal, network and corrected ECC are comparisons it cannot have (naming it
on its warm-up made the verdict flip as it warmed up); the faulty-node check judges it once it is settled.
When no node diverges and every node's utilization is down against the healthy window (steps where every
node idles, checkpoints and the job down, left out of both; a job idle over most of the episode is not
running, not starved for data; fewer than 4 working steps in either window tell nothing), the cause is
`input`; otherwise `unknown`. What it cannot tell: a throttle under 5 % (under 10 % for a faulty node, which
has no healthy window), a link under 15 % slower or without retransmits (unless the node's traffic is under
half of its peers'), one device degraded that carries a larger share on its node than on its peers yet stays
above theirs, a fault on half the cluster (the median is then no longer healthy), peers of another
instance type under the same cluster label (compared as alike), a Trainium node whose Neuron process died
while its job hangs (its series vanish as an idle node's do), a slow NeuronCore that is not at zero (Trn1
reports no clock).

Tiny clusters. With two nodes the "peers' median" is the other node; every rule above is one-sided (slower,
less traffic, an XID), so the healthy node of the two is never the one below; `find_culprit` also requires a
two-node suspect's clock (against its peer's) or traffic to have fallen against its own healthy window. A
single node has no peers: only its XIDs, a vanished GPU and a dead GPU beside working ones can name it.

`assess_nodes` judges the last `window`: a fault when the divergence covers 60 % of the window's steps (a
throttle with heat 40 %, or a fifth in two bursts or more: an intermittent one; hard evidence: one sample, a
hardware event the gauge may show for a scrape or two only); `clear` when no hard evidence shows, every
divergence covers at most 10 % of the steps, and the node was seen at work with its peers over half of them
while the job made progress (idling, an exporter gap, the job down or hung, is no evidence of health: a hung
job moves no EFA traffic to compare); neither in between, so an alert neither flaps nor closes while the job
is down or hangs. A throttle may come back after a quiet stretch longer than the
window: a `thermal` alert closes once its node was clear over the window before the last as well
(SETTLING_CAUSES). `faulty_episodes` replays that check every `every` over the whole range, computing the
steps once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

import numpy as np

from bot.node_metrics.series import (
    ECC,
    NEURON_DEVICES_OF,
    Cause,
    ClusterMetrics,
    Family,
    FaultEpisode,
    NodeAssessment,
    NodeFault,
    PeerChart,
    Signal,
    Verdict,
)

HEALTHY_BEFORE = timedelta(hours=1)
FAULT_WINDOW = timedelta(minutes=10)

GPU_XIDS = frozenset({79, 74})
MEMORY_XIDS = frozenset({48, 63, 64, 94, 95})
BUSY_UTIL = 50.0  # % GPU utilization from which a GPU, a node or its peers count as at work
BUSY_CORE_UTIL = 30.0  # % NeuronCore utilization for the same (a training step keeps NeuronCores less busy)
IDLE_UTIL = 10.0  # a cluster whose median node is below this is not running, not starved
DEAD_UTIL = 5.0
DEAD_POWER_SHARE = 0.5  # a dead GPU's power against its node's working GPUs (at most half)
CLOCK_RATIO = 0.9
MILD_CLOCK_RATIO = 0.95  # a milder throttle, named only in an episode and only if the GPU's own clock fell
HOT_DELTA = 8.0  # °C above its peers' median: a throttled GPU "with heat"
EFA_LOW = 0.85
EFA_VERY_LOW = 0.5
RETRANS_FLOOR = 10.0  # retransmits per second per device that count as "up", and 5 x the peers'
RETRANS_TIMES = 5.0
HARDWARE_ERROR_RATE = 1e-6  # hardware execution errors per second: any at all
ECC_FLOOR = 0.005  # corrected ECC events/s of one Trainium device that count as "up" (18 an hour) ...
ECC_TIMES = 5.0  # ... and this many times its peers' mean device ...
ECC_EVENTS = 5.0  # ... with this many events on it over the last ECC_SPAN (a lone event, read by rate() over two
ECC_SPAN = timedelta(minutes=10)  # scrapes a minute apart, is 1/60 s for minutes; a healthy device has a few an hour)
ECC_RISE = 2.0  # a corrected-ECC rate that has doubled against the node's own healthy window is new
INPUT_DROP = 0.85  # utilization against the healthy window below which every node "waits"
PERSISTENT = 1 / 3  # share of an episode's judged steps (a healthy node shows next to none)
MIN_JUDGED = 4  # judged steps (2 minutes at 30 s) below which a share of them says nothing
STALE_SHARE = 0.5  # evidence over this share of the healthy window was there before the slowdown
XID_LEAD = timedelta(minutes=5)  # an XID this long before the episode's start is its trigger (the start lags)
OPEN_SHARE = 0.6  # share of the window's steps for a faulty node
HOT_SHARE = 0.4  # ... for a throttle with heat, which may come in bursts (an intermittent fault, low duty)
RECURRING_SHARE = 0.2  # ... or, for a throttle with heat in two bursts or more, this share (window or episode)
# A throttle may come back after a quiet stretch longer than the window: a faulty-node alert of these causes
# closes only once its node was clear over the window before the last as well (one alert, not a flapping one).
SETTLING_CAUSES = frozenset({Cause.THERMAL})
CLEAR_SHARE = 0.1
JUDGED_SHARE = 0.5  # a node is clear only if it was seen at work with its peers over half of the window
HUNG_UTIL = 80.0  # peers at this utilization with no tensor activity: the job hangs (NCCL spins)
HUNG_TENSOR = 0.05
HANG_LEAD = timedelta(minutes=2)  # a node that went dark further from the hang's start did not cause it
WARMUP = timedelta(minutes=5)  # a node that joined is no peer, and not compared, for this long (rate(), NCCL)

# The kinds of divergence, most telling first (the order suspects are ranked in). The Trainium ones:
# device_missing, hardware_errors, core_stuck, ecc_uncorrected, ecc_corrected.
KINDS = (
    "xid_gpu",
    "gpu_gone",
    "gpu_dead",
    "gpu_dark",
    "device_missing",
    "hardware_errors",
    "core_stuck",
    "xid_memory",
    "ecc_uncorrected",
    "ecc_corrected",
    "thermal",
    "thermal_hot",
    "network",
)
EPISODE_KINDS = (*KINDS, "thermal_mild")  # the faulty-node check has no healthy window to tell a mild one
KIND_CAUSE = {
    "xid_gpu": Cause.GPU,
    "gpu_gone": Cause.GPU,
    "gpu_dark": Cause.GPU,
    "gpu_dead": Cause.GPU,
    "device_missing": Cause.GPU,
    "hardware_errors": Cause.GPU,
    "core_stuck": Cause.GPU,
    "xid_memory": Cause.GPU_MEMORY,
    "ecc_uncorrected": Cause.GPU_MEMORY,
    "ecc_corrected": Cause.GPU_MEMORY,
    "thermal": Cause.THERMAL,
    "thermal_hot": Cause.THERMAL,
    "network": Cause.NETWORK,
    "thermal_mild": Cause.THERMAL,
}
# Hard evidence, a discrete event or a count rather than a comparison: one sample is enough.
HARD_KINDS = ("xid_gpu", "xid_memory", "device_missing", "hardware_errors", "ecc_uncorrected")
# An error's own code says what broke (an XID's number, an ECC event's type), not what followed it (a GPU
# that then vanished or idles, execution errors): a node showing one is blamed on it, the first of these.
CODE_KINDS = ("xid_gpu", "xid_memory", "ecc_uncorrected")
# What a node shows against its peers (and a healthy window): a node with no settled data in the healthy
# window is never blamed on these; what stands on its own (an XID, a GPU gone, dead or dark) still counts.
COMPARED_KINDS = frozenset({"thermal", "thermal_mild", "thermal_hot", "network", "ecc_corrected"})


def _open_share(kind: str) -> float:
    """The share of the faulty-node window a kind must cover to open an alert (hard kinds: one sample)."""
    return HOT_SHARE if kind == "thermal_hot" else OPEN_SHARE


def _recurs(kind: str, fraction: float, runs: int) -> bool:
    """A throttle with heat that came back (two bursts or more) over RECURRING_SHARE: an intermittent fault
    at low duty, not a one-off (a single short throttle is one burst)."""
    return kind == "thermal_hot" and runs >= 2 and fraction >= RECURRING_SHARE


def _runs(flagged: np.ndarray) -> np.ndarray:
    """How many separate runs of True each column of `flagged` (steps, ...) holds."""
    if not flagged.shape[0]:
        return np.zeros(flagged.shape[1:], dtype=np.int64)
    starts = flagged[1:] & ~flagged[:-1]
    return np.asarray(flagged[0].astype(np.int64) + starts.sum(axis=0))


def _nanmedian(x: np.ndarray, axis: int) -> np.ndarray:
    """Median ignoring NaN along `axis` (NaN where all are NaN); a sort, much faster than np.nanmedian."""
    s = np.sort(np.moveaxis(x, axis, -1), axis=-1)  # NaN sort last
    k = np.sum(~np.isnan(s), axis=-1)
    lo = np.take_along_axis(s, np.maximum((k - 1) // 2, 0)[..., None], axis=-1)[..., 0]
    hi = np.take_along_axis(s, np.maximum(k // 2, 0)[..., None], axis=-1)[..., 0]
    return np.where(k > 0, (lo + hi) / 2, np.nan)


def _peer_median(x: np.ndarray) -> np.ndarray:
    """For x (steps, nodes): at each step, each node's peers' median (the median of the other nodes)."""
    steps, n = x.shape
    if n == 1:
        return np.full_like(x, np.nan)
    order = np.argsort(x, axis=1)  # NaN last
    s = np.take_along_axis(x, order, axis=1)
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.broadcast_to(np.arange(n), (steps, n)), axis=1)
    valid = ~np.isnan(x)
    k = valid.sum(axis=1, keepdims=True)
    m = np.where(valid, k - 1, k)  # how many peers each node has at the step

    def pick(j: np.ndarray) -> np.ndarray:
        j = np.maximum(j, 0)
        original = np.where(valid & (j >= rank), j + 1, j)
        return np.take_along_axis(s, np.minimum(original, n - 1), axis=1)

    out = (pick((m - 1) // 2) + pick(m // 2)) / 2
    return np.where(m > 0, out, np.nan)


@dataclass(frozen=True)
class _Grid:
    """The metrics on one time grid, NaN where nothing was reported: per accelerator unit (a GPU, or a
    NeuronCore: its utilization held as GPU_UTIL, in %) (steps, nodes, units), per EFA device (steps, nodes,
    devices), per Trainium device (the ECC events, steps, nodes, neuron devices) and per node (the Neuron
    monitor's execution counters and hardware info, steps, nodes)."""

    times: np.ndarray
    step: float
    nodes: tuple[str, ...]
    units: tuple[str, ...]
    devices: tuple[str, ...]
    unit: dict[Signal, np.ndarray]
    efa: dict[Signal, np.ndarray]
    trainium: bool  # the units are NeuronCores (the cluster reports Neuron series, and no DCGM)
    neuron_devices: tuple[str, ...] = ()
    ecc: dict[Signal, np.ndarray] = field(default_factory=dict)
    node: dict[Signal, np.ndarray] = field(default_factory=dict)
    instance_types: tuple[str, ...] = ()  # per node, from its hardware info ("" unknown)

    @property
    def unit_word(self) -> str:
        return "NeuronCore" if self.trainium else "GPU"


UNIT_SIGNALS = (Signal.TENSOR_ACTIVE, Signal.GPU_UTIL, Signal.SM_CLOCK, Signal.GPU_TEMP, Signal.POWER, Signal.XID)
EFA_SIGNALS = (Signal.EFA_RX, Signal.EFA_TX, Signal.EFA_RETRANS)
NODE_SIGNALS = (Signal.HARDWARE_ERRORS, Signal.EXECUTIONS, Signal.NEURON_DEVICES, Signal.NEURONCORES_PER_DEVICE)
LATENCY_PERCENTILE = "p50"  # of execution_latency_seconds, the one held (per node)


def _gpu_key(device: str) -> tuple[int, str]:
    return (int(device), "") if device.isdigit() else (1 << 30, device)


def _grid(metrics: ClusterMetrics) -> _Grid:
    step = metrics.step_seconds
    t0 = metrics.start.timestamp()
    count = max(round((metrics.end.timestamp() - t0) / step) + 1, 1)
    times = t0 + step * np.arange(count)
    nodes = metrics.nodes()
    node_index = {node: i for i, node in enumerate(nodes)}
    families = {s.signal.family for s in metrics.series}
    trainium = Family.NEURON in families and Family.DCGM not in families
    unit_signal = Signal.NEURONCORE_UTIL if trainium else None
    in_units = set(UNIT_SIGNALS) | ({unit_signal} if unit_signal else set())
    units = tuple(sorted({s.device for s in metrics.series if s.signal in in_units}, key=_gpu_key))
    devices = tuple(sorted({s.device for s in metrics.series if s.signal in EFA_SIGNALS}))
    neuron_devices = tuple(sorted({s.device for s in metrics.series if s.signal in ECC}, key=_gpu_key))
    unit_index = {g: i for i, g in enumerate(units)}
    device_index = {d: i for i, d in enumerate(devices)}
    neuron_index = {d: i for i, d in enumerate(neuron_devices)}
    unit = {signal: np.full((count, len(nodes), max(len(units), 1)), np.nan) for signal in UNIT_SIGNALS}
    efa = {signal: np.full((count, len(nodes), max(len(devices), 1)), np.nan) for signal in EFA_SIGNALS}
    ecc = {signal: np.full((count, len(nodes), max(len(neuron_devices), 1)), np.nan) for signal in ECC}
    per_node = {signal: np.full((count, len(nodes)), np.nan) for signal in (*NODE_SIGNALS, Signal.EXECUTION_LATENCY)}
    types = [""] * len(nodes)
    for s in metrics.series:
        if not s.times:
            continue
        # A sample counts from the first step at or after it (as Prometheus's lookback reads it): never before
        # it was taken, so an alert is never dated before its evidence.
        taken, values = s.arrays
        at = np.ceil((taken - t0) / step - 1e-6).astype(np.int64)
        keep = (at >= 0) & (at < count)
        i = node_index[s.node]
        if s.signal in EFA_SIGNALS:
            efa[s.signal][at[keep], i, device_index[s.device]] = values[keep]
        elif s.signal in UNIT_SIGNALS and not trainium:
            unit[s.signal][at[keep], i, unit_index[s.device]] = values[keep]
        elif s.signal is unit_signal:
            unit[Signal.GPU_UTIL][at[keep], i, unit_index[s.device]] = 100.0 * values[keep]
        elif s.signal in ECC:
            ecc[s.signal][at[keep], i, neuron_index[s.device]] = values[keep]
        elif s.signal in NODE_SIGNALS or (s.signal is Signal.EXECUTION_LATENCY and s.device == LATENCY_PERCENTILE):
            per_node[s.signal][at[keep], i] = values[keep]
            if s.signal is Signal.NEURON_DEVICES and s.device:
                types[i] = s.device
    return _Grid(
        times=times,
        step=step,
        nodes=nodes,
        units=units,
        devices=devices,
        unit=unit,
        efa=efa,
        trainium=trainium,
        neuron_devices=neuron_devices,
        ecc=ecc,
        node=per_node,
        instance_types=tuple(types),
    )


@dataclass(frozen=True)
class _Steps:
    """Per step and node: which kinds of divergence show (flags[kind]: (steps, nodes) bool), on which unit
    or device, and the figures the evidence and charts quote."""

    grid: _Grid
    up: np.ndarray  # (steps, nodes): the node reported anything (accelerator, EFA or hardware info)
    unit_up: np.ndarray  # the node reported accelerator unit series (DCGM; a Trainium node's NeuronCores in use)
    info_up: np.ndarray  # a Trainium node's hardware info reported (it stays while no Neuron process runs)
    judged: np.ndarray  # the node and its peers at work
    healthy_evidence: np.ndarray  # judged while the job makes progress (a hang or a job down shows no health)
    hot_judged: np.ndarray  # the node reports and its peers work (a throttle with heat is judged on its own duty)
    busy_line: float
    flags: dict[str, np.ndarray]
    which_gpu: dict[str, np.ndarray]  # (steps, nodes) unit (network: EFA device, ECC: Trainium device) index
    xid_code: np.ndarray  # (steps, nodes) the XID shown (0: none)
    node_util: np.ndarray
    peer_util: np.ndarray
    node_clock: np.ndarray  # the GPU clock per GPU (steps, nodes, gpus)
    peer_clock: np.ndarray  # (steps, nodes)
    peer_temp: np.ndarray
    efa_total: np.ndarray  # rx + tx summed over devices (steps, nodes)
    traffic: np.ndarray  # rx + tx per device (steps, nodes, devices)
    efa_mean: np.ndarray  # the node's mean device (its total over the devices it reports)
    peer_efa_mean: np.ndarray
    peer_device: np.ndarray  # the peers' median of each device (steps, nodes, devices)
    peer_efa_total: np.ndarray
    retrans_total: np.ndarray
    settled: np.ndarray  # (steps, nodes): past its warm-up (or there from the data's first step)
    peer_count: np.ndarray  # how many GPUs the node's peers report (median)
    expected_devices: np.ndarray  # (steps, nodes) Trainium devices the node should have (its type's, or its peers')
    corrected: np.ndarray  # corrected ECC events/s per Trainium device, HBM + SRAM (steps, nodes, devices)
    peer_corrected: np.ndarray  # the peers' mean device (steps, nodes)
    ecc_up: np.ndarray  # (steps, nodes): the node's ECC counters report (a Neuron process runs)


def _sum_present(x: np.ndarray, axis: int) -> np.ndarray:
    """Sum ignoring NaN, NaN where every value is NaN."""
    present = ~np.isnan(x)
    return np.where(present.any(axis=axis), np.nansum(np.where(present, x, 0.0), axis=axis), np.nan)


def _steps(grid: _Grid) -> _Steps:
    g = grid.unit
    util, clock, power, temp, xid = (
        g[Signal.GPU_UTIL],
        g[Signal.SM_CLOCK],
        g[Signal.POWER],
        g[Signal.GPU_TEMP],
        g[Signal.XID],
    )
    steps, n, _ = util.shape
    # A unit reports when any of its series does.
    has = np.zeros(util.shape, dtype=bool)
    for values in g.values():
        has |= ~np.isnan(values)
    gpu_count = has.sum(axis=2)
    unit_up = gpu_count > 0
    rx, tx, retrans = grid.efa[Signal.EFA_RX], grid.efa[Signal.EFA_TX], grid.efa[Signal.EFA_RETRANS]
    efa_has = ~np.isnan(rx) | ~np.isnan(tx)
    efa_up = efa_has.any(axis=2)
    info_up = ~np.isnan(grid.node[Signal.NEURON_DEVICES])
    up = unit_up | efa_up | info_up

    node_util = _nanmedian(util, axis=2)
    # A node that joined inside the data (a replacement, a scale-up) warms up for WARMUP: its EFA counters
    # start from zero (rate() has no value for its first scrapes, then a partial one), NCCL connects, its
    # loader fills. Over that stretch it is no reference for its peers, and no comparison with them blames
    # it (only evidence that stands on its own: an XID, a GPU gone). A node there from the first step is
    # taken as settled: the data cannot say how long it had been up.
    index = np.arange(steps)[:, None]
    first_up = np.where(up.any(axis=0), np.argmax(up, axis=0), steps)
    warmup_steps = WARMUP.total_seconds() / grid.step
    settled = (first_up == 0) | (index - first_up >= warmup_steps - 1e-9)
    busy_line = BUSY_CORE_UTIL if grid.trainium else BUSY_UTIL
    node_busy = (node_util >= busy_line) & settled
    # A node's peers are the nodes at work at that step: a spare node, or one whose job is elsewhere or
    # paused, is no reference for a working one. A node is judged when it works and so do two peers (one in
    # a two-node cluster). A Trainium node with no Neuron process reports no NeuronCore: idle, never judged.

    def peers(x: np.ndarray) -> np.ndarray:
        return _peer_median(np.where(node_busy, x, np.nan))

    def peers_per_device(x: np.ndarray) -> np.ndarray:
        """For x (steps, nodes, devices): each node's peers' median of the same device."""
        if not x.shape[2]:
            return np.full(x.shape, np.nan)
        masked = np.where(node_busy[..., None], x, np.nan)
        flat = np.moveaxis(masked, 2, 1).reshape(steps * x.shape[2], n)
        return np.moveaxis(_peer_median(flat).reshape(steps, x.shape[2], n), 1, 2)

    peer_util = peers(node_util)
    busy_peers = node_busy.sum(axis=1, keepdims=True) - node_busy
    reporting = ~np.isnan(node_util) & settled
    reporting_peers = reporting.sum(axis=1, keepdims=True) - reporting
    peers_work = (busy_peers >= 1) & (busy_peers >= np.minimum(2, reporting_peers))
    judged = node_busy & peers_work
    hot_judged = unit_up & settled & peers_work

    # XIDs.
    xid_now = np.nan_to_num(xid, nan=0.0).astype(np.int64)
    is_gpu_xid = np.isin(xid_now, list(GPU_XIDS))
    is_memory_xid = np.isin(xid_now, list(MEMORY_XIDS))
    flags: dict[str, np.ndarray] = {}
    which: dict[str, np.ndarray] = {}
    none = np.full((steps, n), -1)
    flags["xid_gpu"] = np.asarray(is_gpu_xid.any(axis=2))
    which["xid_gpu"] = np.where(flags["xid_gpu"], np.argmax(is_gpu_xid, axis=2), -1)
    flags["xid_memory"] = np.asarray(is_memory_xid.any(axis=2))
    which["xid_memory"] = np.where(flags["xid_memory"], np.argmax(is_memory_xid, axis=2), -1)
    xid_code = np.where(
        flags["xid_gpu"],
        np.take_along_axis(xid_now, np.maximum(which["xid_gpu"], 0)[..., None], axis=2)[..., 0],
        np.where(
            flags["xid_memory"],
            np.take_along_axis(xid_now, np.maximum(which["xid_memory"], 0)[..., None], axis=2)[..., 0],
            0,
        ),
    )

    # A GPU gone: not reporting while its node's DCGM does, and it reported here before, or leaves a hole in
    # the indices, or most peers report it (and the node reports at least half as many GPUs as they do).
    # Not a NeuronCore: the Neuron monitor reports the cores in use only (a job may use fewer), so a Trainium
    # device is missing when its hardware info says so (device_missing), not by a core's series.
    seen_before = np.logical_or.accumulate(has, axis=0)
    reported_above = np.flip(np.logical_or.accumulate(np.flip(has, axis=2), axis=2), axis=2)
    hole = np.zeros_like(has)
    hole[:, :, :-1] = reported_above[:, :, 1:]
    peers_report = np.zeros(has.shape)
    if n > 1:
        unit_nodes = np.maximum(unit_up.sum(axis=1, keepdims=True) - unit_up, 1)
        peers_report = (has.sum(axis=1, keepdims=True) - has) / unit_nodes[..., None]
    count_float = np.where(unit_up, gpu_count, np.nan).astype(float)
    peer_count = _peer_median(count_float)
    enough = gpu_count >= 0.5 * np.nan_to_num(peer_count, nan=0.0)
    # (A node in its warm-up may still be bringing its GPUs up: there, only a GPU that reported and left.)
    missing = hole | ((peers_report >= 0.5) & (n > 1) & enough[..., None])
    gone = unit_up[..., None] & ~has & (seen_before | (missing & settled[..., None])) & (not grid.trainium)
    # Or every GPU of the node gone (XID 79 can take the driver, and the DCGM exporter, with it) while the
    # node itself is still there (its EFA reports) and the job hangs: its peers spin at full utilization with
    # no tensor activity. An exporter restart in a healthy job is not that: the peers keep working.
    peer_tensor = peers(_nanmedian(g[Signal.TENSOR_ACTIVE], axis=2))
    hung = (peer_util >= HUNG_UTIL) & (peer_tensor <= HUNG_TENSOR)
    # ... and it went dark when the hang began (within HANG_LEAD): not in the middle of a hang another node
    # caused, nor in an exporter gap that began while the job still ran.
    # The job makes progress unless it hangs: on GPUs, peers spinning with no tensor activity; on Trainium, peers
    # completing no execution (where the Neuron monitor reports them). Steps without progress show no health.
    peer_executions = _peer_median(np.where(node_busy, grid.node[Signal.EXECUTIONS], np.nan))
    progress = ~hung & ~(peer_executions <= 0)
    dark_since = np.maximum.accumulate(np.where(unit_up, index, -1), axis=0) + 1
    hung_since = np.maximum.accumulate(np.where(hung, -1, index), axis=0) + 1
    lead = max(1, round(HANG_LEAD.total_seconds() / grid.step))
    began_together = np.abs(dark_since - hung_since) <= lead
    flags["gpu_dark"] = ~unit_up & efa_up & (dark_since > 0) & hung & began_together
    which["gpu_dark"] = none
    flags["gpu_gone"] = np.asarray(gone.any(axis=2))
    which["gpu_gone"] = np.where(flags["gpu_gone"], np.argmax(gone, axis=2), -1)

    # A GPU dead beside working ones: no utilization, near-idle power, while its node's GPUs work.
    node_power = _nanmedian(power, axis=2)
    dead = (util <= DEAD_UTIL) & (power <= DEAD_POWER_SHARE * node_power[..., None]) & node_busy[..., None]
    flags["gpu_dead"] = np.asarray(dead.any(axis=2))
    which["gpu_dead"] = np.where(flags["gpu_dead"], np.argmax(dead, axis=2), -1)
    # A hang that another node's own evidence explains (its XID, its GPU gone or dead, since the hang began or
    # within HANG_LEAD before) is not a dark node's doing: its exporter gap that began with it is a coincidence.
    own = flags["xid_gpu"] | flags["xid_memory"] | flags["gpu_gone"] | flags["gpu_dead"]
    others = (own.sum(axis=1, keepdims=True) - own) > 0
    seen = np.concatenate([np.zeros((1, n)), np.cumsum(others, axis=0)])
    since = np.maximum(hung_since - lead, 0)
    explained = (seen[1:] - np.take_along_axis(seen, since, axis=0)) > 0
    flags["gpu_dark"] &= ~explained

    # Trainium. A NeuronCore stuck at zero while its node's other cores work (Trn1 has no power to tell an
    # idle core from a dead one, and needs none: a core in use at zero while its siblings work is stuck).
    stuck = (util <= DEAD_UTIL) & node_busy[..., None] & grid.trainium
    flags["core_stuck"] = np.asarray(stuck.any(axis=2))
    which["core_stuck"] = np.where(flags["core_stuck"], np.argmax(stuck, axis=2), -1)
    # A Trainium device missing: the hardware info counts fewer than the instance type has (or, for a type
    # not known here, than its peers count).
    reported = grid.node[Signal.NEURON_DEVICES]
    of_type = np.array([float(NEURON_DEVICES_OF.get(t, np.nan)) for t in grid.instance_types] or [np.nan])[:n]
    expected = np.where(np.isnan(of_type)[None, :], np.round(_peer_median(reported)), of_type[None, :])
    with np.errstate(invalid="ignore"):
        flags["device_missing"] = np.asarray(reported < expected)
    which["device_missing"] = none
    # Hardware execution errors (the runtime's own classification; the application's errors are not read).
    with np.errstate(invalid="ignore"):
        flags["hardware_errors"] = np.asarray(grid.node[Signal.HARDWARE_ERRORS] > HARDWARE_ERROR_RATE)
    which["hardware_errors"] = none
    # Uncorrected ECC (HBM or SRAM) on any device: the memory lost data.
    e = grid.ecc
    with np.errstate(invalid="ignore"):
        uncorrected = (e[Signal.MEM_ECC_UNCORRECTED] > 0) | (e[Signal.SRAM_ECC_UNCORRECTED] > 0)
    flags["ecc_uncorrected"] = np.asarray(uncorrected.any(axis=2))
    which["ecc_uncorrected"] = np.where(flags["ecc_uncorrected"], np.argmax(uncorrected, axis=2), -1)
    # Corrected ECC rising against the peers: one device's corrected events (HBM + SRAM) above ECC_FLOOR and
    # ECC_TIMES x the peers' mean device (the nodes whose counters report: memory errors need no busy peer),
    # and ECC_EVENTS of them over the last ECC_SPAN (the rate's integral), so a lone event is no rise.
    corrected = _sum_present(np.stack([e[Signal.MEM_ECC_CORRECTED], e[Signal.SRAM_ECC_CORRECTED]]), axis=0)
    ecc_has = ~np.isnan(corrected)
    ecc_up = ecc_has.any(axis=2)
    node_ecc = _sum_present(corrected, axis=2) / np.maximum(ecc_has.sum(axis=2), 1)
    peer_corrected = _peer_median(np.where(ecc_up & settled, node_ecc, np.nan))
    counted = np.concatenate([np.zeros((1, *corrected.shape[1:])), np.cumsum(np.nan_to_num(corrected), axis=0)])
    span = max(1, round(ECC_SPAN.total_seconds() / grid.step))
    recent = (counted[1:] - counted[np.maximum(np.arange(1, steps + 1) - span, 0)]) * grid.step
    with np.errstate(invalid="ignore"):
        high = corrected > np.maximum(ECC_FLOOR, ECC_TIMES * np.nan_to_num(peer_corrected))[..., None]
    high &= ~np.isnan(peer_corrected)[..., None] & (recent >= ECC_EVENTS)
    flags["ecc_corrected"] = np.asarray(high.any(axis=2))
    which["ecc_corrected"] = np.where(flags["ecc_corrected"], np.argmax(np.where(high, corrected, -np.inf), axis=2), -1)

    # Thermal: a working GPU's clock well below the peers' median clock (NaN on Trainium: never there).
    peer_clock = peers(_nanmedian(clock, axis=2))
    peer_temp = peers(_nanmedian(temp, axis=2))
    ratio = clock / peer_clock[..., None]
    slow = (ratio < CLOCK_RATIO) & (util >= BUSY_UTIL) & judged[..., None]
    flags["thermal"] = slow.any(axis=2)
    which["thermal"] = np.where(flags["thermal"], np.nanargmin(np.where(slow, ratio, np.inf), axis=2), -1)
    mild = (ratio < MILD_CLOCK_RATIO) & (util >= BUSY_UTIL) & judged[..., None]
    flags["thermal_mild"] = mild.any(axis=2)
    which["thermal_mild"] = np.where(flags["thermal_mild"], np.nanargmin(np.where(mild, ratio, np.inf), axis=2), -1)
    # ... or throttled with heat (HOT_DELTA above the peers): thermal whatever the GPU's own duty or its
    # node's (a straggler may idle between its bursts of work), as long as its peers work.
    with np.errstate(invalid="ignore"):
        hot = (ratio < CLOCK_RATIO) & (temp >= peer_temp[..., None] + HOT_DELTA) & hot_judged[..., None]
    flags["thermal_hot"] = hot.any(axis=2)
    which["thermal_hot"] = np.where(flags["thermal_hot"], np.nanargmin(np.where(hot, ratio, np.inf), axis=2), -1)

    # Network. A node's NICs need not be evenly used (NCCL may put its traffic on 4 of a p5's 32 devices, or
    # leave one idle), so neither a node's median device nor the peers' median device is a reference: the
    # whole node is its mean device (its total over the devices it reports, so a device the exporter misses
    # does not count) against the peers' mean device; one device against the same device on its peers. Less
    # traffic is `network` only with retransmits up there (over 10/s and 5 x the peers'), or, for the whole
    # node, when its traffic is far below its peers' (under half): a node waiting for data, or using fewer
    # devices, does neither.
    traffic = np.where(efa_has, np.nan_to_num(rx) + np.nan_to_num(tx), np.nan)
    device_count = efa_has.sum(axis=2)
    efa_total = np.where(efa_up, np.nansum(np.where(efa_has, traffic, 0.0), axis=2), np.nan)
    efa_mean = efa_total / np.maximum(device_count, 1)
    peer_efa = peers(efa_mean)
    # The whole node's retransmits are its total (they come on the devices that carry traffic: a mean over
    # 32 devices, 4 of them used, would hide them) against its peers' total.
    retrans_total = np.where(efa_up & ~np.isnan(retrans).all(axis=2), np.nansum(np.nan_to_num(retrans), axis=2), np.nan)
    peer_retrans = peers(retrans_total)
    with np.errstate(divide="ignore", invalid="ignore"):
        efa_ratio = efa_mean / peer_efa
    retrans_up = retrans_total > np.maximum(RETRANS_FLOOR, RETRANS_TIMES * np.nan_to_num(peer_retrans))
    whole = ((efa_ratio < EFA_LOW) & retrans_up) | (efa_ratio < EFA_VERY_LOW)
    peer_device = peers_per_device(traffic)
    peer_device_retrans = peers_per_device(retrans)
    with np.errstate(divide="ignore", invalid="ignore"):  # a device idle here and on the peers: no ratio
        device_ratio = traffic / peer_device
    device_retrans_up = retrans > np.maximum(RETRANS_FLOOR, RETRANS_TIMES * np.nan_to_num(peer_device_retrans))
    one_device = (device_ratio < EFA_LOW) & device_retrans_up
    flags["network"] = judged & (whole | one_device.any(axis=2))
    which["network"] = np.where(
        judged & ~whole & one_device.any(axis=2), np.nanargmin(np.where(one_device, device_ratio, np.inf), axis=2), -1
    )

    return _Steps(
        grid=grid,
        up=up,
        unit_up=unit_up,
        info_up=info_up,
        judged=judged,
        healthy_evidence=judged & progress,
        hot_judged=hot_judged,
        busy_line=busy_line,
        flags=flags,
        which_gpu=which,
        xid_code=xid_code,
        node_util=node_util,
        peer_util=peer_util,
        node_clock=clock,
        peer_clock=peer_clock,
        peer_temp=peer_temp,
        efa_total=efa_total,
        traffic=traffic,
        efa_mean=efa_mean,
        peer_efa_mean=peer_efa,
        peer_device=peer_device,
        peer_efa_total=peers(efa_total),
        retrans_total=retrans_total,
        settled=settled,
        peer_count=peer_count,
        expected_devices=expected,
        corrected=corrected,
        peer_corrected=peer_corrected,
        ecc_up=ecc_up,
    )


# -- people's figures ---------------------------------------------------------------------------------------


def _num(x: float) -> str:
    return f"{x:,.0f}"


def _gbps(x: float) -> str:
    return f"{x / 1e9:,.1f} GB/s"


def _median(x: np.ndarray) -> float:
    x = x[~np.isnan(x)]
    return float(np.median(x)) if x.size else float("nan")


def _mode(x: np.ndarray) -> int:
    x = x[x >= 0]
    return int(np.bincount(x).argmax()) if x.size else -1


def _at(ts: float) -> datetime:
    return datetime.fromtimestamp(float(ts), UTC)


# -- what one node shows over a stretch of steps --------------------------------------------------------------


@dataclass(frozen=True)
class _Finding:
    node: str
    kind: str
    share: float  # of the judged steps (or steps present, for GPU faults)
    depth: float  # how far off (lower clock ratio, lower traffic ratio): for ranking within a kind
    gpu: int  # the GPU (network: the EFA device) the kind points at; -1 for none or the whole node
    evidence: str
    chart: PeerChart | None
    first: float  # the first flagged step's time


def _denominator(st: _Steps, kind: str, rows: np.ndarray, i: int) -> int:
    if kind in HARD_KINDS:
        return 1
    return int((rows & _judged_for(st, kind)[:, i]).sum())


def _judged_for(st: _Steps, kind: str) -> np.ndarray:
    """(steps, nodes): where a comparison kind is judged (its _denominator's steps)."""
    if kind == "gpu_dark":
        return st.up
    if kind in ("gpu_gone", "gpu_dead", "core_stuck"):
        return st.unit_up
    if kind == "thermal_hot":
        return st.hot_judged
    if kind == "ecc_corrected":
        return st.ecc_up & ~np.isnan(st.peer_corrected)
    return st.judged


def _presence(st: _Steps, kind: str) -> np.ndarray:
    """(steps, nodes): where a hard kind could have shown (its series reported)."""
    if kind == "device_missing":
        return st.info_up
    if kind == "hardware_errors":
        return ~np.isnan(st.grid.node[Signal.HARDWARE_ERRORS])
    if kind == "ecc_uncorrected":
        return st.ecc_up
    return st.unit_up


def _per_minute(x: float) -> str:
    per_minute = 60 * x
    return f"{per_minute:,.0f}" if per_minute >= 10 else f"{per_minute:,.1f}" if per_minute >= 0.1 else "under 0.1"


def _neuron_device(st: _Steps, i: int, core: int) -> str:
    """The Trainium device a NeuronCore is on (its index over the node's cores per device), or ""."""
    per_device = _median(st.grid.node[Signal.NEURONCORES_PER_DEVICE][:, i])
    label = st.grid.units[core] if 0 <= core < len(st.grid.units) else ""
    if np.isnan(per_device) or per_device < 1 or not label.isdigit():
        return ""
    return f" (Trainium device {int(label) // int(per_device)})"


def _memory(st: _Steps, rows: np.ndarray, i: int, device: int, *, corrected: bool) -> str:
    """Which memory a Trainium device's ECC events are in: HBM, SRAM, or both."""
    mem, sram = (
        (Signal.MEM_ECC_CORRECTED, Signal.SRAM_ECC_CORRECTED)
        if corrected
        else (Signal.MEM_ECC_UNCORRECTED, Signal.SRAM_ECC_UNCORRECTED)
    )
    hbm = np.nan_to_num(st.grid.ecc[mem][rows, i, device]).sum() > 0
    on_chip = np.nan_to_num(st.grid.ecc[sram][rows, i, device]).sum() > 0
    return "HBM and SRAM" if hbm and on_chip else "SRAM" if on_chip else "HBM"


def _evidence(st: _Steps, kind: str, rows: np.ndarray, i: int, gpu: int) -> str:
    grid = st.grid
    label = grid.units[gpu] if 0 <= gpu < len(grid.units) else "?"
    flagged = rows & st.flags[kind][:, i]
    if kind in ("xid_gpu", "xid_memory"):
        code = int(np.bincount(st.xid_code[flagged, i]).argmax()) if flagged.any() else 0
        text = f"XID {code} on GPU {label}"
        if (st.which_gpu["gpu_gone"][rows, i] == gpu).any():
            text += ", then the GPU vanished"
        elif (st.which_gpu["gpu_dead"][rows, i] == gpu).any():
            text += ", then the GPU idled"
        return text
    if kind == "gpu_dark":
        util = _median(st.peer_util[flagged, i])
        return f"all its GPU metrics gone while the job hangs (peers at {_num(util)} % utilization, no tensor activity)"
    if kind == "gpu_gone":
        peers = _median(st.peer_count[flagged, i])
        reports = "peers report " + _num(peers) if not np.isnan(peers) else "it reported earlier"
        return f"GPU {label} missing ({reports})"
    if kind == "gpu_dead":
        util = _median(grid.unit[Signal.GPU_UTIL][flagged, i, gpu])
        power = _median(grid.unit[Signal.POWER][flagged, i, gpu])
        others = _median(st.node_util[flagged, i])
        return (
            f"GPU {label} at {_num(util)} % utilization and {_num(power)} W, its node's other GPUs at {_num(others)} %"
        )
    if kind == "core_stuck":
        util = _median(grid.unit[Signal.GPU_UTIL][flagged, i, gpu])
        others = _median(st.node_util[flagged, i])
        where = _neuron_device(st, i, gpu)
        return (
            f"NeuronCore {label}{where} stuck at {_num(util)} % utilization, "
            f"its node's other NeuronCores at {_num(others)} %"
        )
    if kind == "device_missing":
        count = _median(grid.node[Signal.NEURON_DEVICES][flagged, i])
        expected = _median(st.expected_devices[flagged, i])
        kind_of = grid.instance_types[i]
        known = kind_of in NEURON_DEVICES_OF
        return f"{_num(count)} of {_num(expected)} Trainium devices reported ({kind_of if known else 'as its peers'})"
    if kind == "hardware_errors":
        rate = _median(grid.node[Signal.HARDWARE_ERRORS][flagged, i])
        return f"hardware execution errors on its Trainium devices ({_per_minute(rate)} a minute)"
    if kind == "ecc_uncorrected":
        device = grid.neuron_devices[gpu] if 0 <= gpu < len(grid.neuron_devices) else "?"
        return f"uncorrected {_memory(st, flagged, i, gpu, corrected=False)} ECC errors on Trainium device {device}"
    if kind == "ecc_corrected":
        device = grid.neuron_devices[gpu] if 0 <= gpu < len(grid.neuron_devices) else "?"
        rate = _median(st.corrected[flagged, i, gpu])
        peers = _median(st.peer_corrected[flagged, i])
        memory = _memory(st, flagged, i, gpu, corrected=True)
        return (
            f"corrected {memory} ECC errors on Trainium device {device} at {_per_minute(rate)} a minute, "
            f"peers {_per_minute(peers)} a minute per device"
        )
    if kind in ("thermal", "thermal_mild", "thermal_hot"):
        line = MILD_CLOCK_RATIO if kind == "thermal_mild" else CLOCK_RATIO
        slow_gpus = np.unique(st.which_gpu[kind][flagged, i])
        clock = _median(st.node_clock[flagged, i, gpu])
        temp = _median(grid.unit[Signal.GPU_TEMP][flagged, i, gpu])
        power = _median(grid.unit[Signal.POWER][flagged, i, gpu])
        peer_clock = _median(st.peer_clock[flagged, i])
        slow_ratio = st.node_clock[flagged, i, :] < line * st.peer_clock[flagged, i][:, None]
        throttled = int(np.median(slow_ratio.sum(axis=1))) if flagged.any() else 1
        who = f"GPU {label}" if throttled <= 1 or slow_gpus.size == 0 else f"{throttled} GPUs"
        heat = f"{_num(temp)} °C" if not np.isnan(temp) else "temperature unknown"
        peer_temp = _median(st.peer_temp[flagged, i])
        extra = "" if np.isnan(peer_temp) or temp - peer_temp >= HOT_DELTA else f", {_num(power)} W"
        return f"{who} at {_num(clock)} MHz and {heat}{extra}, peers {_num(peer_clock)} MHz"
    # network
    if gpu >= 0:
        device = grid.devices[gpu]
        own = _median(st.traffic[flagged, i, gpu])
        peers = _median(st.peer_device[flagged, i, gpu])
        retrans = _median(grid.efa[Signal.EFA_RETRANS][flagged, i, gpu])
        return f"EFA device {device} {_gbps(own)} vs peers {_gbps(peers)} per device, retransmits {_num(retrans)}/s"
    own = _median(st.efa_total[flagged, i])
    peers = _median(st.peer_efa_total[flagged, i])
    retrans = _median(st.retrans_total[flagged, i])
    return f"EFA {_gbps(own)} vs peers {_gbps(peers)}, retransmits {_num(retrans)}/s"


def _chart(st: _Steps, kind: str, rows: np.ndarray, i: int, gpu: int) -> PeerChart | None:
    grid = st.grid
    node = grid.nodes[i]
    times = tuple(grid.times[rows].tolist())
    label = grid.units[gpu] if 0 <= gpu < len(grid.units) else "?"

    def per_gpu(signal: Signal) -> tuple[tuple[float, ...], tuple[float, ...]]:
        values = grid.unit[signal][:, :, gpu] if gpu >= 0 else _nanmedian(grid.unit[signal], axis=2)
        peers = _peer_median(_nanmedian(grid.unit[signal], axis=2))
        return tuple(values[rows, i].tolist()), tuple(peers[rows, i].tolist())

    def per_node(values: np.ndarray, scale: float = 1.0) -> tuple[tuple[float, ...], tuple[float, ...]]:
        return tuple((scale * values[rows, i]).tolist()), tuple((scale * _peer_median(values)[rows, i]).tolist())

    if kind in ("thermal", "thermal_mild", "thermal_hot"):
        suspect, peers = per_gpu(Signal.SM_CLOCK)
        return PeerChart(Signal.SM_CLOCK, f"SM clock of GPU {label} (MHz)", node, times, suspect, peers)
    if kind == "network" and 0 <= gpu < len(grid.devices):
        return PeerChart(
            Signal.EFA_RX,
            f"EFA traffic of {grid.devices[gpu]}, rx + tx (GB/s)",
            node,
            times,
            tuple((st.traffic[rows, i, gpu] / 1e9).tolist()),
            tuple((st.peer_device[rows, i, gpu] / 1e9).tolist()),
        )
    if kind == "network":
        return PeerChart(
            Signal.EFA_RX,
            "EFA traffic, rx + tx (GB/s)",
            node,
            times,
            tuple((st.efa_total[rows, i] / 1e9).tolist()),
            tuple((st.peer_efa_total[rows, i] / 1e9).tolist()),
        )
    if kind == "core_stuck":
        suspect, peers = per_gpu(Signal.GPU_UTIL)
        return PeerChart(Signal.NEURONCORE_UTIL, f"Utilization of NeuronCore {label} (%)", node, times, suspect, peers)
    if kind == "device_missing":
        suspect, peers = per_node(grid.node[Signal.NEURON_DEVICES])
        return PeerChart(Signal.NEURON_DEVICES, "Trainium devices reported", node, times, suspect, peers)
    if kind == "hardware_errors":
        suspect, peers = per_node(grid.node[Signal.HARDWARE_ERRORS], 60.0)
        return PeerChart(Signal.HARDWARE_ERRORS, "Hardware execution errors (a minute)", node, times, suspect, peers)
    if kind in ("ecc_uncorrected", "ecc_corrected") and 0 <= gpu < len(grid.neuron_devices):
        device = grid.neuron_devices[gpu]
        if kind == "ecc_corrected":
            mine = st.corrected[:, :, gpu]
            title, signal = f"Corrected ECC errors of Trainium device {device} (a minute)", Signal.MEM_ECC_CORRECTED
            return PeerChart(
                signal,
                title,
                node,
                times,
                tuple((60 * mine[rows, i]).tolist()),
                tuple((60 * st.peer_corrected[rows, i]).tolist()),
            )
        mine = _sum_present(
            np.stack(
                [grid.ecc[Signal.MEM_ECC_UNCORRECTED][:, :, gpu], grid.ecc[Signal.SRAM_ECC_UNCORRECTED][:, :, gpu]]
            ),
            axis=0,
        )
        suspect, peers = per_node(mine, 60.0)
        title = f"Uncorrected ECC errors of Trainium device {device} (a minute)"
        return PeerChart(Signal.MEM_ECC_UNCORRECTED, title, node, times, suspect, peers)
    if kind in ("gpu_dead", "gpu_gone", "gpu_dark"):
        suspect, peers = per_gpu(Signal.GPU_UTIL)
        return PeerChart(Signal.GPU_UTIL, f"GPU utilization of GPU {label} (%)", node, times, suspect, peers)
    if gpu < 0 or kind not in ("xid_gpu", "xid_memory"):
        return None
    suspect, peers = per_gpu(Signal.XID)
    return PeerChart(Signal.XID, f"Last XID of GPU {label}", node, times, suspect, peers)


def _findings(
    st: _Steps,
    rows: np.ndarray,
    *,
    share: float,
    chart_rows: np.ndarray,
    fixed_count: int | None = None,
    only: Sequence[int] | None = None,
    kinds: Sequence[str] = KINDS,
    min_steps: int = 0,
) -> list[_Finding]:
    """What each node (or the nodes `only`) shows over `rows`: every kind flagged over `share` of its
    denominator (over at least `min_steps` of them), or of `fixed_count` steps for the faulty-node window
    (whose share is `_open_share`'s), hard kinds on one sample at least."""
    out: list[_Finding] = []
    for i in range(len(st.grid.nodes)) if only is None else only:
        node = st.grid.nodes[i]
        for kind in kinds:
            flagged = rows & st.flags[kind][:, i]
            hits = int(flagged.sum())
            if not hits:
                continue
            denominator = fixed_count if fixed_count is not None else _denominator(st, kind, rows, i)
            if kind in HARD_KINDS:
                fraction = float(hits)
            else:
                if denominator < min_steps:
                    continue  # too few steps to say anything: a verdict needs enough of them
                fraction = hits / max(denominator, 1)
                needed = _open_share(kind) if fixed_count is not None else share
                if fraction < needed and not _recurs(kind, fraction, int(_runs(flagged[rows]))):
                    continue
            gpu = _mode(st.which_gpu[kind][flagged, i])
            if kind == "network" and 2 * int((st.which_gpu[kind][flagged, i] >= 0).sum()) <= hits:
                gpu = -1  # mostly the whole node, not one device
            if kind in ("thermal", "thermal_mild", "thermal_hot"):
                depth = _median(st.node_clock[flagged, i, gpu] / st.peer_clock[flagged, i])
            elif kind == "network" and gpu >= 0:
                depth = _median(st.traffic[flagged, i, gpu] / st.peer_device[flagged, i, gpu])
            elif kind == "network":
                depth = _median(st.efa_mean[flagged, i] / st.peer_efa_mean[flagged, i])
            elif kind == "ecc_corrected":
                depth = -_median(st.corrected[flagged, i, gpu])
            else:
                depth = 0.0
            first = float(st.grid.times[np.argmax(flagged)])
            out.append(
                _Finding(
                    node=node,
                    kind=kind,
                    share=fraction,
                    depth=depth,
                    gpu=gpu,
                    evidence=_evidence(st, kind, rows, i, gpu),
                    chart=_chart(st, kind, chart_rows, i, gpu),
                    first=first,
                )
            )
    return out


# -- the episode's culprit ----------------------------------------------------------------------------------


def _rows(grid: _Grid, start: datetime, end: datetime, *, inclusive: bool = True) -> np.ndarray:
    a, b = start.timestamp(), end.timestamp()
    return (grid.times >= a) & ((grid.times <= b) if inclusive else (grid.times < b))


def _fell_from_healthy(st: _Steps, f: _Finding, episode: np.ndarray, healthy: np.ndarray) -> bool:
    """The suspect's clock or traffic fell against its own healthy window, or its corrected-ECC rate rose
    (asked of a two-node cluster's suspects, of a mild throttle's, and of evidence that was already there)."""
    i = st.grid.nodes.index(f.node)
    if f.kind in ("thermal", "thermal_mild", "thermal_hot"):
        # The GPU's clock against its peers', over every judged step of each window (not only the slow
        # ones): a cluster-wide change (a hot hall) moves the peers too, noise does not move the median.
        line = MILD_CLOCK_RATIO if f.kind == "thermal_mild" else CLOCK_RATIO
        over = st.hot_judged if f.kind == "thermal_hot" else st.judged
        ratio = st.node_clock[:, i, f.gpu] / st.peer_clock[:, i]
        before = _median(ratio[healthy & over[:, i]])
        now = _median(ratio[episode & over[:, i]])
        return bool(now < line * before) if not np.isnan(before) else False
    if f.kind == "network":
        traffic = st.traffic[:, i, f.gpu] if f.gpu >= 0 else st.efa_mean[:, i]
        before = _median(traffic[healthy & st.judged[:, i]])
        now = _median(traffic[episode & st.flags["network"][:, i]])
        return bool(now < EFA_LOW * before) if not np.isnan(before) else False
    if f.kind == "ecc_corrected":
        rate = st.corrected[:, i, f.gpu]
        before = _median(rate[healthy & st.ecc_up[:, i]])
        now = _median(rate[episode & st.flags["ecc_corrected"][:, i]])
        return bool(now > ECC_RISE * before) if not np.isnan(before) else True
    return True


def _pre_existing(st: _Steps, f: _Finding, episode: np.ndarray, before: np.ndarray) -> bool:
    """The finding was already there over most of the healthy window (STALE_SHARE of the steps it could
    show on), and, for a comparison, is no worse now: the job ran at its healthy rate with it, so it is not
    what slowed the job now (an XID 48 from hours ago, a GPU binned low, a busier link)."""
    i = st.grid.nodes.index(f.node)
    could = _presence(st, f.kind)[:, i] if f.kind in HARD_KINDS else _judged_for(st, f.kind)[:, i]
    could = before & could
    if int(could.sum()) < MIN_JUDGED:
        return False
    # ... from the window's start: what began inside it (a fan dying over the last 40 minutes) is still new,
    # the throughput episode starting late; what was there before it began is the node's normal.
    first = could & (np.cumsum(could) <= max(MIN_JUDGED, int(could.sum()) // 4))
    shows = st.flags[f.kind][:, i]
    for rows in (could, first):
        if int((rows & shows).sum()) < STALE_SHARE * int(rows.sum()):
            return False
    return f.kind in HARD_KINDS or not _fell_from_healthy(st, f, episode, before)


def _rank(findings: Sequence[_Finding]) -> list[_Finding]:
    def key(f: _Finding) -> tuple[int, float, float]:
        return (EPISODE_KINDS.index(f.kind), -min(f.share, 1.0), f.depth)

    return sorted(findings, key=key)


def _blamed(findings: Sequence[_Finding]) -> list[tuple[_Finding, _Finding]]:
    """Per node, most likely first (by its most telling finding): that finding and the one that says its
    cause. A node showing an error code (an XID, an ECC event) is blamed on the code, whatever followed it:
    a memory XID whose GPU then vanished is `gpu_memory`, as its number says."""
    ranked = _rank(findings)
    out: list[tuple[_Finding, _Finding]] = []
    for top in ranked:
        if any(top.node == done.node for done, _ in out):
            continue
        codes = [f for f in ranked if f.node == top.node and f.kind in CODE_KINDS]
        said = min(codes, key=lambda f: CODE_KINDS.index(f.kind)) if codes else top
        out.append((top, said))
    return out


def find_culprit(
    metrics: ClusterMetrics, *, healthy_start: datetime, episode_start: datetime, episode_end: datetime
) -> Verdict:
    """Why the job slowed over [episode_start, episode_end], judged against [healthy_start, episode_start)."""
    grid = _grid(metrics)
    if not grid.nodes or grid.times.size == 0:
        return Verdict(Cause.UNKNOWN, evidence="no per-node metrics over the episode")
    st = _steps(grid)
    episode = _rows(grid, episode_start, episode_end)
    healthy = _rows(grid, healthy_start, episode_start, inclusive=False)
    if not (episode & st.up.any(axis=1)).any():
        return Verdict(Cause.UNKNOWN, evidence="no per-node metrics over the episode")
    chart_rows = healthy | episode
    findings = _findings(
        st,
        episode,
        share=PERSISTENT,
        chart_rows=chart_rows,
        kinds=[k for k in EPISODE_KINDS if k not in HARD_KINDS],
        min_steps=MIN_JUDGED,
    )
    lead = _rows(grid, episode_start - XID_LEAD, episode_start, inclusive=False)
    findings += _findings(st, episode | lead, share=PERSISTENT, chart_rows=chart_rows, kinds=HARD_KINDS)
    # A node that joined after the healthy window began to be settled (a replacement, a scale-up) has no
    # healthy window: it is not blamed on comparisons, whatever its share; and since it adds a finding only
    # by its own evidence, its coming (or going) does not make the verdict flip.
    known = (st.up & st.settled)[healthy].any(axis=0)
    findings = [f for f in findings if f.kind not in COMPARED_KINDS or known[grid.nodes.index(f.node)]]
    nodes_present = int((st.up & st.settled)[episode].any(axis=0).sum())
    if nodes_present <= 2:
        findings = [f for f in findings if _fell_from_healthy(st, f, episode, healthy)]
    findings = [f for f in findings if f.kind != "thermal_mild" or _fell_from_healthy(st, f, episode, healthy)]
    # What was already there through the healthy window (before the lead an XID may trigger from) did not
    # slow the job now: it is no suspect, and the verdict is what is left (input or unknown, if nothing).
    findings = [f for f in findings if not _pre_existing(st, f, episode, healthy & ~lead)]
    if findings:
        blamed = _blamed(findings)
        _, said = blamed[0]
        suspects = tuple(top.node for top, _ in blamed)
        return Verdict(KIND_CAUSE[said.kind], suspects=suspects, evidence=said.evidence, chart=said.chart)
    return _no_single_node(st, episode, healthy)


def _no_single_node(st: _Steps, episode: np.ndarray, healthy: np.ndarray) -> Verdict:
    """No node diverges: every node starved alike (input), or nothing to tell (unknown)."""
    # The job's nodes: those at work in the healthy window (spares and other idle nodes are not waiting).
    before_by_node = np.array([_median(st.node_util[healthy, i]) for i in range(len(st.grid.nodes))])
    job = before_by_node >= st.busy_line
    what = f"{st.grid.unit_word} utilization"
    cluster_util = _nanmedian(st.node_util[:, job] if job.any() else st.node_util, axis=1)
    reported = episode & ~np.isnan(cluster_util)
    if not reported.any():
        return Verdict(Cause.UNKNOWN, evidence=f"no {st.grid.unit_word} metrics over the episode")
    # Steps where every node idles together (checkpoints, the job down) are left out of both windows: a
    # starved loader leaves the GPUs some work; a job mostly idle over the episode is not running.
    working = cluster_util >= IDLE_UTIL
    if (reported & working).sum() < 0.5 * reported.sum():
        idle = _median(cluster_util[reported])
        return Verdict(Cause.UNKNOWN, evidence=f"every node idle ({what} {_num(idle)} %): the job is not running")
    episode, healthy = episode & working, healthy & working
    if episode.sum() < MIN_JUDGED or healthy.sum() < MIN_JUDGED:
        return Verdict(Cause.UNKNOWN, evidence="too few steps of work to compare the episode with its healthy window")
    now = _median(cluster_util[episode])
    before = _median(cluster_util[healthy])
    if np.isnan(before):
        return Verdict(Cause.UNKNOWN, evidence="no node diverges from its peers; no healthy window to compare with")
    if now <= INPUT_DROP * before:
        per_node_now = np.array([_median(st.node_util[episode, i]) for i in range(len(st.grid.nodes))])
        per_node_before = np.array([_median(st.node_util[healthy, i]) for i in range(len(st.grid.nodes))])
        known = ~np.isnan(per_node_now) & ~np.isnan(per_node_before) & (job if job.any() else True)
        down = per_node_now[known] <= INPUT_DROP * per_node_before[known]
        where = "on every node" if down.all() else f"on {int(down.sum())} of {int(known.sum())} nodes"
        return Verdict(
            Cause.INPUT,
            evidence=f"{what} {_num(now)} % {where} (was {_num(before)} %), EFA normal",
        )
    return Verdict(
        Cause.UNKNOWN,
        evidence=f"no node diverges from its peers; {what} {_num(now)} % (was {_num(before)} %)",
    )


# -- faulty nodes -------------------------------------------------------------------------------------------


def _faults(st: _Steps, rows: np.ndarray, window_steps: int, only: Sequence[int] | None = None) -> dict[str, NodeFault]:
    findings = _findings(st, rows, share=OPEN_SHARE, chart_rows=rows, fixed_count=window_steps, only=only)
    best: dict[str, NodeFault] = {}
    for top, said in _blamed(findings):
        best[top.node] = NodeFault(
            node=top.node,
            cause=KIND_CAUSE[said.kind],
            evidence=said.evidence,
            since=_at(min(top.first, said.first)),
            chart=said.chart,
        )
    return best


def _assess(st: _Steps, rows: np.ndarray, window_steps: int) -> list[NodeAssessment]:
    present = st.up[rows].any(axis=0)
    faults = _faults(st, rows, window_steps)
    counts = {kind: st.flags[kind][rows].sum(axis=0) for kind in KINDS}
    evidence = st.healthy_evidence[rows].sum(axis=0)
    _, clear = _decide(counts, evidence, window_steps, _runs(st.flags["thermal_hot"][rows]))
    out: list[NodeAssessment] = []
    for i, node in enumerate(st.grid.nodes):
        if not present[i]:
            continue
        fault = faults.get(node)
        if fault is not None:
            out.append(NodeAssessment(node=node, fault=fault, clear=False))
            continue
        out.append(NodeAssessment(node=node, fault=None, clear=bool(clear[i])))
    return out


def _decide(
    counts: dict[str, np.ndarray], judged: np.ndarray, window_steps: int, hot_runs: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """From per-node counts of flagged steps in a window: which nodes may open (a kind over its open share of
    the window, a hard kind on one sample, a throttle with heat that recurs) and which are plainly clear (no
    hard kind, every kind on at most CLEAR_SHARE of the window, and seen at work with its peers over
    JUDGED_SHARE of it: idling is no evidence of health)."""
    candidate = (hot_runs >= 2) & (counts["thermal_hot"] >= RECURRING_SHARE * window_steps)
    for kind in KINDS:
        candidate |= counts[kind] >= (1 if kind in HARD_KINDS else _open_share(kind) * window_steps)
    worst = np.max([counts[kind] for kind in KINDS if kind not in HARD_KINDS], axis=0)
    xids = np.any([counts[kind] > 0 for kind in HARD_KINDS], axis=0)
    clear = ~xids & (worst <= CLEAR_SHARE * window_steps) & (judged >= JUDGED_SHARE * window_steps)
    return candidate, clear


def _window_rows(grid: _Grid, at: datetime, window: timedelta) -> np.ndarray:
    b = at.timestamp()
    return (grid.times >= b - window.total_seconds() - 1e-6) & (grid.times <= b + 1e-6)


def assess_nodes(metrics: ClusterMetrics, *, at: datetime, window: timedelta = FAULT_WINDOW) -> list[NodeAssessment]:
    """Every node present in [at - window, at]: faulty, clear, or neither (see the module docstring)."""
    grid = _grid(metrics)
    if not grid.nodes:
        return []
    st = _steps(grid)
    rows = _window_rows(grid, at, window)
    window_steps = round(window.total_seconds() / metrics.step_seconds) + 1
    return _assess(st, rows, window_steps)


def faulty_episodes(
    metrics: ClusterMetrics, *, every: timedelta = timedelta(minutes=1), window: timedelta = FAULT_WINDOW
) -> list[FaultEpisode]:
    """The faulty-node alerts `assess_nodes` run every `every` would open and close over the metrics' range."""
    grid = _grid(metrics)
    if not grid.nodes:
        return []
    st = _steps(grid)
    window_steps = round(window.total_seconds() / metrics.step_seconds) + 1
    start, end = metrics.start.timestamp(), metrics.end.timestamp()
    checks = np.arange(start + window.total_seconds(), end + 1e-6, every.total_seconds())
    # Whether a node could be faulty or clear at a check depends only on flag counts in its window: count
    # them with cumulative sums, and build the assessment (evidence, chart) only where one would open.
    cumulative = {k: np.concatenate([[np.zeros(len(grid.nodes))], np.cumsum(v, axis=0)]) for k, v in st.flags.items()}
    cum_up = np.concatenate([[np.zeros(len(grid.nodes))], np.cumsum(st.up, axis=0)])
    cum_judged = np.concatenate([[np.zeros(len(grid.nodes))], np.cumsum(st.healthy_evidence, axis=0)])
    hot = st.flags["thermal_hot"]
    began = np.concatenate([hot[:1], hot[1:] & ~hot[:-1]])  # a burst of a throttle with heat begins
    cum_began = np.concatenate([[np.zeros(len(grid.nodes))], np.cumsum(began, axis=0)])
    open_: dict[str, FaultEpisode] = {}
    done: list[FaultEpisode] = []
    cleared: list[np.ndarray] = []  # `clear` at each check so far
    back = max(1, round(window / every))  # the check a window before
    for k, check in enumerate(checks):
        hi = int(np.searchsorted(grid.times, check + 1e-6, side="right"))
        lo = int(np.searchsorted(grid.times, check - window.total_seconds() - 1e-6, side="left"))
        counts = {k: cumulative[k][hi] - cumulative[k][lo] for k in KINDS}
        present = (cum_up[hi] - cum_up[lo]) > 0
        # bursts in the window: those that began in it, and one under way at its first step
        runs = cum_began[hi] - cum_began[min(lo + 1, hi)] + (hot[lo] if lo < hi else 0)
        candidate, clear = _decide(counts, cum_judged[hi] - cum_judged[lo], window_steps, runs)
        at = _at(check)
        cleared.append(clear)
        before = cleared[k - back] if k >= back else clear
        for i, node in enumerate(grid.nodes):
            episode = open_.get(node)
            settled = clear[i] and (episode is None or episode.cause not in SETTLING_CAUSES or before[i])
            if episode is not None and (not present[i] or settled):
                done.append(replace(episode, end=at))
                del open_[node]
            elif episode is None and present[i] and candidate[i]:
                rows = np.zeros(grid.times.size, dtype=bool)
                rows[lo:hi] = True
                fault = _faults(st, rows, window_steps, only=[i]).get(node)
                if fault is not None:
                    open_[node] = FaultEpisode(
                        node=node,
                        cause=fault.cause,
                        evidence=fault.evidence,
                        start=fault.since,
                        detected_at=at,
                        end=None,
                    )
    return sorted([*done, *open_.values()], key=lambda e: (e.detected_at, e.node))
