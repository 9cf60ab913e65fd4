"""POST /api/v1/throughput over real HTTP (uvicorn on a free port, httpx), on SQLite and Postgres: tokens,
refusals that store nothing (every bad sample named), accepted samples and batches, retries stored once, the
org's clusters (from the sweep, else from AWS: moto), the live hook; and `pitcrew token create`."""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import update
from sqlmodel import col, select
from starlette.applications import Starlette

from bot.cli import main
from bot.clusters.accounts import AwsAccounts
from bot.clusters.fleet import Fleet
from bot.ingest.api import MAX_BODY_BYTES, PATH, ingest_routes
from bot.ingest.known_clusters import KnownClusters
from bot.ingest.tokens import create_token, hash_token
from sandbox.asgi_server import serve_asgi
from sandbox.training import TrainingSimulator, sandbox_jobs
from sandbox.world import Sandbox
from storage import crud
from storage.db import Database
from storage.models import ApiToken, ClusterSeen, Org, ThroughputRollup, ThroughputSample
from tests.conftest import SeededAws
from tests.scenarios.conftest import sandbox, sandbox_factory  # noqa: F401  (the sandbox, for its training jobs)

ROOT = Path(__file__).resolve().parents[2]
ORG, OTHER, CLUSTER = "kumo-labs", "sakura-ai", "kumo-p5"


def now() -> datetime:
    return datetime.now(UTC)


def good(**changes: Any) -> dict[str, Any]:
    return {"org": ORG, "cluster": CLUSTER, "job": "llama-70b", "tokens_per_second": 1000.0, **changes}


@dataclass
class Api:
    base: str
    http: httpx.AsyncClient
    db: Database
    token: str
    hooked: list[list[ThroughputSample]]

    async def post(self, body: Any = None, *, token: str | None = "", content: bytes | None = None) -> httpx.Response:
        headers = {} if token is None else {"Authorization": f"Bearer {token or self.token}"}
        if content is not None:
            return await self.http.post(self.base + PATH, content=content, headers=headers)
        return await self.http.post(self.base + PATH, json=body, headers=headers)

    async def stored(self, org_id: str = ORG) -> list[ThroughputSample]:
        async with self.db.session() as session:
            rows = await crud.samples(
                session,
                org_id=org_id,
                cluster=CLUSTER,
                job=None,
                since=now() - timedelta(days=1),
                until=now() + timedelta(hours=1),
            )
        return list(rows)


async def swept(db: Database, *names: str, org_id: str = ORG) -> None:
    """The clusters as the node sweep records them (the org first: the table refers to it)."""
    async with db.session() as session:
        await crud.sync_orgs(
            session,
            orgs=[Org(id=org_id, name=org_id, channel="C0X", account_id="1" * 12, region="us-east-1", synced_at=now())],
        )
        rows = [
            ClusterSeen(org_id=org_id, backend="hyperpod", name=name, status="InService", last_seen_at=now())
            for name in names
        ]
        await crud.record_clusters_seen(session, rows=rows)


async def running(
    db: Database,
    *,
    clock: Callable[[], datetime] = now,
    hook_fails: bool = False,
    clusters: KnownClusters | None = None,
) -> AsyncIterator[Api]:
    """The ingest API; by default the sweep has seen CLUSTER and there is no AWS to ask."""
    hooked: list[list[ThroughputSample]] = []

    async def on_samples(samples: list[ThroughputSample]) -> None:
        hooked.append(samples)
        if hook_fails:
            raise RuntimeError("detector exploded")

    if clusters is None:
        await swept(db, CLUSTER)
        clusters = KnownClusters(db=db, fleet=None)
    app = Starlette(
        routes=ingest_routes(db=db, clock=clock, max_age=timedelta(days=14), clusters=clusters, on_samples=on_samples)
    )
    token = await create_token(db, org_id=ORG, created_by="test")
    async with serve_asgi(app) as base, httpx.AsyncClient(timeout=10) as http:
        yield Api(base, http, db, token, hooked)


