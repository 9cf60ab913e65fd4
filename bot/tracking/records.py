"""Tracking records of an org: what `/track` writes and reads. Authorization is the handlers' (bot.access);
this checks, stores, reads and computes. Every way a record is written (`/track note ...`, the Add-a-record
form, `/track require`) goes through `add` or `require`, which refuse what cannot be stored (RecordRefused),
so no entry point accepts what another refuses. Writes are idempotent: a record carries the Slack request
that made it, resolving is a conditional UPDATE, and setting a requirement to its current value changes
nothing."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from bot.config import ProgramConfig
from bot.digest.compute import held_at, instance_hours, tracking_doc, usage_lines
from bot.digest.facts import Goodput, Record, RecordKind, TrackingDoc, UsageLine, Week
from bot.digest.gather import gather, gather_goodput, record_fact
from bot.digest.goodput import weekly
from bot.digest.weeks import week_of, weeks_between
from storage import tracking
from storage.db import Database
from storage.models import TrackRecord, utcnow

EPOCH = datetime(2020, 1, 1, tzinfo=UTC)  # before any program: "all of the history"
DOC_USAGE_DAYS = 7  # the living document's usage window: the last 7 days, rolling
SHOWN_RECORDS = 60  # newest records a `/track show` reply lists (the document and export have all)
MAX_RECORD_TEXT = 1500
MAX_REQUIREMENT_VALUE = 200  # storage: org_requirements.value
REQUIREMENT_KEY = re.compile(r"(?:x-)?[a-z][a-z0-9_]{0,39}")  # storage: org_requirements.key; x-KEY: the org's own
MAX_REQUIREMENT_KEY = 40


class RecordRefused(ValueError):
    """A record or requirement that is not stored; its message says why, in words for the writer."""


def control_character(text: str, allowed: str = "") -> str | None:
    """The first control character in text that is not in allowed, as U+XXXX (NUL cannot be stored in
    PostgreSQL text; the others would only garble a message)."""
    for char in text:
        if char not in allowed and unicodedata.category(char) == "Cc":
            return f"U+{ord(char):04X}"
    return None


def record_text_problem(text: str, *, what: str = "record") -> str | None:
    """What is wrong with a record's text (trimmed), or None."""
    if not text:
        return "Say what to record."
    if len(text) > MAX_RECORD_TEXT:
        return f"That {what} is {len(text):,} characters long; a record holds at most {MAX_RECORD_TEXT:,}."
    bad = control_character(text, allowed="\n\t\r")
    if bad:
        return f"That {what} contains a control character ({bad}); a record cannot hold it."
    return None


def requirement_problem(key: str, value: str) -> str | None:
    """What is wrong with a requirement (its key lowercase, its value trimmed), or None."""
    if not REQUIREMENT_KEY.fullmatch(key) or len(key) > MAX_REQUIREMENT_KEY:
        return (
            f"`{key[:40]}` is not a requirement key: keys are lowercase letters, digits and underscores, "
            "starting with a letter, up to 40 characters."
        )
    if not value:
        return f"`{key}` needs a value, e.g. `{key}=...`."
    if len(value) > MAX_REQUIREMENT_VALUE:
        return (
            f"The value of `{key}` is {len(value):,} characters long; a value is at most "
            f"{MAX_REQUIREMENT_VALUE} characters."
        )
    bad = control_character(value)
    if bad:
        return f"The value of `{key}` contains a control character ({bad}); keep it to one line."
    return None


@dataclass(frozen=True)
class TrackView:
    """What `/track show` shows."""

    since: datetime
    records: tuple[Record, ...]  # newest first
    open_incidents: tuple[Record, ...]
    usage: tuple[UsageLine, ...]
    held: Mapping[str, int] = field(default_factory=dict)  # instances held now by type (the one held figure)
    goodput: tuple[tuple[Week, Goodput], ...] = ()  # each week the window touches, oldest first (the last so far)


