"""The "Add a record" button on `/track`: opens the modal, listing the orgs the clicker may write to."""

from __future__ import annotations

import json
from logging import Logger
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck

from bot.access import Action
from bot.digest import render
from bot.services import Services
from bot.slack import blocks


async def open_track_modal_callback(
    ack: AsyncAck, body: dict[str, Any], context: dict[str, Any], logger: Logger
) -> None:
    await ack()
    services: Services = context["services"]
    user_id = body["user"]["id"]
    access = services.access
    writable = [
        (org.id, org.name)
        for org in services.program.orgs
        if access.may(user_id=user_id, action=Action.OPERATE, org_id=org.id)
    ]
    if not writable:  # refusals come before forms: a viewer never gets a form they cannot submit
        reason = access.decide(user_id=user_id, action=Action.OPERATE, org_id=None).reason
        if access.is_known(user_id):
            reason = "Your role lets you read tracking records, not write them; an operator of your org can."
        await _tell(services, body, user_id, blocks.refusal(reason))
        return
    preselected = str(body["actions"][0].get("value") or "")[:40]
    channel_id = (body.get("channel") or {}).get("id", "")
    view = render.track_modal(
        orgs=writable,
        default_org=preselected if preselected in {org_id for org_id, _ in writable} else None,
        private_metadata=json.dumps({"channel_id": channel_id}),
    )
    try:
        await services.poster.open_view(trigger_id=str(body.get("trigger_id") or ""), view=view)
    except Exception:  # an expired trigger (over 3 s): say so rather than fail silently
        logger.exception("opening the track modal failed")
        message = "Slack did not open the form in time; press the button again."
        await _tell(services, body, user_id, blocks.problem(message))


async def _tell(services: Services, body: dict[str, Any], user_id: str, reply: blocks.Reply) -> None:
    """Answer the clicker: in place for a click on a message; a click in the Home tab has no response URL,
    so there the answer goes to their DM with Pitcrew."""
    response_url = body.get("response_url")
    if isinstance(response_url, str) and response_url:
        await services.poster.respond(response_url, reply)
    else:
        await services.poster.post(channel=await services.poster.open_dm(user_id), reply=reply)
