"""The one error boundary behind every listener and middleware.

Listeners catch what they expect (bad input is an answer, not an error); whatever escapes them ends here: it
is logged, audited as failed, the person gets one plain message where Slack lets us reach them, and Slack gets
a status below 500 (a 500 makes Slack show "failed with the error dispatch_failed" and retry). Three ways in:

- before the listener's ack (or in middleware): Bolt's error handler, `on_error`, answers with the ack;
- after it: `guarded`, which wraps every listener, reports it (`report_failure`) at once. Bolt's async runner
  would set the ack back to None and, when the failure comes within its 10 ms poll, answer Slack only after
  its 3 s timeout;
- a slash command whose answer failed: its one reply says so (INTERNAL_ERROR), audited as failed like any
  answer (handlers.commands.reply.answer_command).

`guarded` also gives every click and form submission its audit row: listeners record what they decide (a
confirm, a refusal, an acknowledgement); one that returns without recording anything (a plan no longer known,
a form opened, a cluster busy) gets one entry saying the button was pressed and nothing was changed. Slash
commands record their own (handlers.commands.reply)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import wraps
from logging import Logger
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.error import BoltUnhandledRequestError
from slack_bolt.response import BoltResponse

from bot.services import Services
from bot.slack import blocks
from storage.models import Outcome

log = logging.getLogger(__name__)

# Bolt passes a listener its arguments by parameter name: (ack, body or command, context, logger) here.
Listener = Callable[..., Awaitable[None]]
CLICK, FORM = "click", "form"  # the audit log's command names for the fallback rows (bot.audit_view reads them)
NO_DECISION = "answered; nothing changed"
# What a slash command whose answer failed replies (its one reply; its audit row says "internal error").
INTERNAL_ERROR = "Pitcrew hit an internal error answering that. It is logged; try again or tell a program admin."

UNKNOWN_BUTTON = "Pitcrew does not know this button (any more); run the command again for a fresh one."
UNKNOWN_SHORTCUT = "Pitcrew has no shortcuts; use /cluster, /track or /digest (`/cluster help` lists them)."
COULD_NOT = "Pitcrew could not handle that {what}; it is logged for the program admins. Try it again, or tell one."


def _what(body: dict[str, Any]) -> tuple[str, str]:
    """(what the person did, in words; the name the audit log records it under)."""
    if isinstance(body.get("command"), str):
        return "command", body["command"][:32]
    kind = body.get("type")
    if kind == "block_actions":
        actions = body.get("actions")
        first = actions[0] if isinstance(actions, list) and actions and isinstance(actions[0], dict) else {}
        return "click", str(first.get("action_id") or "click")[:32]
    if kind in ("view_submission", "view_closed"):
        view = body["view"] if isinstance(body.get("view"), dict) else {}
        return "form", str(view.get("callback_id") or "form")[:32]
    if kind in ("shortcut", "message_action"):
        return "shortcut", str(body.get("callback_id") or "shortcut")[:32]
    return "request", str(kind or "request")[:32]


def _user(body: dict[str, Any]) -> str:
    user = body.get("user")
    user_id = user.get("id") if isinstance(user, dict) else body.get("user_id")
    return user_id[:24] if isinstance(user_id, str) else ""


def _first_input(body: dict[str, Any]) -> str | None:
    view = body["view"] if isinstance(body.get("view"), dict) else {}
    for block in view.get("blocks") or []:
        if isinstance(block, dict) and block.get("type") == "input" and isinstance(block.get("block_id"), str):
            return str(block["block_id"])
    return None


async def on_error(
    error: Exception,
    body: dict[str, Any],
    context: dict[str, Any],
    logger: Logger,
    response: BoltResponse | None = None,
) -> BoltResponse | None:
    if isinstance(error, BoltUnhandledRequestError):
        return await _unhandled(body, context)
    message = await report_failure(error, body, context, logger)
    if response is None:  # already acknowledged: Slack's answer has gone
        return None
    block_id = _first_input(body) if body.get("type") == "view_submission" else None
    if block_id is not None:  # keep the modal open with the message under its first field
        return BoltResponse(status=200, body={"response_action": "errors", "errors": {block_id: message}})
    # Acknowledged with the message where there is no response URL to carry it; else an empty ack.
    return BoltResponse(status=200, body="" if isinstance(body.get("response_url"), str) else message)


async def report_failure(error: Exception, body: dict[str, Any], context: dict[str, Any], logger: Logger) -> str:
    """Log a failed request, audit it as failed and tell its user where Slack lets us; the message told.

    A slash command whose answer failed is not one of these: its one reply says so (INTERNAL_ERROR,
    handlers.commands.reply.answer_command)."""
    what, name = _what(body)
    logger.error("%s %s failed: %s", what, name, type(error).__name__, exc_info=error)
    message = COULD_NOT.format(what=what)
    await _audit_and_tell(
        body,
        context,
        what=what,
        name=name,
        outcome=Outcome.FAILED,
        detail=f"unhandled {type(error).__name__}",
        message=message,
    )
    return message


async def _unhandled(body: dict[str, Any], context: dict[str, Any]) -> BoltResponse:
    """No listener for it: a button or form of an older version, or an event Pitcrew subscribes to but does not
    act on (app_home_opened). Events get a quiet 200: Slack disables an app whose events keep failing.
    A shortcut (Pitcrew has none; one added to the app's configuration) is audited and answered where Slack
    lets us; an external select's options request gets an empty list, the answer Slack reads."""
    what, name = _what(body)
    if what in ("click", "form", "shortcut"):
        await _audit_and_tell(
            body,
            context,
            what=what,
            name=name,
            outcome=Outcome.INVALID,
            detail=f"no listener: an unknown {'shortcut' if what == 'shortcut' else 'button or form'}",
            message=UNKNOWN_SHORTCUT if what == "shortcut" else UNKNOWN_BUTTON,
        )
    if body.get("type") == "block_suggestion":
        return BoltResponse(status=200, body={"options": []})
    return BoltResponse(status=200, body="")


async def _audit_and_tell(
    body: dict[str, Any], context: dict[str, Any], *, what: str, name: str, outcome: Outcome, detail: str, message: str
) -> None:
    """Audit the request that went wrong and tell its user through the response URL, when there is one."""
    services: Services | None = context.get("services")
    if services is None:
        return
    services.audit.record(
        at=services.clock(),
        user_id=_user(body),
        channel_id=str(context.get("channel_id") or "")[:24],
        command=name,
        # A command is recorded by what was typed, as answer_command records it; a click or form by its name.
        text=body["text"] if what == "command" and isinstance(body.get("text"), str) else f"{what} {name}",
        outcome=outcome,
        detail=detail,
    )
    url = body.get("response_url")
    if isinstance(url, str) and url.startswith(("https://", "http://")):
        # In the background: the ack waits for nothing, and a reply that fails cannot fail the request.
        services.spawn(_tell(services, url, message))


async def _tell(services: Services, url: str, message: str) -> None:
    try:
        await services.poster.respond(url, blocks.problem(message))
    except Exception:
        log.warning("telling the user through the response URL failed", exc_info=True)


def guarded(listener: Listener) -> Listener:
    """`listener` behind the boundary (see the module docstring): a failure after its ack is reported at once,
    and a click or submission it answered without recording anything gets its audit row."""

    # inspect.signature follows @wraps to the listener's own parameters, so Bolt passes those, by name.
    @wraps(listener)
    async def behind_boundary(**kwargs: Any) -> None:
        ack: AsyncAck = kwargs["ack"]
        context: dict[str, Any] = kwargs["context"]
        body: dict[str, Any] = kwargs.get("body") or kwargs.get("command") or {}
        try:
            answered = await _run(listener, kwargs, context)
        except Exception as error:
            if ack.response is None:
                raise  # not acknowledged yet: Bolt's error handler answers with the ack (on_error)
            # Bolt passes `logger` only to a listener that asks for it by name.
            await report_failure(error, body, context, kwargs.get("logger", log))
            return
        if not answered:
            _record_no_decision(body, context)

    return behind_boundary


async def _run(listener: Listener, kwargs: dict[str, Any], context: dict[str, Any]) -> bool:
    """Run the listener; whether it is answered for in the audit log (it recorded, or there is no log)."""
    services: Services | None = context.get("services")
    if services is None:
        await listener(**kwargs)
        return True
    with services.audit.watch() as recorded:
        await listener(**kwargs)
        return recorded()


def _str(value: Any, limit: int) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _record_no_decision(body: dict[str, Any], context: dict[str, Any]) -> None:
    """The fallback row of a click (its action id and value) or form (its callback id)."""
    services: Services = context["services"]
    channel = body.get("channel")
    user = body.get("user")
    if body.get("type") == "view_submission":
        view = body.get("view") if isinstance(body.get("view"), dict) else {}
        command, text = FORM, _str((view or {}).get("callback_id"), 64) or "form"
    else:
        actions = body.get("actions")
        first = actions[0] if isinstance(actions, list) and actions and isinstance(actions[0], dict) else {}
        command = CLICK
        text = f"{_str(first.get('action_id'), 64) or 'button'} {_str(first.get('value'), 200)}".strip()
    services.audit.record(
        at=services.clock(),
        user_id=_str(user.get("id"), 24) if isinstance(user, dict) else "",
        channel_id=_str(channel.get("id"), 24) if isinstance(channel, dict) else "",
        command=command,
        text=text,
        outcome=Outcome.ALLOWED,
        detail=NO_DECISION,
    )
