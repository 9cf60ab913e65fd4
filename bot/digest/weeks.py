"""ISO weeks in the program timezone, and when a week's digest is due.

A week runs from Monday 00:00 local to the next Monday 00:00 local, so people read "last week" the way their
calendar shows it; bounds are kept as aware UTC because storage and the rest of the code compare in UTC.
Local times are turned into instants with zoneinfo's default (fold=0), then normalised with astimezone(UTC): a
wall time in a DST gap is read with the offset from before the change (02:30 on a spring-forward night becomes
03:30 new time), and an ambiguous one (a fall-back night) is its first occurrence.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from bot.config import WEEKDAYS
from bot.digest.facts import Week

_LABEL = re.compile(r"(\d{4})-[Ww](\d{1,2})")
_SCHEDULE = re.compile(r"(\w{3}) (\d{1,2}):(\d{2})")


def local_midnight(day: date, tz: ZoneInfo) -> datetime:
    """The instant `day` starts in `tz`, as aware UTC (a DST day is 23 or 25 hours long)."""
    return datetime.combine(day, time(0), tzinfo=tz).astimezone(UTC)


def _week_from_monday(monday: date, tz: ZoneInfo) -> Week:
    iso = monday.isocalendar()
    return Week(
        label=f"{iso.year}-W{iso.week:02d}",
        start=local_midnight(monday, tz),
        end=local_midnight(monday + timedelta(days=7), tz),
        tz=tz,
    )


def _monday(week: Week) -> date:
    return week.start.astimezone(week.tz).date()


def week_of(moment: datetime, tz: ZoneInfo) -> Week:
    """The ISO week (in `tz`) that contains the aware instant `moment`."""
    if moment.tzinfo is None:
        raise ValueError("week_of needs an aware datetime")
    day = moment.astimezone(tz).date()
    return _week_from_monday(day - timedelta(days=day.weekday()), tz)


def parse_week(label: str, tz: ZoneInfo) -> Week:
    """A week from its label, "2026-W48" (a lowercase "w" is fine too)."""
    match = _LABEL.fullmatch(label.strip())
    if not match:
        raise ValueError(f"{label!r} is not a week: write it like 2026-W48")
    year, number = int(match[1]), int(match[2])
    try:
        monday = date.fromisocalendar(year, number, 1)
        return _week_from_monday(monday, tz)
    except ValueError:
        raise ValueError(f"{year} has no ISO week {number} (weeks run from W01 to W52 or W53)") from None
    except OverflowError:  # year 1 or 9999: its week runs off the calendar once shifted to UTC
        raise ValueError(f"{label.strip()} is too far from now to have a digest") from None


def previous_week(week: Week) -> Week:
    return _week_from_monday(_monday(week) - timedelta(days=7), week.tz)


def next_week(week: Week) -> Week:
    return _week_from_monday(_monday(week) + timedelta(days=7), week.tz)


def digest_week(now: datetime, tz: ZoneInfo) -> Week:
    """The week a digest posted at `now` covers: the one that just ended, never the week still running."""
    return previous_week(week_of(now, tz))


def due_at(week: Week, schedule: str) -> datetime:
    """When the digest covering `week` is due (aware UTC): in the following week, on the schedule's weekday and
    local time ("mon 09:00", as `DigestConfig.schedule`)."""
    match = _SCHEDULE.fullmatch(schedule.strip().lower())
    if not match or match[1] not in WEEKDAYS or int(match[2]) > 23 or int(match[3]) > 59:
        raise ValueError(f"schedule {schedule!r} must be a weekday and a time, e.g. 'mon 09:00'")
    day = _monday(week) + timedelta(days=7 + WEEKDAYS.index(match[1]))
    return datetime.combine(day, time(int(match[2]), int(match[3])), tzinfo=week.tz).astimezone(UTC)


def weeks_between(first: Week, last: Week) -> list[Week]:
    """Every week from `first` to `last`, both included, oldest first; empty when `last` is before `first`."""
    weeks: list[Week] = []
    week = first
    while week.start <= last.start:
        weeks.append(week)
        week = next_week(week)
    return weeks
