"""sandbox.prometheus: history backfilled with promtool and live values scraped, read back from a real Prometheus
over its HTTP API with plain PromQL (not through Pitcrew's reader, which tests/node_metrics tests)."""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from bot.node_metrics.series import ClusterMetrics, Series, Signal
from sandbox.prometheus import (
    LiveExporter,
    PrometheusPool,
    PrometheusStartError,
    exposition,
    openmetrics,
    prometheus_server,
)

T0 = 1_764_000_000.0  # 2025-11-24, a fixed past: history is not "now"
STEP = 30.0


def _cluster(name: str, series: list[Series]) -> ClusterMetrics:
    end = max(max(s.times) for s in series)
    return ClusterMetrics(
        cluster=name,
        start=datetime.fromtimestamp(T0, UTC),
        end=datetime.fromtimestamp(end, UTC),
        step_seconds=STEP,
        series=tuple(series),
    )


def _series(signal: Signal, node: str, device: str, values: list[float], *, first: int = 0) -> Series:
    return Series(
        signal=signal,
        node=node,
        device=device,
        times=tuple(T0 + STEP * (first + i) for i in range(len(values))),
        values=tuple(values),
    )


def _query(url: str, promql: str, at: float) -> list[dict[str, Any]]:
    answer = httpx.post(f"{url}/api/v1/query", data={"query": promql, "time": at}, timeout=10).json()
    assert answer["status"] == "success", answer
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


def _string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def test_gauges_come_back_exactly_at_their_sample_times(prometheus_with: Callable[..., str]) -> None:
    temps = [60.0, 61.5, 90.25, 0.0, 1e-3, 1234567.875]
    url = prometheus_with(_cluster("c1", [_series(Signal.GPU_TEMP, "i-0aaa", "3", temps)]))
    for i, value in enumerate(temps):
        result = _query(url, 'DCGM_FI_DEV_GPU_TEMP{cluster="c1"}', T0 + STEP * i)
        assert [(r["metric"], float(r["value"][1])) for r in result] == [
            ({"__name__": "DCGM_FI_DEV_GPU_TEMP", "cluster": "c1", "instance_id": "i-0aaa", "gpu": "3"}, value)
        ]


def test_counters_are_stored_under_the_exporters_name_and_rate_gives_the_rate_back(
    prometheus_with: Callable[..., str],
) -> None:
    rates = [1000.0] * 20 + [250.0] * 20  # bytes/s, a link that degrades
    url = prometheus_with(_cluster("c-rate", [_series(Signal.EFA_RX, "i-0bbb", "rdmap0s31", rates)]))
    names = httpx.get(f"{url}/api/v1/label/__name__/values", timeout=10).json()["data"]
    assert names == ["node_amazonefa_rx_bytes"]  # no _total added: what the EFA exporter exposes
    # Well inside each stretch, a 2-minute rate() sees only that stretch's samples.
    for at, expected in ((T0 + STEP * 12, 1000.0), (T0 + STEP * 35, 250.0)):
        (result,) = _query(url, 'rate(node_amazonefa_rx_bytes{cluster="c-rate"}[2m])', at)
        assert float(result["value"][1]) == pytest.approx(expected)
    (raw,) = _query(url, "node_amazonefa_rx_bytes", T0 + STEP * 39)
    assert float(raw["value"][1]) == pytest.approx(sum(rates[1:]) * STEP)  # cumulative from 0 at the first sample


