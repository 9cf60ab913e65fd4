"""The Home tab's view (views.publish) and the Open alerts modal, from bot.home.facts. Pure.

Slack allows 100 blocks in a Home view: the admin view gives each org that needs a look one section (most
needing it first), lists the quiet ones by name, and says how many it left out and where to see them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from bot.clusters.health import Look
from bot.digest.render import TRACK_ADD_ACTION, goodput_text
from bot.home.facts import AlertLine, ClusterLine, HomeFacts, OrgHome, Viewer
from bot.slack.blocks import (
    Block,
    button,
    context,
    divider,
    escape,
    header,
    health_icon,
    section,
    sections,
    start_fleet_button,
    when,
)

MAX_HOME_BLOCKS = 100
LAUNCH_ACTION = "launch_open"  # B's handler opens the launch modal; the value is the org id
OPEN_ALERTS_ACTION = "home_open_alerts"  # the value is the org id
CLUSTERS_PER_ORG = 8  # in the admin view's org section; the member view lists up to MEMBER_CLUSTERS
MEMBER_CLUSTERS = 30
APPROVALS_LISTED = 10  # changes waiting for one's approval listed on Home; `/cluster approvals` has them all
ALERTS_LISTED = 60
_KIND_WORDS = {
    "node": "node",
    "cluster": "cluster",
    "job": "job",
    "faulty_node": "faulty node",
    "capacity": "reserved capacity",
    "idle": "idle",
}


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}" if count == 1 else f"{count:,} {word}s"


def _hours(since: datetime | None, now: datetime) -> str:
    if since is None:
        return ""
    hours = max(0.0, (now - since).total_seconds() / 3600)
    return f" for {hours:.0f} h" if hours >= 1 else f" for {max(1, round(hours * 60))} min"


def _cluster(line: ClusterLine) -> str:
    health = line.health  # the colour and words `/cluster list` gives it (bot.clusters.health)
    kinds = ", ".join(f"{escape(t)} x{n:,}" for t, n in line.instances)
    status = f" · {escape(line.status)}" if line.status else ""
    return (
        f"{health_icon(health)} `{escape(line.name)}` ({escape(line.backend)}) {health.summary()}"
        + (f" · {kinds}" if kinds else "")
        + status
    )


def _alerts(org: OrgHome) -> str:
    if not org.open_alerts and not org.incidents:
        return ":white_check_mark: No open alerts or incidents."
    kinds = ", ".join(f"{n} {_KIND_WORDS.get(k, k)}" for k, n in sorted(org.alerts.items()) if n)
    alerts = _plural(org.open_alerts, "open alert") + (f" ({kinds})" if kinds else "")
    return f":rotating_light: {alerts} · {_plural(org.incidents, 'open incident')}"


def _quota(org: OrgHome) -> str | None:
    if not org.quota:
        return None
    return "Quota held: " + ", ".join(f"{escape(q.instance_type)} {q.held:,}/{q.quota:,}" for q in org.quota)


def _reserved(org: OrgHome, tz: ZoneInfo) -> list[str]:
    lines = []
    for r in org.ending:
        taken = ", ".join(f"`{escape(c)}` {escape(g)}: {_plural(n, 'node')}" for c, g, n in r.clusters)
        lines.append(
            f":hourglass_flowing_sand: *{escape(r.key)}* ({r.label}) {r.total:,} x {escape(r.instance_type)} "
            f"ends {when(r.end, tz)}" + (f" · takes {taken}" if taken else " · no cluster uses it")
        )
    if org.capacity_error is not None:
        lines.append(":warning: Reserved capacity could not be read.")
    return lines


def _idle(org: OrgHome, now: datetime) -> list[str]:
    return [
        f":zzz: {i.nodes:,} x {escape(i.instance_type)} idle on `{escape(i.cluster_name)}`{_hours(i.since, now)}"
        for i in org.idle
    ]


def _org_lines(org: OrgHome, facts: HomeFacts, tz: ZoneInfo, *, clusters: int) -> list[str]:
    lines = [_alerts(org)]
    shown = org.clusters[:clusters]
    lines += [_cluster(c) for c in shown] or ["No clusters seen yet."]
    if len(org.clusters) > len(shown):
        lines.append(f"… and {_plural(len(org.clusters) - len(shown), 'more cluster')}: `/cluster list {org.org_id}`")
    if quota := _quota(org):
        lines.append(quota)
    return lines + _goodput(org) + _reserved(org, tz) + _idle(org, facts.now) + _doctor(org, facts, tz)


def _goodput(org: OrgHome) -> list[str]:
    """This week's goodput so far with its parts, against last week's (nothing for an org that held nothing)."""
    value, last = org.goodput, org.goodput_last_week
    if value is None or (value.held <= 0 and (last is None or last.held <= 0)):
        return []
    return [f":chart_with_upwards_trend: This week: {goodput_text(value, last=last, running=True, bold=False)}"]


def _doctor(org: OrgHome, facts: HomeFacts, tz: ZoneInfo) -> list[str]:
    """Admins: the org's setup was wrong at its last doctor run (its first problem, and how many)."""
    if facts.viewer is not Viewer.ADMIN or org.doctor_failed_at is None:
        return []
    first = org.doctor_problems[0] if org.doctor_problems else "a check failed"
    more = f" (+{len(org.doctor_problems) - 1} more)" if len(org.doctor_problems) > 1 else ""
    return [
        f":stethoscope: Setup problem at the last doctor run ({when(org.doctor_failed_at, tz)}): "
        f"{escape(first[:300])}{more} · `/cluster doctor {org.org_id}`"
    ]


