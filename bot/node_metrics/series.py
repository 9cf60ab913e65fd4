"""What the analysis reads: one cluster's per-node series over a window, as plain data (no Prometheus here).

Counters (the EFA exporter's bytes and retransmits) are held as per-second rates, as PromQL's `rate()` gives
them, so the analysis never sees a counter reset. Times are Unix seconds, ascending; a series may have gaps
(an exporter restart) and may start or end inside the window (a node replaced)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum


class Signal(StrEnum):
    """A series the observability stacks of HyperPod and ParallelCluster export; the value is its name."""

    TENSOR_ACTIVE = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"  # ratio 0..1, per GPU
    GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"  # percent, per GPU
    SM_CLOCK = "DCGM_FI_DEV_SM_CLOCK"  # MHz, per GPU
    GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"  # °C, per GPU
    POWER = "DCGM_FI_DEV_POWER_USAGE"  # W, per GPU
    XID = "DCGM_FI_DEV_XID_ERRORS"  # the last XID seen (0: none), per GPU
    EFA_RX = "node_amazonefa_rx_bytes"  # counter (held as bytes/s), per EFA device
    EFA_TX = "node_amazonefa_tx_bytes"  # counter (held as bytes/s), per EFA device
    EFA_RETRANS = "node_amazonefa_retrans_pkts"  # counter (held as packets/s), per EFA device

    @property
    def is_counter(self) -> bool:
        return self in COUNTERS

    @property
    def device_label(self) -> str:
        """The label that tells a node's devices apart: `gpu` for DCGM, `device` for EFA."""
        return "device" if self.is_counter else "gpu"


COUNTERS = frozenset({Signal.EFA_RX, Signal.EFA_TX, Signal.EFA_RETRANS})


@dataclass(frozen=True)
class Series:
    """One device's samples of one signal on one node."""

    signal: Signal
    node: str  # the node label's value (an EC2 instance id by default)
    device: str  # the GPU index ("0".."7") or the EFA device ("rdmap0s31"); "" when the series has none
    times: tuple[float, ...]  # Unix seconds, ascending
    values: tuple[float, ...]  # same length as times; rates for counters


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

    GPU = "gpu"  # a GPU gone or dead (XID 79 fallen off the bus, NVLink XID 74, zero utilization and power)
    GPU_MEMORY = "gpu_memory"  # XIDs 48, 63, 64, 94, 95 (ECC, row remapping)
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
