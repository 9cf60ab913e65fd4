"""Replay a recorded throughput trace through the detector: one episode per stall or slowdown, as JSON-ready dicts.

The trace is a CSV whose columns are the ingest API's sample keys, named in its header in any order: `ts, org,
cluster, job`, `tokens_per_second` or `samples_per_second` (one unit per job), and optionally `step`, `event`,
`nodes` (e.g. `ts,org,cluster,job,tokens_per_second,event`). ts in ISO-8601 UTC ending in `Z`, rows in time
order across all jobs, the rate empty on `start`/`end` rows (a value there is taken as a sample too); `step`
and `nodes` are checked (whole numbers; `nodes` tells a slow restart from one on fewer nodes). Each job
(org, cluster, job) gets its own `JobDetector`. Before each row, every job whose stall deadline has come is
advanced to that deadline, so a hang is detected at its last good sample + `stall_after`, as the live bot
would, and not at the next row; a heap of
deadlines keeps that cheap however many jobs there are. At the end of the trace every job is advanced to the
last ts in the file, or past it to `until` (a time, or a duration after the last row: `parse_until` reads
`2026-11-29T12:00:00Z` and `end+30m`), so a trace that ends in a hang reports it, as the live bot would once
`stall_after` had passed with no sample.

Episodes come out in the order they were detected, each once it has ended (or at the end of the trace,
`end` None if it had not): `{"kind", "org", "cluster", "job", "start", "detected_at", "end", "cause",
"suspects"}`. Throughput alone names no culprit: `cause` is "unknown" and `suspects` empty (per-node metrics
are what can name one).

With per-node metrics (`pitcrew throughput replay FILE.csv --metrics-url URL`) a second step, kept apart so
the replay itself stays free of I/O, names them: `replay`/`replay_csv` fill a `TraceSpan` (each cluster's
orgs and first ts, the trace's last ts, or `until` where the clock ran past it); `read_trace_metrics` reads
each cluster once through a reader over [its first ts - HEALTHY_BEFORE, the last ts]; `with_culprits` (pure)
gives each job episode the cause and suspects `find_culprit` finds over [start, end or the last ts] against
the hour before, and adds the `faulty_node` episodes `faulty_episodes` finds over the same metrics:
`{"kind": "faulty_node", "org", "cluster", "job": None, "node", "cause", "suspects": [node], "start",
"detected_at", "end"}`. All of them come out sorted by detected_at (then kind, org, cluster, job, node). A
cluster without metrics keeps "unknown"/[].
"""

from __future__ import annotations

import csv
import heapq
import math
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

from bot.monitor.metrics_reads import MetricsReader, within
from bot.monitor.throughput import DEFAULT_THRESHOLDS, Anomaly, JobDetector, Sample, Thresholds
from bot.node_metrics.culprit import HEALTHY_BEFORE, faulty_episodes, find_culprit
from bot.node_metrics.series import ClusterMetrics, FaultEpisode

HEADER = ("ts", "org", "cluster", "job", "tokens_per_second", "event")  # the usual header; any order of COLUMNS
REQUIRED = ("ts", "org", "cluster", "job")
VALUE_COLUMNS = ("tokens_per_second", "samples_per_second")
COLUMNS = (*REQUIRED, *VALUE_COLUMNS, "step", "event", "nodes")  # the ingest API's sample keys
COLUMNS_HINT = "ts,org,cluster,job, tokens_per_second or samples_per_second, and optionally step, event, nodes"
JobKey = tuple[str, str, str]
DetectorFactory = Callable[[Thresholds], JobDetector]  # or a peer with JobDetector's interface (a benchmark's)
Until = datetime | timedelta  # where the replay's clock stops: a time, or a duration after the last row


class ReplayError(ValueError):
    """A bad trace; the message names the line (1 is the header) and what is wrong, on one line."""

    def __init__(self, line: int, problem: str) -> None:
        super().__init__(f"line {line}: {problem}")
        self.line = line


def iso(ts: datetime) -> str:
    """ISO-8601 UTC ending in Z (seconds, or microseconds when there are any)."""
    return ts.astimezone(UTC).replace(tzinfo=None).isoformat() + "Z"


