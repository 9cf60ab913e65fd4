"""`/track ...`: each subcommand's run (parse and help: bot.tracking.parse's table): authorize -> call the
record book -> render. Nothing else."""

from __future__ import annotations

from datetime import timedelta

from bot.access import Action
from bot.config import OrgConfig
from bot.digest import render
from bot.digest.facts import TYPED_KINDS
from bot.home.usage import program_usage, usage_all_reply
from bot.services import Services
from bot.slack import blocks
from bot.subcommands import UsageError
from bot.tracking.parse import TRACK, AddRecord, ResolveRecord, SetRequirements, ShowTrack, TrackDoc, TrackHome
from bot.tracking.records import RecordRefused
from handlers.commands.reply import Answer, Call, SlashCommand, invalid, org_refusal
from storage.models import Outcome

WHICH_ORG = "Which org? This channel is not an org's channel and you can see several: add `--org ORG`."


def pick_org(services: Services, *, named: str | None, user_id: str, channel_id: str) -> str | None:
    """The org a /track or /digest command means: the one named, else this channel's or the caller's only one."""
    return named or services.access.default_org(user_id=user_id, channel_id=channel_id)


def _org_for(call: Call, named: str | None) -> OrgConfig | Answer:
    """The org the command means, once the caller may do what its subcommand needs there; else the answer."""
    services = call.services
    org_id = pick_org(services, named=named, user_id=call.user_id, channel_id=call.channel_id)
    if org_id is None:
        return Answer(blocks.usage_error(UsageError(WHICH_ORG, call.spec.usage)), Outcome.INVALID, detail="no org")
    assert call.spec.needs is not None  # every subcommand run here names the role it needs
    refused = org_refusal(services, user_id=call.user_id, action=call.spec.needs, org_id=org_id)
    if refused:
        return refused
    org = services.program.org(org_id)
    if org is None:  # an admin naming an org that is not in the program
        reason = f"There is no org `{org_id}` in this program."
        return Answer(blocks.refusal(reason), Outcome.INVALID, org_id, reason)
    return org


def _public_in(reply: blocks.Reply, org_channel: bool) -> blocks.Reply:
    """A change to an org's records is shown to its channel when made there; elsewhere only to the author
    (an admin recording from the coordination channel must not show one org's details to all orgs)."""
    return blocks.Reply(text=reply.text, blocks=reply.blocks, public=reply.public and org_channel)


async def _home(call: Call, _: TrackHome) -> Answer:
    services = call.services
    org_id = pick_org(services, named=None, user_id=call.user_id, channel_id=call.channel_id)
    org = services.program.org(org_id) if org_id else None
    # The form lists the orgs the caller may write to: offered only when there is one (a viewer has none).
    writable = [
        o.id
        for o in services.program.orgs
        if services.access.may(user_id=call.user_id, action=Action.OPERATE, org_id=o.id)
    ]
    if org is None:
        reply = render.track_home(
            org_name=None, open_incidents=0, records_this_week=0, usage_hint="", may_add=bool(writable)
        )
        return Answer(reply)
    still_open, this_week = await services.records.summary(org.id)
    hint = f"/track show {org.id} shows usage against quota; /track doc {org.id} the whole document."
    reply = render.track_home(
        org_name=org.name,
        open_incidents=still_open,
        records_this_week=this_week,
        usage_hint=hint,
        org_id=org.id if org.id in writable else None,
        may_add=bool(writable),
    )
    return Answer(reply, org_id=org.id)


async def _add(call: Call, parsed: AddRecord) -> Answer:
    org = _org_for(call, parsed.org)
    if isinstance(org, Answer):
        return org
    try:
        record, new = await call.services.records.add(
            org_id=org.id,
            kind=parsed.kind,
            text=parsed.text,
            user_id=call.user_id,
            channel_id=call.channel_id,
            request_key=call.request_key,
        )
    except RecordRefused as refused:
        return invalid(UsageError(str(refused), call.spec.usage), org.id)
    reply = render.record_added(record, org_name=org.name, tz=call.services.tz)
    reply = _public_in(reply, call.channel_id == org.channel)
    detail = f"#{record.id} {record.kind.value}" + ("" if new else " (already recorded)")
    return Answer(reply, Outcome.DONE, org.id, detail)


