"""torchtitan logs, read from real excerpts of its output."""

from __future__ import annotations

import pytest

from bot.ingest.training_logs import LogError
from tests.ingest.training_logs.support import events, imported, samples

# https://github.com/pytorch/torchtitan/pull/1287 (its description's log): rank 0's lines with `[rank0]:`,
# GC and profiler lines between the steps.
PR_1287 = """
[rank0]:[titan] 2025-06-16 22:30:48,735 - root - INFO - [GC] Peforming periodical GC collection. 0.06 seconds.
[rank0]:[titan] 2025-06-16 22:30:50,322 - root - INFO - step: 200  loss:  6.1384  memory: 49.66GiB(52.28%)  tps: 5,856  tflops: 339.16  mfu: 34.29%
[rank0]:[titan] 2025-06-16 22:30:50,758 - root - INFO - Dumping profiler traces at step 200
[rank0]:[titan] 2025-06-16 22:30:50,976 - root - INFO - Finished dumping profiler traces in 0.22 seconds
[rank0]:[titan] 2025-06-16 22:31:04,970 - root - INFO - step: 210  loss:  6.0388  memory: 49.66GiB(52.28%)  tps: 5,593  tflops: 323.92  mfu: 32.75%
[rank0]:[titan] 2025-06-16 22:31:18,934 - root - INFO - step: 220  loss:  6.0348  memory: 49.66GiB(52.28%)  tps: 5,868  tflops: 339.82  mfu: 34.36%
[rank0]:[titan] 2025-06-16 22:31:32,895 - root - INFO - step: 230  loss:  5.9670  memory: 49.66GiB(52.28%)  tps: 5,869  tflops: 339.88  mfu: 34.37%
[rank0]:[titan] 2025-06-16 22:31:46,869 - root - INFO - step: 240  loss:  5.8311  memory: 49.66GiB(52.28%)  tps: 5,864  tflops: 339.59  mfu: 34.34%
[rank0]:[titan] 2025-06-16 22:31:59,261 - root - INFO - [GC] Peforming periodical GC collection. 0.06 seconds.
[rank0]:[titan] 2025-06-16 22:32:00,846 - root - INFO - step: 250  loss:  5.8383  memory: 49.66GiB(52.28%)  tps: 5,862  tflops: 339.48  mfu: 34.33%
"""  # noqa: E501

# https://github.com/pytorch/torchtitan/pull/2389 (its description's log): every rank prints each step, without a
# rank prefix (lines 1, 2, 5 of its step 4 and the first of step 5).
PR_2389 = """
[titan] 2026-02-24 19:46:17,508 - root - INFO - step:  4  loss:  7.62585  grad_norm: 26.6250  memory: 66.91GiB(37.51%)  tps: 10,050  tflops: 314.71  mfu: 13.99%
[titan] 2026-02-24 19:46:17,508 - root - INFO - step:  4  loss:  7.62585  grad_norm: 26.6250  memory: 66.91GiB(37.51%)  tps: 10,050  tflops: 314.69  mfu: 13.99%
[titan] 2026-02-24 19:46:17,508 - root - INFO - step:  4  loss:  7.62585  grad_norm: 26.6250  memory: 66.91GiB(37.51%)  tps: 10,049  tflops: 314.68  mfu: 13.99%
[titan] 2026-02-24 19:46:19,145 - root - INFO - step:  5  loss:  7.07623  grad_norm: 46.5000  memory: 66.91GiB(37.51%)  tps: 10,007  tflops: 313.36  mfu: 13.93%
"""  # noqa: E501

# https://github.com/pytorch/torchtitan/pull/3393 (its description's log): c10d and Python warnings before the steps,
# one a glog line whose "W518 16:04:29" is no timestamp.
PR_3393 = """
[rank0]:[W518 16:04:29.072546845 socket.cpp:207] [c10d] The hostname of the client socket cannot be retrieved. err=-3
[rank0]:[titan] 2026-05-18 16:04:29,084 - root - WARNING - ENV[TORCH_NCCL_ASYNC_ERROR_HANDLING] = 1 will be overridden to 3 based on job config
[rank0]:/usr/local/lib/python3.12/dist-packages/torchdata/stateful_dataloader/stateful_dataloader.py:379: UserWarning: 'set_vital' is deprecated, please do not call
[rank0]:  torch.set_vital("Dataloader", "enabled", "True")  # type: ignore[attr-defined]
[rank0]:[titan] 2026-05-18 16:04:46,338 - root - INFO - step: 14  loss:  3.24405  grad_norm:  0.8319  memory:  9.46GiB(64.99%)  tps: 7,282  tflops: 0.52  mfu: 0.17%
[rank0]:[titan] 2026-05-18 16:04:47,456 - root - INFO - step: 15  loss:  3.10680  grad_norm:  0.8587  memory:  9.46GiB(64.99%)  tps: 7,334  tflops: 0.53  mfu: 0.17%
"""  # noqa: E501