@pytest.fixture
async def api(db: Database) -> AsyncIterator[Api]:
    async for running_api in running(db):
        yield running_api


async def until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


# -- authentication ---------------------------------------------------------------------------------------------


async def test_no_token_is_401_saying_how_to_get_one(api: Api) -> None:
    response = await api.post(good(), token=None)
    assert response.status_code == 401
    assert response.json()["error"].startswith("missing bearer token: send 'Authorization: Bearer <token>'")
    assert "`pitcrew token create ORG`" in response.json()["error"]
    assert response.headers["www-authenticate"].startswith("Bearer")
    basic = await api.http.post(api.base + PATH, json=good(), headers={"Authorization": "Basic dXNlcjpwdw=="})
    assert basic.status_code == 401 and basic.json()["error"].startswith("missing bearer token")
    assert await api.stored() == []


async def test_an_unknown_or_revoked_token_is_401(api: Api) -> None:
    response = await api.post(good(), token="pct_not-a-real-token")
    assert response.status_code == 401
    assert response.json() == {
        "error": "unknown or revoked token: send 'Authorization: Bearer <token>' with your org's ingest token; "
        "program staff create one with `pitcrew token create ORG` (it is shown once)"
    }
    async with api.db.session() as session:
        await session.exec(
            update(ApiToken).where(col(ApiToken.token_hash) == hash_token(api.token)).values(revoked_at=now())
        )
        await session.commit()
    revoked = await api.post(good())
    assert revoked.status_code == 401 and revoked.json()["error"].startswith("unknown or revoked token")
    assert await api.stored() == []


async def test_the_scheme_is_case_insensitive(api: Api) -> None:
    response = await api.http.post(api.base + PATH, json=good(), headers={"authorization": f"bearer {api.token}"})
    assert response.status_code == 202


# -- refusals store nothing ---------------------------------------------------------------------------------------


async def test_a_token_of_one_org_cannot_write_another_orgs_samples(api: Api) -> None:
    """Every problem is the org: 403."""
    response = await api.post([good(), good(org=OTHER)])
    assert response.status_code == 403
    body = response.json()
    assert body["error"] == "1 sample(s) name another org than this token's; nothing stored"
    assert body["errors"][0]["index"] == 1
    assert body["errors"][0]["reason"].startswith("org 'sakura-ai' is not this token's org ('kumo-labs')")
    assert await api.stored() == [] and await api.stored(OTHER) == []
    assert api.hooked == []


async def test_bad_samples_are_400_with_a_reason_each_and_nothing_is_stored(api: Api) -> None:
    no_job = good()
    del no_job["job"]
    batch = [good(), no_job, good(tokens_per_second=-5), good(event="stop"), good()]
    response = await api.post({"samples": batch})
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "3 sample(s) refused, so the request was refused; nothing stored"
    assert [e["index"] for e in body["errors"]] == [1, 2, 3]
    assert body["errors"][0]["reason"].startswith("job is missing")
    assert body["errors"][1]["reason"].startswith("tokens_per_second must be a finite number of 0 or more")
    assert body["errors"][2]["reason"].startswith("event 'stop' is not known")
    assert await api.stored() == []
    assert api.hooked == []


async def test_a_body_that_is_not_json_is_400_with_one_reason(api: Api) -> None:
    response = await api.post(content=b"tokens_per_second=5")
    assert response.status_code == 400
    body = response.json()
    assert body["errors"] == [{"reason": body["errors"][0]["reason"]}]
    assert body["errors"][0]["reason"].startswith("the body is not valid JSON")
    assert body["error"].endswith("; nothing stored")
    empty = await api.post(content=b"")
    assert empty.status_code == 400 and empty.json()["errors"][0]["reason"].startswith("empty body")


