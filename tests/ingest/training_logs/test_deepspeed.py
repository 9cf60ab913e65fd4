"""DeepSpeed logs, read from real excerpts of its output."""

from __future__ import annotations

import pytest

from tests.ingest.training_logs.support import imported, samples

# https://github.com/deepspeedai/DeepSpeed/issues/1825 (a notebook's output): DeepSpeed 0.5's progress report and its
# throughput timer (`0/40, SamplesPerSec=`, which names no global step), Jupyter's noise between.
ISSUE_1825 = """
[2022-03-11 02:06:58,985] [INFO] [logging.py:69:log_dist] [Rank 0] step=40, skipped=2, lr=[5e-05], mom=[[0.9, 0.999]]
[2022-03-11 02:06:58,985] [INFO] [timer.py:189:stop] 0/40, SamplesPerSec=83.48609168106144, MemAllocated=0.26GB, MaxMemAllocated=9.02GB
<IPython.core.display.HTML object>
<IPython.core.display.HTML object>
[2022-03-11 02:07:14,130] [INFO] [logging.py:69:log_dist] [Rank 0] step=50, skipped=2, lr=[5e-05], mom=[[0.9, 0.999]]
[2022-03-11 02:07:14,130] [INFO] [timer.py:189:stop] 0/50, SamplesPerSec=83.73838805358588, MemAllocated=0.26GB, MaxMemAllocated=9.02GB
"""  # noqa: E501

# https://github.com/deepspeedai/DeepSpeed/issues/3742 (a GPT-NeoX run): the current timer line with its global step,
# per-phase timings, GPT-NeoX's own line, then a progress report with no timer line after it in the excerpt.
ISSUE_3742 = """
[2023-07-25 21:03:17,269] [INFO] [timer.py:215:stop] epoch=0/micro_step=34/global_step=34, RunningAvgSamplesPerSec=7.864669709950182, CurrSamplesPerSec=8.00912418308922, MemAllocated=59.65GB, MaxMemAllocated=63.31GB
[2023-07-25 21:03:17,269] [INFO] [logging.py:96:log_dist] [Rank 0] rank=0 time (ms) | forward_microstep: 652.42 | backward_microstep: 2164.53 | backward_inner_microstep: 2001.89 | backward_allreduce_microstep: 162.60 | step_microstep: 1172.13
[2023-07-25 21:03:17,269] [INFO] [logging.py:96:log_dist] [Rank 0] rank=0 time (ms) | forward: 652.41 | backward: 2164.52 | backward_inner: 2001.89 | backward_allreduce: 162.60 | step: 1172.13
 samples/sec: 7.799 | iteration       34/   10000 | elapsed time per iteration (ms): 4103.1 | learning rate: 2.111E-06 | approx flops per GPU: 112.9TFLOPS | lm_loss: 1.118665E+01 | number of skipped iterations:   0 | number of nan iterations:   0 |
time (ms) | forward: 659.86 | backward: 2164.69 | backward-backward: 2164.66 | backward-allreduce: 0.00 | optimizer: 1172.51 | batch generator: 0.83
[2023-07-25 21:03:21,037] [INFO] [logging.py:96:log_dist] [Rank 0] step=35, skipped=0, lr=[2.1731931451279077e-06, 2.1731931451279077e-06], mom=[[0.9, 0.95], [0.9, 0.95]]
"""  # noqa: E501

# https://github.com/deepspeedai/DeepSpeed/issues/1018: a line of the configuration DeepSpeed prints at start.
CONFIG_1018 = "[2021-04-29 09:07:25,567] [INFO] [config.py:745:print]   train_batch_size ............. 8"

# https://github.com/huggingface/transformers/issues/14531 (T5-11B with the Trainer and DeepSpeed): DeepSpeed's lines
# glued to the end of the Trainer's progress bar, dict lines around.
TRANSFORMERS_14531 = """
{'loss': 0.0, 'learning_rate': 0.001, 'epoch': 0.06}
  8%|█████████████                                                                                                                                                | 1999/24128 [1:52:09<20:27:23,  3.33s/it][2021-11-26 03:07:16,494] [INFO] [logging.py:69:log_dist] [Rank 0] step=2000, skipped=1995, lr=[0.001, 0.001], mom=[0.0, 0.0]
[2021-11-26 03:07:16,494] [INFO] [timer.py:181:stop] 0/2000, SamplesPerSec=9.526738918021234
{'loss': 0.0, 'learning_rate': 0.001, 'epoch': 0.08}
"""  # noqa: E501


def test_the_old_timer_line_belongs_to_the_report_before_it() -> None:
    result = imported(ISSUE_1825, "deepspeed")
    assert result.columns[4] == "samples_per_second"
    assert samples(result) == [
        ("2022-03-11T02:06:58.985Z", pytest.approx(83.486, abs=1e-3), 40),
        ("2022-03-11T02:07:14.130Z", pytest.approx(83.738, abs=1e-3), 50),
    ]
    assert "samples/s (the log's own figure): no tokens per step known; give --tokens-per-step N for tokens/s" in (
        result.notes
    )


def test_tokens_per_step_needs_the_train_batch_size_of_the_config() -> None:
    without = imported(ISSUE_1825, "deepspeed", tokens_per_step=16 * 512.0)
    assert without.columns[4] == "samples_per_second"
    assert "--tokens-per-step not used: the log gives neither the step time nor the batch size" in without.notes
    result = imported(CONFIG_1018 + "\n" + ISSUE_1825, "deepspeed", tokens_per_step=8 * 512.0)
    assert result.columns[4] == "tokens_per_second"
    assert [rate for _, rate, _ in samples(result)] == [  # samples/s x 512 tokens a sample
        pytest.approx(83.48609168106144 * 512, abs=1e-3),
        pytest.approx(83.73838805358588 * 512, abs=1e-3),
    ]


def test_the_current_timer_line_names_its_step_and_a_bare_report_is_timed_from_the_one_before() -> None:
    result = imported(CONFIG_1018 + "\n" + ISSUE_3742, "deepspeed")
    assert samples(result) == [
        ("2023-07-25T21:03:17.269Z", pytest.approx(8.009, abs=1e-3), 34),
        ("2023-07-25T21:03:21.037Z", pytest.approx(8 / 3.768, abs=1e-3), 35),  # 8 samples in 3.768 s
    ]


def test_deepspeed_lines_glued_to_a_progress_bar_are_read() -> None:
    assert samples(imported(TRANSFORMERS_14531, "deepspeed")) == [
        ("2021-11-26T03:07:16.494Z", pytest.approx(9.527, abs=1e-3), 2000)
    ]


def test_the_pipeline_engines_step_line() -> None:
    # Its shape, from deepspeed/runtime/pipe/engine.py (`steps: ... loss: ... iter time (s): ... samples/sec: ...`),
    # after the real progress report of issue 1825 that carries the time.
    line = ISSUE_1825.split("\n")[1] + "\nsteps: 40 loss: 2.1034 iter time (s): 0.383 samples/sec: 83.552"
    assert samples(imported(line, "deepspeed")) == [("2022-03-11T02:06:58.985Z", pytest.approx(83.552), 40)]
