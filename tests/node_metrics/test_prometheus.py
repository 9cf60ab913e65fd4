"""PrometheusReader against a real Prometheus: generated per-node metrics go through openmetrics -> promtool ->
prometheus -> query_range and come back as the analysis reads them (gauges as they were, counters as rates,
gaps as gaps); and every way a read fails is one clear MetricsError line."""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import httpx
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bot.config import MetricsConfig
from bot.node_metrics import prometheus as reader_module
from bot.node_metrics.prometheus import MetricsError, PrometheusReader, promql_string
from bot.node_metrics.series import Cause, ClusterMetrics, Family, Series, Signal
from sandbox.node_metrics import Gap, Injected, NodeMetricsSimulator, Replacement

T0 = 1_764_000_000.0  # a fixed past; not a multiple of the step, so nothing relies on aligned times
STEP = 30.0
NODES = ("i-0a1", "i-0b2", "i-0c3", "i-0d4")

PrometheusWith = Callable[..., str]


def _simulated(cluster: str = "p5-train", *, hours: float = 1.0, seed: int = 3) -> ClusterMetrics:
    """A small P5 cluster over an hour with a throttled GPU, an exporter gap and a replaced node."""
    simulator = NodeMetricsSimulator(
        cluster=cluster,
        nodes=NODES,
        gpus_per_node=2,
        efa_devices=("rdmap0s31", "rdmap0s32"),
        seed=seed,
        checkpoint_every=1200.0,
        gaps=[Gap(node="i-0b2", start=T0 + 900, end=T0 + 1500)],
        replacements=[Replacement(old="i-0d4", new="i-0e5", at=T0 + 2400, boot_seconds=300)],
    )
    simulator.inject(Injected(cause=Cause.THERMAL, node="i-0c3", start=T0 + 1800, end=None, gpu=1))
    return simulator.series(start=T0, end=T0 + hours * 3600, step=STEP)


def _reader(url: str, **config: Any) -> PrometheusReader:
    return PrometheusReader(config=MetricsConfig(prometheus_url=url, **config))


async def _read(url: str, cluster: str, start: float, end: float, **config: Any) -> ClusterMetrics:
    reader = _reader(url, **config)
    try:
        return await reader.cluster_metrics(
            cluster, start=datetime.fromtimestamp(start, UTC), end=datetime.fromtimestamp(end, UTC)
        )
    finally:
        await reader.aclose()


def _by_key(metrics: ClusterMetrics) -> dict[tuple[Signal, str, str], Series]:
    return {(s.signal, s.node, s.device): s for s in metrics.series}


@pytest.fixture(scope="module")
def simulated() -> ClusterMetrics:
    return _simulated()


async def test_gauges_come_back_as_they_were_and_gaps_stay_gaps(
    prometheus_with: PrometheusWith, simulated: ClusterMetrics
) -> None:
    url = prometheus_with(simulated)
    read = await _read(url, simulated.cluster, T0, T0 + 3600)
    assert read.cluster == simulated.cluster
    assert read.step_seconds == STEP
    assert read.nodes() == simulated.nodes() == ("i-0a1", "i-0b2", "i-0c3", "i-0d4", "i-0e5")
    sent, got = _by_key(simulated), _by_key(read)
    assert {key for key in sent if not key[0].is_counter} == {key for key in got if not key[0].is_counter}
    for key, source in sent.items():
        if key[0].is_counter:
            continue
        back = dict(zip(got[key].times, got[key].values, strict=True))
        for at, value in zip(source.times, source.values, strict=True):
            if key[0] is Signal.XID:  # the worst XID of the last step and a half: never a lower one
                assert back[at] >= value
            else:
                assert back[at] == value  # exactly: floats survive the text formats
        # Where the exporter sent nothing, the reader holds nothing: at most one step of carry-over.
        sent_times = source.times
        for at in got[key].times:
            assert any(0 <= at - t <= 1.5 * STEP for t in sent_times), (key, at)
    # The gap of i-0b2 (15 min without its exporters) is a gap, not its last value carried on.
    clock = got[(Signal.SM_CLOCK, "i-0b2", "0")]
    assert not [at for at in clock.times if T0 + 900 + 1.5 * STEP < at < T0 + 1500]


