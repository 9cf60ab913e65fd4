"""Reading a log excerpt as `pitcrew throughput import` does, and the rows it gives in short."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bot.ingest.training_logs import FORMATS, Imported, ImportOptions, read_log


def imported(text: str, fmt: str, **options: Any) -> Imported:
    """An excerpt (split on newlines only, as the CLI reads a file) read as `fmt`; org o, cluster c, job j."""
    lines = text.removeprefix("\n").split("\n")
    return read_log(lines, FORMATS[fmt], ImportOptions(org="o", cluster="c", job="j", **options))


def samples(result: Imported) -> list[tuple[str, float, int | None]]:
    """(ts, rate, step) of each sample row."""
    unit = result.columns[4]
    return [
        (row["ts"], float(row[unit]), int(row["step"]) if row["step"] else None) for row in result.rows if row[unit]
    ]


def events(result: Imported) -> list[tuple[str, str]]:
    return [(row["ts"], row["event"]) for row in result.rows if row["event"]]


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)
