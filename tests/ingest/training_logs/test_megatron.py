"""Megatron-LM logs, read from real excerpts of its output."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.ingest.training_logs import LogError
from tests.ingest.training_logs.support import events, imported, samples

# https://github.com/NVIDIA/Megatron-LM/issues/756 (Mixtral 8x7B on 16 H100): a current Megatron-LM, a timestamp
# on every iteration line.
ISSUE_756 = """
 [2024-04-06 03:02:12] iteration       71/     100 | consumed samples:         9088 | elapsed time per iteration (ms): 5361.6 | throughput per GPU (TFLOP/s/GPU): 243.6 | learning rate: 1.420000E-05 | global batch size:   128 | lm loss: 1.818812E+00 | load_balancing_loss: 1.013377E+00 | loss scale: 1.0 | grad norm: 1.300 | num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 |
 [2024-04-06 03:02:18] iteration       72/     100 | consumed samples:         9216 | elapsed time per iteration (ms): 5470.7 | throughput per GPU (TFLOP/s/GPU): 238.7 | learning rate: 1.440000E-05 | global batch size:   128 | lm loss: 1.820313E+00 | load_balancing_loss: 1.019612E+00 | loss scale: 1.0 | grad norm: 1.305 | num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 |
 [2024-04-06 03:02:24] iteration       73/     100 | consumed samples:         9344 | elapsed time per iteration (ms): 5829.9 | throughput per GPU (TFLOP/s/GPU): 224.0 | learning rate: 1.460000E-05 | global batch size:   128 | lm loss: 1.798953E+00 | load_balancing_loss: 1.010977E+00 | loss scale: 1.0 | grad norm: 1.539 | num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 |
"""  # noqa: E501

# https://github.com/NVIDIA/nccl/issues/743 (Megatron-LM's BERT example "get stuck"): an older Megatron-LM, no
# timestamp on the iteration lines but one on `[before the start of training step]`; timer lines between. The
# issue's excerpt ends in the middle of the iteration-20 line, as here.
NCCL_743 = """
[after dataloaders are built] datetime: 2022-10-31 08:35:51 
done with setup ...
time (ms) | model-and-optimizer-setup: 294.00 | train/valid/test-data-iterators-setup: 3654.81
training ...
[before the start of training step] datetime: 2022-10-31 08:35:51 
 iteration       10/ 1000000 | consumed samples:           40 | elapsed time per iteration (ms): 356.2 | learning rate: 0.000E+00 | global batch size:     4 | loss scale: 8388608.0 | number of skipped iterations:  10 | number of nan iterations:   0 |
time (ms) | forward-compute: 193.77 | backward-compute: 73.02 | backward-params-all-reduce: 20.10 | backward-layernorm-all-reduce: 0.02 | backward-embedding-all-reduce: 0.04 | backward-reduce-model-grads: 20.22 | optimizer-copy-to-main-grad: 12.19 | optimizer-unscale-and-check-inf: 50.71 | optimizer: 63.01 | batch-generator: 25.27
 iteration       20/ 1000000 | consumed samples:           80 | elapsed time per iteration (ms): 140.6 | learning rate: 2.020E-08 | global batch size:     4 | lm loss: 1.005022E+01 | sop loss: 8.174902E-01 | loss scale: 32768.0 | grad norm: 217.199 | number of skipp
"""  # noqa: E501, W291

# https://github.com/epfLLM/Megatron-LLM/issues/11 (a fork two times slower than Megatron-LM): no timestamp at all.
ISSUE_EPFL_11 = """
 iteration      122/  250000 | consumed samples:       124928 | elapsed time per iteration (ms): 86545.2 | learning rate: 9.150E-06 | global batch size:  1024 | lm loss: 2.504220E+00 | loss scale: 1.0 | grad norm: 0.231 | number of skipped iterations:   0 | number of nan iterations:   0 |
 iteration      123/  250000 | consumed samples:       125952 | elapsed time per iteration (ms): 87871.6 | learning rate: 9.225E-06 | global batch size:  1024 | lm loss: 2.493043E+00 | loss scale: 1.0 | grad norm: 0.236 | number of skipped iterations:   0 | number of nan iterations:   0 |
 iteration      124/  250000 | consumed samples:       126976 | elapsed time per iteration (ms): 89474.8 | learning rate: 9.300E-06 | global batch size:  1024 | lm loss: 2.559583E+00 | loss scale: 1.0 | grad norm: 0.242 | number of skipped iterations:   0 | number of nan iterations:   0 |
 iteration      125/  250000 | consumed samples:       128000 | elapsed time per iteration (ms): 89075.2 | learning rate: 9.375E-06 | global batch size:  1024 | lm loss: 2.477393E+00 | loss scale: 1.0 | grad norm: 0.356 | number of skipped iterations:   0 | number of nan iterations:   0 |
