"""The one place Pitcrew talks to Prometheus: per-node DCGM (GPU), Neuron monitor (Trainium) and EFA series of
one cluster over a time range, read with PromQL over the HTTP API (`/api/v1/query_range`), optionally signed
with SigV4 for Amazon Managed Service for Prometheus. Every cluster is asked for both accelerators' series (a
GPU cluster's Neuron queries come back empty, and the reverse): one shape out, whichever it is.

What each query asks, for the selector `{<cluster_label>="<cluster>"}`:
- counters (EFA bytes and retransmits): `rate(x{...}[2m])`, per second, as the analysis holds them;
- gauges: `last_over_time(x{...}[45s])` (1.5 scrape intervals), so an exporter that stopped shows as a gap
  within a step instead of its last value carried on for Prometheus's 5-minute lookback; XIDs take
  `max_over_time`, so an error seen between two steps is not lost when the step is longer than the scrape;
- all `max by (<node_label>, gpu|device)`, so a node's GPU is one series even when its exporter was restarted
  under another pod or scraped by two jobs.
The Neuron monitor is often scraped less often than the EFA exporter (15 to 60 s are all normal), so its
gauges look back 90 s (1.5 of the slowest) and its counters take `rate(x[4m])` (four of the slowest scrapes).
Its per-runtime counters (execution errors and statuses: one runtime per worker process) are summed over
`runtime_tag` after the `max by` that folds duplicate scrapes. The ECC events' four types are one query,
selected exactly (`event_type=~"a|b|c|d"` is a whole-value match in PromQL, never a prefix); execution errors
are read for `error_type="hardware"` only (the others are the application's), statuses for `completed`.
`neuron_hardware_info` is an info metric: its counts are labels, turned into values here.
Prometheus refuses more than 11,000 points per series, so a long range is read in chunks.

A reader made with `remember=True` (the live monitor's, by `reader_for`) keeps each cluster's last read, and a
read that starts on the same grid and ends later reads only what is new: from REREAD before the last read's end
(late scrapes and remote-write lag; rate()'s window), the older points taken from the last read. Each step's
value depends only on the samples before it, so the answer is the one a full read gives. A cold reader (a
restart) reads everything; a cluster not read for FORGET_AFTER is forgotten, and each cluster holds one window.
"""

from __future__ import annotations

import asyncio
import json
import math
import warnings
from bisect import bisect_left
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import httpx
import numpy as np
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.exceptions import BotoCoreError, ClientError

from bot.clusters.accounts import AwsAccounts
from bot.config import MetricsConfig, OrgConfig
from bot.node_metrics.series import SELECTOR, ClusterMetrics, Family, Series, Signal
from bot.tls import tls_context

SCRAPE_INTERVAL = timedelta(seconds=30)  # what the HyperPod and ParallelCluster observability stacks use
RATE_WINDOW = timedelta(minutes=2)  # four scrapes: rate() survives one missed scrape
NEURON_SCRAPE = timedelta(seconds=60)  # the slowest Neuron monitor scrape taken as normal
NEURON_RATE_WINDOW = timedelta(minutes=4)  # four of those scrapes
RUNTIME_LABEL = "runtime_tag"  # the Neuron runtime (one per worker process) a counter is of
MAX_POINTS = 11_000  # Prometheus's limit per series of one query_range
SIGV4_SERVICE = "aps"  # Amazon Managed Service for Prometheus
TIMEOUT = httpx.Timeout(30.0, connect=5.0)
REREAD = timedelta(minutes=5)  # of a remembered read, the newest part read again
FORGET_AFTER = timedelta(minutes=15)  # a remembered cluster not read for this long is dropped
_SNIPPET = 160  # characters of an unexpected answer quoted in an error


# One series of an answer: its labels, its times and its values (float64 arrays of the same length, as sent).
_Answered = tuple[dict[str, str], np.ndarray, np.ndarray]


def _reads() -> tuple[tuple[Signal, ...], ...]:
    """The signals each query reads: one metric's signals together (the ECC events' four types, the hardware
    info's two counts), every other signal on its own."""
    by_metric: dict[str, list[Signal]] = {}
    for signal in Signal:
        by_metric.setdefault(signal.metric, []).append(signal)
    return tuple(tuple(signals) for signals in by_metric.values())