def test_a_gap_restarts_the_counter_as_an_exporter_restart_does(prometheus_with: Callable[..., str]) -> None:
    before = _series(Signal.EFA_TX, "i-0ccc", "rdmap0s32", [500.0] * 10)
    after = _series(Signal.EFA_TX, "i-0ccc", "rdmap0s32", [500.0] * 10, first=30)  # 10 minutes without samples
    joined = Series(
        signal=before.signal,
        node=before.node,
        device=before.device,
        times=before.times + after.times,
        values=before.values + after.values,
    )
    text = openmetrics([_cluster("c-gap", [joined])])
    counts = [float(line.split()[1]) for line in text.splitlines() if line.startswith("node_amazonefa_tx_bytes")]
    assert counts[9] == pytest.approx(500.0 * STEP * 9)
    assert counts[10] == 0.0
    url = prometheus_with(_cluster("c-gap", [joined]))
    (result,) = _query(url, "rate(node_amazonefa_tx_bytes[2m])", T0 + STEP * 36)
    assert float(result["value"][1]) == pytest.approx(500.0)
    # Inside the gap there is nothing: no value carried over from before it.
    assert _query(url, "rate(node_amazonefa_tx_bytes[2m])", T0 + STEP * 20) == []


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    names=st.lists(
        st.text(st.characters(codec="utf-8"), min_size=1, max_size=12),
        min_size=1,
        max_size=7,
        unique=True,
    )
)
@example(names=['a"b', "back\\slash", "new\nline", "cr\rtab\t", "nul\x00", "ユニコード", '{x="y"}'])
def test_any_label_value_survives_the_round_trip(prometheus_with: Callable[..., str], names: list[str]) -> None:
    """Quotes, backslashes, newlines, non-ASCII in cluster and node names: escaped in the file, matched back."""
    clusters = [
        _cluster(name, [_series(Signal.GPU_UTIL, f"node {name}", "0", [float(i)] * 3)]) for i, name in enumerate(names)
    ]
    url = prometheus_with(*clusters, node_label="host", cluster_label="k8s_cluster")
    for i, name in enumerate(names):
        (result,) = _query(url, f"DCGM_FI_DEV_GPU_UTIL{{k8s_cluster={_string(name)}}}", T0 + STEP)
        assert result["metric"]["host"] == f"node {name}"
        assert float(result["value"][1]) == float(i)


def test_the_pool_serves_the_same_data_from_the_same_server_and_stops_what_it_evicts() -> None:
    pool = PrometheusPool(keep=2)
    try:
        first = _cluster("a", [_series(Signal.POWER, "i-1", "0", [700.0, 701.0])])
        second = _cluster("b", [_series(Signal.POWER, "i-1", "0", [700.0, 702.0])])
        third = _cluster("c", [_series(Signal.POWER, "i-1", "0", [700.0, 703.0])])
        url_first = pool.holding(first)
        assert pool.holding(first) == url_first
        url_second = pool.holding(second)
        assert url_second != url_first
        pool.holding(first)  # first is now the most recently used: second goes when third comes
        pool.holding(third)
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{url_second}/-/ready", timeout=2)
        assert httpx.get(f"{url_first}/-/ready", timeout=2).status_code == 200
    finally:
        pool.close()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url_first}/-/ready", timeout=2)


def test_history_promtool_refuses_is_one_clear_error() -> None:
    with (
        pytest.raises(PrometheusStartError, match="promtool refused the history"),
        prometheus_server(history="DCGM_FI_DEV_GPU_UTIL{gpu=0} not-a-number\n# EOF\n"),
    ):
        pass


def test_a_scrape_target_that_is_not_a_url_is_refused_before_anything_starts() -> None:
    with pytest.raises(ValueError, match="is not an http"), prometheus_server(scrape_targets=["localhost:9400"]):
        pass


def test_exposition_is_text_format_a_prometheus_client_parses() -> None:
    text = exposition(
        [
            (Signal.SM_CLOCK, 'i-"q"', "7", 1980.0),
            (Signal.EFA_RETRANS, "i-2", "rdmap0s31", 12345.0),
            (Signal.XID, "i-2", "1", float("nan")),
        ],
        cluster="back\\slash\nnewline",
        node_label="host",
    )
    families = {family.name: family for family in text_string_to_metric_families(text)}
    clock = families["DCGM_FI_DEV_SM_CLOCK"]
    assert clock.type == "gauge"
    (sample,) = clock.samples
    assert sample.labels == {"cluster": "back\\slash\nnewline", "host": 'i-"q"', "gpu": "7"}
    assert sample.value == 1980.0
    assert families["node_amazonefa_retrans_pkts"].type == "counter"
    assert families["node_amazonefa_retrans_pkts"].samples[0].labels["device"] == "rdmap0s31"


