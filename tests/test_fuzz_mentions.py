"""Property-based tests of commands by @mention and DM (hypothesis), through the HTTP app with signed Events API
deliveries from the local Slack, on a fixed, derandomized budget.

Whatever a person writes after `@Pitcrew` (Slack's markup, links, formatting, any Unicode, nothing at all, very
long text), whoever they are (an admin, an operator here or in their own workspace, a viewer, a stranger, a
listed id arriving from a workspace its org does not list), in an org channel, the coordination channel or a DM:
- the delivery is answered 200, never a 5xx, within Slack's 3 seconds;
- exactly one reply comes, where the person looks (the mention's thread, or the DM), and it never says
  "internal error";
- one audit row per event, naming the actor's team; nothing in AWS changes (no Confirm is pressed here).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from sandbox.slack import Message
from sandbox.world import KUMO_TEAM, Sandbox
from tests.conftest import SeededAws
from tests.scenarios import conftest as scenarios
from tests.scenarios.conftest import ADMIN, COORDINATION
from tests.test_fuzz_http import (
    ACK_SECONDS,
    CLUSTER_TEXT,
    DIGEST_TEXT,
    TRACK_TEXT,
    Tally,
    assert_no_forbidden,
    audit_rows,
    controls,
    fuzz_settings,
    junk,
    long_text,
    settled,
)

globals().update(sandbox=scenarios.sandbox, sandbox_factory=scenarios.sandbox_factory)

EXAMPLES = 300
# Who writes: (user id, the team Slack says they are in). Koji is Kumo Labs' operator in Kumo Labs' own
# workspace; "elsewhere" is Koji's id arriving from a workspace that Kumo Labs does not list.
PEOPLE = {
    "admin": (ADMIN, None),
    "operator": ("U0ALICE01", None),
    "external operator": ("U0KOJI001", KUMO_TEAM),
    "external viewer": ("U0MIO0001", KUMO_TEAM),
    "stranger": ("U0GUEST01", None),
    "elsewhere": ("U0KOJI001", "T0ELSEWHR"),
}
PLACES = ["C0KUMOLAB", "C0SAKURA1", COORDINATION, "dm"]

markup = st.sampled_from(
    [
        "<#C0KUMOLAB|kumo-labs>",
        "<#C0KUMOLAB>",
        "<@U0ALICE01>",
        "<@U0ALICE01|alice>",
        "<!here>",
        "<!channel>",
        "<!subteam^S0OPS|@oncall>",
        "<!date^1392734382^{date}|Feb 18>",
        "<https://example.com/run?id=7&amp;x=1|the run>",
        "<https://example.com>",
        "<mailto:ops@kumo.example|ops@kumo.example>",
        "&amp;",
        "&lt;",
        "&gt;",
        "*bold*",
        "_it_",
        "~s~",
        "`",
        "```",
        "\u201cquoted\u201d",
        "\u00a0",
        "\u200b",
        "\u3000",
        "\n",
        "<",
        ">",
        "|",
        "<@",
    ]
)
command_word = st.sampled_from(["cluster", "/cluster", "CLUSTER", "track", "/track", "digest", "/Digest", "help"])
command_body = st.one_of(CLUSTER_TEXT, TRACK_TEXT, DIGEST_TEXT)
pieces = st.lists(st.one_of(markup, junk, controls, command_word), max_size=6).map(" ".join)
WRITTEN = st.one_of(
    st.builds("{} {}".format, command_word, command_body),  # what people mostly write
    st.builds("{} {} {}".format, command_word, command_body, pieces),
    st.builds("`{} {}`".format, command_word, command_body),
    pieces,
    junk,
    long_text,
    st.integers(min_value=10_000, max_value=40_000).map(lambda n: ("cluster list " * n)[:n]),  # Slack's max is 40k
    st.just(""),
)
# Where the bot's mention is: first (as Slack's client writes it), last, twice, with its name, or absent (a DM).
MENTION_AT = st.sampled_from(["first", "last", "twice", "named", "none"])


def written_with_mention(text: str, at: str, bot: str) -> str:
    return {
        "first": f"<@{bot}> {text}",
        "last": f"{text} <@{bot}>",
        "twice": f"<@{bot}> {text} <@{bot}>",
        "named": f"<@{bot}|pitcrew> {text}",
        "none": text,
    }[at]


def replies_to(world: Sandbox, *, before: int, thread: str | None, channel: str) -> list[Message]:
    """Pitcrew's messages since `before` in the mention's thread (or the DM), charts aside."""
    return [
        m
        for m in world.slack.messages[before:]
        if m.user == world.slack.bot_user_id
        and m.via != "files"
        and m.channel == channel
        and (thread is None or m.thread_ts == thread)
    ]


@pytest.fixture
def tally(request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]) -> Any:
    counts = Tally()
    yield counts
    with capsys.disabled():
        print(f"\n{counts.report(request.node.name)}")  # noqa: T201
    assert counts.p95() < ACK_SECONDS, counts.report(request.node.name)


@fuzz_settings(EXAMPLES)
@given(who=st.sampled_from(list(PEOPLE)), where=st.sampled_from(PLACES), text=WRITTEN, at=MENTION_AT)
@example(who="external operator", where="C0KUMOLAB", text="", at="first")
@example(who="external operator", where="C0KUMOLAB", text="cluster launch", at="first")
@example(who="external operator", where="dm", text="cluster launch", at="none")
@example(who="stranger", where="C0KUMOLAB", text="cluster list all", at="first")
@example(who="elsewhere", where="C0KUMOLAB", text="cluster scale kumo-p5-train worker-group-1 34", at="first")
@example(who="admin", where="dm", text="digest preview --week 2026-W53", at="none")
@example(who="operator", where="C0KUMOLAB", text="&lt;@U0PITCREW&gt; cluster list", at="first")
@example(who="external viewer", where="C0KUMOLAB", text="`/track note x --org sakura-ai`", at="last")
async def test_any_mention_or_dm_gets_one_clear_answer(
    sandbox: Sandbox, seeded_aws: SeededAws, tally: Tally, who: str, where: str, text: str, at: str
) -> None:
    world, (user, team) = sandbox, PEOPLE[who]
    world.slack.user_teams.pop(user, None)
    if team is not None:
        world.slack.user_teams[user] = team
    world.slack.users.setdefault(user, who.replace(" ", "-"))
    rows, before, state = await audit_rows(world), len(world.slack.messages), seeded_aws.state()
    started = time.monotonic()
    if where == "dm":
        delivery = await world.slack.send_dm(user_id=user, text=text)
        thread, channel = None, world.slack._dm_id(user)
    else:
        written = written_with_mention(text, "first" if at == "none" else at, world.slack.bot_user_id)
        delivery = await world.slack.send_mention(user_id=user, channel_id=where, text=written)
        thread, channel = delivery.ts, where
    tally.saw(delivery.response.status_code, time.monotonic() - started)
    assert delivery.response.status_code == 200, delivery.response.text[:300]
    tally.commands += 1
    await world.slack.wait_for(lambda m: bool(replies_to(world, before=before, thread=thread, channel=channel)))
    await settled(world)
    answered = replies_to(world, before=before, thread=thread, channel=channel)
    assert len(answered) == 1, [m.text[:80] for m in answered]
    assert answered[0].text.strip(), "a reply says something"
    assert_no_forbidden(answered)
    added = await audit_rows(world) - rows
    tally.audit_rows += added
    assert added == 1, f"{text[:80]!r} added {added} audit rows"
    assert seeded_aws.state() == state, "AWS changed without a Confirm"
