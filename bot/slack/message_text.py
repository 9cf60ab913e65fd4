"""A Slack message's text read as the person who wrote it reads it. Pure.

An @mention or a DM carries Pitcrew's commands in the message text, and Slack sends that text in its own markup:
the bot's mention `<@U0PITCREW>`, channels as `<#C0KUMOLAB|kumo-labs>`, links as `<https://...|shown>` and
`<mailto:a@b.c|a@b.c>`, broadcasts as `<!here>`, and `&`, `<`, `>` escaped. Phones add curly quotes and no-break
spaces, and people wrap a command in backticks. `command_text` undoes all of that so the command tables
(bot.subcommands) see what a slash command would have carried; `split_command` finds which command it is.
"""

from __future__ import annotations

import re

# Slack's markup: <@U…>, <@U…|name>, <#C…|name>, <!here>, <!subteam^S…|@team>, <!date^…|fallback>, <url|label>.
_MARKUP = re.compile(r"<([^<>]*)>")
_ENTITIES = (("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&"))  # &amp; last: "&amp;lt;" is the text "&lt;"
# Spaces that str.split() sees but shlex (the /track parser) does not, and characters that are not there at all.
_ODD_SPACES = re.compile("[\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]")
_INVISIBLE = re.compile("[\u200b-\u200d\u2060\ufeff]")
_QUOTES = str.maketrans({"\u201c": '"', "\u201d": '"', "\u201e": '"', "\u2018": "'", "\u2019": "'", "\u00ab": '"',
                         "\u00bb": '"'})  # fmt: skip
_FENCES = re.compile(r"\A(```|`)\s*(.*?)\s*\1\Z", re.DOTALL)
COMMANDS = ("cluster", "track", "digest")
_FIRST_WORD = re.compile(r"\s*(\S+)(?:\s+(.*))?\Z", re.DOTALL)


def _readable(inner: str, bot_user_id: str | None) -> str:
    """What one `<…>` shows in Slack's client."""
    target, _, label = inner.partition("|")
    if target.startswith("@"):
        user = target[1:]
        if bot_user_id and user == bot_user_id:
            return " "  # Pitcrew itself: the address, not part of the command
        return f"<@{user}>"  # kept as a mention: a record that names a person still names them when posted
    if target.startswith("#"):
        return f"#{label}" if label else target
    if target.startswith("!"):
        if label:
            return label  # <!subteam^S1|@oncall>, <!date^…|fallback>
        return "@" + target[1:].split("^")[0]  # <!here> -> @here
    if target.startswith("mailto:"):
        return label or target.removeprefix("mailto:")
    return label or target  # a link: its label where it has one


def _read(text: str, bot_user_id: str | None) -> str:
    read = _MARKUP.sub(lambda match: _readable(match[1], bot_user_id), text)
    for entity, char in _ENTITIES:
        read = read.replace(entity, char)
    read = _INVISIBLE.sub("", _ODD_SPACES.sub(" ", read)).translate(_QUOTES).strip()
    fenced = _FENCES.match(read)
    return fenced[2].strip() if fenced else read


def command_text(text: str, *, bot_user_id: str | None) -> str:
    """The message's text as a command: Slack's markup read (the bot's own mention dropped), entities undone,
    odd spaces and curly quotes made plain, a wrapping code span or block removed, trimmed. Words before the
    mention that name no command ("hey @Pitcrew cluster list") are a greeting, not part of it."""
    read = _read(text, bot_user_id)
    if split_command(read)[0] is None and bot_user_id:
        mention = re.search(rf"<@{re.escape(bot_user_id)}(?:\|[^<>]*)?>", text)
        after = _read(text[mention.end() :], bot_user_id) if mention else ""
        if split_command(after)[0] is not None:
            return after
    return read


def split_command(text: str) -> tuple[str | None, str]:
    """("/cluster", "list all") for "cluster list all" or "/Cluster list all"; (None, text) when the first word
    names none of Pitcrew's commands (help, or something else)."""
    found = _FIRST_WORD.match(text)
    if found is None:
        return None, ""
    word, rest = found[1], (found[2] or "").strip()
    name = word.lower().removeprefix("/")
    if name in COMMANDS:
        return f"/{name}", rest
    return None, text.strip()
