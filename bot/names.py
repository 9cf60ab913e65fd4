"""Answers for a name that matches nothing: what exists, and "did you mean ...?" for a near miss. Pure.

Callers pass only the names the asker may see, so a suggestion never reveals an org or cluster they
may not see (refusals reveal nothing)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence

from bot.mrkdwn import visible

SHOWN_NAMES = 12  # a list longer than this is cut with "and N more": a reply is read, not scanned
# The bidi and zero-width marks that make a name look like another; control characters are shown as symbols
# by bot.mrkdwn.visible, the one place that decides how they look (␀, ␛, ␡, �).
_INVISIBLE = re.compile("[\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def shown(text: str, limit: int = 40) -> str:
    """A user's word quoted back safely inside `code`: short, no backticks to break out, no control or
    invisible characters (control characters as their symbols, ␀ for NUL; invisible marks as �), and Slack's
    control characters escaped so `<!channel>` or `<@U1>` never becomes a mention."""
    clean = visible(text.replace("`", "'").replace("\n", " "), one_line=True)
    clean = _INVISIBLE.sub("\N{REPLACEMENT CHARACTER}", clean)
    clean = clean if len(clean) <= limit else clean[: limit - 1] + "…"
    return clean.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """' Did you mean `kumo-labs`?' when `name` is a near miss of one of `candidates`, else ''."""
    pool = list(dict.fromkeys(candidates))
    close = difflib.get_close_matches(name, pool, n=1, cutoff=0.6) or difflib.get_close_matches(
        name.lower(), [c.lower() for c in pool], n=1, cutoff=0.6
    )
    if not close:
        return ""
    match = next((c for c in pool if c.lower() == close[0].lower()), close[0])
    return f" Did you mean `{match}`?"


def listing(names: Sequence[str], *, limit: int = SHOWN_NAMES) -> str:
    """`a`, `b` and `c` — or `a`, `b` and 10 more — or "none"."""
    if not names:
        return "none"
    quoted = [f"`{name}`" for name in names[:limit]]
    rest = len(names) - len(quoted)
    if rest:
        return ", ".join(quoted) + f" and {rest} more"
    if len(quoted) == 1:
        return quoted[0]
    return ", ".join(quoted[:-1]) + " and " + quoted[-1]


def unknown_org(name: str, visible: Sequence[str], *, admin: bool) -> str:
    """The answer to an org id that is not one the asker may see.

    An admin sees every org, so for them the org does not exist. Anyone else gets the same words whether
    the org exists or not, and suggestions only among their own orgs."""
    hint = did_you_mean(name, visible)
    if admin:
        return f"There is no org `{shown(name)}` in this program; the orgs are {listing(visible)}.{hint}"
    if not visible:
        return f"You have no access to org `{shown(name)}`."
    return f"You have no access to org `{shown(name)}`; yours: {listing(visible)}.{hint}"


def unknown_cluster(name: str, visible: Sequence[str], *, where: str = "") -> str:
    """The answer to a cluster name that matches none the asker may see (`visible`: those names only;
    `where`: e.g. "in `kumo-labs`")."""
    place = f" {where}" if where else ""
    hint = did_you_mean(name, visible)
    if not visible:
        return f"There is no cluster `{shown(name)}`{place} that you can see; you can see none{place} yet."
    return f"There is no cluster `{shown(name)}`{place} that you can see; those you can: {listing(visible)}.{hint}"