_OFFSET = re.compile(r"end\s*\+\s*((?:\d+(?:\.\d+)?\s*[smhd]\s*)+)", re.IGNORECASE)
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd])", re.IGNORECASE)
_UNIT = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
UNTIL_HINT = "give a time such as 2026-11-29T12:00:00Z, or end+DURATION such as end+30m, end+2h, end+1h30m"


def parse_until(text: str) -> Until:
    """`--until`: an ISO-8601 time with Z or an offset (an aware datetime), or `end+DURATION` (a timedelta after
    the last row; units s, m, h, d, combinable). Raises ValueError with one sentence saying how to give it."""
    given = text.strip()
    offset = _OFFSET.fullmatch(given)
    if offset is not None:
        seconds = sum(float(number) * _UNIT[unit.lower()] for number, unit in _PART.findall(offset.group(1)))
        if seconds <= 0:
            raise ValueError(f"{text!r} adds nothing to the last row's time: {UNTIL_HINT}")
        return timedelta(seconds=seconds)
    try:
        at = datetime.fromisoformat(given[:-1] + "+00:00" if given[-1:] in ("Z", "z") else given)
    except ValueError:
        raise ValueError(f"{text!r} is neither a time nor end+DURATION: {UNTIL_HINT}") from None
    if at.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone: end it with Z (UTC), e.g. 2026-11-29T12:00:00Z")
    return at.astimezone(UTC)


@dataclass(kw_only=True)
class ClusterSpan:
    """The rows of one cluster in a trace: the orgs that name it (in order of appearance) and its first ts."""

    orgs: list[str]
    first: datetime


@dataclass(kw_only=True)
class TraceSpan:
    """Where and when a trace's rows are, filled as the replay reads them: what the metrics are read over."""

    clusters: dict[str, ClusterSpan] = field(default_factory=dict)
    last: datetime | None = None  # the last ts of the whole trace, or `until`: where the replay advances every job

    def observe(self, org: str, cluster: str, ts: datetime) -> None:
        span = self.clusters.get(cluster)
        if span is None:
            self.clusters[cluster] = ClusterSpan(orgs=[org], first=ts)
        elif org not in span.orgs:
            span.orgs.append(org)
        self.last = ts  # rows are in time order

    def metrics_range(self, cluster: str) -> tuple[datetime, datetime]:
        """[first ts - HEALTHY_BEFORE, last ts]: the healthy hour before the cluster's first row included."""
        assert self.last is not None, "a cluster is in the span only once a row is"
        return self.clusters[cluster].first - HEALTHY_BEFORE, self.last


def replay(
    rows: Iterable[dict[str, str]],
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    *,
    detector: DetectorFactory = JobDetector,
    span: TraceSpan | None = None,
    until: Until | None = None,
) -> Iterator[dict[str, Any]]:
    """Replay rows as `csv.DictReader` gives them (the first row is line 2 of the file); `span`, when given, is
    filled as the rows are read (complete once the iterator is exhausted); `until` runs the clock past the last
    row (a time no row may be after, or a duration after the last row)."""
    return _replay(enumerate(rows, start=2), thresholds, detector, span, until)


def replay_csv(
    path: Path,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    *,
    span: TraceSpan | None = None,
    until: Until | None = None,
) -> Iterator[dict[str, Any]]:
    """Replay a CSV file; raises ReplayError (naming the line) on a bad header or row, as it reaches it."""
    return _replay(_read_csv(Path(path)), thresholds, JobDetector, span, until)


def header_problem(names: Sequence[str]) -> str | None:
    """What is wrong with a trace's column names, in one sentence, or None: every name one of COLUMNS, once,
    with REQUIRED and at least one of VALUE_COLUMNS."""
    unknown = [name for name in names if name not in COLUMNS]
    if unknown:
        return f"unknown column {_short(unknown[0])}"
    doubled = sorted({name for name in names if names.count(name) > 1})
    if doubled:
        return f"column {doubled[0]} is given twice"
    missing = [name for name in REQUIRED if name not in names]
    if not any(name in names for name in VALUE_COLUMNS):
        missing.append(" or ".join(VALUE_COLUMNS))
    return f"it lacks {', '.join(missing)}" if missing else None


