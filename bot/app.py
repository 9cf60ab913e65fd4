"""build_app(...): the Bolt AsyncApp and the Starlette ASGI app around it. No import-time side effects."""

from __future__ import annotations

import asyncio
import logging
import re
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from zoneinfo import ZoneInfo

from slack_bolt.adapter.starlette.async_handler import to_starlette_response
from slack_bolt.async_app import AsyncApp, AsyncBoltRequest
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.request.async_internals import build_async_context
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import text
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from bot.access import AccessPolicy
from bot.actor import actor_team, set_actor
from bot.alerts.checks import CheckFollower
from bot.alerts.desk import AlertDesk
from bot.alerts.escalation import Escalation
from bot.approvals.desk import ApprovalDesk
from bot.audit import AuditLog
from bot.capacity.monitor import CapacityMonitor
from bot.capacity.service import CapacityService
from bot.clusters.accounts import AwsAccounts
from bot.clusters.fleet import Fleet
from bot.clusters.templates import load_templates
from bot.commands import CLUSTER
from bot.config import ProgramConfig, Settings
from bot.digest.ledger import UsageLedger
from bot.digest.parse import DIGEST
from bot.digest.render import SlackDigest
from bot.digest.weekly import WeeklyDigest
from bot.home.render import home_view
from bot.home.tab import HomeTab, SweepWatch
from bot.inbound import Refused, read_slack_request
from bot.ingest.api import ingest_routes
from bot.ingest.known_clusters import KnownClusters
from bot.metrics import Metrics
from bot.monitor.cloudwatch import CloudWatchPull
from bot.monitor.diagnosis import HyperPodDiagnosis
from bot.monitor.events import EventQueue
from bot.monitor.faulty import FaultyNodeMonitor
from bot.monitor.idle import IdleMonitor, SeenBackends, UsageObservers
from bot.monitor.jobs import ThroughputMonitor
from bot.monitor.lease import LeaderLease, default_holder
from bot.monitor.nodes import NodeMonitor
from bot.node_metrics.prometheus import reader_for
from bot.operations import Operations
from bot.scheduler import LeaderScheduler, Monitors
from bot.services import Services
from bot.slack.alerts import SlackAlerts
from bot.slack.approvals import SlackApprovals
from bot.slack.operations import SlackProgress
from bot.slack.poster import Poster
from bot.tracking.parse import TRACK
from bot.tracking.records import RecordBook
from handlers import register_listeners
from handlers.errors import on_error
from storage.db import Database

log = logging.getLogger(__name__)
# boto3 work runs in worker threads that hold the GIL while they parse AWS answers; with CPython's
# default 5 ms switch interval the event loop, which must ack Slack within 3 s, waits behind them.
# 1 ms halved the p99 ack latency under load (bench/ack_latency.py, docs/benchmarks.md).
GIL_SWITCH_SECONDS = 0.001
# GET /readyz gives the database this long to answer: a load balancer's probe times out after a few seconds,
# and a database that accepts connections and never answers must read as not ready, not as a hung probe.
READY_DB_SECONDS = 1.5


@dataclass
class Pitcrew:
    """One running bot: the Bolt app, its services, and the ASGI app that serves both."""

    bolt: AsyncApp
    services: Services
    asgi: Starlette
    ready: asyncio.Event = field(default_factory=asyncio.Event)


def prefer_the_event_loop() -> None:
    """Let the event loop take the GIL back sooner from worker threads (process-wide; called by the CLI)."""
    sys.setswitchinterval(GIL_SWITCH_SECONDS)


def build_slack_client(settings: Settings) -> AsyncWebClient:
    client = AsyncWebClient(token=settings.slack_bot_token or None, base_url=settings.slack_api_url)
    # Bolt copies base_url and retry handlers into every per-request client, so configure them once here.
    client.retry_handlers.append(AsyncRateLimitErrorRetryHandler(max_retry_count=2))
    return client


