"""The audit log as lines, and text made safe to show: pure functions, no Slack."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot import audit_view, mrkdwn
from bot.clusters.progress import Kind
from bot.commands import ShowAudit, UsageError, parse_cluster_command
from bot.digest import render
from bot.slack import alerts, blocks
from handlers import errors

TOKYO = ZoneInfo("Asia/Tokyo")
AT = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)  # 18:30 in Tokyo


@dataclass
class Entry:
    command: str
    text: str
    outcome: str = "allowed"
    detail: str = ""
    user_id: str = "U0ALICE01"
    at: datetime = AT


def line(entry: Entry, *, ids: bool = False) -> str:
    return audit_view.describe(entry, tz=TOKYO, ids=ids).render()


def test_the_copied_names_are_the_ones_the_writers_use() -> None:
    assert (audit_view.CONFIRM, audit_view.CANCEL) == (blocks.CONFIRM_ACTION, blocks.CANCEL_ACTION)
    assert (audit_view.DELETE_OPEN, audit_view.DELETE_VIEW) == (blocks.DELETE_OPEN_ACTION, blocks.DELETE_VIEW)
    assert (audit_view.TRACK_VIEW, audit_view.TRACK_ADD) == (render.TRACK_VIEW, render.TRACK_ADD_ACTION)
    assert set(audit_view.KINDS) == {kind.value for kind in Kind}
    assert (audit_view.ACK, audit_view.UNSILENCE) == (alerts.ACK_ACTION, alerts.UNSILENCE_ACTION)
    assert (audit_view.ALERT_REPLACE, audit_view.ALERT_REBOOT) == (alerts.REPLACE_ACTION, alerts.REBOOT_ACTION)
    assert tuple(alerts.SILENCE_ACTION.format(hours=h) for h in alerts.SILENCE_HOURS) == audit_view.SILENCES
    assert (audit_view.CLICK, audit_view.FORM) == (errors.CLICK, errors.FORM)


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (Entry("/cluster", "list"), ":white_check_mark: Dec 01 18:30 · <@U0ALICE01> ran `/cluster list` · *ok*"),
        (
            Entry("operation_confirm", "scale kumo-labs/kumo-p5-train workers 2→4", detail="confirmed"),
            "<@U0ALICE01> confirmed a scale of `kumo-labs/kumo-p5-train workers 2→4` · *ok*",
        ),
        (
            Entry("operation_cancel", "launch kumo-labs/new (hyperpod-p5)", "done", "cancelled"),
            "<@U0ALICE01> cancelled a launch of `kumo-labs/new (hyperpod-p5)` · *done*",
        ),
        (
            Entry("stop_fleet", "stop_fleet kumo-labs/kumo-p5-dev", "failed", "timed out"),
            "<@U0ALICE01>'s compute fleet stop of `kumo-labs/kumo-p5-dev` ended · *failed*: timed out",
        ),
        (
            Entry("alert_ack", "episode 12 kumo-labs/kumo-p5-train i-0abc", "done", "acknowledged"),
            "<@U0ALICE01> acknowledged the alert on `kumo-labs/kumo-p5-train` (node `i-0abc`) · *done*",
        ),
        (
            Entry("alert_silence", "episode 12 kumo-labs/x i-0abc", "done", "4 h, until 2026-12-01 13:30 UTC"),
            "silenced alerts of `kumo-labs/x` (node `i-0abc`) · *done*: 4 h, until Dec 01 22:30",
        ),
        (
            Entry("alert_unsilence", "silence 3 kumo-labs/kumo-p5-train", "done", "ended early"),
            "<@U0ALICE01> ended the silence of `kumo-labs/kumo-p5-train` · *done*",
        ),
        (
            Entry("/cluster", "scale x w 4", detail="proposed as " + "a" * 32),
            "ran `/cluster scale x w 4` · *ok*: proposed",
        ),
        (
            Entry("scale", "scale kumo-labs/x w 2→4", "done", "the group has 4 nodes (request 1234-abcd)"),
            "'s scale of `kumo-labs/x w 2→4` ended · *done*: the group has 4 nodes",
        ),
        (Entry("some_new_button", "a b"), "did `some_new_button` on `a b` · *ok*"),
        (
            Entry("click", "operation_confirm " + "f" * 32, detail="answered; nothing changed"),
            "<@U0ALICE01> pressed \u201cConfirm\u201d · *ok*: answered; nothing changed",
        ),
        (Entry("form", "delete_confirm"), "submitted the \u201cdelete\u201d form · *ok*"),
        (
            Entry("alert_silence_4", "click alert_silence_4", "failed", "unhandled KeyError"),
            "<@U0ALICE01> pressed \u201cSilence 4 h\u201d · *failed*: unhandled KeyError",
        ),
        (Entry("/track", "command /track", "failed", "unhandled ValueError"), "ran `/track` · *failed*"),
        (Entry("/track", "note hi", user_id="<!channel>"), "`&lt;!channel&gt;` ran `/track note hi`"),
    ],
)
def test_entries_read_as_words(entry: Entry, expected: str) -> None:
    assert expected in line(entry)


def test_ids_only_when_asked() -> None:
    hexid = "0123456789abcdef" * 2
    entry = Entry("alert_replace", "episode 12 kumo-labs/x i-0abc", detail=f"proposed as {hexid}")
    assert hexid not in line(entry) and "episode" not in line(entry)
    assert hexid in line(entry, ids=True) and "(episode 12)" in line(entry, ids=True)


def test_a_long_text_is_cut_at_a_word() -> None:
    shown = line(Entry("/track", "note " + "lorem ipsum " * 30))
    typed = re.search(r"ran `([^`]*)`", shown)
    assert typed is not None and typed[1].endswith("ipsum…") and len(typed[1]) <= audit_view.TEXT_LIMIT


@given(text=st.text(max_size=300), detail=st.text(max_size=300))
def test_no_text_breaks_the_line(text: str, detail: str) -> None:
    shown = line(Entry("/cluster", text, "invalid", detail))
    assert "\n" not in shown and shown.count("`") % 2 == 0
    assert not re.search(r"<(?!@U0ALICE01>)", shown)  # no link, mention or <!channel> but the author's
    assert not re.search("[\x00-\x1f\x7f-\x9f]", shown)
    after = shown.split("*bad input*", 1)[1]
    assert not re.search(r"[*~`]", after)  # the detail cannot bold, strike or open code


def test_mrkdwn_shows_control_characters_as_symbols() -> None:
    assert mrkdwn.escape("a\x00b\x1b\x7f\x85<&>") == "a\u2400b\u241b\u2421\ufffd&lt;&amp;&gt;"
    assert mrkdwn.visible("line\nnext\ttab") == "line\nnext\ttab"
    assert mrkdwn.visible("line\nnext", one_line=True) == "line\u240anext"
    assert blocks.escape("\x00") == "\u2400"  # the one escape every builder uses
    assert mrkdwn.cut("one two three", 9) == "one two…" and mrkdwn.cut("x" * 20, 5) == "xxxx…"


def test_no_reply_carries_a_raw_control_character() -> None:
    reply = blocks.Reply(text="a\x00", blocks=[blocks.section("b\x07"), {"type": "x", "list": ["\x1b"]}])
    assert reply.text == "a\u2400" and "\x07" not in str(reply.blocks) and "\x1b" not in str(reply.blocks)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("audit --user <@U0ALICE01|alice>", ShowAudit(org=None, user="U0ALICE01")),
        ("audit --user <@U0ALICE01>", ShowAudit(org=None, user="U0ALICE01")),
        ("audit --user @U0ALICE01", ShowAudit(org=None, user="U0ALICE01")),
        ("audit kumo-labs --user u0alice01", ShowAudit(org="kumo-labs", user="U0ALICE01")),
        ("audit --action Scale --ids --days 3", ShowAudit(org=None, days=3, action="scale", ids=True)),
    ],
)
def test_audit_filters_parse(text: str, expected: ShowAudit) -> None:
    assert parse_cluster_command(text) == expected


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("audit --action frobnicate", "`frobnicate` is not one"),
        ("audit --action", "it needs one"),
        ("audit --user", "member id"),
        ("audit --user @alice", "a display name"),
        ("audit --user <!channel>", "got `&lt;!channel&gt;`"),
    ],
)
def test_bad_audit_filters_say_what_is_right(text: str, says: str) -> None:
    with pytest.raises(UsageError) as error:
        parse_cluster_command(text)
    assert says in error.value.message and error.value.usage.startswith("/cluster audit")
    if "action" in text:
        assert all(f"`{name}`" in error.value.message for name in audit_view.ACTIONS)


@pytest.mark.parametrize(
    "detail",
    [
        # As bot.operations records a finished scale and replace: the outcome, then "; request(s) RID".
        "'InService' · 34/35 nodes healthy · worker-group-1 34/34; request uTAmazIoDyn1JTFfYNTBFJ88glH5XyEmetwxjV1Kn",
        "'InService' · 35/35 nodes healthy; requests o6dNfOCoGMEzgsosjmpYmDm, Zr0Xv9aaW2s-1_e",
        "no node was acted on (requests o6dNfOCoGMEzgsosjmpYmDm, Zr0Xv9aaW2s-1_e)",
    ],
)
def test_aws_request_ids_of_a_finished_change_only_with_ids(detail: str) -> None:
    """Seen in the sandbox: `/cluster audit` showed "...; request uTAm..." for every scale and replace done."""
    entry = Entry("scale", "scale kumo-labs/x w 32→34", "done", detail)
    shown, with_ids = line(entry), line(entry, ids=True)
    assert "o6dNf" not in shown and "uTAm" not in shown and "Zr0X" not in shown and "request" not in shown
    assert "nodes healthy" in shown or "no node was acted on" in shown
    assert ("uTAm" in with_ids) or ("o6dNf" in with_ids)
