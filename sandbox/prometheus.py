"""A real Prometheus for the tests and the sandbox: Debian's `prometheus` package (2.42), not an imitation.

History goes in through `promtool tsdb create-blocks-from openmetrics` before the server starts (Prometheus
loads blocks at start only); live values come from scraping endpoints that serve `exposition()` text, such as
the sandbox's simulated exporters (`LiveExporter`).

The series are named as the exporters name them: DCGM's gauges, and the EFA node exporter's counters without a
`_total` suffix (`node_amazonefa_rx_bytes`). promtool 2.42 accepts such counters in OpenMetrics and stores them
under that very name, so what the reader queries here is what it queries in production. The Neuron monitor's
as neuron-monitor-prometheus.py names them: one metric for several signals (`hardware_ecc_events_total` with its
`event_type`), and `neuron_hardware_info` with its counts as labels and 1 as its value.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import math
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import yaml

from bot.node_metrics.series import SELECTOR, ClusterMetrics, Series, Signal

PROMETHEUS = "/usr/bin/prometheus"
PROMTOOL = "/usr/bin/promtool"

Sample = tuple[Signal, str, str, float]  # (signal, node, device, value), as NodeMetricsSimulator.values_at gives

READY_TIMEOUT_SECONDS = 30.0
STOP_TIMEOUT_SECONDS = 10.0
# A sample this much later than the one before it (in steps) means the exporter was down in between: its
# counters start again from zero, as a restarted exporter's do.
GAP_STEPS = 1.5


class PrometheusStartError(RuntimeError):
    """promtool refused the history, or the server did not become ready; the message ends with its log."""


def _label_value(value: str) -> str:
    """A label value in the text formats' quoting (the same escapes in OpenMetrics and 0.0.4)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    return "{" + ",".join(f"{name}={_label_value(value)}" for name, value in pairs) + "}"


def _series_labels(
    series_signal: Signal, node: str, device: str, *, cluster: str, node_label: str, cluster_label: str
) -> str:
    pairs = [(cluster_label, cluster), (node_label, node)]
    if device and series_signal.device_label:
        pairs.append((series_signal.device_label, device))
    if series_signal.metric in SELECTOR:
        pairs.append((SELECTOR[series_signal.metric], series_signal.selects))
    return _labels(pairs)


def _info_labels(
    node: str, device: str, counts: dict[Signal, float], *, cluster: str, node_label: str, cluster_label: str
) -> str:
    """An info metric's labels: its counts (as the exporter writes them, integers) beside the device label."""
    pairs = [(cluster_label, cluster), (node_label, node)]
    if device:
        pairs.append((Signal.NEURON_DEVICES.device_label, device))
    pairs += [(signal.selects, str(round(value))) for signal, value in sorted(counts.items()) if math.isfinite(value)]
    return _labels(pairs)


def _families() -> dict[str, list[Signal]]:
    """Each metric's signals, in the order of Signal (OpenMetrics wants each family in one piece)."""
    out: dict[str, list[Signal]] = {}
    for series_signal in Signal:
        out.setdefault(series_signal.metric, []).append(series_signal)
    return out


def _number(value: float) -> str:
    if math.isfinite(value):
        return repr(float(value))
    if math.isnan(value):
        return "NaN"
    return "+Inf" if value > 0 else "-Inf"


def _cumulative(series: Series, step_seconds: float) -> list[float]:
    """A counter's values from its per-second rates: each sample adds rate x the time since the one before.

    The first sample is 0 (the counter as the exporter started), and so is the first after a gap (an
    exporter restart resets it), which rate() reads as a reset rather than as a burst."""
    totals: list[float] = []
    total = 0.0
    previous: float | None = None
    for at, rate in zip(series.times, series.values, strict=True):
        if previous is None or at - previous > GAP_STEPS * step_seconds:
            total = 0.0
        else:
            total += max(rate, 0.0) * (at - previous)
        totals.append(total)
        previous = at
    return totals


