"""`pitcrew throughput replay FILE.csv --metrics-url URL`: the culprit of each episode and the faulty nodes,
from per-node metrics in a real Prometheus (Debian's 2.42, loaded through promtool) that NodeMetricsSimulator
generated with a fault injected at the time the trace's throughput drops."""

from __future__ import annotations

import contextlib
import io
import json
import random
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.cli import main
from bot.config import MetricsConfig
from bot.monitor.replay import (
    TraceSpan,
    replay_csv,
    replay_with_metrics,
    with_culprits,
)
from bot.node_metrics.culprit import FAULT_WINDOW, HEALTHY_BEFORE
from bot.node_metrics.prometheus import PrometheusReader
from bot.node_metrics.series import Cause, ClusterMetrics
from sandbox.node_metrics import Gap, Injected, NodeMetricsSimulator

HEADER = "ts,org,cluster,job,tokens_per_second,event"
T0 = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)  # the trace's first row
TRACE = timedelta(hours=3)
CHECKPOINT_MINUTES = 2  # the simulator's default checkpoint (120 s), every node idle together
JOB_KEYS = ["kind", "org", "cluster", "job", "start", "detected_at", "end", "cause", "suspects"]
FAULTY_KEYS = ["kind", "org", "cluster", "job", "node", "cause", "suspects", "start", "detected_at", "end"]