class _Endpoint:
    """A /metrics endpoint on a free port serving what `render()` answers at each scrape."""

    def __init__(self, render: Callable[[], str]) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = render().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/metrics"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)


@pytest.fixture
def live_exporter() -> Iterator[tuple[str, list[float]]]:
    """A simulated cluster's exporter: one GPU's clock and one EFA device at 1 MB/s; yields its URL and the
    times it was scraped."""
    scraped: list[float] = []

    def values_at(at: float) -> list[tuple[Signal, str, str, float]]:
        scraped.append(at)
        return [(Signal.SM_CLOCK, "i-live", "0", 1410.0), (Signal.EFA_RX, "i-live", "rdmap0s31", 1_000_000.0)]

    # node_label "instance" collides with the label Prometheus gives every target: honor_labels keeps ours.
    exporter = LiveExporter(values_at=values_at, cluster="live", node_label="instance")
    endpoint = _Endpoint(exporter.scrape)
    endpoint.thread.start()
    try:
        yield endpoint.url, scraped
    finally:
        endpoint.server.shutdown()
        endpoint.server.server_close()


@pytest.mark.real_clock  # Prometheus stamps its scrapes with the real time, and the test queries at it
def test_live_targets_are_scraped_with_their_own_labels(live_exporter: tuple[str, list[float]]) -> None:
    target, _ = live_exporter
    with prometheus_server(scrape_targets=[target], scrape_interval="1s") as url:
        deadline = datetime.now(UTC).timestamp() + 20
        counter: list[dict[str, Any]] = []
        while datetime.now(UTC).timestamp() < deadline:
            counter = _query(url, 'node_amazonefa_rx_bytes{cluster="live"}[1m]', datetime.now(UTC).timestamp())
            if counter and len(counter[0]["values"]) >= 3:
                break
            threading.Event().wait(0.3)
        clock = _query(url, 'DCGM_FI_DEV_SM_CLOCK{cluster="live"}', datetime.now(UTC).timestamp())
    assert [(r["metric"]["instance"], float(r["value"][1])) for r in clock] == [("i-live", 1410.0)]
    (series,) = counter
    assert series["metric"]["instance"] == "i-live"
    # Each scrape adds rate x the time since the last one, so the counter climbs at the simulated 1 MB/s.
    (t_first, v_first), (t_last, v_last) = series["values"][0], series["values"][-1]
    assert (float(v_last) - float(v_first)) / (t_last - t_first) == pytest.approx(1_000_000.0, rel=0.05)


def test_the_server_is_gone_after_the_block() -> None:
    with prometheus_server() as url, urllib.request.urlopen(f"{url}/-/ready", timeout=5) as answer:
        assert answer.status == 200
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/-/ready", timeout=2)


def test_samples_out_of_order_are_written_in_time_order() -> None:
    """promtool refuses a series that goes back in time; a counter is summed in time order too."""
    rates = [10.0, 20.0, 30.0, 40.0]
    ordered = _series(Signal.EFA_RX, "i-1", "rdmap0s31", rates)
    shuffled = Series(
        signal=ordered.signal,
        node=ordered.node,
        device=ordered.device,
        times=tuple(reversed(ordered.times)),
        values=tuple(reversed(ordered.values)),
    )
    assert openmetrics([_cluster("c", [shuffled])]) == openmetrics([_cluster("c", [ordered])])
    counts = [line.split()[1] for line in openmetrics([_cluster("c", [shuffled])]).splitlines()[1:-1]]
    assert counts == ["0.0", "600.0", "1500.0", "2700.0"]