def _read_csv(path: Path) -> Iterator[tuple[int, dict[str, str]]]:
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            raise ReplayError(1, f"the file is empty; expected a header such as {','.join(HEADER)}")
        names = tuple(name.strip() for name in header)
        problem = header_problem(names)
        if problem is not None:
            raise ReplayError(1, f"the header is {_short(','.join(header))}: {problem}; expected {COLUMNS_HINT}")
        for fields in reader:
            if not fields:  # a blank line
                continue
            if len(fields) != len(names):
                raise ReplayError(reader.line_num, f"{len(fields)} fields; expected {len(names)} ({','.join(names)})")
            yield reader.line_num, dict(zip(names, fields, strict=True))


def _short(text: object, limit: int = 60) -> str:
    shown = repr(text)
    return shown if len(shown) <= limit else shown[: limit - 4] + "...'"


class _Episode:
    __slots__ = ("detected_at", "end", "job", "kind", "start")

    def __init__(self, job: JobKey, anomaly: Anomaly) -> None:
        self.job = job
        self.kind = anomaly.kind
        self.start = anomaly.start
        self.detected_at = anomaly.detected_at
        self.end = anomaly.end

    def as_dict(self) -> dict[str, Any]:
        org, cluster, job = self.job
        return {
            "kind": self.kind,
            "org": org,
            "cluster": cluster,
            "job": job,
            "start": iso(self.start),
            "detected_at": iso(self.detected_at),
            "end": None if self.end is None else iso(self.end),
            "cause": "unknown",
            "suspects": [],
        }


def _parse_ts(text: str | None, line: int) -> datetime:
    if text is None or not text.endswith("Z"):
        raise ReplayError(line, f"ts {_short(text)} is not ISO-8601 UTC ending in Z (e.g. 2026-11-29T09:00:00Z)")
    try:
        ts = datetime.fromisoformat(text[:-1])
    except ValueError:
        raise ReplayError(
            line, f"ts {_short(text)} is not ISO-8601 UTC ending in Z (e.g. 2026-11-29T09:00:00Z)"
        ) from None
    if ts.tzinfo is not None:
        raise ReplayError(line, f"ts {_short(text)} has both an offset and Z; give UTC ending in Z")
    return ts.replace(tzinfo=UTC)


class _Row(NamedTuple):  # a tuple: a trace has millions of rows
    key: JobKey
    event: str | None
    value: float | None
    unit: str | None  # the column the value came from; None on an event row without one
    step: int | None  # checked, not used by the detector
    nodes: int | None  # the detector compares a restart with the last healthy run on the same nodes


_REQUIRED = frozenset(REQUIRED)


def _parse_row(row: dict[str, str], line: int) -> _Row:
    if None in row:
        raise ReplayError(line, f"more fields than the header ({','.join(name for name in row if name)})")
    unitless = "tokens_per_second" not in row and "samples_per_second" not in row
    if unitless or not row.keys() >= _REQUIRED:
        missing = [name for name in REQUIRED if name not in row]
        if unitless:
            missing.append(" or ".join(VALUE_COLUMNS))
        raise ReplayError(1, f"the header lacks {', '.join(missing)}; expected {COLUMNS_HINT}")
    if None in row.values():
        raise ReplayError(line, f"fewer fields than the header ({','.join(row)})")
    org, cluster, job = row["org"].strip(), row["cluster"].strip(), row["job"].strip()
    if not (org and cluster and job):
        raise ReplayError(line, f"{'org' if not org else 'cluster' if not cluster else 'job'} is empty")
    event_text = (row.get("event") or "").strip()
    if event_text not in ("", "start", "end"):
        raise ReplayError(line, f"unknown event {_short(event_text)} (expected start, end or empty)")
    event = event_text or None
    tokens, samples = row.get("tokens_per_second", "").strip(), row.get("samples_per_second", "").strip()
    if tokens and samples:
        raise ReplayError(line, "both tokens_per_second and samples_per_second are given; give one (one unit per job)")
    value: float | None = None
    unit: str | None = None
    if tokens or samples:
        unit, value_text = ("tokens_per_second", tokens) if tokens else ("samples_per_second", samples)
        try:
            value = float(value_text)
        except ValueError:
            raise ReplayError(line, f"{unit} {_short(value_text)} is not a number") from None
        if not math.isfinite(value):
            raise ReplayError(line, f"{unit} {_short(value_text)} is not a finite number")
        if value < 0:
            raise ReplayError(line, f"{unit} {_short(value_text)} is negative")
    elif event is None:
        columns = [name for name in VALUE_COLUMNS if name in row]
        raise ReplayError(
            line,
            f"{' and '.join(columns)} {'is' if len(columns) == 1 else 'are'} empty (only start and end rows may "
            "leave it empty)",
        )
    step, nodes = row.get("step"), row.get("nodes")
    return _Row(
        (org, cluster, job),
        event,
        value,
        unit,
        _whole(step, "step", 0, line) if step else None,
        _whole(nodes, "nodes", 1, line) if nodes else None,
    )


