"""`/track show all`: its parsing, and its reply for any number of orgs within one message (pure)."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.digest.facts import UsageLine
from bot.home.usage import OrgUsage, usage_all_reply
from bot.subcommands import UsageError
from bot.tracking.parse import ShowTrack, parse_track_command

SINCE = datetime(2026, 11, 4, 13, 0, tzinfo=UTC)


def test_show_all_is_every_org_and_keeps_weeks() -> None:
    assert parse_track_command("show all") == ShowTrack(org=None, every=True)
    assert parse_track_command("show ALL --weeks 2") == ShowTrack(org=None, weeks=2, every=True)
    assert parse_track_command("show kumo-labs") == ShowTrack(org="kumo-labs")
    for text in ("show all kumo-labs", "show kumo-labs all", "show all all"):
        with pytest.raises(UsageError, match="at most one org, or `all`"):
            parse_track_command(text)


def test_a_line_per_org_with_its_share_of_quota_marked_from_80_percent() -> None:
    usage = [
        OrgUsage(
            "kumo",
            "Kumo",
            (UsageLine("p5.48xlarge", 900.0, 16, 1000.0, 0.9), UsageLine("m5.large", 3.5, None, None, None)),
        ),
        OrgUsage("fuji", "Fuji", ()),
    ]
    reply = usage_all_reply(usage, weeks=1, since=SINCE, tz=ZoneInfo("Asia/Tokyo"))
    text = "\n".join(b["text"]["text"] if "text" in b else b["elements"][0]["text"] for b in reply.blocks)
    assert "Usage against quota · 2 orgs · last 1 week" in text
    assert "*Kumo* (`kumo`): p5.48xlarge 900 of 1,000 quota-hours (*90%*) :warning: · m5.large 3.5 h (no quota)" in text
    assert "*Fuji* (`fuji`): no instance-hours and no quota" in text
    assert "1 org-type pair(s) at 80% or more" in text and "since 2026-11-04 22:00 JST" in text


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 300), st.integers(1, 4))
def test_any_number_of_orgs_fits_in_one_message(orgs: int, types: int) -> None:
    line = UsageLine("p5.48xlarge", 12345.6, 64, 43008.0, 0.287)
    usage = [OrgUsage(f"org-{i:03}", f"Organization number {i:03}", (line,) * types) for i in range(orgs)]
    reply = usage_all_reply(usage, weeks=4, since=SINCE, tz=ZoneInfo("UTC"))
    assert len(reply.blocks) <= 50
    assert all(len(b["text"]["text"]) <= 3000 for b in reply.blocks if b["type"] == "section")
    if orgs <= 100:  # the scale: every org is in the reply
        shown = "".join(b["text"]["text"] for b in reply.blocks if b["type"] == "section")
        assert all(f"`org-{i:03}`" in shown for i in range(orgs))
