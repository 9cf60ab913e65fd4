"""The sandbox world: embedded AWS (moto), every org's ParallelCluster API, a local Slack, and Pitcrew.

Two HTTP servers, as in real life: "the outside world" (local Slack's Web API and console, and the
ParallelCluster APIs) and the bot. Commands typed in the console reach the bot as signed HTTP requests;
the bot answers through the local Slack's Web API and response URLs. The test suite and the benchmarks
use this same composition.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.app import Pitcrew, build_app, build_services, build_slack_client
from bot.clusters.accounts import AwsAccounts
from bot.config import ProgramConfig, Settings, load_program
from bot.resources import example_program
from bot.slack.poster import POST_INTERVAL
from sandbox.asgi_server import serve_asgi
from sandbox.culprits import SCRAPE_INTERVAL, SCRAPE_PATH, SandboxNodeMetrics
from sandbox.faults import Controls, faults_app
from sandbox.pcluster_api import ParallelClusterApi
from sandbox.prometheus import PrometheusStartError, prometheus_server
from sandbox.slack import LocalSlack

log = logging.getLogger(__name__)

EXAMPLE_PROGRAM = example_program()
SIGNING_SECRET = "sandbox-signing-secret"
BOT_TOKEN = "xoxb-sandbox-token"
# Slack Connect in the sandbox: Kumo Labs' engineers in their own workspace, members of #kumo-labs through a
# shared channel. Which workspace a person is in is Slack's knowledge, not the program file's (it lists only the
# teams an org accepts), so the sandbox says it here.
KUMO_TEAM = "T0KUMOLAB"
SANDBOX_TEAMS = {KUMO_TEAM: "Kumo Labs' own Slack"}
EXTERNAL_MEMBERS = {"U0KOJI001": KUMO_TEAM, "U0MIO0001": KUMO_TEAM}
SANDBOX_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@contextlib.contextmanager
def aws_environment(endpoint: str) -> Iterator[None]:
    """Point the standard AWS chain at moto, the way an operator would with AWS_ENDPOINT_URL."""
    wanted = {**SANDBOX_AWS_ENV, "AWS_ENDPOINT_URL": endpoint}
    saved = {key: os.environ.get(key) for key in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def sandbox_program(world_url: str, source: Path = EXAMPLE_PROGRAM) -> ProgramConfig:
    """The example program, with each org's ParallelCluster API pointed at the local emulator."""
    return load_program(source).with_aws(
        lambda org: (
            {"parallelcluster_api": ParallelClusterApi.api_url(world_url, org.aws.account_id, org.aws.region)}
            if org.aws.parallelcluster_api
            else {}
        )
    )


def display_name(user_id: str) -> str:
    """U0ALICE01 -> alice: readable names for the console, from the IDs the program file holds."""
    return re.sub(r"\d+$", "", user_id.removeprefix("U0")).lower() or user_id


def workspace_people(program: ProgramConfig) -> tuple[dict[str, str], dict[str, str]]:
    users = {user: display_name(user) + " (program admin)" for user in program.admins}
    for org in program.orgs:
        for user, role in org.members.items():
            team = EXTERNAL_MEMBERS.get(user)
            where = f", {SANDBOX_TEAMS[team]}" if team else ""
            users.setdefault(user, f"{display_name(user)} ({org.id} {role}{where})")
    users["U0GUEST01"] = "guest (no org)"
    channels = {program.coordination_channel: "program-coordination"}
    channels.update({org.channel: org.id for org in program.orgs})
    return users, channels


def workspace_teams(program: ProgramConfig) -> tuple[dict[str, str], dict[str, str]]:
    """(user id -> team, team -> name) for the program's people from other workspaces (Slack Connect)."""
    people = set(program.admins) | {user for org in program.orgs for user in org.members}
    user_teams = {user: team for user, team in EXTERNAL_MEMBERS.items() if user in people}
    return user_teams, {team: SANDBOX_TEAMS[team] for team in set(user_teams.values())}


@dataclass
class Sandbox:
    program: ProgramConfig
    slack: LocalSlack
    pcluster_api: ParallelClusterApi
    pitcrew: Pitcrew
    world_url: str  # local Slack (console at /) and ParallelCluster APIs
    bot_url: str  # Pitcrew: /slack/events, /healthz, /api/v1/throughput
    controls: Controls = field(default_factory=Controls)  # what the sandbox page's buttons act on
    prometheus_url: str | None = None  # the sandbox's Prometheus, fed by its simulated node metrics


