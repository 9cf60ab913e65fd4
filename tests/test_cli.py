"""The `pitcrew` command's maintenance paths."""

import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect

from bot.cli import main

ROOT = Path(__file__).resolve().parents[1]
PITCREW = ROOT / ".venv" / "bin" / "pitcrew"


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


def test_track_export_writes_the_living_document_as_markdown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    from bot.config import load_program
    from bot.digest.facts import RecordKind
    from bot.tracking.records import RecordBook
    from sandbox.world import EXAMPLE_PROGRAM
    from storage.db import Database

    url = f"sqlite+aiosqlite:///{tmp_path / 'p.db'}"
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("PITCREW_CONFIG", str(EXAMPLE_PROGRAM))

    async def seed() -> None:
        db = Database(url=url)
        await db.upgrade()
        book = RecordBook(db=db, program=load_program(EXAMPLE_PROGRAM))
        await book.add(
            org_id="kumo-labs",
            kind=RecordKind.INCIDENT,
            text="EFA | NCCL hang",
            user_id="U0ALICE01",
            channel_id="",
            request_key=None,
        )
        await book.require(org_id="kumo-labs", pairs=[("model_size", "70B")], user_id="U0ALICE01", request_key=None)
        await db.dispose()

    asyncio.run(seed())
    assert main(["track", "export", "kumo-labs", "--format", "md", "--output", str(tmp_path / "kumo.md")]) == 0
    document = (tmp_path / "kumo.md").read_text()
    assert document.startswith("# ") and "Kumo Labs" in document
    assert "model_size" in document and "70B" in document and "EFA | NCCL hang" in document
    assert main(["track", "export", "nobody"]) == 1
    assert "unknown org 'nobody'" in capsys.readouterr().err


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port some other program is listening on."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield int(other.getsockname()[1])


@pytest.mark.parametrize("command", ["serve", "demo"])
def test_a_busy_port_is_one_line_naming_it_and_exit_code_2(command: str, busy_port: int, tmp_path: Path) -> None:
    from sandbox.world import EXAMPLE_PROGRAM

    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'p.db'}",
        "PITCREW_CONFIG": str(EXAMPLE_PROGRAM),
        "SLACK_BOT_TOKEN": "xoxb-test",
        "SLACK_SIGNING_SECRET": "test-secret",
    }
    done = subprocess.run(
        [str(PITCREW), command, "--port", str(busy_port)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr + done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"port {busy_port} is already in use" in lines[0]
    suggested = int(lines[0].rsplit("--port ", 1)[1])
    assert suggested > busy_port
    assert not (tmp_path / "p.db").exists(), "nothing started: no database made"


def test_the_busy_port_line_names_grafana_for_3000() -> None:
    import errno

    from bot.cli import _port_problem

    line = _port_problem("127.0.0.1", 3000, OSError(errno.EADDRINUSE, "Address already in use"))
    assert line.startswith("pitcrew: port 3000 is already in use (Grafana uses it by default); start with --port ")


def test_make_run_takes_a_port() -> None:
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", "run", "PORT=3001"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    # Under a parent make (CI's `make test`) make prints its own lines too: look for the command among them.
    assert any(line.strip().endswith("pitcrew demo --port 3001") for line in done.stdout.splitlines()), done.stdout


@pytest.mark.parametrize("command", ["serve", "demo"])
@pytest.mark.parametrize("port", ["70000", "-1", "http"])
def test_a_port_out_of_range_is_refused_as_usage_with_exit_code_2(
    command: str, port: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([command, "--port", port])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "OverflowError" not in err
    expected = f"argument --port: {port!r} is not a port: give 0-65535 (0: any free port)"
    assert err.strip().splitlines()[-1].endswith(expected)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql+asyncpg://pitcrew:hunter2-secret@127.0.0.1:9/pitcrew",  # nothing listens there
        "sqlite+aiosqlite:////proc/no-such-folder/p.db",  # a folder that cannot be made
    ],
)
def test_serve_on_a_database_it_cannot_reach_is_one_line_and_exit_code_1(url: str, tmp_path: Path) -> None:
    from sandbox.world import EXAMPLE_PROGRAM

    env = {
        **os.environ,
        "DATABASE_URL": url,
        "PITCREW_CONFIG": str(EXAMPLE_PROGRAM),
        "SLACK_BOT_TOKEN": "xoxb-test",
        "SLACK_SIGNING_SECRET": "test-secret",
    }
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    done = subprocess.run(
        [str(PITCREW), "serve", "--port", str(port)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr + done.stdout
    lines = [line for line in done.stderr.strip().splitlines() if line.startswith("pitcrew:")]
    assert len(lines) == 1 and lines[0].startswith("pitcrew: cannot open the database "), done.stderr
    assert "DATABASE_URL" in lines[0] and "hunter2" not in done.stderr