def openmetrics(
    metrics: Iterable[ClusterMetrics], *, node_label: str = "instance_id", cluster_label: str = "cluster"
) -> str:
    """OpenMetrics text of these clusters' series, for `promtool tsdb create-blocks-from openmetrics`.

    One family per signal (OpenMetrics forbids interleaving them), each series in time order as promtool
    requires; timestamps in seconds. Counters are written as the exporter would count them, integrated from
    the rates (see `_cumulative`)."""
    by_signal: dict[Signal, list[tuple[ClusterMetrics, Series]]] = {}
    for cluster_metrics in metrics:
        for series in cluster_metrics.series:
            by_signal.setdefault(series.signal, []).append((cluster_metrics, series))
    lines: list[str] = []
    for metric, signals in _families().items():
        members = [member for series_signal in signals for member in by_signal.get(series_signal, [])]
        if not members:
            continue
        lines.append(f"# TYPE {metric} {'counter' if signals[0].is_counter else 'gauge'}")
        if signals[0].from_label:
            lines.extend(_info_lines(metric, members, node_label=node_label, cluster_label=cluster_label))
            continue
        for cluster_metrics, series in members:
            series_signal = series.signal
            labels = _series_labels(
                series_signal,
                series.node,
                series.device,
                cluster=cluster_metrics.cluster,
                node_label=node_label,
                cluster_label=cluster_label,
            )
            if any(later < earlier for earlier, later in itertools.pairwise(series.times)):
                # promtool takes each series in time order (and a counter is summed in that order).
                ordered = sorted(zip(series.times, series.values, strict=True))
                series = replace(series, times=tuple(t for t, _ in ordered), values=tuple(v for _, v in ordered))
            values = _cumulative(series, cluster_metrics.step_seconds) if series_signal.is_counter else series.values
            prefix = metric + labels + " "
            lines.extend(f"{prefix}{_number(value)} {at!r}" for at, value in zip(series.times, values, strict=True))
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def _info_lines(
    metric: str, members: list[tuple[ClusterMetrics, Series]], *, node_label: str, cluster_label: str
) -> list[str]:
    """An info metric's samples (value 1), its counts as labels: one series per label set, each in time order
    (a count that changes makes another series, as an exporter restarted with another count would)."""
    counts: dict[tuple[str, str, str], dict[float, dict[Signal, float]]] = {}
    for cluster_metrics, series in members:
        per_time = counts.setdefault((cluster_metrics.cluster, series.node, series.device), {})
        for at, value in zip(series.times, series.values, strict=True):
            per_time.setdefault(at, {})[series.signal] = value
    by_labels: dict[str, list[float]] = {}
    for (cluster, node, device), per_time in counts.items():
        for at in sorted(per_time):
            labels = _info_labels(
                node, device, per_time[at], cluster=cluster, node_label=node_label, cluster_label=cluster_label
            )
            by_labels.setdefault(labels, []).append(at)
    return [f"{metric}{labels} 1.0 {at!r}" for labels, times in by_labels.items() for at in times]


def exposition(
    samples: Iterable[Sample], *, cluster: str, node_label: str = "instance_id", cluster_label: str = "cluster"
) -> str:
    """Prometheus text format 0.0.4 of live values, for a scrape endpoint (no timestamps: the scrape's own).

    A counter's value here is its running total, not a rate: `LiveExporter` keeps those totals from a
    simulator's rates."""
    by_signal: dict[Signal, list[tuple[str, str, float]]] = {}
    for series_signal, node, device, value in samples:
        by_signal.setdefault(series_signal, []).append((node, device, value))
    lines: list[str] = []
    for metric, signals in _families().items():
        if not any(by_signal.get(series_signal) for series_signal in signals):
            continue
        lines.append(f"# TYPE {metric} {'counter' if signals[0].is_counter else 'gauge'}")
        if signals[0].from_label:
            info: dict[tuple[str, str], dict[Signal, float]] = {}
            for series_signal in signals:
                for node, device, value in by_signal.get(series_signal, []):
                    info.setdefault((node, device), {})[series_signal] = value
            for (node, device), counts in info.items():
                labels = _info_labels(
                    node, device, counts, cluster=cluster, node_label=node_label, cluster_label=cluster_label
                )
                lines.append(f"{metric}{labels} 1.0")
            continue
        for series_signal in signals:
            for node, device, value in by_signal.get(series_signal, []):
                labels = _series_labels(
                    series_signal, node, device, cluster=cluster, node_label=node_label, cluster_label=cluster_label
                )
                lines.append(f"{metric}{labels} {_number(value)}")
    return "\n".join(lines) + "\n"


@dataclass
class LiveExporter:
    """What the DCGM and EFA exporters of one simulated cluster serve: `values_at(now)` at each scrape, with
    each counter's rate accumulated into a running total since the first scrape (thread-safe: the scrape
    endpoint may be called from a server thread)."""

    values_at: Callable[[float], Iterable[Sample]]
    cluster: str
    node_label: str = "instance_id"
    cluster_label: str = "cluster"
    clock: Callable[[], float] = time.time
    _totals: dict[tuple[Signal, str, str], tuple[float, float]] = field(default_factory=dict, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def scrape(self, now: float | None = None) -> str:
        at = self.clock() if now is None else now
        current: list[Sample] = []
        with self._lock:
            for series_signal, node, device, value in self.values_at(at):
                if series_signal.is_counter:
                    key = (series_signal, node, device)
                    total, since = self._totals.get(key, (0.0, at))
                    total += max(value, 0.0) * max(at - since, 0.0)
                    self._totals[key] = (total, at)
                    value = total
                current.append((series_signal, node, device, value))
        return exposition(current, cluster=self.cluster, node_label=self.node_label, cluster_label=self.cluster_label)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _scrape_config(target: str, index: int, scrape_interval: str) -> dict[str, object]:
    parts = urlsplit(target)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"scrape target {target!r} is not an http(s) URL, e.g. http://127.0.0.1:8000/metrics")
    job: dict[str, object] = {
        "job_name": f"target-{index}",
        "honor_labels": True,  # the exporter's cluster and node labels win over Prometheus's own
        "scheme": parts.scheme,
        "metrics_path": parts.path or "/metrics",
        "scrape_interval": scrape_interval,
        "static_configs": [{"targets": [parts.netloc]}],
    }
    if parts.query:
        job["params"] = parse_qs(parts.query)
    return job


