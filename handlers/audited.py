"""Every click and form submission reaches the audit log.

Listeners record what they decide (a confirm, a refusal, an acknowledgement); the paths that decide
nothing (a plan no longer known, a form opened, a cluster busy, a node gone) recorded nothing, so those
clicks left no trace. `audited` wraps a listener: when it returns without recording anything, one entry
says the button was pressed and nothing was changed. An exception before the ack is left to Bolt and
handlers/errors.py, which records it as failed (one entry, not two) and answers with the ack; one after the
ack is reported here through the same handlers.errors.report_failure: Bolt's async runner would set the ack
back to None and, when the failure comes within its 10 ms poll, answer Slack only after its 3 s timeout."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import wraps
from logging import Logger
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck

from bot.services import Services
from handlers.errors import report_failure
from storage.models import Outcome

Listener = Callable[[AsyncAck, dict[str, Any], dict[str, Any], Logger], Awaitable[None]]
CLICK, FORM = "click", "form"  # the audit log's command names for these entries (bot.audit_view reads them)
NO_DECISION = "answered; nothing changed"


def _str(value: Any, limit: int) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _entry(body: dict[str, Any]) -> tuple[str, str, str]:
    """(command, text, channel) of the fallback entry: the button's action id and value, or the form's
    callback id."""
    channel = body.get("channel")
    channel_id = _str(channel.get("id"), 24) if isinstance(channel, dict) else ""
    if body.get("type") == "view_submission":
        view = body.get("view") if isinstance(body.get("view"), dict) else {}
        return FORM, _str((view or {}).get("callback_id"), 64) or "form", channel_id
    actions = body.get("actions")
    first = actions[0] if isinstance(actions, list) and actions and isinstance(actions[0], dict) else {}
    action_id = _str(first.get("action_id"), 64) or "button"
    value = _str(first.get("value"), 200)
    return CLICK, f"{action_id} {value}".strip(), channel_id


def audited(listener: Listener) -> Listener:
    """`listener`, with an entry of its own for a click or submission it answered without recording one."""

    # Bolt passes arguments by parameter name: these four, as every action and view listener here takes.
    @wraps(listener)
    async def with_audit(ack: AsyncAck, body: dict[str, Any], context: dict[str, Any], logger: Logger) -> None:
        try:
            answered = await _run(listener, ack, body, context, logger)
        except Exception as error:
            if ack.response is None:
                raise  # not acknowledged yet: Bolt's error handler answers (handlers.errors.on_error)
            await report_failure(error, body, context, logger)
            return
        if answered:
            return
        services: Services = context["services"]
        user = body.get("user")
        command, text, channel_id = _entry(body)
        services.audit.record(
            at=services.clock(),
            user_id=_str(user.get("id"), 24) if isinstance(user, dict) else "",
            channel_id=channel_id,
            command=command,
            text=text,
            outcome=Outcome.ALLOWED,
            detail=NO_DECISION,
        )

    return with_audit


def reported(listener: Listener) -> Listener:
    """`listener`, whose failure after its ack is reported here, not left to Bolt (see the module docstring).
    For the slash commands, which audit themselves."""

    # Bolt passes arguments by the names `inspect.signature` finds, which follows @wraps to the slash-command
    # listeners' own: (ack, command, context, logger).
    @wraps(listener)
    async def with_report(ack: AsyncAck, command: dict[str, Any], context: dict[str, Any], logger: Logger) -> None:
        try:
            await listener(ack, command, context, logger)
        except Exception as error:
            if ack.response is None:
                raise
            await report_failure(error, command, context, logger)

    return with_report


async def _run(
    listener: Listener, ack: AsyncAck, body: dict[str, Any], context: dict[str, Any], logger: Logger
) -> bool:
    """Run the listener; whether it is answered for in the audit log (it recorded, or there is no log)."""
    services: Services | None = context.get("services")
    if services is None:
        await listener(ack, body, context, logger)
        return True
    with services.audit.watch() as recorded:
        await listener(ack, body, context, logger)
        return recorded()