async def test_a_body_too_large_is_413(api: Api) -> None:
    response = await api.post(content=b" " * (MAX_BODY_BYTES + 1))
    assert response.status_code == 413
    assert response.json()["error"].startswith(f"body larger than {MAX_BODY_BYTES} bytes; send at most 1000")


async def test_a_gzipped_body_is_accepted_and_other_encodings_are_415(api: Api) -> None:
    """Review finding: `Content-Encoding: gzip` (requests/httpx users compress big batches) answered 400
    "not UTF-8 text", and `br` "not valid JSON": neither says what is wrong."""
    at = (now() - timedelta(minutes=1)).isoformat()
    body = json.dumps([good(ts=at), good(ts=at, job="bert")]).encode()
    headers = {"Authorization": f"Bearer {api.token}", "Content-Type": "application/json"}
    gzipped = await api.http.post(
        api.base + PATH, content=gzip.compress(body), headers={**headers, "Content-Encoding": "gzip"}
    )
    assert gzipped.status_code == 202 and gzipped.json() == {"accepted": 2, "duplicates": 0}
    again = await api.http.post(api.base + PATH, content=body, headers=headers)  # the retry, uncompressed
    assert again.status_code == 202 and again.json() == {"accepted": 0, "duplicates": 2}

    brotli = await api.http.post(api.base + PATH, content=b"\x0b\x02", headers={**headers, "Content-Encoding": "br"})
    assert brotli.status_code == 415
    assert brotli.json()["error"].startswith("Content-Encoding br is not supported; send the JSON as is, or gzip it")
    not_gzip = await api.http.post(api.base + PATH, content=body, headers={**headers, "Content-Encoding": "gzip"})
    assert not_gzip.status_code == 400 and "is not gzip data" in not_gzip.json()["error"]
    cut = await api.http.post(
        api.base + PATH, content=gzip.compress(body)[:-12], headers={**headers, "Content-Encoding": "gzip"}
    )
    assert cut.status_code == 400 and "cut short" in cut.json()["error"]
    bomb = gzip.compress(b" " * (MAX_BODY_BYTES * 4))  # small on the wire, 4 MB inflated
    assert len(bomb) < MAX_BODY_BYTES
    too_large = await api.http.post(api.base + PATH, content=bomb, headers={**headers, "Content-Encoding": "gzip"})
    assert too_large.status_code == 413
    assert len(await api.stored()) == 2


async def test_a_ts_out_of_range_once_in_utc_is_400_not_500(api: Api) -> None:
    """Review finding: a year-9999 or year-1 time with an offset overflowed converting to UTC: a 500."""
    response = await api.post(
        [good(), good(ts="9999-12-31T23:59:59-23:59"), good(ts="0001-01-01T00:00:00+23:59"), good()]
    )
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert [e["index"] for e in errors] == [1, 2]
    assert all("is out of range" in e["reason"] for e in errors)
    assert await api.stored() == []


async def test_the_same_instant_written_differently_is_one_sample(api: Api) -> None:
    at = now().replace(microsecond=0) - timedelta(minutes=5)
    writings = [
        at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        at.isoformat(),
        at.astimezone(timezone(timedelta(hours=9))).isoformat(),
        at.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
    ]
    answers = [(await api.post(good(ts=ts))).json() for ts in writings]
    assert answers == [{"accepted": 1, "duplicates": 0}] + [{"accepted": 0, "duplicates": 1}] * 3
    half = await api.post(good(ts=at.strftime("%Y-%m-%dT%H:%M:%S.5Z")))  # another instant
    assert half.json() == {"accepted": 1, "duplicates": 0}
    assert [(count, total) for *_, count, total in await minutes(api)] == [(2, 2000.0)]


