"""`pitcrew onboard`: the org's CloudFormation template passes cfn-lint, its policies are exactly the tier's rows of
the table scoped to the org, its link opens a prefilled stack, and bad input is one line."""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import yaml

from bot.cli import main
from bot.config import ProgramConfig, load_program
from bot.iam import policy
from bot.iam.actions import PERMISSIONS, Access, Needs, Principal
from bot.iam.onboard import OnboardError, quick_create_link, template, template_yaml
from sandbox.world import EXAMPLE_PROGRAM

PRINCIPAL = "arn:aws:iam::123456789012:role/pitcrew"
QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/pitcrew-events"
AMP = "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0123abcd-4567-89ef-0123-456789abcdef/"


@pytest.fixture(scope="module")
def program() -> ProgramConfig:
    return load_program(EXAMPLE_PROGRAM)


@pytest.fixture(scope="module")
def everything(program: ProgramConfig) -> ProgramConfig:
    """Every optional part: an events queue, Managed Prometheus for sakura-ai, and its ParallelCluster API."""
    from bot.config import MetricsConfig, MonitorConfig

    sakura = program.org("sakura-ai")
    assert sakura is not None
    api = "https://a1b2c3d4e5.execute-api.us-west-2.amazonaws.com/prod"
    changed = sakura.model_copy(
        update={
            "metrics": MetricsConfig(prometheus_url=AMP, sigv4=True),
            "aws": sakura.aws.model_copy(update={"parallelcluster_api": api}),
        }
    )
    orgs = [changed if org.id == "sakura-ai" else org for org in program.orgs]
    return program.model_copy(update={"orgs": orgs, "monitor": MonitorConfig(event_queue_url=QUEUE)})


def _lint(text: str, region: str) -> list[str]:
    from cfnlint.api import ManualArgs, lint

    return [str(match) for match in lint(text, config=ManualArgs(regions=[region]))]


@pytest.mark.parametrize("tier", ["read", "operate"])
@pytest.mark.parametrize(("org_id", "which"), [("kumo-labs", "example"), ("sakura-ai", "everything")])
def test_the_template_passes_cfn_lint(
    program: ProgramConfig, everything: ProgramConfig, org_id: str, which: str, tier: policy.Tier
) -> None:
    chosen = program if which == "example" else everything
    org = chosen.org(org_id)
    assert org is not None
    text = template_yaml(chosen, org, principal=PRINCIPAL, tier=tier)
    # Warnings too: cfn-lint's W3037 knows every IAM action name, so a misspelt action fails here.
    assert _lint(text, org.aws.region) == []


def _policy_statements(doc: dict[str, Any]) -> list[dict[str, Any]]:
    role = doc["Resources"]["PitcrewRole"]["Properties"]
    return [s for p in role["Policies"] for s in p["PolicyDocument"]["Statement"]]


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _resources(statement: dict[str, Any]) -> list[str]:
    return [r["Fn::Sub"] if isinstance(r, dict) else r for r in _listed(statement["Resource"])]


@pytest.mark.parametrize("tier", ["read", "operate"])
def test_each_tier_grants_exactly_its_rows_of_the_table_scoped_to_the_org(
    everything: ProgramConfig, tier: policy.Tier
) -> None:
    for org in everything.orgs:
        statements = _policy_statements(template(everything, org, principal=PRINCIPAL, tier=tier))
        granted = {(a, r) for s in statements for a in _listed(s["Action"]) for r in _resources(s)}
        wanted = policy.needs(org)
        rows = [
            p
            for p in PERMISSIONS
            if p.principal is Principal.ORG_ROLE
            and p.needs in wanted
            and (tier == "operate" or p.access is Access.READ)
        ]
        assert {a for a, _ in granted} == {p.action for p in rows}, org.id
        assert tier == "operate" or not any(p.access is Access.CHANGE for p in rows)
        for statement in statements:
            for resource in _resources(statement):
                if resource == "*":  # only where the action takes no resource, and held to the region
                    assert statement["Condition"]["StringEquals"]["aws:RequestedRegion"] == org.aws.region
                    assert all(
                        next(p for p in PERMISSIONS if p.action == a).why_unscoped for a in _listed(statement["Action"])
                    )
                elif resource.startswith("arn:aws:iam::"):  # PassRole: the launch defaults' execution role only
                    assert resource == org.launch["execution_role_arn"]
                    assert statement["Condition"] == {
                        "StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}
                    }
                else:
                    assert f":{org.aws.region}:${{AWS::AccountId}}:" in resource, resource


def test_operate_passes_only_the_execution_roles_of_the_launch_defaults(program: ProgramConfig) -> None:
    kumo = program.org("kumo-labs")
    assert kumo is not None
    bare = kumo.model_copy(update={"launch": {}})
    passes = [
        s
        for s in _policy_statements(template(program, bare, principal=PRINCIPAL, tier="operate"))
        if "iam:PassRole" in _listed(s["Action"])
    ]
    assert passes == []  # no execution role named: nothing may be passed
    assert Needs.LAUNCH_ROLE not in policy.needs(bare)


def test_the_trust_policy_names_the_principal_with_the_external_id_parameter(program: ProgramConfig) -> None:
    org = program.org("kumo-labs")
    assert org is not None
    doc = yaml.safe_load(template_yaml(program, org, principal=PRINCIPAL, tier="read"))
    assert doc["Parameters"]["ExternalId"]["Default"] == "pitcrew-kumo-labs"
    trust = doc["Resources"]["PitcrewRole"]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust == [
        {
            "Sid": "PitcrewWithExternalId",
            "Effect": "Allow",
            "Principal": {"AWS": PRINCIPAL},
            "Action": "sts:AssumeRole",
            "Condition": {"StringEquals": {"sts:ExternalId": {"Ref": "ExternalId"}}},
        }
    ]
    assert doc["Resources"]["PitcrewRole"]["Properties"]["RoleName"] == "PitcrewOps"  # as role_arn names it
    assert doc["Outputs"]["RoleArn"]["Value"] == {"Fn::GetAtt": ["PitcrewRole", "Arn"]}
    assert "HyperPodEventsRule" not in doc["Resources"]  # the example program has no events queue


