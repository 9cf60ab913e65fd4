"""A mention's or DM's text read as its author reads it (bot.slack.message_text)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.slack.message_text import COMMANDS, command_text, split_command

BOT = "U0PITCREW"


@pytest.mark.parametrize(
    ("sent", "read"),
    [
        ("<@U0PITCREW> cluster list all", "cluster list all"),
        ("<@U0PITCREW|pitcrew> /cluster status kumo-labs/kumo-p5-train", "/cluster status kumo-labs/kumo-p5-train"),
        ("cluster list <@U0PITCREW>", "cluster list"),  # the mention at the end
        ("<@U0PITCREW> `cluster nodes kumo-p5-train --failed`", "cluster nodes kumo-p5-train --failed"),
        ("<@U0PITCREW> ```track note NCCL fixed```", "track note NCCL fixed"),
        ("<@U0PITCREW> track note see <#C0KUMOLAB|kumo-labs>", "track note see #kumo-labs"),
        ("<@U0PITCREW> track note ask <mailto:ops@kumo.example|ops@kumo.example>", "track note ask ops@kumo.example"),
        ("<@U0PITCREW> track note log at <https://example.com/run/7|the run>", "track note log at the run"),
        ("<@U0PITCREW> track note <https://example.com/x>", "track note https://example.com/x"),
        ("<@U0PITCREW> track note told <@U0ALICE01|alice> &amp; <!here>", "track note told <@U0ALICE01> & @here"),
        ("<@U0PITCREW> track note 3 &lt; 4 &gt; 2", "track note 3 < 4 > 2"),
        ("<@U0PITCREW> track note &amp;lt; stays", "track note &lt; stays"),  # one unescape, not two
        ("<@U0PITCREW>\u00a0cluster\u3000list", "cluster list"),  # no-break and ideographic spaces
        ("<@U0PITCREW> track require framework=\u201cNeMo 2.0\u201d", 'track require framework="NeMo 2.0"'),
        ("<@U0PITCREW> clu\u200bster list", "cluster list"),  # a zero-width space pasted in
        ("<@U0PITCREW> <!subteam^S0OPS|@oncall> look", "@oncall look"),
        ("hey <@U0PITCREW> cluster list", "cluster list"),  # a greeting before the mention
        ("<@U0ALICE01> see <@U0PITCREW> `track note x`", "track note x"),
        ("track note ask <@U0PITCREW> later", "track note ask   later"),  # a command first: kept whole
        ("<@U0PITCREW>", ""),
        ("", ""),
    ],
)
def test_text_is_read_as_a_person_reads_it(sent: str, read: str) -> None:
    assert command_text(sent, bot_user_id=BOT) == read


@pytest.mark.parametrize(
    ("text", "command", "rest"),
    [
        ("cluster list all", "/cluster", "list all"),
        ("/Cluster   status x", "/cluster", "status x"),
        ("TRACK\nnote two\nlines", "/track", "note two\nlines"),
        ("digest", "/digest", ""),
        ("help", None, "help"),
        ("clusters list", None, "clusters list"),
        ("", None, ""),
    ],
)
def test_the_first_word_names_the_command(text: str, command: str | None, rest: str) -> None:
    assert split_command(text) == (command, rest)


slack_markup = st.one_of(
    st.text(),
    st.sampled_from(["<@U0PITCREW>", "<@U0ALICE01|alice>", "<#C0KUMOLAB|kumo>", "<!here>", "<mailto:a@b.c|a>"]),
    st.sampled_from(["&amp;", "&lt;", "&gt;", "<", ">", "|", "`", "```", "\u201c", "\u00a0", "\u200b", "\n"]),
    st.sampled_from([*COMMANDS, *(f"/{c}" for c in COMMANDS)]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(slack_markup, max_size=12).map(" ".join))
def test_any_text_reads_without_error_and_never_keeps_the_bots_mention(sent: str) -> None:
    read = command_text(sent, bot_user_id=BOT)
    assert "<@U0PITCREW>" not in read.replace("&lt;@U0PITCREW&gt;", "")
    command, rest = split_command(read)
    assert command is None or command.removeprefix("/") in COMMANDS
    assert len(rest) <= len(read)
