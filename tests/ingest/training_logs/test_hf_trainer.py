"""Hugging Face Trainer logs, read from real excerpts of its output."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.ingest.training_logs import LogError
from bot.ingest.training_logs.common import Setting
from bot.ingest.training_logs.hf_trainer import HfTrainerReader
from bot.monitor.replay import parse_until, replay
from tests.ingest.training_logs.support import events, imported, samples

START = datetime(2025, 6, 2, 11, 0, tzinfo=UTC)

# https://github.com/hiyouga/LlamaFactory/issues/8261 ("Watchdog caught collective operation timeout" after a while):
# the Trainer's bar, a loss dict, then the bar at step 24 with rank 5's NCCL watchdog error glued to it: the job hung.
# The `[1743]` prefixes are the issue's own line numbers.
LLAMAFACTORY_8261 = """
[1743] {'loss': 3.5534, 'grad_norm': 1.4142135381698608, 'learning_rate': 2.0454545454545457e-06, 'epoch': 0.01}
[1744] 
[1745]   1%|          | 10/1752 [00:29<1:22:01,  2.83s/it]
[1746]   1%|          | 11/1752 [00:31<1:21:50,  2.82s/it]
[1747]   1%|          | 12/1752 [00:34<1:20:50,  2.79s/it]
[1748]   1%|          | 13/1752 [00:37<1:20:49,  2.79s/it]
[1749]   1%|          | 14/1752 [00:39<1:18:17,  2.70s/it]
[1750]   1%|          | 15/1752 [00:42<1:18:30,  2.71s/it]
[1751]   1%|          | 16/1752 [00:45<1:19:17,  2.74s/it]
[1752]   1%|          | 17/1752 [00:48<1:19:22,  2.74s/it]
[1753]   1%|          | 18/1752 [00:51<1:19:26,  2.75s/it]
[1754]   1%|          | 19/1752 [00:54<1:22:59,  2.87s/it]
[1755]   1%|          | 20/1752 [00:57<1:22:40,  2.86s/it]
[1756]                                                    
[1757] {'loss': 0.0, 'grad_norm': 1.4142135381698608, 'learning_rate': 4.3181818181818185e-06, 'epoch': 0.01}
[1758] 
[1759]   1%|          | 20/1752 [00:57<1:22:40,  2.86s/it]
[1760]   1%|          | 21/1752 [00:59<1:21:32,  2.83s/it]
[1761]   1%|▏         | 22/1752 [01:02<1:21:36,  2.83s/it]
[1762]   1%|▏         | 23/1752 [01:05<1:23:14,  2.89s/it]
[1763]   1%|▏         | 24/1752 [01:08<1:22:56,  2.88s/it][rank5]:[E602 11:17:52.185053341 ProcessGroupNCCL.cpp:632] [Rank 5] Watchdog caught collective operati
"""  # noqa: E501, W291

# https://github.com/microsoft/huggingface-transformers/pull/7: a bar in it/s, a fork's own dict lines, and the
# Trainer's last words (cut off in the PR as here).
MICROSOFT_7 = """
 98%|█████████▊| 2086/2120 [26:01<00:22,  1.49it/s]
 98%|█████████▊| 2087/2120 [26:02<00:22,  1.48it/s]
                                                   
{'train_step_runtime': 0.641, 'train_step_samples_per_second': 56.162, 'epoch': 0.98}

 98%|█████████▊| 2087/2120 [26:02<00:22,  1.48it/s]
 98%|█████████▊| 2088/2120 [26:03<00:21,  1.47it/s]
Training completed. Do not forget to share your model on huggingf
"""  # noqa: W293

# https://github.com/huggingface/transformers/pull/9613 (TFTrainer's logging): the header, with the logger's
# timestamps, and dict lines that carry their step.
TRANSFORMERS_9613 = """
[INFO|trainer_tf.py:522] 2021-01-15 10:27:59,116 >> ***** Running training *****
[INFO|trainer_tf.py:523] 2021-01-15 10:27:59,123 >>   Num examples = 3668
[INFO|trainer_tf.py:525] 2021-01-15 10:27:59,124 >>   Num Epochs = 4
[INFO|trainer_tf.py:526] 2021-01-15 10:27:59,124 >>   Instantaneous batch size per device = 16
[INFO|trainer_tf.py:527] 2021-01-15 10:27:59,124 >>   Total train batch size (w. parallel, distributed & accumulation) = 32
[INFO|trainer_tf.py:530] 2021-01-15 10:27:59,125 >>   Gradient Accumulation steps = 2
[INFO|trainer_tf.py:531] 2021-01-15 10:27:59,136 >>   Steps per epoch = 115
[INFO|trainer_tf.py:532] 2021-01-15 10:27:59,137 >>   Total optimization steps = 460
[INFO|trainer_tf.py:398] 2021-01-15 10:28:50,371 >> {'loss': 0.6347228, 'learning_rate': 4.891304e-05, 'epoch': 0.08695652173913043, 'step': 10}
[INFO|trainer_tf.py:398] 2021-01-15 10:28:56,791 >> {'loss': 0.604829, 'learning_rate': 4.7826084e-05, 'epoch': 0.17391304347826086, 'step': 20}
"""  # noqa: E501

# https://blog.csdn.net/Yaki_Duck/article/details/145152631: a recent Trainer's header (its "distributed&" as
# printed there).
CSDN_HEADER = """
[INFO|trainer.py:2084] 2025-01-09 11:53:02,473 >> Total train batch size (w. parallel, distributed& accumulation) = 4
[INFO|trainer.py:2086] 2025-01-09 11:53:02,473 >> Total optimization steps = 5,001
"""

# https://github.com/huggingface/transformers/issues/14531: the bar with DeepSpeed's lines glued to it.
TRANSFORMERS_14531 = """
{'loss': 0.0, 'learning_rate': 0.001, 'epoch': 0.06}
  8%|█████████████                                                                                                                                                | 1999/24128 [1:52:09<20:27:23,  3.33s/it][2021-11-26 03:07:16,494] [INFO] [logging.py:69:log_dist] [Rank 0] step=2000, skipped=1995, lr=[0.001, 0.001], mom=[0.0, 0.0]