async def _require(call: Call, parsed: SetRequirements) -> Answer:
    org = _org_for(call, parsed.org)
    if isinstance(org, Answer):
        return org
    try:
        changed = await call.services.records.require(
            org_id=org.id, pairs=parsed.pairs, user_id=call.user_id, request_key=call.request_key
        )
    except RecordRefused as refused:
        return invalid(UsageError(str(refused), call.spec.usage), org.id)
    unchanged = [key for key, _ in parsed.pairs if key not in {c[0] for c in changed}]
    reply = _public_in(
        render.requirements_set(org_name=org.name, changed=changed, unchanged=unchanged),
        call.channel_id == org.channel,
    )
    return Answer(reply, Outcome.DONE, org.id, ", ".join(f"{k}={v}" for k, _, v in changed) or "unchanged")


async def _show(call: Call, parsed: ShowTrack) -> Answer:
    if parsed.every:
        return await _show_all(call, parsed)
    org = _org_for(call, parsed.org)
    if isinstance(org, Answer):
        return org
    view = await call.services.records.show(org_id=org.id, weeks=parsed.weeks)
    reply = render.track_show(
        org_id=org.id,
        org_name=org.name,
        weeks=parsed.weeks,
        since=view.since,
        records=view.records,
        open_incidents=view.open_incidents,
        usage=view.usage,
        held=view.held,
        tz=call.services.tz,
        goodput=view.goodput,
    )
    return Answer(reply, org_id=org.id)


async def _show_all(call: Call, parsed: ShowTrack) -> Answer:
    """`/track show all`: every org's usage against quota, for admins (the Home's admin view points here)."""
    services = call.services
    decision = services.access.decide(user_id=call.user_id, action=Action.ADMINISTER)
    if not decision.allowed:
        reason = decision.reason
        if services.access.is_known(call.user_id):
            reason = "Only program admins see every org's usage; `/track show` shows your org's."
        return Answer(blocks.refusal(reason), Outcome.REFUSED, detail=reason)
    now = services.clock()
    since = now - timedelta(weeks=parsed.weeks)
    usage = await program_usage(services.db, program=services.program, since=since, until=now)
    return Answer(usage_all_reply(usage, weeks=parsed.weeks, since=since, tz=services.tz), detail="all orgs")


async def _doc(call: Call, parsed: TrackDoc) -> Answer:
    org = _org_for(call, parsed.org)
    if isinstance(org, Answer):
        return org
    doc = await call.services.records.document(org.id)
    return Answer(render.tracking_doc_reply(doc, tz=call.services.tz), org_id=org.id)


async def _resolve(call: Call, parsed: ResolveRecord) -> Answer:
    services, user_id = call.services, call.user_id
    record = await services.records.get(parsed.record_id)
    if record is None or not services.access.may(user_id=user_id, action=Action.VIEW, org_id=record.org_id):
        # Same words whether it does not exist or is another org's: refusals reveal nothing.
        message = f"There is no record #{parsed.record_id} in the orgs you can see. `/track show` lists them."
        return Answer(blocks.problem(message), Outcome.INVALID, detail="no such record")
    if record.kind.value != "incident":
        message = f"#{record.id} is a {record.kind.value}; only incidents are resolved."
        return Answer(blocks.problem(message), Outcome.INVALID, record.org_id, message)
    refused = org_refusal(services, user_id=user_id, action=Action.OPERATE, org_id=record.org_id)
    if refused:
        return refused
    current, changed = await services.records.resolve(record.id, user_id=user_id)
    org = services.program.org(record.org_id)
    name = org.name if org else record.org_id
    reply = render.record_resolved(current or record, org_name=name, tz=services.tz, already=not changed)
    reply = _public_in(reply, org is not None and call.channel_id == org.channel)
    detail = f"#{record.id} resolved" if changed else f"#{record.id} already resolved"
    return Answer(reply, Outcome.DONE, record.org_id, detail)


TRACK_COMMAND = SlashCommand(
    commands=TRACK,
    title="Tracking commands",
    runs={
        "": _home,
        **{kind.value: _add for kind in TYPED_KINDS},
        "require": _require,
        "resolve": _resolve,
        "show": _show,
        "doc": _doc,
    },
)
track_command_callback = TRACK_COMMAND.listener
