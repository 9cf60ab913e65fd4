"""The sandbox's per-node GPU, Trainium and EFA metrics, and its culprit buttons.

Each simulated training job on a HyperPod GPU or Trainium cluster of the embedded AWS gets a
NodeMetricsSimulator over that cluster's Running worker nodes (DCGM's series on GPU nodes, the Neuron
monitor's on Trn1 nodes, the EFA exporter's on both), re-read from moto at every scrape, so a replaced node
leaves the metrics and its successor joins them. The history (as long as the training jobs', with the same
checkpoints) is backfilled into the sandbox's Prometheus before it starts; from then on Prometheus scrapes the
live values at SCRAPE_PATH on the world server, as it would scrape the DCGM, Neuron and EFA exporters of real
nodes.

A culprit button injects one fault into a cluster's simulator (a throttled GPU, a degraded EFA link, a
starved data loader on every node; on Trainium, a stuck NeuronCore or uncorrected ECC errors on a Trainium
device) and slows the cluster's training job down from the same moment, as the limping node would, so the
throughput alert fires and its analysis finds the node. A button picks a cluster of its accelerator (of the
org asked for if it has one, else any). Recovering clears both; replacing the faulty node does too (the fault
leaves with the node).
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from bot.config import MetricsConfig, OrgConfig, ProgramConfig
from bot.monitor.jobs import thresholds_for
from bot.monitor.throughput import JobDetector, Sample, Thresholds
from bot.node_metrics.series import Cause, ClusterMetrics, Signal
from sandbox.node_metrics import P5, TRN1, TRN1_EFA, Hardware, Injected, NodeMetricsSimulator
from sandbox.prometheus import LiveExporter, openmetrics
from sandbox.training import CHECKPOINT_EVERY, CHECKPOINT_PAUSE, HISTORY, HISTORY_STEP, SimulatedJob, Slowdown
from storage.models import utcnow

SCRAPE_PATH = "/sandbox/node-metrics"
SCRAPE_INTERVAL = "5s"
GPU_INSTANCE_PREFIXES = ("ml.p", "ml.g")  # NVIDIA instances: the ones a DCGM exporter runs on
TRAINIUM_INSTANCE_PREFIXES = ("ml.trn",)  # the ones a Neuron monitor runs on
GPUS_PER_NODE = 8  # P5 (and P4d): the simulator's default
NEURONCORES_PER_NODE = 32  # Trn1: 16 Trainium devices of 2 NeuronCores
TRAINIUM_DEVICES = 16
TRN1N_EFA = tuple(f"rdmap{16 * (k // 4 + 1)}s{k % 4}" for k in range(16))  # trn1n.32xlarge: 16 EFA devices
IDLE_UTIL_PERCENT = 10.0  # a checkpoint idles every GPU (about 2 %); a starved data loader leaves them at 60 % and up


@dataclass(frozen=True)
class CulpritButton:
    """One button of the console: the fault it injects, how much of its rate the job keeps (the nodes are
    slowed alike: severity_for), the accelerator whose clusters it picks from ("gpu", "trainium" or "any")
    and, on Trainium, the fault's shape (sandbox.node_metrics.NEURON_FAULTS)."""

    cause: Cause
    factor: float
    accelerator: str = "any"
    neuron: str | None = None


# A GPU throttled to 60 % of its clock (1,190 of 1,980 MHz) holds every rank back as much, and so does a link
# at a fifth of its peers' traffic: the simulator's full-severity faults. The starved loader is milder. At the
# demo's thresholds the first two are told in 2-3 minutes, the last (the CUSUM's moderate rule) in about 6.
BUTTONS: dict[str, CulpritButton] = {
    "thermal": CulpritButton(Cause.THERMAL, 0.6, accelerator="gpu"),  # "Throttle a GPU"
    "network": CulpritButton(Cause.NETWORK, 0.6),  # "Degrade a node's EFA"
    "input": CulpritButton(Cause.INPUT, 0.65),  # "Slow the data loader"
    # A stuck NeuronCore holds every rank back as a throttled GPU does; uncorrected ECC errors cost the job its
    # retries (the job slows as the Neuron runtime replays what failed).
    # "Stick a NeuronCore", "ECC errors on a Trainium device"
    "stuck_core": CulpritButton(Cause.GPU, 0.6, accelerator="trainium", neuron="stuck_core"),
    "ecc": CulpritButton(Cause.GPU_MEMORY, 0.6, accelerator="trainium", neuron="ecc_uncorrected"),
}