class RecordBook:
    def __init__(
        self,
        *,
        db: Database,
        program: ProgramConfig,
        clock: Callable[[], datetime] = utcnow,
        on_change: Callable[[str | None], None] | None = None,
    ) -> None:
        self.on_change = on_change  # told the org when a record is added or resolved (the Home tab refreshes)
        self._db = db
        self._program = program
        self.clock = clock

    async def add(
        self, *, org_id: str, kind: RecordKind, text: str, user_id: str, channel_id: str, request_key: str | None
    ) -> tuple[Record, bool]:
        """(the record, True), or (the record already made by this same request, False). RecordRefused for
        text that is empty, too long or holds a control character (line breaks and tabs are prose)."""
        problem = record_text_problem(text, what=kind.value)
        if problem:
            raise RecordRefused(problem)
        row = TrackRecord(
            org_id=org_id,
            kind=kind.value,
            text=text,
            created_by=user_id,
            created_at=self.clock(),
            channel_id=channel_id,
            request_key=(request_key or None) and request_key[:64],
        )
        async with self._db.session() as session:
            stored, new = await tracking.add_record(session, record=row)
        if new and self.on_change is not None:
            self.on_change(org_id)
        return record_fact(stored), new

    async def get(self, record_id: int) -> Record | None:
        async with self._db.session() as session:
            row = await tracking.get_record(session, record_id=record_id)
        return record_fact(row) if row is not None else None

    async def resolve(self, record_id: int, *, user_id: str) -> tuple[Record | None, bool]:
        """(the record as it is now, True if this call resolved it)."""
        async with self._db.session() as session:
            changed = await tracking.resolve_record(session, record_id=record_id, by=user_id, at=self.clock())
        record = await self.get(record_id)
        if changed and record is not None and self.on_change is not None:
            self.on_change(record.org_id)
        return record, changed

    async def require(
        self, *, org_id: str, pairs: Sequence[tuple[str, str]], user_id: str, request_key: str | None
    ) -> list[tuple[str, str | None, str]]:
        """Set requirements; each change is also a dated `requirement` record in the history. RecordRefused,
        and nothing set, when any pair is not a requirement that can be stored."""
        for key, value in pairs:
            problem = requirement_problem(key, value)
            if problem:
                raise RecordRefused(problem)
        now = self.clock()
        async with self._db.session() as session:
            changed = await tracking.set_requirements(session, org_id=org_id, pairs=pairs, by=user_id, at=now)
        for number, (key, old, new) in enumerate(changed):
            text = f"{key} = {new}" + (f" (was {old})" if old is not None else "")
            key_of_request = f"{request_key[:56]}:{number}" if request_key else None
            await self.add(
                org_id=org_id,
                kind=RecordKind.REQUIREMENT,
                text=text,
                user_id=user_id,
                channel_id="",
                request_key=key_of_request,
            )
        return changed

    async def show(self, *, org_id: str, weeks: int) -> TrackView:
        now = self.clock()
        since = now - timedelta(weeks=weeks)
        (facts,) = await gather(self._db, program=self._program, since=since, until=now, org_ids=[org_id])
        usage = usage_lines(instance_hours(facts.changes, since, now), quota=facts.quota, window_hours=weeks * 7 * 24.0)
        newest = tuple(sorted(facts.records, key=lambda r: (r.created_at, r.id), reverse=True))
        # Goodput by whole weeks of the program's calendar: from the week the window starts in to this one.
        calendar = weeks_between(week_of(since, _tz(self._program)), week_of(now, _tz(self._program)))
        gathered = await gather_goodput(
            self._db, program=self._program, since=calendar[0].start, until=now, org_ids=[org_id], now=now
        )
        return TrackView(
            since,
            newest[:SHOWN_RECORDS],
            facts.open_incidents,
            usage,
            held_at(facts.changes, now),
            goodput=weekly(gathered[org_id], calendar),
        )

    async def summary(self, org_id: str) -> tuple[int, int]:
        """(open incidents, records this week so far) for the `/track` home reply."""
        now = self.clock()
        week = week_of(now, _tz(self._program))
        async with self._db.session() as session:
            still_open = await tracking.open_incidents(session, org_ids=[org_id], at=now)
            this_week = await tracking.count_records_between(session, org_id=org_id, since=week.start, until=now)
        return len(still_open), this_week

    async def document(self, org_id: str) -> TrackingDoc:
        """The org's living document: all of its history, and usage over the last week."""
        now = self.clock()
        (facts,) = await gather(
            self._db, program=self._program, since=EPOCH, until=now, org_ids=[org_id], for_document=True
        )
        doc = tracking_doc(facts, generated_at=now)
        since = now - timedelta(days=DOC_USAGE_DAYS)
        usage = usage_lines(
            instance_hours(facts.changes, since, now), quota=facts.quota, window_hours=DOC_USAGE_DAYS * 24.0
        )
        return replace(doc, usage=usage, usage_window=(since, now))


def _tz(program: ProgramConfig) -> ZoneInfo:
    return ZoneInfo(program.timezone)
