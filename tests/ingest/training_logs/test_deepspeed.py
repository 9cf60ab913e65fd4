"""DeepSpeed logs, read from real excerpts of its output."""

from __future__ import annotations

import pytest

from tests.ingest.training_logs.support import events, imported, samples

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


# https://github.com/deepspeedai/DeepSpeed/issues/2629 (DeepSpeed 0.7.7 prints its timer every step): the timer line of
# 0.6 and 0.7 (`0/17, RunningAvgSamplesPerSec=..., CurrSamplesPerSec=...`), a launcher's `stdout: ` before it, and no
# progress report in the excerpt.
ISSUE_2629 = """
stdout: [2022-12-20 08:26:26,101] [INFO] [timer.py:197:stop] 0/17, RunningAvgSamplesPerSec=158.31157878546472, CurrSamplesPerSec=159.628891629629, MemAllocated=1.75GB, MaxMemAllocated=2.6GB
stdout: [2022-12-20 08:26:26,325] [INFO] [timer.py:197:stop] 0/18, RunningAvgSamplesPerSec=157.41495682912333, CurrSamplesPerSec=145.0889530760849, MemAllocated=1.75GB, MaxMemAllocated=2.6GB
stdout: [2022-12-20 08:26:26,531] [INFO] [timer.py:197:stop] 0/19, RunningAvgSamplesPerSec=157.4379014217289, CurrSamplesPerSec=157.80592669930536, MemAllocated=1.75GB, MaxMemAllocated=2.6GB
"""  # noqa: E501

# eth-cscs/UserLabDay on GitHub, 2022/containers/ngc-bert-squad/README.md (BERT on SQuAD with DeepSpeed at CSCS,
# 2022): the same timer line after each progress report.
CSCS_USERLABDAY = """
[2022-08-29 06:58:56,121] [INFO] [logging.py:68:log_dist] [Rank 0] step=20, skipped=17, lr=[5e-05], mom=[(0.9, 0.999)]
[2022-08-29 06:58:56,176] [INFO] [timer.py:198:stop] 0/20, RunningAvgSamplesPerSec=232.7340551694273, CurrSamplesPerSec=227.48090316379353, MemAllocated=0.36GB, MaxMemAllocated=15.06GB
[2022-08-29 06:59:18,633] [INFO] [logging.py:68:log_dist] [Rank 0] step=30, skipped=17, lr=[5e-05], mom=[(0.9, 0.999)]
[2022-08-29 06:59:18,687] [INFO] [timer.py:198:stop] 0/30, RunningAvgSamplesPerSec=230.82135336499695, CurrSamplesPerSec=227.45044884073528, MemAllocated=0.36GB, MaxMemAllocated=15.06GB
[2022-08-29 06:59:41,140] [INFO] [logging.py:68:log_dist] [Rank 0] step=40, skipped=17, lr=[5e-05], mom=[(0.9, 0.999)]
[2022-08-29 06:59:41,193] [INFO] [timer.py:198:stop] 0/40, RunningAvgSamplesPerSec=229.93929267351086, CurrSamplesPerSec=227.7217889790298, MemAllocated=0.36GB, MaxMemAllocated=15.06GB
"""  # noqa: E501

# https://github.com/deepspeedai/DeepSpeed/issues/255 (2020): the first timer line, its own logger's timestamp, no
# progress reports.
ISSUE_255 = """
[INFO 2020-06-08 05:26:19] 0/2650, SamplesPerSec=13.19749106827976
[INFO 2020-06-08 05:26:34] 0/2700, SamplesPerSec=13.198177991591365
"""


def test_the_timer_line_of_0_7_without_reports_counts_its_own_steps() -> None:
    result = imported(ISSUE_2629, "deepspeed")
    assert samples(result) == [
        ("2022-12-20T08:26:26.101Z", pytest.approx(159.629, abs=1e-3), 17),
        ("2022-12-20T08:26:26.325Z", pytest.approx(145.089, abs=1e-3), 18),
        ("2022-12-20T08:26:26.531Z", pytest.approx(157.806, abs=1e-3), 19),
    ]


def test_the_timer_line_of_0_7_belongs_to_the_report_before_it() -> None:
    result = imported(CSCS_USERLABDAY, "deepspeed")
    assert result.columns[4] == "samples_per_second"
    assert samples(result) == [  # the timer's CurrSamplesPerSec, at the report's time
        ("2022-08-29T06:58:56.121Z", pytest.approx(227.481, abs=1e-3), 20),
        ("2022-08-29T06:59:18.633Z", pytest.approx(227.450, abs=1e-3), 30),
        ("2022-08-29T06:59:41.140Z", pytest.approx(227.722, abs=1e-3), 40),
    ]


def test_the_first_timer_line_without_reports_counts_its_own_steps() -> None:
    assert samples(imported(ISSUE_255, "deepspeed")) == [
        ("2020-06-08T05:26:19Z", pytest.approx(13.197, abs=1e-3), 2650),
        ("2020-06-08T05:26:34Z", pytest.approx(13.198, abs=1e-3), 2700),
    ]


# The shape of CSCS_USERLABDAY's lines (above) with gradient accumulation of 4: DeepSpeed up to 0.7 counts micro steps
# in its timer line, so a timer line printed before the first report says 40 where the report will say step=10.
ACCUMULATING = """
[2022-08-29 06:58:30,100] [INFO] [timer.py:198:stop] 0/40, RunningAvgSamplesPerSec=230.1, CurrSamplesPerSec=228.0, MemAllocated=0.36GB, MaxMemAllocated=15.06GB
[2022-08-29 06:58:56,121] [INFO] [logging.py:68:log_dist] [Rank 0] step=10, skipped=0, lr=[5e-05], mom=[(0.9, 0.999)]
[2022-08-29 06:58:56,176] [INFO] [timer.py:198:stop] 0/80, RunningAvgSamplesPerSec=232.7, CurrSamplesPerSec=227.5, MemAllocated=0.36GB, MaxMemAllocated=15.06GB
[2022-08-29 06:59:18,633] [INFO] [logging.py:68:log_dist] [Rank 0] step=20, skipped=0, lr=[5e-05], mom=[(0.9, 0.999)]
[2022-08-29 06:59:18,687] [INFO] [timer.py:198:stop] 0/120, RunningAvgSamplesPerSec=230.8, CurrSamplesPerSec=227.4, MemAllocated=0.36GB, MaxMemAllocated=15.06GB
"""  # noqa: E501


def test_a_timer_line_before_the_first_report_is_no_step_and_no_restart() -> None:
    result = imported(ACCUMULATING, "deepspeed")
    assert [event for _, event in events(result)] == ["start"]  # one run: the steps never go back
    assert [step for _, _, step in samples(result)] == [None, 10, 20]