"""  # noqa: E501

# https://github.com/NVIDIA/Megatron-LM/issues/5 (2019): the first Megatron-LM, no global batch size on the line.
ISSUE_5 = """
 iteration      100/   20000 | elapsed time per iteration (ms): 334.9 | learning rate 1.010E-06 | lm loss 1.020020E+01 | nsp loss 5.515259E-01 |
after 100 iterations memory (MB) | allocated: 5133.326171875 | max allocated: 7899.060546875 | cached: 9324.0 | max cached: 9324.0
time (ms) | forward: 132.49 | backward: 182.57 | optimizer: 18.18 | batch generator: 45.29 | data loader: 43.98
 iteration      200/   20000 | elapsed time per iteration (ms): 313.1 | learning rate 2.020E-06 | lm loss 9.444483E+00 | nsp loss 2.486780E-01 |
"""  # noqa: E501

# NCCL lines as https://github.com/google-research/distilling-step-by-step/issues/3 shows them.
NCCL_NOISE = """dsw-27183-759b57b4d6-kz2vc:261724:370 [7] NCCL INFO Connected all trees
dsw-27183-759b57b4d6-kz2vc:261724:370 [7] NCCL INFO threadThresholds 8/8/64 | 64/8/64 | 8/8/512"""

START = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)


def test_timestamped_lines_give_samples_per_second_without_tokens_per_step() -> None:
    result = imported(ISSUE_756, "megatron")
    assert result.columns[4] == "samples_per_second"
    assert samples(result) == [  # global batch size 128 / the interval's mean step time
        ("2024-04-06T03:02:12Z", pytest.approx(128 / 5.3616, abs=1e-3), 71),
        ("2024-04-06T03:02:18Z", pytest.approx(128 / 5.4707, abs=1e-3), 72),
        ("2024-04-06T03:02:24Z", pytest.approx(128 / 5.8299, abs=1e-3), 73),
    ]
    assert any("give --tokens-per-step N for tokens/s" in note for note in result.notes)


def test_tokens_per_step_turns_step_times_into_tokens_per_second() -> None:
    result = imported(ISSUE_756, "megatron", tokens_per_step=128 * 4096.0)
    assert result.columns[4] == "tokens_per_second"
    assert [rate for _, rate, _ in samples(result)] == [
        pytest.approx(524288 / 5.3616, abs=1e-3),
        pytest.approx(524288 / 5.4707, abs=1e-3),
        pytest.approx(524288 / 5.8299, abs=1e-3),
    ]
    assert "tokens per step from --tokens-per-step (524288) over the step time" in result.notes


def test_the_sequence_length_in_the_argument_dump_gives_tokens_per_step() -> None:
    # The dump's shape, as megatron/training/arguments.py (_print_args) prints it, before the real lines.
    dump = "------------------------ arguments ------------------------\n  seq_length ........................ 4096\n"
    result = imported(dump + ISSUE_756, "megatron")
    assert samples(result)[0][1] == pytest.approx(128 * 4096 / 5.3616, abs=1e-3)
    assert "tokens per step = the global batch size x the sequence length the log prints" in result.notes


def test_the_start_of_training_times_the_steps_of_a_log_without_line_timestamps() -> None:
    result = imported(NCCL_743, "megatron")
    assert events(result) == [("2022-10-31T08:35:51Z", "start")]
    assert samples(result) == [  # 10 steps of 356.2 ms after the start, then 10 of 140.6 ms
        ("2022-10-31T08:35:54.562Z", pytest.approx(4 / 0.3562, abs=1e-3), 10),
        ("2022-10-31T08:35:55.968Z", pytest.approx(4 / 0.1406, abs=1e-3), 20),
    ]
    assert any("lines without one placed by the step times since the last" in note for note in result.notes)


def test_no_timestamp_at_all_places_the_steps_after_start() -> None:
    result = imported(ISSUE_EPFL_11, "megatron", start=START)
    assert [ts for ts, _, _ in samples(result)] == [  # 86.5452 s, then each interval's own step time
        "2026-11-29T09:01:26.545Z",
        "2026-11-29T09:02:54.417Z",
        "2026-11-29T09:04:23.892Z",
        "2026-11-29T09:05:52.967Z",
    ]
    assert "no timestamps: times from cumulative step times after 2026-11-29T09:00:00Z (--start)" in result.notes


def test_no_timestamp_and_no_start_ends_the_last_step_when_the_file_last_changed() -> None:
    result = imported(ISSUE_EPFL_11, "megatron", last_change=datetime(2026, 11, 29, 12, 0, tzinfo=UTC))
    assert samples(result)[-1][0] == "2026-11-29T12:00:00Z"
    assert samples(result)[0][0] == "2026-11-29T11:55:33.578Z"  # 352.9668 s - 86.5452 s before
    with pytest.raises(LogError, match="the log has no timestamps: give --start TIME"):
        imported(ISSUE_EPFL_11, "megatron")


def test_rank_prefixes_and_nccl_lines_change_nothing() -> None:
    prefixed = "\n".join(f"0: {line}" if line else line for line in ISSUE_EPFL_11.split("\n"))  # srun --label
    noisy = NCCL_NOISE + "\n" + prefixed
    expected = samples(imported(ISSUE_EPFL_11, "megatron", start=START))
    assert samples(imported(noisy, "megatron", start=START)) == expected


def test_a_line_without_a_batch_size_needs_tokens_per_step() -> None:
    with pytest.raises(LogError) as raised:
        imported(ISSUE_5, "megatron", start=START)
    assert str(raised.value) == (
        "the log says how long a step takes but not how many samples or tokens a step holds: give --tokens-per-step N"
    )
    result = imported(ISSUE_5, "megatron", start=START, tokens_per_step=8 * 512.0)
    assert samples(result) == [
        ("2026-11-29T09:00:33.490Z", pytest.approx(4096 / 0.3349, abs=1e-3), 100),
        ("2026-11-29T09:01:04.800Z", pytest.approx(4096 / 0.3131, abs=1e-3), 200),
    ]


def test_a_restart_is_a_new_run_and_the_end_of_training_an_end_row() -> None:
    restarted = NCCL_743 + ISSUE_756.replace("iteration       7", "iteration        ")  # back to steps 1-3
    done = restarted + "[after training is done] datetime: 2024-04-06 03:05:00 \n"
    result = imported(done, "megatron")
    assert [event for _, event in events(result)] == ["start", "start", "end"]
    assert events(result)[-1] == ("2024-04-06T03:05:00Z", "end")
    assert "2 runs: training starts again at line 10" in result.notes
    assert "training finished at line 13: an end row follows the last sample" in result.notes


def test_an_iteration_line_whose_step_time_does_not_read_is_refused_naming_its_line() -> None:
    broken = ISSUE_756.replace("(ms): 5470.7", "(ms): nan")  # the real line 2, its figure made unreadable
    with pytest.raises(LogError) as raised:
        imported(broken, "megatron")
    assert str(raised.value) == "line 2: elapsed time per iteration (ms) is nan: no rate can be read from it"


def test_a_log_of_another_format_says_so() -> None:
    with pytest.raises(LogError) as raised:
        imported(NCCL_NOISE, "megatron")
    assert str(raised.value).startswith("no line reads as Megatron-LM progress (like `iteration  100/ 1000 |")
    assert str(raised.value).endswith("is --format right?")


# https://github.com/deepspeedai/DeepSpeed/issues/3742 (a GPT-NeoX run): GPT-NeoX's own iteration line, which gives
# no global batch size but its samples/s (after DeepSpeed's timer line, whose time it does not carry).
NEOX_3742 = """
[2023-07-25 21:03:17,269] [INFO] [timer.py:215:stop] epoch=0/micro_step=34/global_step=34, RunningAvgSamplesPerSec=7.864669709950182, CurrSamplesPerSec=8.00912418308922, MemAllocated=59.65GB, MaxMemAllocated=63.31GB
 samples/sec: 7.799 | iteration       34/   10000 | elapsed time per iteration (ms): 4103.1 | learning rate: 2.111E-06 | approx flops per GPU: 112.9TFLOPS | lm_loss: 1.118665E+01 | number of skipped iterations:   0 | number of nan iterations:   0 |
