"""GET /metrics on the real HTTP app (the sandbox: moto, the local Slack, signed requests): what the counters
say after commands, a sweep, a throttled Slack call and an AWS error; the leader gauge on a leader; and no
secret, user id or user text in the page or in the scenario's logs."""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from sqlalchemy import func
from sqlmodel import col, select

from bot.config import Settings
from bot.ingest.tokens import create_token
from bot.logs import log_handler
from sandbox.world import BOT_TOKEN, SIGNING_SECRET, Sandbox, run_sandbox
from storage.db import head_revision
from storage.models import Episode
from tests.conftest import SeededAws
from tests.scenarios.conftest import ADMIN, COORDINATION, ask

KNOWN = {"/cluster": frozenset({"list", "status"})}  # as build_services reads them from the command tables, cut short

ALICE, KUMO = "U0ALICE01", "C0KUMOLAB"
HEAD = str(head_revision())
PRIVATE_TEXT = "zzprivate-words"


@pytest.fixture
async def world(seeded_aws: SeededAws, tmp_path: Path) -> AsyncIterator[Sandbox]:
    async with run_sandbox(
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'pitcrew.db'}", accounts=seeded_aws.accounts
    ) as sandbox:
        await sandbox.pitcrew.ready.wait()
        await sandbox.pitcrew.services.drain()
        yield sandbox


@pytest.fixture
def redacted_log() -> Iterator[io.StringIO]:
    """The scenario's logs as `pitcrew serve` writes them (JSON, with the sandbox's secrets configured)."""
    stream = io.StringIO()
    settings = Settings(slack_bot_token=BOT_TOKEN, slack_signing_secret=SIGNING_SECRET, pitcrew_log_format="json")
    handler = log_handler(settings, stream)
    logging.getLogger().addHandler(handler)  # after pytest's own, which so sees each record unmasked
    yield stream
    logging.getLogger().removeHandler(handler)


async def scrape(world: Sandbox) -> tuple[str, list[Sample]]:
    async with httpx.AsyncClient() as http:
        response = await http.get(f"{world.bot_url}/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=")
    text = response.text
    return text, [sample for family in text_string_to_metric_families(text) for sample in family.samples]


def value(samples: list[Sample], name: str, **labels: str) -> float:
    """The sum of a metric's samples whose labels include `labels` (0 if none)."""
    return sum(s.value for s in samples if s.name == name and labels.items() <= s.labels.items())


def labels_of(samples: list[Sample], name: str) -> list[dict[str, str]]:
    return [s.labels for s in samples if s.name == name]


