"""The `pitcrew` command (also `python -m bot`)."""

from __future__ import annotations

import argparse
import asyncio
import errno
import getpass
import importlib.util
import json
import logging
import socket as net  # `socket` is the Socket Mode command below
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot import resources
from bot.clusters.templates import TemplateError, TemplateSet, check_launch_defaults, load_templates
from bot.config import MetricsConfig, ProgramConfig, ProgramFileError, Settings, load_program, summary
from bot.listener import tcp_listener
from bot.logs import configure_logging

if TYPE_CHECKING:
    from bot.monitor.replay import TraceSpan
    from bot.node_metrics.series import ClusterMetrics


def _program(settings: Settings, path: str | None = None) -> ProgramConfig:
    source = Path(path) if path else settings.pitcrew_config
    try:
        return load_program(source)
    except ProgramFileError as error:
        print(f"{error.source}: {len(error.problems)} problem(s)", file=sys.stderr)
        for problem in error.problems:
            print(f"  {problem}", file=sys.stderr)
        raise SystemExit(1) from None


def _templates(settings: Settings) -> TemplateSet:
    try:
        return load_templates(settings.pitcrew_templates)
    except TemplateError as error:
        print(f"{settings.pitcrew_templates}: {len(error.problems)} problem(s)", file=sys.stderr)
        for problem in error.problems:
            print(f"  {problem}", file=sys.stderr)
        raise SystemExit(1) from None


def example_program() -> int:
    """Print the packaged example program file, to start a program file from (`> program.yml`)."""
    print(resources.example_program().read_text(encoding="utf-8"), end="")
    return 0