async def test_counters_come_back_as_their_rates(prometheus_with: PrometheusWith, simulated: ClusterMetrics) -> None:
    url = prometheus_with(simulated)
    read = await _read(url, simulated.cluster, T0, T0 + 3600)
    got = _by_key(read)
    checked = 0
    for key, source in _by_key(simulated).items():
        if not key[0].is_counter:
            continue
        rates = dict(zip(source.times, source.values, strict=True))
        back = dict(zip(got[key].times, got[key].values, strict=True))
        for at, value in back.items():
            window = [at - STEP * k for k in range(5)]  # rate(x[2m]) sees these five samples
            if all(t in rates for t in window) and not _restarted(source, window[-1]):
                # No extrapolation when the window is full: the mean of the four intervals' rates.
                expected = sum(rates[t] for t in window[:4]) / 4
                assert value == pytest.approx(expected, rel=1e-9, abs=1e-9), (key, at)
                checked += 1
    assert checked > 1000


def _restarted(source: Series, at: float) -> bool:
    """Is `at` the first sample after a gap (where the written counter starts again from 0)?"""
    index = source.times.index(at)
    return index == 0 or source.times[index] - source.times[index - 1] > 1.5 * STEP


async def test_renamed_labels_and_a_cluster_name_with_quotes_select_only_that_cluster(
    prometheus_with: PrometheusWith,
) -> None:
    tricky = 'train "big" \\ run'
    clusters = [
        _simulated(tricky, hours=0.25, seed=1),
        _simulated("train", hours=0.25, seed=2),  # a prefix of the other
        _simulated(tricky + "\\", hours=0.25, seed=3),  # differs by one trailing backslash
    ]
    url = prometheus_with(*clusters, node_label="host", cluster_label="k8s_cluster")
    for cluster in clusters:
        read = await _read(url, cluster.cluster, T0, T0 + 900, node_label="host", cluster_label="k8s_cluster")
        assert read.nodes() == cluster.nodes()
        got, sent = _by_key(read), _by_key(cluster)
        key = (Signal.GPU_TEMP, "i-0a1", "1")
        assert dict(zip(got[key].times, got[key].values, strict=True)) == dict(
            zip(sent[key].times, sent[key].values, strict=True)
        )
    # The default labels find nothing in data labelled otherwise: no series, not an error.
    assert (await _read(url, tricky, T0, T0 + 900)).series == ()


LONG_POINTS = 4 * 2880 + 1  # four days at 30 s: above Prometheus's 11,000 points per series


@pytest.fixture(scope="module")
def four_days() -> ClusterMetrics:
    """One GPU and one EFA device over four days, sampled where it matters: the first and last hours and an
    hour around the 11,000th point (where a chunk ends). promtool writes a block per 2 hours it has data for,
    each costing ~0.15 s of disk, so the days in between are left empty."""
    indices = [*range(0, 120), *range(10_940, 11_060), *range(LONG_POINTS - 120, LONG_POINTS)]
    times = tuple(T0 + STEP * i for i in indices)
    return ClusterMetrics(
        cluster="long",
        start=datetime.fromtimestamp(times[0], UTC),
        end=datetime.fromtimestamp(times[-1], UTC),
        step_seconds=STEP,
        series=(
            Series(Signal.GPU_UTIL, "i-1", "0", times, tuple(float(i % 100) for i in indices)),
            Series(Signal.EFA_RX, "i-1", "rdmap0s31", times, (5e9,) * len(times)),
        ),
    )


