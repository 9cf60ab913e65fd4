"""`/digest`'s subcommands (bot.subcommands specs) and the typed commands they parse into. Pure: no Slack, no
storage."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

from bot.access import Action
from bot.subcommands import (
    Args,
    CommandSet,
    Subcommand,
    UsageError,
    help_subcommand,
    org_word,
    quoted,
    tables,
)

MAX_TEXT = 2000
WEEK = re.compile(r"([0-9]{4})-W([0-9]{2})")  # ASCII only: `\d` would accept other scripts' digits


@dataclass(frozen=True)
class DigestHelp:
    pass


@dataclass(frozen=True)
class DigestPreview:
    org: str | None  # None: the whole program's digest
    week: str | None  # "2026-W48"; None: the current week


@dataclass(frozen=True)
class DigestSend:
    force: bool = False


DigestCommand = DigestHelp | DigestPreview | DigestSend


def _send(args: Args) -> DigestSend:
    force = False
    for arg in args.words:
        if arg == "--force":
            force = True
        elif arg.startswith("--"):
            raise UsageError(f"`{quoted(arg)}` is not an option of `/digest send`.", args.usage)
        else:
            raise UsageError("`/digest send` takes no arguments besides `--force`.", args.usage)
    return DigestSend(force=force)


def _preview(args: Args) -> DigestPreview:
    usage = args.usage
    org: str | None = None
    week: str | None = None
    words = iter(args.words)
    for word in words:
        if word == "--week":
            value = next(words, None)
            if week is not None:
                raise UsageError("Give `--week` at most once.", usage)
            if value is None:
                raise UsageError("`--week` needs a week, e.g. `2026-W48`.", usage)
            week = _week(value, usage)
        elif word.startswith("--"):
            raise UsageError(f"`{quoted(word)}` is not an option of `/digest preview`.", usage)
        elif org is not None:
            raise UsageError("`/digest preview` takes at most one org.", usage)
        else:
            org = org_word(word, usage)
    return DigestPreview(org=org, week=week)


def _week(word: str, usage: str) -> str:
    label = word.upper()
    match = WEEK.fullmatch(label)
    if not match:
        raise UsageError(f"`{quoted(word)}` is not a week; write it as YYYY-Www, e.g. `2026-W48`.", usage)
    year, number = int(match[1]), int(match[2])
    try:
        date.fromisocalendar(year, number, 1)
    except ValueError:
        if 1 <= year <= 9999:
            last = date(year, 12, 28).isocalendar().week  # 28 December is always in the year's last ISO week
            reason = f"{year} has weeks W01 to W{last:02d}"
        else:
            reason = "there is no such year"
        raise UsageError(f"`{quoted(label)}` is not a week: {reason}.", usage) from None
    return label


DIGEST = CommandSet(
    command="/digest",
    max_text=MAX_TEXT,
    example="/digest preview",
    subcommands=(
        Subcommand(
            name="preview",
            usage="/digest preview [ORG] [--week YYYY-Www]",
            summary="this week's digest (or another week's), shown only to you; with ORG: that org's part",
            needs=Action.VIEW,
            parse=_preview,
        ),
        Subcommand(
            name="send",
            usage="/digest send [--force]",
            summary="post the digest now; `--force` posts it again even if this week's was already posted",
            needs=Action.ADMINISTER,
            parse=_send,
        ),
        help_subcommand("/digest", DigestHelp),
    ),
)
# The table by column (the tests read it so; help, dispatch and metrics read the table itself).
DIGEST_USAGE, DIGEST_SUMMARY, DIGEST_NEEDS = tables(DIGEST)


def parse_digest_command(text: str) -> DigestCommand:
    _, parsed = DIGEST.parse(text)
    result: DigestCommand = parsed
    return result
