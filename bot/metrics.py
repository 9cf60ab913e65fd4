"""Pitcrew's own health for the people who run it: `GET /metrics` in Prometheus text format.

One `Metrics` per app, on its own CollectorRegistry (never prometheus_client's global REGISTRY), built in
bot.app.build_services and passed to what it counts. Label values are bounded: command and subcommand names
from the known set (anything else is "other"), AWS services, operations and error codes from botocore's
models, Slack method names from the Web API's URLs, episode kinds from the code. No user text, user id or
cluster name is ever a label, and no secret is ever a value.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import Counter as Tally
from collections.abc import Awaitable, Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, Info, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from sqlalchemy import func
from sqlmodel import col, select
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from storage.models import Episode, EpisodeState

if TYPE_CHECKING:
    from bot.clusters.model import Cluster
    from storage.db import Database

log = logging.getLogger(__name__)
OTHER = "other"
Endpoint = Callable[[Request], Awaitable[Response]]
# Slack acks must come within 3 s; the buckets resolve the range that matters around it.
ACK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0)
# How long a scrape waits for the database (open episodes): well inside Prometheus' default 10 s timeout.
SCRAPE_DB_SECONDS = 3.0
SWEEP_BUCKETS = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)
SLACK_METHOD = re.compile(r"[a-z][A-Za-z]*(?:\.[a-z][A-Za-z]*)+")  # chat.postMessage, files.getUploadURLExternal
AWS_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")  # services, operations and error codes as botocore has them


def command_labels(known: Mapping[str, Collection[str]], command: str, text: str) -> tuple[str, str]:
    """(command, subcommand) as labels: a name outside the known set is "other"; an empty text is help."""
    if command not in known:
        return OTHER, OTHER
    words = text.split(maxsplit=1)
    subcommand = words[0].lower() if words else "help"
    return command, subcommand if subcommand in known[command] else OTHER


class Lease(Protocol):
    @property
    def held(self) -> bool: ...


class _Live(Collector):
    """Values read at scrape time from the objects that own them (the audit writer, the leader lease)."""

    def __init__(self) -> None:
        self.audit: Any = None
        self.lease: Lease | None = None

    def collect(self) -> Iterator[Metric]:
        # AuditLog.queue_depth, .write_failures and .dropped; read with a default so a stand-in without them
        # (a test's) leaves them out rather than report a made-up 0.
        depth = getattr(self.audit, "queue_depth", None)
        if depth is not None:
            yield GaugeMetricFamily("pitcrew_audit_queue_depth", "Audit entries waiting to be written.", value=depth)
        failures = getattr(self.audit, "write_failures", None)
        if failures is not None:
            yield CounterMetricFamily(
                "pitcrew_audit_write_failures", "Audit entries the database refused (each dropped).", value=failures
            )
        dropped = getattr(self.audit, "dropped", None)
        if dropped is not None:
            yield CounterMetricFamily(
                "pitcrew_audit_dropped",
                "Audit entries pushed out of a full queue (database unreachable).",
                value=dropped,
            )
        held = self.lease is not None and self.lease.held
        yield GaugeMetricFamily(
            "pitcrew_leader",
            "1 while this replica holds the monitor's leader lease (0 also when the monitor is off).",
            value=1 if held else 0,
        )


class Metrics:
    """The metric objects of one running Pitcrew, on their own registry."""

    def __init__(
        self, *, subcommands: Mapping[str, Collection[str]], registry: CollectorRegistry | None = None
    ) -> None:
        """`subcommands`: each slash command's subcommand names, the only ones counted by name (the wiring
        reads them from the command tables, which sit above this module)."""
        self.registry = registry or CollectorRegistry()
        self._subcommands = subcommands
        self.commands = Counter(
            "pitcrew_commands",
            "Slash commands answered, by command, subcommand and outcome.",
            ["command", "subcommand", "outcome"],
            registry=self.registry,
        )
        self.ack_seconds = Histogram(
            "pitcrew_ack_seconds",
            "Seconds from receiving a Slack request to answering it over HTTP (the ack).",
            buckets=ACK_BUCKETS,
            registry=self.registry,
        )
        self.aws_calls = Counter(
            "pitcrew_aws_calls",
            "AWS API calls (after botocore's retries), by service, operation and error code (none: it worked).",
            ["service", "operation", "error_code"],
            registry=self.registry,
        )
        self.slack_calls = Counter(
            "pitcrew_slack_calls",
            "Slack HTTP requests (each attempt), by Web API method (response_url: replies) and HTTP status.",
            ["method", "status"],
            registry=self.registry,
        )
        self.slack_rate_limited = Counter(
            "pitcrew_slack_rate_limited",
            "Slack requests answered 429 (rate limited), by method.",
            ["method"],
            registry=self.registry,
        )
        self.sweep_seconds = Histogram(
            "pitcrew_sweep_seconds",
            "Seconds one node sweep of every org took.",
            buckets=SWEEP_BUCKETS,
            registry=self.registry,
        )
        self.nodes_seen = Gauge(
            "pitcrew_nodes_seen", "Nodes seen by the last node sweep, by health.", ["health"], registry=self.registry
        )
        self.open_episodes = Gauge(
            "pitcrew_open_episodes",
            "Open alert episodes, by kind (counted at scrape time).",
            ["kind"],
            registry=self.registry,
        )
        self.migrations = Info(
            "pitcrew_migrations",
            "The database's Alembic revision, read after the upgrade at start.",
            registry=self.registry,
        )
        self._live = _Live()
        self.registry.register(self._live)

    # ------------------------------------------------------------------ wiring

    def watch(self, *, audit: Any = None, lease: Lease | None = None) -> None:
        """Read the audit writer's queue and failures, and the leader lease, at each scrape."""
        self._live.audit = audit
        self._live.lease = lease

    def count_slack_calls(self, client: Any) -> None:
        """Count every request of a slack_sdk client (and of Bolt's per-request copies, which copy its retry
        handlers): a retry handler that never retries sees each attempt, 429s included."""
        handlers: list[AsyncRetryHandler] = client.retry_handlers
        handlers[:] = [h for h in handlers if not isinstance(h, SlackCallCounter)]
        handlers.insert(0, SlackCallCounter(metrics=self, base_url=client.base_url))

    # ------------------------------------------------------------------ counting

    def command(self, *, command: str, text: str, outcome: str) -> None:
        name, subcommand = command_labels(self._subcommands, command, text)
        self.commands.labels(command=name, subcommand=subcommand, outcome=outcome).inc()

    def aws_call(self, *, service: str, operation: str, error_code: str | None) -> None:
        self.aws_calls.labels(
            service=_bounded(service), operation=_bounded(operation), error_code=_bounded(error_code or "none")
        ).inc()

    def slack_call(self, *, method: str, status: int | str) -> None:
        self.slack_calls.labels(method=method, status=str(status)).inc()
        if str(status) == "429":
            self.slack_rate_limited.labels(method=method).inc()

    def swept(self, *, seconds: float, clusters: Iterable[Cluster]) -> None:
        self.sweep_seconds.observe(seconds)
        health = Tally(node.health.value for cluster in clusters for node in cluster.nodes)
        for state in ("healthy", "unhealthy", "transitional"):
            self.nodes_seen.labels(health=state).set(health.get(state, 0))

    async def read_migrations(self, db: Database) -> None:
        """Once, after the upgrade at start; a failure here is logged and never stops the bot."""
        try:
            version = await db.revision()
        except Exception as error:
            log.warning("metrics: could not read the migrations version: %s", type(error).__name__)
            version = "unknown"
        self.migrations.info({"version": _bounded(str(version or "none"))})

    async def count_open_episodes(self, db: Database) -> None:
        async with db.session() as session:
            rows: Sequence[Any] = (
                await session.exec(
                    select(col(Episode.kind), func.count())
                    .where(col(Episode.state) == EpisodeState.OPEN.value)
                    .group_by(col(Episode.kind))
                )
            ).all()
        self.open_episodes.clear()  # no await from here on: a scrape never sees it half set
        for kind, count in rows:
            self.open_episodes.labels(kind=_bounded(kind)).set(count)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    # ------------------------------------------------------------------ serving

    def timed_ack(self, endpoint: Endpoint) -> Endpoint:
        """The Slack events endpoint, timed from receiving the request to its HTTP answer (the ack)."""

        async def timed(request: Request) -> Response:
            with self.ack_seconds.time():
                return await endpoint(request)

        return timed

    def route(self, *, db: Database) -> Route:
        """GET /metrics. A database that cannot be read leaves the open episodes at their last values."""

        async def metrics(_: Request) -> Response:
            try:  # bounded: a database that accepts and never answers would hold the scrape for 60 s
                await asyncio.wait_for(self.count_open_episodes(db), SCRAPE_DB_SECONDS)
            except Exception as error:  # the rest of the page still tells how the bot is doing
                log.warning("metrics: could not count open episodes: %s", type(error).__name__)
            return Response(self.exposition(), media_type=CONTENT_TYPE_LATEST)

        return Route("/metrics", metrics, methods=["GET"])


def _bounded(value: str) -> str:
    return value if AWS_NAME.fullmatch(value) else OTHER


class SlackCallCounter(AsyncRetryHandler):
    """Counts each Slack request attempt by method and status; never asks for a retry itself."""

    def __init__(self, *, metrics: Metrics, base_url: str) -> None:
        super().__init__(max_retry_count=0)
        self._metrics = metrics
        self._base_url = base_url

    def method(self, url: str) -> str:
        if not url.startswith(self._base_url):
            return "upload"  # files_upload_v2 sends the bytes to the URL Slack gave, not to a method
        name = url[len(self._base_url) :].split("?", 1)[0]
        return name if SLACK_METHOD.fullmatch(name) else OTHER

    async def can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        status: int | str = response.status_code if response is not None else "error"
        self._metrics.slack_call(method=self.method(request.url), status=status)
        return False