READS = _reads()


class MetricsError(Exception):
    """Reading metrics failed; the message is one line: which Prometheus, and what went wrong."""


def promql_string(value: str) -> str:
    """`value` as a PromQL double-quoted string literal (Go's escapes: backslash, quote, newline)."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


def _one_line(text: str, limit: int = _SNIPPET) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _seconds(value: timedelta) -> str:
    return f"{math.ceil(value.total_seconds())}s"


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


class PrometheusReader:
    """Reads one org's per-node metrics. `credentials` (a callable returning botocore Credentials) and `region`
    are needed when the config says `sigv4: true`; each request is signed with fresh credentials, so an assumed
    role's renewal is picked up. Owns its httpx client unless one is given."""

    def __init__(
        self,
        *,
        config: MetricsConfig,
        http: httpx.AsyncClient | None = None,
        credentials: Callable[[], Any] | None = None,
        region: str | None = None,
        step: timedelta = SCRAPE_INTERVAL,
        remember: bool = False,
    ) -> None:
        if config.sigv4 and (credentials is None or not region):
            raise ValueError("sigv4 metrics need credentials and a region to sign with")
        if step.total_seconds() <= 0:
            raise ValueError(f"step must be positive, not {step}")
        self._config = config
        self._base = config.prometheus_url.rstrip("/")
        self._owns_http = http is None
        self._http = http or httpx.AsyncClient(timeout=TIMEOUT, verify=tls_context())
        self._credentials = credentials
        self._region = region
        self._step = step.total_seconds()
        self._remember = remember
        self._recent: dict[str, ClusterMetrics] = {}  # cluster -> its last read, when remembering

    @property
    def url(self) -> str:
        return self._base

    def query(self, signal: Signal, cluster: str) -> str:
        """The PromQL this reader sends for one signal of one cluster (the query of its metric's signals)."""
        return self._query(next(group for group in READS if signal in group), cluster)

    def _by(self, group: tuple[Signal, ...]) -> list[str]:
        """The labels an answer's series are told apart by."""
        first = group[0]
        if first.from_label:
            return [self._config.node_label, first.device_label, *(s.selects for s in group)]
        by = [self._config.node_label] + ([first.device_label] if first.device_label else [])
        return by + ([SELECTOR[first.metric]] if first.metric in SELECTOR else [])

    def _query(self, group: tuple[Signal, ...], cluster: str) -> str:
        first = group[0]
        matchers = [f"{self._config.cluster_label}={promql_string(cluster)}"]
        if first.metric in SELECTOR:  # exact values, never a prefix: `=~` matches the whole value
            values = [s.selects for s in group]
            op, value = ("=", values[0]) if len(values) == 1 else ("=~", "|".join(values))
            matchers.append(f"{SELECTOR[first.metric]}{op}{promql_string(value)}")
        selected = f"{first.metric}{{{','.join(matchers)}}}"
        by = ", ".join(self._by(group))
        neuron = first.family is Family.NEURON
        scrape = (NEURON_SCRAPE if neuron else SCRAPE_INTERVAL).total_seconds()
        if first.is_counter:
            window = max((NEURON_RATE_WINDOW if neuron else RATE_WINDOW).total_seconds(), self._step)
            inner = f"rate({selected}[{_seconds(timedelta(seconds=window))}])"
            if neuron:  # duplicate scrapes folded per runtime, then the node's runtimes summed
                return f"sum by ({by}) (max by ({by}, {RUNTIME_LABEL}) ({inner}))"
        else:
            window = 1.5 * max(self._step, scrape)
            over_time = "max_over_time" if first is Signal.XID else "last_over_time"
            inner = f"{over_time}({selected}[{_seconds(timedelta(seconds=window))}])"
        return f"max by ({by}) ({inner})"

    async def cluster_metrics(self, cluster: str, *, start: datetime, end: datetime) -> ClusterMetrics:
        """Every signal of `cluster` over [start, end], evaluated at start, start + step, ... up to end.

        Raises MetricsError when Prometheus cannot be reached or refuses a query."""
        start, end = _utc(start), _utc(end)
        if end < start:
            raise ValueError(f"end {end.isoformat()} is before start {start.isoformat()}")
        recent = self._recent.get(cluster) if self._remember else None
        resume = self._resume_at(recent, start=start, end=end) if recent is not None else None
        series = await self._read(cluster, start=resume or start, end=end)
        if recent is not None and resume is not None:
            series = _merged(recent, series, start=start.timestamp(), resume=resume.timestamp(), step=self._step)
        read = ClusterMetrics(cluster=cluster, start=start, end=end, step_seconds=self._step, series=series)
        if self._remember:
            self._recent[cluster] = read
            for other in [name for name, kept in self._recent.items() if kept.end < end - FORGET_AFTER]:
                del self._recent[other]
        return read

    def forget(self) -> None:
        """Drop every remembered read (the next read of each cluster reads it whole)."""
        self._recent.clear()

    def _resume_at(self, recent: ClusterMetrics, *, start: datetime, end: datetime) -> datetime | None:
        """Where a read of [start, end] may begin, the rest taken from `recent`; None to read it whole: the
        last read does not cover `start`, is on another grid, ends later, or has nothing older than REREAD."""
        step = timedelta(seconds=self._step)
        if recent.step_seconds != self._step or recent.start > start or recent.end > end:
            return None
        if (start - recent.start) % step:
            return None  # its points are at other times than this read's
        resume_from = recent.end - REREAD
        if resume_from <= start:
            return None
        return start + math.ceil((resume_from - start) / step) * step

    async def _read(self, cluster: str, *, start: datetime, end: datetime) -> tuple[Series, ...]:
        answers = await asyncio.gather(
            *(self._group_series(group, cluster, start=start, end=end) for group in READS),
            return_exceptions=True,
        )
        series: list[Series] = []
        for answer in answers:
            if isinstance(answer, BaseException):
                raise answer
            series.extend(answer)
        return tuple(series)

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    def _chunks(self, start: datetime, end: datetime) -> list[tuple[float, float]]:
        """[first, last] evaluation times of each query_range, at most MAX_POINTS points apiece."""
        step = self._step
        first = start.timestamp()
        last = first + math.floor((end.timestamp() - first) / step) * step
        chunks: list[tuple[float, float]] = []
        while first <= last:
            chunk_last = min(last, first + (MAX_POINTS - 1) * step)
            chunks.append((first, chunk_last))
            first = chunk_last + step
        return chunks

    async def _group_series(
        self, group: tuple[Signal, ...], cluster: str, *, start: datetime, end: datetime
    ) -> list[Series]:
        query = self._query(group, cluster)
        first_signal = group[0]
        selector = SELECTOR.get(first_signal.metric)
        by_value = {s.selects: s for s in group}
        pieces: dict[tuple[Signal, str, str], list[tuple[np.ndarray, np.ndarray]]] = {}
        for first, last in self._chunks(start, end):
            for metric, times, values in await self._query_range(query, first, last):
                node = metric.get(self._config.node_label, "")
                if not node:
                    continue  # a series that names no node cannot be compared with peers
                device = metric.get(first_signal.device_label, "") if first_signal.device_label else ""
                if first_signal.from_label:
                    for signal in group:  # an info metric: each count is a label, the same at every point
                        count = _label_number(metric.get(signal.selects, ""))
                        if count is not None:
                            filled = np.where(np.isfinite(values), count, np.nan)
                            pieces.setdefault((signal, node, device), []).append((times, filled))
                    continue
                read = by_value.get(metric.get(selector, "")) if selector else first_signal
                if read is not None:  # (an answer only holds the values asked for; anything else is not read)
                    pieces.setdefault((read, node, device), []).append((times, values))
        found = []
        order = {signal: index for index, signal in enumerate(Signal)}  # a full read's order, as _merged's
        for (signal, node, device), parts in sorted(pieces.items(), key=lambda item: (order[item[0][0]], item[0][1:])):
            times, values = _ascending(parts, keep="min" if signal.from_label else "last")
            if len(times):
                found.append(Series(signal, node, device, tuple(times.tolist()), tuple(values.tolist())))
        return found

    async def _query_range(self, query: str, first: float, last: float) -> list[_Answered]:
        url = f"{self._base}/api/v1/query_range"
        body = urlencode({"query": query, "start": repr(first), "end": repr(last), "step": repr(self._step)})
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        if self._config.sigv4:
            headers = await self._signed(url, body, headers)
        try:
            response = await self._http.post(url, content=body.encode(), headers=headers)
        except httpx.TimeoutException:
            waited = self._http.timeout.read
            within = f" within {waited:g} s" if waited else ""
            raise MetricsError(f"Prometheus at {self._base}: no answer{within}") from None
        except httpx.HTTPError as error:
            reason = _one_line(str(error)) or type(error).__name__
            raise MetricsError(f"Prometheus at {self._base} is unreachable: {reason}") from None
        return self._parse(response, query)

    async def _signed(self, url: str, body: str, headers: dict[str, str]) -> dict[str, str]:
        assert self._credentials is not None and self._region  # checked in __init__
        try:
            # An assumed role may need STS (a blocking boto3 call), so not on the event loop.
            credentials = await asyncio.to_thread(self._credentials)
        except (BotoCoreError, ClientError, RuntimeError) as error:
            raise MetricsError(
                f"Prometheus at {self._base}: no AWS credentials to sign with SigV4 ({_one_line(str(error))})"
            ) from None
        request = AWSRequest(method="POST", url=url, data=body, headers=headers)
        SigV4Auth(credentials, SIGV4_SERVICE, self._region).add_auth(request)
        return dict(request.headers.items())

    def _parse(self, response: httpx.Response, query: str) -> list[_Answered]:
        if response.status_code == 200 and (matrix := _compact_matrix(response.content)) is not None:
            return matrix
        try:
            answer = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            answer = None
        if not isinstance(answer, dict):
            status = "" if response.status_code == 200 else f" HTTP {response.status_code},"
            raise MetricsError(
                f"Prometheus at {self._base}:{status} the answer is not Prometheus JSON: "
                f"{_one_line(response.text) or '(empty)'!r}"
            )
        if answer.get("status") == "error" or response.status_code != 200:
            # Prometheus says why in errorType/error; AMP and proxies in "message".
            reason = answer.get("error") or answer.get("message") or answer.get("Message") or "no reason given"
            kind = answer.get("errorType")
            raise MetricsError(
                f"Prometheus at {self._base} refused {_one_line(query, 200)!r} (HTTP {response.status_code}"
                f"{', ' + str(kind) if kind else ''}): {_one_line(str(reason), 300)}"
            )
        data = answer.get("data")
        if not isinstance(data, dict) or data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
            raise MetricsError(f"Prometheus at {self._base}: expected a matrix, got {_one_line(json.dumps(data))!r}")
        try:
            return [_answered(item) for item in data["result"]]
        except (KeyError, TypeError, ValueError) as error:
            raise MetricsError(
                f"Prometheus at {self._base}: a series in the answer is malformed ({_one_line(str(error))})"
            ) from None


