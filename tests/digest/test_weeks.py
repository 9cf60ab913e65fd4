from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from bot.digest.weeks import digest_week, due_at, next_week, parse_week, previous_week, week_of, weeks_between

TOKYO = ZoneInfo("Asia/Tokyo")
NEW_YORK = ZoneInfo("America/New_York")
BERLIN = ZoneInfo("Europe/Berlin")


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def test_week_bounds_in_tokyo() -> None:
    # Sunday 2026-11-22 16:00 UTC is already Monday 01:00 JST: week 48 in Tokyo.
    week = week_of(utc(2026, 11, 22, 16, 0), TOKYO)
    assert week.label == "2026-W48"
    assert week.start == utc(2026, 11, 22, 15, 0)
    assert week.end == utc(2026, 11, 29, 15, 0)
    assert week.start.tzinfo is UTC
    assert week.hours == 168
    assert week.days[0].isoformat() == "2026-11-23"
    assert week.days[-1].isoformat() == "2026-11-29"
    # One second before Monday 00:00 JST is still week 47.
    assert week_of(utc(2026, 11, 22, 14, 59, 59), TOKYO).label == "2026-W47"


def test_week_of_accepts_any_aware_timezone() -> None:
    moment = datetime(2026, 11, 23, 0, 30, tzinfo=TOKYO)
    assert week_of(moment, TOKYO) == week_of(moment.astimezone(UTC), TOKYO)
    with pytest.raises(ValueError):
        week_of(datetime(2026, 11, 23), TOKYO)


def test_dst_weeks_in_new_york() -> None:
    spring = week_of(utc(2026, 3, 8, 12), NEW_YORK)
    assert spring.label == "2026-W10"
    assert spring.start == utc(2026, 3, 2, 5)  # Monday 00:00 EST
    assert spring.end == utc(2026, 3, 9, 4)  # Monday 00:00 EDT
    assert spring.hours == 167
    autumn = week_of(utc(2026, 11, 1, 12), NEW_YORK)
    assert autumn.label == "2026-W44"
    assert autumn.hours == 169
    assert next_week(spring).hours == 168


def test_dst_week_in_berlin() -> None:
    assert week_of(utc(2026, 3, 29, 12), BERLIN).hours == 167
    assert week_of(utc(2026, 10, 25, 12), BERLIN).hours == 169


def test_week_53_and_year_boundary() -> None:
    assert week_of(utc(2026, 12, 31, 12), TOKYO).label == "2026-W53"
    w53 = parse_week("2026-W53", TOKYO)
    assert w53.start == utc(2026, 12, 27, 15)  # Monday 2026-12-28 00:00 JST
    first = next_week(w53)
    assert first.label == "2027-W01"
    assert first.days[0].isoformat() == "2027-01-04"
    assert week_of(utc(2027, 1, 4, 12), TOKYO) == first
    assert previous_week(first) == w53
    # 2027-01-03 (a Sunday) still belongs to 2026-W53.
    assert week_of(utc(2027, 1, 3, 12), TOKYO).label == "2026-W53"


def test_parse_week() -> None:
    week = parse_week("2026-W48", TOKYO)
    assert week == week_of(utc(2026, 11, 25), TOKYO)
    assert parse_week("2026-w48", TOKYO) == week
    assert parse_week(" 2026-W8 ", TOKYO).label == "2026-W08"


@pytest.mark.parametrize("label", ["2026W48", "W48", "2026-48", "26-W48", "2026-W", "2026-W123", "last week"])
def test_parse_week_bad_format(label: str) -> None:
    with pytest.raises(ValueError, match="2026-W48"):
        parse_week(label, TOKYO)


@pytest.mark.parametrize("label", ["2027-W53", "2026-W54", "2026-W00"])
def test_parse_week_that_does_not_exist(label: str) -> None:
    with pytest.raises(ValueError, match="has no ISO week"):
        parse_week(label, TOKYO)


def test_previous_and_next_week_across_dst() -> None:
    week = parse_week("2026-W10", NEW_YORK)
    assert previous_week(week).label == "2026-W09"
    assert previous_week(week).end == week.start
    assert next_week(week).start == week.end
    assert next_week(previous_week(week)) == week


def test_digest_week_is_the_week_that_just_ended() -> None:
    # Monday 2026-11-30 09:00 JST: the digest covers W48 (Nov 23-29).
    now = datetime(2026, 11, 30, 9, 0, tzinfo=TOKYO)
    assert digest_week(now, TOKYO).label == "2026-W48"
    # Sunday 23:59 JST is still inside W48, so the digest then would cover W47.
    assert digest_week(datetime(2026, 11, 29, 23, 59, tzinfo=TOKYO), TOKYO).label == "2026-W47"


def test_due_at() -> None:
    week = parse_week("2026-W48", TOKYO)
    assert due_at(week, "mon 09:00") == utc(2026, 11, 30, 0, 0)  # Monday 09:00 JST
    assert due_at(week, "fri 17:30") == utc(2026, 12, 4, 8, 30)
    assert due_at(week, "sun 00:00") == utc(2026, 12, 5, 15, 0)
    assert due_at(week, " Mon 9:00 ") == utc(2026, 11, 30, 0, 0)
    with pytest.raises(ValueError):
        due_at(week, "monday 9")
    with pytest.raises(ValueError):
        due_at(week, "mon 24:00")


def test_due_at_across_dst() -> None:
    # W09 ends before the spring change; its digest is due in W10, after it.
    assert due_at(parse_week("2026-W09", NEW_YORK), "mon 09:00") == utc(2026, 3, 2, 14)  # EST
    assert due_at(parse_week("2026-W09", NEW_YORK), "sun 09:00") == utc(2026, 3, 8, 13)  # EDT
    # 02:30 on 2026-03-08 does not exist in New York: read with the EST offset, it lands at 03:30 EDT.
    assert due_at(parse_week("2026-W09", NEW_YORK), "sun 02:30") == utc(2026, 3, 8, 7, 30)
    # 01:30 on 2026-11-01 happens twice: the first (EDT) one counts.
    assert due_at(parse_week("2026-W43", NEW_YORK), "sun 01:30") == utc(2026, 11, 1, 5, 30)


def test_weeks_between() -> None:
    first = parse_week("2026-W52", TOKYO)
    last = parse_week("2027-W02", TOKYO)
    assert [w.label for w in weeks_between(first, last)] == ["2026-W52", "2026-W53", "2027-W01", "2027-W02"]
    assert [w.label for w in weeks_between(first, first)] == ["2026-W52"]
    assert weeks_between(last, first) == []


@pytest.mark.parametrize("label", ["0001-W01", "9999-W52"])
def test_a_week_at_the_ends_of_the_calendar_is_a_clear_error_not_an_overflow(label: str) -> None:
    with pytest.raises(ValueError, match="too far"):
        parse_week(label, ZoneInfo("Asia/Tokyo"))