class CulpritBusy(Exception):
    """Every cluster with metrics already has a culprit, or its job is hung or slowed: recover first."""


@dataclass(frozen=True)
class Injection:
    """What a button did, for its answer."""

    org: str
    cluster: str
    job: str
    cause: Cause
    node: str | None  # None: every node (input)
    gpu: int | None
    factor: float
    since: datetime
    alert_in: timedelta  # roughly when the throughput alert comes

    def message(self) -> str:
        where = f"{self.org}/{self.cluster}"
        what = {
            Cause.THERMAL: f"Throttled GPU {self.gpu} of {self.node} ({where}): its SM clock is down and it runs hot",
            Cause.NETWORK: f"Degraded the EFA of {self.node} ({where}): its traffic is down and retransmits are up",
            Cause.INPUT: f"Starved the data loader on every node of {where}: every accelerator waits for input",
            Cause.GPU: f"Stuck NeuronCore {self.gpu} of {self.node} ({where}): at zero while its siblings work",
            Cause.GPU_MEMORY: f"Uncorrected HBM ECC errors on Trainium device {self.gpu} of {self.node} ({where})",
        }.get(self.cause, f"Injected {self.cause.value} into {where}")
        # No faulty-node alert follows: while the job's alert names the node, it is the one alert about it.
        named = "the cause" if self.node is None else "the node and the cause (with Replace node on it)"
        return (
            f"{what}; {self.job} now runs at {self.factor:.0%} of its rate. The throughput alert naming {named} "
            f"comes in about {_minutes(self.alert_in)}. Recover jobs clears it."
        )


def _minutes(delay: timedelta) -> str:
    minutes = max(1, math.ceil(delay / timedelta(minutes=1)))
    return f"{minutes} minute{'s' if minutes > 1 else ''}"


def alert_delay(factor: float, thresholds: Thresholds, *, noise: float = 0.05, period: float = 5.0) -> timedelta:
    """How long after a drop to `factor` the throughput detector opens a slowdown, with these thresholds, for a
    job posting every `period` seconds with +-`noise` (the simulated jobs): found by running the detector itself
    on such a job, not by a formula that could drift from it."""
    rng = random.Random(0)
    detector = JobDetector(thresholds)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    detector.observe(Sample(start, None, "start"))
    healthy = timedelta(minutes=40)
    step = timedelta(seconds=period)
    ts = start
    while ts < start + healthy + timedelta(hours=1):
        ts += step
        level = factor if ts > start + healthy else 1.0
        if any(a.end is None for a in detector.observe(Sample(ts, level * (1 + rng.uniform(-noise, noise))))):
            return ts - (start + healthy)
    return timedelta(hours=1)


def severity_for(cause: Cause, factor: float) -> float:
    """The fault's severity that slows the simulated nodes to `factor` of their pace, as the job is slowed: the
    simulator's model (sandbox.node_metrics) paces a throttled GPU or a degraded link at 1 - 0.4 x severity,
    and a starved loader at 1 - 0.6 x severity."""
    per_unit = 0.6 if cause is Cause.INPUT else 0.4
    return min(1.0, max(0.0, (1 - factor) / per_unit))


