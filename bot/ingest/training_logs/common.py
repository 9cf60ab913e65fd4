"""What every log format shares: the items a format reads from a line, and forgiving readers of numbers and times.

A format reads one line at a time (`LineReader.feed`) and says what it found there: `Progress` (a step's
figures), `Mark` (a run starting or ending) or `Setting` (a value of the run's configuration, e.g. the sequence
length in Megatron's argument dump). Everything else (warnings, NCCL noise, other ranks' chatter) it ignores.
Patterns are searched anywhere in a line, so prefixes such as `[rank0]:`, `0: ` or a logger's
`[2024-01-01 10:00:00,123] [INFO] [logging.py:96:log_dist] [Rank 0]` need no stripping; a line that is plainly
the format's progress line but whose figures do not read is refused with its line number (`LogError`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

# A number as logs print it: 1,234 (torchtitan), 5.361E+03 (Megatron), nan/inf (refused where a figure is needed).
NUMBER = r"[-+]?(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# 2024-04-06 03:02:12 / 2024-04-06T03:02:12.508Z / 2021-11-26 03:07:16,494 (+09:00) and 06/12/2020 10:05:38
# (Hugging Face's example scripts). glog's "E602 11:17:52" has no year and is not a timestamp here.
_ISO_TS = re.compile(
    r"(?<!\d)(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?\s?(Z|[+-]\d{2}:?\d{2}(?!\d))?"
)
_US_TS = re.compile(r"(?<!\d)(\d{2})/(\d{2})/(\d{4}) (\d{2}):(\d{2}):(\d{2})(?!\d)")


class LogError(ValueError):
    """What a log import cannot read, in one line naming the line of the log (when there is one)."""

    def __init__(self, line: int | None, problem: str) -> None:
        super().__init__(problem if line is None else f"line {line}: {problem}")
        self.line = line


@dataclass(frozen=True, kw_only=True)
class Progress:
    """One step's figures as a progress line gives them; every one optional (a format gives what it has)."""

    line: int
    step: int | None = None
    at: datetime | None = None  # the line's own timestamp (UTC)
    zoned: bool = False  # the timestamp named its zone (else it is read as UTC)
    elapsed: timedelta | None = None  # time since the run began, as a progress bar says it
    step_seconds: float | None = None  # seconds per step (a log interval's mean)
    tokens_per_second: float | None = None  # the log's own figure
    samples_per_second: float | None = None
    samples_per_step: float | None = None  # the global batch size, where the line says it
    consumed_samples: float | None = None  # samples seen so far (its growth per step is the global batch size)
    total: int | None = None  # the steps the bar counts to (an evaluation bar counts to another total)


@dataclass(frozen=True, kw_only=True)
class Mark:
    """A run starting (its setup is done, steps follow) or ending (training finished, not crashed)."""

    line: int
    kind: Literal["start", "end"]
    at: datetime | None = None
    zoned: bool = False


@dataclass(frozen=True, kw_only=True)
class Setting:
    """A value of the run's configuration that the log prints: what turns steps into samples and tokens."""

    line: int
    name: Literal["seq_length", "samples_per_step", "total_steps"]
    value: float


Item = Progress | Mark | Setting


class LineReader:
    """Reads one format's lines, in order; a subclass keeps what it needs between lines (e.g. the last step)."""

    def feed(self, text: str, line: int) -> list[Item]:  # pragma: no cover - every format overrides it
        raise NotImplementedError

    def finish(self, items: list[Item]) -> list[Item]:
        """The items once the whole log is read (a format may drop some it could only judge then)."""
        return items


def clean(text: str) -> str:
    """A line without its terminal colours and line ending."""
    return _ANSI.sub("", text).rstrip("\r\n")


def number(text: str, what: str, line: int, *, positive: bool = False) -> float:
    """A figure as the log printed it ("10,050", "5.4E+03"); refuses nan, inf, and (with positive) zero or less."""
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        raise LogError(line, f"{what} {text!r} is not a number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise LogError(line, f"{what} is {text}: no rate can be read from it")
    if positive and value <= 0:
        raise LogError(line, f"{what} is {text}: no rate can be read from it")
    return value


def find(pattern: re.Pattern[str], text: str, what: str, line: int, *, positive: bool = True) -> float | None:
    """The number the pattern's first group catches, or None where the line does not have it."""
    match = pattern.search(text)
    return None if match is None else number(match.group(1), what, line, positive=positive)


def timestamp(text: str, line: int) -> tuple[datetime | None, bool]:
    """The first timestamp in a line (UTC) and whether it named its zone; (None, False) where it has none."""
    match = _ISO_TS.search(text)
    if match is not None:
        year, month, day, hour, minute, second, fraction, zone = match.groups()
        micro = int((fraction or "0")[:6].ljust(6, "0"))
        shown = match.group(0)
    else:
        us = _US_TS.search(text)
        if us is None:
            return None, False
        month, day, year, hour, minute, second = us.groups()
        micro, zone, shown = 0, None, us.group(0)
    try:
        at = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), micro, tzinfo=UTC)
    except ValueError:
        raise LogError(line, f"the timestamp {shown!r} is not a date and time") from None
    if zone and zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        at -= sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
    return at, zone is not None


def parse_time(text: str) -> datetime:
    """A time given on the command line (`--start`): ISO-8601 with Z or an offset. ValueError says how to give it."""
    given = text.strip()
    try:
        at = datetime.fromisoformat(given[:-1] + "+00:00" if given[-1:] in ("Z", "z") else given)
    except ValueError:
        raise ValueError(f"{text!r} is not a time: give one such as 2026-11-29T09:00:00Z") from None
    if at.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone: end it with Z (UTC), e.g. 2026-11-29T09:00:00Z")
    return at.astimezone(UTC)


def iso(at: datetime) -> str:
    """ISO-8601 UTC ending in Z, to the millisecond at most (what the replay and the ingest API read)."""
    at = at.astimezone(UTC).replace(tzinfo=None)
    at = at.replace(microsecond=at.microsecond // 1000 * 1000)
    return at.isoformat(timespec="milliseconds" if at.microsecond else "seconds") + "Z"


@dataclass(frozen=True, kw_only=True)
class LogFormat:
    """One framework's log: how it is named on the command line and in messages, and its reader."""

    name: str  # --format
    label: str  # in messages
    example: str  # the shape of its progress line, for a log with none
    reader: type[LineReader]
    tokens_figure: str | None = None  # what the log's own tokens/s figure is, where it has one
