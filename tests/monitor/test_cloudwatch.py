"""The CloudWatch pull, against the moto server through the seeded accounts (each org's role, over HTTP).

What moto's get_metric_data does and does not do (moto 5.2), and what these tests therefore show:
- Period and Stat are honoured (Average of the datapoints in each Period), and ScanBy; but its periods start
  at StartTime, not at the minute as CloudWatch's do. The pull asks for whole minutes only, so both agree.
- It never pages: no NextToken, no MaxDatapoints, no limit of 500 queries per call. The pull's NextToken loop
  and its batches of 500 run here only as a single page (list_metrics does page, at 500 metrics).
- A query with dimensions is matched on metric name and dimensions, not namespace; so each test uses a
  metric name of its own (moto's state lasts the whole session) rather than a namespace of its own.
- It has no notion of permissions: an account that denies CloudWatch is made with botocore's own
  short-circuit (a before-call handler answering 403), the rest of the path is the real one.
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.clusters.accounts import AwsAccounts
from bot.config import OrgConfig, ProgramConfig, ThroughputSource
from bot.monitor.cloudwatch import CloudWatchPull, read_metric
from storage import crud
from storage.db import Database
from tests.conftest import SeededAws

NAMESPACE = "Pitcrew/Tests"
KUMO = "kumo-labs"
SAKURA = "sakura-ai"
# Whole minutes, so the tests can say which minutes a pull reads; recent enough for CloudWatch's rules.
BASE = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=5)


def _source(metric: str, dimensions: dict[str, str] | None = None) -> ThroughputSource:
    return ThroughputSource(namespace=NAMESPACE, metric=metric, dimensions=dimensions or {"Cluster": "*"})


def _program(program: ProgramConfig, sources: dict[str, ThroughputSource]) -> ProgramConfig:
    """The example program with exactly these orgs pulling from CloudWatch."""
    orgs = [org.model_copy(update={"throughput": sources.get(org.id)}) for org in program.orgs]
    return program.model_copy(update={"orgs": orgs})


def _org(program: ProgramConfig, org_id: str) -> OrgConfig:
    org = program.org(org_id)
    assert org is not None
    return org


def _put(cloudwatch: Any, metric: str, points: list[tuple[dict[str, str], datetime, float]]) -> None:
    cloudwatch.put_metric_data(
        Namespace=NAMESPACE,
        MetricData=[
            {
                "MetricName": metric,
                "Dimensions": [{"Name": name, "Value": value} for name, value in dims.items()],
                "Timestamp": ts,
                "Value": value,
            }
            for dims, ts, value in points
        ],
    )


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def metric() -> str:
    return f"TokensPerSecond{uuid.uuid4().hex[:8]}"


@pytest.fixture
def cluster() -> str:
    return f"kumo-p5-{uuid.uuid4().hex[:6]}"


async def _stored(db: Database, org_id: str, cluster: str) -> list[tuple[str, datetime, float | None]]:
    async with db.session() as session:
        rows = await crud.samples(
            session,
            org_id=org_id,
            cluster=cluster,
            job=None,
            since=BASE - timedelta(hours=2),
            until=BASE + timedelta(hours=1),
        )
    return [(row.job, row.ts, row.tokens_per_second) for row in rows]


async def test_a_wildcard_finds_each_job_and_a_repeated_pull_stores_nothing_twice(
    db: Database, seeded_aws: SeededAws, metric: str, cluster: str
) -> None:
    program = _program(seeded_aws.program, {KUMO: _source(metric)})
    cloudwatch = seeded_aws.accounts.client(_org(program, KUMO), "cloudwatch")
    a, b = {"Cluster": cluster, "Job": "llama-70b"}, {"Cluster": cluster, "Job": "mistral-7b"}
    _put(
        cloudwatch,
        metric,
        [
            (a, BASE - timedelta(minutes=40), 1.0),  # before the 30 minutes looked back
            (a, BASE, 1000.0),
            (a, BASE + timedelta(seconds=30), 1200.0),  # same minute: averaged
            (a, BASE + timedelta(minutes=1, seconds=5), 900.0),
            (b, BASE + timedelta(minutes=1, seconds=20), 50.0),
            (b, BASE + timedelta(minutes=2, seconds=10), 70.0),  # the minute still running at the first pull
        ],
    )
    clock = Clock(BASE + timedelta(minutes=2, seconds=30))
    pull = CloudWatchPull(db=db, accounts=seeded_aws.accounts, program=program, clock=clock)

    assert await pull.pull() == 3
    assert sorted(await _stored(db, KUMO, cluster)) == [
        ("llama-70b", BASE, 1100.0),
        ("llama-70b", BASE + timedelta(minutes=1), 900.0),
        ("mistral-7b", BASE + timedelta(minutes=1), 50.0),
    ]
    async with db.session() as session:
        rollups = await crud.rollups(
            session,
            org_id=KUMO,
            cluster=cluster,
            job=None,
            since=BASE - timedelta(hours=1),
            until=BASE + timedelta(hours=1),
        )
    assert [(r.job, r.minute, r.count, r.total) for r in rollups] == [
        ("llama-70b", BASE, 1, 1100.0),
        ("llama-70b", BASE + timedelta(minutes=1), 1, 900.0),
        ("mistral-7b", BASE + timedelta(minutes=1), 1, 50.0),
    ]

    # Same time again, and a bit later within the same minute: nothing new, nothing stored twice.
    assert await pull.pull() == 0
    clock.now += timedelta(seconds=20)
    assert await pull.pull() == 0
    assert len(await _stored(db, KUMO, cluster)) == 3

    # The running minute once it is over, and a datapoint that arrives later.
    clock.now += timedelta(minutes=1)
    assert await pull.pull() == 1
    _put(cloudwatch, metric, [(a, BASE + timedelta(minutes=3, seconds=1), 800.0)])
    clock.now += timedelta(minutes=1)
    assert await pull.pull() == 1
    assert sorted(await _stored(db, KUMO, cluster)) == [
        ("llama-70b", BASE, 1100.0),
        ("llama-70b", BASE + timedelta(minutes=1), 900.0),
        ("llama-70b", BASE + timedelta(minutes=3), 800.0),
        ("mistral-7b", BASE + timedelta(minutes=1), 50.0),
        ("mistral-7b", BASE + timedelta(minutes=2), 70.0),
    ]
    async with db.session() as session:
        latest = await crud.latest_sample_times(session, org_id=KUMO)
    assert latest[(cluster, "llama-70b")] == BASE + timedelta(minutes=3)
    assert latest[(cluster, "mistral-7b")] == BASE + timedelta(minutes=2)
    assert all(ts.tzinfo is not None for ts in latest.values())


def test_read_metric_maps_dimensions_to_cluster_and_job(seeded_aws: SeededAws, metric: str) -> None:
    org = _org(seeded_aws.program, KUMO)
    cloudwatch = seeded_aws.accounts.client(org, "cloudwatch")
    tag = uuid.uuid4().hex[:6]
    _put(
        cloudwatch,
        metric,
        [
            ({"ClusterName": f"pc_{tag}", "JobName": "run 3 (retry)"}, BASE, 10.0),
            ({"ClusterName": f"pc_{tag}", "Rank": "0", "Host": "ip-10-0-0-1"}, BASE, 20.0),
            ({"Cluster": f"c-{tag}"}, BASE, 30.0),
            ({"Cluster": f"c-{tag}", "Job": "j" * 200}, BASE, 40.0),
            ({"Node": f"n{tag}"}, BASE, 50.0),
        ],
    )
    until = BASE + timedelta(minutes=1)
    rows = read_metric(
        cloudwatch, _source(metric, {"Team": "*"}), org_id=KUMO, since=BASE, until=until
    )  # no metric carries Team
    assert rows == []

    by_cluster_name = read_metric(
        cloudwatch, _source(metric, {"ClusterName": "*"}), org_id=KUMO, since=BASE, until=until
    )
    assert sorted((r.cluster, r.job, r.tokens_per_second) for r in by_cluster_name) == [
        (f"pc-{tag}", "ip-10-0-0-1/0", 20.0),  # no job dimension: the others' values, by dimension name
        (f"pc-{tag}", "run-3--retry-", 10.0),
    ]
    by_cluster = read_metric(cloudwatch, _source(metric), org_id=KUMO, since=BASE, until=until)
    assert sorted((r.cluster, r.job, r.tokens_per_second) for r in by_cluster) == [
        (f"c-{tag}", metric, 30.0),  # no other dimension: the metric's name
        (f"c-{tag}", "j" * 128, 40.0),
    ]
    row = by_cluster[0]
    assert row.org_id == KUMO and row.ts == BASE and row.ts.tzinfo is not None
    assert row.samples_per_second is None and row.event is None and row.received_at.tzinfo is not None

    [unknown] = read_metric(cloudwatch, _source(metric, {"Node": "*"}), org_id=KUMO, since=BASE, until=until)
    assert (unknown.cluster, unknown.job) == ("unknown", f"n{tag}")  # no cluster dimension

    # Fixed dimensions name one metric, read without list_metrics.
    fixed = read_metric(cloudwatch, _source(metric, {"Cluster": f"c-{tag}"}), org_id=KUMO, since=BASE, until=until)
    assert [(r.cluster, r.job, r.tokens_per_second) for r in fixed] == [(f"c-{tag}", metric, 30.0)]
    assert read_metric(cloudwatch, _source(metric, {"Cluster": "*"}), org_id=KUMO, since=until, until=until) == []


class DenyingAccounts(AwsAccounts):
    """One org's account refuses CloudWatch: its client answers 403 AccessDenied before sending."""

    def __init__(self, denied: str) -> None:
        super().__init__()
        self._denied = denied

    def client(self, org: OrgConfig, service: str) -> Any:
        client = super().client(org, service)
        if org.id == self._denied and service == "cloudwatch":
            client.meta.events.register("before-call.cloudwatch", _deny, unique_id="pitcrew-test-deny")
        return client


