"""The delete modal's submission: the typed name must be the cluster's, else the modal says so and nothing
changes; a match is the confirmation and goes through bot.operations like any Confirm click."""

from __future__ import annotations

import json
from logging import Logger
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck

from bot.services import Services
from bot.slack import blocks
from bot.slack.blocks import DELETE_NAME_BLOCK, DELETE_NAME_INPUT
from handlers.actions.operations import answer, confirm_or_request
from storage.models import Outcome

INTERNAL_ERROR = "Pitcrew hit an internal error handling that. It is logged; nothing was deleted twice."


def _metadata(view: dict[str, Any]) -> tuple[str, str, str | None]:
    """(operation id, the plan message's response URL, the plan's thread) carried in private_metadata; empty
    when tampered."""
    try:
        metadata = json.loads(view.get("private_metadata") or "{}")
    except ValueError:
        return "", "", None
    if not isinstance(metadata, dict):
        return "", "", None
    thread = metadata.get("thread_ts")
    return (
        str(metadata.get("operation_id") or "")[:64],
        str(metadata.get("response_url") or ""),
        thread[:32] if isinstance(thread, str) and thread else None,
    )


def _typed(view: dict[str, Any]) -> str:
    """The typed name; "" when the state is not shaped as Slack sends it."""
    field: Any = view
    for key in ("state", "values", DELETE_NAME_BLOCK, DELETE_NAME_INPUT):
        field = field.get(key) if isinstance(field, dict) else None
    value = field.get("value") if isinstance(field, dict) else None
    return value.strip() if isinstance(value, str) else ""


async def delete_submission_callback(
    ack: AsyncAck, body: dict[str, Any], context: dict[str, Any], logger: Logger
) -> None:
    services: Services = context["services"]
    user_id, view = body["user"]["id"], body["view"]
    operation_id, response_url, thread_ts = _metadata(view)
    try:
        operation = await services.operations.get(operation_id) if operation_id else None
    except Exception:
        logger.exception("reading operation %s failed", operation_id)
        await ack(response_action="errors", errors={DELETE_NAME_BLOCK: INTERNAL_ERROR})
        return
    if operation is None or operation.kind != "delete":
        message = "This plan is not known any more; run `/cluster delete` again."
        await ack(response_action="errors", errors={DELETE_NAME_BLOCK: message})
        return
    typed = _typed(view)
    if typed != operation.cluster_name:
        # The modal stays open with the reason under the field; nothing is deleted.
        message = f"That is not this cluster's name. Type {operation.cluster_name} exactly to delete it."
        await ack(response_action="errors", errors={DELETE_NAME_BLOCK: message})
        services.operations.record(
            operation,
            user_id=user_id,
            command=blocks.DELETE_VIEW,
            outcome=Outcome.INVALID,
            detail=f"typed name did not match ({len(typed)} characters typed)",
        )
        return
    await ack()  # closes the modal
    try:
        decided = await confirm_or_request(
            services, operation.id, user_id=user_id, name_typed=True, thread_ts=thread_ts
        )
        reply, replaces = answer(services, decided, plan=None)
    except Exception:
        logger.exception("confirming delete %s failed", operation.id)
        reply, replaces = blocks.problem(INTERNAL_ERROR), False
    if response_url:
        await services.poster.respond(response_url, reply, replace_original=replaces)
