"""Training logs turned into throughput samples (`pitcrew throughput import LOG --format F`), pure: lines in,
trace rows and what was assumed out.

One module per framework reads its lines into items (`common`); `convert` turns them into the rows of a trace
with the ingest API's sample keys, which `pitcrew throughput replay` reads (or replays directly with --format).
"""

from __future__ import annotations

from collections.abc import Iterable

from bot.ingest.training_logs import deepspeed, hf_trainer, megatron, nemo, torchtitan
from bot.ingest.training_logs.common import Item, LogError, LogFormat, clean, parse_time
from bot.ingest.training_logs.convert import Imported, ImportOptions, convert

FORMATS: dict[str, LogFormat] = {
    fmt.name: fmt for fmt in (megatron.FORMAT, nemo.FORMAT, torchtitan.FORMAT, deepspeed.FORMAT, hf_trainer.FORMAT)
}

__all__ = ["FORMATS", "ImportOptions", "Imported", "LogError", "LogFormat", "parse_time", "read_log"]


def read_log(lines: Iterable[str], fmt: LogFormat, options: ImportOptions) -> Imported:
    """A log's lines (split on newlines only: a progress bar's carriage returns stay inside, each redraw read) as
    a trace; raises LogError (one line, naming the log's line where there is one) on what it cannot read."""
    reader = fmt.reader()
    items: list[Item] = []
    for number, text in enumerate(lines, start=1):
        for segment in clean(text).split("\r"):
            if segment.strip():
                items.extend(reader.feed(segment, number))
    return convert(reader.finish(items), fmt, options)
