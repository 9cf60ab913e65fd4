"""torchtitan: its metrics line, one per log step, with the logger's timestamp.

    [rank0]:[titan] 2025-06-16 22:30:50,322 - root - INFO - step: 200  loss:  6.1384  memory: 49.66GiB(52.28%)
    tps: 5,856  tflops: 339.16  mfu: 34.29%

`tps` is torchtitan's own tokens per second per device (`wps` in its first versions): the rate of one GPU,
which is what the detector needs (it compares the job with itself). Every rank may print the line: one step is one
sample. `Training starts at step N` starts a run; `Training completed` ends it. The validator's line
(`validate step: 500  loss: ...  tps: ...`) is evaluation, not training, and is left out.
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
    find,
    timestamp,
)

_STEP = re.compile(r"(?<!validate )\bstep:\s*(\d+)\s+loss:")
_TPS = re.compile(rf"\b(?:tps|wps):\s*({NUMBER})")
_MARKS = ((re.compile(r"Training starts at step \d+"), "start"), (re.compile(r"\bTraining completed\b"), "end"))


class TorchtitanReader(LineReader):
    def feed(self, text: str, line: int) -> list[Item]:
        step = _STEP.search(text)
        if step is None:
            for pattern, kind in _MARKS:
                if pattern.search(text):
                    at, zoned = timestamp(text, line)
                    return [Mark(line=line, kind="start" if kind == "start" else "end", at=at, zoned=zoned)]
            return []
        tokens = find(_TPS, text, "tps", line, positive=False)
        if tokens is None:
            raise LogError(line, "a step line without tps (tokens per second): no rate can be read from it")
        at, zoned = timestamp(text[: step.start()], line)
        return [Progress(line=line, step=int(step.group(1)), at=at, zoned=zoned, tokens_per_second=tokens)]


FORMAT = LogFormat(
    name="torchtitan",
    label="torchtitan",
    example="step: 10  loss:  7.62  memory: 66.91GiB(37.51%)  tps: 10,050  tflops: 314.71  mfu: 13.99%",
    reader=TorchtitanReader,
    tokens_figure="tps, torchtitan's tokens per second per device",
)
