"""The `pitcrew` command's maintenance paths."""

from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect

from bot.cli import main


def test_db_upgrade_creates_the_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", f"sqlite+aiosqlite:///{tmp_path / 'p.db'}")
    assert main(["db", "upgrade"]) == 0
    assert main(["db", "upgrade"]) == 0  # idempotent
    tables = inspect(create_engine(f"sqlite:///{tmp_path / 'p.db'}")).get_table_names()
    assert {"orgs", "clusters", "audit_log", "alembic_version"} <= set(tables)


def test_socket_mode_needs_an_app_token(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("SLACK_APP_TOKEN", raising=False)
    assert main(["socket"]) == 1
    assert "SLACK_APP_TOKEN" in capsys.readouterr().err


def test_serve_refuses_a_bad_program_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "program.yml"
    bad.write_text("name: X\ncoordination_channel: C0PROGRAM\norgs: [{id: Bad_Id}]\n")
    monkeypatch.setenv("PITCREW_CONFIG", str(bad))
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--port", "0"])
    assert exit_info.value.code == 1
    assert "orgs[0].id" in capsys.readouterr().err
