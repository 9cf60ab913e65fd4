"""The record book refuses what cannot be stored, in the words `/track` would use: every way a record is written
agrees (the Add-a-record form asks the book's own check, tests/scenarios/test_track.py)."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from bot.config import load_program
from bot.digest.facts import RecordKind
from bot.resources import example_program
from bot.subcommands import UsageError
from bot.tracking.parse import AddRecord, parse_track_command
from bot.tracking.records import RecordBook, RecordRefused
from storage.db import Database, upgrade

# `-` is left out: `--org` is an option of `/track note`, not prose.
TEXT = st.text(st.characters(blacklist_characters="-"), min_size=1, max_size=40)


@pytest.fixture(scope="module")
def book_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('book') / 'records.db'}"
    upgrade(url)
    return url


async def _add(url: str, text: str) -> None:
    db = Database(url=url)
    try:
        book = RecordBook(db=db, program=load_program(example_program()))
        await book.add(
            org_id="kumo-labs", kind=RecordKind.NOTE, text=text, user_id="U0ALICE01", channel_id="", request_key=None
        )
    finally:
        await db.dispose()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=TEXT)
def test_the_command_and_the_record_book_refuse_the_same_texts(book_url: str, text: str) -> None:
    body = text.strip()
    assume(body)
    try:
        parsed = parse_track_command("note " + text)
    except UsageError as error:
        command_says: str | None = error.message
    else:
        assert parsed == AddRecord(kind=RecordKind.NOTE, text=body, org=None)
        command_says = None
    try:
        asyncio.run(_add(book_url, body))
    except RecordRefused as refused:
        book_says: str | None = str(refused)
    else:
        book_says = None
    assert command_says == book_says


@pytest.mark.parametrize("value", ["70B\x7f", "70B\n80B", "\x00", "x" * 201, ""])
def test_a_requirement_that_cannot_be_stored_is_refused_and_nothing_is_set(book_url: str, value: str) -> None:
    async def require() -> dict[str, str]:
        db = Database(url=book_url)
        try:
            book = RecordBook(db=db, program=load_program(example_program()))
            with pytest.raises(RecordRefused):
                await book.require(
                    org_id="sakura-ai",
                    pairs=[("framework", "NeMo 2.0"), ("model_size", value)],
                    user_id="U0ALICE01",
                    request_key=None,
                )
            doc = await book.document("sakura-ai")
            return {requirement.key: requirement.value for requirement in doc.requirements}
        finally:
            await db.dispose()

    assert asyncio.run(require()) == {}
