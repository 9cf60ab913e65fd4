"""`/track ...`: parse -> authorize -> call the record book -> render. Nothing else."""

from __future__ import annotations

from logging import Logger
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck

from bot.access import NOT_A_MEMBER, Action
from bot.commands import UsageError
from bot.digest import render
from bot.digest.commands import (
    TRACK_NEEDS,
    TRACK_SUMMARY,
    TRACK_USAGE,
    AddRecord,
    ResolveRecord,
    SetRequirements,
    ShowTrack,
    TrackDoc,
    TrackHelp,
    TrackHome,
    parse_track_command,
)
from bot.services import Services
from bot.slack import blocks
from handlers.commands.reply import Answer, answer_command, org_refusal
from storage.models import Outcome

WHICH_ORG = "Which org? This channel is not an org's channel and you can see several: add `--org ORG`."


async def track_command_callback(
    ack: AsyncAck, command: dict[str, Any], context: dict[str, Any], logger: Logger
) -> None:
    async def answer(
        services: Services, user_id: str, channel_id: str, text: str, payload: dict[str, Any]
    ) -> tuple[Answer, tuple[()]]:
        request_key = payload.get("trigger_id")  # unique per command: a retried request records once
        found = await answer_track_command(
            services, user_id=user_id, channel_id=channel_id, text=text, request_key=request_key
        )
        return found, ()

    await answer_command(ack, command, context, logger, answer=answer)


def pick_org(services: Services, *, named: str | None, user_id: str, channel_id: str) -> str | None:
    """The org a /track or /digest command means: the one named, else this channel's or the caller's only one."""
    return named or services.access.default_org(user_id=user_id, channel_id=channel_id)


def refuse(services: Services, *, user_id: str, action: Action, org_id: str) -> Answer | None:
    return org_refusal(services, user_id=user_id, action=action, org_id=org_id)


async def answer_track_command(
    services: Services, *, user_id: str, channel_id: str, text: str, request_key: str | None
) -> Answer:
    if not services.access.is_known(user_id):
        return Answer(blocks.refusal(NOT_A_MEMBER), Outcome.REFUSED, detail="not a member")
    try:
        parsed = parse_track_command(text)
    except UsageError as error:
        return Answer(blocks.usage_error(error), Outcome.INVALID, detail=error.message)
    if isinstance(parsed, TrackHelp):
        return Answer(_help(services, user_id))
    if isinstance(parsed, ResolveRecord):
        return await _resolve(services, parsed, user_id=user_id, channel_id=channel_id)
    named = parsed.org if isinstance(parsed, AddRecord | SetRequirements | ShowTrack | TrackDoc) else None
    org_id = pick_org(services, named=named, user_id=user_id, channel_id=channel_id)
    if isinstance(parsed, TrackHome):
        return await _home(services, org_id)
    if org_id is None:
        usage = UsageError(WHICH_ORG, TRACK_USAGE[_subcommand(parsed)])
        return Answer(blocks.usage_error(usage), Outcome.INVALID, detail="no org")
    needs = Action.VIEW if isinstance(parsed, ShowTrack | TrackDoc) else Action.OPERATE
    refused = refuse(services, user_id=user_id, action=needs, org_id=org_id)
    if refused:
        return refused
    org = services.program.org(org_id)
    if org is None:  # an admin naming an org that is not in the program
        reason = f"There is no org `{org_id}` in this program."
        return Answer(blocks.refusal(reason), Outcome.INVALID, org_id, reason)
    records, tz = services.records, services.tz
    if isinstance(parsed, AddRecord):
        record, new = await records.add(
            org_id=org_id,
            kind=parsed.kind,
            text=parsed.text,
            user_id=user_id,
            channel_id=channel_id,
            request_key=request_key,
        )
        reply = render.record_added(record, org_name=org.name, tz=tz)
        reply = _public_in(reply, channel_id == org.channel)
        detail = f"#{record.id} {record.kind.value}" + ("" if new else " (already recorded)")
        return Answer(reply, Outcome.DONE, org_id, detail)
    if isinstance(parsed, SetRequirements):
        changed = await records.require(org_id=org_id, pairs=parsed.pairs, user_id=user_id, request_key=request_key)
        unchanged = [key for key, _ in parsed.pairs if key not in {c[0] for c in changed}]
        reply = _public_in(
            render.requirements_set(org_name=org.name, changed=changed, unchanged=unchanged), channel_id == org.channel
        )
        return Answer(reply, Outcome.DONE, org_id, ", ".join(f"{k}={v}" for k, _, v in changed) or "unchanged")
    if isinstance(parsed, ShowTrack):
        view = await records.show(org_id=org_id, weeks=parsed.weeks)
        reply = render.track_show(
            org_id=org_id,
            org_name=org.name,
            weeks=parsed.weeks,
            since=view.since,
            records=view.records,
            open_incidents=view.open_incidents,
            usage=view.usage,
            tz=tz,
        )
        return Answer(reply, org_id=org_id)
    doc = await records.document(org_id)
    return Answer(render.tracking_doc_reply(doc, tz=tz), org_id=org_id)