def _digest(facts: HomeFacts, org: OrgHome | None = None) -> str:
    """The admin's link goes to the coordination channel's summary; a member's (org given) to that org's own
    post in its channel."""
    link, week = facts.org_digests.get(org.org_id, (None, None)) if org else (facts.digest_link, facts.digest_week)
    if link:
        return f"Last digest: <{link}|{escape(week or 'the weekly digest')}>"
    return "No digest posted yet."


def home_view(facts: HomeFacts, *, tz: ZoneInfo) -> dict[str, Any]:
    """The Home view for one person: admin, member or outsider."""
    if facts.viewer is Viewer.ADMIN:
        blocks = _admin(facts, tz)
    elif facts.viewer is Viewer.MEMBER:
        blocks = _member(facts, tz)
    else:
        blocks = _outsider(facts)
    return {"type": "home", "blocks": _within(blocks)}


def _within(blocks: list[Block]) -> list[Block]:
    if len(blocks) <= MAX_HOME_BLOCKS:
        return blocks
    hidden = len(blocks) - (MAX_HOME_BLOCKS - 1)
    return [
        *blocks[: MAX_HOME_BLOCKS - 1],
        context(f"… {hidden} more blocks left out: `/cluster list all` has the rest."),
    ]


def _admin(facts: HomeFacts, tz: ZoneInfo) -> list[Block]:
    orgs = facts.orgs
    clusters = sum(len(o.clusters) for o in orgs)
    healthy = sum(c.healthy for o in orgs for c in o.clusters)
    nodes = sum(c.total for o in orgs for c in o.clusters)
    summary = (
        f"*{_plural(len(orgs), 'org')}* · {_plural(clusters, 'cluster')} · {healthy:,}/{nodes:,} nodes healthy · "
        f"{_plural(sum(o.open_alerts for o in orgs), 'open alert')} · "
        f"{_plural(sum(o.incidents for o in orgs), 'open incident')} · "
        f"{_plural(sum(len(o.ending) for o in orgs), 'reservation')} ending in 48 h · "
        f"{_plural(sum(len(o.idle) for o in orgs), 'idle cluster')}"
    )
    blocks: list[Block] = [
        header(f"Pitcrew · {facts.program}" if facts.program else "Pitcrew"),
        context(f"Admin view, every org · updated {when(facts.now, tz)} · {_digest(facts)}"),
        section(summary),
        context("`/track show all` usage against quota · `/cluster capacity all` reserved capacity"),
        divider(),
        *_to_approve(facts, tz),
    ]
    busy = sorted((o for o in orgs if o.attention), key=lambda o: (-o.attention, o.name.lower(), o.org_id))
    quiet = [o for o in orgs if not o.attention]
    # Room for the busy orgs: what is left after the quiet list (at most a few sections) and the "more" line.
    quiet_blocks = sections([_quiet_line(quiet)]) if quiet else []
    room = MAX_HOME_BLOCKS - len(blocks) - len(quiet_blocks) - 2
    shown = busy[: max(0, room)]
    for org in shown:
        title = f"*{escape(org.name)}* (`{escape(org.org_id)}`)"
        blocks.append(section("\n".join([title, *_org_lines(org, facts, tz, clusters=CLUSTERS_PER_ORG)])))
        if starts := _start_buttons(org):
            blocks.append({"type": "actions", "block_id": f"home_start_{org.org_id}", "elements": starts})
    if len(busy) > len(shown):
        left = busy[len(shown) :]
        names = ", ".join(f"`{escape(o.org_id)}`" for o in left)
        blocks.append(context(f"… and {_plural(len(left), 'more org')} needing a look: {names}"[:2990]))
    blocks += quiet_blocks
    return blocks


