"""Parsing of `/track` and `/digest` command text into typed commands. Pure: no Slack, no storage.

Like `bot.commands` for `/cluster`: every bad input becomes a UsageError carrying one sentence on what was wrong
and the usage line that shows how to do it right; no other exception escapes for any text.

A record's TEXT is prose ("didn't converge at 4k steps; 'nan' loss -- retrying"), so it is never shell-split: the
first word is the subcommand, one `--org ORG` pair is taken out wherever it stands, and the rest is the text.
`/track require` is the one subcommand whose arguments are shell-split, so values may be quoted.
"""

from __future__ import annotations

import re
import shlex
import unicodedata
from dataclasses import dataclass
from datetime import date
from typing import NamedTuple

from bot.access import Action
from bot.commands import DIGITS, ORG_ID, UsageError, _shown
from bot.digest.facts import TYPED_KINDS, RecordKind
from bot.names import did_you_mean

MAX_TEXT = 2000  # the whole command; a record's text has its own, smaller limit
MAX_RECORD_TEXT = 1500
MAX_WEEKS = 52
MAX_REQUIREMENTS = 20  # pairs in one `/track require`
MAX_REQUIREMENT_VALUE = 200  # storage: org_requirements.value
REQUIREMENT_KEY = re.compile(r"[a-z][a-z0-9_]{0,39}")  # storage: org_requirements.key
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
WEEK = re.compile(r"([0-9]{4})-W([0-9]{2})")  # ASCII only: `\d` would accept other scripts' digits
FIRST_WORD = re.compile(r"(\S+)(.*)", re.DOTALL)
WORD = re.compile(r"\S+")

_RECORD_USAGE = "/track note|milestone|incident|lesson TEXT [--org ORG]"
TRACK_USAGE = {
    "note": _RECORD_USAGE,
    "milestone": _RECORD_USAGE,
    "incident": _RECORD_USAGE,
    "lesson": _RECORD_USAGE,
    "require": (
        "/track require KEY=VALUE ... [--org ORG]   "
        "(keys such as model_size, framework, instance_type, instance_count, storage, deadline; your own: x-KEY)"
    ),
    "resolve": "/track resolve ID",
    "show": "/track show [ORG] [--weeks N]",
    "doc": "/track doc [ORG]",
    "help": "/track help",
}
TRACK_SUMMARY = {
    "note": "record a note for the org (default: this channel's org)",
    "milestone": "record a milestone reached",
    "incident": "record an incident; it stays open until `/track resolve ID`",
    "lesson": "record a lesson learned",
    "require": "set the org's requirements (model size, framework, instances, storage, deadline, ...)",
    "resolve": "mark an open incident resolved",
    "show": "an org's records and requirements of the last weeks (default 4)",
    "doc": "the org's living tracking document (`pitcrew track export ORG` writes it as Markdown)",
    "help": "what you may run",
}
TRACK_NEEDS: dict[str, Action | None] = {
    "note": Action.OPERATE,
    "milestone": Action.OPERATE,
    "incident": Action.OPERATE,
    "lesson": Action.OPERATE,
    "require": Action.OPERATE,
    "resolve": Action.OPERATE,
    "show": Action.VIEW,
    "doc": Action.VIEW,
    "help": None,
}
DIGEST_USAGE = {
    "preview": "/digest preview [ORG] [--week YYYY-Www]",
    "send": "/digest send [--force]",
    "help": "/digest help",
}
DIGEST_SUMMARY = {
    "preview": "this week's digest (or another week's), shown only to you; with ORG: that org's part",
    "send": "post the digest now; `--force` posts it again even if this week's was already posted",
    "help": "what you may run",
}
DIGEST_NEEDS: dict[str, Action | None] = {
    "preview": Action.VIEW,
    "send": Action.ADMINISTER,
    "help": None,
}
_KINDS = {kind.value: kind for kind in TYPED_KINDS}
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


@dataclass(frozen=True)
class TrackDoc:
    org: str | None  # None: the channel's org (the handler decides)


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


TrackCommand = TrackHome | TrackHelp | AddRecord | SetRequirements | ResolveRecord | ShowTrack | TrackDoc
DigestCommand = DigestHelp | DigestPreview | DigestSend


def _track_usage() -> str:
    return "\n".join(dict.fromkeys(TRACK_USAGE.values()))


def _digest_usage() -> str:
    return "\n".join(DIGEST_USAGE.values())


def _check_length(text: str, command: str, usage: str) -> None:
    if len(text) > MAX_TEXT:
        raise UsageError(
            f"That command is {len(text):,} characters long; a {command} command is at most {MAX_TEXT:,}.", usage
        )


