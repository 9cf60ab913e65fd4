"""`pitcrew check-config` checks each org's launch defaults (orgs[].launch) against the templates' parameters."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.cli import main
from bot.resources import example_program

PROGRAM = """\
name: GENIAC Phase 2
coordination_channel: C0PROGRAM
orgs:
  - id: kumo-labs
    name: Kumo Labs
    channel: C0KUMOLAB
    aws: {account_id: "111111111111", region: us-east-1}
    launch:
      execution_role_arn: arn:aws:iam::111111111111:role/SageMakerHyperPodExecutionRole
      LAUNCH_LINE
"""


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (
            "subnet_idd: subnet-0123456789abcdef0",
            "orgs[0].launch.subnet_idd: no template has a parameter 'subnet_idd'. Did you mean `subnet_id`?",
        ),
        ("os: windows", "orgs[0].launch.os: os must be one of "),
        ("count: 0", "orgs[0].launch.count: count must be between 1 and "),
    ],
)
def test_check_config_refuses_launch_defaults_no_template_can_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, problem: str
) -> None:
    path = tmp_path / "program.yml"
    path.write_text(PROGRAM.replace("LAUNCH_LINE", line))
    assert main(["check-config", str(path)]) == 1
    err = capsys.readouterr().err
    assert "1 problem(s)" in err and problem in err


def test_check_config_accepts_good_launch_defaults(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "program.yml"
    path.write_text(PROGRAM.replace("LAUNCH_LINE", "lifecycle_s3_uri: s3://sagemaker-kumo-labs-lifecycle/base/"))
    assert main(["check-config", str(path)]) == 0
    assert "OK: GENIAC Phase 2" in capsys.readouterr().out


def test_the_example_program_gives_every_org_launch_defaults_check_config_accepts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["check-config", str(example_program())]) == 0
    from bot.config import load_program

    assert all(org.launch for org in load_program(example_program()).orgs)