class _Http:
    status_code = 403
    headers: dict[str, str] = {}
    content = b""


def _deny(**_: Any) -> tuple[Any, dict[str, Any]]:
    error = {"Code": "AccessDenied", "Message": "not authorized to perform: cloudwatch:ListMetrics"}
    return _Http(), {"Error": error, "ResponseMetadata": {"HTTPStatusCode": 403}}


async def test_an_org_that_fails_is_one_log_line_and_the_others_go_on(
    db: Database, seeded_aws: SeededAws, metric: str, cluster: str, caplog: pytest.LogCaptureFixture
) -> None:
    sources = {KUMO: _source(metric), SAKURA: _source(metric), "fuji-ml": _source(f"{metric}Missing")}
    program = _program(seeded_aws.program, sources)
    _put(
        seeded_aws.accounts.client(_org(program, KUMO), "cloudwatch"),
        metric,
        [({"Cluster": cluster, "Job": "llama-70b"}, BASE, 500.0)],
    )
    _put(
        seeded_aws.accounts.client(_org(program, SAKURA), "cloudwatch"),
        metric,
        [({"Cluster": f"sakura-{cluster}", "Job": "trn-run"}, BASE, 600.0)],
    )
    clock = Clock(BASE + timedelta(minutes=1))
    caplog.set_level(logging.WARNING, logger="bot.monitor.cloudwatch")

    pull = CloudWatchPull(db=db, accounts=DenyingAccounts(SAKURA), program=program, clock=clock)
    assert await pull.pull() == 1  # kumo's; sakura denied; fuji's metric does not exist
    assert await _stored(db, KUMO, cluster) == [("llama-70b", BASE, 500.0)]
    assert await _stored(db, SAKURA, f"sakura-{cluster}") == []
    lines = [r.getMessage() for r in caplog.records if r.name == "bot.monitor.cloudwatch"]
    assert lines == ["CloudWatch throughput pull of sakura-ai failed: ClientError (AccessDenied)"]

    # Allowed again, sakura's datapoint arrives; kumo's is not stored twice.
    pull = CloudWatchPull(db=db, accounts=seeded_aws.accounts, program=program, clock=clock)
    assert await pull.pull() == 1
    assert await _stored(db, SAKURA, f"sakura-{cluster}") == [("trn-run", BASE, 600.0)]


async def test_no_org_with_a_source_pulls_nothing(db: Database, seeded_aws: SeededAws) -> None:
    program = _program(seeded_aws.program, {})
    assert await CloudWatchPull(db=db, accounts=seeded_aws.accounts, program=program).pull() == 0