def build_services(
    *, settings: Settings, program: ProgramConfig, client: AsyncWebClient, accounts: AwsAccounts | None = None
) -> Services:
    db = Database(url=settings.database_url)
    accounts = accounts or AwsAccounts()
    # This app's own registry, served at GET /metrics; commands are counted by the names in their tables.
    metrics = Metrics(subcommands={table.command: frozenset(table.names) for table in (CLUSTER, TRACK, DIGEST)})
    accounts.observe_calls(metrics.aws_call)
    metrics.count_slack_calls(client)
    access = AccessPolicy(program=program)
    fleet = Fleet(
        program=program,
        accounts=accounts,
        concurrency=settings.pitcrew_org_concurrency,
        timeout=settings.pitcrew_org_timeout,
        cache_seconds=settings.pitcrew_cache_seconds,
    )
    poster = Poster(client=client, post_interval=settings.pitcrew_post_interval, metrics=metrics)
    audit = AuditLog(db=db)
    seen = SeenBackends()  # each cluster's backend as swept: console links of alerts naming a cluster only
    presenter = SlackAlerts(regions={org.id: org.aws.region for org in program.orgs}, backends=seen)
    desk = AlertDesk(db=db, poster=poster, program=program, presenter=presenter, clusters=fleet)
    capacity = CapacityService(program=program, accounts=accounts, fleet=fleet)
    home = HomeTab(db=db, program=program, access=access, poster=poster, render=home_view, capacity=capacity)
    desk.on_change = home.changed  # alerts opening and closing refresh the Home of those who opened it
    holder = default_holder()
    digest_presenter = SlackDigest()
    ledger = UsageLedger(db=db, poster=poster, program=program, presenter=digest_presenter)
    digest = WeeklyDigest(db=db, poster=poster, program=program, presenter=digest_presenter, holder=holder)
    templates = load_templates(settings.pitcrew_templates)  # validated on start: a bad file stops it
    idle = IdleMonitor(desk=desk, prices=templates.prices)  # told each sweep's listings, after the ledger
    # The Home last: it reads what the ledger wrote.
    diagnosis = HyperPodDiagnosis(desk=desk, fleet=fleet)  # HyperPod's cluster events and agent detections
    observers = UsageObservers(ledger, idle, seen, diagnosis, SweepWatch(home=home))
    monitor = NodeMonitor(desk=desk, fleet=fleet, ledger=observers, metrics=metrics)
    escalation = Escalation(desk=desk, presenter=presenter)
    # Per-node metrics (the culprit in a job alert, faulty-node alerts): one reader per org that has them.
    readers = {org.id: reader for org in program.orgs if (reader := reader_for(org, accounts)) is not None}
    throughput = ThroughputMonitor(
        desk=desk,
        keep_raw=timedelta(days=settings.pitcrew_throughput_raw_days),
        readers=readers,
        faulty=FaultyNodeMonitor(desk=desk),
    )
    operations = Operations(
        db=db,
        fleet=fleet,
        poster=poster,
        audit=audit,
        access=access,
        tz=ZoneInfo(program.timezone),
        presenter=SlackProgress(),
        plan_ttl=timedelta(minutes=settings.pitcrew_plan_ttl_minutes),
        on_change=home.changed,
        on_progress=CheckFollower(desk=desk, fleet=fleet),  # a deep health check followed in its nodes' alerts
        approvals=program.approvals,
        prices=templates.prices,
    )
    approvals = ApprovalDesk(
        db=db,
        operations=operations,
        access=access,
        audit=audit,
        poster=poster,
        presenter=SlackApprovals(tz=ZoneInfo(program.timezone)),
        on_change=home.changed,
    )
    scheduler, lease, monitors = None, None, None
    if settings.pitcrew_monitor:
        queue_url = program.monitor.event_queue_url
        queue = (
            EventQueue(sqs=accounts.home_client("sqs", _queue_region(queue_url, program)), queue_url=queue_url)
            if queue_url
            else None
        )
        monitors = Monitors(
            nodes=monitor,
            throughput=throughput,
            cloudwatch=CloudWatchPull(db=db, accounts=accounts, program=program),
            queue=queue,
            capacity=CapacityMonitor(desk=desk, capacity=capacity),
            escalation=escalation,
            approvals=approvals if program.approvals is not None else None,  # the expiry sweep
        )
    if settings.pitcrew_monitor or settings.pitcrew_digest:
        # A replica without the monitors leads only among the digest-only ones ("digest"), so it never holds
        # the monitors' lease while they run nowhere; the digest itself is claimed once per week in storage,
        # so two leaders of different leases cannot post it twice.
        lease = LeaderLease(db=db, name="monitor" if monitors else "digest", holder=holder)
        scheduler = LeaderScheduler(
            monitors=monitors,
            lease=lease,
            sweep_seconds=program.monitor.node_sweep_seconds,
            throughput_seconds=settings.pitcrew_throughput_check_seconds,
            tz=ZoneInfo(program.timezone),
            digest=digest if settings.pitcrew_digest else None,
        )
    metrics.watch(audit=audit, lease=lease if monitors else None)  # the gauge is the monitors' lease
    return Services(
        settings=settings,
        program=program,
        access=access,
        fleet=fleet,
        db=db,
        poster=poster,
        audit=audit,
        templates=templates,
        operations=operations,
        approvals=approvals,
        alerts=desk,
        monitor=monitor,
        throughput=throughput,
        digest=digest,
        records=RecordBook(db=db, program=program, on_change=home.changed),
        scheduler=scheduler,
        capacity=capacity,
        idle=idle,
        escalation=escalation,
        home=home,
        metrics=metrics,
    )


