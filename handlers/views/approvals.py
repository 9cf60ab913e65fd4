"""The Reject form's submission (issue 24): a reason is required (the form stays open and says so), then
bot.approvals.desk ends the request; the rejecter is told what came of it where they clicked Reject….

Its private_metadata is untrusted like a button's value: anything that names no request changes nothing."""

from __future__ import annotations

import json
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck

from bot.approvals.state import Verdict
from bot.services import Services
from bot.slack import blocks
from bot.slack.approvals import REASON_BLOCK, REASON_INPUT, vote_reply
from handlers.actions.approvals import NO_APPROVALS

MAX_REASON = 500


def _metadata(view: dict[str, Any]) -> tuple[str, str]:
    """(the request's id, the response URL of the click that opened the form); empty when tampered."""
    try:
        metadata = json.loads(view.get("private_metadata") or "{}")
    except ValueError:
        return "", ""
    if not isinstance(metadata, dict):
        return "", ""
    url = metadata.get("response_url")
    return str(metadata.get("approval_id") or "")[:32], url if isinstance(url, str) else ""


def _reason(view: dict[str, Any]) -> str:
    """The typed reason; "" when the state is not shaped as Slack sends it."""
    field: Any = view
    for key in ("state", "values", REASON_BLOCK, REASON_INPUT):
        field = field.get(key) if isinstance(field, dict) else None
    value = field.get("value") if isinstance(field, dict) else None
    return " ".join(value.split())[:MAX_REASON] if isinstance(value, str) else ""


async def reject_submission_callback(ack: AsyncAck, body: dict[str, Any], context: dict[str, Any]) -> None:
    services: Services = context["services"]
    user_id = body["user"]["id"]
    view: dict[str, Any] = body["view"] if isinstance(body.get("view"), dict) else {}
    reason = _reason(view)
    if not reason:
        await ack(response_action="errors", errors={REASON_BLOCK: "Say why: the requester sees the reason."})
        return
    await ack()  # closes the form
    raw_id, response_url = _metadata(view)
    if services.approvals is None:
        said = blocks.problem(NO_APPROVALS)
    else:
        vote = await services.approvals.vote(raw_id, user_id=user_id, verdict=Verdict.REJECT, reason=reason)
        said = vote_reply(vote, tz=services.tz)
    if response_url:
        await services.poster.respond(response_url, said)
    else:
        await services.poster.post(channel=await services.poster.open_dm(user_id), reply=said)