def _control(text: str, allowed: str = "") -> str | None:
    """The first control character in text that is not in allowed, as U+XXXX (NUL cannot be stored in
    PostgreSQL text; the others would only garble a message)."""
    for char in text:
        if char not in allowed and unicodedata.category(char) == "Cc":
            return f"U+{ord(char):04X}"
    return None


def _org(word: str, usage: str) -> str:
    org = word.lower()
    if not ORG_ID.fullmatch(org):
        raise UsageError(f"`{_shown(word)}` is not an org id (lowercase letters, digits and dashes).", usage)
    return org


def parse_track_command(text: str) -> TrackCommand:
    _check_length(text, "/track", _track_usage())
    match = FIRST_WORD.fullmatch(text.strip())
    if match is None:  # nothing but whitespace
        return TrackHome()
    word, rest = match[1], match[2]
    sub = word.lower()
    if sub not in TRACK_USAGE:
        raise UsageError(f"`{_shown(word)}` is not a /track subcommand.", _track_usage())
    usage = TRACK_USAGE[sub]
    if sub in _KINDS:
        return _add_record(_KINDS[sub], rest, usage)
    if sub == "require":
        return _require(rest, usage)
    args = rest.split()
    if sub == "help":
        if args:
            raise UsageError("`/track help` takes no arguments.", usage)
        return TrackHelp()
    if sub == "resolve":
        return _resolve(args, usage)
    if sub == "show":
        return _show(args, usage)
    return TrackDoc(org=_optional_org(args, "/track doc", usage))


def _add_record(kind: RecordKind, rest: str, usage: str) -> AddRecord:
    words = list(WORD.finditer(rest))
    at = [index for index, word in enumerate(words) if word[0] == "--org"]
    org: str | None = None
    if len(at) > 1:
        raise UsageError("Give `--org` at most once.", usage)
    if at:
        index = at[0]
        if index + 1 == len(words):
            raise UsageError("`--org` needs an org id.", usage)
        org = _org(words[index + 1][0], usage)
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


def record_text_problem(text: str, *, what: str = "record") -> str | None:
    """What is wrong with a record's text (trimmed), or None. The one check for every way a record is written
    (`/track note ...` and the Add-a-record modal), so that neither accepts what the other refuses."""
    if not text:
        return "Say what to record."
    if len(text) > MAX_RECORD_TEXT:
        return f"That {what} is {len(text):,} characters long; a record holds at most {MAX_RECORD_TEXT:,}."
    bad = _control(text, allowed="\n\t\r")
    if bad:
        return f"That {what} contains a control character ({bad}); a record cannot hold it."
    return None


def _require(rest: str, usage: str) -> SetRequirements:
    try:
        args = shlex.split(rest)
    except ValueError:
        raise UsageError("A quote in that command is not closed.", usage) from None
    org: str | None = None
    pairs: dict[str, str] = {}
    words = iter(args)
    for word in words:
        if word == "--org":
            value = next(words, None)
            if value is None:
                raise UsageError("`--org` needs an org id.", usage)
            if org is not None:
                raise UsageError("Give `--org` at most once.", usage)
            org = _org(value, usage)
            continue
        if word.startswith("--"):
            raise UsageError(f"`{_shown(word)}` is not an option of `/track require`.", usage)
        raw_key, equals, raw_value = word.partition("=")
        if not equals:
            raise UsageError(f"`{_shown(word)}` is not KEY=VALUE, e.g. `model_size=70B`.", usage)
        key, value = _requirement_key(raw_key, usage), raw_value.strip()
        if not value:
            raise UsageError(f"`{key}` needs a value, e.g. `{key}=...`.", usage)
        if len(value) > MAX_REQUIREMENT_VALUE:
            raise UsageError(
                f"The value of `{key}` is {len(value):,} characters long; a value is at most "
                f"{MAX_REQUIREMENT_VALUE} characters.",
                usage,
            )
        bad = _control(value)
        if bad:
            raise UsageError(f"The value of `{key}` contains a control character ({bad}); keep it to one line.", usage)
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
    custom = key.startswith(CUSTOM_PREFIX)
    name = key.removeprefix(CUSTOM_PREFIX) if custom else key
    if not REQUIREMENT_KEY.fullmatch(name) or len(key) > 40:
        raise UsageError(
            f"`{_shown(raw_key)}` is not a requirement key: keys are lowercase letters, digits and underscores, "
            "starting with a letter, up to 40 characters.",
            usage,
        )
    if not custom and key not in KNOWN_REQUIREMENTS:
        known = [known.key for known in REQUIREMENT_KEYS]
        keys = ", ".join(f"`{name}`" for name in known)
        raise UsageError(
            f"`{key}` is not a requirement Pitcrew knows.{did_you_mean(key, known)} The keys are {keys}; "
            f"write one of the org's own as `x-{key}=...`.",
            usage,
        )
    return key


