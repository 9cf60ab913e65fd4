"""`/digest ...`: parse -> authorize -> build or post the weekly digest -> render. Nothing else."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from bot.access import Action
from bot.digest import render
from bot.digest.parse import DIGEST, DigestPreview, DigestSend
from bot.digest.render import goodput_chart, org_chart, program_chart
from bot.digest.weeks import parse_week, week_of
from bot.services import Services
from bot.slack import blocks
from bot.subcommands import UsageError
from handlers.commands.reply import Answer, Call, SlashCommand, invalid, org_refusal
from storage.models import Outcome

log = logging.getLogger(__name__)
RESPONSES = 5  # Slack accepts up to five replies through one response URL


def continuation(more: list[blocks.Reply]) -> list[blocks.Reply]:
    """What fits in the response URL's remaining replies; when it does not all fit, the last one says how many
    parts were left out and where the whole digest is, instead of dropping them silently."""
    if len(more) <= RESPONSES - 1:
        return more
    shown = more[: RESPONSES - 2]
    left = len(more) - len(shown)
    text = (
        f"… and {left} more parts of this preview, too long for Slack to show here. Preview one org at a time "
        "(`/digest preview ORG`); the posted digest (`/digest send`, admins) has every part."
    )
    return [*shown, blocks.Reply(text=text, blocks=[blocks.context(text)])]


async def _preview(call: Call, parsed: DigestPreview) -> Answer:
    services, user_id, channel_id = call.services, call.user_id, call.channel_id
    week = services.digest.current_week()
    if parsed.week:
        try:
            week = parse_week(parsed.week, services.tz)
        except ValueError as error:  # the parser checked the format; this is the calendar's say
            return invalid(UsageError(str(error), call.spec.usage))
        now = services.digest.clock()
        if week.start > now:  # nothing has happened in it yet: a digest of it would be all zeros
            running = week_of(now, services.tz).label
            reason = f"`{week.label}` has not begun yet: preview the running week ({running}) or an earlier one."
            return invalid(UsageError(reason, call.spec.usage))
    access = services.access
    org_id = parsed.org
    if org_id is None and not (access.is_admin(user_id) and services.program.org_by_channel(channel_id) is None):
        org_id = access.default_org(user_id=user_id, channel_id=channel_id)
        if org_id is None:
            usage = UsageError("Which org? You can see several and this is not an org's channel.", call.spec.usage)
            return Answer(blocks.usage_error(usage), Outcome.INVALID, detail="no org")
    also: Any = None  # the program's goodput chart, for the program-wide summary
    if org_id is None:  # an admin outside the org channels: the program-wide summary
        digest = await services.digest.build(week)
        replies = render.digest_summary(digest)
        chart_work = asyncio.to_thread(program_chart, digest)
        name = f"digest-{week.label}.png"
        if render.charted(digest):
            also = asyncio.to_thread(goodput_chart, digest)
    else:
        refused = org_refusal(services, user_id=user_id, action=Action.VIEW, org_id=org_id)
        if refused:
            return refused
        if services.program.org(org_id) is None:
            reason = f"There is no org `{org_id}` in this program."
            return Answer(blocks.refusal(reason), Outcome.INVALID, org_id, reason)
        digest = await services.digest.build(week, org_ids=[org_id])
        (section,) = digest.orgs
        replies = render.org_digest(section, week=week, program_name=services.program.name)
        chart_work = asyncio.to_thread(org_chart, section, week)
        name = f"{org_id}-{week.label}.png"
    # Files cannot be ephemeral: the preview's chart goes to the asker's direct messages.
    dm = await services.poster.open_dm(user_id)
    services.spawn(_send_chart(services, dm, chart_work, name=name, title=f"Digest preview {week.label}"))
    if also is not None:
        title = f"Goodput by org {week.label}"
        services.spawn(_send_chart(services, dm, also, name=f"goodput-{week.label}.png", title=title))
    first, *rest = replies
    note = blocks.context("Preview, only you see it. The chart is in your direct messages with Pitcrew.")
    first = blocks.Reply(text=first.text, blocks=blocks.fit([*first.blocks, note], overflow="{hidden} more blocks"))
    return Answer(first, org_id=org_id, detail=f"preview {week.label}", more=tuple(continuation(rest)))


async def _send_chart(services: Services, channel: str, work: Any, *, name: str, title: str) -> None:
    try:
        content = await work
        await services.poster.upload(channel=channel, filename=name, content=content, title=title)
    except Exception:  # the preview went already; the missing chart is logged
        log.exception("sending the digest preview chart %s failed", name)


async def _send(call: Call, parsed: DigestSend) -> Answer:
    services, user_id, force = call.services, call.user_id, parsed.force
    refused = services.access.decide(user_id=user_id, action=Action.ADMINISTER)
    if not refused.allowed:
        return Answer(blocks.refusal(refused.reason), Outcome.REFUSED, detail=refused.reason)
    week = services.digest.current_week()
    report = await services.digest.post(week, by=user_id, force=force)
    if not report.posted and not report.failed:
        run = await services.digest.last_run(week)
        reply = render.digest_already_sent(
            week=week.label,
            at=run.claimed_at if run else services.clock(),
            by=_person(run.claimed_by if run else None),
            tz=services.tz,
        )
        return Answer(reply, Outcome.INVALID, detail=f"{week.label} already posted")
    reply = render.digest_sent(week=week.label, channels=len(report.posted), skipped=report.skipped_reported)
    if report.already:
        earlier = f"Already posted earlier, not again: {len(report.already)} channel(s). `--force` reposts everywhere."
        reply = blocks.Reply(text=f"{reply.text} {earlier}", blocks=[*reply.blocks, blocks.context(earlier)])
    if report.failed:
        failed = ", ".join(f"<#{channel}>" for channel in report.failed)
        reply = blocks.Reply(
            text=reply.text + f" Slack refused it in {failed}; see the logs.",
            blocks=[*reply.blocks, blocks.context(f":warning: Not posted in {failed}: Slack refused it (logged).")],
        )
    outcome = Outcome.FAILED if report.failed and not report.posted else Outcome.DONE
    return Answer(reply, outcome, detail=f"{week.label}: {len(report.posted)} posted, {len(report.failed)} failed")


def _person(claimed_by: str | None) -> str | None:
    """A Slack user id (a person sent it), or None (the schedule on some replica did)."""
    return claimed_by if claimed_by and claimed_by[:1] in "UW" and claimed_by.isalnum() else None


DIGEST_COMMAND = SlashCommand(commands=DIGEST, title="Digest commands", runs={"preview": _preview, "send": _send})
digest_command_callback = DIGEST_COMMAND.listener
