"""`pitcrew onboard ORG`: the CloudFormation template an org deploys in its account, and its quick-create link. Pure.

The template holds one IAM role that trusts Pitcrew's principal only with the org's external id (the
`ExternalId` parameter, defaulting to the program file's), with the tier's policies from bot.iam.policy, and
outputs `RoleArn`. Where the program file has an events queue, it also forwards HyperPod's events: a rule on the
org's default event bus sends them to Pitcrew's bus (docs/eventbridge.md), through a role EventBridge assumes.

Twelve independent companies are not one AWS Organization, so StackSets do not apply: each org's admin opens
the quick-create link, which needs the template in S3 (CloudFormation reads templateURL from S3 only).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote, urlencode

import yaml

from bot.config import OrgConfig, ProgramConfig
from bot.iam.policy import TIERS, Tier, documents, queue
from bot.monitor.events import DETAIL_TYPES, SOURCE

PRINCIPAL = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:(?:root|user/[\w+=,.@/-]+|role/[\w+=,.@/-]+)$")
# CloudFormation reads templates from S3 only: virtual-hosted or path-style https URLs.
S3_URL = re.compile(
    r"^https://(?:[a-z0-9.-]+\.s3[.-](?:[a-z0-9-]+\.)?amazonaws\.com(?:\.cn)?/\S+"
    r"|s3[.-](?:[a-z0-9-]+\.)?amazonaws\.com(?:\.cn)?/[a-z0-9.-]+/\S+)$"
)
EVENT_BUS = "pitcrew-hyperpod"  # Pitcrew's bus the orgs forward to (docs/eventbridge.md)
DEFAULT_ROLE_NAME = "PitcrewOps"
SESSION_SECONDS = 3600  # bot.clusters.accounts asks for one-hour sessions


class OnboardError(ValueError):
    """One line saying what is wrong with the request and how to give it right."""


def check_principal(principal: str) -> str:
    if PRINCIPAL.match(principal):
        return principal
    if principal.startswith("arn:aws:sts::") and ":assumed-role/" in principal:
        raise OnboardError(
            f"--principal {principal!r} is a session, not a principal: give the role's ARN "
            "(arn:aws:iam::ACCOUNT:role/NAME) that Pitcrew runs as"
        )
    raise OnboardError(
        f"--principal {principal!r} is not an IAM ARN: give the role or user Pitcrew runs as, "
        "e.g. arn:aws:iam::123456789012:role/pitcrew"
    )


def check_tier(tier: str) -> Tier:
    if tier not in TIERS:
        raise OnboardError(f"--tier {tier!r} is not a tier: give read (look only) or operate (reads and changes)")
    return tier  # type: ignore[return-value]


def check_org(program: ProgramConfig, org_id: str) -> OrgConfig:
    org = program.org(org_id)
    if org is None:
        known = ", ".join(o.id for o in program.orgs) or "none"
        raise OnboardError(f"unknown org {org_id!r}: the program file lists {known}")
    if not org.aws.external_id:
        raise OnboardError(
            f"{org_id} has no aws.external_id in the program file: add one (a random string only Pitcrew and the "
            "org know), since the role trusts Pitcrew only with it"
        )
    return org


def role_name(org: OrgConfig) -> tuple[str, str]:
    """(path, name) of the role: as the program file's role_arn names it, else PitcrewOps at /."""
    if not org.aws.role_arn:
        return "/", DEFAULT_ROLE_NAME
    full = org.aws.role_arn.split(":role/", 1)[1]
    path, _, name = full.rpartition("/")
    return (f"/{path}/" if path else "/"), name


def _sub(value: Any) -> Any:
    """Resource strings that name the stack's partition or account become Fn::Sub."""
    if isinstance(value, str) and "${" in value:
        return {"Fn::Sub": value}
    if isinstance(value, list):
        return [_sub(item) for item in value]
    if isinstance(value, dict):
        return {key: _sub(item) for key, item in value.items()}
    return value


def _policies(org: OrgConfig, tier: Tier) -> list[dict[str, Any]]:
    docs = documents(org, tier, partition="${AWS::Partition}", account="${AWS::AccountId}")
    return [
        {"PolicyName": name, "PolicyDocument": {**doc, "Statement": [_sub(s) for s in doc["Statement"]]}}
        for name, doc in docs.items()
    ]


def _event_bus_arn(program: ProgramConfig, org: OrgConfig) -> str | None:
    found = queue(program.monitor.event_queue_url or "")
    if found is None:
        return None
    return f"arn:aws:events:{found.region or org.aws.region}:{found.account}:event-bus/{EVENT_BUS}"


