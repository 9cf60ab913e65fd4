"""Settings (environment) and ProgramConfig (program.yml), both validated with pydantic.

Settings are read once in the CLI and passed down; nothing here runs at import time.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.resources import shipped_templates

ORG_ID_PATTERN = r"^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$"
USER_ID_PATTERN = r"^[UW][A-Z0-9]{2,20}$"
CHANNEL_ID_PATTERN = r"^[CGD][A-Z0-9]{2,20}$"
TEAM_ID_PATTERN = r"^[TE][A-Z0-9]{2,20}$"
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
LAUNCH_PARAMETER_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"  # a template parameter's name (orgs[].launch keys)


class Settings(BaseSettings):
    """Process settings from the environment (DESIGN.md, Contracts: Environment)."""

    model_config = SettingsConfigDict(env_file=None, extra="ignore", case_sensitive=False)

    slack_bot_token: str = ""
    slack_signing_secret: str = ""
    slack_app_token: str = ""
    slack_api_url: str = "https://slack.com/api/"
    database_url: str = "sqlite+aiosqlite:///./pitcrew.db"
    pitcrew_config: Path = Path("./program.yml")
    # The reference architectures; by default the templates shipped in the package (bot/templates/).
    pitcrew_templates: Path = Field(default_factory=shipped_templates)
    # How many orgs are queried at once; 16 covers a dozen orgs in one round.
    pitcrew_org_concurrency: int = Field(default=16, ge=1, le=64)
    # Seconds one org may take before its line in a reply says it timed out.
    pitcrew_org_timeout: float = Field(default=20.0, gt=0)
    # How long an org's cluster listing is reused (0: ask AWS every time).
    pitcrew_cache_seconds: float = Field(default=10.0, ge=0)
    # The monitors (node sweeps, the EventBridge queue, the CloudWatch pull, throughput checks) on the leader
    # replica; off for a replica that should only answer commands, and in tests that drive them themselves.
    pitcrew_monitor: bool = True
    # The weekly digest and its catch-up, on the leader replica; independent of PITCREW_MONITOR (a replica
    # without the monitors takes a lease of its own for it, so it never keeps the monitors from leading).
    pitcrew_digest: bool = True
    # How often active training jobs are run through their detectors (on the leader).
    pitcrew_throughput_check_seconds: float = Field(default=60.0, ge=1, le=3600)
    # Days raw throughput samples are kept (one-minute rollups are kept longer); also the oldest `ts` the
    # ingest API accepts.
    pitcrew_throughput_raw_days: int = Field(default=14, ge=1, le=3650)
    # Minutes a plan (a Confirm button) stays valid: its quota check and prices were true when it was made.
    pitcrew_plan_ttl_minutes: int = Field(default=30, ge=1, le=7 * 24 * 60)
    # Seconds between posts to one Slack channel: Slack's pace for chat.postMessage. The sandbox's tests use 0.
    pitcrew_post_interval: float = Field(default=1.0, ge=0, le=60)
    # "json": one JSON object per log line, for log collectors (bot.logs.configure_logging).
    pitcrew_log_format: Literal["text", "json"] = "text"

    @field_validator("slack_api_url")
    @classmethod
    def _trailing_slash(cls, value: str) -> str:
        # slack_sdk joins base_url and method name by plain concatenation.
        return value if value.endswith("/") else value + "/"


@cache
def known_instance_types() -> frozenset[str]:
    """Instance types without the `ml.` prefix, from the installed botocore models (EC2 and HyperPod)."""
    import botocore.session

    session = botocore.session.get_session()
    ec2: list[str] = getattr(session.get_service_model("ec2").shape_for("InstanceType"), "enum", [])
    hyperpod: list[str] = getattr(session.get_service_model("sagemaker").shape_for("ClusterInstanceType"), "enum", [])
    return frozenset(ec2) | frozenset(t.removeprefix("ml.") for t in hyperpod)


def normalize_instance_type(instance_type: str) -> str:
    """`ml.p5.48xlarge` and `p5.48xlarge` name the same hardware; quotas count both."""
    return instance_type.removeprefix("ml.")


# Accelerator families (P, G, Trn, Inf; DL for Gaudi): an org's quota limits them, listed or not.
ACCELERATOR_FAMILY = re.compile(r"^(p|g|trn|inf|dl)\d")


def is_accelerator_type(instance_type: str) -> bool:
    """`p5.48xlarge`, `ml.g5.12xlarge`, `trn1n.32xlarge`, `inf2.xlarge`... (not `m5.*`, `c5.*`: head, controller
    and login nodes)."""
    return bool(ACCELERATOR_FAMILY.match(normalize_instance_type(instance_type)))


def _check_role(value: Any) -> Any:
    if value not in ("operator", "viewer"):
        raise ValueError("role must be operator or viewer")
    return value


def _check_timezone(value: str) -> str:
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {value!r} (use an IANA name such as Asia/Tokyo)") from None
    return value


MemberRole = Annotated[Literal["operator", "viewer"], BeforeValidator(_check_role)]
UserId = Annotated[str, Field(pattern=USER_ID_PATTERN)]
ChannelId = Annotated[str, Field(pattern=CHANNEL_ID_PATTERN)]
TeamId = Annotated[str, Field(pattern=TEAM_ID_PATTERN)]  # a Slack workspace (T...) or Enterprise Grid org (E...)
TimeZoneName = Annotated[str, AfterValidator(_check_timezone)]
# A launch default: a string (up to a long ARN or URI) or a whole number, as a template parameter takes it.
LaunchValue = Annotated[str, Field(min_length=1, max_length=2048)] | Annotated[int, Field(strict=True, ge=0)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DigestConfig(_Strict):
    schedule: str = "mon 09:00"

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: str) -> str:
        match = re.fullmatch(r"(\w{3}) (\d{1,2}):(\d{2})", value.strip().lower())
        if not match or match[1] not in WEEKDAYS or int(match[2]) > 23 or int(match[3]) > 59:
            raise ValueError(f"schedule {value!r} must be a weekday and a time, e.g. 'mon 09:00'")
        return value.strip().lower()


class MonitorConfig(_Strict):
    node_sweep_seconds: int = Field(default=60, ge=10, le=3600)
    event_queue_url: str | None = Field(default=None, pattern=r"^https?://")


class StallConfig(_Strict):
    stall_after_minutes: float = Field(default=10, gt=0, le=24 * 60)
    drop_ratio: float = Field(default=0.6, gt=0, lt=1)
    sustain_minutes: float = Field(default=5, gt=0, le=24 * 60)


class ThroughputSource(_Strict):
    namespace: str = Field(min_length=1)
    metric: str = Field(min_length=1)
    dimensions: dict[str, str] = Field(default_factory=dict)


class MetricsConfig(_Strict):
    """Where an org's per-node GPU and EFA metrics are (its cluster's Prometheus), and how its labels are named.

    `sigv4: true` for Amazon Managed Service for Prometheus: requests are signed with the org's role and region."""

    prometheus_url: str = Field(pattern=r"^https?://\S+$")
    sigv4: bool = False
    node_label: str = Field(default="instance_id", pattern=r"^[a-zA-Z_][a-zA-Z0-9_]*$")
    cluster_label: str = Field(default="cluster", pattern=r"^[a-zA-Z_][a-zA-Z0-9_]*$")


