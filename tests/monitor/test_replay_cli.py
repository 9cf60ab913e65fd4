"""`pitcrew throughput replay FILE.csv`: the detector over a recorded trace, one JSON line per episode."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.cli import main

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def trace(tmp_path: Path) -> Path:
    lines = ["ts,org,cluster,job,tokens_per_second,event", "2026-11-01T00:00:00Z,kumo-labs,c1,j1,,start"]
    for i in range(1, 240):
        if 120 <= i < 160:
            continue  # 20 minutes without a sample: a hang
        ts = (T0 + timedelta(seconds=30 * i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        lines.append(f"{ts},kumo-labs,c1,j1,1000,")
    path = tmp_path / "trace.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_replay_prints_each_episode_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["throughput", "replay", str(trace(tmp_path))]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert json.loads(line) == {
        "kind": "stall",
        "org": "kumo-labs",
        "cluster": "c1",
        "job": "j1",
        "start": "2026-11-01T00:59:30Z",
        "detected_at": "2026-11-01T01:09:30Z",
        "end": "2026-11-01T01:20:00Z",
        "cause": "unknown",
        "suspects": [],
    }


def test_thresholds_can_be_tuned(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["throughput", "replay", str(trace(tmp_path)), "--stall-after", "30"]) == 0
    assert capsys.readouterr().out == "", "a 20-minute gap is no stall when stall_after is 30 minutes"


def test_a_bad_file_is_one_clear_line_and_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("time,org\n")
    assert main(["throughput", "replay", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "bad.csv" in err and "line 1" in err and err[-1] == "\n" and err.count("\n") == 1
    assert main(["throughput", "replay", str(tmp_path / "missing.csv")]) == 1
    assert "cannot read" in capsys.readouterr().err


def hangs_at_the_end(tmp_path: Path) -> Path:
    """An hour at 30 s cadence, then nothing: the trace ends in a hang."""
    lines = ["ts,org,cluster,job,tokens_per_second,event", "2026-11-01T00:00:00Z,kumo-labs,c1,j1,,start"]
    for i in range(1, 121):
        ts = (T0 + timedelta(seconds=30 * i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        lines.append(f"{ts},kumo-labs,c1,j1,1000,")
    path = tmp_path / "hang.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_until_runs_the_clock_past_the_last_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = hangs_at_the_end(tmp_path)
    assert main(["throughput", "replay", str(path)]) == 0
    assert capsys.readouterr().out == "", "without --until the clock stops at the last sample"
    assert main(["throughput", "replay", str(path), "--until", "end+30m"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert json.loads(line) == {
        "kind": "stall",
        "org": "kumo-labs",
        "cluster": "c1",
        "job": "j1",
        "start": "2026-11-01T01:00:00Z",
        "detected_at": "2026-11-01T01:10:00Z",
        "end": None,
        "cause": "unknown",
        "suspects": [],
    }


def test_a_bad_until_is_refused_before_reading(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["throughput", "replay", str(hangs_at_the_end(tmp_path)), "--until", "soon"])
    assert raised.value.code == 2
    assert "--until: 'soon' is neither a time nor end+DURATION" in capsys.readouterr().err


def test_a_row_after_until_is_one_line_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["throughput", "replay", str(hangs_at_the_end(tmp_path)), "--until", "2026-11-01T00:30:00Z"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "hang.csv: line 63: ts 2026-11-01T00:30:30Z is after --until" in err
