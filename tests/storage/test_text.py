"""Any text is storable: NUL and lone surrogates are replaced visibly at the storage boundary, on SQLite and
Postgres alike, by the ORM and by Core inserts (the audit writer's batched INSERT)."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlmodel import select

from storage import crud
from storage.db import Database
from storage.models import AuditEntry, TrackRecord
from storage.text import NUL_SYMBOL, REPLACEMENT, storable

AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
# Every code point, surrogates included (st.text() leaves them out by default; a JSON payload can carry one).
ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=300)


def test_storable_replaces_only_what_cannot_be_stored() -> None:
    assert storable("status \x00x") == f"status {NUL_SYMBOL}x"
    assert storable("a\ud800b\udfff") == f"a{REPLACEMENT}b{REPLACEMENT}"
    typed = "tab\there\nnew line \x1b[31m é 日本 😀 \u202e \ufffe"
    assert storable(typed) == typed  # control characters and the rest are stored as typed


@given(text=ANY_TEXT)
def test_storable_keeps_the_length_and_is_idempotent(text: str) -> None:
    clean = storable(text)
    assert len(clean) == len(text)  # one for one: the columns' limits and the callers' cuts still hold
    assert storable(clean) == clean
    clean.encode("utf-8")  # no lone surrogate left
    assert "\x00" not in clean


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=ANY_TEXT, detail=ANY_TEXT)
async def test_any_text_round_trips_through_storage(db: Database, text: str, detail: str) -> None:
    """Core insert (audit rows) and ORM add (a tracking record): what comes back is the sanitizer's output."""
    async with db.session() as session:
        await crud.add_audit_rows(
            session,
            rows=[
                {
                    "at": AT,
                    "user_id": text[:24],
                    "channel_id": "C1",
                    "org_id": "kumo-labs",
                    "command": "/cluster",
                    "text": text,
                    "outcome": "allowed",
                    "detail": detail,
                }
            ],
        )
        record = TrackRecord(org_id="kumo-labs", kind="note", text=text, created_by="U1", created_at=AT)
        session.add(record)
        await session.commit()
        record_id = record.id
    async with db.session() as session:
        entry = (await session.exec(select(AuditEntry).order_by(AuditEntry.id.desc()))).first()  # type: ignore[union-attr]
        stored = await session.get(TrackRecord, record_id)
    assert entry is not None and stored is not None
    assert (entry.text, entry.detail, entry.user_id) == (storable(text), storable(detail), storable(text[:24]))
    assert stored.text == storable(text)


async def test_a_nul_is_stored_as_a_visible_symbol_and_found_by_the_same_words(db: Database) -> None:
    async with db.session() as session:
        await crud.add_audit_rows(
            session,
            rows=[
                {
                    "at": AT,
                    "user_id": "U\x00",
                    "channel_id": "C1",
                    "org_id": None,
                    "command": "/cluster",
                    "text": "status \x00",
                    "outcome": "invalid",
                    "detail": "",
                }
            ],
        )
    async with db.session() as session:
        # A lookup binds its value through the same column type, so the typed words still find the row.
        (entry,) = await crud.audit_entries(session, user_id="U\x00")
    assert entry.text == f"status {NUL_SYMBOL}" and entry.user_id == f"U{NUL_SYMBOL}"
