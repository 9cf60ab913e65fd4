"""Text made safe to show in a Slack message. Pure, and free of Pitcrew's imports so any layer can use it: the
domain's own sentences (refusals, notes, usage errors) are mrkdwn.

Control characters are never echoed raw: a NUL, an ESC or a DEL typed into a command comes back as the
Unicode "control picture" that names it (␀, ␛, ␡), so the reader sees what was there and Slack gets no raw
control character. C1 controls (U+0080-U+009F) and lone surrogates have no picture: they become U+FFFD (�).
"""

from __future__ import annotations

import re
from datetime import datetime
from zoneinfo import ZoneInfo

_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")  # newline and tab are kept
_CONTROLS_AND_BREAKS = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def _picture(match: re.Match[str]) -> str:
    code = ord(match[0])
    if code < 0x20:
        return chr(0x2400 + code)  # U+2400 SYMBOL FOR NULL ... U+241F SYMBOL FOR UNIT SEPARATOR
    if code == 0x7F:
        return "\N{SYMBOL FOR DELETE}"
    return "\N{REPLACEMENT CHARACTER}"


def visible(text: str, *, one_line: bool = False) -> str:
    """`text` with its control characters shown as symbols; `one_line`: newline and tab too (a word quoted
    inside a sentence), else they are kept (a multi-line record)."""
    if text.isprintable():
        return text
    return (_CONTROLS_AND_BREAKS if one_line else _CONTROLS).sub(_picture, text)


def escape(text: str, *, one_line: bool = False) -> str:
    """User or AWS text inside mrkdwn: control characters shown (see `visible`), and Slack's three control
    characters escaped, so `<!channel>` or `<@U1>` never becomes a mention or a link."""
    return visible(text, one_line=one_line).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def code(text: str, *, limit: int | None = None) -> str:
    """User text as inline code that nothing in it can break: one line, backticks turned into quotes (a
    backtick would end the code span), cut at a word boundary, escaped. Inside code Slack applies no *bold*,
    _italic_ or ~strike~, so those characters are shown as typed."""
    clean = visible(text, one_line=True).replace("`", "'")
    if limit is not None:
        clean = cut(clean, limit)
    return "`" + escape(clean) + "`" if clean.strip() else "(nothing)"


def cut(text: str, limit: int) -> str:
    """`text` within `limit` characters, cut at the last space before it (never mid-word, unless one word
    is longer than the limit) and marked with …."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    space = head.rfind(" ")
    if space >= limit // 3:  # a word boundary not too far back; else one very long word, cut where it must be
        head = head[:space]
    return head.rstrip() + "…"


def when(moment: datetime | None, tz: ZoneInfo) -> str:
    """A moment as messages show it, in the program's time zone (a naive one is UTC)."""
    if moment is None:
        return "unknown"
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=ZoneInfo("UTC"))
    return moment.astimezone(tz).strftime("%Y-%m-%d %H:%M %Z")
