"""Parsing of /digest text: every bad input is a UsageError with a Usage line, never an exception."""

import pytest

from bot.access import Action
from bot.digest.parse import (
    DIGEST,
    DIGEST_NEEDS,
    DIGEST_SUMMARY,
    DIGEST_USAGE,
    DigestHelp,
    DigestPreview,
    DigestSend,
    parse_digest_command,
)
from bot.subcommands import UsageError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("help", DigestHelp()),
        ("Help", DigestHelp()),
        ("preview", DigestPreview(org=None, week=None)),
        ("PREVIEW Kumo-Labs", DigestPreview(org="kumo-labs", week=None)),
        ("preview --week 2026-W48", DigestPreview(org=None, week="2026-W48")),
        ("preview --week 2026-w48", DigestPreview(org=None, week="2026-W48")),
        ("preview --week 2026-W53 kumo-labs", DigestPreview(org="kumo-labs", week="2026-W53")),
        ("preview kumo-labs --week 2020-w01", DigestPreview(org="kumo-labs", week="2020-W01")),
        ("send", DigestSend()),
        ("send --force", DigestSend(force=True)),
        ("  SEND   --force  ", DigestSend(force=True)),
    ],
)
def test_digest_parses(text: str, expected: object) -> None:
    assert parse_digest_command(text) == expected


@pytest.mark.parametrize(
    ("text", "message_part", "usage_part"),
    [
        ("", "Tell Pitcrew what to do", "/digest preview"),
        ("   ", "Tell Pitcrew what to do", "/digest send"),
        ("publish", "`publish` is not a /digest subcommand", "/digest preview"),
        ("<@U123>", "`&lt;@U123&gt;` is not a /digest subcommand", "/digest send"),
        ("help me", "takes no arguments", "/digest help"),
        ("send --now", "`--now` is not an option of `/digest send`", "/digest send [--force]"),
        ("send kumo-labs", "takes no arguments besides `--force`", "/digest send"),
        ("preview --week 2027-W53", "`2027-W53` is not a week: 2027 has weeks W01 to W52", "/digest preview"),
        ("preview --week 2026-W54", "`2026-W54` is not a week: 2026 has weeks W01 to W53", "/digest preview"),
        ("preview --week 2026-W00", "`2026-W00` is not a week", "/digest preview"),
        ("preview --week 0000-W01", "`0000-W01` is not a week", "/digest preview"),
        ("preview --week 2026-48", "`2026-48` is not a week; write it as YYYY-Www", "/digest preview"),
        ("preview --week 2026-W4", "is not a week", "/digest preview"),
        ("preview --week 2026-W048", "is not a week", "/digest preview"),
        ("preview --week \uff12\uff10\uff12\uff16-W48", "is not a week", "/digest preview"),
        ("preview --week", "`--week` needs a week", "/digest preview"),
        ("preview --week 2026-W01 --week 2026-W02", "at most once", "/digest preview"),
        ("preview --weeks 2", "`--weeks` is not an option of `/digest preview`", "/digest preview"),
        ("preview a b", "at most one org", "/digest preview"),
        ("preview <!channel>", "`&lt;!channel&gt;` is not an org id", "/digest preview"),
        ("preview " + "a" * 2000, "2,008 characters", "/digest send"),
    ],
)
def test_digest_bad_input_says_what_and_how(text: str, message_part: str, usage_part: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_digest_command(text)
    assert message_part in caught.value.message
    assert caught.value.usage.startswith("/digest")
    assert usage_part in caught.value.usage
    assert "<" not in caught.value.message


def test_tables_agree() -> None:
    assert set(DIGEST_USAGE) == set(DIGEST_SUMMARY) == set(DIGEST_NEEDS) == set(DIGEST.names)
    assert DIGEST_NEEDS == {"preview": Action.VIEW, "send": Action.ADMINISTER, "help": None}
    assert all(usage.startswith("/digest ") for usage in DIGEST_USAGE.values())
