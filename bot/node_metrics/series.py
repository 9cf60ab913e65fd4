"""What the analysis reads: one cluster's per-node series over a window, as plain data (no Prometheus here).

One shape for every accelerator: a GPU node's DCGM series and a Trainium node's Neuron monitor series are
both `Series` of a `Signal` per node and device, with the EFA exporter's beside them; the culprit analysis
compares either. A cluster is of one accelerator (its peers must be alike).

Counters (the EFA exporter's bytes and retransmits, the Neuron monitor's ECC events and execution counts) are
held as per-second rates, as PromQL's `rate()` gives them, so the analysis never sees a counter reset. Times
are Unix seconds, ascending; a series may have gaps (an exporter restart) and may start or end inside the
window (a node replaced). A Trainium node's Neuron series, but for its hardware info, vanish while no Neuron
process runs on it (an idle node, not a dead exporter)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from functools import cached_property

import numpy as np


class Family(StrEnum):
    """Which exporter a signal comes from."""

    DCGM = "dcgm"  # NVIDIA's DCGM exporter (GPU nodes)
    EFA = "efa"  # the EFA node exporter (both)
    NEURON = "neuron"  # the Neuron monitor's Prometheus frontend, neuron-monitor-prometheus.py (Trainium nodes)


class Signal(StrEnum):
    """A series the observability stacks of HyperPod and ParallelCluster export. The value names it: the
    Prometheus metric, then, for one metric read as several signals, `:` and the one label value it selects
    (`metric`, `selects`)."""

    TENSOR_ACTIVE = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"  # ratio 0..1, per GPU
    GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"  # percent, per GPU
    SM_CLOCK = "DCGM_FI_DEV_SM_CLOCK"  # MHz, per GPU
    GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"  # °C, per GPU
    POWER = "DCGM_FI_DEV_POWER_USAGE"  # W, per GPU
    XID = "DCGM_FI_DEV_XID_ERRORS"  # the last XID seen (0: none), per GPU
    EFA_RX = "node_amazonefa_rx_bytes"  # counter (held as bytes/s), per EFA device
    EFA_TX = "node_amazonefa_tx_bytes"  # counter (held as bytes/s), per EFA device
    EFA_RETRANS = "node_amazonefa_retrans_pkts"  # counter (held as packets/s), per EFA device
    # The Neuron monitor (Trn1 has no temperature, clock or power series).
    NEURONCORE_UTIL = "neuroncore_utilization_ratio"  # ratio 0..1, per NeuronCore in use
    MEM_ECC_CORRECTED = "hardware_ecc_events_total:mem_ecc_corrected"  # counter (events/s), per Trainium device
    MEM_ECC_UNCORRECTED = "hardware_ecc_events_total:mem_ecc_uncorrected"  # HBM
    SRAM_ECC_CORRECTED = "hardware_ecc_events_total:sram_ecc_corrected"
    SRAM_ECC_UNCORRECTED = "hardware_ecc_events_total:sram_ecc_uncorrected"  # on-chip SRAM
    HARDWARE_ERRORS = "execution_errors_total:hardware"  # counter (errors/s), per node (its runtimes summed)
    EXECUTIONS = "execution_status_total:completed"  # counter (executions/s), per node (its runtimes summed)
    EXECUTION_LATENCY = "execution_latency_seconds"  # s, per percentile (p0 .. p100), the node's slowest runtime
    # `neuron_hardware_info` is an info metric (value 1); its labels carry the counts, held here as values, with
    # the node's instance type (its `instance_type` label) as the device.
    NEURON_DEVICES = "neuron_hardware_info:neuron_device_count"
    NEURONCORES_PER_DEVICE = "neuron_hardware_info:neuroncore_per_device_count"

    @property
    def metric(self) -> str:
        """The Prometheus metric's name."""
        return self.value.split(":", 1)[0]

    @property
    def selects(self) -> str:
        """The one value of SELECTOR[metric] this signal reads, or for an info signal the label its value is in
        ("" for a signal that is the whole metric)."""
        return self.value.split(":", 1)[1] if ":" in self.value else ""

    @property
    def family(self) -> Family:
        return FAMILIES[self]

    @property
    def is_counter(self) -> bool:
        return self in COUNTERS

    @property
    def from_label(self) -> bool:
        """Its value is a label's (an info metric's), not the sample's."""
        return self in INFO

    @property
    def device_label(self) -> str:
        """The label that tells a node's devices apart ("" when the series is the node's)."""
        return DEVICE_LABELS.get(self, "")