async def test_a_range_beyond_the_point_limit_is_read_in_chunks(
    prometheus_with: PrometheusWith, four_days: ClusterMetrics
) -> None:
    url = prometheus_with(four_days)
    asked: list[tuple[float, float, float]] = []

    async def note(request: httpx.Request) -> None:
        form = parse_qs(request.content.decode())
        if "node_amazonefa_rx_bytes" in form["query"][0]:
            asked.append((float(form["start"][0]), float(form["end"][0]), float(form["step"][0])))

    end = T0 + STEP * (LONG_POINTS - 1)
    async with httpx.AsyncClient(event_hooks={"request": [note]}) as http:
        reader = PrometheusReader(config=MetricsConfig(prometheus_url=url), http=http)
        read = await reader.cluster_metrics(
            "long", start=datetime.fromtimestamp(T0, UTC), end=datetime.fromtimestamp(end, UTC)
        )
    # Consecutive chunks, none over the limit, together exactly the range asked.
    assert asked[0][0] == T0 and asked[-1][1] == end and len(asked) == 2
    for (_, last, step), (first, _, _) in itertools.pairwise(asked):
        assert first == last + step
    assert all((last - first) / step + 1 <= 11_000 for first, last, step in asked)
    sent = _by_key(four_days)
    util = _by_key(read)[(Signal.GPU_UTIL, "i-1", "0")]
    source = sent[(Signal.GPU_UTIL, "i-1", "0")]
    back = dict(zip(util.times, util.values, strict=True))
    assert {at: back.get(at) for at in source.times} == dict(zip(source.times, source.values, strict=True))
    # Besides, only the one step a gauge is carried past its last sample, after the first two stretches (the
    # third ends with the range).
    assert len(back) == len(source.times) + 2
    rx = _by_key(read)[(Signal.EFA_RX, "i-1", "rdmap0s31")]
    boundary = [value for at, value in zip(rx.times, rx.values, strict=True) if at >= T0 + STEP * 10_950]
    assert boundary and all(value == pytest.approx(5e9) for value in boundary[:100])