async def test_an_unexpected_error_is_a_500_without_a_stack_trace(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    def broken_clock() -> datetime:
        raise RuntimeError("clock is gone")

    async for api in running(db, clock=broken_clock):
        with caplog.at_level(logging.ERROR, logger="bot.ingest.api"):
            response = await api.post(good())
        assert response.status_code == 500
        assert response.json() == {"error": "internal error; logged"}
        assert "clock is gone" not in response.text
        assert "throughput ingest failed" in caplog.text and "clock is gone" in caplog.text
        assert await api.stored() == []


# -- accepted -------------------------------------------------------------------------------------------------------


async def test_one_sample_is_stored_and_handed_to_the_hook(api: Api) -> None:
    response = await api.post(good(step=42))
    assert response.status_code == 202 and response.json() == {"accepted": 1, "duplicates": 0}
    [row] = await api.stored()
    assert (row.org_id, row.cluster, row.job, row.tokens_per_second, row.step) == (
        ORG,
        CLUSTER,
        "llama-70b",
        1000.0,
        42,
    )
    assert abs((row.ts - now()).total_seconds()) < 60 and row.received_at == row.ts
    await until(lambda: len(api.hooked) == 1)
    assert [s.job for s in api.hooked[0]] == ["llama-70b"]


async def test_a_batch_is_stored_with_its_rollups(api: Api) -> None:
    minute = now().replace(second=0, microsecond=0) - timedelta(minutes=2)
    batch = [good(ts=(minute + timedelta(seconds=s)).isoformat(), tokens_per_second=v) for s, v in ((0, 10), (30, 30))]
    batch.append(good(job="bert", samples_per_second=3.5, tokens_per_second=None))
    response = await api.post(batch)
    assert response.status_code == 202 and response.json() == {"accepted": 3, "duplicates": 0}
    assert [(s.job, s.value) for s in await api.stored()] == [("llama-70b", 10.0), ("llama-70b", 30.0), ("bert", 3.5)]
    async with api.db.session() as session:
        [rollup] = await crud.rollups(
            session, org_id=ORG, cluster=CLUSTER, job="llama-70b", since=minute, until=minute + timedelta(minutes=1)
        )
    assert (rollup.count, rollup.total, rollup.min, rollup.max) == (2, 40.0, 10.0, 30.0)
    await until(lambda: len(api.hooked) == 1)
    assert len(api.hooked[0]) == 3


async def test_a_start_event_alone_is_accepted(api: Api) -> None:
    response = await api.post({"org": ORG, "cluster": CLUSTER, "job": "llama-70b", "event": "start", "step": 0})
    assert response.status_code == 202 and response.json() == {"accepted": 1, "duplicates": 0}
    [row] = await api.stored()
    assert row.event == "start" and row.value is None and row.step == 0


async def test_a_failing_hook_is_logged_and_the_sender_still_gets_202(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    async for api in running(db, hook_fails=True):
        with caplog.at_level(logging.ERROR, logger="bot.ingest.api"):
            response = await api.post(good())
            assert response.status_code == 202 and response.json() == {"accepted": 1, "duplicates": 0}
            await until(lambda: "the throughput hook failed on 1 stored sample(s)" in caplog.text)
        assert "detector exploded" in caplog.text
        assert len(await api.stored()) == 1


# -- a retried batch is stored once --------------------------------------------------------------------------------


async def minutes(api: Api) -> list[tuple[str, datetime, int, float]]:
    async with api.db.session() as session:
        rows = await crud.rollups(
            session, org_id=ORG, cluster=CLUSTER, job=None, since=now() - timedelta(days=1), until=now()
        )
    return [(r.job, r.minute, r.count, r.total) for r in rows]


async def hours(api: Api) -> list[tuple[str, int, float]]:
    from storage.models import ThroughputHourly

    async with api.db.session() as session:
        rows = (await session.exec(select(ThroughputHourly).order_by(col(ThroughputHourly.hour)))).all()
    return [(r.job, r.count, r.total) for r in rows]


def retried_batch(minute: datetime) -> list[dict[str, Any]]:
    """Samples with their own ts, as a script that retries sends them (without ts each would be new). The minute
    is the caller's, taken once: a batch rebuilt from the clock across a minute boundary would be another batch
    (this failed a clean CI run)."""
    return [
        good(ts=(minute + timedelta(seconds=s)).isoformat(), tokens_per_second=float(v))
        for s, v in ((0, 10), (30, 30), (60, 50))
    ]


async def test_a_retried_batch_is_accepted_stored_once_and_the_rollups_are_unchanged(api: Api) -> None:
    start = now()
    batch = retried_batch(start.replace(second=0, microsecond=0) - timedelta(minutes=3))
    first = await api.post(batch)
    assert first.status_code == 202 and first.json() == {"accepted": 3, "duplicates": 0}
    await until(lambda: len(api.hooked) == 1)
    rollups, hourly = await minutes(api), await hours(api)
    assert sum(count for *_, count, _ in rollups) == 3

    retry = await api.post(batch)  # after a timeout the script did not see the answer of
    assert retry.status_code == 202 and retry.json() == {"accepted": 0, "duplicates": 3}
    assert len(await api.stored()) == 3
    assert await minutes(api) == rollups and await hours(api) == hourly
    # A retry with one more sample: only that one is new, in the rollups and for the detector.
    more = [*batch, good(ts=(start - timedelta(seconds=30)).isoformat(), tokens_per_second=70.0)]
    third = await api.post(more)
    assert third.status_code == 202 and third.json() == {"accepted": 1, "duplicates": 3}
    await until(lambda: len(api.hooked) == 2)
    assert [s.value for s in api.hooked[1]] == [70.0]
    assert sum(count for *_, count, _ in await minutes(api)) == 4
    assert sum(count for _, count, _ in await hours(api)) == 4


async def test_repeats_within_one_batch_are_stored_once(api: Api) -> None:
    at = (now() - timedelta(minutes=1)).isoformat()
    batch = [good(ts=at), good(ts=at, tokens_per_second=2000.0), good(ts=at, job="bert"), good(ts=at)]
    response = await api.post(batch)
    assert response.status_code == 202 and response.json() == {"accepted": 2, "duplicates": 2}
    assert sorted((s.job, s.value) for s in await api.stored()) == [("bert", 1000.0), ("llama-70b", 1000.0)]
    assert sorted((job, count, total) for job, _, count, total in await minutes(api)) == [
        ("bert", 1, 1000.0),
        ("llama-70b", 1, 1000.0),
    ]


async def test_retries_posted_at_once_are_stored_once(api: Api) -> None:
    batch = [good(ts=(now() - timedelta(seconds=i)).isoformat(), tokens_per_second=float(i)) for i in range(1, 301)]
    answers = await asyncio.gather(*(api.post(batch) for _ in range(4)))
    assert [a.status_code for a in answers] == [202] * 4
    assert sum(a.json()["accepted"] for a in answers) == 300
    assert all(a.json()["accepted"] + a.json()["duplicates"] == 300 for a in answers)
    assert len(await api.stored()) == 300
    async with api.db.session() as session:
        rows = (await session.exec(select(ThroughputRollup))).all()
    assert sum(r.count for r in rows) == 300 and sum(r.total for r in rows) == pytest.approx(sum(range(1, 301)))


# -- every problem of a refused batch ---------------------------------------------------------------------------


async def test_a_batch_bad_in_every_way_names_each_sample_and_stores_nothing(
    db: Database, seeded_aws: SeededAws
) -> None:
    """Review finding: a sample of another org and a malformed one answered only the 403. Now all are named;
    the status is 400 because more than the token is wrong."""
    await swept(db, CLUSTER)
    clusters, _ = aws_clusters(seeded_aws, db)
    batch = [good(org=OTHER), good(), good(tokens_per_second="fast"), good(cluster="kumo-p5-trian"), good()]
    async for api in running(db, clusters=clusters):
        response = await api.post(batch)
        assert response.status_code == 400
        body = response.json()
        assert body["error"] == "3 sample(s) refused, so the request was refused; nothing stored"
        assert [e["index"] for e in body["errors"]] == [0, 2, 3]
        assert body["errors"][0]["reason"].startswith("org 'sakura-ai' is not this token's org ('kumo-labs')")
        assert body["errors"][1]["reason"].startswith("tokens_per_second must be a number, not a string")
        assert body["errors"][2]["reason"].startswith("cluster 'kumo-p5-trian' is not a cluster of 'kumo-labs'")
        assert await api.stored() == [] and await api.stored(OTHER) == []
        assert api.hooked == []


# -- the org's clusters: the sweep, then AWS ----------------------------------------------------------------------


def aws_clusters(seeded_aws: SeededAws, db: Database, **kwargs: Any) -> tuple[KnownClusters, list[str]]:
    """KnownClusters over a fleet on the seeded moto (ParallelCluster read through EC2 tags); the list
    records each AWS call made."""
    calls: list[str] = []
    accounts = AwsAccounts()
    accounts.observe_calls(lambda *, service, operation, error_code=None: calls.append(f"{service}.{operation}"))
    program = seeded_aws.program.with_aws(lambda _: {"parallelcluster_api": None})
    # A loaded machine (the end of a full run) can take moto past the 3 s default; only the test of that case sets it.
    kwargs.setdefault("aws_timeout", 30.0)
    return KnownClusters(db=db, fleet=Fleet(program=program, accounts=accounts), **kwargs), calls


async def test_a_cluster_the_org_does_not_have_is_refused_naming_its_clusters(
    db: Database, seeded_aws: SeededAws
) -> None:
    clusters, calls = aws_clusters(seeded_aws, db)
    async for api in running(db, clusters=clusters):
        response = await api.post([good(cluster="kumo-p5-train"), good(cluster="kumo-p5")])
        assert response.status_code == 400
        body = response.json()
        assert body["error"] == "1 sample(s) refused, so the request was refused; nothing stored"
        [error] = body["errors"]
        assert error["index"] == 1
        assert error["reason"].startswith("cluster 'kumo-p5' is not a cluster of 'kumo-labs' (its clusters: ")
        assert "kumo-p5-train" in error["reason"] and "kumo-p5-dev" in error["reason"]
        assert error["reason"].endswith("Did you mean 'kumo-p5-dev' or 'kumo-p5-train'?")
        assert "sakura" not in error["reason"], "only the token's org's clusters are named"
        assert await api.stored() == []
        # The answer is kept briefly: the script's next post with the same typo asks AWS nothing.
        asked = len(calls)
        assert asked > 0
        again = await api.post(good(cluster="kumo-p5"))
        assert again.status_code == 400 and len(calls) == asked


async def test_a_cluster_not_swept_yet_but_in_aws_is_accepted(db: Database, seeded_aws: SeededAws) -> None:
    """A job on a brand-new cluster is not refused: the sweep has not seen it, AWS has it."""
    clusters, calls = aws_clusters(seeded_aws, db)
    async for api in running(db, clusters=clusters):
        response = await api.post(good(cluster="kumo-p5-train"))
        assert response.status_code == 202 and response.json() == {"accepted": 1, "duplicates": 0}
        assert calls, "AWS was asked"


async def test_a_cluster_created_after_the_org_was_listed_is_accepted_at_once(
    db: Database, seeded_aws: SeededAws
) -> None:
    """Review finding: a typo's post kept the org's AWS listing for a minute, and a job on a cluster created in
    that minute (not swept yet) was refused as unknown. A name no post was refused for is looked up again; the
    typo itself stays refused from what was kept."""
    clusters, calls = aws_clusters(seeded_aws, db, recheck_seconds=0.0)
    org = seeded_aws.program.org(ORG)
    assert org is not None
    sagemaker = seeded_aws.accounts.client(org, "sagemaker")
    seeded = sagemaker.describe_cluster(ClusterName="kumo-p5-train")
    async for api in running(db, clusters=clusters):
        typo = await api.post(good(cluster="kumo-p5"))
        assert typo.status_code == 400
        groups = [
            {
                key: group[key]
                for key in ("InstanceGroupName", "InstanceType", "LifeCycleConfig", "ExecutionRole", "ThreadsPerCore")
            }
            | {"InstanceCount": 1}
            for group in seeded["InstanceGroups"]
        ]
        sagemaker.create_cluster(ClusterName="kumo-p5-new", InstanceGroups=groups, VpcConfig=seeded["VpcConfig"])
        try:
            new = await api.post(good(cluster="kumo-p5-new"))
            assert new.status_code == 202, new.text
            asked = len(calls)
            again = await api.post(good(cluster="kumo-p5", ts=now().isoformat()))
            assert again.status_code == 400 and len(calls) == asked, "the typo is refused from the kept listing"
        finally:
            sagemaker.delete_cluster(ClusterName="kumo-p5-new")


async def test_a_cluster_of_the_latest_sweep_needs_no_aws_call(db: Database, seeded_aws: SeededAws) -> None:
    await swept(db, "kumo-p5-train")
    clusters, calls = aws_clusters(seeded_aws, db)
    async for api in running(db, clusters=clusters):
        response = await api.post(good(cluster="kumo-p5-train"))
        assert response.status_code == 202
        assert calls == []


async def test_when_aws_cannot_answer_in_time_the_sample_is_accepted(
    db: Database, seeded_aws: SeededAws, caplog: pytest.LogCaptureFixture
) -> None:
    """Losing a job's throughput while AWS is slow or down is worse than storing a typo now and then."""
    clusters, _ = aws_clusters(seeded_aws, db, aws_timeout=0.0)
    async for api in running(db, clusters=clusters):
        with caplog.at_level(logging.WARNING, logger="bot.ingest.known_clusters"):
            response = await api.post(good(cluster="kumo-p5-new"))
        assert response.status_code == 202 and response.json()["accepted"] == 1
        assert "cannot check kumo-labs's cluster names in AWS (AWS did not answer within 0 s)" in caplog.text
        # The listing went on without the request, and its answer serves the next posts: the typo is
        # refused as soon as it is in (bounded wait, each post a new sample).
        # Generous bounds: at the end of a full run the session's in-process moto holds every test's resources,
        # and its listing threads compete with this loop for the GIL (seen once: one post took over 10 s).
        api.http.timeout = httpx.Timeout(30)
        deadline = asyncio.get_running_loop().time() + 45
        while (await api.post(good(cluster="kumo-p5-new", ts=now().isoformat()))).status_code == 202:
            assert asyncio.get_running_loop().time() < deadline, "the late AWS answer was never used"
            await asyncio.sleep(0.25)
        refused = await api.post(good(cluster="kumo-p5-new"))
        assert refused.status_code == 400 and "is not a cluster of 'kumo-labs'" in refused.text


async def test_the_sandboxs_training_jobs_post_fine_and_a_resent_backfill_is_stored_once(
    sandbox: Sandbox,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The simulated jobs of `pitcrew demo` post to the real app, on clusters that exist in (moto's) AWS."""
    at = now()
    simulator = TrainingSimulator(api_url=sandbox.bot_url, jobs=sandbox_jobs(), clock=lambda: at)
    await simulator.prepare(sandbox.pitcrew.services.db)

    async def stored() -> int:
        async with sandbox.pitcrew.services.db.session() as session:
            found = await crud.active_jobs(session, since=at - timedelta(hours=4))
            rows = [
                await crud.samples(
                    session, org_id=org, cluster=cluster, job=job, since=at - timedelta(hours=4), until=at
                )
                for org, cluster, job in found
                if job in {j.job for j in sandbox_jobs()}
            ]
        return sum(len(r) for r in rows)

    with caplog.at_level(logging.WARNING, logger="sandbox.training"):
        async with httpx.AsyncClient(timeout=30) as http:
            await simulator.backfill(http)
            first = await stored()
            await simulator.backfill(http)  # the same samples again, as after a lost answer
    assert "refused" not in caplog.text
    assert first > 2 * 300  # two jobs, three hours at 30 s
    assert await stored() == first


# -- the CLI --------------------------------------------------------------------------------------------------------


async def _stored_tokens(database_url: str) -> list[ApiToken]:
    db = Database(url=database_url)
    try:
        async with db.session() as session:
            return list((await session.exec(select(ApiToken).order_by(col(ApiToken.id)))).all())
    finally:
        await db.dispose()


async def _post_with(database_url: str, token: str) -> tuple[int, Any]:
    db = Database(url=database_url)
    await swept(db, CLUSTER)
    app = Starlette(
        routes=ingest_routes(db=db, clock=now, max_age=timedelta(days=14), clusters=KnownClusters(db=db, fleet=None))
    )
    try:
        async with serve_asgi(app) as base, httpx.AsyncClient(timeout=10) as http:
            response = await http.post(base + PATH, json=good(), headers={"Authorization": f"Bearer {token}"})
            return response.status_code, response.json()
    finally:
        await db.dispose()


def test_token_create_prints_a_token_that_authenticates(
    database_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setenv("PITCREW_CONFIG", str(ROOT / "bot" / "examples" / "program.example.yml"))
    assert main(["token", "create", ORG, "--by", "U0ADMIN01"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "shown only once" in lines[0] and ORG in lines[0]
    token = lines[1]
    assert token.startswith("pct_") and len(token) > 40
    assert "Authorization: Bearer <token>" in lines[2]
    assert asyncio.run(_post_with(database_url, token)) == (202, {"accepted": 1, "duplicates": 0})
    # A second token is another token; both work, and neither is stored in clear.
    assert main(["token", "create", ORG]) == 0
    second = capsys.readouterr().out.splitlines()[1]
    assert second != token
    assert asyncio.run(_post_with(database_url, second))[0] == 202
    rows = asyncio.run(_stored_tokens(database_url))
    assert [(r.org_id, r.token_hash, r.prefix) for r in rows] == [
        (ORG, hash_token(token), token[:12]),
        (ORG, hash_token(second), second[:12]),
    ]
    assert rows[0].created_by == "U0ADMIN01" and rows[0].revoked_at is None


def test_token_create_refuses_an_unknown_org(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DATABASE_URL", f"sqlite+aiosqlite:///{tmp_path / 'p.db'}")
    monkeypatch.setenv("PITCREW_CONFIG", str(ROOT / "bot" / "examples" / "program.example.yml"))
    assert main(["token", "create", "no-such-org"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("unknown org 'no-such-org':") and "kumo-labs" in err
    assert not (tmp_path / "p.db").exists()  # nothing created


def test_token_list_and_revoke(
    database_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setenv("PITCREW_CONFIG", str(ROOT / "bot" / "examples" / "program.example.yml"))
    assert main(["token", "create", ORG, "--by", "U0ADMIN01"]) == 0
    token = capsys.readouterr().out.splitlines()[1]
    assert main(["token", "list", ORG]) == 0
    (listed,) = capsys.readouterr().out.splitlines()
    assert listed.startswith(token[:12]) and "U0ADMIN01" in listed and "REVOKED" not in listed
    assert main(["token", "revoke", token[:12]]) == 0
    assert "requests with it now get 401" in capsys.readouterr().out
    assert asyncio.run(_post_with(database_url, token))[0] == 401, "a revoked token no longer writes"
    assert main(["token", "list", ORG]) == 0
    assert "REVOKED" in capsys.readouterr().out
    assert main(["token", "revoke", token[:12]]) == 1, "nothing active left to revoke"
    assert "token list ORG" in capsys.readouterr().err
