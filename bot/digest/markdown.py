"""An org's tracking document as GitHub-flavoured Markdown, for people outside Slack (`pitcrew track export`).

The same content as `/track doc` (`bot.digest.render.tracking_doc_reply`), without its one-message limit: the
whole history is written. Slack's escaping does not apply here: user ids stay plain (`U0ALICE01`), and `<`, `>`
and `&` are left as typed. Only what would break a table is escaped: `|` and line breaks in cells.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from zoneinfo import ZoneInfo

from bot.clusters.model import Backend
from bot.digest.facts import Record, TrackingDoc, UsageLine
from bot.digest.render import hours_text

_HISTORY_LABEL = {
    "note": "note",
    "milestone": "milestone",
    "incident": "incident",
    "lesson": "lesson",
    "requirement": "requirement",
    "resolved": "resolved",
    "change": "cluster change",
    "failure": "failure",
    "stall": "throughput",
}


def tracking_doc_markdown(doc: TrackingDoc, *, tz: ZoneInfo) -> str:
    """The whole document: requirements, clusters now, quota and usage, open incidents, history newest first."""
    out = [
        f"# {doc.name} — tracking document",
        "",
        f"Org `{doc.org_id}` · generated {_when(doc.generated_at, tz)}",
        "",
        "## Requirements",
        "",
    ]
    if doc.requirements:
        out += _table(
            ("Requirement", "Value", "Set by", "Set at"),
            ((r.key, r.value, r.set_by, _when(r.set_at, tz)) for r in doc.requirements),
        )
    else:
        out.append("No requirements recorded (`/track require model_size=70B framework=NeMo ...` in Slack).")

    out += ["", "## Clusters now", ""]
    if doc.clusters:
        out += _table(
            ("Cluster", "Backend", "Status", "Nodes healthy", "Instances", "Last seen"),
            (
                (
                    c.name,
                    _backend(c.backend),
                    f"{c.status} (compute fleet {c.health.fleet})" if c.health.fleet else c.status,
                    f"{c.nodes_healthy}/{c.nodes_total}",
                    _instances(c.instances),
                    _when(c.last_seen_at, tz),
                )
                for c in doc.clusters
            ),
        )
    else:
        out.append("No clusters.")

    out += ["", "## Quota and usage", ""]
    kinds = sorted(set(doc.quota) | {t for t, n in doc.held.items() if n}, key=lambda t: (t not in doc.quota, t))
    if kinds:
        out += _table(
            ("Instance type", "Held now", "Quota"),
            (
                (kind, f"{doc.held.get(kind, 0):,}", f"{doc.quota[kind]:,}" if kind in doc.quota else "not under quota")
                for kind in kinds
            ),
        )
    else:
        out.append("No quota and nothing held.")
    start, end = doc.usage_window
    out += ["", f"Instance-hours used from {_when(start, tz)} to {_when(end, tz)}:", ""]
    if doc.usage:
        out += _table(("Instance type", "Instance-hours", "Quota-hours", "Share"), (_usage_row(u) for u in doc.usage))
    else:
        out.append("No instance-hours recorded.")

    out += ["", "## Open incidents", ""]
    out += [_record_item(r, tz) for r in _newest_first(doc.open_incidents)] or ["None."]

    out += ["", "## History", ""]
    for entry in doc.history:
        what = _HISTORY_LABEL.get(entry.kind, entry.kind)
        ref = f" {entry.ref}" if entry.ref else ""
        by = f" ({entry.by})" if entry.by else ""
        out.append(_item(f"{_when(entry.at, tz)} · **{what}{ref}**{by}: {entry.text}"))
    if not doc.history:
        out.append("No history yet.")

    if doc.notes:
        out += ["", "## Notes", ""]
        out += [_item(note) for note in doc.notes]
    return "\n".join(out) + "\n"


def _when(moment: datetime, tz: ZoneInfo) -> str:
    return moment.astimezone(tz).strftime("%Y-%m-%d %H:%M %Z")


def _backend(value: str) -> str:
    try:
        return Backend(value).label
    except ValueError:
        return value


def _instances(counts: Mapping[str, int]) -> str:
    items = sorted(((n, t) for t, n in counts.items() if n), key=lambda item: (-item[0], item[1]))
    return ", ".join(f"{n:,} x {t}" for n, t in items) or "none"


def _usage_row(line: UsageLine) -> tuple[str, ...]:
    if line.quota is None:
        return line.instance_type, hours_text(line.instance_hours), "not under quota", ""
    quota_hours = hours_text(line.quota_hours) if line.quota_hours is not None else ""
    share = f"{line.share * 100:.0f}%" if line.share is not None else ""
    return line.instance_type, hours_text(line.instance_hours), quota_hours, share


def _newest_first(records: Iterable[Record]) -> list[Record]:
    return sorted(records, key=lambda r: (r.created_at, r.id), reverse=True)


def _record_item(record: Record, tz: ZoneInfo) -> str:
    return _item(f"**#{record.id}** (opened {_when(record.created_at, tz)} by {record.created_by}): {record.text}")


def _item(text: str) -> str:
    """A list item; further lines of the text are indented so they stay in it."""
    first, *rest = text.splitlines() or [""]
    return "\n".join([f"- {first}", *(f"  {line}" for line in rest)])


def _cell(text: str) -> str:
    """A table cell: a `|` would end it and a line break would end the table."""
    return " <br> ".join(text.replace("|", "\\|").splitlines())


def _table(heads: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(heads) + " |", "|" + "|".join("---" for _ in heads) + "|"]
    lines += ["| " + " | ".join(_cell(str(value)) for value in row) + " |" for row in rows]
    return lines
