"""NeMo: PyTorch Lightning's progress bar (NeMo 1) and NeMo 2's `Training epoch 0, iteration N/M | ...` lines.

    Epoch 0: : 100%|██████████| 100/100 [07:57<00:00, reduced_train_loss=7.310, global_step=99.00,
    consumed_samples=25600.0, train_step_timing in s=3.590]
    Training epoch 0, iteration 120/149 | lr: 3e-05 | consumed_samples: 121 | global_batch_size: 1 |
    global_step: 120 | reduced_train_loss: 1.233 | train_step_timing in s: 0.03146

A line is progress when it has `train_step_timing in s` (the step time; an older NeMo's bar without it gives
its own `s/it`). The bar is redrawn with carriage
returns, many times a step: each redraw is read, and one step is one sample. The global batch size is on NeMo 2's
line, or the growth of `consumed_samples` per step; the sequence length is in the config NeMo prints
(`encoder_seq_length: 4096`). Neither form carries a timestamp of its own: times come from the step times (or
`--start`), or from a launcher's prefix before the line (`[2025-12-17 04:54:49,774] [INFO] Epoch 1: ...`), never
from a NeMo message glued after the bar (`...val_loss=0.212][NeMo I 2024-06-17 08:36:41 nlp_overrides:480] ...`).

The bar rounds its figures to three significant digits once that is shorter (tqdm's `format_num`): `global_step=2e+3`
is any step from 1995 to 2004, and `consumed_samples=2.56e+5` says too little to count samples by. Such a step is the
bar's own count less one where that rounds to it (the bar counts the steps done, from 1), and such a count of samples
is not used.
"""

from __future__ import annotations

import re

from bot.ingest.training_logs.common import (
    NUMBER,
    Item,
    LineReader,
    LogError,
    LogFormat,
    Mark,
    Progress,
    Setting,
    find,
    number,
    timestamp,
)

_TIMING = re.compile(rf"train_step_timing in s\s*[=:]\s*({NUMBER})")
_STEP = re.compile(rf"\bglobal_step\s*[=:]\s*({NUMBER})")
_ITERATION = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)")
_BATCH = re.compile(rf"\bglobal_batch_size\s*[=:]\s*({NUMBER})")
_CONSUMED = re.compile(rf"\bconsumed_samples\s*[=:]\s*({NUMBER})")
_SEQ_LENGTH = re.compile(r"\b(?:encoder_)?seq_length\s*[:=]\s*(\d+)\b")
_DONE = re.compile(r"`Trainer\.fit` stopped")
_BAR_RATE = re.compile(rf"\d+/\d+ \[[\d:]+<[^,\]]*,\s*({NUMBER})\s*(s/it|it/s)")
_BAR_COUNT = re.compile(r"(?<![\d/])(\d+)/\d+ \[")
_BEGINS = re.compile(r"\b(?:Training epoch|Epoch) \d+")  # where the progress starts: a timestamp is before it


class NemoReader(LineReader):
    def feed(self, text: str, line: int) -> list[Item]:
        bar_rate = _BAR_RATE.search(text) if "global_step=" in text else None
        if "train_step_timing in s" not in text and bar_rate is None:
            seq_length = _SEQ_LENGTH.search(text)
            if seq_length is not None:
                return [Setting(line=line, name="seq_length", value=float(seq_length.group(1)))]
            if _DONE.search(text):
                at, zoned = timestamp(text, line)
                return [Mark(line=line, kind="end", at=at, zoned=zoned)]
            return []
        seconds = find(_TIMING, text, "train_step_timing", line)
        if seconds is None and bar_rate is not None:  # an older NeMo logs no step timing: the bar's rate
            rate = number(bar_rate.group(1), bar_rate.group(2), line, positive=True)
            seconds = rate if bar_rate.group(2) == "s/it" else 1 / rate
        if seconds is None:
            raise LogError(line, "train_step_timing without a number: the step cannot be timed")
        step, rounded = _figure(_STEP, text, "global_step", line)
        if step is not None and rounded and (count := _BAR_COUNT.search(text)) is not None:
            done = int(count.group(1)) - 1
            step = done if _three_digits(done) == step else step
        iteration = _ITERATION.search(text)
        total = None
        if step is None and iteration is not None:
            step, total = float(iteration.group(1)), int(iteration.group(2))
        begins = _BEGINS.search(text)
        at, zoned = timestamp(text if begins is None else text[: begins.start()], line)
        consumed, rounded = _figure(_CONSUMED, text, "consumed_samples", line)
        if rounded:
            consumed = None
        return [
            Progress(
                line=line,
                step=None if step is None else round(step),
                total=total,
                at=at,
                zoned=zoned,
                step_seconds=seconds,
                samples_per_step=find(_BATCH, text, "global_batch_size", line),
                consumed_samples=consumed,
            )
        ]


def _figure(pattern: re.Pattern[str], text: str, what: str, line: int) -> tuple[float | None, bool]:
    """The figure the pattern catches (None where the line has none), and whether it was printed with an exponent
    (rounded to three digits by the bar)."""
    match = pattern.search(text)
    if match is None:
        return None, False
    return number(match.group(1), what, line), "e" in match.group(1).lower()


def _three_digits(value: int) -> float:
    return float(f"{value:.3g}")


FORMAT = LogFormat(
    name="nemo",
    label="NeMo",
    example="Epoch 0: ... global_step=99.00, consumed_samples=25600.0, train_step_timing in s=3.590]",
    reader=NemoReader,
)