[2021-11-26 03:07:16,494] [INFO] [timer.py:181:stop] 0/2000, SamplesPerSec=9.526738918021234
"""  # noqa: E501


def test_the_bar_gives_steps_their_time_since_training_began_and_their_step_time() -> None:
    result = imported(LLAMAFACTORY_8261, "hf-trainer", start=START, tokens_per_step=16 * 2048.0)
    rates = samples(result)
    assert [step for _, _, step in rates] == list(range(10, 25))  # step 20's redraw is one sample
    assert rates[0] == ("2025-06-02T11:00:29Z", pytest.approx(32768 / 2.83, abs=1e-3), 10)
    assert rates[-1] == ("2025-06-02T11:01:08Z", pytest.approx(32768 / 2.88, abs=1e-3), 24)
    assert "no timestamps: times from the progress bar's elapsed time after 2025-06-02T11:00:00Z (--start)" in (
        result.notes
    )


def test_a_trace_that_ends_in_the_hang_is_reported_with_until_and_not_without() -> None:
    rows = imported(LLAMAFACTORY_8261, "hf-trainer", start=START, tokens_per_step=16 * 2048.0).rows
    assert list(replay(rows)) == []
    (stall,) = replay(rows, until=parse_until("end+30m"))
    assert (stall["kind"], stall["start"], stall["detected_at"], stall["end"]) == (
        "stall",
        "2025-06-02T11:01:08Z",  # its last step
        "2025-06-02T11:11:08Z",  # + 10 minutes: NCCL's watchdog fired at about the same time (timeout 600 s)
        None,
    )


def test_without_a_batch_size_or_tokens_per_step_the_bar_is_not_enough() -> None:
    with pytest.raises(LogError, match="not how many samples or tokens a step holds: give --tokens-per-step N"):
        imported(LLAMAFACTORY_8261, "hf-trainer", start=START)


def test_iterations_per_second_and_the_end_of_training() -> None:
    result = imported(MICROSOFT_7, "hf-trainer", start=START, tokens_per_step=1000.0)
    assert samples(result) == [
        ("2025-06-02T11:26:01Z", pytest.approx(1490.0), 2086),
        ("2025-06-02T11:26:02Z", pytest.approx(1480.0), 2087),
        ("2025-06-02T11:26:03Z", pytest.approx(1470.0), 2088),
    ]
    assert events(result)[-1] == ("2025-06-02T11:26:03Z", "end")


def test_timed_dict_lines_with_their_step_and_the_headers_batch_size() -> None:
    result = imported(TRANSFORMERS_9613, "hf-trainer")
    assert events(result) == [("2021-01-15T10:27:59.116Z", "start")]
    assert samples(result) == [  # 10 steps in 6.42 s, 32 samples a step; step 10 has nothing before it to time it
        ("2021-01-15T10:28:56.791Z", pytest.approx(32 / 0.642, abs=1e-3), 20)
    ]
    assert "1 progress line left out: no time or no samples per second could be read" in result.notes


def test_the_header_is_read_whatever_its_spacing() -> None:
    reader = HfTrainerReader()
    items = [item for n, line in enumerate(CSDN_HEADER.strip().split("\n"), 1) for item in reader.feed(line, n)]
    assert items == [
        Setting(line=1, name="samples_per_step", value=4.0),
        Setting(line=2, name="total_steps", value=5001.0),
    ]
    assert reader.feed(" 1%|          | 10/1752 [00:29<1:22:01,  2.83s/it]", 3) == []  # not this run's bar


def test_an_evaluation_bar_is_not_the_training_bar() -> None:
    # An evaluation bar as the Time-MoE issue shows one (https://github.com/Time-MoE/Time-MoE/issues/71) between the
    # training bar's redraws: without the header, the bar that advanced furthest is training's.
    evaluation = "100%|█████████████████████████████████| 7/7 [00:00<00:00, 1809.34it/s]"
    lines = LLAMAFACTORY_8261.split("\n")
    lines.insert(8, evaluation)
    result = imported("\n".join(lines), "hf-trainer", start=START, tokens_per_step=1.0)
    assert [step for _, _, step in samples(result)] == list(range(10, 25))


def test_glued_deepspeed_text_does_not_lend_the_bar_its_timestamp() -> None:
    result = imported(TRANSFORMERS_14531, "hf-trainer", start=START, tokens_per_step=1.0)
    assert samples(result) == [("2025-06-02T12:52:09Z", pytest.approx(1 / 3.33, abs=1e-6), 1999)]  # start + 1:52:09


def test_the_summary_ends_the_run_and_says_the_samples_per_step() -> None:
    # The summary's shape as transformers' Trainer.train logs it (trainer.py: speed_metrics("train", ...)), after the
    # real bars of the LlamaFactory issue.
    summary = (
        "{'train_runtime': 68.4, 'train_samples_per_second': 22.5, 'train_steps_per_second': 0.351, 'epoch': 0.01}"
    )
    result = imported(LLAMAFACTORY_8261 + summary, "hf-trainer", start=START)
    assert result.columns[4] == "samples_per_second"
    assert samples(result)[0][1] == pytest.approx(22.5 / 0.351 / 2.83, abs=1e-3)
    assert events(result)[-1] == ("2025-06-02T11:01:08Z", "end")