def _world_app(slack: LocalSlack, pcluster_api: ParallelClusterApi, extra: dict[str, Any]) -> Any:
    """One server for the world: the ParallelCluster APIs, sandbox faults, and the local Slack."""

    async def world(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/pcluster/"):
            await pcluster_api(scope, receive, send)
        elif scope["type"] == "http" and scope["path"].startswith("/sandbox/") and "faults" in extra:
            await extra["faults"](scope, receive, send)
        else:
            await slack.app(scope, receive, send)  # also gets lifespan events

    return world


@contextlib.asynccontextmanager
async def run_sandbox(
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    bot_port: int = 0,
    database_url: str | None = None,
    program_source: Path = EXAMPLE_PROGRAM,
    settings_overrides: dict[str, Any] | None = None,
    program_transform: Callable[[ProgramConfig], ProgramConfig] | None = None,
    accounts: AwsAccounts | None = None,
    slack: LocalSlack | None = None,
    pcluster_progress_seconds: float = 3.0,
    post_interval: float = POST_INTERVAL,
    monitor: bool = False,
    node_metrics: SandboxNodeMetrics | None = None,
) -> AsyncIterator[Sandbox]:
    """Serve the world and the bot. AWS must already point at a seeded moto (see aws_environment).

    `slack`: one local Slack kept across bot restarts, so its messages (and their ts) survive.
    `post_interval`: seconds between the bot's posts to one channel, Slack's 1 s by default (tests use 0).
    `monitor`: run the node monitor's schedule (the demo does; tests call its sweep themselves).
    `node_metrics`: the simulated jobs' per-node metrics: a real Prometheus is started with their history and
    scrapes them live from the world server, and each org with them gets `metrics:` pointing at it. Without
    Prometheus installed the sandbox runs without them and logs once how to get them."""
    slack = slack or LocalSlack(signing_secret=SIGNING_SECRET, bot_token=BOT_TOKEN, users={}, channels={})
    pcluster_api = ParallelClusterApi(progress_seconds=pcluster_progress_seconds)
    with contextlib.ExitStack() as stack:
        if database_url is None:
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="pitcrew-sandbox-"))
            database_url = f"sqlite+aiosqlite:///{folder}/pitcrew.db"
        extra: dict[str, Any] = {}
        async with (
            serve_asgi(_world_app(slack, pcluster_api, extra), host, port) as world_url,
            contextlib.AsyncExitStack() as metrics_stack,  # Prometheus stops before the world it scrapes
        ):
            program = sandbox_program(world_url, program_source)
            if program_transform:
                program = program_transform(program)
            controls = Controls()
            prometheus_url = None
            if node_metrics is not None and node_metrics.clusters:
                prometheus_url = await _start_prometheus(metrics_stack, node_metrics, world_url, controls)
                if prometheus_url is not None:
                    program = node_metrics.with_metrics(program, prometheus_url)
            elif node_metrics is not None:  # no simulated job runs on a GPU cluster: say why each does not
                controls.no_metrics = "; ".join(node_metrics.skipped) or "no simulated training job"
            extra["faults"] = faults_app(program, controls)
            users, channels = workspace_people(program)
            slack.users.update(users)
            slack.channels.update(channels)
            user_teams, teams = workspace_teams(program)
            slack.user_teams.update(user_teams)
            slack.teams.update(teams)
            slack.base_url = world_url
            settings = Settings(
                slack_bot_token=BOT_TOKEN,
                slack_signing_secret=SIGNING_SECRET,
                database_url=database_url,
                **{
                    "slack_api_url": slack.api_url,
                    "pitcrew_monitor": monitor,
                    "pitcrew_digest": monitor,
                    "pitcrew_post_interval": post_interval,
                    **(settings_overrides or {}),
                },
            )
            client = build_slack_client(settings)
            services = build_services(settings=settings, program=program, client=client, accounts=accounts)
            pitcrew = build_app(settings=settings, program=program, services=services)
            async with serve_asgi(pitcrew.asgi, host, bot_port) as bot_url:
                slack.events_url = f"{bot_url}/slack/events"
                yield Sandbox(program, slack, pcluster_api, pitcrew, world_url, bot_url, controls, prometheus_url)


async def _start_prometheus(
    stack: contextlib.AsyncExitStack, node_metrics: SandboxNodeMetrics, world_url: str, controls: Controls
) -> str | None:
    """The sandbox's Prometheus, holding the node metrics' history and scraping them live; None (said once in
    the log, and by the culprit buttons) when it cannot run."""

    def start() -> tuple[contextlib.AbstractContextManager[str], str]:
        server = prometheus_server(
            history=node_metrics.history(), scrape_targets=[world_url + SCRAPE_PATH], scrape_interval=SCRAPE_INTERVAL
        )
        return server, server.__enter__()

    try:
        # The history, promtool and the start take a few seconds: not on the event loop, which serves the world.
        server, url = await asyncio.to_thread(start)
    except PrometheusStartError as error:
        controls.no_metrics = f"{str(error).splitlines()[0]}; then start the sandbox again"
        log.warning("The sandbox runs without per-node metrics (no culprit in its alerts): %s", controls.no_metrics)
        return None
    stack.push(server.__exit__)
    controls.node_metrics = node_metrics
    log.info("Prometheus at %s holds the simulated node metrics of %s", url, ", ".join(sorted(node_metrics.orgs())))
    return url
