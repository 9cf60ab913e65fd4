"""What the formats share: timestamps, numbers, --start, and terminal colours."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.ingest.training_logs import LogError, parse_time
from bot.ingest.training_logs.common import clean, iso, number, timestamp
from tests.ingest.training_logs.support import imported, samples


@pytest.mark.parametrize(
    ("line", "expected", "zoned"),
    [
        ("[2022-03-11 02:06:58,985] [INFO] [logging.py:69:log_dist]", datetime(2022, 3, 11, 2, 6, 58, 985000), False),
        (" [2024-04-06 03:02:12] iteration       71/", datetime(2024, 4, 6, 3, 2, 12), False),
        ("2026-11-29T09:00:00.5Z step 1", datetime(2026, 11, 29, 9, 0, 0, 500000), True),
        ("2026-11-29 18:00:00+09:00 step 1", datetime(2026, 11, 29, 9, 0), True),
        ("06/12/2020 10:05:38 - INFO - transformers.trainer_tf -", datetime(2020, 6, 12, 10, 5, 38), False),
    ],
)
def test_a_lines_timestamp_in_utc(line: str, expected: datetime, zoned: bool) -> None:
    assert timestamp(line, 1) == (expected.replace(tzinfo=UTC), zoned)


def test_no_timestamp_and_a_glog_prefix_are_none() -> None:
    assert timestamp("[rank0]:[W518 16:04:29.072546845 socket.cpp:207] [c10d]", 1) == (None, False)


def test_a_timestamp_that_is_no_date_is_refused_naming_its_line() -> None:
    with pytest.raises(LogError, match="line 7: the timestamp '2024-13-45 10:00:00' is not a date and time"):
        timestamp("[2024-13-45 10:00:00] iteration 1/ 10 |", 7)


def test_numbers_as_logs_print_them() -> None:
    assert number("10,050", "tps", 1) == 10050.0
    assert number("5.361600E+03", "elapsed", 1) == 5361.6
    with pytest.raises(LogError, match="line 3: tps is inf: no rate can be read from it"):
        number("inf", "tps", 3)


def test_start_is_a_time_with_its_zone() -> None:
    assert parse_time("2026-11-29T09:00:00Z") == datetime(2026, 11, 29, 9, tzinfo=UTC)
    assert parse_time("2026-11-29T18:00:00+09:00") == datetime(2026, 11, 29, 9, tzinfo=UTC)
    with pytest.raises(ValueError, match="has no time zone"):
        parse_time("2026-11-29T09:00:00")
    with pytest.raises(ValueError, match="is not a time"):
        parse_time("monday")


def test_times_are_written_to_the_millisecond_ending_in_z() -> None:
    assert iso(datetime(2026, 11, 29, 9, 0, 0, 123456, tzinfo=UTC)) == "2026-11-29T09:00:00.123Z"
    assert iso(datetime(2026, 11, 29, 9, tzinfo=UTC)) == "2026-11-29T09:00:00Z"


def test_terminal_colours_are_not_in_the_way() -> None:
    line = (
        "\x1b[32m[titan] 2025-06-16 22:30:50,322 - root - INFO - \x1b[31mstep: 200  \x1b[32mloss:  6.1384  "
        "tps: 5,856\x1b[39m"
    )
    assert clean(line + "\r\n").endswith("tps: 5,856")
    assert samples(imported(line, "torchtitan")) == [("2025-06-16T22:30:50.322Z", 5856.0, 200)]
