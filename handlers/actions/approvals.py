"""Buttons on an approval request (issue 24): Approve, and Reject… (opens the modal that asks why; the
reason is required, handlers.views.approvals). Each acks first, lets bot.approvals.desk decide, then tells the
clicker alone what came of it; the request message itself is edited by the desk for everyone.

A button's value is untrusted: anything that names no request gets one message and changes nothing."""

from __future__ import annotations

import json
from logging import Logger
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck

from bot.approvals.state import Verdict
from bot.services import Services
from bot.slack import blocks
from bot.slack.approvals import reject_modal, vote_reply
from handlers.actions.operations import tell

NO_APPROVALS = "Approvals are not set up in this Pitcrew (no `approvals:` block); nothing was changed."


def _value(body: dict[str, Any]) -> str:
    actions = body.get("actions")
    first = actions[0] if isinstance(actions, list) and actions and isinstance(actions[0], dict) else {}
    return str(first.get("value") or "")[:32]


async def approve_callback(ack: AsyncAck, body: dict[str, Any], context: dict[str, Any]) -> None:
    await ack()
    services: Services = context["services"]
    user_id = body["user"]["id"]
    if services.approvals is None:
        await tell(services, body, user_id, blocks.problem(NO_APPROVALS))
        return
    vote = await services.approvals.vote(_value(body), user_id=user_id, verdict=Verdict.APPROVE)
    await tell(services, body, user_id, vote_reply(vote, tz=services.tz))


async def open_reject_callback(ack: AsyncAck, body: dict[str, Any], context: dict[str, Any], logger: Logger) -> None:
    """Open the reason form at once (its trigger id lives 3 seconds); refusals go to the clicker instead."""
    await ack()
    services: Services = context["services"]
    user_id = body["user"]["id"]
    if services.approvals is None:
        await tell(services, body, user_id, blocks.problem(NO_APPROVALS))
        return
    found = await services.approvals.open_reject(_value(body), user_id=user_id)
    if not isinstance(found, tuple):
        await tell(services, body, user_id, vote_reply(found, tz=services.tz))
        return
    approval, operation = found
    response_url = body.get("response_url")
    metadata = json.dumps(
        {"approval_id": approval.id, "response_url": response_url if isinstance(response_url, str) else ""}
    )
    try:
        await services.poster.open_view(
            trigger_id=str(body.get("trigger_id") or ""),
            view=reject_modal(approval, operation, private_metadata=metadata),
        )
    except Exception:  # an expired or missing trigger (Slack gives it 3 s): say so, not "internal error"
        logger.warning("opening the reject form of approval %s failed", approval.id, exc_info=True)
        await tell(services, body, user_id, blocks.problem("Slack did not open the form in time; press Reject… again."))