def idle_stretches(metrics: ClusterMetrics) -> tuple[tuple[datetime, datetime], ...]:
    """When every node idled together (a checkpoint): the stretches where the median GPU (or NeuronCore)
    utilization is under IDLE_UTIL_PERCENT, from its first to its last such sample."""
    utilization: dict[float, list[float]] = {}
    for series in metrics.series:
        if series.signal in (Signal.GPU_UTIL, Signal.NEURONCORE_UTIL):
            scale = 100.0 if series.signal is Signal.NEURONCORE_UTIL else 1.0  # a NeuronCore's is a ratio
            for at, value in zip(series.times, series.values, strict=True):
                utilization.setdefault(at, []).append(scale * value)
    stretches: list[tuple[float, float]] = []
    for at in sorted(utilization):
        if statistics.median(utilization[at]) >= IDLE_UTIL_PERCENT:
            continue
        if stretches and at - stretches[-1][1] <= metrics.step_seconds * 1.5:
            stretches[-1] = (stretches[-1][0], at)
        else:
            stretches.append((at, at))
    return tuple((datetime.fromtimestamp(a, UTC), datetime.fromtimestamp(b, UTC)) for a, b in stretches)


def running_gpu_workers(org: OrgConfig, cluster: str) -> tuple[list[str], str | None]:
    """The Running worker node ids of a HyperPod cluster in moto, and its workers' instance type (None if the
    cluster is not there), read from moto's in-process backends as sandbox.faults.fail_a_node does."""
    from moto.sagemaker.models import sagemaker_backends

    found = sagemaker_backends[org.aws.account_id][org.aws.region].clusters.get(cluster)
    if found is None:
        return [], None
    workers = [node for node in list(found.nodes.values()) if "controller" not in node.instance_group_name]
    instance_type = workers[0].instance_type if workers else None
    return sorted(node.instance_id for node in workers if node.status == "Running"), instance_type


@dataclass
class MetricsCluster:
    """One simulated job's cluster: its nodes, its simulator (rebuilt when they change) and its live exporter."""

    org: OrgConfig
    job: SimulatedJob
    nodes: tuple[str, ...]
    simulator: NodeMetricsSimulator
    clock: Callable[[], float]  # Unix seconds
    instance_type: str = "ml.p5.48xlarge"  # its workers', as moto has them
    exporter: LiveExporter = field(init=False)

    def __post_init__(self) -> None:
        # The exporter asks for the current simulator at each scrape: a rebuilt one is seen at once.
        self.exporter = LiveExporter(
            values_at=lambda ts: self.simulator.values_at(ts), cluster=self.job.cluster, clock=self.clock
        )

    @property
    def name(self) -> str:
        return self.job.cluster

    @property
    def trainium(self) -> bool:
        return self.instance_type.startswith(TRAINIUM_INSTANCE_PREFIXES)

    def open_faults(self, at: float) -> list[Injected]:
        return [fault for fault in self.simulator.faults if fault.end is None or fault.end > at]


