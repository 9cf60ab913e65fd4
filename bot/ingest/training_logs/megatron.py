"""Megatron-LM (and Megatron-DeepSpeed, GPT-NeoX): its `iteration N/ M | ...` lines, printed every log interval.

    [2024-04-06 03:02:12] iteration       71/     100 | consumed samples:         9088 | elapsed time per
    iteration (ms): 5361.6 | throughput per GPU (TFLOP/s/GPU): 243.6 | learning rate: 1.420000E-05 | global batch
    size:   128 | lm loss: 1.818812E+00 | ...

The step time is the interval's mean (`elapsed time per iteration (ms)`); the global batch size is on the line,
the sequence length in the argument dump at the start (`  seq_length ........ 4096`), so tokens per step need no
flag. Older versions print no timestamp on the line but do on `[before the start of training step] datetime:`
(a start) and `[after training is done] datetime:` (an end), from which the steps are timed.

GPT-NeoX prints no global batch size but its own rate (` samples/sec: 7.799 | iteration  34/ 10000 | ...`), and
its argument dump ends each value in dots and `updated`/`default`; Megatron-DeepSpeed adds `actual seqlen:` (the
sequence length) and `samples per second:` to the line.
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
    timestamp,
)

_ITERATION = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|")
_ELAPSED = re.compile(rf"elapsed time per iteration \(ms\):\s*({NUMBER})")
_BATCH = re.compile(rf"global batch size:\s*({NUMBER})")
_CONSUMED = re.compile(rf"consumed samples:\s*({NUMBER})")
_SAMPLES = re.compile(rf"\bsamples(?:/sec| per second):\s*({NUMBER})")  # GPT-NeoX, Megatron-DeepSpeed
_SEQLEN = re.compile(rf"\bactual seqlen:\s*({NUMBER})")  # Megatron-DeepSpeed
# The argument dump; GPT-NeoX pads the value with dots and says whether it is the default.
_ARGUMENT = re.compile(r"\b(seq_length|global_batch_size|train_batch_size)\s\.{2,}\s+(\d+)\.*(?:updated|default)?\s*$")
_MARKS = (
    (re.compile(r"\[before the start of training step\] datetime:"), "start"),
    (re.compile(r"\[after training is done\] datetime:"), "end"),
)


class MegatronReader(LineReader):
    def feed(self, text: str, line: int) -> list[Item]:
        iteration = _ITERATION.search(text)
        if iteration is None:
            argument = _ARGUMENT.search(text)
            if argument is not None:
                value = float(argument.group(2))
                if argument.group(1) == "seq_length":
                    return [Setting(line=line, name="seq_length", value=value)]
                return [Setting(line=line, name="samples_per_step", value=value)]
            for pattern, kind in _MARKS:
                if pattern.search(text):
                    at, zoned = timestamp(text, line)
                    return [Mark(line=line, kind="start" if kind == "start" else "end", at=at, zoned=zoned)]
            return []
        seconds = find(_ELAPSED, text, "elapsed time per iteration (ms)", line)
        if seconds is None:
            raise LogError(line, "an iteration line without 'elapsed time per iteration (ms)': it cannot be timed")
        at, zoned = timestamp(text[: iteration.start()], line)
        items: list[Item] = []
        if (seqlen := find(_SEQLEN, text, "actual seqlen", line)) is not None:
            items.append(Setting(line=line, name="seq_length", value=seqlen))
        return [
            *items,
            Progress(
                line=line,
                step=int(iteration.group(1)),
                total=int(iteration.group(2)),
                at=at,
                zoned=zoned,
                step_seconds=seconds / 1000,
                samples_per_step=find(_BATCH, text, "global batch size", line),
                consumed_samples=find(_CONSUMED, text, "consumed samples", line, positive=False),
                samples_per_second=find(_SAMPLES, text, "samples/sec", line),
            ),
        ]


FORMAT = LogFormat(
    name="megatron",
    label="Megatron-LM",
    example="iteration  100/ 1000 | consumed samples: ... | elapsed time per iteration (ms): ... | "
    "global batch size: ...",
    reader=MegatronReader,
)
