"""Slash commands as tables of subcommands. Pure: no Slack, no storage.

A subcommand is one `Subcommand` spec: its name, usage line, summary, the role it needs and its parser. A
`CommandSet` is one slash command's table: it splits the text, finds the subcommand, and says what is wrong
with a name it does not know; help is read off the same table. Every bad input becomes a UsageError carrying
one sentence on what was wrong and the usage line that shows how to do it right; no other exception escapes
for any text.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from bot.access import Action
from bot.names import shown

ORG_ID = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?")
DIGITS = re.compile(r"[0-9]{1,6}")  # ASCII only: str.isdigit() accepts "²", which int() then refuses
FIRST_WORD = re.compile(r"(\S+)(.*)", re.DOTALL)

P = TypeVar("P", covariant=True)


class UsageError(Exception):
    def __init__(self, message: str, usage: str) -> None:
        super().__init__(message)
        self.message = message
        self.usage = usage


def quoted(text: str, limit: int = 40) -> str:
    """A user's word quoted back safely (bot.names.shown: short, no backticks, no control characters, no
    mentions)."""
    return shown(text, limit)


def org_word(word: str, usage: str) -> str:
    """An org id as typed (any case), lowercased; a UsageError for anything else."""
    org = word.lower()
    if not ORG_ID.fullmatch(org):
        raise UsageError(f"`{quoted(word)}` is not an org id (lowercase letters, digits and dashes).", usage)
    return org


@dataclass(frozen=True)
class Args:
    """What follows a subcommand's name: as typed (`rest`, for prose), and as words (split at whitespace, or
    shell-split for a command set that shell-splits)."""

    rest: str
    words: tuple[str, ...]
    usage: str  # the subcommand's usage line, for its UsageErrors


@dataclass(frozen=True, kw_only=True)
class Subcommand(Generic[P]):
    name: str
    usage: str
    summary: str
    needs: Action | None  # None: anyone known to the program (help)
    parse: Callable[[Args], P]


@dataclass(frozen=True, kw_only=True)
class CommandSet:
    """One slash command's subcommands, in the order help lists them."""

    command: str  # "/track"
    subcommands: tuple[Subcommand[Any], ...]
    max_text: int
    example: str = ""  # what an empty command is told to try, e.g. "/digest preview"
    home: Subcommand[Any] | None = None  # what the command alone answers; None: it is told `example`
    shell_split: bool = False  # the whole text is shell-split (values may be quoted)
    overview: tuple[str, ...] = ()  # the subcommands whose usage a command-level error shows; () all
    _by_name: dict[str, Subcommand[Any]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name = {spec.name: spec for spec in self.subcommands}
        if len(by_name) != len(self.subcommands) or not set(self.overview) <= set(by_name):
            raise ValueError(f"{self.command}: subcommand names repeat, or the overview names an unknown one")
        object.__setattr__(self, "_by_name", by_name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._by_name)

    def spec(self, name: str) -> Subcommand[Any]:
        return self._by_name[name]

    def usage(self, name: str) -> str:
        return self._by_name[name].usage

    def all_usage(self) -> str:
        """The usage lines a command-level error shows, each once."""
        specs = [self._by_name[name] for name in self.overview] if self.overview else self.subcommands
        return "\n".join(dict.fromkeys(spec.usage for spec in specs))

    def parse(self, text: str) -> tuple[Subcommand[Any], Any]:
        """(the subcommand, what its parser made of the text); a UsageError for any bad input."""
        if len(text) > self.max_text:
            raise UsageError(
                f"That command is {len(text):,} characters long; a {self.command} command is at most "
                f"{self.max_text:,}.",
                self.all_usage(),
            )
        stripped = text.strip()
        match = FIRST_WORD.fullmatch(stripped)
        rest = match[2] if match else ""
        if self.shell_split:
            try:
                words = shlex.split(stripped)
            except ValueError:
                raise UsageError("A quote in that command is not closed.", self.all_usage()) from None
        else:
            words = stripped.split()
        if not words:
            if self.home is not None:
                return self.home, self.home.parse(Args(rest="", words=(), usage=self.home.usage))
            raise UsageError(f"Tell Pitcrew what to do, for example `{self.example}`.", self.all_usage())
        spec = self._by_name.get(words[0].lower())
        if spec is None:
            raise UsageError(f"`{quoted(words[0])}` is not a {self.command} subcommand.", self.all_usage())
        return spec, spec.parse(Args(rest=rest, words=tuple(words[1:]), usage=spec.usage))

    def help_lines(self, may_run: Callable[[Action | None], bool]) -> list[tuple[str, str]]:
        """(usage, summary) of each subcommand `may_run` allows, in table order, each usage line once (the
        first summary of a line that several subcommands share)."""
        lines: dict[str, str] = {}
        for spec in self.subcommands:
            if spec.usage not in lines and may_run(spec.needs):
                lines[spec.usage] = spec.summary
        return list(lines.items())


def no_arguments(made: Callable[[], P], command: str) -> Callable[[Args], P]:
    """The parser of a subcommand that takes nothing (`help`)."""

    def parse(args: Args) -> P:
        if args.words:
            raise UsageError(f"`{command}` takes no arguments.", args.usage)
        return made()

    return parse


def help_subcommand(command: str, made: Callable[[], P]) -> Subcommand[P]:
    """The `help` entry of a command's table: anyone known to the program may run it, and it takes nothing."""
    usage = f"{command} help"
    return Subcommand(name="help", usage=usage, summary="what you may run", needs=None, parse=no_arguments(made, usage))


def tables(commands: CommandSet) -> tuple[dict[str, str], dict[str, str], dict[str, Action | None]]:
    """(usage, summary, needs) by subcommand name: the table as dicts, for readers that want only one column."""
    specs: Iterable[Subcommand[Any]] = commands.subcommands
    return (
        {spec.name: spec.usage for spec in specs},
        {spec.name: spec.summary for spec in specs},
        {spec.name: spec.needs for spec in specs},
    )