async def test_metrics_count_commands_aws_and_slack_calls_and_reveal_no_secrets(
    world: Sandbox, caplog: pytest.LogCaptureFixture, redacted_log: io.StringIO
) -> None:
    caplog.set_level(logging.INFO)
    services = world.pitcrew.services
    _, before = await scrape(world)
    assert value(before, "pitcrew_leader") == 0  # the monitor is off here: not the leader
    assert value(before, "pitcrew_migrations_info", version=HEAD) == 1
    aws_before = value(before, "pitcrew_aws_calls_total", service="sagemaker", operation="ListClusters")

    sent = [
        (ADMIN, COORDINATION, "/cluster", "list all"),
        (ALICE, KUMO, "/cluster", "list"),
        (ALICE, KUMO, "/cluster", f"frobnicate {PRIVATE_TEXT}"),  # unknown subcommand: labelled "other"
        (ALICE, KUMO, "/cluster", "scale nosuch-cluster group 3 --dry-run"),
        ("U0GUEST01", KUMO, "/cluster", "list"),  # not a member: refused
        (ALICE, KUMO, "/track", "help"),
        (ADMIN, COORDINATION, "/digest", "help"),
    ]
    for user, channel, command, text in sent:
        await ask(world, user=user, channel=channel, text=text, command=command)

    # An ingest token in use, and an AWS error through the one AWS layer.
    token = await create_token(services.db, org_id="kumo-labs", created_by="test")
    async with httpx.AsyncClient() as http:
        ingest = await http.post(
            f"{world.bot_url}/api/v1/throughput",
            json={"org": "kumo-labs", "cluster": "kumo-p5-train", "job": "llama", "tokens_per_second": 10.0},
            headers={"Authorization": f"Bearer {token}"},
        )
    assert ingest.status_code < 500
    org = world.program.org("kumo-labs")
    assert org is not None
    sagemaker = services.fleet._accounts.client(org, "sagemaker")
    with pytest.raises(ClientError) as refused:
        await asyncio.to_thread(sagemaker.describe_cluster, ClusterName="nosuch-cluster")
    error_code = refused.value.response["Error"]["Code"]

    # A sweep posts the seeded failures' alerts; Slack throttles the first post once (the client retries it).
    world.slack.fail_next("chat.postMessage", status=429, retry_after=1)
    await services.monitor.sweep()
    await services.drain()
    async with services.db.session() as session:
        open_by_kind = dict(
            (
                await session.exec(
                    select(col(Episode.kind), func.count())
                    .where(col(Episode.state) == "open")
                    .group_by(col(Episode.kind))
                )
            ).all()
        )
    assert open_by_kind, "the seeded program has failed nodes"

    text, samples = await scrape(world)
    commands = "pitcrew_commands_total"
    assert value(samples, commands) == len(sent)
    assert value(samples, commands, command="/cluster", subcommand="list", outcome="allowed") == 2
    assert value(samples, commands, command="/cluster", subcommand="list", outcome="refused") == 1
    assert value(samples, commands, command="/cluster", subcommand="other", outcome="invalid") == 1
    assert value(samples, commands, command="/cluster", subcommand="scale") == 1
    assert value(samples, commands, command="/track", subcommand="help", outcome="allowed") == 1
    assert value(samples, commands, command="/digest", subcommand="help", outcome="allowed") == 1
    assert value(samples, "pitcrew_ack_seconds_count") == len(sent)  # every request to /slack/events, timed
    assert value(samples, "pitcrew_ack_seconds_bucket", le="3.0") == len(sent)

    listed = value(samples, "pitcrew_aws_calls_total", service="sagemaker", operation="ListClusters", error_code="none")
    assert listed > aws_before
    assert value(samples, "pitcrew_aws_calls_total", operation="DescribeInstances", error_code="none") > 0
    assert value(samples, "pitcrew_aws_calls_total", operation="DescribeCluster", error_code=error_code) == 1

    assert value(samples, "pitcrew_slack_calls_total", method="response_url", status="200") >= len(sent)
    assert value(samples, "pitcrew_slack_calls_total", method="chat.postMessage", status="429") == 1
    assert value(samples, "pitcrew_slack_calls_total", method="chat.postMessage", status="200") >= 1
    assert value(samples, "pitcrew_slack_rate_limited_total", method="chat.postMessage") == 1

    assert value(samples, "pitcrew_sweep_seconds_count") == 1
    assert value(samples, "pitcrew_nodes_seen", health="unhealthy") > 0
    assert value(samples, "pitcrew_nodes_seen", health="healthy") > 0
    assert {s.labels["kind"]: s.value for s in samples if s.name == "pitcrew_open_episodes"} == open_by_kind
    assert value(samples, "pitcrew_leader") == 0
    assert value(samples, "pitcrew_migrations_info", version=HEAD) == 1
    audit = {s.name: s.value for s in samples if s.name.startswith("pitcrew_audit_")}
    assert audit == {  # drained above, nothing refused or lost
        "pitcrew_audit_queue_depth": 0,
        "pitcrew_audit_write_failures_total": 0,
        "pitcrew_audit_dropped_total": 0,
    }

    # Bounded labels: no user text, no user id, no secret anywhere on the page.
    for secret in (BOT_TOKEN, SIGNING_SECRET, token, PRIVATE_TEXT, "frobnicate", ALICE, ADMIN):
        assert secret not in text
    known = {"/cluster", "/track", "/digest", "other"}
    assert {labels["command"] for labels in labels_of(samples, commands)} <= known
    # ... and none in the logs: not logged at all (pytest's capture sees records before any masking), and not
    # in what the configured handler writes.
    for secret in (BOT_TOKEN, SIGNING_SECRET, token):
        assert secret not in caplog.text
        assert secret not in redacted_log.getvalue()


