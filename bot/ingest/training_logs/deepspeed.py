"""DeepSpeed: the engine's progress report, its throughput timer, and the pipeline engine's step line.

    [2023-07-25 21:03:21,037] [INFO] [logging.py:96:log_dist] [Rank 0] step=35, skipped=0, lr=[...], mom=[...]
    [2023-07-25 21:03:17,269] [INFO] [timer.py:215:stop] epoch=0/micro_step=34/global_step=34,
    RunningAvgSamplesPerSec=7.86, CurrSamplesPerSec=8.009, MemAllocated=59.65GB, MaxMemAllocated=63.31GB
    [2022-08-29 06:58:56,176] [INFO] [timer.py:198:stop] 0/20, RunningAvgSamplesPerSec=232.7, CurrSamplesPerSec=227.5,
    MemAllocated=0.36GB, MaxMemAllocated=15.06GB                                          (up to 0.7)
    [2022-03-11 02:06:58,985] [INFO] [timer.py:189:stop] 0/40, SamplesPerSec=83.48, ...   (older)
    steps: 100 loss: 2.1034 iter time (s): 1.234 samples/sec: 25.932                    (pipeline engine)

Samples/s is the timer's `CurrSamplesPerSec` (`SamplesPerSec` in older versions) or the pipeline's `samples/sec`; a
`step=` report without a timer gives the time between reports. Up to 0.7 the timer's line names no global step
(its `0/40` counted micro steps): it is the step of the report just before it, or, in a log with no reports at all,
its own count. `train_batch_size` from the config DeepSpeed prints turns samples into steps, and with
`--tokens-per-step` into tokens. The flops profiler's table (one step) is not a series and is left out.
"""

from __future__ import annotations

import re
from dataclasses import replace

from bot.ingest.training_logs.common import NUMBER, Item, LineReader, LogFormat, Progress, Setting, number, timestamp

_REPORT = re.compile(r"\bstep=(\d+), skipped=\d+")
_TIMER = re.compile(rf"global_step=(\d+), RunningAvgSamplesPerSec=(?:{NUMBER}), CurrSamplesPerSec=({NUMBER})")
# Up to 0.7: `epoch/count, SamplesPerSec=` (older), or `epoch/count, RunningAvgSamplesPerSec=, CurrSamplesPerSec=`
_OLD_TIMER = re.compile(
    rf"\b\d+/(\d+), (?:SamplesPerSec=({NUMBER})|RunningAvgSamplesPerSec=(?:{NUMBER}), CurrSamplesPerSec=({NUMBER}))"
)
_PIPELINE = re.compile(
    rf"\bsteps?:\s*(\d+)(?:\s*/\s*\d+)?\s+loss:.*?iter time \(s\):\s*({NUMBER})\s+samples/sec:\s*({NUMBER})"
)
_BATCH = re.compile(r"\btrain_batch_size\s\.{2,}\s+(\d+)")


class DeepSpeedReader(LineReader):
    def __init__(self) -> None:
        self.step: int | None = None  # the last report's: an old timer line belongs to it
        self.timed = False  # the last report has its old timer line already
        self.reports = False  # the log has progress reports (else an old timer line's own count is its step)
        self.counted: set[int] = set()  # the lines whose old timer line gave its own count as the step

    def feed(self, text: str, line: int) -> list[Item]:
        at, zoned = timestamp(text, line)
        if (report := _REPORT.search(text)) is not None:
            self.step, self.timed, self.reports = int(report.group(1)), False, True
            return [Progress(line=line, step=self.step, at=at, zoned=zoned)]
        if (timer := _TIMER.search(text)) is not None:
            rate = number(timer.group(2), "CurrSamplesPerSec", line, positive=True)
            return [Progress(line=line, step=int(timer.group(1)), at=at, zoned=zoned, samples_per_second=rate)]
        if (old := _OLD_TIMER.search(text)) is not None:
            shown, what = (old.group(2), "SamplesPerSec") if old.group(2) else (old.group(3), "CurrSamplesPerSec")
            rate = number(shown, what, line, positive=True)
            step = self.step if not self.timed else None  # a second timer line since the report: step unknown
            if not self.reports:
                step = int(old.group(1))
                self.counted.add(line)
            self.timed = True
            return [Progress(line=line, step=step, at=at, zoned=zoned, samples_per_second=rate)]
        if (pipeline := _PIPELINE.search(text)) is not None:
            return [
                Progress(
                    line=line,
                    step=int(pipeline.group(1)),
                    at=at,
                    zoned=zoned,
                    step_seconds=number(pipeline.group(2), "iter time (s)", line, positive=True),
                    samples_per_second=number(pipeline.group(3), "samples/sec", line, positive=True),
                )
            ]
        if (batch := _BATCH.search(text)) is not None:
            return [Setting(line=line, name="samples_per_step", value=float(batch.group(1)))]
        return []

    def finish(self, items: list[Item]) -> list[Item]:
        """In a log with reports, an old timer line before the first one counted micro steps (with gradient
        accumulation, 4 x the step): its count is no step, or the first report's would go back, a restart."""
        if not self.reports or not self.counted:
            return items
        return [
            replace(item, step=None) if isinstance(item, Progress) and item.line in self.counted else item
            for item in items
        ]


FORMAT = LogFormat(
    name="deepspeed",
    label="DeepSpeed",
    example="[Rank 0] step=10, skipped=0, lr=[...] or epoch=0/micro_step=10/global_step=10, "
    "RunningAvgSamplesPerSec=..., CurrSamplesPerSec=...",
    reader=DeepSpeedReader,
)
