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


def shown(usage: list[OrgUsage]) -> str:
    reply = usage_all_reply(usage, weeks=1, since=SINCE, tz=ZoneInfo("Asia/Tokyo"))
    return "\n".join(b["text"]["text"] if "text" in b else b["elements"][0]["text"] for b in reply.blocks)


def test_a_line_per_org_with_what_it_holds_now_and_its_share_of_quota_marked_from_80_percent() -> None:
    usage = [
        OrgUsage(
            "kumo",
            "Kumo",
            (UsageLine("p5.48xlarge", 900.0, 16, 1000.0, 0.9), UsageLine("m5.large", 3.5, None, None, None)),
            held={"p5.48xlarge": 15, "m5.large": 1},
        ),
        OrgUsage("fuji", "Fuji", ()),
    ]
    text = shown(usage)
    assert "Usage against quota · 2 orgs · last 1 week" in text
    assert (
        "*Kumo* (`kumo`): p5.48xlarge: 15/16 held now, 900 of 1,000 quota-hours (*90%*) :warning: · "
        "m5.large: 1 held now, 3.5 h (no quota)"
    ) in text
    assert "*Fuji* (`fuji`): no instance-hours and no quota" in text
    assert "1 org-type pair(s) at 80% or more" in text and "since 2026-11-04 22:00 JST" in text


def test_a_share_shown_as_80_percent_is_counted_at_80_percent() -> None:
    """Issue 21: "0 at 80 % or more" stood above a line reading 80 % (a share of 0.7996)."""
    text = shown([OrgUsage("kumo", "Kumo", (UsageLine("p5.48xlarge", 799.6, 16, 1000.0, 0.7996),))])
    assert "(*80%*) :warning:" in text and "1 org-type pair(s) at 80% or more" in text
    below = shown([OrgUsage("kumo", "Kumo", (UsageLine("p5.48xlarge", 794.0, 16, 1000.0, 0.794),))])
    assert "(*79%*)" in below and ":warning:" not in below and "0 org-type pair(s)" in below


def test_a_type_with_a_quota_of_0_is_left_out_unless_it_was_used() -> None:
    """Issue 21: rows of "0 of 0 quota-hours (n/a)" said nothing."""
    unused = UsageLine("trn1.32xlarge", 0.0, 0, 0.0, None)
    text = shown([OrgUsage("kumo", "Kumo", (UsageLine("p5.48xlarge", 10.0, 16, 1000.0, 0.01), unused))])
    assert "trn1" not in text and "n/a" not in text and "quota of 0 that were not used are left out" in text
    used = shown(
        [OrgUsage("kumo", "Kumo", (UsageLine("trn1.32xlarge", 5.0, 0, 0.0, None),), held={"trn1.32xlarge": 1})]
    )
    assert "trn1.32xlarge: 1/0 held now, 5 h with a quota of 0 :warning:" in used and "1 org-type pair(s)" in used


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