"""  # noqa: E501

# https://github.com/argonne-lcf/Megatron-DeepSpeed/blob/main/ALCF/README.md (AuroraGPT on Polaris): the line of
# Megatron-DeepSpeed, with `actual seqlen`, `samples per second` and `tgs`, between DeepSpeed's lines.
ALCF_README = """
        [2024-03-07 15:27:02,646] [INFO] [timer.py:260:stop] epoch=0/micro_step=199/global_step=199, RunningAvgSamplesPerSec=58.730622229657506, CurrSamplesPerSec=61.35304005128382, MemAllocated=6.01GB, MaxMemAllocated=19.52GB
        iteration      199/  317892 | consumed samples:       152832 | consumed tokens:    625999872 | elapsed time per iteration (ms): 14287.5 | learning rate: 2.407E-04 | global batch size:   768 | lm loss: 5.905366E+00 | loss scale: 8192.0 | actual seqlen:  4096 | number of skipped iterations:   0 | number of nan iterations:   0 | samples per second: 53.753 | tokens per gpu per second (tgs): 1146.733 | TFLOPs: 69.85 |
        [2024-03-07 15:27:15,063] [INFO] [logging.py:96:log_dist] [Rank 0] step=200, skipped=4, lr=[0.000240653265864008, 0.000240653265864008], mom=[(0.9, 0.999), (0.9, 0.999)]
        [2024-03-07 15:27:17,188] [INFO] [timer.py:260:stop] epoch=0/micro_step=200/global_step=200, RunningAvgSamplesPerSec=58.730745476291396, CurrSamplesPerSec=58.75503515561452, MemAllocated=6.01GB, MaxMemAllocated=19.52GB
        iteration      200/  317892 | consumed samples:       153600 | consumed tokens:    629145600 | elapsed time per iteration (ms): 14541.4 | learning rate: 2.407E-04 | global batch size:   768 | lm loss: 5.897035E+00 | loss scale: 8192.0 | actual seqlen:  4096 | number of skipped iterations:   0 | number of nan iterations:   0 | samples per second: 52.815 | tokens per gpu per second (tgs): 1126.713 | TFLOPs: 68.63 |
