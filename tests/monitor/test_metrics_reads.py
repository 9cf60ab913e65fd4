"""One check's reads of per-node metrics (bot.monitor.metrics_reads) against a real Prometheus through
Pitcrew's reader: each cluster read once over the widest window wanted, served trimmed to each user's window,
read again only when asked for more than was wanted, and a failure remembered for the check in one line.
And the job alert's culprit line for each kind of verdict."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.clusters.accounts import AwsAccounts
from bot.config import MetricsConfig, load_program
from bot.monitor.jobs import culprit_text, named_text, unreadable_text
from bot.monitor.metrics_reads import MetricsReads, ReadFailed, within
from bot.node_metrics.prometheus import REREAD, PrometheusReader, reader_for
from bot.node_metrics.series import Cause, ClusterMetrics, Series, Signal, Verdict
from sandbox.node_metrics import NodeMetricsSimulator
from sandbox.world import EXAMPLE_PROGRAM

T0 = datetime(2026, 11, 20, 3, 0, tzinfo=UTC)
NODES = ("i-0aaa0000000000001", "i-0aaa0000000000002", "i-0aaa0000000000003")


@pytest.fixture(scope="module")
def prometheus_url(prometheus_with: Callable[..., str]) -> str:
    simulator = NodeMetricsSimulator(cluster="train", nodes=NODES, gpus_per_node=2, seed=1)
    return prometheus_with(simulator.series(start=T0.timestamp(), end=(T0 + timedelta(hours=2)).timestamp()))


@pytest.fixture
async def reader(prometheus_url: str) -> AsyncIterator[PrometheusReader]:
    one = PrometheusReader(config=MetricsConfig(prometheus_url=prometheus_url))
    yield one
    await one.aclose()


def span(metrics: ClusterMetrics) -> tuple[float, float]:
    return min(s.times[0] for s in metrics.series), max(s.times[-1] for s in metrics.series)


async def test_a_cluster_is_read_once_over_the_widest_window_wanted(reader: PrometheusReader) -> None:
    end = T0 + timedelta(hours=2)
    reads = MetricsReads(readers={"kumo": reader}, end=end)
    reads.want("kumo", "train", start=end - timedelta(minutes=12))
    reads.want("kumo", "train", start=end - timedelta(minutes=75))
    reads.want("other", "train", start=T0)  # an org without metrics: nothing wanted, nothing read
    narrow = await reads.get("kumo", "train", start=end - timedelta(minutes=12))
    wide = await reads.get("kumo", "train", start=end - timedelta(minutes=75))
    assert isinstance(narrow, ClusterMetrics) and isinstance(wide, ClusterMetrics)
    assert reads.reads == {("kumo", "train"): 1}
    assert span(narrow)[0] >= (end - timedelta(minutes=12)).timestamp()
    assert span(wide)[0] < (end - timedelta(minutes=70)).timestamp(), "the wide user gets its whole window"
    assert set(narrow.nodes()) == set(NODES)
    assert await reads.get("other", "train", start=T0) is None

    more = await reads.get("kumo", "train", start=end - timedelta(minutes=100))  # more than anyone wanted
    assert isinstance(more, ClusterMetrics) and span(more)[0] < (end - timedelta(minutes=95)).timestamp()
    assert reads.reads == {("kumo", "train"): 2}, "read again rather than cut short"


async def test_an_unreachable_prometheus_is_one_line_once_per_check() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    reader = PrometheusReader(config=MetricsConfig(prometheus_url=f"http://127.0.0.1:{port}"))
    try:
        reads = MetricsReads(readers={"kumo": reader}, end=T0)
        first = await reads.get("kumo", "train", start=T0 - timedelta(hours=1))
        again = await reads.get("kumo", "train", start=T0 - timedelta(hours=2))
    finally:
        await reader.aclose()
    assert isinstance(first, ReadFailed) and first == again
    assert "\n" not in first.reason and f"127.0.0.1:{port}" in first.reason
    assert reads.reads == {("kumo", "train"): 1}, "not retried within the check"
    assert unreadable_text(first).startswith("Per-node metrics could not be read: ")


@given(
    times=st.lists(st.integers(min_value=0, max_value=10_000), unique=True, max_size=40).map(sorted),
    low=st.integers(min_value=-100, max_value=10_100),
    width=st.integers(min_value=0, max_value=10_000),
)
def test_within_keeps_exactly_the_samples_of_the_window(times: list[int], low: int, width: int) -> None:
    base = T0.timestamp()
    series = Series(Signal.GPU_UTIL, "n", "0", tuple(base + t for t in times), tuple(float(t) for t in times))
    metrics = ClusterMetrics("c", T0, T0 + timedelta(seconds=10_000), 30.0, (series,))
    start, end = T0 + timedelta(seconds=low), T0 + timedelta(seconds=low + width)
    trimmed = within(metrics, start=start, end=end)
    kept = [t for t in times if low <= t <= low + width]
    if not kept:
        assert trimmed.series == ()
    else:
        (only,) = trimmed.series
        assert only.values == tuple(float(t) for t in kept) and len(only.times) == len(only.values)
    assert trimmed.start >= metrics.start and trimmed.end <= metrics.end


@pytest.mark.parametrize(
    ("verdict", "says"),
    [
        (
            Verdict(Cause.THERMAL, ("i-0abc", "i-0def"), "GPU 3 at 1,210 MHz and 92 °C, peers 1,980 MHz"),
            "Likely culprit: `i-0abc`, GPU 3 at 1,210 MHz and 92 °C, peers 1,980 MHz (thermal); then `i-0def`.",
        ),
        (
            Verdict(Cause.NETWORK, ("i-0abc",), "EFA 2.1 GB/s vs peers 11.8 GB/s, retransmits 340/s"),
            "Likely culprit: `i-0abc`, EFA 2.1 GB/s vs peers 11.8 GB/s, retransmits 340/s (network).",
        ),
        (
            Verdict(Cause.INPUT, (), "GPU utilization 38 % on every node (was 96 %), EFA normal"),
            "Likely cause: input: every node waits alike (GPU utilization 38 % on every node (was 96 %), EFA "
            "normal): data loading or storage.",
        ),
        (Verdict(Cause.UNKNOWN), "Per-node metrics name no single node."),
    ],
)
def test_the_culprit_line_of_each_verdict(verdict: Verdict, says: str) -> None:
    assert culprit_text(verdict) == says


def test_a_closed_alert_says_what_was_named_from_the_episode_alone() -> None:
    assert named_text("", []) == ""
    assert named_text("thermal", ["i-0abc"]) == "Per-node metrics named `i-0abc` (thermal)."
    assert "input" in named_text("input", []) and "no single node" in named_text("unknown", [])


async def test_what_was_wanted_is_read_up_front_once_per_cluster(reader: PrometheusReader) -> None:
    end = T0 + timedelta(hours=2)
    reads = MetricsReads(readers={"kumo": reader}, end=end)
    for cluster in ("train", "dev"):
        reads.want("kumo", cluster, start=end - timedelta(minutes=20))
    await reads.read_wanted()
    assert reads.reads == {("kumo", "train"): 1, ("kumo", "dev"): 1}
    train = await reads.get("kumo", "train", start=end - timedelta(minutes=20))
    dev = await reads.get("kumo", "dev", start=end - timedelta(minutes=20))
    assert isinstance(train, ClusterMetrics) and train.series
    assert isinstance(dev, ClusterMetrics) and not dev.series, "a cluster Prometheus has no series of: empty"
    assert reads.reads == {("kumo", "train"): 1, ("kumo", "dev"): 1}


async def test_each_check_of_an_open_episode_asks_prometheus_only_what_is_new(prometheus_url: str) -> None:
    """The live monitor's reader (reader_for remembers): checks a minute apart want an episode's window (its
    start fixed: the healthy hour before it) and the faulty-node window (moving); each check's answers are a
    cold reader's, and after the first, the episode's cluster is asked only from REREAD before the last check."""
    asked: list[float] = []

    async def note(request: httpx.Request) -> None:
        form = parse_qs(request.content.decode())
        if "DCGM_FI_DEV_SM_CLOCK" in form["query"][0]:
            asked.append(float(form["start"][0]))

    org = load_program(EXAMPLE_PROGRAM).orgs[0]
    org = org.model_copy(update={"metrics": MetricsConfig(prometheus_url=prometheus_url)})
    since = T0 + timedelta(minutes=63, seconds=17)  # when the episode's job began to fail
    async with httpx.AsyncClient(event_hooks={"request": [note]}) as http:
        live = reader_for(org, AwsAccounts(), http=http)
        cold = PrometheusReader(config=MetricsConfig(prometheus_url=prometheus_url))
        assert live is not None
        previous: datetime | None = None
        try:
            for minute in range(4):
                now = since + timedelta(minutes=5 + minute, seconds=minute * 3)  # checks drift by seconds
                asked.clear()
                reads = MetricsReads(readers={org.id: live}, end=now)
                reads.want(org.id, "train", start=since - timedelta(hours=1))
                reads.want(org.id, "train", start=now - timedelta(minutes=11))
                await reads.read_wanted()
                whole = await cold.cluster_metrics("train", start=since - timedelta(hours=1), end=now)
                assert await reads.get(org.id, "train", start=since - timedelta(hours=1)) == whole
                recent = await reads.get(org.id, "train", start=now - timedelta(minutes=11))
                assert recent == within(whole, start=now - timedelta(minutes=11), end=now)
                if previous is None:
                    assert asked == [(since - timedelta(hours=1)).timestamp()], "the first check reads it whole"
                else:
                    (first,) = asked
                    assert (previous - REREAD).timestamp() <= first < (previous - REREAD).timestamp() + 30
                previous = now
        finally:
            await live.aclose()
            await cold.aclose()
