"""Program file validation: every problem reported with its path; a good file loads."""

from pathlib import Path

import pytest

from bot.cli import main
from bot.config import ProgramFileError, Settings, load_program, parse_program

ROOT = Path(__file__).resolve().parents[1]

GOOD = """
name: GENIAC Phase 2
timezone: Asia/Tokyo
coordination_channel: C0PROGRAM
admins: [U0ADMIN01]
digest: {schedule: "mon 09:00"}
monitor:
  node_sweep_seconds: 60
  event_queue_url: https://sqs.us-east-1.amazonaws.com/123456789012/pitcrew-events
stall: {stall_after_minutes: 10, drop_ratio: 0.6, sustain_minutes: 5}
orgs:
  - id: kumo-labs
    name: Kumo Labs
    channel: C0KUMOLAB
    members: {U0ALICE01: operator, U0BOB0001: viewer}
    aws:
      account_id: "111111111111"
      region: us-east-1
      role_arn: arn:aws:iam::111111111111:role/PitcrewOps
      external_id: pitcrew-kumo-labs
      parallelcluster_api: https://abc123.execute-api.us-east-1.amazonaws.com/prod
    quota: {p5.48xlarge: 16, ml.trn1.32xlarge: 0}
    throughput: {namespace: Training, metric: TokensPerSecond, dimensions: {Cluster: "*"}}
    stall: {drop_ratio: 0.5}
"""


def problems(text: str) -> list[str]:
    with pytest.raises(ProgramFileError) as caught:
        parse_program(text)
    return [str(problem) for problem in caught.value.problems]


def test_design_example_is_accepted() -> None:
    program = parse_program(GOOD)
    org = program.orgs[0]
    assert org.quota_for("ml.p5.48xlarge") == 16
    assert org.quota_for("trn1.32xlarge") == 0
    assert org.quota_for("m5.8xlarge") is None  # not listed: not limited
    assert program.org_by_channel("C0KUMOLAB") is org


def test_shipped_example_is_a_twelve_org_program() -> None:
    program = load_program(ROOT / "bot" / "examples" / "program.example.yml")
    assert len(program.orgs) == 12
    assert len({org.aws.account_id for org in program.orgs}) == 12


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("p5.48xlarge: 16", "ml.p5.48xlarg: 16"), "orgs[0].quota: unknown instance type 'ml.p5.48xlarg'"),
        (("U0BOB0001: viewer", "U0BOB0001: boss"), "orgs[0].members.U0BOB0001: role must be operator or viewer"),
        (("region: us-east-1\n", "region: us-east-1\n      rolearn: x\n"), "orgs[0].aws: unknown key 'rolearn'"),
        (("timezone: Asia/Tokyo", "timezone: Asia/Tokio"), "timezone: unknown time zone 'Asia/Tokio'"),
        (("id: kumo-labs", "id: Kumo_Labs"), "orgs[0].id: 'Kumo_Labs' is not valid"),
        (('account_id: "111111111111"', "account_id: 111111111111"), "orgs[0].aws.account_id: must be a quoted"),
        (('schedule: "mon 09:00"', 'schedule: "someday"'), "digest.schedule: schedule 'someday' must be"),
        (("drop_ratio: 0.6", "drop_ratio: 1.6"), "stall.drop_ratio: Input should be less than 1"),
        (("name: Kumo Labs\n", "name: Kumo Labs\n    colour: red\n"), "orgs[0]: unknown key 'colour'"),
        (("channel: C0KUMOLAB", "channel: C0PROGRAM"), "orgs[0].channel: C0PROGRAM is already coordination_channel"),
    ],
)
def test_each_problem_has_its_path(change: tuple[str, str], expected: str) -> None:
    found = problems(GOOD.replace(*change))
    assert any(item.startswith(expected) for item in found), found


def test_every_problem_is_reported_at_once() -> None:
    bad = GOOD.replace("ml.trn1.32xlarge", "trn9.32xlarge").replace("U0ALICE01: operator", "U0ALICE01: owner")
    assert len(problems(bad)) == 2


def test_not_yaml_names_the_line() -> None:
    assert problems("name: [unclosed\n")[0].startswith("line ")


def test_check_config_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = tmp_path / "good.yml", tmp_path / "bad.yml"
    good.write_text(GOOD)
    bad.write_text(GOOD.replace("p5.48xlarge: 16", "ml.p5.48xlarg: 16"))
    assert main(["check-config", str(good)]) == 0
    assert "OK: GENIAC Phase 2: 1 orgs" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:
        main(["check-config", str(bad)])
    assert exit_info.value.code == 1
    assert "orgs[0].quota: unknown instance type 'ml.p5.48xlarg'" in capsys.readouterr().err


def test_settings_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_API_URL", "http://127.0.0.1:9/api")
    monkeypatch.setenv("DATABASE_URL", "sqlite+aiosqlite:///x.db")
    settings = Settings()
    assert settings.slack_api_url == "http://127.0.0.1:9/api/"
    assert settings.database_url == "sqlite+aiosqlite:///x.db"


def test_the_same_text_is_the_same_program_and_other_text_is_parsed_anew() -> None:
    assert parse_program(GOOD) is parse_program(GOOD), "the same text: not parsed again"
    renamed = parse_program(GOOD.replace("name:", "name: Renamed #", 1))
    assert renamed is not parse_program(GOOD) and renamed.name.startswith("Renamed")
    broken = GOOD + "\n  - [unclosed\n"
    for _ in range(2):  # refused each time: a refusal is not remembered as a program
        with pytest.raises(ProgramFileError):
            parse_program(broken)
