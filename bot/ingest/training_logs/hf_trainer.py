"""Hugging Face Trainer: its tqdm progress bar, the `***** Running training *****` header, and its dict lines.

      8%|█████     | 1999/24128 [1:52:09<20:27:23,  3.33s/it]
    {'loss': 2.119, 'grad_norm': 37.65, 'learning_rate': 4.58e-05, 'epoch': 0.25}
    {'train_runtime': 27172.2581, 'train_samples_per_second': 0.887, 'train_steps_per_second': 0.444, ...}

The bar gives the step, the time since training began and the step time (`s/it`, or `it/s`); it is redrawn with
carriage returns, each redraw read. An evaluation or tokenizing bar counts to another total: only the training
bar's is kept (`Total optimization steps` in the header, or the bar that advanced furthest). Samples per step are
the header's `Total train batch size` (or the summary's samples/s over its steps/s); tokens per step need
`--tokens-per-step`. A dict line with a `step` and a timestamp (a logging callback, TF's Trainer) is a timed step;
the `train_runtime` summary ends the run. Loss dicts carry no time and are skipped.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from datetime import timedelta

from bot.ingest.training_logs.common import (
    NUMBER,
    Item,
    LineReader,
    LogFormat,
    Mark,
    Progress,
    Setting,
    number,
    timestamp,
)

_BAR = re.compile(rf"(?<![\d/])(\d+)/(\d+) \[(?:(\d+):)?(\d+):(\d+)<[^,\]]*,\s*({NUMBER})\s*(s/it|it/s)")
_RUNNING = re.compile(r"\*+ ?Running training ?\*+")
_BATCH = re.compile(r"Total train batch size[^=]*=\s*([\d,]+)")
_TOTAL = re.compile(r"Total optimization steps = ([\d,]+)")
_DICT = re.compile(r"\{'[^{}]*\}")
_DONE = re.compile(r"Training completed\. Do not forget")


class HfTrainerReader(LineReader):
    def __init__(self) -> None:
        self.total: int | None = None  # the training bar's, from the header

    def feed(self, text: str, line: int) -> list[Item]:
        if (bar := _BAR.search(text)) is not None:
            step, total = int(bar.group(1)), int(bar.group(2))
            if step == 0 or (self.total is not None and total != self.total):
                return []  # nothing done yet; or an evaluation bar
            hours, minutes, seconds = (int(part or 0) for part in bar.groups()[2:5])
            rate = number(bar.group(6), bar.group(7), line, positive=True)
            at, zoned = timestamp(text[: bar.start()], line)
            return [
                Progress(
                    line=line,
                    step=step,
                    total=total,
                    at=at,
                    zoned=zoned,
                    elapsed=timedelta(hours=hours, minutes=minutes, seconds=seconds),
                    step_seconds=rate if bar.group(7) == "s/it" else 1 / rate,
                )
            ]
        if _RUNNING.search(text):
            at, zoned = timestamp(text, line)
            return [Mark(line=line, kind="start", at=at, zoned=zoned)]
        if (batch := _BATCH.search(text)) is not None:
            return [Setting(line=line, name="samples_per_step", value=float(batch.group(1).replace(",", "")))]
        if (optimization := _TOTAL.search(text)) is not None:
            self.total = int(optimization.group(1).replace(",", ""))
            return [Setting(line=line, name="total_steps", value=float(self.total))]
        if _DONE.search(text):
            at, zoned = timestamp(text, line)
            return [Mark(line=line, kind="end", at=at, zoned=zoned)]
        if (found := _DICT.search(text)) is not None:
            return self._dict(found.group(0), text, line)
        return []

    def _dict(self, shown: str, text: str, line: int) -> list[Item]:
        try:
            logged = ast.literal_eval(shown)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return []  # not a metrics dict after all
        if not isinstance(logged, dict):
            return []
        figures = {key: _figure(value) for key, value in logged.items() if isinstance(key, str)}
        at, zoned = timestamp(text, line)
        if "train_runtime" in figures:
            items: list[Item] = []
            samples, steps = figures.get("train_samples_per_second"), figures.get("train_steps_per_second")
            if samples and steps:
                items.append(Setting(line=line, name="samples_per_step", value=samples / steps))
            return [*items, Mark(line=line, kind="end", at=at, zoned=zoned)]
        step = figures.get("step")
        if step is not None and at is not None:
            return [Progress(line=line, step=round(step), at=at, zoned=zoned)]
        return []

    def finish(self, items: list[Item]) -> list[Item]:
        if self.total is not None:
            return items
        reached: dict[int, set[int]] = defaultdict(set)  # without the header: the bar that advanced furthest
        for item in items:
            if isinstance(item, Progress) and item.total is not None and item.step is not None:
                reached[item.total].add(item.step)
        if len(reached) < 2:
            return items
        training = max(reached, key=lambda total: (len(reached[total]), total))
        return [item for item in items if not (isinstance(item, Progress) and item.total not in (None, training))]


def _figure(value: object) -> float | None:
    """A dict's value: a number, or a number in a string (recent Trainers log `'loss': '0.1315'`)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


FORMAT = LogFormat(
    name="hf-trainer",
    label="Hugging Face Trainer",
    example=" 8%|████      | 1999/24128 [1:52:09<20:27:23,  3.33s/it]",
    reader=HfTrainerReader,
)
