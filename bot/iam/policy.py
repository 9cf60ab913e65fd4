"""Least-privilege IAM policies generated from the table (bot.iam.actions), per org and tier. Pure.

- `read`: exactly the reads the org's program-file entries need.
- `operate`: the reads and the changes (launch, scale, reboot, replace, delete, the compute fleet); `iam:PassRole`
  only on the execution roles the org's launch defaults name, and only to SageMaker.

Resources are the org's account and region wherever the action takes a resource; the rest ("*") are held to the
org's region with `aws:RequestedRegion`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, get_args

from bot.config import OrgConfig, ProgramConfig
from bot.iam.actions import PERMISSIONS, Access, Needs, Permission, Principal

Tier = Literal["read", "operate"]
TIERS: tuple[str, ...] = get_args(Tier)
GLOBAL_SERVICES = frozenset({"iam", "sts"})  # no region to hold them to

# https://{api id}.execute-api.{region}.amazonaws.com/{stage}: the invoke URL of a REST API (ParallelCluster's)
_INVOKE_URL = re.compile(
    r"^https://(?P<api>[a-z0-9]+)\.execute-api\.[a-z0-9-]+\.amazonaws\.com(?:\.cn)?/(?P<stage>[^/?#]+)"
)
_WORKSPACE = re.compile(r"/workspaces/(?P<workspace>ws-[A-Za-z0-9-]+)")
_ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$")
_QUEUE_URL = re.compile(r"^https?://(?P<host>[^/]+)/(?P<account>\d{12})/(?P<name>[^/?#]+)$")
_REGION = re.compile(r"(?:^|\.)(?P<region>[a-z]{2}(?:-[a-z]+)+-\d)\.")


@dataclass(frozen=True)
class Scope:
    """What the placeholders of the table's resource patterns stand for, for one org."""

    partition: str
    region: str
    account: str
    api: str = "*"
    stage: str = "*"
    workspace: str = "*"
    execution_roles: tuple[str, ...] = ()

    def render(self, pattern: str) -> list[str]:
        if pattern == "{execution_role}":
            return list(self.execution_roles)
        return [
            pattern.format(
                partition=self.partition,
                region=self.region,
                account=self.account,
                api=self.api,
                stage=self.stage,
                workspace=self.workspace,
            )
        ]


def execution_roles(org: OrgConfig) -> tuple[str, ...]:
    """The roles the org's launch defaults name for instances to run as (`execution_role_arn`, or any other
    launch parameter that is a role ARN): the only roles its Pitcrew role may pass to SageMaker."""
    found = [
        str(value)
        for key, value in sorted(org.launch.items())
        if key.endswith("role_arn") and isinstance(value, str) and _ROLE_ARN.match(value)
    ]
    return tuple(dict.fromkeys(found))


def scope(org: OrgConfig, *, partition: str = "aws", account: str | None = None) -> Scope:
    api_url = org.aws.parallelcluster_api or ""
    api = _INVOKE_URL.match(api_url)
    metrics_url = org.metrics.prometheus_url if org.metrics is not None else ""
    workspace = _WORKSPACE.search(metrics_url)
    return Scope(
        partition=partition,
        region=org.aws.region,
        account=account or org.aws.account_id,
        api=api["api"] if api else "*",
        stage=api["stage"] if api else "*",
        workspace=workspace["workspace"] if workspace else "*",
        execution_roles=execution_roles(org),
    )


def needs(org: OrgConfig) -> frozenset[Needs]:
    """The program-file entries of an org that call for permissions."""
    found = {Needs.ALWAYS}
    if org.aws.parallelcluster_api:
        found.add(Needs.PCLUSTER_API)
    if org.throughput is not None:
        found.add(Needs.THROUGHPUT)
    if org.metrics is not None and org.metrics.sigv4:
        found.add(Needs.SIGV4_METRICS)
    if execution_roles(org):
        found.add(Needs.LAUNCH_ROLE)
    return frozenset(found)


def permissions(org: OrgConfig, tier: Tier) -> list[Permission]:
    """The table's rows the org's role gets in this tier."""
    wanted = needs(org)
    return [
        p
        for p in PERMISSIONS
        if p.principal is Principal.ORG_ROLE and p.needs in wanted and (p.access is Access.READ or tier == "operate")
    ]


