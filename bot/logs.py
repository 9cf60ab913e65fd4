"""Logging for the whole process, set up in one place (called by the CLI): plain text by default, or with
PITCREW_LOG_FORMAT=json one JSON object per line (ts, level, logger, message; exc_type and exc when there
is an exception), for log collectors that parse lines.

Either way a redaction filter masks Slack tokens, ingest tokens and the configured secrets in every record
that reaches the handler, whichever library logged it and whatever the exception text holds, and bounds
its message and exception text (a library's message can carry a whole SQL statement with its parameters).
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import IO

from bot.config import Settings

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Slack bot/user/app tokens (xoxb-, xoxp-, xoxa-, xoxr-, xoxs-, xapp-) and Pitcrew's ingest tokens (pct_...).
TOKEN = re.compile(r"\b(xox[abposr]-|xapp-)[A-Za-z0-9-]+|\b(pct_)[A-Za-z0-9_-]{8,}")
MIN_SECRET = (
    6  # a configured secret shorter than this is masked by pattern only (masking "abc" everywhere helps nobody)
)
MASK = "***"
# A record's message and exception text are cut to these sizes (no log line of megabytes, whoever logged it).
MAX_MESSAGE = 4000
MAX_EXCEPTION = 12000
NOISY = ("apscheduler", "httpx", "botocore", "alembic.runtime.plugins")  # INFO on every run, request or plugin


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """The text with tokens and the given secrets masked; a token keeps its prefix, to tell which it was."""
    text = TOKEN.sub(lambda m: (m[1] or m[2]) + MASK, text)
    for secret in secrets:
        if len(secret) >= MIN_SECRET:
            text = text.replace(secret, MASK)
    return text


def bounded(text: str, limit: int, *, keep_end: bool = False) -> str:
    """The text, or its start (and with keep_end its end too) with how much was left out between."""
    if len(text) <= limit:
        return text
    marker = f" … [{len(text) - limit:,} characters left out] … "
    if not keep_end:
        return text[:limit] + marker
    half = limit // 2
    return text[:half] + marker + text[-half:]


class RedactSecrets(logging.Filter):
    """Masks secrets in a record's message, exception and stack text (on a handler: every record it gets)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self._secrets = tuple(s for s in secrets if s)
        self._formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        # Masked before cut: a secret cut in two at the edge would no longer be recognised.
        record.msg, record.args = bounded(redact(record.getMessage(), self._secrets), MAX_MESSAGE), None
        if record.exc_info and not record.exc_text:
            record.exc_text = self._formatter.formatException(record.exc_info)
        if record.exc_text:  # the end kept too: the error's own line is the traceback's last
            record.exc_text = bounded(redact(record.exc_text, self._secrets), MAX_EXCEPTION, keep_end=True)
        if record.stack_info:
            record.stack_info = redact(record.stack_info, self._secrets)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line; a traceback is one string field (`exc`), never lines of its own."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info and record.exc_info[0] is not None:
            entry["exc_type"] = record.exc_info[0].__name__
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exc"] = record.exc_text
        if record.stack_info:
            entry["stack"] = record.stack_info
        return json.dumps(entry, ensure_ascii=False, default=str)


class _Handler(logging.StreamHandler):
    """Writes to the given stream, else to whatever sys.stderr is when a record comes (a test runner swaps it;
    a handler holding an old, closed stderr would fail on every later record)."""

    def __init__(self, stream: IO[str] | None) -> None:
        self._fixed = stream
        super().__init__(stream)

    @property
    def stream(self) -> IO[str]:
        return self._fixed or sys.stderr

    @stream.setter
    def stream(self, value: IO[str] | None) -> None:
        pass  # StreamHandler.__init__ and setStream assign it; the property above decides


def log_handler(settings: Settings, stream: IO[str] | None = None) -> logging.Handler:
    """A handler writing in the configured format, with the secrets of these settings masked."""
    handler = _Handler(stream)
    handler.setFormatter(JsonFormatter() if settings.pitcrew_log_format == "json" else logging.Formatter(TEXT_FORMAT))
    handler.addFilter(
        RedactSecrets((settings.slack_bot_token, settings.slack_signing_secret, settings.slack_app_token))
    )
    return handler


def configure_logging(settings: Settings, *, stream: IO[str] | None = None, level: int = logging.INFO) -> None:
    """Pitcrew's one handler on the root logger (replacing one an earlier call added; handlers of others, such
    as a test runner's, are left alone), the level, and quieter chatty libraries."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(old)
    root.addHandler(log_handler(settings, stream))
    root.setLevel(level)
    for noisy in NOISY:
        logging.getLogger(noisy).setLevel(logging.WARNING)