def _queue_region(url: str, program: ProgramConfig) -> str:
    """The queue's region from its URL (https://sqs.REGION.amazonaws.com/...), else the first org's."""
    match = re.match(r"https?://sqs[.-]([a-z0-9-]+)\.amazonaws\.com", url)
    return match[1] if match else (program.orgs[0].aws.region if program.orgs else "us-east-1")


async def database_problem(db: Database, timeout: float = READY_DB_SECONDS) -> str | None:
    """None when the database answers `SELECT 1` within `timeout`, else why not (no URL: the answer is public)."""

    async def ping() -> None:
        async with db.engine.connect() as connection:
            await connection.execute(text("SELECT 1"))

    try:
        await asyncio.wait_for(ping(), timeout)
    except TimeoutError:
        return f"no answer in {timeout:g} s"
    except Exception as error:  # refused, unknown host, bad password, ...: the class names it well enough
        return type(error).__name__
    return None


def build_app(
    *,
    settings: Settings,
    program: ProgramConfig,
    services: Services | None = None,
    extra_routes: list[BaseRoute] | None = None,
    on_ready: Callable[[], Awaitable[None]] | None = None,
) -> Pitcrew:
    """The HTTP-mode app. Socket Mode reuses `bolt` and `services` without the ASGI part."""
    if services is None:
        services = build_services(settings=settings, program=program, client=build_slack_client(settings))
    bolt = AsyncApp(
        name="pitcrew",  # without a name Bolt calls inspect.stack(), which reads the source of every frame
        client=services.poster.client,  # one Web API client: Bolt's listeners and the poster share it
        signing_secret=settings.slack_signing_secret,
        raise_error_for_unhandled_request=True,  # answered by handlers.errors: 200, not Bolt's 404
    )

    async def inject_services(context: dict[str, Any], next: Callable[[], Awaitable[None]]) -> None:
        context["services"] = services
        await next()

    async def act_as_requester(
        context: AsyncBoltContext, body: dict[str, Any], next: Callable[[], Awaitable[None]]
    ) -> None:
        """The actor's workspace for everything this request decides and audits (bot.actor)."""
        if services.access.home_team is None and context.authorize_result is not None:
            services.access.home_team = context.authorize_result.team_id
        set_actor(actor_team(body))
        await next()

    bolt.middleware(inject_services)
    bolt.middleware(act_as_requester)
    register_listeners(bolt)
    bolt.error(on_error)  # behind the listeners: whatever escapes one is answered below 500

    pitcrew: Pitcrew

    async def slack_events(request: Request) -> Response:
        """In front of Bolt: a request is checked and parsed here (bot.inbound) and dispatched only when it
        is a signed Slack request of a shape Pitcrew reads; bad signatures get 401, bad shapes 400."""
        raw = await request.body()
        checked = read_slack_request(raw, request.headers, secret=settings.slack_signing_secret, now=time.time())
        if isinstance(checked, Refused):
            if checked.status == 400:
                log.warning("refused a signed Slack request: %s", checked.reason)
            return PlainTextResponse(checked.reason, status_code=checked.status)
        try:
            # Built from the body parsed above: Bolt's own parser takes a command whose text says "payload"
            # for an interaction and drops it.
            bolt_request = AsyncBoltRequest(body="", query=request.url.query, headers=dict(request.headers))
            bolt_request.raw_body, bolt_request.body = checked.text, checked.body
            # Services from the start, before Bolt's own middleware: when its auth.test cannot reach Slack, the
            # error handler still audits the command and answers through its response URL.
            bolt_request.context = build_async_context(AsyncBoltContext({"services": services}), checked.body)
            response = to_starlette_response(await bolt.async_dispatch(bolt_request))
        except Exception:  # the error handler covers listeners and middleware; this covers Bolt itself
            log.exception("dispatching a Slack request failed")
            return PlainTextResponse("Pitcrew could not handle this request", status_code=400)
        if response.status_code >= 500:
            log.warning("a Slack request ended in %d; answered 400", response.status_code)
            return PlainTextResponse("Pitcrew could not handle this request", status_code=400)
        return response

    async def healthz(_: Request) -> Response:
        if pitcrew.ready.is_set():
            return JSONResponse({"status": "ok", "program": program.name, "orgs": len(program.orgs)})
        return JSONResponse({"status": "starting"}, status_code=503)

    async def readyz(_: Request) -> Response:
        """Readiness: what /healthz says, and the database answers now. /healthz (liveness) stays 200 while the
        database is away, so whatever restarts unhealthy replicas does not restart them for an outage."""
        if not pitcrew.ready.is_set():
            return JSONResponse({"status": "starting"}, status_code=503)
        problem = await database_problem(services.db)
        if problem is not None:
            return JSONResponse({"status": "database unreachable", "database": problem}, status_code=503)
        return JSONResponse({"status": "ready"})

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        await start(services)
        if on_ready:
            await on_ready()
        pitcrew.ready.set()
        try:
            yield
        finally:
            await stop(services)

    routes: list[BaseRoute] = [
        Route("/slack/events", services.metrics.timed_ack(slack_events), methods=["POST"]),
        services.metrics.route(db=services.db),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        *ingest_routes(
            db=services.db,
            clock=services.clock,
            max_age=timedelta(days=settings.pitcrew_throughput_raw_days),
            clusters=KnownClusters(db=services.db, fleet=services.fleet),
        ),
        *(extra_routes or []),
    ]
    pitcrew = Pitcrew(bolt=bolt, services=services, asgi=Starlette(routes=routes, lifespan=lifespan))
    return pitcrew


async def start(services: Services) -> None:
    """Apply migrations and sync orgs from the program file; shared by serve, socket and demo."""
    await services.db.upgrade()
    await services.metrics.read_migrations(services.db)
    await services.sync_orgs()
    # Not awaited: Slack down at start must not hold readiness; until it answers, each request's own
    # authorization (Bolt's auth.test) names the workspace (act_as_requester below).
    services.spawn(services.learn_identity())
    services.spawn(services.fleet.warm())
    if services.scheduler is not None:
        await services.scheduler.start()
    resumed = await services.operations.resume()
    if resumed:
        log.info("watching %d operation(s) that were running when the bot last stopped", resumed)
    log.info(
        "ready: %s, %d orgs, database %s",
        services.program.name,
        len(services.program.orgs),
        services.db.engine.url.render_as_string(hide_password=True),
    )


async def stop(services: Services) -> None:
    if services.scheduler is not None:
        await services.scheduler.stop()
    await services.operations.close()
    if services.home is not None:
        await services.home.aclose()
    await services.drain()
    await services.audit.close()
    await services.poster.aclose()
    await services.throughput.aclose()
    await services.fleet.aclose()
    await services.db.dispose()
