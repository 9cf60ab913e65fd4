"""Text that both Postgres and SQLite can store, applied at the storage boundary by one column type.

A Postgres text or varchar column holds every Unicode scalar value except NUL ("invalid byte sequence for
encoding UTF8: 0x00"); and a lone surrogate (U+D800-U+DFFF, which a JSON payload can carry as "\\ud800")
is no character at all: neither asyncpg nor sqlite3 can encode it to UTF-8. Those are the only two, so
everything else, control characters included, is stored as typed.

They are replaced visibly, one character for one, so a stored text keeps its length (column limits and
the callers' truncation still hold) and whoever reads it sees that something was there:
- NUL becomes U+2400 SYMBOL FOR NULL ("␀"): it names what was typed, not just that something was wrong;
- a lone surrogate becomes U+FFFD REPLACEMENT CHARACTER ("�"), what Python's own "replace" error handler
  gives for text that cannot be encoded (there is no symbol for a half of a character).
"""

from __future__ import annotations

import re

from sqlalchemy import Dialect, String
from sqlalchemy.types import TypeDecorator

NUL_SYMBOL = "\N{SYMBOL FOR NULL}"
REPLACEMENT = "\N{REPLACEMENT CHARACTER}"
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _replace(match: re.Match[str]) -> str:
    return NUL_SYMBOL if match[0] == "\x00" else REPLACEMENT


def storable(text: str) -> str:
    """`text` as Postgres and SQLite can both store it: NUL -> ␀, lone surrogates -> �, the rest unchanged."""
    if text.isascii() and "\x00" not in text:  # the common case, without a regex pass
        return text
    return _UNSTORABLE.sub(_replace, text)


class StorableText(TypeDecorator[str]):
    """A VARCHAR (or TEXT without a length) whose bound values go through `storable`.

    Used by the columns that hold user or AWS text, so the ORM's flushes and Core `insert()`/`update()`
    statements alike (the audit writer's batched INSERT) are covered in one place. The DDL is that of
    String(length): no migration."""

    impl = String
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        return storable(value) if isinstance(value, str) else value

    @property
    def python_type(self) -> type[str]:
        return str