async def test_the_limit_is_real_unchunked_prometheus_refuses_it(
    prometheus_with: PrometheusWith, four_days: ClusterMetrics, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = prometheus_with(four_days)
    monkeypatch.setattr(reader_module, "MAX_POINTS", 20_000)
    with pytest.raises(MetricsError) as raised:
        await _read(url, "long", T0, T0 + STEP * (LONG_POINTS - 1))
    message = str(raised.value)
    assert message.startswith(f"Prometheus at {url} refused ")
    assert "11,000 points" in message and "HTTP 400, bad_data" in message
    assert "\n" not in message


async def test_smaller_chunks_give_the_same_answer(
    prometheus_with: PrometheusWith, simulated: ClusterMetrics, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = prometheus_with(simulated)
    whole = await _read(url, simulated.cluster, T0, T0 + 3600)
    monkeypatch.setattr(reader_module, "MAX_POINTS", 7)
    assert await _read(url, simulated.cluster, T0, T0 + 3600) == whole


async def test_the_range_is_the_one_asked_and_naive_times_are_utc(
    prometheus_with: PrometheusWith, simulated: ClusterMetrics
) -> None:
    url = prometheus_with(simulated)
    reader = _reader(url)
    try:
        start = datetime.fromtimestamp(T0 + 1500, UTC).replace(tzinfo=None)
        read = await reader.cluster_metrics(simulated.cluster, start=start, end=start + timedelta(minutes=10))
        with pytest.raises(ValueError, match="is before start"):
            await reader.cluster_metrics(simulated.cluster, start=start, end=start - timedelta(seconds=1))
        unknown = await reader.cluster_metrics("no-such-cluster", start=start, end=start + timedelta(minutes=10))
    finally:
        await reader.aclose()
    assert read.start == datetime.fromtimestamp(T0 + 1500, UTC)
    assert all(T0 + 1500 <= at <= T0 + 2100 for s in read.series for at in s.times)
    assert {len(s.times) for s in read.series if not s.signal.is_counter} == {21}
    assert unknown.series == () and unknown.cluster == "no-such-cluster"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
# (no `$`: label_replace expands `$0`, `$1`... in its replacement, which is what echoes the string here)
@given(value=st.text(st.characters(codec="utf-8", blacklist_characters="$"), max_size=20))
@example(value='quote " backslash \\ newline \n cr \r tab \t nul \x00 ユニコード')
def test_promql_string_is_read_back_by_prometheus_as_the_same_text(
    prometheus_with: PrometheusWith, simulated: ClusterMetrics, value: str
) -> None:
    url = prometheus_with(simulated)
    query = f'label_replace(vector(1), "echo", {promql_string(value)}, "", "")'
    answer = httpx.post(f"{url}/api/v1/query", data={"query": query, "time": T0}, timeout=10).json()
    assert answer["status"] == "success", (value, answer)
    assert answer["data"]["result"][0]["metric"].get("echo", "") == value


# -- remembered reads (the live monitor's) ----------------------------------------------------------------


class _Asked:
    """The [start, end] of each query_range of one signal a client sends."""

    def __init__(self) -> None:
        self.ranges: list[tuple[float, float]] = []

    async def __call__(self, request: httpx.Request) -> None:
        form = parse_qs(request.content.decode())
        if form["query"][0].startswith("max by (instance_id, gpu) (last_over_time(DCGM_FI_DEV_SM_CLOCK"):
            self.ranges.append((float(form["start"][0]), float(form["end"][0])))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    reads=st.lists(
        st.tuples(st.integers(min_value=0, max_value=1800), st.integers(min_value=60, max_value=1800)),
        min_size=2,
        max_size=5,
    ),
    aligned=st.booleans(),
)
@example(reads=[(0, 1800), (0, 1860), (0, 1920), (30, 1890)], aligned=True)  # an open episode's, then a later one
@example(reads=[(600, 600), (661, 600), (0, 1800)], aligned=False)  # the faulty-node window, then an episode
async def test_a_remembering_reader_answers_as_a_full_read_and_reads_only_what_is_new(
    prometheus_with: PrometheusWith, simulated: ClusterMetrics, reads: list[tuple[int, int]], aligned: bool
) -> None:
    """Windows as the monitor asks them (start fixed while an episode is open, or moving; ends mostly later,
    sometimes earlier): each answer equals a cold reader's, and a read on the last one's grid asks Prometheus
    only from REREAD before the last end."""
    url = prometheus_with(simulated)
    asked = _Asked()
    async with httpx.AsyncClient(event_hooks={"request": [asked]}) as http:
        warm = PrometheusReader(config=MetricsConfig(prometheus_url=url), http=http, remember=True)
        last: tuple[float, float] | None = None
        for offset, width in reads:
            start = T0 + (offset // STEP * STEP if aligned else offset)
            end = min(start + width, T0 + 3600) + 0.25  # the check's now is not on the grid
            asked.ranges.clear()
            read = await warm.cluster_metrics(
                simulated.cluster, start=datetime.fromtimestamp(start, UTC), end=datetime.fromtimestamp(end, UTC)
            )
            assert read == await _read(url, simulated.cluster, start, end)
            (first, _), *_ = asked.ranges
            on_grid = last is not None and last[0] <= start and (start - last[0]) % STEP == 0 and end >= last[1]
            if on_grid and last is not None and last[1] - REREAD_SECONDS > start:
                assert last[1] - REREAD_SECONDS <= first < last[1] - REREAD_SECONDS + STEP
            else:
                assert first == start
            last = (start, end)


REREAD_SECONDS = reader_module.REREAD.total_seconds()


async def test_a_remembering_reader_forgets_a_cluster_not_read_for_a_while(
    prometheus_with: PrometheusWith, simulated: ClusterMetrics
) -> None:
    other = _simulated("other-train", seed=4)
    url = prometheus_with(simulated, other)
    asked = _Asked()

    def at(seconds: float) -> datetime:
        return datetime.fromtimestamp(T0 + seconds, UTC)

    async with httpx.AsyncClient(event_hooks={"request": [asked]}) as http:
        warm = PrometheusReader(config=MetricsConfig(prometheus_url=url), http=http, remember=True)
        await warm.cluster_metrics(simulated.cluster, start=at(0), end=at(1200))
        await warm.cluster_metrics(other.cluster, start=at(0), end=at(1200))
        # 16 minutes on, only the other cluster is read: the first is forgotten, so it is read whole again.
        await warm.cluster_metrics(other.cluster, start=at(0), end=at(2160))
        asked.ranges.clear()
        read = await warm.cluster_metrics(simulated.cluster, start=at(0), end=at(2220))
        assert asked.ranges == [(T0, T0 + 2220)]
        assert read == await _read(url, simulated.cluster, T0, T0 + 2220)
        # The other was read a minute ago: only its newest minutes are asked.
        asked.ranges.clear()
        await warm.cluster_metrics(other.cluster, start=at(0), end=at(2220))
        assert asked.ranges == [(T0 + 2160 - REREAD_SECONDS, T0 + 2220)]
        # A restart is a cold reader: everything is read.
        warm.forget()
        asked.ranges.clear()
        await warm.cluster_metrics(other.cluster, start=at(0), end=at(2280))
        assert asked.ranges == [(T0, T0 + 2280)]


async def test_a_failed_read_leaves_the_remembered_one_as_it_was(
    prometheus_with: PrometheusWith, simulated: ClusterMetrics
) -> None:
    url = prometheus_with(simulated)
    fail = False

    async def maybe_fail(request: httpx.Request) -> None:
        if fail:
            raise httpx.ConnectError("refused", request=request)

    async with httpx.AsyncClient(event_hooks={"request": [maybe_fail]}) as http:
        warm = PrometheusReader(config=MetricsConfig(prometheus_url=url), http=http, remember=True)
        start = datetime.fromtimestamp(T0, UTC)
        await warm.cluster_metrics(simulated.cluster, start=start, end=start + timedelta(minutes=30))
        fail = True
        with pytest.raises(MetricsError, match="unreachable"):
            await warm.cluster_metrics(simulated.cluster, start=start, end=start + timedelta(minutes=31))
        fail = False
        read = await warm.cluster_metrics(simulated.cluster, start=start, end=start + timedelta(minutes=32))
    assert read == await _read(url, simulated.cluster, T0, T0 + 32 * 60)


# -- failures ----------------------------------------------------------------------------------------------


class _Canned:
    """A local HTTP server that answers every request with one status and body (optionally after a pause)."""

    def __init__(self, status: int, body: bytes, content_type: str = "application/json", delay: float = 0) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                time.sleep(delay)
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # a client that gave up
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            request_queue_size = 64  # a read sends every query at once (15: DCGM, EFA and Neuron), beyond 5

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/prom/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def canned() -> Iterator[Callable[..., str]]:
    servers: list[_Canned] = []

    def start(status: int, body: bytes, **options: Any) -> str:
        servers.append(_Canned(status, body, **options))
        return servers[-1].url

    yield start
    for server in servers:
        server.close()


async def _failure(url: str, **options: Any) -> str:
    reader = PrometheusReader(config=MetricsConfig(prometheus_url=url), **options)
    try:
        with pytest.raises(MetricsError) as raised:
            await reader.cluster_metrics(
                "c", start=datetime.fromtimestamp(T0, UTC), end=datetime.fromtimestamp(T0 + 60, UTC)
            )
    finally:
        await reader.aclose()
    message = str(raised.value)
    assert "\n" not in message and "Traceback" not in message
    assert message.startswith(f"Prometheus at {url.rstrip('/')}")
    return message


async def test_a_server_that_is_down_is_unreachable() -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    message = await _failure(f"http://127.0.0.1:{port}")
    assert "is unreachable" in message


async def test_an_http_error_page_says_the_status(canned: Callable[..., str]) -> None:
    url = canned(500, b"<html><body>\n<h1>Internal Server Error</h1>\n</body></html>", content_type="text/html")
    message = await _failure(url)
    assert "HTTP 500" in message and "Internal Server Error" in message


async def test_a_body_that_is_not_json(canned: Callable[..., str]) -> None:
    message = await _failure(canned(200, b"ok, but not JSON"))
    assert "the answer is not Prometheus JSON: 'ok, but not JSON'" in message


async def test_json_that_is_not_a_matrix(canned: Callable[..., str]) -> None:
    message = await _failure(canned(200, b'{"status": "success", "data": {"resultType": "vector", "result": []}}'))
    assert "expected a matrix" in message
    message = await _failure(canned(200, b'{"status": "success", "data": {"resultType": "matrix", "result": [{}]}}'))
    assert "malformed" in message


async def test_an_answer_out_of_order_with_repeats_and_non_finite_values(canned: Callable[..., str]) -> None:
    """What a proxy or another implementation of the API may send: the series comes back ascending, the last
    of two samples at one time kept, NaN and infinities left out, a series without a node left out."""
    answer = {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                {
                    "metric": {"instance_id": "i-1", "gpu": "0", "device": "rdmap0s31"},
                    "values": [[T0 + 60, "3"], [T0, "1.5"], [T0 + 30, "NaN"], [T0 + 60, "4e3"], [T0 + 90, "+Inf"]],
                },
                {"metric": {"instance_id": "i-2", "gpu": "0", "device": "rdmap0s31"}, "values": [[T0, "-Inf"]]},
                {"metric": {"gpu": "1", "device": "rdmap0s31"}, "values": [[T0, "7"]]},
                {"metric": {"instance_id": "i-3", "gpu": "0", "device": "rdmap0s31"}, "values": []},
            ],
        },
    }
    reader = PrometheusReader(config=MetricsConfig(prometheus_url=canned(200, json.dumps(answer).encode())))
    try:
        read = await reader.cluster_metrics(
            "c", start=datetime.fromtimestamp(T0, UTC), end=datetime.fromtimestamp(T0 + 90, UTC)
        )
    finally:
        await reader.aclose()
    # (the canned answer is every query's: the Neuron ones, whose device labels it lacks, read it under "")
    assert {(s.node, s.device) for s in read.series if s.signal.family is not Family.NEURON} == {
        ("i-1", "0"),
        ("i-1", "rdmap0s31"),
    }
    assert {(s.times, s.values) for s in read.series} == {((T0, T0 + 60), (1.5, 4000.0))}
    assert all(type(v) is float for s in read.series for v in s.times + s.values)