class SandboxNodeMetrics:
    """The node metrics of the sandbox's simulated jobs, and what the culprit buttons do to them.

    `started`: when the simulated jobs' runs began (the history starts there; pass the same to the
    TrainingSimulator, so both have their checkpoints at the same moments). `clock` gives the sandbox's now."""

    def __init__(
        self,
        *,
        program: ProgramConfig,
        jobs: Sequence[SimulatedJob],
        history: timedelta = HISTORY,
        clock: Callable[[], datetime] = utcnow,
        rng: random.Random | None = None,
        seed: int = 0,
    ) -> None:
        self._clock = clock
        self._rng = rng or random.Random()
        self._seed = seed
        self._lock = threading.Lock()  # the scrape and the buttons may run at once
        self.started = clock() - history
        self.clusters: list[MetricsCluster] = []
        self.skipped: list[str] = []  # why a simulated job's cluster has no metrics, one line each
        for job in jobs:
            org = program.org(job.org)
            if org is None:
                self.skipped.append(f"{job.cluster}: org {job.org} is not in the program")
                continue
            nodes, instance_type = running_gpu_workers(org, job.cluster)
            if instance_type is None:
                self.skipped.append(f"{job.org}/{job.cluster}: no such HyperPod cluster in the embedded AWS")
            elif not instance_type.startswith(GPU_INSTANCE_PREFIXES + TRAINIUM_INSTANCE_PREFIXES):
                self.skipped.append(f"{job.org}/{job.cluster}: {instance_type} nodes have no accelerator to simulate")
            else:
                self.clusters.append(self._cluster(org, job, nodes, instance_type))

    def _cluster(self, org: OrgConfig, job: SimulatedJob, nodes: Sequence[str], instance_type: str) -> MetricsCluster:
        return MetricsCluster(
            org=org,
            job=job,
            nodes=tuple(nodes),
            simulator=self._simulator(job.cluster, nodes, instance_type),
            clock=lambda: self._clock().timestamp(),
            instance_type=instance_type,
        )

    def _simulator(
        self, cluster: str, nodes: Sequence[str], instance_type: str, *, checkpoints: bool = False
    ) -> NodeMetricsSimulator:
        trainium = instance_type.startswith(TRAINIUM_INSTANCE_PREFIXES)
        hardware: Hardware = P5
        if trainium:  # trn1.32xlarge has 8 EFA devices, trn1n.32xlarge 16
            hardware = dataclasses.replace(TRN1, instance_type=instance_type.removeprefix("ml."))
        simulator = NodeMetricsSimulator(
            cluster=cluster,
            nodes=nodes,
            seed=self._seed,
            hardware=hardware,
            gpus_per_node=NEURONCORES_PER_NODE if trainium else GPUS_PER_NODE,
            checkpoint_every=CHECKPOINT_EVERY.total_seconds() if checkpoints else None,
            checkpoint_seconds=CHECKPOINT_PAUSE.total_seconds(),
        )
        if trainium:
            simulator.efa_devices = TRN1N_EFA if "trn1n" in instance_type else TRN1_EFA
        return simulator

    # -- what the sandbox composition reads ----------------------------------------------------------------

    def orgs(self) -> set[str]:
        """The orgs that get `metrics:` in the sandbox's program."""
        return {cluster.org.id for cluster in self.clusters}

    def with_metrics(self, program: ProgramConfig, prometheus_url: str) -> ProgramConfig:
        """The program with `metrics: {prometheus_url}` on every org that has simulated node metrics."""
        orgs = self.orgs()
        metrics = MetricsConfig(prometheus_url=prometheus_url)
        return program.model_copy(
            update={
                "orgs": [org.model_copy(update={"metrics": metrics}) if org.id in orgs else org for org in program.orgs]
            }
        )

    def history(self, *, end: datetime | None = None) -> str:
        """The backfill: OpenMetrics text of every cluster's series from the runs' start to `end` (now), at the
        training history's step, with checkpoints (every node idle together); each job gets the same pauses in
        its throughput history (SimulatedJob.pauses). Live, as in the training simulator, there are none."""
        until = (end or self._clock()).timestamp()
        metrics = []
        with self._lock:
            for cluster in self.clusters:
                past = self._simulator(cluster.name, cluster.nodes, cluster.instance_type, checkpoints=True)
                past.faults = list(cluster.simulator.faults)
                series = past.series(start=self.started.timestamp(), end=until, step=HISTORY_STEP.total_seconds())
                cluster.job.pauses = idle_stretches(series)
                metrics.append(series)
        return openmetrics(metrics)

    def scrape(self) -> str:
        """What Prometheus scrapes: every cluster's exporters, as they are now (nodes re-read first)."""
        self.refresh()
        with self._lock:
            return "".join(cluster.exporter.scrape() for cluster in self.clusters)

    def refresh(self) -> None:
        """Follow the clusters' nodes in moto: a node that left takes its faults with it (and the job is healthy
        again if its slowdown came from there); a node that joined is healthy."""
        at = self._clock()
        with self._lock:
            for cluster in self.clusters:
                nodes, _ = running_gpu_workers(cluster.org, cluster.name)
                if tuple(nodes) == cluster.nodes:
                    continue
                faults = list(cluster.simulator.faults)
                ended = [f for f in faults if f.node is not None and f.node not in nodes and f.end is None]
                kept = [dataclasses.replace(f, end=at.timestamp()) if f in ended else f for f in faults]
                cluster.nodes = tuple(nodes)
                cluster.simulator = self._simulator(cluster.name, nodes, cluster.instance_type)
                cluster.simulator.faults = kept
                if ended and not cluster.open_faults(at.timestamp()):
                    cluster.job.slowdown = None

    # -- the buttons -------------------------------------------------------------------------------------

    def inject(
        self,
        button: str,
        *,
        org_id: str | None = None,
        at: datetime | None = None,
        program: ProgramConfig | None = None,
    ) -> Injection:
        """Press a culprit button: pick a cluster with metrics of the button's accelerator (of `org_id` if it has
        one, else any) whose job is healthy, pick its node (and GPU, NeuronCore or Trainium device), inject the
        fault from `at` (now; earlier to backdate it) and slow the job down alike. `program`: the bot's (its
        thresholds say when the alert will come)."""
        chosen = BUTTONS.get(button)
        if chosen is None:
            raise ValueError(f"unknown culprit {button!r}: one of {', '.join(BUTTONS)}")
        since = at or self._clock()
        with self._lock:
            fit = [c for c in self.clusters if chosen.accelerator in ("any", "trainium" if c.trainium else "gpu")]
            mine = [c for c in fit if c.org.id == org_id] or fit
            if not mine:
                kind = {"gpu": "a GPU cluster", "trainium": "a Trainium cluster"}.get(chosen.accelerator, "a cluster")
                raise LookupError(f"no simulated job runs on {kind} with node metrics in this sandbox")
            free = [
                c
                for c in mine
                if c.job.mode == "healthy" and c.job.slowdown is None and not c.open_faults(since.timestamp())
            ]
            if not free:
                raise CulpritBusy("every simulated job with node metrics is already slowed or hung; recover them first")
            cluster = self._rng.choice(free)
            nodes = list(cluster.nodes)
            if not nodes:
                raise LookupError(f"{cluster.org.id}/{cluster.name} has no Running worker node")
            node = None if chosen.cause is Cause.INPUT else self._rng.choice(nodes)
            units = {"stuck_core": NEURONCORES_PER_NODE, "ecc_uncorrected": TRAINIUM_DEVICES}
            gpu = (
                self._rng.randrange(GPUS_PER_NODE)
                if chosen.cause is Cause.THERMAL
                else self._rng.randrange(units[chosen.neuron])
                if chosen.neuron in units
                else None
            )
            cluster.simulator.inject(
                Injected(
                    cause=chosen.cause,
                    node=node,
                    start=since.timestamp(),
                    end=None,
                    gpu=gpu,
                    severity=severity_for(chosen.cause, chosen.factor),
                    neuron=chosen.neuron,
                )
            )
            cluster.job.slowdown = Slowdown(factor=chosen.factor, since=since)
        thresholds = thresholds_for(program, cluster.org.id) if program is not None else Thresholds()
        return Injection(
            org=cluster.org.id,
            cluster=cluster.name,
            job=cluster.job.job,
            cause=chosen.cause,
            node=node,
            gpu=gpu,
            factor=chosen.factor,
            since=since,
            alert_in=alert_delay(chosen.factor, thresholds),
        )

    def recover(self, *, at: datetime | None = None) -> list[str]:
        """End every injected fault (and the slowdowns they caused); the clusters that had one."""
        when = (at or self._clock()).timestamp()
        recovered = []
        with self._lock:
            for cluster in self.clusters:
                if cluster.open_faults(when):
                    recovered.append(f"{cluster.org.id}/{cluster.name}")
                cluster.simulator.clear(at=when)
                cluster.job.slowdown = None
        return recovered