def _subcommand(parsed: AddRecord | SetRequirements | ShowTrack | TrackDoc) -> str:
    if isinstance(parsed, AddRecord):
        return parsed.kind.value
    return "require" if isinstance(parsed, SetRequirements) else "show" if isinstance(parsed, ShowTrack) else "doc"


def _public_in(reply: blocks.Reply, org_channel: bool) -> blocks.Reply:
    """A change to an org's records is shown to its channel when made there; elsewhere only to the author
    (an admin recording from the coordination channel must not show one org's details to all orgs)."""
    return blocks.Reply(text=reply.text, blocks=reply.blocks, public=reply.public and org_channel)


async def _home(services: Services, org_id: str | None) -> Answer:
    org = services.program.org(org_id) if org_id else None
    if org is None:
        reply = render.track_home(org_name=None, open_incidents=0, records_this_week=0, usage_hint="")
        return Answer(reply)
    still_open, this_week = await services.records.summary(org.id)
    hint = f"/track show {org.id} shows usage against quota; /track doc {org.id} the whole document."
    reply = render.track_home(
        org_name=org.name, open_incidents=still_open, records_this_week=this_week, usage_hint=hint, org_id=org.id
    )
    return Answer(reply, org_id=org.id)


async def _resolve(services: Services, parsed: ResolveRecord, *, user_id: str, channel_id: str) -> Answer:
    record = await services.records.get(parsed.record_id)
    if record is None or not services.access.may(user_id=user_id, action=Action.VIEW, org_id=record.org_id):
        # Same words whether it does not exist or is another org's: refusals reveal nothing.
        message = f"There is no record #{parsed.record_id} in the orgs you can see. `/track show` lists them."
        return Answer(blocks.problem(message), Outcome.INVALID, detail="no such record")
    if record.kind.value != "incident":
        message = f"#{record.id} is a {record.kind.value}; only incidents are resolved."
        return Answer(blocks.problem(message), Outcome.INVALID, record.org_id, message)
    refused = refuse(services, user_id=user_id, action=Action.OPERATE, org_id=record.org_id)
    if refused:
        return refused
    current, changed = await services.records.resolve(record.id, user_id=user_id)
    org = services.program.org(record.org_id)
    name = org.name if org else record.org_id
    reply = render.record_resolved(current or record, org_name=name, tz=services.tz, already=not changed)
    reply = _public_in(reply, org is not None and channel_id == org.channel)
    detail = f"#{record.id} resolved" if changed else f"#{record.id} already resolved"
    return Answer(reply, Outcome.DONE, record.org_id, detail)


def _help(services: Services, user_id: str) -> blocks.Reply:
    visible = services.access.visible_orgs(user_id)
    allowed = [
        name
        for name, needs in TRACK_NEEDS.items()
        if needs is None or any(services.access.may(user_id=user_id, action=needs, org_id=org) for org in visible)
    ]
    lines, seen = [], set()
    for name in allowed:
        if TRACK_USAGE[name] in seen:
            continue
        seen.add(TRACK_USAGE[name])
        lines.append(f"`{TRACK_USAGE[name]}`\n{TRACK_SUMMARY[name]}")
    text = "Tracking commands you may run:\n" + "\n".join(sorted(seen))
    return blocks.Reply(text=text, blocks=[blocks.header("Pitcrew: /track"), *blocks.sections(lines)])