def _whole(text: str | None, name: str, least: int, line: int) -> int | None:
    if text is None or not text.strip():
        return None
    try:
        number = int(text.strip())
    except ValueError:
        number = least - 1
    if number < least:
        raise ReplayError(line, f"{name} {_short(text.strip())} is not a whole number of at least {least}")
    return number


def _replay(
    numbered: Iterable[tuple[int, dict[str, str]]],
    thresholds: Thresholds,
    make_detector: DetectorFactory,
    span: TraceSpan | None,
    until: Until | None = None,
) -> Iterator[dict[str, Any]]:
    detectors: dict[JobKey, JobDetector] = {}
    units: dict[JobKey, str] = {}  # each job's rate column: a job's baseline means nothing across units
    deadlines: list[tuple[datetime, int, JobKey]] = []  # (deadline, tie-break, job); at most one entry per job
    queued: set[JobKey] = set()
    pending: deque[_Episode] = deque()  # in order of detection; emitted once ended (or at the end)
    open_episodes: dict[JobKey, _Episode] = {}
    counter = 0

    def record(key: JobKey, changes: list[Anomaly]) -> None:
        for anomaly in changes:
            if anomaly.end is None:
                episode = _Episode(key, anomaly)
                open_episodes[key] = episode
                pending.append(episode)
            else:
                opened = open_episodes.pop(key, None)
                if opened is None or opened.kind != anomaly.kind or opened.start != anomaly.start:
                    opened = _Episode(key, anomaly)  # opened and closed by one call
                    pending.append(opened)
                opened.end = anomaly.end

    def fire_until(now: datetime) -> None:
        nonlocal counter
        while deadlines and deadlines[0][0] <= now:
            _, _, key = heapq.heappop(deadlines)
            detector = detectors[key]
            deadline = detector.next_deadline
            if deadline is not None and deadline <= now:
                record(key, detector.advance(deadline))
                deadline = detector.next_deadline
            if deadline is None:
                queued.discard(key)
            else:
                counter += 1
                heapq.heappush(deadlines, (deadline, counter, key))

    previous_text: str | None = None
    previous_ts: datetime | None = None
    for line, row in numbered:
        parsed = _parse_row(row, line)
        key, event, value = parsed.key, parsed.event, parsed.value
        if parsed.unit is not None and units.setdefault(key, parsed.unit) != parsed.unit:
            raise ReplayError(
                line, f"job {key[2]} gives {parsed.unit} here but {units[key]} before; give one unit per job"
            )
        text = row["ts"]
        if text == previous_text and previous_ts is not None:
            ts = previous_ts
        else:
            ts = _parse_ts(text, line)
            if previous_ts is not None and ts < previous_ts:
                raise ReplayError(
                    line, f"ts {text} is before the previous row's {iso(previous_ts)} (rows must be in time order)"
                )
            if isinstance(until, datetime) and ts > until:
                raise ReplayError(
                    line, f"ts {text} is after --until {iso(until)}; give a later time, or end+DURATION (e.g. end+30m)"
                )
            previous_text, previous_ts = text, ts
        if span is not None:
            span.observe(key[0], key[1], ts)
        fire_until(ts)
        detector = detectors.get(key)
        if detector is None:
            detector = detectors[key] = make_detector(thresholds)
        record(key, detector.observe(Sample(ts, value, event, parsed.nodes)))
        if key not in queued:
            deadline = detector.next_deadline
            if deadline is not None:
                counter += 1
                heapq.heappush(deadlines, (deadline, counter, key))
                queued.add(key)
        while pending and pending[0].end is not None:
            yield pending.popleft().as_dict()
    if previous_ts is not None:
        end = previous_ts
        if until is not None:  # the clock runs on with no sample: a job silent at the end stalls, as it would live
            end = until if isinstance(until, datetime) else previous_ts + until
            if span is not None:
                span.last = end
        fire_until(end)
        for key, detector in detectors.items():
            record(key, detector.advance(end))
    while pending:
        yield pending.popleft().as_dict()


