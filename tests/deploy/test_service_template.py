"""deploy/pitcrew-service.yaml, the CloudFormation stack that runs Pitcrew itself: it passes cfn-lint (errors,
warnings and informational checks) in the regions a program is likely to use, and it keeps the promises the
README makes about it: the task role may only assume the orgs' roles and read the events queue (exactly the
rows of bot/iam/actions.py that Pitcrew's own credentials need), /metrics is answered by the load balancer with
a 404 and reachable on the tasks only from inside the VPC, and the container runs what the Dockerfile runs."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from cfnlint.api import ManualArgs, lint_file
from cfnlint.decode import decode

from bot.iam.actions import PERMISSIONS, Principal

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "deploy" / "pitcrew-service.yaml"
DOCKERFILE = ROOT / "Dockerfile"
REGIONS = ["us-east-1", "us-west-2", "eu-west-1", "ap-northeast-1"]


def lint(path: Path) -> list[str]:
    return [str(match) for match in lint_file(path, config=ManualArgs(regions=REGIONS, include_checks=["I"]))]


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    decoded, problems = decode(str(TEMPLATE))
    assert not problems and decoded is not None, problems
    return dict(decoded)


def test_the_template_passes_cfn_lint_with_no_match_at_all() -> None:
    assert lint(TEMPLATE) == []


def test_cfn_lint_does_catch_a_mistake_in_it(tmp_path: Path) -> None:
    """The check above can fail: a misspelt property in a copy of the template is reported."""
    broken = tmp_path / "broken.yaml"
    shutil.copyfile(TEMPLATE, broken)
    text = broken.read_text()
    broken.write_text(text.replace("ReadonlyRootFilesystem: true", "ReadOnlyRootFilesystem: true", 1))
    assert any("ReadOnlyRootFilesystem" in match for match in lint(broken))


def test_the_task_role_holds_exactly_what_pitcrews_own_credentials_need(template: dict[str, Any]) -> None:
    role = template["Resources"]["TaskRole"]["Properties"]
    assert "ManagedPolicyArns" not in role
    statements = [s for policy in role["Policies"] for s in policy["PolicyDocument"]["Statement"]]
    granted = {(action, json.dumps(s["Resource"])) for s in statements for action in _listed(s["Action"])}
    assert all(s["Effect"] == "Allow" and "NotAction" not in s for s in statements)
    # sqs:GetQueueAttributes is for `pitcrew doctor`'s check that the queue is readable (issue 20); granted
    # ahead of the table, which lists an action once the code calls it.
    needed = {p.action for p in PERMISSIONS if p.principal is Principal.PITCREW} | {"sqs:GetQueueAttributes"}
    assert {action for action, _ in granted} == needed
    queue = json.dumps({"Fn::GetAtt": ["EventQueue", "Arn"]})
    assert granted == {("sts:AssumeRole", json.dumps({"Ref": "OrgRoleArns"}))} | {
        (action, queue) for action in needed if action.startswith("sqs:")
    }


def test_metrics_is_a_404_from_outside_and_the_tasks_take_port_3000_only_from_the_vpc(
    template: dict[str, Any],
) -> None:
    resources = template["Resources"]
    rule = resources["MetricsNotFromOutside"]["Properties"]
    assert rule["Priority"] == 1, "before the listener's default forward"
    paths = {"Field": "path-pattern", "PathPatternConfig": {"Values": ["/metrics", "/metrics/*"]}}
    assert rule["Conditions"] == [paths]
    assert rule["Actions"][0]["Type"] == "fixed-response"
    assert rule["Actions"][0]["FixedResponseConfig"]["StatusCode"] == "404"

    ingress = [
        *resources["TaskSecurityGroup"]["Properties"]["SecurityGroupIngress"],
        *(r["Properties"] for r in resources.values() if r["Type"] == "AWS::EC2::SecurityGroupIngress"),
    ]
    to_tasks = [r for r in ingress if r.get("GroupId", {"Ref": "TaskSecurityGroup"}) == {"Ref": "TaskSecurityGroup"}]
    assert {json.dumps(r.get("CidrIp") or r.get("SourceSecurityGroupId")) for r in to_tasks} == {
        json.dumps({"Ref": "VpcCidr"}),
        json.dumps({"Ref": "LoadBalancerSecurityGroup"}),
    }
    assert all((r["FromPort"], r["ToPort"]) == (3000, 3000) for r in to_tasks)
    assert resources["TaskDefinition"]["Properties"]["ContainerDefinitions"][0]["ReadonlyRootFilesystem"] is True


def _dockerfile_json(instruction: str) -> list[str]:
    """The JSON-array argument of the Dockerfile's (last) CMD or HEALTHCHECK ... CMD."""
    joined = DOCKERFILE.read_text().replace("\\\n", " ")
    lines = [line for line in joined.splitlines() if line.startswith(instruction + " ")]
    found = re.search(r"CMD (\[.*\])\s*$", lines[-1])
    assert found, lines
    parsed: list[str] = json.loads(found[1])
    return parsed


def test_the_container_runs_the_dockerfiles_command_and_health_check(template: dict[str, Any]) -> None:
    container = template["Resources"]["TaskDefinition"]["Properties"]["ContainerDefinitions"][0]
    http_command, socket_command = container["Command"]["Fn::If"][1:]
    assert http_command == _dockerfile_json("CMD")
    assert socket_command == ["pitcrew", "socket"]
    health = container["HealthCheck"]["Fn::If"][1]
    assert health["Command"] == ["CMD", *_dockerfile_json("HEALTHCHECK")]
    assert container["User"] == "10001:10001"
    mounts = {m["ContainerPath"] for m in container["MountPoints"]}
    assert mounts == {"/var/lib/pitcrew"} and 'VOLUME ["/var/lib/pitcrew"]' in DOCKERFILE.read_text()


def test_every_parameter_is_used_and_outputs_name_what_the_readme_asks_for(template: dict[str, Any]) -> None:
    text = TEMPLATE.read_text()
    for name in template["Parameters"]:
        assert len(re.findall(rf"\b{name}\b", text)) > 1, f"parameter {name} is never used"
    assert {"TaskRoleArn", "EventQueueUrl", "SlackRequestUrl"} <= set(template["Outputs"])


def _listed(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)