def _statement(sid: str, rows: list[Permission], scope: Scope) -> dict[str, Any]:
    actions = list(dict.fromkeys(p.action for p in rows))
    resources = list(dict.fromkeys(r for p in rows for r in scope.render(p.resource)))
    if len({p.resource for p in rows}) > 1 and len(actions) > 1:
        # One statement grants every action on every resource: only sound with one of either.
        raise ValueError(f"group {sid} mixes actions and resources; split it in bot.iam.actions")
    conditions: dict[str, dict[str, str]] = {}
    for operator, key, value in sorted({c for p in rows for c in p.condition}):
        conditions.setdefault(operator, {})[key] = value
    if resources == ["*"] and not {p.service for p in rows} & GLOBAL_SERVICES:
        conditions.setdefault("StringEquals", {})["aws:RequestedRegion"] = scope.region
    statement: dict[str, Any] = {
        "Sid": sid,
        "Effect": "Allow",
        "Action": actions[0] if len(actions) == 1 else actions,
        "Resource": resources[0] if len(resources) == 1 else resources,
    }
    if conditions:
        statement["Condition"] = conditions
    return statement


def statements(rows: Iterable[Permission], scope: Scope) -> list[dict[str, Any]]:
    """The rows as policy statements: one per (access, group), in table order."""
    groups: dict[tuple[Access, str], list[Permission]] = {}
    for row in rows:
        groups.setdefault((row.access, row.group), []).append(row)
    return [
        _statement(f"{access.value.title()}{group}", members, scope)
        for (access, group), members in groups.items()
        if any(scope.render(p.resource) for p in members)
    ]


def documents(org: OrgConfig, tier: Tier, *, partition: str = "aws", account: str | None = None) -> dict[str, Any]:
    """The role's policy documents by name: `pitcrew-read`, and for operate `pitcrew-operate` (the changes)."""
    the_scope = scope(org, partition=partition, account=account)
    rows = permissions(org, tier)
    docs = {"pitcrew-read": [p for p in rows if p.access is Access.READ]}
    if tier == "operate":
        docs["pitcrew-operate"] = [p for p in rows if p.access is Access.CHANGE]
    return {
        name: {"Version": "2012-10-17", "Statement": statements(members, the_scope)}
        for name, members in docs.items()
        if members
    }


@dataclass(frozen=True)
class Queue:
    region: str | None  # None where the URL's host does not say it (an emulator's)
    account: str
    name: str

    def arn(self, partition: str = "aws", region: str | None = None) -> str:
        return f"arn:{partition}:sqs:{self.region or region or '*'}:{self.account}:{self.name}"


def queue(queue_url: str) -> Queue | None:
    """Region, account and name of an SQS queue URL (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME)."""
    match = _QUEUE_URL.match(queue_url)
    if match is None:
        return None
    region = _REGION.search(match["host"])
    return Queue(region["region"] if region else None, match["account"], match["name"])


def pitcrew_document(program: ProgramConfig, partition: str = "aws") -> dict[str, Any]:
    """What Pitcrew's own credentials need: assuming each org's role, and the events queue if there is one."""
    roles = [org.aws.role_arn for org in program.orgs if org.aws.role_arn]
    the_queue = queue(program.monitor.event_queue_url or "")
    found: list[dict[str, Any]] = []
    if roles:
        rows = [p for p in PERMISSIONS if p.principal is Principal.PITCREW and p.group == "OrgRoles"]
        found.append(
            {"Sid": "AssumeOrgRoles", "Effect": "Allow", "Action": [p.action for p in rows], "Resource": roles}
        )
    if the_queue:
        rows = [p for p in PERMISSIONS if p.principal is Principal.PITCREW and p.needs is Needs.EVENT_QUEUE]
        arn = the_queue.arn(partition)
        found.append({"Sid": "EventQueue", "Effect": "Allow", "Action": [p.action for p in rows], "Resource": arn})
    return {"Version": "2012-10-17", "Statement": found}
