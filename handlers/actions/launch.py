"""Confirm and Cancel on a launch plan: ack, then let bot.operations decide, then answer the clicker."""

from __future__ import annotations

from logging import Logger
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck

from bot.services import Services
from bot.slack import blocks

INTERNAL_ERROR = "Pitcrew hit an internal error handling that click. It is logged; nothing was started twice."


async def _decide(body: dict[str, Any], context: dict[str, Any], logger: Logger, *, confirm: bool) -> None:
    services: Services = context["services"]
    user_id = body["user"]["id"]
    operation_id = str(body["actions"][0].get("value") or "")
    operations = services.operations
    try:
        decide = operations.confirm if confirm else operations.cancel
        reply, replaces = await decide(operation_id, user_id=user_id)
    except Exception:
        logger.exception("deciding on operation %s failed", operation_id)
        reply, replaces = blocks.problem(INTERNAL_ERROR), False
    # A decision replaces the plan (its buttons go away); a refusal goes to the clicker alone.
    await services.poster.respond(body["response_url"], reply, replace_original=replaces)


async def confirm_launch_callback(ack: AsyncAck, body: dict[str, Any], context: dict[str, Any], logger: Logger) -> None:
    await ack()
    await _decide(body, context, logger, confirm=True)


async def cancel_launch_callback(ack: AsyncAck, body: dict[str, Any], context: dict[str, Any], logger: Logger) -> None:
    await ack()
    await _decide(body, context, logger, confirm=False)
