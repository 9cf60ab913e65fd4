"""The "Add a record" modal's submission: checked like `/track note ...` (the text by the record book's own
check, the org, the writer's role); a problem keeps the modal open with the reason under its field, and
nothing is stored. A failure after the modal closed goes to the error boundary (handlers.errors)."""

from __future__ import annotations

import json
from logging import Logger
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck

from bot.access import Action
from bot.digest import render
from bot.digest.facts import TYPED_KINDS, RecordKind
from bot.services import Services
from bot.tracking.records import record_text_problem
from storage.models import Outcome


def _value(view: dict[str, Any], block: str, action: str) -> str:
    """An input's value; "" for one missing or not shaped as Slack sends it (HTTP requests are checked in
    bot.inbound, but Socket Mode payloads come straight to the listener)."""
    field = _object(_object(_object(_object(view.get("state")).get("values")).get(block)).get(action))
    if field.get("type") == "static_select" or "selected_option" in field:
        value = _object(field.get("selected_option")).get("value")
    else:
        value = field.get("value")
    return value if isinstance(value, str) else ""


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _channel(view: dict[str, Any]) -> str:
    try:
        metadata = json.loads(view.get("private_metadata") or "{}")
    except ValueError:
        return ""
    channel = metadata.get("channel_id") if isinstance(metadata, dict) else ""
    return channel if isinstance(channel, str) and channel[:1] in ("C", "G", "D") and channel.isalnum() else ""


def problems(services: Services, view: dict[str, Any], user_id: str) -> dict[str, str]:
    """What is wrong with a submission, by block id; empty when it may be stored."""
    errors: dict[str, str] = {}
    kind = _value(view, render.TRACK_KIND_BLOCK, render.TRACK_KIND_INPUT)
    if kind not in {k.value for k in TYPED_KINDS}:
        errors[render.TRACK_KIND_BLOCK] = "Choose a kind: note, milestone, incident or lesson."
    org_id = _value(view, render.TRACK_ORG_BLOCK, render.TRACK_ORG_INPUT)
    decision = services.access.decide(user_id=user_id, action=Action.OPERATE, org_id=org_id or None)
    if not org_id or services.program.org(org_id) is None:
        errors[render.TRACK_ORG_BLOCK] = "Choose the org this record is about."
    elif not decision.allowed:
        errors[render.TRACK_ORG_BLOCK] = decision.reason
    text = _value(view, render.TRACK_TEXT_BLOCK, render.TRACK_TEXT_INPUT).strip()
    problem = record_text_problem(text, what=kind if kind in {k.value for k in TYPED_KINDS} else "record")
    if problem:
        errors[render.TRACK_TEXT_BLOCK] = problem
    return errors


async def track_submission_callback(
    ack: AsyncAck, body: dict[str, Any], context: dict[str, Any], logger: Logger
) -> None:
    services: Services = context["services"]
    user_id, view = body["user"]["id"], body["view"]
    channel_id = _channel(view)
    errors = problems(services, view, user_id)
    org_id = _value(view, render.TRACK_ORG_BLOCK, render.TRACK_ORG_INPUT)[:40] or None
    if errors:
        await ack(response_action="errors", errors=errors)
        _audit(services, user_id, channel_id, org_id, Outcome.INVALID, "; ".join(errors.values()))
        return
    await ack()  # closes the modal
    assert org_id is not None  # checked by problems()
    kind = RecordKind(_value(view, render.TRACK_KIND_BLOCK, render.TRACK_KIND_INPUT))
    text = _value(view, render.TRACK_TEXT_BLOCK, render.TRACK_TEXT_INPUT).strip()
    # The view id is the request: a retried submission of the same modal stores one record.
    record, new = await services.records.add(
        org_id=org_id, kind=kind, text=text, user_id=user_id, channel_id=channel_id, request_key=view.get("id")
    )
    _audit(
        services, user_id, channel_id, org_id, Outcome.DONE, f"#{record.id} {kind.value}" + ("" if new else " (again)")
    )
    if not new:
        return
    org = services.program.org(org_id)
    reply = render.record_added(record, org_name=org.name if org else org_id, tz=services.tz)
    # In the org's channel for all to see; elsewhere (the coordination channel, say) to the author alone.
    target = org.channel if org and channel_id == org.channel else await services.poster.open_dm(user_id)
    try:
        await services.poster.post(channel=target, reply=reply)
    except Exception:
        logger.exception("confirming record #%s failed", record.id)


def _audit(
    services: Services, user_id: str, channel_id: str, org_id: str | None, outcome: Outcome, detail: str
) -> None:
    services.audit.record(
        at=services.clock(),
        user_id=user_id,
        channel_id=channel_id,
        command=render.TRACK_VIEW,
        text="modal: add a record",
        outcome=outcome,
        org_id=org_id,
        detail=detail,
    )