async def read_trace_metrics(span: TraceSpan, reader: MetricsReader) -> dict[str, ClusterMetrics]:
    """Each cluster of the trace read once, over `span.metrics_range`; a cluster Prometheus has nothing for
    comes back with no series (its episodes stay "unknown"). The reader's errors pass through."""
    metrics: dict[str, ClusterMetrics] = {}
    for cluster in span.clusters:
        start, end = span.metrics_range(cluster)
        metrics[cluster] = await reader.cluster_metrics(cluster, start=start, end=end)
    return metrics


def with_culprits(
    episodes: Iterable[dict[str, Any]], span: TraceSpan, metrics: Mapping[str, ClusterMetrics]
) -> list[dict[str, Any]]:
    """The replay's episodes with the cause and suspects the metrics show, plus the faulty-node episodes, sorted
    by detected_at (then kind, org, cluster, job, node). Pure: the metrics were read before."""
    named: list[dict[str, Any]] = []
    for episode in episodes:
        cluster_metrics = metrics.get(episode["cluster"])
        if cluster_metrics is None or not cluster_metrics.series or span.last is None:
            named.append(episode)
            continue
        start = _parse_iso(episode["start"])
        end = span.last if episode["end"] is None else _parse_iso(episode["end"])
        healthy_start = start - HEALTHY_BEFORE
        verdict = find_culprit(  # on its own window: the analysis costs what it reads, and a trace can be weeks
            within(cluster_metrics, start=healthy_start, end=end),
            healthy_start=healthy_start,
            episode_start=start,
            episode_end=end,
        )
        named.append({**episode, "cause": verdict.cause.value, "suspects": list(verdict.suspects)})
    for cluster, cluster_span in span.clusters.items():
        cluster_metrics = metrics.get(cluster)
        if cluster_metrics is None or not cluster_metrics.series:
            continue
        for fault in faulty_episodes(cluster_metrics):
            if fault.end is not None and fault.end < cluster_span.first:
                continue  # over before the trace began: read only as the healthy hour before it
            named.extend(_faulty_node(org, cluster, fault) for org in cluster_span.orgs)
    return sorted(named, key=_detection_order)


async def replay_with_metrics(
    episodes: Iterable[dict[str, Any]], span: TraceSpan, reader: MetricsReader
) -> list[dict[str, Any]]:
    """`with_culprits` over what `reader` has for the trace's clusters."""
    return with_culprits(episodes, span, await read_trace_metrics(span, reader))


def _faulty_node(org: str, cluster: str, fault: FaultEpisode) -> dict[str, Any]:
    return {
        "kind": "faulty_node",
        "org": org,
        "cluster": cluster,
        "job": None,
        "node": fault.node,
        "cause": fault.cause.value,
        "suspects": [fault.node],
        "start": iso(fault.start),
        "detected_at": iso(fault.detected_at),
        "end": None if fault.end is None else iso(fault.end),
    }


def _parse_iso(text: str) -> datetime:
    return datetime.fromisoformat(text)  # what `iso` wrote: UTC ending in Z


def _detection_order(episode: dict[str, Any]) -> tuple[datetime, str, str, str, str, str]:
    # By time, not by text: "…00.500000Z" sorts before "…00Z" as text.
    return (
        _parse_iso(episode["detected_at"]),
        episode["kind"],
        episode["org"],
        episode["cluster"],
        episode["job"] or "",
        episode.get("node", ""),
    )