def _prometheus_number(value: float) -> str:
    """A sample value as Prometheus writes it in JSON (Go's strconv 'f'/'e' with the shortest digits)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value).removesuffix(".0")


_labels = st.dictionaries(
    st.sampled_from(["instance_id", "gpu", "device", "values", "x"]),
    st.one_of(st.text(max_size=12), st.sampled_from(['"values":[', "]]", "],[", '\\"', "ユ"])),
)
_times = st.one_of(
    st.integers(min_value=1_000_000_000, max_value=2_000_000_000),
    st.floats(1e9, 2e9).map(lambda at: round(at, 3)),  # Prometheus's times are in milliseconds
)
_samples = st.lists(st.tuples(_times, st.floats(allow_nan=True, allow_infinity=True)), max_size=6)


@settings(max_examples=200, deadline=None)
@given(series=st.lists(st.tuples(_labels, _samples), max_size=5))
def test_prometheus_compact_json_is_read_as_the_general_path_reads_it(
    series: list[tuple[dict[str, str], list[tuple[float, float]]]],
) -> None:
    """The fast reading of Prometheus's compact encoding gives exactly what json + numpy give, for any labels
    (quotes, brackets, the very text it cuts at) and any values (NaN, infinities, every float)."""
    result = [
        {"metric": labels, "values": [[at, _prometheus_number(value)] for at, value in samples]}
        for labels, samples in series
    ]
    answer = {"status": "success", "data": {"resultType": "matrix", "result": result}}
    reader = _reader("http://prometheus:9090")
    compact_body = json.dumps(answer, separators=(",", ":")).encode()
    spaced_body = json.dumps(answer, indent=1).encode()
    assert reader_module._compact_matrix(compact_body) is not None, "Prometheus's encoding takes the fast path"
    assert reader_module._compact_matrix(spaced_body) is None or not any(samples for _, samples in series)
    compact = reader._parse(httpx.Response(200, content=compact_body), "q")
    spaced = reader._parse(httpx.Response(200, content=spaced_body), "q")
    assert len(compact) == len(spaced) == len(series)
    for (labels, times, values), (labels_spaced, times_spaced, values_spaced), one in zip(
        compact, spaced, result, strict=True
    ):
        assert labels == labels_spaced == one["metric"]
        assert times.tolist() == times_spaced.tolist() == [float(at) for at, _ in one["values"]]
        expected = np.array([float(value) for _, value in one["values"]])
        assert np.array_equal(values, values_spaced, equal_nan=True)
        assert np.array_equal(values, expected, equal_nan=True)


@pytest.mark.parametrize(
    "values",
    [[[T0, "1", "2"]], [[T0]], [T0, "1"], "1", None, [[T0, "one"]], [[T0, {"v": 1}]]],
    ids=["triple", "single", "flat", "string", "null", "word", "object"],
)
async def test_values_that_are_not_time_value_pairs_are_malformed(canned: Callable[..., str], values: Any) -> None:
    answer = {"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, "values": values}]}}
    for body in (json.dumps(answer), json.dumps(answer, separators=(",", ":"))):  # Prometheus's is compact
        message = await _failure(canned(200, body.encode()))
        assert "a series in the answer is malformed" in message


async def test_an_access_denied_from_a_gateway_quotes_its_message(canned: Callable[..., str]) -> None:
    message = await _failure(canned(403, b'{"message": "User is not authorized to perform: aps:QueryMetrics"}'))
    assert "HTTP 403" in message and "not authorized to perform: aps:QueryMetrics" in message


async def test_a_server_that_does_not_answer_in_time(canned: Callable[..., str]) -> None:
    url = canned(200, b"{}", delay=1.0)
    async with httpx.AsyncClient(timeout=0.2) as http:
        message = await _failure(url, http=http)
    assert message.endswith("no answer within 0.2 s")


async def test_a_promql_error_from_the_real_server(prometheus_with: PrometheusWith, simulated: ClusterMetrics) -> None:
    url = prometheus_with(simulated)
    # The program file refuses such a label name; built past validation, the real parser refuses it instead.
    config = MetricsConfig.model_construct(
        prometheus_url=url, sigv4=False, node_label="instance-id", cluster_label="cluster"
    )
    reader = PrometheusReader(config=config)
    try:
        with pytest.raises(MetricsError) as raised:
            await reader.cluster_metrics(
                "c", start=datetime.fromtimestamp(T0, UTC), end=datetime.fromtimestamp(T0 + 60, UTC)
            )
    finally:
        await reader.aclose()
    message = str(raised.value)
    assert message.startswith(f"Prometheus at {url} refused 'max by (instance-id, gpu)")
    assert "HTTP 400, bad_data" in message and "parse error" in message
    assert "\n" not in message


def test_the_queries_are_what_the_exporters_expose() -> None:
    reader = _reader("http://prometheus:9090", node_label="host", cluster_label="k8s_cluster")
    assert reader.query(Signal.EFA_RETRANS, 'a"b') == (
        'max by (host, device) (rate(node_amazonefa_retrans_pkts{k8s_cluster="a\\"b"}[120s]))'
    )
    assert reader.query(Signal.SM_CLOCK, "c") == (
        'max by (host, gpu) (last_over_time(DCGM_FI_DEV_SM_CLOCK{k8s_cluster="c"}[45s]))'
    )
    assert reader.query(Signal.XID, "c") == (
        'max by (host, gpu) (max_over_time(DCGM_FI_DEV_XID_ERRORS{k8s_cluster="c"}[45s]))'
    )


def test_sigv4_without_credentials_is_a_configuration_error() -> None:
    config = MetricsConfig(prometheus_url="https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1/", sigv4=True)
    with pytest.raises(ValueError, match="credentials and a region"):
        PrometheusReader(config=config)