def template(program: ProgramConfig, org: OrgConfig, *, principal: str, tier: Tier) -> dict[str, Any]:
    """The CloudFormation template, as data."""
    path, name = role_name(org)
    assert org.aws.external_id  # check_org
    resources: dict[str, Any] = {
        "PitcrewRole": {
            "Type": "AWS::IAM::Role",
            "Properties": {
                "RoleName": name,
                "Path": path,
                "Description": f"Pitcrew ({program.name}) in {org.id}: {tier} tier"[:1000],
                "MaxSessionDuration": SESSION_SECONDS,
                "AssumeRolePolicyDocument": {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Sid": "PitcrewWithExternalId",
                            "Effect": "Allow",
                            "Principal": {"AWS": principal},
                            "Action": "sts:AssumeRole",
                            "Condition": {"StringEquals": {"sts:ExternalId": {"Ref": "ExternalId"}}},
                        }
                    ],
                },
                "Policies": _policies(org, tier),
                "Tags": [{"Key": "pitcrew:org", "Value": org.id}, {"Key": "pitcrew:tier", "Value": tier}],
            },
        }
    }
    parameters: dict[str, Any] = {
        "ExternalId": {
            "Type": "String",
            "Default": org.aws.external_id,
            "MinLength": 2,
            "MaxLength": 1224,
            "AllowedPattern": r"[\w+=,.@:/-]*",
            "Description": "The external id Pitcrew assumes the role with (aws.external_id in its program file)",
        }
    }
    bus = _event_bus_arn(program, org)
    if bus is not None:
        parameters["PitcrewEventBusArn"] = {
            "Type": "String",
            "Default": bus,
            "AllowedPattern": r"arn:aws[a-z-]*:events:[a-z0-9-]+:\d{12}:event-bus/[\w.-]+",
            "Description": "Pitcrew's event bus that forwards to its events queue (docs/eventbridge.md)",
        }
        resources["EventForwarderRole"] = {
            "Type": "AWS::IAM::Role",
            "Properties": {
                "Description": f"EventBridge forwards {org.id}'s HyperPod events to Pitcrew's bus",
                "AssumeRolePolicyDocument": {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": "events.amazonaws.com"},
                            "Action": "sts:AssumeRole",
                            "Condition": {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}},
                        }
                    ],
                },
                "Policies": [
                    {
                        "PolicyName": "pitcrew-hyperpod-bus",
                        "PolicyDocument": {
                            "Version": "2012-10-17",
                            "Statement": [
                                {
                                    "Effect": "Allow",
                                    "Action": "events:PutEvents",
                                    "Resource": {"Ref": "PitcrewEventBusArn"},
                                }
                            ],
                        },
                    }
                ],
            },
        }
        resources["HyperPodEventsRule"] = {
            "Type": "AWS::Events::Rule",
            "Properties": {
                "Name": "pitcrew-hyperpod",
                "Description": "SageMaker HyperPod node health and cluster state events, to Pitcrew",
                "EventPattern": {"source": [SOURCE], "detail-type": list(DETAIL_TYPES)},
                "State": "ENABLED",
                "Targets": [
                    {
                        "Id": "pitcrew",
                        "Arn": {"Ref": "PitcrewEventBusArn"},
                        "RoleArn": {"Fn::GetAtt": ["EventForwarderRole", "Arn"]},
                    }
                ],
            },
        }
    return {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": f"Pitcrew's role in {org.id} ({org.name}), {tier} tier: what Pitcrew may read"
        + (" and change" if tier == "operate" else "")
        + " in this account",
        "Parameters": parameters,
        "Rules": {
            "OrgAccountAndRegion": {
                "Assertions": [
                    {
                        "Assert": {"Fn::Equals": [{"Ref": "AWS::AccountId"}, org.aws.account_id]},
                        "AssertDescription": f"Deploy this stack in {org.id}'s account, {org.aws.account_id}",
                    },
                    {
                        "Assert": {"Fn::Equals": [{"Ref": "AWS::Region"}, org.aws.region]},
                        "AssertDescription": f"Deploy this stack in {org.id}'s region, {org.aws.region}, where its "
                        "clusters (and their events) are",
                    },
                ]
            }
        },
        "Resources": resources,
        "Outputs": {
            "RoleArn": {
                "Description": f"Put this in the program file as {org.id}'s aws.role_arn",
                "Value": {"Fn::GetAtt": ["PitcrewRole", "Arn"]},
            }
        },
    }


def template_yaml(program: ProgramConfig, org: OrgConfig, *, principal: str, tier: Tier) -> str:
    body = yaml.safe_dump(
        template(program, org, principal=principal, tier=tier), sort_keys=False, width=120, allow_unicode=True
    )
    head = (
        f"# Pitcrew's role in {org.id}, {tier} tier: `pitcrew onboard {org.id} --principal {principal} "
        f"--tier {tier}`.\n"
        f"# Deploy in account {org.aws.account_id}, region {org.aws.region} (acknowledge that it creates IAM "
        "resources with custom names), then give the RoleArn output to Pitcrew's program admin.\n"
    )
    return head + body


def stack_name(org: OrgConfig) -> str:
    return f"pitcrew-{org.id}"[:128]


def quick_create_link(org: OrgConfig, *, template_url: str, external_id: str | None = None) -> str:
    """The console link that opens a prefilled stack: template, stack name and ExternalId."""
    if not S3_URL.match(template_url):
        raise OnboardError(
            f"--template-url {template_url!r} is not an S3 https URL: CloudFormation reads templates from S3 only "
            "(upload the template, e.g. `aws s3 cp kumo.yaml s3://BUCKET/pitcrew/`, and give "
            "https://BUCKET.s3.REGION.amazonaws.com/pitcrew/kumo.yaml)"
        )
    region = org.aws.region
    query = urlencode(
        {
            "templateURL": template_url,
            "stackName": stack_name(org),
            "param_ExternalId": external_id or org.aws.external_id or "",
        },
        quote_via=quote,
        safe="",
    )
    return f"https://{region}.console.aws.amazon.com/cloudformation/home?region={region}#/stacks/quickcreate?{query}"
