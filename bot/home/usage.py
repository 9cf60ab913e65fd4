"""`/track show all` (admins): every org's instance-hours against its quota over the last weeks, in one reply.
`program_usage` reads the cluster states the node sweep records; `usage_all_reply` draws them (pure)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from bot.config import ProgramConfig
from bot.digest.compute import instance_hours, usage_lines
from bot.digest.facts import StateChange, UsageLine
from bot.digest.render import hours_text
from bot.slack.blocks import Block, Reply, context, escape, fit, header, section, sections, when
from storage import tracking
from storage.db import Database

WARN_SHARE = 0.8  # at or above: marked


@dataclass(frozen=True)
class OrgUsage:
    org_id: str
    name: str
    lines: tuple[UsageLine, ...]


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
        )
        for org in program.orgs
    ]


def _line(line: UsageLine) -> str:
    kind = escape(line.instance_type)
    if line.quota is None or line.quota_hours is None:
        return f"{kind} {hours_text(line.instance_hours)} h (no quota)"
    share = f"{line.share * 100:.0f}%" if line.share is not None else "n/a"
    mark = " :warning:" if line.share is not None and line.share >= WARN_SHARE else ""
    return f"{kind} {hours_text(line.instance_hours)} of {hours_text(line.quota_hours)} quota-hours (*{share}*){mark}"


def usage_all_reply(usage: Sequence[OrgUsage], *, weeks: int, since: datetime, tz: ZoneInfo) -> Reply:
    """One line per org (its types side by side), packed into sections: 100 orgs fit in one message."""
    span = f"{weeks} week" + ("" if weeks == 1 else "s")
    title = f"Usage against quota · {len(usage)} orgs · last {span}"
    lines = []
    for org in usage:
        parts = " · ".join(_line(u) for u in org.lines) or "no instance-hours and no quota"
        lines.append(f"*{escape(org.name)}* (`{escape(org.org_id)}`): {parts}")
    busiest = [(u.share, org.org_id, u.instance_type) for org in usage for u in org.lines if u.share is not None]
    over = sum(1 for share, _, _ in busiest if share >= WARN_SHARE)
    blocks: list[Block] = [
        header(title),
        context(
            f"Instance-hours since {when(since, tz)} against quota x hours · "
            f"{over} org-type pair(s) at {WARN_SHARE:.0%} or more · `/track show ORG` for one org's records"
        ),
        *(sections(lines) if lines else [section("No orgs in the program.")]),
    ]
    text = f"{title}: {over} at {WARN_SHARE:.0%} or more of quota"
    return Reply(
        text=text, blocks=fit(blocks, overflow="… {hidden} more sections left out: `/track show ORG` shows one org.")
    )