"""  # noqa: E501


def test_gpt_neox_lines_give_their_own_samples_per_second() -> None:
    result = imported(NEOX_3742, "megatron", start=START)
    assert result.columns[4] == "samples_per_second"
    assert samples(result) == [("2026-11-29T09:00:04.103Z", pytest.approx(7.799), 34)]
    with_tokens = imported(NEOX_3742, "megatron", start=START, tokens_per_step=32 * 2048.0)
    assert samples(with_tokens)[0][1] == pytest.approx(32 * 2048 / 4.1031, abs=1e-3)


def test_gpt_neox_argument_dump_gives_tokens_per_step() -> None:
    # The dump's shape, as GPT-NeoX prints it (megatron/neox_arguments/arguments.py, NeoXArgs.print): the value
    # padded with dots to column 64, then whether it is the default.
    dump = (
        "  seq_length ...................... 2048........................updated\n"
        "  train_batch_size ................ 32..........................updated\n"
    )
    result = imported(dump + NEOX_3742, "megatron", start=START)
    assert result.columns[4] == "tokens_per_second"
    assert samples(result)[0][1] == pytest.approx(32 * 2048 / 4.1031, abs=1e-3)
    assert "tokens per step = the global batch size x the sequence length the log prints" in result.notes


def test_megatron_deepspeed_lines_give_tokens_per_second_from_their_actual_seqlen() -> None:
    result = imported(ALCF_README, "megatron", start=START)
    assert result.columns[4] == "tokens_per_second"
    assert samples(result) == [  # 768 samples of 4096 tokens a step
        ("2026-11-29T09:00:14.287Z", pytest.approx(768 * 4096 / 14.2875, abs=1e-3), 199),
        ("2026-11-29T09:00:28.829Z", pytest.approx(768 * 4096 / 14.5414, abs=1e-3), 200),
    ]