def _resolve(args: list[str], usage: str) -> ResolveRecord:
    if not args:
        raise UsageError("`/track resolve` needs the id of a record, e.g. `/track resolve 12`.", usage)
    if len(args) > 1:
        raise UsageError("`/track resolve` takes one record id.", usage)
    word = args[0]
    digits = word.removeprefix("#")
    if not RECORD_ID.fullmatch(digits) or int(digits) == 0:
        raise UsageError(f"`{_shown(word)}` is not a record id; ids are numbers from 1, like `12` or `#12`.", usage)
    return ResolveRecord(record_id=int(digits))


def _optional_org(args: list[str], command: str, usage: str) -> str | None:
    options = [arg for arg in args if arg.startswith("--")]
    if options:
        raise UsageError(f"`{_shown(options[0])}` is not an option of `{command}`.", usage)
    if len(args) > 1:
        raise UsageError(f"`{command}` takes at most one org.", usage)
    return _org(args[0], usage) if args else None


def _show(args: list[str], usage: str) -> ShowTrack:
    org: str | None = None
    weeks: int | None = None
    words = iter(args)
    for word in words:
        if word == "--weeks":
            value = next(words, None)
            if weeks is not None:
                raise UsageError("Give `--weeks` at most once.", usage)
            if value is None or not DIGITS.fullmatch(value) or not 1 <= int(value) <= MAX_WEEKS:
                got = f"; got `{_shown(value)}`" if value is not None else ""
                raise UsageError(f"`--weeks` takes a whole number from 1 to {MAX_WEEKS}{got}.", usage)
            weeks = int(value)
        elif word.startswith("--"):
            raise UsageError(f"`{_shown(word)}` is not an option of `/track show`.", usage)
        elif org is not None:
            raise UsageError("`/track show` takes at most one org.", usage)
        else:
            org = _org(word, usage)
    return ShowTrack(org=org) if weeks is None else ShowTrack(org=org, weeks=weeks)


def parse_digest_command(text: str) -> DigestCommand:
    _check_length(text, "/digest", _digest_usage())
    args = text.split()
    if not args:
        raise UsageError("Tell Pitcrew what to do, for example `/digest preview`.", _digest_usage())
    word, args = args[0], args[1:]
    sub = word.lower()
    if sub not in DIGEST_USAGE:
        raise UsageError(f"`{_shown(word)}` is not a /digest subcommand.", _digest_usage())
    usage = DIGEST_USAGE[sub]
    if sub == "help":
        if args:
            raise UsageError("`/digest help` takes no arguments.", usage)
        return DigestHelp()
    if sub == "send":
        force = False
        for arg in args:
            if arg == "--force":
                force = True
            elif arg.startswith("--"):
                raise UsageError(f"`{_shown(arg)}` is not an option of `/digest send`.", usage)
            else:
                raise UsageError("`/digest send` takes no arguments besides `--force`.", usage)
        return DigestSend(force=force)
    return _preview(args, usage)


def _preview(args: list[str], usage: str) -> DigestPreview:
    org: str | None = None
    week: str | None = None
    words = iter(args)
    for word in words:
        if word == "--week":
            value = next(words, None)
            if week is not None:
                raise UsageError("Give `--week` at most once.", usage)
            if value is None:
                raise UsageError("`--week` needs a week, e.g. `2026-W48`.", usage)
            week = _week(value, usage)
        elif word.startswith("--"):
            raise UsageError(f"`{_shown(word)}` is not an option of `/digest preview`.", usage)
        elif org is not None:
            raise UsageError("`/digest preview` takes at most one org.", usage)
        else:
            org = _org(word, usage)
    return DigestPreview(org=org, week=week)


def _week(word: str, usage: str) -> str:
    label = word.upper()
    match = WEEK.fullmatch(label)
    if not match:
        raise UsageError(f"`{_shown(word)}` is not a week; write it as YYYY-Www, e.g. `2026-W48`.", usage)
    year, number = int(match[1]), int(match[2])
    try:
        date.fromisocalendar(year, number, 1)
    except ValueError:
        if 1 <= year <= 9999:
            last = date(year, 12, 28).isocalendar().week  # 28 December is always in the year's last ISO week
            reason = f"{year} has weeks W01 to W{last:02d}"
        else:
            reason = "there is no such year"
        raise UsageError(f"`{_shown(label)}` is not a week: {reason}.", usage) from None
    return label
