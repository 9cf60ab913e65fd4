"""The program file's `approvals:` block (issue 24 item 1) and check-config's warning about quota gaps (item 3)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.cli import main
from bot.config import ApprovalsConfig, ProgramFileError, load_program, parse_program
from storage.db import Database
from storage.models import ClusterSeen, Org
from tests.test_config import GOOD

RULES = """
approvals:
  delete: true
  launch_over_usd_per_day: 5000
  nodes_over: 32
  replace_or_reboot_over: 4
  approvers: admins
  count: 1
  ttl_minutes: 60
"""


def problems(text: str) -> list[str]:
    with pytest.raises(ProgramFileError) as caught:
        parse_program(text)
    return [str(problem) for problem in caught.value.problems]


def test_every_key_is_read() -> None:
    program = parse_program(GOOD + RULES)
    assert program.approvals == ApprovalsConfig(
        delete=True,
        launch_over_usd_per_day=5000,
        nodes_over=32,
        replace_or_reboot_over=4,
        approvers="admins",
        count=1,
        ttl_minutes=60,
    )


def test_without_the_block_nothing_needs_approval_and_every_key_is_optional() -> None:
    assert parse_program(GOOD).approvals is None
    rules = parse_program(GOOD + "approvals: {delete: true}\n").approvals
    assert rules is not None and rules.approvers == "admins" and rules.count == 1 and rules.ttl_minutes == 60


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        ("approvals: {approvers: everyone}", "approvals.approvers: Input should be 'admins' or 'operators'"),
        ("approvals: {count: 0}", "approvals.count: Input should be greater than or equal to 1"),
        ("approvals: {ttl_minutes: -5}", "approvals.ttl_minutes: Input should be greater than or equal to 1"),
        ("approvals: {nodes_over: many}", "approvals.nodes_over: Input should be a valid integer"),
        ("approvals: {launch_over_usd_per_day: -1}", "approvals.launch_over_usd_per_day: Input should be greater"),
        ("approvals: {delete: sometimes}", "approvals.delete: Input should be a valid boolean"),
        ("approvals: {deletes: true}", "approvals: unknown key 'deletes'"),
        ("approvals: {count: 2}", "approvals.count: 2 approvers needed but the program has 1 admins"),
    ],
)
def test_a_mistake_is_named_by_its_path(block: str, expected: str) -> None:
    found = problems(GOOD + block + "\n")
    assert any(p.startswith(expected) for p in found), found


def test_operators_may_be_counted_beyond_the_admins() -> None:
    rules = parse_program(GOOD + "approvals: {approvers: operators, count: 2}\n").approvals
    assert rules is not None and rules.count == 2


def test_check_config_names_an_approvals_mistake(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(GOOD + "approvals: {ttl_minutes: 0}\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["check-config", str(bad)])
    assert exit_info.value.code == 1
    assert "approvals.ttl_minutes: Input should be greater than or equal to 1" in capsys.readouterr().err


async def _seen(db: Database, instances: dict[str, int]) -> None:
    now = datetime(2026, 12, 4, 9, 0, tzinfo=UTC)
    async with db.session() as session:
        session.add(
            Org(
                id="kumo-labs",
                name="Kumo Labs",
                channel="C0KUMOLAB",
                account_id="111111111111",
                region="us-east-1",
                synced_at=now,
            )
        )
        await session.commit()
        session.add(
            ClusterSeen(
                org_id="kumo-labs",
                backend="hyperpod",
                name="kumo-g5",
                status="InService",
                instances=instances,
                last_seen_at=now,
            )
        )
        await session.commit()


async def test_check_config_warns_of_accelerators_held_outside_the_quota(
    db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # GOOD's kumo-labs lists p5 and trn1; its cluster holds G5 nodes (and a controller, never limited).
    await _seen(db, {"ml.g5.48xlarge": 4, "ml.m5.12xlarge": 1, "ml.p5.48xlarge": 2})
    good = tmp_path / "good.yml"
    good.write_text(GOOD)
    monkeypatch.setenv("DATABASE_URL", db.url)
    assert await asyncio.to_thread(main, ["check-config", str(good)]) == 0
    out = capsys.readouterr()
    assert "OK: GENIAC Phase 2" in out.out
    (warning,) = [line for line in out.err.splitlines() if line.startswith("warning:")]
    assert "orgs[0].quota: kumo-labs's clusters hold g5.48xlarge (4 held), which its quota does not list" in warning
    assert "m5" not in warning and "p5" not in warning


def test_check_config_without_a_database_says_nothing_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "good.yml"
    good.write_text(GOOD)
    missing = tmp_path / "none.db"
    monkeypatch.setenv("DATABASE_URL", f"sqlite+aiosqlite:///{missing}")
    assert main(["check-config", str(good)]) == 0
    assert "warning" not in capsys.readouterr().err
    assert not missing.exists(), "check-config creates no database"


def test_the_demo_turns_on_the_example_files_commented_approvals_block() -> None:
    from sandbox.demo import DEMO_APPROVALS, _quick_sandbox
    from sandbox.world import EXAMPLE_PROGRAM

    example = load_program(EXAMPLE_PROGRAM)
    assert example.approvals is None, "the example's block is commented out: tests confirm with one click"
    assert "# approvals:" in EXAMPLE_PROGRAM.read_text()
    assert _quick_sandbox(example).approvals == DEMO_APPROVALS
