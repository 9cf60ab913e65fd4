"""Block Kit for reserved capacity: the `/cluster capacity` listing, the "capacity" alert (a reservation about
to end: which clusters and how many nodes it takes away) and its coordination line. Used by the presenter in
bot.slack.alerts (PRESENTERS) and by the command's handler; it imports nothing of bot.slack.alerts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from bot.alerts.kinds import capacity as capacity_kind
from bot.capacity.model import SOURCE_LABELS, Reservation
from bot.capacity.notices import Details, read_details
from bot.capacity.service import OrgReservations
from bot.slack.blocks import Block, Reply, context, escape, fit, header, section, sections, when

LEVEL_WORDS = {"24h": "in less than 24 hours", "2h": "in less than 2 hours"}


def _left(end: datetime | None, now: datetime) -> str:
    if end is None:
        return "no end date"
    minutes = round((end - now).total_seconds() / 60)
    if minutes <= 0:
        return "ended"
    if minutes < 120:
        return f"{minutes} min left"
    hours = minutes / 60
    return f"{hours:.0f} h left" if hours < 48 else f"{hours / 24:.1f} days left"


def _uses(clusters: Sequence[tuple[str, str, int]], *, org_id: str) -> str:
    if not clusters:
        return "no cluster of the org is seen using it"
    return ", ".join(f"`{org_id}/{escape(c)}` {escape(g)}: {n} node{'s' if n != 1 else ''}" for c, g, n in clusters)


def reservation_line(reservation: Reservation, *, tz: ZoneInfo, now: datetime) -> str:
    available = "" if reservation.available is None else f", {reservation.available} available"
    zone = f" · {escape(reservation.zone)}" if reservation.zone else ""
    start = ""
    if reservation.start is not None:  # said whether to come or past: when a block began is asked too
        start = f"{'from' if reservation.start > now else 'started'} {when(reservation.start, tz)} · "
    ends = f"ends {when(reservation.end, tz)} ({_left(reservation.end, now)})" if reservation.end else "no end date"
    return (
        f"*{escape(reservation.name)}* · {reservation.label} · `{escape(reservation.status)}`\n"
        f"{reservation.total} x {escape(reservation.instance_type)}{available}{zone} · {start}{ends}\n"
        f"Used by: {_uses(reservation.clusters, org_id=reservation.org_id)}"
    )


def capacity_list(
    results: Sequence[OrgReservations],
    *,
    org_names: Mapping[str, str],
    tz: ZoneInfo,
    now: datetime,
    public: bool = False,
) -> Reply:
    """Each org's reservations, soonest end first, with end times in the program's time zone."""
    count = sum(len(r.reservations) for r in results)
    scope = org_names.get(results[0].org_id, results[0].org_id) if len(results) == 1 else f"{len(results)} orgs"
    blocks: list[Block] = [
        header(f"Reserved capacity · {scope}"),
        context(f"{count} reservation{'s' if count != 1 else ''} · times in {tz.key} · as of {when(now, tz)}"),
    ]
    fallback = [f"Reserved capacity of {scope}: {count} reservations"]
    for result in results:
        lines = [f"*{escape(org_names.get(result.org_id, result.org_id))}* (`{result.org_id}`)"]
        lines += [reservation_line(r, tz=tz, now=now) for r in result.reservations]
        if not result.reservations and not result.error:
            lines.append("_no training plans or capacity reservations_")
        if result.error:
            lines.append(f":warning: could not read: {escape(result.error)}")
        blocks += sections(lines)
        for r in result.reservations:
            fallback.append(
                f"{result.org_id}: {r.name} ({r.label}), {r.total} x {r.instance_type}, ends {when(r.end, tz)}"
            )
    blocks = fit(blocks, overflow="{hidden} more blocks not shown: ask for one org with /cluster capacity ORG")
    return Reply(text="\n".join(fallback)[:3000], blocks=blocks, public=public)


def _details(episode: Any) -> Details:
    return read_details(episode.message, fallback_name=episode.cluster_name)


def _what(episode: Any, details: Details) -> str:
    label = SOURCE_LABELS.get(episode.group_name, "reservation")
    return f"{label} `{escape(details.name)}` ({details.total} x {escape(episode.instance_type)})"


def capacity_alert(
    episode: Any,
    *,
    org_name: str,
    tz: ZoneInfo,
    now: datetime,
    buttons: Block | None,
    footer: Sequence[str],
) -> Reply:
    """A reservation ending soon, in the org's channel: when, which clusters and nodes go with it, and what to
    do (checkpoint now); edited once it has ended."""
    details = _details(episode)
    what = _what(episode, details)
    ends = episode.failing_since
    is_open = episode.state == "open"
    taken = details.nodes
    nodes = f"{taken} node{'s' if taken != 1 else ''}"
    takes = "Took away" if episode.status == capacity_kind.ENDED and not is_open else "Takes away"
    if is_open:
        title = f"Reserved capacity ends {LEVEL_WORDS.get(episode.status, 'soon')}: {what}"
        lead = f":hourglass_flowing_sand: *{title}*"
    elif episode.status == capacity_kind.EXTENDED:
        title = f"Reserved capacity no longer ends {when(ends, tz)}: {what}"
        lead = f":arrows_counterclockwise: *{title}* (its end moved; see `/cluster capacity`)"
    else:
        title = f"Reserved capacity ended: {what}"
        lead = f":white_circle: *{title}*"
    fields = [
        f"*Org*\n{escape(org_name)} (`{episode.org_id}`)",
        f"*Ends*\n{when(ends, tz)}" + (f" ({_left(ends, now)})" if is_open else ""),
        # Once it ended it took them: said as what happened, not what is to come.
        f"*{takes}*\n{nodes}" if details.clusters else f"*{takes}*\nno nodes of a known cluster",
    ]
    if details.zone:
        fields.append(f"*Zone*\n{escape(details.zone)}")
    body: list[Block] = [section(lead), section(" ", fields=fields)]
    lines = [
        f"• `{episode.org_id}/{escape(c)}` · {escape(g)}: {n} node{'s' if n != 1 else ''}"
        for c, g, n in details.clusters
    ]
    if details.more:
        lines.append(f"• and {details.more} more")
    if lines:
        body += sections(["*Clusters it takes nodes from*", *lines])
    if is_open:
        advice = (
            "*Checkpoint now*: these nodes go when the reservation ends, with whatever runs on them. Save a "
            "checkpoint, and extend the reservation or plan where the job should go on."
            if details.clusters
            else "Nothing Pitcrew knows runs on it; extend it or let it go."
        )
        body.append(section(advice))
        if buttons is not None and buttons.get("elements"):
            body.append(buttons)
    body.append(context(" · ".join(footer)))
    uses = "; ".join(f"{c}/{g}: {n}" for c, g, n in details.clusters) or "no known cluster"
    text = title.replace("`", "") + (f". Takes {nodes} ({uses}). Checkpoint now." if is_open else "")
    return Reply(text=text[:3000], blocks=fit(body, overflow="{hidden} more blocks not shown"), public=True)


def capacity_coordination_line(episode: Any, *, channel: str, tz: ZoneInfo) -> Reply:
    details = _details(episode)
    what = _what(episode, details)
    ref = f"`{episode.org_id}`"
    if episode.state == "open":
        taken = f"takes {details.nodes} nodes" if details.clusters else "no known cluster on it"
        text = f":hourglass_flowing_sand: {ref}: {what} ends {when(episode.failing_since, tz)} · {taken} · <#{channel}>"
    elif episode.status == capacity_kind.EXTENDED:
        text = (
            f":arrows_counterclockwise: {ref}: {what} no longer ends {when(episode.failing_since, tz)} · <#{channel}>"
        )
    else:
        text = f":white_circle: {ref}: {what} ended · <#{channel}>"
    return Reply(text=text.replace("`", ""), blocks=[section(text)], public=True)


def capacity_held_back(episode: Any) -> str:
    return f"reserved capacity `{escape(episode.cluster_name)}` ends soon"
