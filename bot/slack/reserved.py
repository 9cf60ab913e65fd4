"""The reservation lines of launch and scale plans (bot.clusters.plans.ReservationLine) in Block Kit. Imports
nothing of bot.slack.blocks, which shows them in its plan renders."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot import mrkdwn
from bot.clusters.plans import ReservationLine


def _end(line: ReservationLine) -> str:
    end = line.reservation.end if line.reservation else None
    if end is None:
        return "no end date"
    return "ends " + end.astimezone(line.tz).strftime("%Y-%m-%d %H:%M %Z")


def reservation_text(line: ReservationLine) -> str:
    nodes = f"{line.requested} x {line.instance_type}"
    reservation = line.reservation
    if reservation is None:
        return f":cloud: {nodes}: On-Demand capacity, no reservation of this type."
    what = f"{reservation.label} `{mrkdwn.escape(reservation.name)}`"
    available = "" if reservation.available is None else f", {reservation.available} available"
    if not line.used:
        return (
            f":information_source: {nodes}: On-Demand; this plan does not use {what} ({reservation.total} reserved"
            f"{available}, {_end(line)}). Name it in the request to use it."
        )
    text = f":ticket: {nodes}: {line.supplied} from {what} ({reservation.total} reserved{available}, {_end(line)})."
    if line.short:
        text += f"\n:warning: Only {line.supplied} available there: {line.short} would be On-Demand or wait."
    if line.ends_before_horizon:
        days = line.horizon.days
        text += (
            f"\n:warning: It ends before the {days}-day horizon ({_end(line)}): the nodes go with it. Plan a "
            "checkpoint or extend it."
        )
    return text


def reservation_blocks(lines: Sequence[ReservationLine]) -> list[dict[str, Any]]:
    """One section saying where the nodes would come from, or nothing when the plan has no line."""
    if not lines:
        return []
    text = "*Reserved capacity*\n" + "\n".join(reservation_text(line) for line in lines)
    return [{"type": "section", "text": {"type": "mrkdwn", "text": mrkdwn.cut(text, 3000)}}]