def z(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%dT%H:%M:%SZ")


def unix(ts: datetime) -> float:
    return ts.timestamp()


def parse(text: str) -> datetime:
    return datetime.fromisoformat(text)


def node_ids(count: int, rng: random.Random) -> list[str]:
    return sorted(f"i-0{rng.getrandbits(64):016x}" for _ in range(count))


@dataclass(frozen=True, kw_only=True)
class Job:
    """One job of a trace: its rate drops to `factor` of its healthy rate over [slow_from, slow_to) minutes."""

    org: str
    cluster: str
    name: str
    slow_from: float | None = None
    slow_to: float | None = None
    factor: float = 0.4
    checkpoint_every: float | None = None  # minutes: the job sends zeros for CHECKPOINT_MINUTES every so often


def trace_lines(jobs: list[Job], *, minutes: float = TRACE.total_seconds() / 60, seed: int = 0) -> list[str]:
    """Every job starts at T0 and sends a noisy sample every 30 s for `minutes`."""
    rng = random.Random(seed)
    lines = [HEADER] + [f"{z(T0)},{j.org},{j.cluster},{j.name},,start" for j in jobs]
    for step in range(1, int(minutes * 2) + 1):
        minute = step / 2
        for job in jobs:
            slow = job.slow_from is not None and job.slow_to is not None and job.slow_from <= minute < job.slow_to
            rate = 1000.0 * rng.uniform(0.95, 1.05) * (job.factor if slow else 1.0)
            if job.checkpoint_every is not None and minute % job.checkpoint_every < CHECKPOINT_MINUTES:
                rate = 0.0
            lines.append(f"{z(T0 + timedelta(minutes=minute))},{job.org},{job.cluster},{job.name},{rate:.1f},")
    return lines


def write(tmp_path: Path, lines: list[str], name: str = "trace.csv") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def cluster_metrics(
    cluster: str, nodes: list[str], faults: list[Injected], *, seed: int = 0, minutes: float = 180, **decoys: Any
) -> ClusterMetrics:
    """The cluster's series over [T0 - HEALTHY_BEFORE, T0 + minutes]: what the replay reads for the trace;
    `decoys` are NodeMetricsSimulator's options (checkpoints, exporter gaps, replacements)."""
    simulator = NodeMetricsSimulator(cluster=cluster, nodes=nodes, seed=seed, **decoys)
    for fault in faults:
        simulator.inject(fault)
    return simulator.series(start=unix(T0 - HEALTHY_BEFORE), end=unix(T0 + timedelta(minutes=minutes)))


def fault(cause: Cause, node: str | None, start_min: float, end_min: float | None, gpu: int | None = None) -> Injected:
    return Injected(
        cause=cause,
        node=node,
        start=unix(T0 + timedelta(minutes=start_min)),
        end=None if end_min is None else unix(T0 + timedelta(minutes=end_min)),
        gpu=gpu,
    )


def replayed(path: Path) -> tuple[list[dict[str, Any]], TraceSpan]:
    span = TraceSpan()
    return list(replay_csv(path, span=span)), span


def jobs_of(episodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in episodes if e["kind"] != "faulty_node"]


def faulty_of(episodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in episodes if e["kind"] == "faulty_node"]


def assert_in_detection_order(episodes: list[dict[str, Any]]) -> None:
    times = [parse(e["detected_at"]) for e in episodes]
    assert times == sorted(times)


# --- the pure step: episodes + already-read metrics -------------------------------------------------------------

# (cause, the GPU to fault; None for faults of a whole node or of every node)
NODE_CAUSES = [(Cause.THERMAL, 3), (Cause.NETWORK, None), (Cause.GPU, 5), (Cause.GPU_MEMORY, 2)]


@pytest.mark.parametrize(("cause", "gpu"), NODE_CAUSES, ids=[c.value for c, _ in NODE_CAUSES])
@pytest.mark.parametrize("seed", [1, 2])
def test_the_node_behind_a_slowdown_or_a_hang_is_named_with_its_cause(
    tmp_path: Path, cause: Cause, gpu: int | None, seed: int
) -> None:
    rng = random.Random(seed * 31 + len(cause.value))
    nodes = node_ids(rng.randrange(8, 17), rng)
    culprit = rng.choice(nodes)
    slow_from = rng.choice([80.0, 95.0, 110.0])
    factor = 0.0 if cause is Cause.GPU else 0.4  # a GPU gone hangs the job; the others slow it
    job_row = Job(org="kumo-labs", cluster="p5", name="llm", slow_from=slow_from, slow_to=slow_from + 40, factor=factor)
    episodes, span = replayed(write(tmp_path, trace_lines([job_row], seed=seed)))
    (detected,) = episodes
    assert detected["kind"] == ("stall" if cause is Cause.GPU else "slowdown")
    assert (detected["cause"], detected["suspects"]) == ("unknown", []), "throughput alone names no culprit"
    metrics = cluster_metrics("p5", nodes, [fault(cause, culprit, slow_from, slow_from + 40, gpu)], seed=seed)

    named = with_culprits(episodes, span, {"p5": metrics})

    (job,) = jobs_of(named)
    assert list(job) == JOB_KEYS
    assert job["cause"] == cause.value
    assert job["suspects"][:1] == [culprit]
    assert {k: v for k, v in job.items() if k not in ("cause", "suspects")} == {
        k: v for k, v in detected.items() if k not in ("cause", "suspects")
    }, "the metrics name the culprit; they change nothing the detector said"


def test_data_loading_slowing_every_node_is_input_with_no_suspect(tmp_path: Path) -> None:
    rng = random.Random(7)
    nodes = node_ids(12, rng)
    path = write(tmp_path, trace_lines([Job(org="kumo-labs", cluster="p5", name="llm", slow_from=100, slow_to=140)]))
    episodes, span = replayed(path)
    metrics = cluster_metrics("p5", nodes, [fault(Cause.INPUT, None, 100, 140)])

    named = with_culprits(episodes, span, {"p5": metrics})

    (job,) = jobs_of(named)
    assert (job["cause"], job["suspects"]) == ("input", [])
    assert faulty_of(named) == [], "every node waiting alike is no faulty node"


def test_a_node_that_diverges_before_any_job_slows_is_a_faulty_node_episode(tmp_path: Path) -> None:
    rng = random.Random(11)
    nodes = node_ids(16, rng)
    culprit = rng.choice(nodes)
    # The job's throughput stays flat: the throttled GPU has not hurt it (yet).
    path = write(tmp_path, trace_lines([Job(org="kumo-labs", cluster="p5", name="llm")]))
    episodes, span = replayed(path)
    assert episodes == []
    metrics = cluster_metrics("p5", nodes, [fault(Cause.THERMAL, culprit, 60, 120, gpu=4)])

    named = with_culprits(episodes, span, {"p5": metrics})

    (faulty,) = named
    assert list(faulty) == FAULTY_KEYS
    assert faulty | {"start": None, "detected_at": None, "end": None} == {
        "kind": "faulty_node",
        "org": "kumo-labs",  # from the trace's rows of that cluster
        "cluster": "p5",
        "job": None,
        "node": culprit,
        "cause": "thermal",
        "suspects": [culprit],
        "start": None,
        "detected_at": None,
        "end": None,
    }
    start, detected, end = parse(faulty["start"]), parse(faulty["detected_at"]), parse(faulty["end"])
    injected, cleared = T0 + timedelta(minutes=60), T0 + timedelta(minutes=120)
    assert injected - timedelta(minutes=1) <= start <= injected + FAULT_WINDOW
    assert start <= detected <= injected + 2 * FAULT_WINDOW
    assert cleared <= end <= cleared + 2 * FAULT_WINDOW
    assert faulty["start"].endswith("Z") and faulty["detected_at"].endswith("Z") and faulty["end"].endswith("Z")


def test_a_node_still_diverging_at_the_end_of_the_trace_has_no_end(tmp_path: Path) -> None:
    rng = random.Random(13)
    nodes = node_ids(8, rng)
    culprit = rng.choice(nodes)
    path = write(tmp_path, trace_lines([Job(org="hoshi", cluster="trn", name="llm")]))
    episodes, span = replayed(path)
    metrics = cluster_metrics("trn", nodes, [fault(Cause.NETWORK, culprit, 120, None)])

    (faulty,) = with_culprits(episodes, span, {"trn": metrics})

    assert (faulty["node"], faulty["cause"], faulty["org"], faulty["end"]) == (culprit, "network", "hoshi", None)


def test_only_faulty_nodes_the_trace_overlaps_are_listed(tmp_path: Path) -> None:
    rng = random.Random(37)
    nodes = node_ids(10, rng)
    before, across = rng.sample(nodes, 2)
    path = write(tmp_path, trace_lines([Job(org="kumo-labs", cluster="p5", name="llm")], minutes=90))
    episodes, span = replayed(path)
    metrics = cluster_metrics(
        "p5",
        nodes,
        [
            fault(Cause.NETWORK, before, -55, -25),  # within the healthy hour read before the trace, over by T0
            fault(Cause.THERMAL, across, -30, 30, gpu=6),  # began before the trace, goes on into it
        ],
        minutes=90,
    )

    named = with_culprits(episodes, span, {"p5": metrics})

    assert [(e["node"], e["cause"]) for e in named] == [(across, "thermal")]
    assert parse(named[0]["start"]) < T0 < parse(named[0]["end"])


def test_a_cluster_two_orgs_name_gets_the_faulty_node_once_per_org(tmp_path: Path) -> None:
    rng = random.Random(41)
    nodes = node_ids(8, rng)
    culprit = rng.choice(nodes)
    jobs = [Job(org="kumo-labs", cluster="same-name", name="a"), Job(org="hoshi", cluster="same-name", name="b")]
    episodes, span = replayed(write(tmp_path, trace_lines(jobs, minutes=120)))
    metrics = cluster_metrics("same-name", nodes, [fault(Cause.NETWORK, culprit, 40, 80)], minutes=120)

    named = with_culprits(episodes, span, {"same-name": metrics})

    assert [(e["org"], e["node"]) for e in named] == [("hoshi", culprit), ("kumo-labs", culprit)]


def test_a_cluster_without_metrics_keeps_unknown_and_others_are_named(tmp_path: Path) -> None:
    rng = random.Random(17)
    nodes = node_ids(10, rng)
    culprit = rng.choice(nodes)
    jobs = [
        Job(org="kumo-labs", cluster="p5", name="a", slow_from=90, slow_to=130),
        Job(org="kumo-labs", cluster="dark", name="b", slow_from=90, slow_to=130),
    ]
    episodes, span = replayed(write(tmp_path, trace_lines(jobs)))
    p5 = cluster_metrics("p5", nodes, [fault(Cause.THERMAL, culprit, 90, 130, gpu=1)])
    empty = ClusterMetrics(cluster="dark", start=p5.start, end=p5.end, step_seconds=30.0, series=())

    for metrics in ({"p5": p5, "dark": empty}, {"p5": p5}):
        named = {e["job"]: e for e in jobs_of(with_culprits(episodes, span, metrics))}
        assert (named["a"]["cause"], named["a"]["suspects"][:1]) == ("thermal", [culprit])
        assert (named["b"]["cause"], named["b"]["suspects"]) == ("unknown", [])


def test_episodes_of_both_kinds_come_out_by_detection_time(tmp_path: Path) -> None:
    rng = random.Random(19)
    nodes_a, nodes_b = node_ids(8, rng), node_ids(8, rng)
    jobs = [
        Job(org="kumo-labs", cluster="a", name="early", slow_from=30, slow_to=60),
        Job(org="hoshi", cluster="b", name="late", slow_from=140, slow_to=170),
    ]
    episodes, span = replayed(write(tmp_path, trace_lines(jobs)))
    metrics = {
        "a": cluster_metrics("a", nodes_a, [fault(Cause.THERMAL, nodes_a[2], 30, 60, gpu=0)]),
        "b": cluster_metrics("b", nodes_b, [fault(Cause.NETWORK, nodes_b[5], 90, 170)]),
    }

    named = with_culprits(episodes, span, metrics)

    assert_in_detection_order(named)
    faulty = {e["node"]: e for e in faulty_of(named)}
    assert set(faulty) >= {nodes_a[2], nodes_b[5]}
    assert (faulty[nodes_b[5]]["org"], faulty[nodes_b[5]]["cause"]) == ("hoshi", "network")
    kinds = [e["kind"] if e["kind"] == "faulty_node" else e["job"] for e in named]
    # b's EFA degrades at 90 min, 50 minutes before its job slows: its faulty node comes between the two jobs.
    assert kinds.index("early") < kinds.index("faulty_node", kinds.index("early")) < kinds.index("late")


EPISODE_TIMES = st.datetimes(
    min_value=datetime(2026, 11, 1), max_value=datetime(2026, 11, 2), timezones=st.just(UTC)
).map(lambda ts: ts.replace(microsecond=ts.microsecond if ts.microsecond % 2 else 0))


@given(
    st.lists(
        st.tuples(EPISODE_TIMES, st.sampled_from(["stall", "slowdown"]), st.sampled_from(["j1", "j2", "j3"])),
        max_size=12,
    )
)
@settings(max_examples=60, deadline=None)
def test_the_order_is_by_time_then_kind_and_job_even_with_fractions_of_seconds(
    episodes: list[tuple[datetime, str, str]],
) -> None:
    from bot.monitor.replay import iso

    dicts = [
        {
            "kind": kind,
            "org": "o",
            "cluster": "c",
            "job": job,
            "start": iso(ts),
            "detected_at": iso(ts),
            "end": None,
            "cause": "unknown",
            "suspects": [],
        }
        for ts, kind, job in episodes
    ]
    out = with_culprits(dicts, TraceSpan(), {})
    assert sorted(map(json.dumps, out)) == sorted(map(json.dumps, dicts)), "no metrics: the same episodes"
    keys = [(parse(e["detected_at"]), e["kind"], e["job"]) for e in out]
    assert keys == sorted(keys)  # "…00.5Z" is before "…00Z" in time, though after it as text


def test_the_span_holds_each_clusters_orgs_and_first_row_and_the_last_row(tmp_path: Path) -> None:
    lines = [
        HEADER,
        f"{z(T0)},kumo-labs,a,j1,,start",
        f"{z(T0 + timedelta(minutes=5))},hoshi,b,j2,1000,",
        f"{z(T0 + timedelta(minutes=6))},kumo-labs,a,j1,1000,",
        f"{z(T0 + timedelta(minutes=7))},sora,a,j3,1000,",
        f"{z(T0 + timedelta(minutes=9))},hoshi,b,j2,1000,",
    ]
    _, span = replayed(write(tmp_path, lines))
    assert {c: (s.orgs, s.first) for c, s in span.clusters.items()} == {
        "a": (["kumo-labs", "sora"], T0),
        "b": (["hoshi"], T0 + timedelta(minutes=5)),
    }
    assert span.last == T0 + timedelta(minutes=9)
    assert span.metrics_range("b") == (T0 + timedelta(minutes=5) - HEALTHY_BEFORE, T0 + timedelta(minutes=9))


# --- through a real Prometheus ----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class World:
    """Three clusters in one trace: `kumo-p5-train` with a thermal straggler among decoys (a checkpoint every
    hour, a healthy node whose exporters restart), `hoshi-p5` with a degraded EFA link, `dark` with no metrics
    in Prometheus at all."""

    url: str
    trace: Path
    thermal: str
    network: str


@dataclass(frozen=True, kw_only=True)
class Run:
    code: int
    out: list[str]
    err: str

    @property
    def episodes(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.out]


def run(argv: list[str]) -> Run:
    """`pitcrew ...` through its main(), what it printed captured (module fixtures cannot use capsys)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return Run(code=code, out=out.getvalue().splitlines(), err=err.getvalue())


@pytest.fixture(scope="module")
def world(prometheus_with: Callable[..., str], tmp_path_factory: pytest.TempPathFactory) -> World:
    rng = random.Random(23)
    nodes_a, nodes_b = node_ids(16, rng), node_ids(12, rng)
    thermal, network = nodes_a[rng.randrange(16)], nodes_b[rng.randrange(12)]
    gapped = next(node for node in nodes_a if node != thermal)
    a = cluster_metrics(
        "kumo-p5-train",
        nodes_a,
        [fault(Cause.THERMAL, thermal, 100, 140, gpu=3)],
        seed=3,
        checkpoint_every=3600.0,  # on the hour, as the trace's pauses (T0 is on the hour)
        gaps=[Gap(node=gapped, start=unix(T0 + timedelta(minutes=40)), end=unix(T0 + timedelta(minutes=47)))],
    )
    b = cluster_metrics("hoshi-p5", nodes_b, [fault(Cause.NETWORK, network, 60, 110)], seed=4)
    jobs = [
        Job(org="kumo-labs", cluster="kumo-p5-train", name="llm-70b", slow_from=100, slow_to=140, checkpoint_every=60),
        Job(org="hoshi", cluster="hoshi-p5", name="moe", slow_from=60, slow_to=110, factor=0.5),
        Job(org="sora", cluster="dark", name="vision", slow_from=30, slow_to=70),
    ]
    trace = write(tmp_path_factory.mktemp("replay"), trace_lines(jobs, seed=5))
    return World(url=prometheus_with(a, b), trace=trace, thermal=thermal, network=network)


@pytest.fixture(scope="module")
def named(world: World) -> Run:
    """`pitcrew throughput replay TRACE --metrics-url URL`, run once for the tests that read its output."""
    return run(["throughput", "replay", str(world.trace), "--metrics-url", world.url])


def test_the_replay_names_the_culprits_and_the_faulty_nodes(world: World, named: Run) -> None:
    assert named.code == 0
    episodes = named.episodes
    jobs = {e["job"]: e for e in jobs_of(episodes)}
    assert set(jobs) == {"llm-70b", "moe", "vision"}
    assert (jobs["llm-70b"]["cause"], jobs["llm-70b"]["suspects"][:1]) == ("thermal", [world.thermal])
    assert (jobs["moe"]["cause"], jobs["moe"]["suspects"][:1]) == ("network", [world.network])
    assert (jobs["vision"]["cause"], jobs["vision"]["suspects"]) == ("unknown", []), "no metrics for `dark`"
    faulty = {(e["cluster"], e["node"]): e for e in faulty_of(episodes)}
    assert set(faulty) == {("kumo-p5-train", world.thermal), ("hoshi-p5", world.network)}, "no decoy blamed"
    assert faulty[("kumo-p5-train", world.thermal)]["cause"] == "thermal"
    assert faulty[("kumo-p5-train", world.thermal)]["org"] == "kumo-labs"
    assert faulty[("hoshi-p5", world.network)]["cause"] == "network"
    assert faulty[("hoshi-p5", world.network)]["org"] == "hoshi"
    assert all(list(e) == FAULTY_KEYS and e["suspects"] == [e["node"]] for e in faulty.values())
    assert all(list(e) == JOB_KEYS for e in jobs.values())
    assert_in_detection_order(episodes)


def test_a_cluster_prometheus_knows_nothing_of_is_said_once_not_an_error(named: Run) -> None:
    assert named.code == 0
    assert named.err.count("\n") == 1 and "Traceback" not in named.err
    assert 'cluster="dark"' in named.err and "unknown" in named.err


def test_without_metrics_the_output_is_todays(world: World, named: Run) -> None:
    plain = run(["throughput", "replay", str(world.trace)])
    assert (plain.code, plain.err) == (0, "")
    assert plain.episodes == list(replay_csv(world.trace))
    assert all((e["cause"], e["suspects"]) == ("unknown", []) for e in plain.episodes)

    def detected(episodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in e.items() if k not in ("cause", "suspects")} for e in jobs_of(episodes)]

    assert detected(named.episodes) == detected(plain.episodes), "the metrics change what is blamed, not what is seen"


def test_a_cluster_label_no_series_has_leaves_every_episode_unknown_said_once_per_cluster(world: World) -> None:
    wrong = run(
        ["throughput", "replay", str(world.trace), "--metrics-url", world.url, "--cluster-label", "hyperpod_cluster"]
    )
    assert wrong.code == 0
    assert [(e["cause"], e["suspects"]) for e in wrong.episodes] == [("unknown", [])] * 3
    assert wrong.err.count("\n") == 3 and wrong.err.count("hyperpod_cluster=") == 3 and "Traceback" not in wrong.err


@dataclass(frozen=True, kw_only=True)
class Relabelled:
    """A ParallelCluster whose exporters name nodes by hostname and the cluster `pcluster`."""

    url: str
    trace: Path
    culprit: str
    flags: tuple[str, ...] = ("--node-label", "hostname", "--cluster-label", "pcluster")


@pytest.fixture(scope="module")
def relabelled(prometheus_with: Callable[..., str], tmp_path_factory: pytest.TempPathFactory) -> Relabelled:
    rng = random.Random(29)
    nodes = [f"queue1-st-p5-{n}" for n in range(1, 9)]  # Slurm's node names rather than instance ids
    culprit = rng.choice(nodes)
    metrics = cluster_metrics("pc-trn", nodes, [fault(Cause.NETWORK, culprit, 60, 100)], seed=6, minutes=120)
    url = prometheus_with(metrics, node_label="hostname", cluster_label="pcluster")
    job = Job(org="umi", cluster="pc-trn", name="j", slow_from=60, slow_to=100)
    trace = write(tmp_path_factory.mktemp("relabelled"), trace_lines([job], minutes=120))
    return Relabelled(url=url, trace=trace, culprit=culprit)


def test_labels_named_otherwise_are_read_with_the_flags(relabelled: Relabelled) -> None:
    result = run(["throughput", "replay", str(relabelled.trace), "--metrics-url", relabelled.url, *relabelled.flags])

    assert (result.code, result.err) == (0, "")
    (job,) = jobs_of(result.episodes)
    assert (job["cause"], job["suspects"][:1]) == ("network", [relabelled.culprit])
    assert [e["node"] for e in faulty_of(result.episodes)] == [relabelled.culprit]

    default = run(["throughput", "replay", str(relabelled.trace), "--metrics-url", relabelled.url])
    assert [(e["cause"], e["suspects"]) for e in default.episodes] == [("unknown", [])], "the default labels miss"


def test_signed_requests_go_through_with_the_standard_chains_credentials(
    relabelled: Relabelled, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Prometheus ignores the signature (the signing itself is checked against a verifying server in the
    # reader's tests); this shows --sigv4 and --region reach the reader and the answer is read as before.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    signing = ("--sigv4", "--region", "us-east-1")
    signed = run(
        ["throughput", "replay", str(relabelled.trace), "--metrics-url", relabelled.url, *relabelled.flags, *signing]
    )
    assert (signed.code, signed.err) == (0, "")
    assert jobs_of(signed.episodes)[0]["suspects"][:1] == [relabelled.culprit]


class Recording:
    """The real reader, and what it was asked and answered."""

    def __init__(self, *, reader: PrometheusReader) -> None:
        self.reader = reader
        self.asked: list[tuple[str, datetime, datetime]] = []
        self.answered: dict[str, ClusterMetrics] = {}

    async def cluster_metrics(self, cluster: str, *, start: datetime, end: datetime) -> ClusterMetrics:
        self.asked.append((cluster, start, end))
        self.answered[cluster] = await self.reader.cluster_metrics(cluster, start=start, end=end)
        return self.answered[cluster]

    async def aclose(self) -> None:
        await self.reader.aclose()


async def test_each_cluster_is_read_once_over_the_trace_and_the_hour_before(world: World, named: Run) -> None:
    episodes, span = replayed(world.trace)
    recording = Recording(reader=PrometheusReader(config=MetricsConfig(prometheus_url=world.url)))
    try:
        through_reader = await replay_with_metrics(episodes, span, recording)
    finally:
        await recording.aclose()
    last = T0 + TRACE
    assert recording.asked == [
        ("kumo-p5-train", T0 - HEALTHY_BEFORE, last),
        ("hoshi-p5", T0 - HEALTHY_BEFORE, last),
        ("dark", T0 - HEALTHY_BEFORE, last),
    ]
    assert through_reader == with_culprits(episodes, span, recording.answered), "the same read or handed in"
    assert through_reader == named.episodes, "and what the command prints"


# --- bad input: one line, exit 2, no traceback ------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def not_prometheus(status: int, body: bytes, content_type: str) -> Iterator[str]:
    """A web server that is not a Prometheus: every path answers `body`."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_POST = do_GET

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def small_trace(tmp_path: Path) -> Path:
    return write(tmp_path, trace_lines([Job(org="o", cluster="c", name="j", slow_from=60, slow_to=90)], minutes=100))


def assert_one_line(err: str, *words: str) -> None:
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for word in words:
        assert word in err, (word, err)


def test_a_url_nothing_listens_on_is_one_line_and_exit_2(small_trace: Path) -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    result = run(["throughput", "replay", str(small_trace), "--metrics-url", url])
    assert (result.code, result.out) == (2, [])
    assert_one_line(result.err, url, "--metrics-url")


@pytest.mark.parametrize(
    ("status", "body", "content_type"),
    [
        (200, b"<html><body>Grafana</body></html>", "text/html"),
        (404, b"404 page not found", "text/plain"),
        (200, b'{"hello": "world"}', "application/json"),
    ],
    ids=["html", "not-found", "other-json"],
)
def test_a_server_that_is_not_prometheus_is_one_line_and_exit_2(
    small_trace: Path, status: int, body: bytes, content_type: str
) -> None:
    with not_prometheus(status, body, content_type) as url:
        result = run(["throughput", "replay", str(small_trace), "--metrics-url", url])
    assert (result.code, result.out) == (2, [])
    assert_one_line(result.err, "127.0.0.1", "--metrics-url")


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--metrics-url", "localhost:9090"], ["--metrics-url 'localhost:9090'", "http://"]),
        (["--metrics-url", "prometheus.internal"], ["--metrics-url", "scheme"]),
        (["--metrics-url", "http://p:9090", "--node-label", "instance-id"], ["--node-label 'instance-id'", "label"]),
        (["--metrics-url", "http://p:9090", "--cluster-label", "9cluster"], ["--cluster-label", "label"]),
        (["--sigv4"], ["--sigv4", "without --metrics-url"]),
        (["--node-label", "host"], ["--node-label", "without --metrics-url"]),
        (["--metrics-url", "http://p:9090", "--region", "us-east-1"], ["--region", "--sigv4"]),
        (["--metrics-url", "https://aps.example", "--sigv4", "--region", "Tokyo"], ["--region 'Tokyo'", "us-east-1"]),
    ],
)
def test_bad_metrics_flags_are_one_line_and_exit_2_before_the_trace_is_read(
    tmp_path: Path, flags: list[str], words: list[str]
) -> None:
    missing = tmp_path / "never-read.csv"  # the flags are refused first
    result = run(["throughput", "replay", str(missing), *flags])
    assert (result.code, result.out) == (2, [])
    assert_one_line(result.err, *words)


def test_sigv4_without_credentials_or_region_says_which(
    small_trace: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    url = "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-0123"

    result = run(["throughput", "replay", str(small_trace), "--metrics-url", url, "--sigv4"])
    assert result.code == 2
    assert_one_line(result.err, "--region")

    result = run(["throughput", "replay", str(small_trace), "--metrics-url", url, "--sigv4", "--region", "us-east-1"])
    assert result.code == 2
    assert_one_line(result.err, "credentials", "AWS_ACCESS_KEY_ID")


def test_a_bad_trace_is_still_the_files_error_exit_1(tmp_path: Path) -> None:
    bad = write(tmp_path, ["time,org"], name="bad.csv")
    url = f"http://127.0.0.1:{_free_port()}"  # never asked: the file is refused first
    result = run(["throughput", "replay", str(bad), "--metrics-url", url])
    assert (result.code, result.out) == (1, [])
    assert_one_line(result.err, "bad.csv", "line 1")
