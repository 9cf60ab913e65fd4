"""`pitcrew doctor`: is each org set up as Pitcrew needs it? One line per org and check, OK or what is wrong and
how to fix it; orgs checked concurrently.

Per org: the role can be assumed; each read its tier grants answers; the operate tier's changes are allowed
(probed without changing anything, bot.iam.probes) or, if every one is refused, the org has the read tier;
Prometheus answers; an ingest token exists (unless throughput comes from CloudWatch); the org's channel exists
and Pitcrew is in it. For the program: the events queue answers and Pitcrew is in the coordination channel.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol

import httpx
from botocore.exceptions import BotoCoreError, ClientError

from bot.clusters.accounts import AwsAccounts
from bot.config import OrgConfig, ProgramConfig
from bot.iam.actions import Access, Permission
from bot.iam.denied import PermissionMissing, is_denied
from bot.iam.policy import permissions, queue
from bot.iam.probes import NOT_PROBED, Answer, Prober, ProbeResult, caller, queue_problem
from bot.tls import tls_context
from storage import crud
from storage.db import Database
from storage.models import DoctorResult

ORG_SECONDS = 60.0  # one org's whole check; past that its lines say it timed out
PROGRAM = "program"  # the name the program-wide lines go under


class Status(StrEnum):
    OK = "OK"
    FAIL = "FAIL"
    NOTE = "--"  # not checked, or not set up: says why; never a failure


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str = ""


@dataclass(frozen=True)
class OrgReport:
    org_id: str
    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        return all(check.status is not Status.FAIL for check in self.checks)

    @property
    def problems(self) -> tuple[Check, ...]:
        return tuple(check for check in self.checks if check.status is Status.FAIL)


@dataclass(frozen=True)
class DoctorReport:
    orgs: tuple[OrgReport, ...]  # the program's own lines first, under PROGRAM
    seconds: float
    at: datetime = field(default_factory=lambda: datetime.now(UTC))

    @property
    def ok(self) -> bool:
        return all(report.ok for report in self.orgs)

    def lines(self) -> list[str]:
        width = max((len(check.name) for report in self.orgs for check in report.checks), default=10)
        org_width = max((len(report.org_id) for report in self.orgs), default=7)
        lines = [
            f"{report.org_id:<{org_width}}  {check.name:<{width}}  {check.status.value:<4}  {check.detail}".rstrip()
            for report in self.orgs
            for check in report.checks
        ]
        orgs = [r for r in self.orgs if r.org_id != PROGRAM]
        failing = [r.org_id for r in self.orgs if not r.ok]
        verdict = "every check passed" if not failing else f"problems in {', '.join(failing)}"
        lines.append(f"{len(orgs)} org{'s' if len(orgs) != 1 else ''} checked in {self.seconds:.1f} s: {verdict}")
        return lines


class SlackChannels(Protocol):
    """The one Slack call the doctor makes (slack_sdk's AsyncWebClient has it)."""

    async def conversations_info(self, *, channel: str) -> Any: ...


TokenCount = Callable[[str], Awaitable[int]]  # org id -> its active ingest tokens


def _tier_checks(org: OrgConfig, results: Sequence[ProbeResult]) -> list[Check]:
    """Reads must answer; changes are all allowed (operate), all refused (read: said, not a failure), or some
    refused (a permission removed: each named)."""
    checks: list[Check] = []
    changes = [r for r in results if r.permission.access is Access.CHANGE and r.answer is not Answer.BROKEN]
    read_tier = bool(changes) and all(r.answer is Answer.DENIED for r in changes)
    for result in results:
        name, permission = _name(result.permission), result.permission
        if result.answer is Answer.ALLOWED:
            checks.append(Check(name, Status.OK))
        elif result.answer is Answer.DENIED and permission.access is Access.CHANGE and read_tier:
            continue  # said once below
        elif result.answer is Answer.DENIED:
            checks.append(
                Check(name, Status.FAIL, str(PermissionMissing(org.id, permission.action, permission.access)))
            )
        elif permission.action in NOT_PROBED:
            if not read_tier:
                checks.append(Check(name, Status.NOTE, result.detail))
        else:
            checks.append(Check(name, Status.FAIL, f"{result.detail}; check the network path to AWS"))
    if read_tier:
        checks.append(
            Check(
                "changes",
                Status.NOTE,
                f"read tier: launch, scale, reboot, replace and delete are refused; for them deploy the operate tier "
                f"(`pitcrew onboard {org.id} --tier operate`)",
            )
        )
    return checks


def _name(permission: Permission) -> str:
    if permission.action == "execute-api:Invoke":
        return f"execute-api {permission.calls[0].split(' ', 1)[1]}"
    return permission.action


def _role_check(org: OrgConfig, prober: Prober, principal: str | None) -> Check:
    if not org.aws.role_arn:
        return Check("role", Status.NOTE, "no aws.role_arn: Pitcrew's own credentials reach this account")
    try:
        prober.assume()
    except ClientError as error:
        if not is_denied(error):
            code = error.response.get("Error", {}).get("Code", "error")
            return Check("role", Status.FAIL, f"STS answered {code} for {org.aws.role_arn}")
        who = principal or "Pitcrew's principal"
        return Check(
            "role",
            Status.FAIL,
            f"cannot assume {org.aws.role_arn}: a wrong ExternalId (the program file says "
            f"`{org.aws.external_id or '(none)'}`) or a trust policy that does not name {who}; redeploy "
            f"`pitcrew onboard {org.id} --principal {who}`, or fix orgs[].aws.external_id",
        )
    except BotoCoreError as error:
        return Check("role", Status.FAIL, f"STS did not answer ({type(error).__name__}); check the network path")
    return Check("role", Status.OK, f"assumed {org.aws.role_arn}")


def _aws_checks(org: OrgConfig, accounts: AwsAccounts, http: httpx.Client, principal: str | None) -> list[Check]:
    prober = Prober(org, accounts, http)
    role = _role_check(org, prober, principal)
    if role.status is Status.FAIL:
        return [role, Check("permissions", Status.NOTE, "not checked: the role cannot be assumed")]
    results = [prober.probe(permission) for permission in permissions(org, "operate")]
    return [role, *_tier_checks(org, results)]


async def _prometheus_check(org: OrgConfig, accounts: AwsAccounts) -> Check:
    from bot.node_metrics.prometheus import MetricsError, PrometheusReader

    if org.metrics is None:
        return Check("prometheus", Status.NOTE, "no metrics in the program file: the culprit and faulty nodes are off")
    signing: dict[str, Any] = {}
    if org.metrics.sigv4:
        signing = {"credentials": lambda: accounts.credentials(org), "region": org.aws.region}
    reader = PrometheusReader(config=org.metrics, **signing)
    now = datetime.now(UTC)
    try:
        await reader.cluster_metrics(f"{org.id}-doctor", start=now - timedelta(minutes=1), end=now)
    except MetricsError as error:
        if org.metrics.sigv4 and "HTTP 403" in str(error):
            return Check("prometheus", Status.FAIL, str(PermissionMissing(org.id, "aps:QueryMetrics", Access.READ)))
        return Check("prometheus", Status.FAIL, f"{error}; check orgs[].metrics.prometheus_url")
    finally:
        await reader.aclose()
    return Check("prometheus", Status.OK, org.metrics.prometheus_url)


async def _token_check(org: OrgConfig, tokens: TokenCount | None) -> Check:
    if org.throughput is not None:
        return Check("ingest token", Status.NOTE, "throughput comes from CloudWatch: no token needed")
    if tokens is None:
        return Check("ingest token", Status.NOTE, "not checked: no database")
    count = await tokens(org.id)
    if count:
        return Check("ingest token", Status.OK, f"{count} active")
    return Check(
        "ingest token",
        Status.FAIL,
        f"none: training jobs cannot report throughput; `pitcrew token create {org.id}` and give it to them",
    )


async def _channel_check(name: str, channel: str, slack: SlackChannels | None) -> Check:
    if slack is None:
        return Check(name, Status.FAIL, "not checked: set SLACK_BOT_TOKEN (and SLACK_API_URL if not Slack's)")
    try:
        answer = await slack.conversations_info(channel=channel)
        info = answer["channel"]
    except Exception as error:  # slack_sdk's SlackApiError, or no answer at all
        said = getattr(getattr(error, "response", None), "get", lambda *_: None)("error")
        if said in ("channel_not_found", "not_in_channel"):
            return Check(
                name,
                Status.FAIL,
                f"{channel} not found: check the channel id, or /invite @Pitcrew if it is private",
            )
        return Check(name, Status.FAIL, f"Slack did not say ({said or type(error).__name__})")
    shown = f"#{info.get('name', channel)}"
    if info.get("is_archived"):
        return Check(name, Status.FAIL, f"{shown} is archived: unarchive it or point the program file at another")
    if not info.get("is_member", False):
        return Check(name, Status.FAIL, f"Pitcrew is not in {shown}: /invite @Pitcrew there")
    return Check(name, Status.OK, shown)


@dataclass
class Doctor:
    program: ProgramConfig
    accounts: AwsAccounts
    slack: SlackChannels | None = None
    tokens: TokenCount | None = None
    org_seconds: float = ORG_SECONDS
    concurrency: int = 16

    async def run(self, org_ids: Sequence[str] | None = None) -> DoctorReport:
        started = time.monotonic()
        orgs = [org for org in self.program.orgs if org_ids is None or org.id in org_ids]
        pool = ThreadPoolExecutor(max_workers=max(1, min(self.concurrency, len(orgs) + 1)), thread_name_prefix="doctor")
        http = httpx.Client(timeout=httpx.Timeout(15.0, connect=5.0), verify=tls_context())
        try:
            loop = asyncio.get_running_loop()
            principal = await loop.run_in_executor(pool, caller, self.accounts, self._home_region())
            reports = await asyncio.gather(
                self._program_checks(loop, pool, principal),
                *(self._org(org, loop, pool, http, principal) for org in orgs),
            )
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
            http.close()
        return DoctorReport(orgs=tuple(reports), seconds=time.monotonic() - started)

    def _home_region(self) -> str:
        return self.program.orgs[0].aws.region if self.program.orgs else "us-east-1"

    async def _org(
        self,
        org: OrgConfig,
        loop: asyncio.AbstractEventLoop,
        pool: ThreadPoolExecutor,
        http: httpx.Client,
        principal: str | None,
    ) -> OrgReport:
        async def everything() -> list[Check]:
            aws, *rest = await asyncio.gather(
                loop.run_in_executor(pool, _aws_checks, org, self.accounts, http, principal),
                _prometheus_check(org, self.accounts),
                _token_check(org, self.tokens),
                _channel_check("channel", org.channel, self.slack),
            )
            return [*aws, *rest]

        try:
            checks = await asyncio.wait_for(everything(), self.org_seconds)
        except TimeoutError:
            checks = [Check("checks", Status.FAIL, f"timed out after {self.org_seconds:g} s")]
        return OrgReport(org.id, tuple(checks))

    async def _program_checks(
        self, loop: asyncio.AbstractEventLoop, pool: ThreadPoolExecutor, principal: str | None
    ) -> OrgReport:
        checks = [
            Check("principal", Status.OK, principal)
            if principal
            else Check("principal", Status.FAIL, "no AWS credentials answered sts:GetCallerIdentity")
        ]
        queue_url = self.program.monitor.event_queue_url
        if queue_url:
            found = queue(queue_url)
            sqs = self.accounts.home_client("sqs", (found.region if found else None) or self._home_region())
            problem = await loop.run_in_executor(pool, queue_problem, queue_url, sqs)
            checks.append(
                Check("events queue", Status.OK, queue_url)
                if problem is None
                else Check(
                    "events queue",
                    Status.FAIL,
                    f"{queue_url}: {problem}; Pitcrew's own credentials need sqs:ReceiveMessage, sqs:DeleteMessage "
                    "and sqs:GetQueueAttributes on it (docs/eventbridge.md)",
                )
            )
        else:
            checks.append(Check("events queue", Status.NOTE, "none in the program file: the node sweep alone"))
        checks.append(await _channel_check("coordination channel", self.program.coordination_channel, self.slack))
        return OrgReport(PROGRAM, tuple(checks))


def token_counter(db: Database) -> TokenCount:
    """Active ingest tokens of an org, from storage."""

    async def count(org_id: str) -> int:
        async with db.session() as session:
            return sum(1 for row in await crud.org_tokens(session, org_id=org_id) if row.revoked_at is None)

    return count


def results(report: DoctorReport) -> list[DoctorResult]:
    """The report as storage rows: per org whether it passed, and its failing lines."""
    return [
        DoctorResult(
            org_id=org.org_id,
            ran_at=report.at,
            ok=org.ok,
            problems="\n".join(f"{check.name}: {check.detail}" for check in org.problems)[:4000],
        )
        for org in report.orgs
    ]


async def checkup(
    *,
    program: ProgramConfig,
    accounts: AwsAccounts,
    db: Database,
    slack: SlackChannels | None,
    org_ids: Sequence[str] | None = None,
) -> DoctorReport:
    """Run the doctor and keep each org's result (the Home shows an org whose last run failed)."""
    report = await Doctor(program=program, accounts=accounts, slack=slack, tokens=token_counter(db)).run(org_ids)
    async with db.session() as session:
        await crud.put_doctor_results(session, results=results(report))
    return report