_VALUES = b'"values":['


def _compact_matrix(body: bytes) -> list[_Answered] | None:
    """A matrix as Prometheus encodes it (compact JSON, `"values":[[1764000000,"1.5"],...]`), read about four
    times faster than json + numpy: each values array is cut out of the body and read by numpy's text parser
    in one go, and json reads only the rest. None when the body is anything else (another encoding, an error,
    a malformed series): the general path then reads it, or says what is wrong. A JSON string cannot hold
    `"values":[` (its quotes would be escaped), and the pairs hold no `]`, so the cuts are exact."""
    pieces = body.split(_VALUES)
    skeleton, arrays = [pieces[0]], []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy warns, and stops, at text it cannot read
        for piece in pieces[1:]:
            if piece.startswith(b"]"):
                arrays.append(np.empty((0, 2)))
                skeleton.append(piece)  # "values":[] as it was
                continue
            close = piece.find(b"]]")
            if not piece.startswith(b"[") or close < 0:
                return None
            pairs = piece[1:close]
            expected = 2 * (pairs.count(b"],[") + 1)
            try:
                flat = np.fromstring(pairs.replace(b"],[", b",").replace(b'"', b""), sep=",")
            except (ValueError, DeprecationWarning):
                return None
            if flat.size != expected:
                return None
            arrays.append(flat.reshape(-1, 2))
            skeleton.append(b"]" + piece[close + 2 :])  # "values":[] in the rest
    try:
        answer = json.loads(_VALUES.join(skeleton) if len(pieces) > 1 else body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    data = answer.get("data") if isinstance(answer, dict) and answer.get("status") == "success" else None
    result = data.get("result") if isinstance(data, dict) and data.get("resultType") == "matrix" else None
    if not isinstance(result, list) or len(result) != len(arrays):
        return None
    matrix: list[_Answered] = []
    for item, pairs_read in zip(result, arrays, strict=True):
        if not isinstance(item, dict) or not isinstance(item.get("metric"), dict) or item.get("values") != []:
            return None
        matrix.append((dict(item["metric"]), pairs_read[:, 0], pairs_read[:, 1]))
    return matrix


def _answered(item: Any) -> _Answered:
    """One series of a matrix: numpy reads its [time, "value"] pairs in one go (Prometheus sends values as
    strings, "NaN" and "+Inf" included), far faster than a float() per point in Python."""
    labels = dict(item["metric"])
    pairs = np.array(item["values"], dtype=np.float64)
    if pairs.size == 0:
        return labels, np.empty(0), np.empty(0)
    if pairs.ndim != 2 or pairs.shape[1] != 2:
        raise ValueError(f"values are not [time, value] pairs (shape {pairs.shape})")
    return labels, pairs[:, 0], pairs[:, 1]


def _label_number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _ascending(parts: list[tuple[np.ndarray, np.ndarray]], *, keep: str = "last") -> tuple[np.ndarray, np.ndarray]:
    """The finite samples of a series' chunks, by ascending time; of two samples at one time, the later one
    read (chunks do not overlap, so this only matters to an answer that repeats a time), or with `keep="min"`
    the least (an info metric whose count changed shows both label sets for a lookback: a device that went
    missing is missing at once)."""
    times = np.concatenate([t for t, _ in parts])
    values = np.concatenate([v for _, v in parts])
    finite = np.isfinite(values)
    if not finite.all():
        times, values = times[finite], values[finite]
    if len(times) > 1 and not (np.diff(times) > 0).all():
        if keep == "min":
            order = np.lexsort((values, times))  # by time, then value: the first of each time is its least
            times, values = times[order], values[order]
            kept, first = np.unique(times, return_index=True)
            return kept, values[first]
        # np.unique keeps the first of equal times: of the reversed arrays, that is the last one read.
        kept, first = np.unique(times[::-1], return_index=True)
        times, values = kept, values[::-1][first]
    return times, values


def _merged(
    recent: ClusterMetrics, tail: tuple[Series, ...], *, start: float, resume: float, step: float
) -> tuple[Series, ...]:
    """`recent`'s points in [start, resume) then `tail`'s (read from `resume`), in a full read's order: by
    signal, then node and device. Points are on one grid, so half a step tells them apart whatever the
    rounding of their times."""
    order = {signal: index for index, signal in enumerate(Signal)}
    parts: dict[tuple[Signal, str, str], list[tuple[tuple[float, ...], tuple[float, ...]]]] = {}
    for one in recent.series:
        first, last = bisect_left(one.times, start - step / 2), bisect_left(one.times, resume - step / 2)
        if first < last:
            parts[(one.signal, one.node, one.device)] = [(one.times[first:last], one.values[first:last])]
    for one in tail:
        parts.setdefault((one.signal, one.node, one.device), []).append((one.times, one.values))
    return tuple(
        Series(signal, node, device, sum((t for t, _ in kept), ()), sum((v for _, v in kept), ()))
        for (signal, node, device), kept in sorted(parts.items(), key=lambda item: (order[item[0][0]], item[0][1:]))
    )


def reader_for(
    org: OrgConfig, accounts: AwsAccounts, *, http: httpx.AsyncClient | None = None
) -> PrometheusReader | None:
    """The reader of an org's metrics for the live monitor (remembering its reads: each check reads only what
    is new), or None when it has none; with `sigv4: true`, requests are signed with the org's credentials (its
    role when it has one) in its region."""
    if org.metrics is None:
        return None
    if not org.metrics.sigv4:
        return PrometheusReader(config=org.metrics, http=http, remember=True)
    return PrometheusReader(
        config=org.metrics,
        http=http,
        credentials=lambda: accounts.credentials(org),
        region=org.aws.region,
        remember=True,
    )
