"""configure_logging: PITCREW_LOG_FORMAT=json writes one JSON object per line (exceptions in a field, never
lines of their own), text stays the default, and tokens and secrets are masked whoever logs them."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from pydantic import ValidationError

from bot.config import Settings
from bot.logs import _Handler, configure_logging

BOT_TOKEN = "xoxb-1111111111-2222222222-AbCdEfGhIjKlMnOpQrStUvWx"
APP_TOKEN = "xapp-1-A0123456789-1234567890123-0123456789abcdef0123456789abcdef"
USER_TOKEN = "xoxp-3333333333-4444444444-5555555555-0123456789abcdef0123456789abcdef"
SIGNING_SECRET = "8f14e45fceea167a5a36dedd4bea2543"
INGEST_TOKEN = "pct_Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGx5"


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    """What configure_logging writes, with the root logger put back afterwards (pytest's handlers included)."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    stream = io.StringIO()
    yield stream
    for handler in root.handlers[:]:
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)


def settings(**values: str) -> Settings:
    return Settings(slack_bot_token=BOT_TOKEN, slack_signing_secret=SIGNING_SECRET, slack_app_token=APP_TOKEN, **values)


def test_json_logs_are_one_object_per_line_with_the_exception_in_a_field(captured: io.StringIO) -> None:
    configure_logging(settings(pitcrew_log_format="json"), stream=captured)
    log = logging.getLogger("pitcrew.test")
    log.info("ready: %s, %d orgs", "GENIAC", 3)
    log.warning("a message\nover two lines")
    try:
        {}["nosuch-org"]
    except KeyError:
        log.exception("/cluster list failed")

    lines = captured.getvalue().splitlines()
    assert len(lines) == 3, lines  # the traceback stays inside its record's line
    entries = [json.loads(line) for line in lines]
    assert [(e["level"], e["logger"], e["message"]) for e in entries] == [
        ("INFO", "pitcrew.test", "ready: GENIAC, 3 orgs"),
        ("WARNING", "pitcrew.test", "a message\nover two lines"),
        ("ERROR", "pitcrew.test", "/cluster list failed"),
    ]
    assert all(e["ts"].endswith("Z") and "T" in e["ts"] for e in entries)
    assert "exc_type" not in entries[0] and "exc" not in entries[0]
    assert entries[2]["exc_type"] == "KeyError"
    assert entries[2]["exc"].startswith("Traceback (most recent call last):")
    assert "KeyError: 'nosuch-org'" in entries[2]["exc"]


def test_text_is_the_default_format(captured: io.StringIO) -> None:
    configure_logging(settings(), stream=captured)
    logging.getLogger("pitcrew.test").warning("sweep skipped %s", "kumo-labs")
    assert captured.getvalue().rstrip().endswith("WARNING pitcrew.test: sweep skipped kumo-labs")
    with pytest.raises(json.JSONDecodeError):
        json.loads(captured.getvalue())


def test_an_unknown_log_format_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PITCREW_LOG_FORMAT", "xml")
    with pytest.raises(ValidationError, match="pitcrew_log_format"):
        Settings()
    monkeypatch.setenv("PITCREW_LOG_FORMAT", "json")
    assert Settings().pitcrew_log_format == "json"


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_tokens_and_secrets_are_masked_in_every_record(captured: io.StringIO, log_format: str) -> None:
    configure_logging(settings(pitcrew_log_format=log_format), stream=captured)
    log = logging.getLogger("slack_sdk.web.async_client")  # any library's logger: the handler masks them all
    log.info("calling with token %s", BOT_TOKEN)
    log.info(f"socket mode with {APP_TOKEN} and a user token {USER_TOKEN}")
    log.warning("signature check with %r failed", SIGNING_SECRET)
    logging.getLogger("bot.ingest.api").info("Authorization: Bearer %s", INGEST_TOKEN)
    try:
        raise RuntimeError(f"Slack refused {BOT_TOKEN}")
    except RuntimeError:
        logging.getLogger("bot.app").exception("dispatching failed (secret %s)", SIGNING_SECRET)
    logging.getLogger("bot.app").info("where %s", BOT_TOKEN, stack_info=True)

    written = captured.getvalue()
    for secret in (BOT_TOKEN, APP_TOKEN, USER_TOKEN, SIGNING_SECRET, INGEST_TOKEN):
        assert secret not in written
    assert "xoxb-***" in written and "xapp-***" in written and "xoxp-***" in written and "pct_***" in written
    assert "Slack refused xoxb-***" in written  # the exception's own text is masked too
    assert "RuntimeError" in written


def test_a_token_not_in_the_settings_is_still_masked(captured: io.StringIO) -> None:
    configure_logging(Settings(), stream=captured)  # no secrets configured: the patterns still apply
    logging.getLogger("x").info("another workspace's token xoxb-9-9-zzzzzzzz and xoxe-not-a-token")
    assert captured.getvalue().rstrip().endswith("another workspace's token xoxb-*** and xoxe-not-a-token")


def test_configuring_again_replaces_only_its_own_handler(
    captured: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = logging.getLogger()
    # pytest's capture handlers are left alone, as basicConfig would (an earlier test's Pitcrew handler may be here)
    others = [h for h in root.handlers if not isinstance(h, _Handler)]
    configure_logging(settings())
    configure_logging(settings(pitcrew_log_format="json"))  # e.g. `main()` run twice in one process
    assert [h for h in root.handlers if not isinstance(h, _Handler)] == others
    assert len([h for h in root.handlers if isinstance(h, _Handler)]) == 1

    # Without a stream, records go to the stderr of the moment (a runner that swapped it has closed the old one).
    swapped = io.StringIO()
    monkeypatch.setattr("sys.stderr", swapped)
    logging.getLogger("pitcrew.test").warning("to the current stderr")
    assert json.loads(swapped.getvalue())["message"] == "to the current stderr"


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_huge_message_or_exception_makes_a_bounded_record(captured: io.StringIO, log_format: str) -> None:
    """Whatever a library puts in a message or an exception (SQLAlchemy's carries the whole statement and its
    parameters: a failed 500-row INSERT once made megabytes per line), a record stays readable and bounded,
    keeping the start of the message and the end of the traceback, where the error's own line is."""
    configure_logging(settings(pitcrew_log_format=log_format), stream=captured)
    log = logging.getLogger("sqlalchemy.engine")
    log.error("statement: %s", "INSERT INTO audit_log VALUES " + "(…), " * 100_000)
    try:
        raise ValueError("refused: " + "x" * 1_000_000 + " END-OF-ERROR")
    except ValueError:
        log.exception("write failed")
    written = captured.getvalue()
    assert len(written) < 40_000, len(written)
    assert "statement: INSERT INTO audit_log VALUES" in written and "write failed" in written
    assert "characters left out" in written
    assert "END-OF-ERROR" in written and "Traceback (most recent call last):" in written
