"""NeMo logs, read from real excerpts of its output."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.ingest.training_logs import LogError
from tests.ingest.training_logs.support import imported, samples

START = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)

# NVIDIA's DGX Cloud benchmarking recipe for Nemotron4 340B (NGC catalog,
# https://catalog.ngc.nvidia.com/orgs/nvidia/teams/dgxc-benchmarking/resources/nemotron340b-dgxc-benchmarking-a):
# the last progress bar line of a run, which the page turns into tokens/s as 4096 * 256 / 3.59 = 292082.
NEMOTRON_340B = (
    "Epoch 0: : 100%|██████████| 100/100 [07:57<00:00, reduced_train_loss=7.310, global_step=99.00, "
    "consumed_samples=25600.0, train_step_timing in s=3.590]"
)

# https://github.com/NVIDIA/NeMo-Framework-Launcher/issues/55 ("How do we enable samples per second metric"): an older
# NeMo whose bar has no train_step_timing; the bar's own 41.36 s/it is the step time.
LAUNCHER_55 = (
    "Epoch 0:   1%|          | 795/77225 [9:07:58<878:01:48, 41.36s/it, loss=3.1, v_num=, reduced_train_loss=3.090, "
    "global_step=794.0, consumed_samples=1.63e+6]"
)

# https://github.com/NVIDIA-BioNeMo/bionemo-recipes/pull/740 (a comment's log): NeMo 2's per-step lines.
BIONEMO_740 = """
Training epoch 0, iteration 120/149 | lr: 3e-05 | consumed_samples: 121 | global_batch_size: 1 | global_step: 120 | reduced_train_loss: 1.233 | train_step_timing in s: 0.03146 | val_loss: 4.106
Training epoch 0, iteration 121/149 | lr: 3e-05 | consumed_samples: 122 | global_batch_size: 1 | global_step: 121 | reduced_train_loss: 1.288 | train_step_timing in s: 0.03163 | val_loss: 4.106
Training epoch 0, iteration 122/149 | lr: 3e-05 | consumed_samples: 123 | global_batch_size: 1 | global_step: 122 | reduced_train_loss: 1.333 | train_step_timing in s: 0.03215 | val_loss: 4.106
Training epoch 0, iteration 123/149 | lr: 3e-05 | consumed_samples: 124 | global_batch_size: 1 | global_step: 123 | reduced_train_loss: 1.245 | train_step_timing in s: 0.03157 | val_loss: 4.106
Training epoch 0, iteration 124/149 | lr: 3e-05 | consumed_samples: 125 | global_batch_size: 1 | global_step: 124 | reduced_train_loss: 1.375 | train_step_timing in s: 0.0317 | val_loss: 4.106
Training epoch 0, iteration 125/149 | lr: 3e-05 | consumed_samples: 126 | global_batch_size: 1 | global_step: 125 | reduced_train_loss: 1.34 | train_step_timing in s: 0.03147 | val_loss: 4.106
"""  # noqa: E501


def test_the_progress_bar_with_tokens_per_step_gives_what_nvidia_computes_by_hand() -> None:
    result = imported(NEMOTRON_340B, "nemo", start=START, tokens_per_step=4096 * 256.0)
    assert samples(result) == [("2026-11-29T09:00:03.590Z", pytest.approx(292082.451, abs=1e-3), 99)]


def test_the_progress_bar_alone_says_no_batch_size() -> None:
    with pytest.raises(LogError, match="give --tokens-per-step N"):
        imported(NEMOTRON_340B, "nemo", start=START)


def test_the_sequence_length_in_the_config_and_the_consumed_samples_give_tokens_per_step() -> None:
    # NeMo prints its config before training (`encoder_seq_length: 4096` in the model's YAML); two redraws of the
    # real bar, the second a step later with 256 more samples consumed, as the 340B run's would be.
    later = NEMOTRON_340B.replace("global_step=99.00", "global_step=100.00").replace("25600.0", "25856.0")
    result = imported(f"  encoder_seq_length: 4096\n{NEMOTRON_340B}\r{later}", "nemo", start=START)
    assert samples(result)[-1] == ("2026-11-29T09:00:07.180Z", pytest.approx(292082.451, abs=1e-3), 100)


def test_an_older_bar_without_step_timing_uses_its_own_rate() -> None:
    result = imported(LAUNCHER_55, "nemo", start=START, tokens_per_step=2048 * 2048.0)
    assert samples(result) == [("2026-11-29T09:00:41.360Z", pytest.approx(2048 * 2048 / 41.36, abs=1e-3), 794)]


def test_nemo_2_lines_give_samples_per_second_from_their_global_batch_size() -> None:
    result = imported(BIONEMO_740, "nemo", start=START)
    assert result.columns[4] == "samples_per_second"
    assert [(step, rate) for _, rate, step in samples(result)] == [
        (120, pytest.approx(1 / 0.03146, abs=1e-3)),
        (121, pytest.approx(1 / 0.03163, abs=1e-3)),
        (122, pytest.approx(1 / 0.03215, abs=1e-3)),
        (123, pytest.approx(1 / 0.03157, abs=1e-3)),
        (124, pytest.approx(1 / 0.0317, abs=1e-3)),
        (125, pytest.approx(1 / 0.03147, abs=1e-3)),
    ]
    assert samples(result)[-1][0] == "2026-11-29T09:00:00.190Z"  # the six step times after --start


def test_a_bar_redrawn_with_carriage_returns_is_read_redraw_by_redraw_on_one_line() -> None:
    redrawn = "\r".join(BIONEMO_740.strip().split("\n"))  # as a bar writes its redraws: one line of the file
    result = imported(redrawn, "nemo", start=START)
    assert len(samples(result)) == 6
    assert result.notes[0] == "read 6 NeMo progress lines (lines 1-1)"


def test_the_end_of_fit_is_an_end_row() -> None:
    done = BIONEMO_740 + "`Trainer.fit` stopped: `max_steps=149` reached.\n"
    assert imported(done, "nemo", start=START).rows[-1]["event"] == "end"


def test_a_step_timing_that_does_not_read_is_refused_naming_its_line() -> None:
    broken = BIONEMO_740.replace("train_step_timing in s: 0.0317 ", "train_step_timing in s: 0 ")  # real line 5
    with pytest.raises(LogError) as raised:
        imported(broken, "nemo", start=START)
    assert str(raised.value) == "line 5: train_step_timing is 0: no rate can be read from it"


# A Japanese walkthrough of LoRA tuning Llama 2 7B with NeMo-Megatron-Launcher, in the public code index (stored file
# 30377187391; the index does not name its repository): the last bar of the run with a NeMo message glued after it,
# whose timestamp is the checkpoint's removal, not the step's; `global_step=2e+3` and `consumed_samples=2.56e+5` are
# the bar's three-digit roundings.
LAUNCHER_PEFT_JA = (
    "Epoch 0: : 100%|██████████| 2000/2000 [43:24:54<00:00, reduced_train_loss=0.139, global_step=2e+3, "
    "consumed_samples=2.56e+5, train_step_timing in s=68.70, val_loss=0.212][NeMo I 2024-06-17 08:36:41 "
    "nlp_overrides:480] Removing checkpoint: /home/yxxxx-pg/llama/NeMo-Megatron-Launcher/launcher_scripts/results/"
    "llama2_7b/peft_squad_llama2_7b/results/checkpoints/mp_rank_00/megatron_llama_peft_tuning-lora--validation_loss="
    "0.211-step=1800-consumed_samples=230400.0-last.ckpt"
)

# A NeMo-Megatron-Launcher guide for Kubernetes in the public code index (stored file 5706984593; the index does not
# name its repository): the bar at its 2000th step, a validation bar's redraw glued after it.
LAUNCHER_K8S = (
    "Epoch 0: :   0%|          | 2000/603000 [1:03:17<317:00:58, v_num=, reduced_train_loss=2.600, "
    "global_step=2e+3, consumed_samples=1.28e+6, train_step_timing in s=1.900, val_loss=2.800]dation DataLoader 0: : "
    "51it [00:20,  2.53it/s]"
)


def test_a_nemo_message_glued_after_the_bar_does_not_lend_it_its_timestamp() -> None:
    result = imported(LAUNCHER_PEFT_JA, "nemo", start=START, tokens_per_step=4096.0)
    assert samples(result) == [("2026-11-29T09:01:08.700Z", pytest.approx(4096 / 68.7, abs=1e-3), 1999)]
    assert "no timestamps: times from cumulative step times after 2026-11-29T09:00:00Z (--start)" in result.notes


def test_a_rounded_global_step_is_the_bars_own_count() -> None:
    result = imported(LAUNCHER_K8S, "nemo", start=START, tokens_per_step=4096.0)
    assert samples(result) == [("2026-11-29T09:00:01.900Z", pytest.approx(4096 / 1.9, abs=1e-3), 1999)]


def test_rounded_consumed_samples_are_not_a_batch_size() -> None:
    # LAUNCHER_K8S and its bar redrawn 16 steps later, as it would print them: 1,280,000 samples (640 a step) then
    # 1,290,240, rounded to 1.28e+6 and 1.29e+6, whose difference (10,000 / 16 = 625 a step) is not the batch size.
    later = LAUNCHER_K8S.replace("2000/603000", "2017/603000").replace("global_step=2e+3", "global_step=2.02e+3")
    later = later.replace("consumed_samples=1.28e+6", "consumed_samples=1.29e+6")
    with pytest.raises(LogError, match="give --tokens-per-step N"):
        imported(f"{LAUNCHER_K8S}\r{later}", "nemo", start=START)
    result = imported(f"{LAUNCHER_K8S}\r{later}", "nemo", start=START, tokens_per_step=640 * 2048.0)
    assert [step for _, _, step in samples(result)] == [1999, 2016]