def test_optional_parts_follow_the_program_file(everything: ProgramConfig) -> None:
    sakura = everything.org("sakura-ai")
    assert sakura is not None
    doc = template(everything, sakura, principal=PRINCIPAL, tier="read")
    statements = {s["Sid"]: s for s in _policy_statements(doc)}
    assert _resources(statements["ReadManagedPrometheus"]) == [
        "arn:${AWS::Partition}:aps:us-west-2:${AWS::AccountId}:workspace/ws-0123abcd-4567-89ef-0123-456789abcdef"
    ]
    assert all(":a1b2c3d4e5/prod/GET/" in r for r in _resources(statements["ReadParallelClusterApi"]))
    rule = doc["Resources"]["HyperPodEventsRule"]["Properties"]
    assert rule["EventPattern"]["source"] == ["aws.sagemaker"]
    assert doc["Parameters"]["PitcrewEventBusArn"]["Default"] == (
        "arn:aws:events:us-east-1:123456789012:event-bus/pitcrew-hyperpod"
    )


def test_the_quick_create_link_fills_in_the_template_stack_and_external_id(program: ProgramConfig) -> None:
    org = program.org("sakura-ai")
    assert org is not None
    url = "https://pitcrew-onboarding.s3.us-east-1.amazonaws.com/orgs/sakura-ai.yaml?versionId=3&x=1"
    link = quick_create_link(org, template_url=url)
    parsed = urlparse(link)
    assert parsed.netloc == "us-west-2.console.aws.amazon.com"
    fragment, _, query = parsed.fragment.partition("?")
    assert fragment == "/stacks/quickcreate"
    assert parse_qs(query) == {
        "templateURL": [url],
        "stackName": ["pitcrew-sakura-ai"],
        "param_ExternalId": ["pitcrew-sakura-ai"],
    }
    with pytest.raises(OnboardError, match="S3"):
        quick_create_link(org, template_url="https://example.com/t.yaml")


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_command_prints_the_template_and_the_link(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PITCREW_CONFIG", str(EXAMPLE_PROGRAM))
    code, out, err = _run(["onboard", "kumo-labs", "--principal", PRINCIPAL, "--tier", "operate"], capsys)
    assert (code, err) == (0, "")
    doc = yaml.safe_load(out)
    assert doc["Parameters"]["ExternalId"]["Default"] == "pitcrew-kumo-labs"
    assert "sagemaker:UpdateCluster" in {a for s in _policy_statements(doc) for a in _listed(s["Action"])}
    code, out, err = _run(["onboard", "kumo-labs", "--principal", PRINCIPAL], capsys)
    assert code == 0 and "pitcrew-operate" not in out  # read is the default tier
    url = "https://b.s3.amazonaws.com/kumo.yaml"
    code, out, err = _run(["onboard", "kumo-labs", "--principal", PRINCIPAL, "--link", "--template-url", url], capsys)
    assert code == 0 and out.startswith("https://us-east-1.console.aws.amazon.com/cloudformation/") and err == ""


@pytest.mark.parametrize(
    ("argv", "code", "says"),
    [
        (["onboard", "nobody", "--principal", PRINCIPAL], 1, "unknown org 'nobody'"),
        (["onboard", "kumo-labs", "--principal", "pitcrew"], 2, "is not an IAM ARN"),
        (
            ["onboard", "kumo-labs", "--principal", "arn:aws:sts::123456789012:assumed-role/pitcrew/s"],
            2,
            "is a session, not a principal",
        ),
        (["onboard", "kumo-labs", "--principal", PRINCIPAL, "--tier", "admin"], 2, "--tier 'admin' is not a tier"),
        (["onboard", "kumo-labs", "--principal", PRINCIPAL, "--link"], 2, "--link needs --template-url"),
        (
            ["onboard", "kumo-labs", "--principal", PRINCIPAL, "--link", "--template-url", "http://x/t.yaml"],
            2,
            "is not an S3 https URL",
        ),
    ],
)
def test_bad_input_is_one_line_and_an_exit_code(
    argv: list[str], code: int, says: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PITCREW_CONFIG", str(EXAMPLE_PROGRAM))
    got, out, err = _run(argv, capsys)
    assert (got, out) == (code, "")
    assert says in err and len(err.strip().splitlines()) == 1, err


def test_an_org_without_an_external_id_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    text = EXAMPLE_PROGRAM.read_text().replace("      external_id: pitcrew-kumo-labs\n", "")
    (tmp_path / "program.yml").write_text(text)
    monkeypatch.setenv("PITCREW_CONFIG", str(tmp_path / "program.yml"))
    code, out, err = _run(["onboard", "kumo-labs", "--principal", PRINCIPAL], capsys)
    assert (code, out) == (1, "") and "no aws.external_id" in err


def test_statement_groups_never_widen_a_grant() -> None:
    """A group is one statement: it must hold one resource pattern, or one action (else every action would
    reach every resource)."""
    groups: dict[tuple[Access, str], list[Any]] = {}
    for p in PERMISSIONS:
        groups.setdefault((p.access, p.group), []).append(p)
    for members in groups.values():
        assert len({p.resource for p in members}) == 1 or len({p.action for p in members}) == 1
    assert fnmatch.fnmatch("GET/v3/clusters/x/instances", "GET/v3/clusters/*")  # IAM's * spans slashes too