def _to_approve(facts: HomeFacts, tz: ZoneInfo) -> list[Block]:
    """Changes waiting for this person's approval (bot.approvals), oldest first; nothing when there are none."""
    if not facts.to_approve:
        return []
    lines = [
        f"• *{escape(line.summary)}*, asked by <@{line.requested_by}>: {escape(line.why)} · "
        f"expires {when(line.expires_at, tz)}"
        for line in facts.to_approve[:APPROVALS_LISTED]
    ]
    more = len(facts.to_approve) - APPROVALS_LISTED
    if more > 0:
        lines.append(f"… and {more} more: `/cluster approvals`")
    title = f":raised_hand: *Waiting for your approval* ({len(facts.to_approve)})"
    return [
        *sections([title, *lines]),
        context("Approve or reject on each request's message in its org's channel."),
        divider(),
    ]


def _quiet_line(quiet: Sequence[OrgHome]) -> str:
    names = ", ".join(f"{escape(o.name)} (`{escape(o.org_id)}`)" for o in quiet)
    text = (
        f":white_check_mark: *Quiet* ({len(quiet)}): no alerts, incidents, unhealthy nodes, ending capacity "
        f"or idle nodes: {names}"
    )
    return text if len(text) <= 2990 else text[:2980] + "…"


def _member(facts: HomeFacts, tz: ZoneInfo) -> list[Block]:
    blocks: list[Block] = []
    for org in facts.orgs:
        role = facts.roles.get(org.org_id, "viewer")
        channel = f" · <#{org.channel}>" if org.channel else ""
        blocks += [
            header(f"Pitcrew · {org.name}"),
            context(
                f"`{escape(org.org_id)}` · your role: {role}{channel} · "
                f"updated {when(facts.now, tz)} · {_digest(facts, org)}"
            ),
            *sections(_org_lines(org, facts, tz, clusters=MEMBER_CLUSTERS)),
            _buttons(org, operator=role in {"operator", "admin"}),
            divider(),
        ]
    return blocks[:2] + _to_approve(facts, tz) + blocks[2:]  # under the first org's title


def _buttons(org: OrgHome, *, operator: bool) -> Block:
    org_id = org.org_id
    elements = [button(OPEN_ALERTS_ACTION, "Open alerts", org_id)]
    if operator:  # a viewer is offered no form they could not submit, nor a fleet they could not start
        elements = [
            button(LAUNCH_ACTION, "Launch…", org_id, style="primary"),
            button(TRACK_ADD_ACTION, "Add a record", org_id),
            *elements,
            *_start_buttons(org),
        ]
    return {"type": "actions", "block_id": f"home_{org_id}", "elements": elements[:25]}


def _start_buttons(org: OrgHome) -> list[dict[str, Any]]:
    """A Start button for each stopped compute fleet of the org shown (only to whoever may operate it)."""
    stopped = [c for c in org.clusters[:MEMBER_CLUSTERS] if c.health.look is Look.STOPPED]
    return [start_fleet_button(org.org_id, c.name) for c in stopped[:5]]


def _outsider(facts: HomeFacts) -> list[Block]:
    admins = ", ".join(f"<@{a}>" for a in facts.admins) or "a program admin"
    program = f" *{escape(facts.program)}*" if facts.program else ""
    return [
        header("Pitcrew"),
        section(
            f"Pitcrew watches the accelerator clusters of the program{program}: their nodes and training jobs, "
            "alerts in each org's channel, launches and scaling with a plan to confirm, reserved capacity, "
            "and a weekly digest."
        ),
        section(
            "You are not a member of any org in this program, so there is nothing to show you here yet. "
            f"Ask {admins} to add your Slack user ID to the program file."
        ),
    ]


def alerts_modal(*, org_name: str, alerts: Sequence[AlertLine], tz: ZoneInfo) -> dict[str, Any]:
    """The Open alerts button's answer: a read-only modal listing the org's open alerts with their links."""
    lines = []
    for a in alerts[:ALERTS_LISTED]:
        what = f"{_KIND_WORDS.get(a.kind, a.kind)} · `{escape(a.cluster_name)}`"
        if a.node_key and a.node_key != "cluster":
            what += f" `{escape(a.node_key)}`"
        status = f" · {escape(a.status)}" if a.status else ""
        ends = f" · ends {when(a.ends, tz)}" if a.ends else ""
        since = f" · noticed {when(a.since, tz)}" if a.ends else f" · since {when(a.since, tz)}"
        acked = " · acknowledged" if a.acknowledged else ""
        link = f" · <{a.link}|open>" if a.link else ""
        lines.append(f"• {what}{status}{ends}{since}{acked}{link}")
    if len(alerts) > ALERTS_LISTED:
        lines.append(f"… and {_plural(len(alerts) - ALERTS_LISTED, 'more alert')} in the org's channel.")
    body = sections(lines) if lines else [section(":white_check_mark: No open alerts.")]
    return {
        "type": "modal",
        "callback_id": "home_alerts",
        "title": {"type": "plain_text", "text": "Open alerts"},
        "close": {"type": "plain_text", "text": "Close"},
        "blocks": [header(f"{org_name}: {_plural(len(alerts), 'open alert')}"), *body][:100],
    }