def _log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def backfill(history: str, data_dir: Path, *, work_dir: Path) -> None:
    """Write `history` (OpenMetrics text) into TSDB blocks under `data_dir` with promtool."""
    source = work_dir / "history.om"
    source.write_text(history)
    done = subprocess.run(
        [PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(source), str(data_dir)],
        capture_output=True,
        text=True,
        check=False,
    )
    source.unlink()
    if done.returncode != 0:
        raise PrometheusStartError(f"promtool refused the history (exit {done.returncode}):\n{done.stderr[-2000:]}")


def _wait_ready(process: subprocess.Popen[bytes], url: str, log: Path) -> bool:
    """True once /-/ready answers 200; False if the process exited first (a port taken meanwhile)."""
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as answer:
                if answer.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.02)
    _stop(process)
    raise PrometheusStartError(f"Prometheus was not ready within {READY_TIMEOUT_SECONDS:.0f} s:\n{_log_tail(log)}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=STOP_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()  # Prometheus is one process: nothing of its own to leave behind
        process.wait()


@contextlib.contextmanager
def prometheus_server(
    *,
    history: str | None = None,
    scrape_targets: Sequence[str] = (),
    scrape_interval: str = "30s",
    data_dir: Path | None = None,
) -> Iterator[str]:
    """A Prometheus on a free port of 127.0.0.1, holding `history` (OpenMetrics text, backfilled before it
    starts) and scraping `scrape_targets` (URLs of text-format endpoints; honor_labels) every
    `scrape_interval`; yields its base URL (`http://127.0.0.1:PORT`) and stops it on exit.

    `data_dir` keeps the TSDB there (else a temporary directory, removed on exit). Retention is 100 years, so
    history of any date stays queryable."""
    if not (os.access(PROMETHEUS, os.X_OK) and os.access(PROMTOOL, os.X_OK)):
        raise PrometheusStartError(
            f"{PROMETHEUS} and {PROMTOOL} are needed: install Debian's prometheus package (make prometheus)"
        )
    work = Path(tempfile.mkdtemp(prefix="pitcrew-prometheus-"))
    try:
        storage = data_dir or work / "data"
        storage.mkdir(parents=True, exist_ok=True)
        if history:
            backfill(history, storage, work_dir=work)
        config = work / "prometheus.yml"
        config.write_text(
            yaml.safe_dump(
                {
                    "global": {"scrape_interval": scrape_interval, "evaluation_interval": scrape_interval},
                    "scrape_configs": [
                        _scrape_config(target, index, scrape_interval) for index, target in enumerate(scrape_targets)
                    ],
                }
            )
        )
        log = work / "prometheus.log"
        for _attempt in range(5):  # the free port may be taken between the probe and Prometheus's bind
            url = f"http://127.0.0.1:{_free_port()}"
            with log.open("wb") as log_file:
                process = subprocess.Popen(
                    [
                        PROMETHEUS,
                        f"--config.file={config}",
                        f"--storage.tsdb.path={storage}",
                        "--storage.tsdb.retention.time=100y",
                        f"--web.listen-address={url.removeprefix('http://')}",
                        "--log.level=warn",
                    ],
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    # In the caller's process group: a Ctrl-C in the terminal stops it with the sandbox.
                    stdin=subprocess.DEVNULL,
                )
            if _wait_ready(process, url, log):
                break
        else:
            raise PrometheusStartError(f"Prometheus exited at start:\n{_log_tail(log)}")
        try:
            yield url
        finally:
            _stop(process)
    finally:
        shutil.rmtree(work, ignore_errors=True)


class PrometheusPool:
    """Running Prometheus servers by what they hold, for the tests and benchmarks: `holding(...)` answers the URL
    of a server loaded with exactly those clusters' metrics, starting one only for data not seen before (a
    start is promtool plus about 0.1 s; the same data asked twice is served by the same server).

    At most `keep` servers run at once; the least recently asked is stopped to make room, so a caller should
    not hold more than `keep` URLs at a time. Servers are read-only for their callers: nothing scrapes them."""

    def __init__(self, *, keep: int = 8) -> None:
        self._keep = keep
        self._servers: dict[str, tuple[str, contextlib.ExitStack]] = {}  # in order of last use, oldest first

    def holding(self, *metrics: ClusterMetrics, node_label: str = "instance_id", cluster_label: str = "cluster") -> str:
        history = openmetrics(metrics, node_label=node_label, cluster_label=cluster_label)
        key = hashlib.sha256(history.encode()).hexdigest()
        known = self._servers.pop(key, None)
        if known is None:
            while len(self._servers) >= self._keep:
                _, oldest = self._servers.pop(next(iter(self._servers)))
                oldest.close()
            stack = contextlib.ExitStack()
            url = stack.enter_context(prometheus_server(history=history))
            known = (url, stack)
        self._servers[key] = known
        return known[0]

    def close(self) -> None:
        for _, stack in self._servers.values():
            stack.close()
        self._servers.clear()
