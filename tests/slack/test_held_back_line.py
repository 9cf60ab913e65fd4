"""A silence's "Held back" line: its detail is cut at a word, on one line, and never splits an entity."""

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from hypothesis import given
from hypothesis import strategies as st

from bot.slack.alerts import held_back_line

AT = datetime(2026, 12, 2, 12, 35, tzinfo=UTC)
TOKYO = ZoneInfo("Asia/Tokyo")


def _text(detail: str) -> str:
    return held_back_line("Training slowed down", detail, at=AT, tz=TOKYO).text


def test_a_long_detail_is_cut_at_a_word_not_mid_word() -> None:
    detail = "kumo-p5-train job llm-70b at 61 % of its rate since 21:35 JST).\nPeers " + "word " * 80
    line = _text(detail)
    assert "\n" not in line
    assert line.endswith("…")
    assert not line.rstrip("…").endswith("wor")


@given(st.text(alphabet="&<> ab\n\x00", max_size=400))
def test_no_entity_is_split_and_no_control_character_shown(detail: str) -> None:
    line = _text(detail)
    assert "\x00" not in line and "\n" not in line
    for piece in line.split("&")[1:]:
        assert piece.startswith(("amp;", "lt;", "gt;")), line
