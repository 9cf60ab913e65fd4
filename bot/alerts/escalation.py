"""Escalation: an alert that nobody acknowledged within its org's `escalate_after_minutes` (default 30) is
posted again, once, in the coordination channel, mentioning the org's operators, with a link to the alert
(its permalink) and its Acknowledge button; the alert's thread says so and its footer shows when.

Run on the leader (bot.scheduler) every sweep. Exactly once across replicas and passes: the escalation is
claimed with one conditional UPDATE (still open, unacknowledged, not escalated yet -> escalated_at), so an
Acknowledge that lands first means it never escalates, and of two replicas one posts. When Slack refuses
the post, the claim is given back and the next pass tries again.

What escalates: open alerts that were posted in their org's channel (not held back by a silence), of an
org that escalates (0 or null: never), once they are older than the org's minutes, counted from their
message (a reopened alert counts from its reopening, one a silence held back from when it was posted once the
silence ended; it escalates anew). A cluster silenced since is not
escalated: someone is on it. Capacity notices do not escalate: they announce a known end time ahead of it,
nothing broke that someone must own; nor do degradation notices (low-urgency, issue 23). A storm's members
escalate as one message, by its first episode.

The escalation follows its alert: when someone acknowledges it, or it ends, the desk edits it to say so
(AlertDesk.follow_escalation), so the coordination channel never keeps a red message and a button for it.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Protocol
from zoneinfo import ZoneInfo

from bot.alerts.desk import AlertDesk
from bot.config import OrgConfig
from bot.publishing import Reply
from storage import crud
from storage.models import Episode

log = logging.getLogger(__name__)

NOT_ESCALATED = frozenset({"capacity", "degradation"})  # a degradation notice is low-urgency


class EscalationPresenter(Protocol):
    """How the line in the alert's thread reads (bot.slack.alerts.SlackAlerts); the escalation itself is the
    desk's presenter's (AlertDesk.escalation), which edits it later."""

    def escalated(self, *, minutes: float, at: datetime, tz: ZoneInfo) -> Reply: ...


def escalate_after(org: OrgConfig | None) -> timedelta | None:
    """How long an alert of this org may stay unacknowledged; None: it never escalates."""
    minutes = org.escalate_after_minutes if org is not None else None
    return timedelta(minutes=minutes) if minutes else None


def posted_at(row: Episode) -> datetime:
    """When its current message began: its opening, its last reopening (failing_since, when later), or, for
    one a silence held back, when it was posted once the silence ended (posted_at)."""
    return max(t for t in (row.opened_at, row.failing_since, row.posted_at) if t is not None)


def due(row: Episode, *, after: timedelta | None, now: datetime, skip: Collection[str] = NOT_ESCALATED) -> bool:
    """Pure: whether an episode escalates now."""
    return (
        after is not None
        and row.state == "open"
        and row.kind not in skip
        and not row.acked_by
        and row.escalated_at is None
        and not row.silenced
        and bool(row.message_ts)
        and bool(row.channel_id)
        and row.storm_id in (None, row.id)
        and now - posted_at(row) >= after
    )


class Escalation:
    def __init__(self, *, desk: AlertDesk, presenter: EscalationPresenter) -> None:
        self._desk = desk
        self._presenter = presenter

    async def check(self) -> int:
        """Escalate every alert that is due, and post the Watch reminders that are; how many were posted."""
        desk = self._desk
        try:
            reminded = await desk.remind()
        except Exception:
            log.exception("posting Watch reminders failed")
            reminded = 0
        now = desk.clock()
        async with desk.db.session() as session:
            rows = list(await crud.open_episodes(session))
        posted = 0
        for row in rows:
            org = desk.program.org(row.org_id)
            if row.kind not in desk.kinds or not due(row, after=escalate_after(org), now=now):
                continue
            try:
                posted += await self._escalate(row, org, now)
            except Exception:
                log.exception("escalating episode %s failed", row.id)
        return posted + reminded

    async def _escalate(self, row: Episode, org: OrgConfig | None, now: datetime) -> int:
        desk = self._desk
        if await desk.silence_for(row.org_id, row.backend, row.cluster_name) is not None:
            return 0  # silenced since it was posted: someone is on it
        async with desk.db.session() as session:
            if not await crud.claim_escalation(session, episode_id=row.id or 0, at=now):
                return 0  # acknowledged meanwhile, or another replica escalated it
        row.escalated_at = now
        minutes = (org.escalate_after_minutes or 0) if org else 0
        ts = await desk.post(desk.program.coordination_channel, await desk.escalation(row, now=now))
        if ts is None:
            await desk.update(row, {"escalated_at": None})  # Slack refused it: the next pass tries again
            return 0
        note = self._presenter.escalated(minutes=minutes, at=now, tz=desk.tz)
        await desk.post(row.channel_id, note, thread_ts=row.message_ts)
        await desk.refresh(row)  # its footer says when it escalated
        # Each member knows the escalation's message from now on, so whichever changes edits it.
        for member in await desk.members(row):
            values: dict[str, object] = {"escalation_ts": ts}
            if member.id != row.id:
                values["escalated_at"] = now
            await desk.update(member, values)
        row.escalation_ts = ts
        return 1
