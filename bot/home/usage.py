"""`/track show all` (admins): every org's instance-hours against its quota over the last weeks, in one reply.
`program_usage` reads the cluster states the node sweep records; `usage_all_reply` draws them (pure)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from zoneinfo import ZoneInfo

from bot.config import ProgramConfig
from bot.digest.compute import held_at, instance_hours, usage_lines
from bot.digest.facts import StateChange, UsageLine
from bot.digest.render import hours_text
from bot.slack.blocks import Block, Reply, context, escape, fit, header, section, sections, when
from storage import tracking
from storage.db import Database

WARN_PERCENT = 80  # at or above, as shown (rounded): marked and counted


@dataclass(frozen=True)
class OrgUsage:
    org_id: str
    name: str
    lines: tuple[UsageLine, ...]
    held: Mapping[str, int] = field(default_factory=dict)  # instances held now by type (the usage ledger's)


async def program_usage(db: Database, *, program: ProgramConfig, since: datetime, until: datetime) -> list[OrgUsage]:
    """Each org's usage lines in [since, until), in program-file order (one query for all orgs)."""
    ids = [org.id for org in program.orgs]
    if not ids:
        return []
    async with db.session() as session:
        rows = await tracking.state_changes(session, org_ids=ids, since=since, until=until)
    changes: dict[str, list[StateChange]] = defaultdict(list)
    for row in rows:
        changes[row.org_id].append(
            StateChange(
                org_id=row.org_id,
                backend=row.backend,
                cluster_name=row.cluster_name,
                instance_type=row.instance_type,
                count=row.count,
                at=row.at,
            )
        )
    window = (until - since).total_seconds() / 3600
    return [
        OrgUsage(
            org.id,
            org.name,
            usage_lines(instance_hours(changes[org.id], since, until), quota=org.quota, window_hours=window),
            held=held_at(changes[org.id], until),
        )
        for org in program.orgs
    ]


def percent(share: float) -> int:
    """A share as the reply shows it, whole percent: the mark and the count compare this, so "80%" is marked."""
    return int(f"{share * 100:.0f}")


def shown_lines(org: OrgUsage) -> list[UsageLine]:
    """The lines worth a place: a type with a quota of 0 that nothing used nor holds says nothing."""
    return [u for u in org.lines if u.quota != 0 or u.instance_hours > 0 or org.held.get(u.instance_type, 0)]


def _marked(line: UsageLine, held: Mapping[str, int]) -> bool:
    if line.quota == 0:  # any use of a type with a quota of 0 is over it
        return line.instance_hours > 0 or held.get(line.instance_type, 0) > 0
    return line.share is not None and percent(line.share) >= WARN_PERCENT


def _line(line: UsageLine, held: Mapping[str, int]) -> str:
    kind = escape(line.instance_type)
    now = held.get(line.instance_type, 0)
    mark = " :warning:" if _marked(line, held) else ""
    if line.quota is None or line.quota_hours is None:
        return f"{kind}: {now:,} held now, {hours_text(line.instance_hours)} h (no quota)"
    if not line.quota_hours:
        return f"{kind}: {now:,}/0 held now, {hours_text(line.instance_hours)} h with a quota of 0{mark}"
    return (
        f"{kind}: {now:,}/{line.quota:,} held now, {hours_text(line.instance_hours)} of "
        f"{hours_text(line.quota_hours)} quota-hours (*{percent(line.share or 0.0)}%*){mark}"
    )


def usage_all_reply(usage: Sequence[OrgUsage], *, weeks: int, since: datetime, tz: ZoneInfo) -> Reply:
    """One line per org (its types side by side), packed into sections: 100 orgs fit in one message."""
    span = f"{weeks} week" + ("" if weeks == 1 else "s")
    title = f"Usage against quota · {len(usage)} orgs · last {span}"
    lines = []
    for org in usage:
        parts = " · ".join(_line(u, org.held) for u in shown_lines(org)) or "no instance-hours and no quota"
        lines.append(f"*{escape(org.name)}* (`{escape(org.org_id)}`): {parts}")
    over = sum(1 for org in usage for u in shown_lines(org) if _marked(u, org.held))
    blocks: list[Block] = [
        header(title),
        context(
            f"Instances held now (of the quota) and instance-hours since {when(since, tz)} against quota x hours · "
            f"{over} org-type pair(s) at {WARN_PERCENT}% or more · types with a quota of 0 that were not used are "
            "left out · `/track show ORG` for one org's records"
        ),
        *(sections(lines) if lines else [section("No orgs in the program.")]),
    ]
    text = f"{title}: {over} at {WARN_PERCENT}% or more of quota"
    return Reply(
        text=text, blocks=fit(blocks, overflow="… {hidden} more sections left out: `/track show ORG` shows one org.")
    )
