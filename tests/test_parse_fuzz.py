"""Any text given to the /track and /digest parsers parses or is one UsageError carrying that command's usage
line: random strings (seeded) and hypothesis' text, alone and after each subcommand's name."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.digest.parse import parse_digest_command
from bot.subcommands import UsageError
from bot.tracking.parse import parse_track_command

PARSERS = pytest.mark.parametrize(
    ("parse", "prefix"), [(parse_track_command, "/track"), (parse_digest_command, "/digest")], ids=["track", "digest"]
)
SUBCOMMANDS = ("note ", "require ", "resolve ", "show ", "doc ", "preview ", "send ", "preview --week ")


def _check(parse: Callable[[str], Any], prefix: str, text: str) -> None:
    try:
        parse(text)
    except UsageError as error:
        assert error.message
        assert error.usage.startswith(prefix)
    for word in SUBCOMMANDS:
        try:
            parse(word + text)
        except UsageError as error:
            assert error.usage.startswith(prefix)


@PARSERS
def test_fuzz_random_strings_parse_or_are_usage_errors(parse: Callable[[str], Any], prefix: str) -> None:
    rng = random.Random(20261130)
    alphabet = (
        [chr(code) for code in range(32, 127)] * 4
        + list(" \t\n\r\x00\x07\x0b\x1b\x7f\u00a0\u2028\u3000")
        + list("'\"\\#=-`<>&")
        + list("学習ß²³١٢İﬁ🎉\u0301\ufeff")
    )
    words = ["--org", "--weeks", "--week", "--force", "kumo-labs", "2026-W53", "k=v", "#12", "'", '"']
    for _ in range(3000):
        pieces = [rng.choice(alphabet) if rng.random() < 0.9 else " " + rng.choice(words) + " " for _ in range(40)]
        _check(parse, prefix, "".join(pieces[: rng.randint(0, 40)]))
    _check(parse, prefix, "note " + "z" * 10_000)
    _check(parse, prefix, "'" * 10_000)


@PARSERS
@given(text=st.text(max_size=300))
def test_any_text_parses_or_is_a_usage_error(parse: Callable[[str], Any], prefix: str, text: str) -> None:
    _check(parse, prefix, text)
