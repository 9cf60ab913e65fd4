"""`/track`'s subcommands (bot.subcommands specs) and the typed commands they parse into. Pure: no Slack, no
storage.

A record's TEXT is prose ("didn't converge at 4k steps; 'nan' loss -- retrying"), so it is never shell-split: the
first word is the subcommand, one `--org ORG` pair is taken out wherever it stands, and the rest is the text.
`/track require` is the one subcommand whose arguments are shell-split, so values may be quoted. What a record
or requirement may hold is the record book's to say (bot.tracking.records); this parser asks it, so a bad text
is told with the usage line.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from bot.access import Action
from bot.digest.facts import TYPED_KINDS, RecordKind
from bot.names import did_you_mean
from bot.subcommands import (
    DIGITS,
    Args,
    CommandSet,
    Subcommand,
    UsageError,
    help_subcommand,
    org_word,
    quoted,
    tables,
)
from bot.tracking.records import REQUIREMENT_KEY, record_text_problem, requirement_problem

MAX_TEXT = 2000  # the whole command; a record's text has its own, smaller limit
MAX_WEEKS = 52
MAX_REQUIREMENTS = 20  # pairs in one `/track require`
CUSTOM_PREFIX = "x-"  # a key of the org's own, e.g. `x-tokenizer=sentencepiece`: stored as written


class RequirementKey(NamedTuple):
    key: str
    meaning: str


# What a program admin tracks of each org's training run; a typo of one of these (`model_szie`) is refused
# rather than stored as a requirement nobody will find. Anything else is written as x-KEY.
REQUIREMENT_KEYS: tuple[RequirementKey, ...] = (
    RequirementKey("model_size", "parameters of the model trained, e.g. 70B"),
    RequirementKey("framework", "training framework and version, e.g. NeMo 2.0"),
    RequirementKey("instance_type", "accelerator instance type, e.g. p5.48xlarge"),
    RequirementKey("instance_count", "accelerator instances needed at once"),
    RequirementKey("storage", "shared storage, e.g. FSx for Lustre 1.2 TB"),
    RequirementKey("deadline", "date the run must be done by, e.g. 2026-12-01"),
    RequirementKey("dataset", "training data, e.g. a corpus and its size"),
    RequirementKey("tokens_target", "tokens to train on, e.g. 2T"),
    RequirementKey("precision", "numeric precision, e.g. bf16 or fp8"),
    RequirementKey("parallelism", "tensor, pipeline and data parallel layout, e.g. TP8 PP4 DP16"),
    RequirementKey("sequence_length", "context length trained at, e.g. 8192"),
    RequirementKey("global_batch_size", "sequences per optimizer step"),
    RequirementKey("checkpoint_interval", "steps or minutes between checkpoints"),
    RequirementKey("region", "AWS region the run needs"),
    RequirementKey("contact", "who to ask about the run"),
    RequirementKey("notes", "anything else the program should know"),
)
KNOWN_REQUIREMENTS = frozenset(known.key for known in REQUIREMENT_KEYS)
RECORD_ID = re.compile(r"[0-9]{1,9}")  # ASCII only, like DIGITS; 9 digits fit any integer column
WORD = re.compile(r"\S+")
_EXAMPLES = {
    RecordKind.NOTE: "/track note checkpoint restored from step 4000",
    RecordKind.MILESTONE: "/track milestone 70B pre-training reached 1T tokens",
    RecordKind.INCIDENT: "/track incident loss went to nan at step 4200",
    RecordKind.LESSON: "/track lesson pin the NCCL version in the container",
}


@dataclass(frozen=True)
class TrackHome:
    """`/track` alone: a short summary and an "Add a record" button."""


@dataclass(frozen=True)
class TrackHelp:
    pass


@dataclass(frozen=True)
class AddRecord:
    kind: RecordKind  # one of TYPED_KINDS
    text: str  # trimmed; internal line breaks kept
    org: str | None  # None: the channel's org


@dataclass(frozen=True)
class SetRequirements:
    pairs: tuple[tuple[str, str], ...]  # (key, value) in the order given; keys lowercase and distinct
    org: str | None


@dataclass(frozen=True)
class ResolveRecord:
    record_id: int


@dataclass(frozen=True)
class ShowTrack:
    org: str | None
    weeks: int = 4
    every: bool = False  # `/track show all` (admins): every org's usage against quota


@dataclass(frozen=True)
class TrackDoc:
    org: str | None  # None: the channel's org (the handler decides)


TrackCommand = TrackHome | TrackHelp | AddRecord | SetRequirements | ResolveRecord | ShowTrack | TrackDoc


def _add_record(kind: RecordKind) -> Callable[[Args], AddRecord]:
    def parse(args: Args) -> AddRecord:
        rest, usage = args.rest, args.usage
        words = list(WORD.finditer(rest))
        at = [index for index, word in enumerate(words) if word[0] == "--org"]
        org: str | None = None
        if len(at) > 1:
            raise UsageError("Give `--org` at most once.", usage)
        if at:
            index = at[0]
            if index + 1 == len(words):
                raise UsageError("`--org` needs an org id.", usage)
            org = org_word(words[index + 1][0], usage)
            start, end = words[index].start(), words[index + 1].end()
            before, after = rest[:start], rest[end:]
            gap_before = before[len(before.rstrip()) :]
            gap_after = after[: len(after) - len(after.lstrip())]
            # The pair and the whitespace around it become one space, or the line break(s) it stood next to.
            gap = gap_before if "\n" in gap_before else gap_after if "\n" in gap_after else " "
            rest = before.rstrip() + gap + after.lstrip()
        body = rest.strip()
        if not body:
            raise UsageError(f"Say what to record, e.g. `{_EXAMPLES[kind]}`.", usage)
        problem = record_text_problem(body, what=kind.value)
        if problem:
            raise UsageError(problem, usage)
        return AddRecord(kind=kind, text=body, org=org)

    return parse


def _require(args: Args) -> SetRequirements:
    usage = args.usage
    try:
        words = iter(shlex.split(args.rest))
    except ValueError:
        raise UsageError("A quote in that command is not closed.", usage) from None
    org: str | None = None
    pairs: dict[str, str] = {}
    for word in words:
        if word == "--org":
            value = next(words, None)
            if value is None:
                raise UsageError("`--org` needs an org id.", usage)
            if org is not None:
                raise UsageError("Give `--org` at most once.", usage)
            org = org_word(value, usage)
            continue
        if word.startswith("--"):
            raise UsageError(f"`{quoted(word)}` is not an option of `/track require`.", usage)
        raw_key, equals, raw_value = word.partition("=")
        if not equals:
            raise UsageError(f"`{quoted(word)}` is not KEY=VALUE, e.g. `model_size=70B`.", usage)
        key, value = _requirement_key(raw_key, usage), raw_value.strip()
        problem = requirement_problem(key, value)
        if problem:
            raise UsageError(problem, usage)
        if key in pairs:
            raise UsageError(f"`{key}` is given twice; give each key once.", usage)
        pairs[key] = value
    if not pairs:
        raise UsageError(
            'Say which requirements to set, e.g. `/track require model_size=70B framework="NeMo 2.0"`. '
            "The keys:\n" + known_requirements(),
            usage,
        )
    if len(pairs) > MAX_REQUIREMENTS:
        raise UsageError(f"That sets {len(pairs)} requirements; set at most {MAX_REQUIREMENTS} at a time.", usage)
    return SetRequirements(pairs=tuple(pairs.items()), org=org)


def known_requirements() -> str:
    """The known keys, one per line with its meaning (for the reply to `/track require` alone)."""
    return "\n".join(f"`{known.key}`: {known.meaning}" for known in REQUIREMENT_KEYS)


def _requirement_key(raw_key: str, usage: str) -> str:
    key = raw_key.lower()
    if not REQUIREMENT_KEY.fullmatch(key) or len(key) > 40:
        raise UsageError(
            f"`{quoted(raw_key)}` is not a requirement key: keys are lowercase letters, digits and underscores, "
            "starting with a letter, up to 40 characters.",
            usage,
        )
    if not key.startswith(CUSTOM_PREFIX) and key not in KNOWN_REQUIREMENTS:
        known = [known.key for known in REQUIREMENT_KEYS]
        keys = ", ".join(f"`{name}`" for name in known)
        raise UsageError(
            f"`{key}` is not a requirement Pitcrew knows.{did_you_mean(key, known)} The keys are {keys}; "
            f"write one of the org's own as `x-{key}=...`.",
            usage,
        )
    return key


def _resolve(args: Args) -> ResolveRecord:
    words, usage = args.words, args.usage
    if not words:
        raise UsageError("`/track resolve` needs the id of a record, e.g. `/track resolve 12`.", usage)
    if len(words) > 1:
        raise UsageError("`/track resolve` takes one record id.", usage)
    word = words[0]
    digits = word.removeprefix("#")
    if not RECORD_ID.fullmatch(digits) or int(digits) == 0:
        raise UsageError(f"`{quoted(word)}` is not a record id; ids are numbers from 1, like `12` or `#12`.", usage)
    return ResolveRecord(record_id=int(digits))


def _doc(args: Args) -> TrackDoc:
    options = [arg for arg in args.words if arg.startswith("--")]
    if options:
        raise UsageError(f"`{quoted(options[0])}` is not an option of `/track doc`.", args.usage)
    if len(args.words) > 1:
        raise UsageError("`/track doc` takes at most one org.", args.usage)
    return TrackDoc(org=org_word(args.words[0], args.usage) if args.words else None)


def _show(args: Args) -> ShowTrack:
    usage = args.usage
    org: str | None = None
    weeks: int | None = None
    every = False
    words = iter(args.words)
    for word in words:
        if word == "--weeks":
            value = next(words, None)
            if weeks is not None:
                raise UsageError("Give `--weeks` at most once.", usage)
            if value is None or not DIGITS.fullmatch(value) or not 1 <= int(value) <= MAX_WEEKS:
                got = f"; got `{quoted(value)}`" if value is not None else ""
                raise UsageError(f"`--weeks` takes a whole number from 1 to {MAX_WEEKS}{got}.", usage)
            weeks = int(value)
        elif word.startswith("--"):
            raise UsageError(f"`{quoted(word)}` is not an option of `/track show`.", usage)
        elif org is not None or every:
            raise UsageError("`/track show` takes at most one org, or `all`.", usage)
        elif word.lower() == "all":
            every = True
        else:
            org = org_word(word, usage)
    return ShowTrack(org=org, every=every) if weeks is None else ShowTrack(org=org, weeks=weeks, every=every)


_RECORD_USAGE = "/track note|milestone|incident|lesson TEXT [--org ORG]"
_RECORD_SUMMARY = {
    RecordKind.NOTE: "record a note for the org (default: this channel's org)",
    RecordKind.MILESTONE: "record a milestone reached",
    RecordKind.INCIDENT: "record an incident; it stays open until `/track resolve ID`",
    RecordKind.LESSON: "record a lesson learned",
}
TRACK = CommandSet(
    command="/track",
    max_text=MAX_TEXT,
    home=Subcommand(name="", usage="/track", summary="", needs=None, parse=lambda _: TrackHome()),
    subcommands=(
        *(
            Subcommand(
                name=kind.value,
                usage=_RECORD_USAGE,
                summary=_RECORD_SUMMARY[kind],
                needs=Action.OPERATE,
                parse=_add_record(kind),
            )
            for kind in TYPED_KINDS
        ),
        Subcommand(
            name="require",
            usage="/track require KEY=VALUE ... [--org ORG]   "
            "(keys such as model_size, framework, instance_type, instance_count, storage, deadline; your own: x-KEY)",
            summary="set the org's requirements (model size, framework, instances, storage, deadline, ...)",
            needs=Action.OPERATE,
            parse=_require,
        ),
        Subcommand(
            name="resolve",
            usage="/track resolve ID",
            summary="mark an open incident resolved",
            needs=Action.OPERATE,
            parse=_resolve,
        ),
        Subcommand(
            name="show",
            usage="/track show [ORG|all] [--weeks N]",
            summary="an org's records and requirements of the last weeks (default 4); `all`: every org's usage "
            "against quota (admins)",
            needs=Action.VIEW,
            parse=_show,
        ),
        Subcommand(
            name="doc",
            usage="/track doc [ORG]",
            summary="the org's living tracking document (`pitcrew track export ORG` writes it as Markdown)",
            needs=Action.VIEW,
            parse=_doc,
        ),
        help_subcommand("/track", TrackHelp),
    ),
)
# The table by column (the tests read it so; help, dispatch and metrics read the table itself).
TRACK_USAGE, TRACK_SUMMARY, TRACK_NEEDS = tables(TRACK)


def parse_track_command(text: str) -> TrackCommand:
    _, parsed = TRACK.parse(text)
    result: TrackCommand = parsed
    return result