COUNTERS = frozenset(
    {
        Signal.EFA_RX,
        Signal.EFA_TX,
        Signal.EFA_RETRANS,
        Signal.MEM_ECC_CORRECTED,
        Signal.MEM_ECC_UNCORRECTED,
        Signal.SRAM_ECC_CORRECTED,
        Signal.SRAM_ECC_UNCORRECTED,
        Signal.HARDWARE_ERRORS,
        Signal.EXECUTIONS,
    }
)
INFO = frozenset({Signal.NEURON_DEVICES, Signal.NEURONCORES_PER_DEVICE})
FAMILIES = {
    **{s: Family.DCGM for s in Signal if s.value.startswith("DCGM_")},
    **dict.fromkeys((Signal.EFA_RX, Signal.EFA_TX, Signal.EFA_RETRANS), Family.EFA),
    **{s: Family.NEURON for s in Signal if not s.value.startswith(("DCGM_", "node_amazonefa_"))},
}
ECC = (Signal.MEM_ECC_CORRECTED, Signal.MEM_ECC_UNCORRECTED, Signal.SRAM_ECC_CORRECTED, Signal.SRAM_ECC_UNCORRECTED)
DEVICE_LABELS = {
    **{s: "gpu" for s in Signal if FAMILIES[s] is Family.DCGM},
    Signal.EFA_RX: "device",
    Signal.EFA_TX: "device",
    Signal.EFA_RETRANS: "device",
    Signal.NEURONCORE_UTIL: "neuroncore",
    **dict.fromkeys(ECC, "neuron_device_index"),
    Signal.EXECUTION_LATENCY: "percentile",
    Signal.NEURON_DEVICES: "instance_type",
    Signal.NEURONCORES_PER_DEVICE: "instance_type",
}
# The label a metric read as several signals is told apart by (each signal selects one of its values, exactly).
SELECTOR = {
    "hardware_ecc_events_total": "event_type",
    "execution_errors_total": "error_type",
    "execution_status_total": "status_type",
}
# Trainium devices per instance type (neuron_hardware_info's neuron_device_count when none is missing).
NEURON_DEVICES_OF = {"trn1.32xlarge": 16, "trn1n.32xlarge": 16, "trn1.2xlarge": 1, "trn2.48xlarge": 16}


def on_trainium(evidence: str) -> bool:
    """Whether a verdict's or fault's evidence is of a Trainium node (the analysis speaks of its NeuronCores
    and Trainium devices, never of GPUs): for the words that go with its cause."""
    return "NeuronCore" in evidence or "Trainium device" in evidence


@dataclass(frozen=True)
class Series:
    """One device's samples of one signal on one node."""

    signal: Signal
    node: str  # the node label's value (an EC2 instance id by default)
    device: str  # the GPU ("0".."7"), EFA device ("rdmap0s31"), NeuronCore ("0".."31"), Trainium device
    # ("0".."15"), percentile ("p50") or instance type (Signal.device_label); "" when the series has none
    times: tuple[float, ...]  # Unix seconds, ascending
    values: tuple[float, ...]  # same length as times; rates for counters

    @cached_property
    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """`times` and `values` as read-only float arrays, made once: one check grids the same series for the
        culprit and for each faulty-node assessment, and turning a long tuple into an array was half of each."""
        times, values = np.asarray(self.times, dtype=float), np.asarray(self.values, dtype=float)
        times.flags.writeable = values.flags.writeable = False
        return times, values


@dataclass(frozen=True)
class ClusterMetrics:
    """What was read for one cluster over [start, end], at `step_seconds` resolution."""

    cluster: str
    start: datetime
    end: datetime
    step_seconds: float
    series: tuple[Series, ...]

    def nodes(self) -> tuple[str, ...]:
        return tuple(sorted({s.node for s in self.series}))


class Cause(StrEnum):
    """The bottleneck behind a slowdown or a faulty node."""

    # On Trainium, `gpu` is a Trainium device or NeuronCore and `gpu_memory` its HBM or SRAM; `thermal` is never
    # said there (Trn1 exports no temperature, clock or power).
    GPU = "gpu"  # a GPU gone or dead (XID 79 fallen off the bus, NVLink XID 74, zero utilization and power);
    # a Trainium device missing, a NeuronCore stuck at zero, hardware execution errors
    GPU_MEMORY = "gpu_memory"  # XIDs 48, 63, 64, 94, 95 (ECC, row remapping); uncorrected or rising corrected ECC
    THERMAL = "thermal"  # SM clock throttled, temperature high or power capped, on one node
    NETWORK = "network"  # one node's EFA traffic far below its peers', retransmits up
    INPUT = "input"  # every node waits alike (utilization down everywhere, EFA normal): data loading, storage
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class PeerChart:
    """A suspect's signal against its peers' median, for the alert's thread."""

    signal: Signal
    title: str  # e.g. "SM clock of GPU 3 (MHz)"
    node: str
    times: tuple[float, ...]
    suspect: tuple[float, ...]
    peers_median: tuple[float, ...]


@dataclass(frozen=True)
class Verdict:
    """Why a job slowed: the cause, the nodes to blame (most likely first; empty when no single node is),
    the evidence in a few words ("GPU 3 at 1,210 MHz and 92 °C, peers 1,980 MHz"), and the chart to show."""

    cause: Cause
    suspects: tuple[str, ...] = ()
    evidence: str = ""
    chart: PeerChart | None = None


UNKNOWN = Verdict(Cause.UNKNOWN)


@dataclass(frozen=True)
class NodeFault:
    """A node that diverges from its peers persistently (even with no job slowed yet)."""

    node: str
    cause: Cause
    evidence: str
    since: datetime  # when it began to diverge, as far as the window shows
    chart: PeerChart | None = None


@dataclass(frozen=True)
class NodeAssessment:
    """A node as the last window shows it: `fault` when it diverges persistently (open an alert), `clear`
    when it plainly does not (close one); neither in between, so an alert does not flap."""

    node: str
    fault: NodeFault | None
    clear: bool


@dataclass(frozen=True)
class FaultEpisode:
    """A faulty-node alert over a stretch of metrics, as the live monitor would open and close it (replay)."""

    node: str
    cause: Cause
    evidence: str
    start: datetime  # when the node began to diverge
    detected_at: datetime  # when the alert would open
    end: datetime | None  # when it stopped diverging or left the cluster; None if still open at the end