async def test_the_leader_gauge_is_1_on_the_replica_holding_the_lease(seeded_aws: SeededAws, tmp_path: Path) -> None:
    async with run_sandbox(
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'pitcrew.db'}", accounts=seeded_aws.accounts, monitor=True
    ) as world:
        await world.pitcrew.ready.wait()
        for _ in range(100):  # the lease is taken right after start; bounded at 10 s
            _, samples = await scrape(world)
            if value(samples, "pitcrew_leader") == 1:
                break
            await asyncio.sleep(0.1)
        assert value(samples, "pitcrew_leader") == 1


def test_two_apps_have_their_own_registries() -> None:
    """Nothing global: a second app (a test, a second replica in one process) starts from zero."""
    from bot.metrics import Metrics

    first, second = Metrics(subcommands=KNOWN), Metrics(subcommands=KNOWN)
    first.command(command="/cluster", text="list", outcome="allowed")
    first.command(command="/nosuch", text="anything at all", outcome="invalid")
    families: Any = list(text_string_to_metric_families(first.exposition().decode()))
    samples = [s for f in families for s in f.samples]
    assert value(samples, "pitcrew_commands_total", command="other", subcommand="other") == 1
    assert value(samples, "pitcrew_commands_total", command="/cluster", subcommand="list") == 1
    other = [s for f in text_string_to_metric_families(second.exposition().decode()) for s in f.samples]
    assert value(other, "pitcrew_commands_total") == 0


def test_the_audit_writer_and_the_lease_are_read_at_each_scrape() -> None:
    from types import SimpleNamespace

    from bot.metrics import Metrics

    metrics = Metrics(subcommands=KNOWN)
    audit = SimpleNamespace(queue_depth=0, write_failures=0, dropped=0)
    lease = SimpleNamespace(held=False)
    metrics.watch(audit=audit, lease=lease)
    audit.queue_depth, audit.write_failures, audit.dropped, lease.held = 42, 3, 7, True
    samples = [s for f in text_string_to_metric_families(metrics.exposition().decode()) for s in f.samples]
    assert value(samples, "pitcrew_audit_queue_depth") == 42
    assert value(samples, "pitcrew_audit_write_failures_total") == 3
    assert value(samples, "pitcrew_audit_dropped_total") == 7
    assert value(samples, "pitcrew_leader") == 1


async def test_a_scrape_is_answered_in_seconds_when_the_database_does_not_answer() -> None:
    """A Postgres that accepts the connection and then says nothing (a hung server, a dropped link) must not
    hold the scrape for asyncpg's 60 s connect timeout, past Prometheus' 10 s scrape timeout: the open
    episodes keep their last values and the rest of the page is served."""
    from starlette.applications import Starlette

    from bot.metrics import SCRAPE_DB_SECONDS, Metrics
    from storage.db import Database

    silent: list[asyncio.StreamWriter] = []

    async def hold(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        silent.append(writer)  # kept open, never answered

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    db = Database(url=f"postgresql+asyncpg://postgres@127.0.0.1:{port}/hung")
    metrics = Metrics(subcommands=KNOWN)
    metrics.open_episodes.labels(kind="node").set(2)
    app = Starlette(routes=[metrics.route(db=db)])
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://pitcrew") as client:
            started = asyncio.get_running_loop().time()
            response = await asyncio.wait_for(client.get("/metrics"), timeout=SCRAPE_DB_SECONDS + 5)
            took = asyncio.get_running_loop().time() - started
        assert response.status_code == 200 and took < SCRAPE_DB_SECONDS + 2
        samples = [s for f in text_string_to_metric_families(response.text) for s in f.samples]
        assert value(samples, "pitcrew_open_episodes", kind="node") == 2
    finally:
        for writer in silent:
            writer.close()
        server.close()
        await db.dispose()