def check_config(settings: Settings, path: str | None) -> int:
    program = _program(settings, path)
    templates = _templates(settings)
    # The orgs' launch defaults are checked against the templates' parameters (the file alone cannot say).
    problems = [
        f"orgs[{index}].{problem}"
        for index, org in enumerate(program.orgs)
        for problem in check_launch_defaults(templates, org.launch)
    ]
    if problems:
        source = path or str(settings.pitcrew_config)
        print(f"{source}: {len(problems)} problem(s)", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        return 1
    for warning in _quota_gap_warnings(program, _held_as_last_seen(settings.database_url)):
        print(f"warning: {warning}", file=sys.stderr)
    print(f"OK: {summary(program)}; {len(templates)} templates ({', '.join(templates.ids)})")
    return 0


def _held_as_last_seen(database_url: str) -> dict[str, dict[str, int]] | None:
    """What each org's clusters held when Pitcrew last saw them (the clusters table), or None where there is no
    database to read (a SQLite file not made yet is not created; an unreachable or unmigrated one is skipped)."""
    from sqlalchemy.engine import make_url

    from storage import crud
    from storage.db import Database

    url = make_url(database_url)
    if url.get_backend_name() == "sqlite" and not (url.database and Path(url.database).is_file()):
        return None

    async def read() -> dict[str, dict[str, int]]:
        database = Database(url=database_url)
        try:
            async with database.session() as session:
                rows = await crud.clusters_seen(session)
        finally:
            await database.dispose()
        held: dict[str, dict[str, int]] = {}
        for row in rows:
            for instance_type, count in (row.instances or {}).items():
                by_type = held.setdefault(row.org_id, {})
                by_type[instance_type] = by_type.get(instance_type, 0) + int(count)
        return held

    try:
        return asyncio.run(asyncio.wait_for(read(), timeout=DATABASE_WAIT))
    except Exception:  # a warning's source, never a reason for check-config to fail
        return None


def _quota_gap_warnings(program: ProgramConfig, held: dict[str, dict[str, int]] | None) -> list[str]:
    """One line per org whose clusters (as last seen) hold accelerators its quota does not list."""
    from bot.clusters.held import quota_gaps

    out = []
    for index, org in enumerate(program.orgs):
        gaps = quota_gaps(org, (held or {}).get(org.id, {}))
        if gaps:
            said = ", ".join(f"{t} ({n} held)" for t, n in gaps.items())
            out.append(
                f"orgs[{index}].quota: {org.id}'s clusters hold {said}, which its quota does not list: an "
                "unlisted accelerator's quota is 0, so no launch or scale of it is allowed; list it with its limit"
            )
    return out


# Ports other programs take by default, named when one of them is the likely reason a port is busy.
WELL_KNOWN_PORTS = {3000: "Grafana", 8080: "many development servers", 9090: "Prometheus"}
PORT_IN_USE = 2  # exit code: the port asked for is taken (1 is a bad program or template file)


class PortUnavailable(Exception):
    """The port cannot be listened on; the message is the one line the user sees."""


def _listener(host: str, port: int) -> net.socket:
    """A socket bound to host:port, for uvicorn to serve on: bound here, not by uvicorn, so a busy port is one
    clear line and exit code 2 instead of uvicorn's traceback (and before any start-up work is done)."""
    try:
        return tcp_listener(host, port)
    except OSError as error:
        raise PortUnavailable(_port_problem(host, port, error)) from None


def _port_problem(host: str, port: int, error: OSError) -> str:
    free = _free_port_after(host, port)
    instead = f"; start with --port {free}" if free else "; start with --port PORT (a free one)"
    if error.errno == errno.EADDRINUSE:
        known = f" ({WELL_KNOWN_PORTS[port]} uses it by default)" if port in WELL_KNOWN_PORTS else ""
        return f"pitcrew: port {port} is already in use{known}{instead}"
    if error.errno == errno.EACCES:
        return f"pitcrew: port {port} needs privileges to listen on (ports below 1024 do){instead}"
    return f"pitcrew: cannot listen on {host} port {port} ({error.strerror or error}); check --host, --port"


def _free_port_after(host: str, port: int, tries: int = 20) -> int | None:
    """The first port after `port` that can be bound now (a suggestion: it may be taken by the time it is used)."""
    family = net.AF_INET6 if ":" in host else net.AF_INET
    for candidate in range(max(port + 1, 1024), min(port + 1 + tries, 65536)):
        with net.socket(family, net.SOCK_STREAM) as probe:
            probe.setsockopt(net.SOL_SOCKET, net.SO_REUSEADDR, 1)
            try:
                probe.bind((host, candidate))
            except OSError:
                continue
            return candidate
    return None


DATABASE_WAIT = 15.0  # seconds to connect at start before saying the database cannot be reached


def _database_problem(database_url: str) -> str | None:
    """One line saying why the database cannot be opened (down, wrong host, port, name or password, a folder
    that cannot be made), or None. Checked before serving, so an unreachable database is that line and exit
    code 1, not uvicorn's "Application startup failed" after a 150-line traceback. Only connecting is
    checked here: a migration that fails keeps its traceback (that is a bug to report)."""
    from sqlalchemy import text
    from sqlalchemy.engine import make_url

    from bot.audit import short_error
    from storage.db import Database

    url = make_url(database_url)

    async def connect() -> None:
        if url.get_backend_name() == "sqlite" and url.database and not url.database.startswith("file:"):
            Path(url.database).parent.mkdir(parents=True, exist_ok=True)  # as the migration file lock does
        db = Database(url=database_url)
        try:
            async with db.engine.connect() as connection:
                await connection.execute(text("SELECT 1"))
        finally:
            await db.dispose()

    try:
        asyncio.run(asyncio.wait_for(connect(), DATABASE_WAIT))
    except Exception as error:
        why = f"no answer in {DATABASE_WAIT:g} s" if isinstance(error, TimeoutError) else short_error(error)
        shown = url.render_as_string(hide_password=True)
        return f"pitcrew: cannot open the database {shown} ({why}); check DATABASE_URL and that the database is up"
    return None


def serve(settings: Settings, host: str, port: int) -> int:
    import uvicorn

    from bot.app import build_app, prefer_the_event_loop

    _templates(settings)  # a bad template file is reported like a bad program file, before anything starts
    program = _program(settings)
    try:
        sock = _listener(host, port)
    except PortUnavailable as problem:
        print(problem, file=sys.stderr)
        return PORT_IN_USE
    unreachable = _database_problem(settings.database_url)
    if unreachable:
        sock.close()
        print(unreachable, file=sys.stderr)
        return 1
    pitcrew = build_app(settings=settings, program=program)
    prefer_the_event_loop()
    # No access log: Slack's requests would log a line each, and Pitcrew audits what matters.
    # log_config=None: uvicorn's own lines go through bot.logs like the rest (JSON when asked, secrets masked).
    config = uvicorn.Config(
        pitcrew.asgi, host=host, port=sock.getsockname()[1], log_level="info", access_log=False, log_config=None
    )
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
    return 0


async def _socket(settings: Settings) -> None:
    from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

    from bot.app import build_app, prefer_the_event_loop, start, stop

    _templates(settings)
    pitcrew = build_app(settings=settings, program=_program(settings))
    prefer_the_event_loop()
    await start(pitcrew.services)
    try:
        await AsyncSocketModeHandler(pitcrew.bolt, settings.slack_app_token).start_async()
    finally:
        await stop(pitcrew.services)


def socket(settings: Settings) -> int:
    if not settings.slack_app_token.startswith("xapp-"):
        print("Socket Mode needs SLACK_APP_TOKEN (an app-level token starting with xapp-).", file=sys.stderr)
        return 1
    asyncio.run(_socket(settings))
    return 0


def db_upgrade(settings: Settings) -> int:
    from storage.db import upgrade

    upgrade(settings.database_url)
    print(f"Database at head: {settings.database_url.split('@')[-1]}")
    return 0


async def _create_token(database_url: str, org_id: str, created_by: str) -> str:
    from bot.ingest.tokens import create_token
    from storage.db import Database

    db = Database(url=database_url)
    try:
        await db.upgrade()
        return await create_token(db, org_id=org_id, created_by=created_by)
    finally:
        await db.dispose()


def _known_org(settings: Settings, program: ProgramConfig, org_id: str) -> bool:
    """Whether the program file lists the org; if not, says which orgs it does list."""
    if program.org(org_id) is not None:
        return True
    known = ", ".join(org.id for org in program.orgs) or "none"
    print(f"unknown org {org_id!r}: {settings.pitcrew_config} lists {known}", file=sys.stderr)
    return False


def token_create(settings: Settings, org_id: str, created_by: str | None) -> int:
    program = _program(settings)
    if not _known_org(settings, program, org_id):
        return 1
    if created_by is None:
        try:
            created_by = getpass.getuser()
        except (KeyError, OSError):
            created_by = ""
    token = asyncio.run(_create_token(settings.database_url, org_id, created_by))
    print(f"Ingest token for {org_id} (shown only once; Pitcrew stores only its hash, so keep it now):")
    print(token)
    print(
        "Send it with each POST /api/v1/throughput as the header 'Authorization: Bearer <token>' "
        "(see Throughput ingest in the README)."
    )
    return 0


async def _token_admin(database_url: str, *, org_id: str | None, prefix: str | None) -> tuple[list[str], int]:
    """Lines listing an org's tokens, or the number revoked by prefix."""
    from bot.ingest.tokens import list_tokens, revoke_token
    from storage.db import Database

    db = Database(url=database_url)
    try:
        await db.upgrade()
        if prefix is not None:
            return [], await revoke_token(db, prefix=prefix)
        rows = await list_tokens(db, org_id=org_id or "")
        lines = [
            f"{row.prefix}…  created {row.created_at:%Y-%m-%d %H:%M} UTC by {row.created_by or '?'}"
            + (f"  REVOKED {row.revoked_at:%Y-%m-%d %H:%M} UTC" if row.revoked_at else "")
            for row in rows
        ]
        return lines, len(rows)
    finally:
        await db.dispose()


def token_list(settings: Settings, org_id: str) -> int:
    program = _program(settings)
    if program.org(org_id) is None:
        print(f"unknown org {org_id!r}: see {settings.pitcrew_config}", file=sys.stderr)
        return 1
    lines, _ = asyncio.run(_token_admin(settings.database_url, org_id=org_id, prefix=None))
    print("\n".join(lines) if lines else f"{org_id} has no ingest tokens; `pitcrew token create {org_id}` makes one")
    return 0


def token_revoke(settings: Settings, prefix: str) -> int:
    _, revoked = asyncio.run(_token_admin(settings.database_url, org_id=None, prefix=prefix))
    if not revoked:
        print(f"no active token shown as {prefix!r}; `pitcrew token list ORG` shows them", file=sys.stderr)
        return 1
    print(f"revoked {revoked} token{'s' if revoked > 1 else ''} shown as {prefix}; requests with it now get 401")
    return 0


REPLAY_METRICS_PROBLEM = 2  # exit code: `throughput replay`'s metrics source is wrong or unreachable (1: the file)
_LABEL_HINT = "give a Prometheus label name (letters, digits and _, not starting with a digit)"
_REPLAY_METRICS_FLAGS = {  # MetricsConfig's fields as the replay's flags, and how to give each right
    "prometheus_url": ("--metrics-url", "give the Prometheus base URL with its scheme, e.g. http://localhost:9090"),
    "node_label": ("--node-label", _LABEL_HINT),
    "cluster_label": ("--cluster-label", _LABEL_HINT),
}
_AWS_REGION = r"^[a-z]{2}(-[a-z]+)+-\d$"


class _ReplayMetricsProblem(Exception):
    """One line saying what is wrong with the replay's metrics source and how to give it right."""


@dataclass(frozen=True, kw_only=True)
class _Signing:
    """How the replay signs its Prometheus requests (SigV4, service aps): the region and the credentials."""

    region: str
    credentials: Callable[[], Any]


def _replay_metrics_config(
    url: str | None, *, node_label: str | None, cluster_label: str | None, sigv4: bool, region: str | None
) -> MetricsConfig | None:
    import pydantic

    if url is None:
        given = [
            flag
            for flag, value in (
                ("--node-label", node_label),
                ("--cluster-label", cluster_label),
                ("--sigv4", sigv4 or None),
                ("--region", region),
            )
            if value is not None
        ]
        if given:
            raise _ReplayMetricsProblem(f"{', '.join(given)} without --metrics-url: give the Prometheus to read too")
        return None
    if region is not None and not sigv4:
        raise _ReplayMetricsProblem("--region is for signing: give --sigv4 too (Amazon Managed Service for Prometheus)")
    labels = {"node_label": node_label, "cluster_label": cluster_label}
    try:
        return MetricsConfig(
            prometheus_url=url, sigv4=sigv4, **{name: value for name, value in labels.items() if value is not None}
        )
    except pydantic.ValidationError as error:
        name = str(error.errors()[0]["loc"][0])
        flag, hint = _REPLAY_METRICS_FLAGS.get(name, (name, "see pitcrew throughput replay --help"))
        value = {"prometheus_url": url, **labels}.get(name)
        raise _ReplayMetricsProblem(f"{flag} {value!r} is not valid: {hint}") from None


def _replay_signing(region: str | None) -> _Signing:
    """The region (--region, else the AWS configuration's) and the standard chain's credentials, checked now so
    a missing one is said before the trace is replayed."""
    import re

    import boto3

    session = boto3.Session(region_name=region)
    region = region or session.region_name
    if not region:
        raise _ReplayMetricsProblem("--sigv4 needs the workspace's region: give --region (e.g. us-east-1)")
    if not re.match(_AWS_REGION, region):
        raise _ReplayMetricsProblem(f"--region {region!r} is not an AWS region: give one such as us-east-1")
    if session.get_credentials() is None:
        raise _ReplayMetricsProblem(
            "--sigv4 found no AWS credentials in the standard chain: set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, or run with a role"
        )
    return _Signing(region=region, credentials=session.get_credentials)


async def _read_trace_metrics(
    span: TraceSpan, config: MetricsConfig, signing: _Signing | None
) -> dict[str, ClusterMetrics]:
    from bot.monitor.replay import read_trace_metrics
    from bot.node_metrics.prometheus import PrometheusReader

    if signing is None:
        reader = PrometheusReader(config=config)
    else:
        reader = PrometheusReader(config=config, credentials=signing.credentials, region=signing.region)
    try:
        return await read_trace_metrics(span, reader)
    finally:
        await reader.aclose()


@dataclass(frozen=True, kw_only=True)
class LogSource:
    """A training log read as a trace (`throughput import`, `throughput replay --format`): its format and what
    the log cannot say itself. org, cluster and job None: not given (defaults, said on stderr)."""

    format: str
    tokens_per_step: float | None = None
    start: datetime | None = None
    org: str | None = None
    cluster: str | None = None
    job: str | None = None


def _log_rows(path: Path, source: LogSource) -> tuple[list[dict[str, str]], tuple[str, ...]]:
    """The log's trace rows and columns; what was read and assumed goes to stderr, one sentence a line. Raises
    OSError, or LogError (one line naming the log's line) for what it cannot read."""
    import re
    from datetime import UTC

    from bot.ingest.samples import CLUSTER_RE, JOB_RE
    from bot.ingest.training_logs import FORMATS, ImportOptions, LogError, read_log

    stem = re.sub(r"[^A-Za-z0-9._:/-]+", "-", Path(path).stem).strip("-")[:128] or "job"
    org, cluster, job = source.org or "local", source.cluster or "local", source.job or stem
    for flag, value, pattern in (
        ("--org", org, re.compile(r"[a-z0-9-]+")),
        ("--cluster", cluster, CLUSTER_RE),
        ("--job", job, JOB_RE),
    ):
        if not pattern.fullmatch(value):
            raise LogError(None, f"{flag} {value!r} is not a valid name (as the ingest API takes it)")
    reading_stdin = str(path) == "-"
    options = ImportOptions(
        org=org,
        cluster=cluster,
        job=job,
        tokens_per_step=source.tokens_per_step,
        start=source.start,
        last_change=None if reading_stdin else datetime.fromtimestamp(Path(path).stat().st_mtime, UTC),
    )
    if reading_stdin:
        imported = read_log(sys.stdin, FORMATS[source.format], options)
    else:
        # newline="\n": a progress bar's carriage returns stay inside its line, so line numbers are an editor's
        with Path(path).open(encoding="utf-8", errors="replace", newline="\n") as handle:
            imported = read_log(handle, FORMATS[source.format], options)
    for note in imported.notes:
        print(note, file=sys.stderr)
    if None in (source.org, source.cluster, source.job):
        print(f"rows for org {org}, cluster {cluster}, job {job} (--org, --cluster, --job name them)", file=sys.stderr)
    return imported.rows, imported.columns


def throughput_import(path: Path, source: LogSource, output: Path | None) -> int:
    """Write a training log as a throughput trace (CSV, the ingest API's sample keys) to `output` or stdout;
    what it read and assumed on stderr. 1 with one line when the log cannot be read."""
    import csv

    from bot.ingest.training_logs import LogError

    try:
        rows, columns = _log_rows(path, source)
    except OSError as error:
        print(f"cannot read {path}: {error.strerror}", file=sys.stderr)
        return 1
    except LogError as error:
        print(f"{path}: {error}", file=sys.stderr)
        return 1
    try:
        handle = sys.stdout if output is None else output.open("w", newline="", encoding="utf-8")
    except OSError as error:
        print(f"cannot write {output}: {error.strerror}", file=sys.stderr)
        return 1
    try:
        writer = csv.DictWriter(handle, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    finally:
        if output is not None:
            handle.close()
    if output is not None:
        print(f"wrote {len(rows)} rows to {output}", file=sys.stderr)
    return 0


def throughput_replay(
    path: Path,
    *,
    stall_after: float,
    drop_ratio: float,
    sustain: float,
    metrics_url: str | None = None,
    node_label: str | None = None,
    cluster_label: str | None = None,
    sigv4: bool = False,
    region: str | None = None,
    until: datetime | timedelta | None = None,
    log: LogSource | None = None,
) -> int:
    """Print the detector's episodes over a recorded trace, one JSON object per line (tuning thresholds); with
    `metrics_url`, the cause and suspects per-node metrics from that Prometheus show, and faulty nodes; with
    `until`, the clock runs on past the last row (so a trace ending in a hang reports it); with `log`, the file
    is a training log, read as `throughput import` reads it."""
    from bot.ingest.training_logs import LogError
    from bot.monitor.replay import ReplayError, TraceSpan, iso, replay, replay_csv, with_culprits
    from bot.monitor.throughput import Thresholds

    thresholds = Thresholds(
        stall_after=timedelta(minutes=stall_after), drop_ratio=drop_ratio, sustain=timedelta(minutes=sustain)
    )
    try:
        config = _replay_metrics_config(
            metrics_url, node_label=node_label, cluster_label=cluster_label, sigv4=sigv4, region=region
        )
        signing = _replay_signing(region) if config is not None and config.sigv4 else None
    except _ReplayMetricsProblem as problem:
        print(problem, file=sys.stderr)
        return REPLAY_METRICS_PROBLEM
    span = TraceSpan()
    filled = None if config is None else span
    try:
        if log is None:
            episodes = replay_csv(path, thresholds, span=filled, until=until)
        else:
            episodes = replay(_log_rows(path, log)[0], thresholds, span=filled, until=until)
        if config is None:  # streamed as detected: nothing to wait for
            for episode in episodes:
                print(json.dumps(episode), flush=False)
            return 0
        replayed = list(episodes)
    except OSError as error:
        print(f"cannot read {path}: {error.strerror}", file=sys.stderr)
        return 1
    except (ReplayError, LogError) as error:
        print(f"{path}: {error}", file=sys.stderr)
        return 1
    from bot.node_metrics.prometheus import MetricsError

    try:
        metrics = asyncio.run(_read_trace_metrics(span, config, signing))
    except MetricsError as error:
        print(
            f"{error}; check --metrics-url: the Prometheus base URL (e.g. http://localhost:9090), or for Amazon "
            "Managed Service for Prometheus the workspace URL with --sigv4 --region",
            file=sys.stderr,
        )
        return REPLAY_METRICS_PROBLEM
    for cluster, read in metrics.items():
        if not read.series:
            print(
                f'{config.prometheus_url} has no metrics with {config.cluster_label}="{cluster}" from '
                f"{iso(read.start)} to {iso(read.end)}: {cluster}'s episodes get cause unknown "
                "(is --cluster-label right?)",
                file=sys.stderr,
            )
    for episode in with_culprits(replayed, span, metrics):
        print(json.dumps(episode), flush=False)
    return 0


async def _document_markdown(database_url: str, program: ProgramConfig, org_id: str) -> str:
    from zoneinfo import ZoneInfo

    from bot.digest.markdown import tracking_doc_markdown
    from bot.tracking.records import RecordBook
    from storage.db import Database

    db = Database(url=database_url)
    try:
        await db.upgrade()
        doc = await RecordBook(db=db, program=program).document(org_id)
        return tracking_doc_markdown(doc, tz=ZoneInfo(program.timezone))
    finally:
        await db.dispose()


def track_export(settings: Settings, org_id: str, output: Path | None) -> int:
    """Write an org's living tracking document as Markdown, for people outside Slack."""
    program = _program(settings)
    if not _known_org(settings, program, org_id):
        return 1
    text = asyncio.run(_document_markdown(settings.database_url, program, org_id))
    if output is None:
        sys.stdout.write(text)
        return 0
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as error:
        print(f"cannot write {output}: {error.strerror}", file=sys.stderr)
        return 1
    print(f"{org_id}: tracking document written to {output}")
    return 0


USAGE_PROBLEM = 2  # exit code: an option given wrong (1: the program file, or an org it does not list)


def onboard(settings: Settings, org_id: str, *, principal: str, tier: str, link: bool, template_url: str | None) -> int:
    """Print the CloudFormation template of Pitcrew's role in an org's account, or with `link` its quick-create
    link (the template must be in S3 first: CloudFormation reads templateURL from S3 only)."""
    from bot.iam.onboard import OnboardError, check_org, check_principal, check_tier, quick_create_link, template_yaml

    try:
        check_principal(principal)
        chosen = check_tier(tier)
        if link and not template_url:
            raise OnboardError(
                "--link needs --template-url: save the template (the same command without --link), upload it to "
                "S3 and give its https URL"
            )
    except OnboardError as problem:
        print(f"pitcrew onboard: {problem}", file=sys.stderr)
        return USAGE_PROBLEM
    program = _program(settings)
    try:
        org = check_org(program, org_id)
        if link:
            assert template_url is not None
            print(quick_create_link(org, template_url=template_url))
            return 0
    except OnboardError as problem:
        print(f"pitcrew onboard: {problem}", file=sys.stderr)
        return USAGE_PROBLEM if link else 1
    print(template_yaml(program, org, principal=principal, tier=chosen), end="")
    if not org.aws.role_arn:
        print(f"{org_id} has no aws.role_arn yet: put the stack's RoleArn output there", file=sys.stderr)
    return 0


async def _checkup(settings: Settings, program: ProgramConfig, org_ids: list[str] | None) -> tuple[list[str], bool]:
    from bot.app import build_slack_client
    from bot.clusters.accounts import AwsAccounts
    from bot.iam.doctor import checkup
    from storage.db import Database

    db = Database(url=settings.database_url)
    slack = build_slack_client(settings) if settings.slack_bot_token else None
    try:
        await db.upgrade()
        report = await checkup(program=program, accounts=AwsAccounts(), db=db, slack=slack, org_ids=org_ids)
    finally:
        await db.dispose()
    return report.lines(), report.ok


def doctor(settings: Settings, org_id: str | None) -> int:
    """Check every org's setup (or one's): a line per org and check; exit 0 only when every check passed."""
    program = _program(settings)
    if org_id is not None and not _known_org(settings, program, org_id):
        return 1
    lines, ok = asyncio.run(_checkup(settings, program, [org_id] if org_id else None))
    print("\n".join(lines))
    return 0 if ok else 1


def iam_table() -> int:
    """Print the table of every AWS action Pitcrew performs (Markdown), as the README shows it."""
    from bot.iam.table import markdown

    print(markdown(), end="")
    return 0


def demo(host: str, port: int, open_browser: bool) -> int:
    from bot.app import prefer_the_event_loop

    if importlib.util.find_spec("moto") is None:  # the sandbox is an extra: the product runs without moto
        print("The sandbox needs its extra: pip install 'pitcrew[sandbox]' (make run installs it)", file=sys.stderr)
        return 1
    from sandbox.demo import run_demo

    try:  # checked before the sandbox starts its AWS and seeds it (seconds of work for nothing)
        _listener(host, port).close()
    except PortUnavailable as problem:
        print(problem, file=sys.stderr)
        return PORT_IN_USE
    prefer_the_event_loop()
    try:
        run_demo(host=host, port=port, open_browser=open_browser)
    except OSError as error:  # taken in the moment since the check
        if error.errno not in (errno.EADDRINUSE, errno.EACCES):
            raise
        print(_port_problem(host, port, error), file=sys.stderr)
        return PORT_IN_USE
    return 0


def _port(value: str) -> int:
    """--port's type: a usage error naming the range, not the traceback bind() raises past 65535."""
    try:
        port = int(value)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port: give 0-65535 (0: any free port)")
    return port


def _until(value: str) -> datetime | timedelta:
    from bot.monitor.replay import parse_until

    try:
        return parse_until(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _start(value: str) -> datetime:
    from bot.ingest.training_logs import parse_time

    try:
        return parse_time(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _tokens_per_step(value: str) -> float:
    try:
        tokens = float(value)
    except ValueError:
        tokens = 0.0
    if not tokens > 0 or tokens == float("inf"):
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of tokens: give e.g. 4194304 (1024 x 4096)")
    return tokens


def _log_arguments(command: argparse.ArgumentParser, *, required: bool) -> None:
    """The flags that read a training log (`throughput import`, and `throughput replay --format`)."""
    from bot.ingest.training_logs import FORMATS

    command.add_argument(
        "--format",
        dest="log_format",
        required=required,
        choices=sorted(FORMATS),
        help="the framework that wrote the log" + ("" if required else " (the file is then a log, not a CSV)"),
    )
    command.add_argument(
        "--tokens-per-step",
        type=_tokens_per_step,
        metavar="N",
        help="tokens in one step (global batch size x sequence length), where the log does not say it",
    )
    command.add_argument(
        "--start",
        type=_start,
        metavar="TIME",
        help="when the first step began (e.g. 2026-11-29T09:00:00Z), for a log without timestamps "
        "(default: its last step ends when the file was last changed)",
    )
    command.add_argument("--org", metavar="ORG", help="the org of the rows (default: local)")
    command.add_argument("--cluster", metavar="CLUSTER", help="the cluster of the rows (default: local)")
    command.add_argument("--job", metavar="JOB", help="the job of the rows (default: the log's file name)")


def _log_source(args: argparse.Namespace) -> LogSource | None:
    if args.log_format is None:
        return None
    return LogSource(
        format=args.log_format,
        tokens_per_step=args.tokens_per_step,
        start=args.start,
        org=args.org,
        cluster=args.cluster,
        job=args.job,
    )


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="pitcrew", description="Slack chat-ops for a multi-org training program.")
    sub = top.add_subparsers(dest="command", required=True)
    serve_cmd = sub.add_parser("serve", help="HTTP mode: POST /slack/events, GET /healthz")
    serve_cmd.add_argument("--host", default="127.0.0.1")
    serve_cmd.add_argument("--port", type=_port, default=3000)
    sub.add_parser("socket", help="Socket Mode (needs SLACK_APP_TOKEN)")
    demo_cmd = sub.add_parser("demo", help="the sandbox: embedded AWS, seeded program, local Slack at the given port")
    demo_cmd.add_argument("--host", default="127.0.0.1")
    demo_cmd.add_argument("--port", type=_port, default=3000)
    demo_cmd.add_argument("--open", action="store_true", help="open the console in a browser")
    sub.add_parser("example-program", help="print the example program file (twelve orgs), to start yours from")
    check = sub.add_parser("check-config", help="validate a program file")
    check.add_argument("file", nargs="?", help="default: $PITCREW_CONFIG or ./program.yml")
    db = sub.add_parser("db", help="database maintenance")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    db_sub.add_parser("upgrade", help="apply migrations")
    throughput = sub.add_parser("throughput", help="training-throughput tools")
    throughput_sub = throughput.add_subparsers(dest="throughput_command", required=True)
    replay = throughput_sub.add_parser(
        "replay", help="run the stall detector over a recorded CSV trace; print one JSON line per episode"
    )
    replay.add_argument(
        "file",
        type=Path,
        metavar="FILE.csv",
        help="header: ts,org,cluster,job,tokens_per_second (or samples_per_second), optional step,event,nodes",
    )
    replay.add_argument("--stall-after", type=float, default=10.0, metavar="MIN", help="minutes (default 10)")
    replay.add_argument("--drop-ratio", type=float, default=0.6, metavar="R", help="of the baseline (default 0.6)")
    replay.add_argument("--sustain", type=float, default=5.0, metavar="MIN", help="minutes (default 5)")
    replay.add_argument(
        "--metrics-url",
        metavar="URL",
        help="a Prometheus with the clusters' DCGM and EFA metrics: each episode gets its cause and suspects, "
        "and faulty nodes are listed too",
    )
    replay.add_argument("--node-label", metavar="LABEL", help="the label naming a node (default instance_id)")
    replay.add_argument("--cluster-label", metavar="LABEL", help="the label naming a cluster (default cluster)")
    replay.add_argument(
        "--sigv4",
        action="store_true",
        help="sign requests (Amazon Managed Service for Prometheus) with the standard AWS credential chain",
    )
    replay.add_argument("--region", metavar="REGION", help="the workspace's region, with --sigv4 (default: AWS's)")
    replay.add_argument(
        "--until",
        type=_until,
        metavar="TIME",
        help="run the clock past the last row, to a time (2026-11-29T12:00:00Z) or end+DURATION (end+30m, end+2h), "
        "so a trace that ends in a hang reports it",
    )
    _log_arguments(replay, required=False)
    importer = throughput_sub.add_parser(
        "import", help="turn a training log into a throughput trace (CSV) that replay reads; assumptions on stderr"
    )
    importer.add_argument("file", type=Path, metavar="LOG", help="the training log (- for standard input)")
    _log_arguments(importer, required=True)
    importer.add_argument("--output", "-o", type=Path, metavar="FILE", help="default: standard output")
    track = sub.add_parser("track", help="tracking records")
    track_sub = track.add_subparsers(dest="track_command", required=True)
    export = track_sub.add_parser("export", help="write an org's living tracking document (Markdown)")
    export.add_argument("org", metavar="ORG", help="an org id from the program file")
    export.add_argument("--format", choices=["md"], default="md", help="md: Markdown (the only format so far)")
    export.add_argument("--output", "-o", type=Path, metavar="FILE", help="default: standard output")
    onboard_cmd = sub.add_parser(
        "onboard", help="the CloudFormation template of Pitcrew's role in an org's account (or its quick-create link)"
    )
    onboard_cmd.add_argument("org", metavar="ORG", help="an org id from the program file")
    onboard_cmd.add_argument(
        "--principal", required=True, metavar="ARN", help="the IAM role (or user) Pitcrew runs as, that the role trusts"
    )
    onboard_cmd.add_argument(
        "--tier", default="read", metavar="read|operate", help="read: look only (default); operate: reads and changes"
    )
    onboard_cmd.add_argument("--link", action="store_true", help="print the console quick-create link instead")
    onboard_cmd.add_argument("--template-url", metavar="URL", help="with --link: where the template is in S3 (https)")
    sub.add_parser("iam-table", help="print every AWS action Pitcrew performs, as a Markdown table")
    doctor_cmd = sub.add_parser(
        "doctor",
        help="check each org's setup (role, permissions, Prometheus, ingest token, channel); exit 0 if all pass",
    )
    doctor_cmd.add_argument("--org", metavar="ORG", help="only this org (default: every org)")
    token = sub.add_parser("token", help="API tokens of the throughput ingest endpoint")
    token_sub = token.add_subparsers(dest="token_command", required=True)
    token_new = token_sub.add_parser("create", help="create an org's ingest token and print it (once)")
    token_new.add_argument("org", metavar="ORG", help="an org id from the program file")
    token_new.add_argument("--by", dest="created_by", help="who it is for or who made it (default: $USER)")
    token_list_cmd = token_sub.add_parser("list", help="an org's tokens, by the prefix they are shown as")
    token_list_cmd.add_argument("org", metavar="ORG")
    token_revoke_cmd = token_sub.add_parser("revoke", help="revoke a token by the prefix `token list` shows")
    token_revoke_cmd.add_argument("prefix", metavar="PREFIX", help="e.g. pct_AbCdEfGh")
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    configure_logging(Settings())  # text or PITCREW_LOG_FORMAT=json, secrets masked
    # APScheduler logs every run of every job at INFO (several a minute); our jobs log what changed.
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    for noisy in ("httpx", "botocore", "alembic.runtime.plugins"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if args.command == "demo":
        return demo(args.host, args.port, args.open)
    settings = Settings()
    if args.command == "example-program":
        return example_program()
    if args.command == "check-config":
        return check_config(settings, args.file)
    if args.command == "serve":
        return serve(settings, args.host, args.port)
    if args.command == "socket":
        return socket(settings)
    if args.command == "throughput" and args.throughput_command == "import":
        source = _log_source(args)
        assert source is not None, "--format is required by import"
        return throughput_import(args.file, source, args.output)
    if args.command == "throughput":
        log = _log_source(args)
        if log is None:
            given = [
                flag
                for flag, value in (
                    ("--tokens-per-step", args.tokens_per_step),
                    ("--start", args.start),
                    ("--org", args.org),
                    ("--cluster", args.cluster),
                    ("--job", args.job),
                )
                if value is not None
            ]
            if given:
                print(f"{', '.join(given)} only apply to a training log: give --format too", file=sys.stderr)
                return 1
        return throughput_replay(
            args.file,
            stall_after=args.stall_after,
            drop_ratio=args.drop_ratio,
            sustain=args.sustain,
            metrics_url=args.metrics_url,
            node_label=args.node_label,
            cluster_label=args.cluster_label,
            sigv4=args.sigv4,
            region=args.region,
            until=args.until,
            log=log,
        )
    if args.command == "onboard":
        return onboard(
            settings,
            args.org,
            principal=args.principal,
            tier=args.tier,
            link=args.link,
            template_url=args.template_url,
        )
    if args.command == "iam-table":
        return iam_table()
    if args.command == "doctor":
        return doctor(settings, args.org)
    if args.command == "track":
        return track_export(settings, args.org, args.output)
    if args.command == "token":
        if args.token_command == "list":
            return token_list(settings, args.org)
        if args.token_command == "revoke":
            return token_revoke(settings, args.prefix)
        return token_create(settings, args.org, args.created_by)
    return db_upgrade(settings)


if __name__ == "__main__":
    raise SystemExit(main())
