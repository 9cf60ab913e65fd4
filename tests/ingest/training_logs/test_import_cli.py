"""`pitcrew throughput import LOG --format F` and `pitcrew throughput replay LOG --format F`: the CLI only wires
files; what it reads is the excerpts' tests' business."""

from __future__ import annotations

import csv
import io
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.cli import main
from tests.ingest.training_logs.test_hf_trainer import LLAMAFACTORY_8261
from tests.ingest.training_logs.test_megatron import ISSUE_756, ISSUE_EPFL_11


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text.removeprefix("\n"), encoding="utf-8")
    return path


def test_import_writes_the_trace_to_stdout_and_what_it_assumed_to_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = write(tmp_path, "mixtral-8x7b.log", ISSUE_756)
    assert main(["throughput", "import", str(log), "--format", "megatron", "--tokens-per-step", "524288"]) == 0
    out, err = capsys.readouterr()
    rows = list(csv.DictReader(io.StringIO(out)))
    assert list(rows[0]) == ["ts", "org", "cluster", "job", "tokens_per_second", "step", "event"]
    assert [(r["ts"], r["job"], r["step"], r["event"]) for r in rows] == [
        ("2024-04-06T03:02:12Z", "mixtral-8x7b", "", "start"),
        ("2024-04-06T03:02:12Z", "mixtral-8x7b", "71", ""),
        ("2024-04-06T03:02:18Z", "mixtral-8x7b", "72", ""),
        ("2024-04-06T03:02:24Z", "mixtral-8x7b", "73", ""),
    ]
    assert err.splitlines() == [
        "read 3 Megatron-LM progress lines (lines 1-3)",
        "times from the log's timestamps, read as UTC (the log names no time zone)",
        "tokens per step from --tokens-per-step (524288) over the step time",
        "the log ends without saying training finished: replay it with --until end+30m to see whether it hung",
        "rows for org local, cluster local, job mixtral-8x7b (--org, --cluster, --job name them)",
    ]


def test_import_to_a_file_replays_as_the_log_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write(tmp_path, "run.log", LLAMAFACTORY_8261)
    flags = ["--format", "hf-trainer", "--tokens-per-step", "32768", "--start", "2025-06-02T11:00:00Z"]
    names = ["--org", "kumo-labs", "--cluster", "kumo-p5-train", "--job", "qwen-sft"]
    trace = tmp_path / "trace.csv"
    assert main(["throughput", "import", str(log), *flags, *names, "-o", str(trace)]) == 0
    assert capsys.readouterr().err.splitlines()[-1] == f"wrote 16 rows to {trace}"
    assert main(["throughput", "replay", str(trace), "--until", "end+30m"]) == 0
    from_csv = capsys.readouterr().out
    assert main(["throughput", "replay", str(log), *flags, *names, "--until", "end+30m"]) == 0
    from_log = capsys.readouterr().out
    assert from_csv == from_log
    assert json.loads(from_log) == {
        "kind": "stall",
        "org": "kumo-labs",
        "cluster": "kumo-p5-train",
        "job": "qwen-sft",
        "start": "2025-06-02T11:01:08Z",
        "detected_at": "2025-06-02T11:11:08Z",
        "end": None,
        "cause": "unknown",
        "suspects": [],
    }
    assert main(["throughput", "replay", str(log), *flags]) == 0
    assert capsys.readouterr().out == "", "without --until the clock stops at the last step"


def test_a_log_without_timestamps_ends_when_the_file_last_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = write(tmp_path, "epfl.log", ISSUE_EPFL_11)
    changed = datetime(2026, 11, 29, 12, 0, tzinfo=UTC).timestamp()
    os.utime(log, (changed, changed))
    assert main(["throughput", "import", str(log), "--format", "megatron"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[-1].startswith("2026-11-29T12:00:00Z,local,local,epfl,")
    assert "the last step ending when the file was last changed (2026-11-29T12:00:00Z)" in err


def test_what_cannot_be_read_is_one_line_and_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write(tmp_path, "broken.log", ISSUE_756.replace("(ms): 5470.7", "(ms): nan"))
    assert main(["throughput", "import", str(log), "--format", "megatron"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"{log}: line 2: elapsed time per iteration (ms) is nan: no rate can be read from it\n"
    assert main(["throughput", "replay", str(log), "--format", "megatron"]) == 1
    assert capsys.readouterr().err.endswith(
        "line 2: elapsed time per iteration (ms) is nan: no rate can be read from it\n"
    )
    assert main(["throughput", "import", str(tmp_path / "missing.log"), "--format", "megatron"]) == 1
    assert capsys.readouterr().err.startswith("cannot read ")
    assert main(["throughput", "import", str(log), "--format", "megatron", "--job", "a job"]) == 1
    assert capsys.readouterr().err.count("\n") == 1


def test_log_flags_without_a_format_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write(tmp_path, "run.log", ISSUE_756)
    assert main(["throughput", "replay", str(log), "--tokens-per-step", "4096"]) == 1
    assert capsys.readouterr().err == "--tokens-per-step only apply to a training log: give --format too\n"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--format", "pytorch"], "argument --format: invalid choice: 'pytorch'"),
        (["--format", "nemo", "--start", "monday"], "argument --start: 'monday' is not a time"),
        (["--format", "nemo", "--tokens-per-step", "-3"], "argument --tokens-per-step: '-3' is not a number of tokens"),
        ([], "the following arguments are required: --format"),
    ],
)
def test_bad_flags_say_what_is_wrong(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["throughput", "import", str(write(tmp_path, "run.log", ISSUE_756)), *flags])
    assert raised.value.code == 2
    assert message in capsys.readouterr().err