class OrgAws(_Strict):
    account_id: str = Field(pattern=r"^\d{12}$")
    region: str = Field(pattern=r"^[a-z]{2}(-[a-z]+)+-\d$")
    role_arn: str | None = Field(default=None, pattern=r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$")
    external_id: str | None = Field(default=None, min_length=2, max_length=1224)
    parallelcluster_api: str | None = Field(default=None, pattern=r"^https?://\S+$")

    @model_validator(mode="after")
    def _role_in_account(self) -> OrgAws:
        if self.role_arn and self.role_arn.split(":")[4] != self.account_id:
            raise ValueError(f"role_arn is in account {self.role_arn.split(':')[4]}, not {self.account_id}")
        return self


class OrgConfig(_Strict):
    id: str = Field(pattern=ORG_ID_PATTERN)
    name: str = Field(min_length=1, max_length=80)
    channel: ChannelId
    members: dict[UserId, MemberRole] = Field(default_factory=dict)
    aws: OrgAws
    quota: dict[str, Annotated[int, Field(ge=0)]] = Field(default_factory=dict)
    throughput: ThroughputSource | None = None
    stall: StallConfig | None = None
    metrics: MetricsConfig | None = None
    # Idle accelerators (bot.monitor.idle): hours a cluster's GPU/Trainium nodes may run no job before one
    # notice says what they cost; 0 or null opts out. Left unset, an org that cannot report jobs (no
    # `throughput` source and no ingest token) gets none: its clusters would always look idle.
    idle_after_hours: float | None = Field(default=2, ge=0, le=24 * 30)
    # Minutes an alert may stay unacknowledged before it is posted again in the coordination channel,
    # mentioning the org's operators (bot.alerts.escalation); 0 or null: never.
    escalate_after_minutes: float | None = Field(default=30, ge=0, le=7 * 24 * 60)
    # Launch defaults (`/cluster launch TEMPLATE NAME` and the launch form): template parameter name -> value,
    # used by every template that declares the parameter; `--param` overrides. The names are checked
    # against the templates' parameters by `pitcrew check-config` (bot.clusters.templates.check_launch_defaults).
    launch: dict[Annotated[str, Field(pattern=LAUNCH_PARAMETER_PATTERN)], LaunchValue] = Field(default_factory=dict)
    # Slack Connect: the org's own workspace(s). When listed, its members are accepted only from these teams or
    # from the workspace Pitcrew is installed in; the same user id from any other team is nobody (bot.access).
    slack_teams: list[TeamId] = Field(default_factory=list)

    @field_validator("quota")
    @classmethod
    def _quota_types(cls, value: dict[str, int]) -> dict[str, int]:
        known = known_instance_types()
        unknown = [t for t in value if normalize_instance_type(t) not in known]
        if unknown:
            raise ValueError(", ".join(f"unknown instance type {t!r}" for t in unknown))
        return value

    def quota_for(self, instance_type: str) -> int | None:
        """Allowed instances of a type, or None where the type is not limited: an accelerator type the quota
        does not list is allowed 0 (a gap in the quota is no blank cheque); other types (controller, head and
        login nodes) are not limited."""
        if self.quota_lists(instance_type):
            wanted = normalize_instance_type(instance_type)
            return next(n for t, n in self.quota.items() if normalize_instance_type(t) == wanted)
        return 0 if is_accelerator_type(instance_type) else None

    def quota_lists(self, instance_type: str) -> bool:
        """Whether the org's quota names this type (with or without `ml.`)."""
        wanted = normalize_instance_type(instance_type)
        return any(normalize_instance_type(listed) == wanted for listed in self.quota)


class ApprovalsConfig(_Strict):
    """Which changes wait for a second person (bot.approvals): every key optional; without the block nothing does."""

    delete: bool = Field(default=False, strict=True)  # every cluster delete
    launch_over_usd_per_day: float | None = Field(default=None, ge=0)  # a launch estimated above this per day
    nodes_over: int | None = Field(default=None, ge=0, strict=True)  # a launch or scale past this in one group
    replace_or_reboot_over: int | None = Field(default=None, ge=0, strict=True)  # more nodes than this at once
    approvers: Literal["admins", "operators"] = "admins"  # operators: another operator of the org, or an admin
    count: int = Field(default=1, ge=1, le=10, strict=True)  # distinct approvers needed; any reject ends it
    ttl_minutes: int = Field(default=60, ge=1, le=7 * 24 * 60, strict=True)  # then it expires and nothing runs


class ProgramConfig(_Strict):
    name: str = Field(min_length=1, max_length=120)
    timezone: TimeZoneName = "UTC"
    coordination_channel: ChannelId
    admins: list[UserId] = Field(default_factory=list)
    digest: DigestConfig = DigestConfig()
    monitor: MonitorConfig = MonitorConfig()
    stall: StallConfig = StallConfig()
    orgs: list[OrgConfig] = Field(default_factory=list)
    approvals: ApprovalsConfig | None = None

    @model_validator(mode="after")
    def _unique(self) -> ProgramConfig:
        seen_ids: set[str] = set()
        seen_channels = {self.coordination_channel: "coordination_channel"}
        problems = []
        for index, org in enumerate(self.orgs):
            if org.id in seen_ids:
                problems.append(f"orgs[{index}].id: {org.id!r} is used by another org")
            seen_ids.add(org.id)
            if org.channel in seen_channels:
                problems.append(f"orgs[{index}].channel: {org.channel} is already {seen_channels[org.channel]}")
            seen_channels[org.channel] = f"the channel of {org.id}"
        rules = self.approvals
        if rules is not None and rules.approvers == "admins" and rules.count > len(self.admins):
            problems.append(
                f"approvals.count: {rules.count} approvers needed but the program has {len(self.admins)} admins "
                "(approvers: admins); lower count, add admins, or use approvers: operators"
            )
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def org(self, org_id: str) -> OrgConfig | None:
        return next((org for org in self.orgs if org.id == org_id), None)

    def org_by_channel(self, channel_id: str) -> OrgConfig | None:
        return next((org for org in self.orgs if org.channel == channel_id), None)

    def with_aws(self, changes: Callable[[OrgConfig], dict[str, Any]]) -> ProgramConfig:
        """A copy in which each org's `aws` block is updated with what `changes(org)` returns ({}: as is).
        The sandbox points ParallelCluster APIs at its emulator this way; tests move orgs between accounts."""
        orgs = []
        for org in self.orgs:
            update = changes(org)
            orgs.append(org.model_copy(update={"aws": org.aws.model_copy(update=update)}) if update else org)
        return self.model_copy(update={"orgs": orgs})


@dataclass(frozen=True)
class ConfigProblem:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ProgramFileError(Exception):
    """A program file that cannot be used; carries every problem found, each with its path."""

    def __init__(self, source: str, problems: list[ConfigProblem]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(f"{source}: " + "; ".join(map(str, problems)))


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.startswith(("function-after", "function-before", "literal")):
            continue  # pydantic's validator wrappers are not part of the file's shape
        else:
            out += f".{part}" if out else part
    return out


def _problems(error: ValidationError) -> list[ConfigProblem]:
    problems = []
    for item in error.errors(include_url=False):
        loc = tuple(item["loc"])
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            *parent, key = loc
            problems.append(ConfigProblem(_path(tuple(parent)), f"unknown key {key!r}"))
            continue
        if item["type"] == "string_pattern_mismatch":
            message = f"{item['input']!r} is not valid ({_PATTERN_HINTS.get(str(loc[-1]), message)})"
        if item["type"] == "string_type" and str(loc[-1]) in _PATTERN_HINTS:
            message = f"must be a quoted string ({_PATTERN_HINTS[str(loc[-1])]})"
        if item["type"] == "missing":
            message = "required key is missing"
        if ";" in message and not loc:
            problems.extend(ConfigProblem(*part.split(": ", 1)) for part in message.split("; "))
            continue
        problems.append(ConfigProblem(_path(loc), message))
    return problems


_PATTERN_HINTS = {
    "id": "lowercase letters, digits and dashes, e.g. kumo-labs",
    "channel": "a Slack channel ID such as C0KUMOLAB",
    "coordination_channel": "a Slack channel ID such as C0PROGRAM",
    "account_id": "12 digits, quoted",
    "region": "an AWS region such as us-east-1",
    "role_arn": "arn:aws:iam::<account>:role/<name>",
    "parallelcluster_api": "the API's https:// invoke URL",
    "event_queue_url": "an SQS queue URL",
}


def parse_program(text: str, *, source: str = "program.yml") -> ProgramConfig:
    """Parse and validate a program file's text; raise ProgramFileError naming every problem.

    The same text gives the same (immutable) program without parsing it again: the sandbox, the CLI and the tests
    read the same file at every start, and its YAML was a tenth of a start. Refused text is parsed every time."""
    return _parse_program(text, source)


@lru_cache(maxsize=8)
def _parse_program(text: str, source: str) -> ProgramConfig:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ProgramFileError(source, [ConfigProblem(where, f"not valid YAML: {exc}")]) from None
    if not isinstance(data, dict):
        raise ProgramFileError(source, [ConfigProblem("", "the file must be a mapping with name, orgs, ...")])
    try:
        return ProgramConfig.model_validate(data)
    except ValidationError as exc:
        raise ProgramFileError(source, _problems(exc)) from None


def load_program(path: Path) -> ProgramConfig:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ProgramFileError(str(path), [ConfigProblem("", f"cannot read the file: {exc.strerror}")]) from None
    return parse_program(text, source=str(path))


def summary(program: ProgramConfig) -> str:
    members = sum(len(org.members) for org in program.orgs)
    accounts = len({org.aws.account_id for org in program.orgs})
    return (
        f"{program.name}: {len(program.orgs)} orgs in {accounts} AWS accounts, {members} members, "
        f"{len(program.admins)} admins, timezone {program.timezone}, digest {program.digest.schedule}"
    )