def test_each_step_line_is_a_sample_of_its_own_tps_at_its_own_time() -> None:
    result = imported(PR_1287, "torchtitan")
    assert result.columns == ("ts", "org", "cluster", "job", "tokens_per_second", "step", "event")
    assert samples(result) == [
        ("2025-06-16T22:30:50.322Z", 5856.0, 200),
        ("2025-06-16T22:31:04.970Z", 5593.0, 210),
        ("2025-06-16T22:31:18.934Z", 5868.0, 220),
        ("2025-06-16T22:31:32.895Z", 5869.0, 230),
        ("2025-06-16T22:31:46.869Z", 5864.0, 240),
        ("2025-06-16T22:32:00.846Z", 5862.0, 250),
    ]
    assert events(result) == [("2025-06-16T22:30:50.322Z", "start")]
    assert result.rows[1] == {
        "ts": "2025-06-16T22:30:50.322Z",
        "org": "o",
        "cluster": "c",
        "job": "j",
        "tokens_per_second": "5856",
        "step": "200",
        "event": "",
    }
    notes = " | ".join(result.notes)
    assert "read 6 torchtitan progress lines (lines 2-10)" in notes
    assert "read as UTC (the log names no time zone)" in notes
    assert "tps, torchtitan's tokens per second per device" in notes
    assert "replay it with --until end+30m" in notes


def test_the_same_step_from_every_rank_is_one_sample() -> None:
    assert samples(imported(PR_2389, "torchtitan")) == [
        ("2026-02-24T19:46:17.508Z", 10050.0, 4),
        ("2026-02-24T19:46:19.145Z", 10007.0, 5),
    ]


def test_warnings_and_a_glog_prefix_are_not_read_as_progress_or_time() -> None:
    assert samples(imported(PR_3393, "torchtitan")) == [
        ("2026-05-18T16:04:46.338Z", 7282.0, 14),
        ("2026-05-18T16:04:47.456Z", 7334.0, 15),
    ]


def test_tokens_per_step_is_not_needed_and_not_used() -> None:
    result = imported(PR_2389, "torchtitan", tokens_per_step=4096.0)
    assert samples(result)[0][1] == 10050.0
    assert "--tokens-per-step not used where the log gives tokens/s itself" in result.notes


def test_a_step_line_without_tps_is_refused_naming_its_line() -> None:
    broken = PR_1287.replace("tps: 5,593", "tps: n/a")  # the real line 5, its figure made unreadable
    with pytest.raises(LogError) as raised:
        imported(broken, "torchtitan")
    assert str(raised.value) == "line 5: a step line without tps (tokens per second): no rate can be read from it"


def test_the_validators_line_is_not_a_training_step() -> None:
    # The validator's line, as torchtitan prints it (torchtitan/components/metrics.py, MetricsProcessor.log_validation:
    # `validate step: {step:2}  loss: {loss:7.4f}  memory: ...GiB(...%)  tps: {round(tps):,}`), with the colours it
    # has there, between two real step lines of PR_1287: its tps is evaluation's, not training's.
    validation = (
        "[rank0]:[titan] 2025-06-16 22:31:10,001 - root - INFO - \x1b[33mvalidate step: 215  \x1b[32mloss:  6.0511  "
        "\x1b[38;2;54;234;195mmemory: 49.66GiB(52.28%)  \x1b[34mtps: 17,940\x1b[39m"
    )
    lines = PR_1287.split("\n")
    lines.insert(6, validation)
    assert samples(imported("\n".join(lines), "torchtitan")) == samples(imported(PR_1287, "torchtitan"))
