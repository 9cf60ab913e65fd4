"""What every slash command does around its answer: ack empty, answer through the response URL, audit.

One command gets one reply (a digest preview too long for one message adds its continuation), and an
unexpected error becomes one plain message, never a stack trace in Slack."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from logging import Logger
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck

from bot.access import Action
from bot.names import unknown_org
from bot.services import Services
from bot.slack import blocks
from bot.slack.blocks import Reply
from storage.models import Outcome

INTERNAL_ERROR = "Pitcrew hit an internal error answering that. It is logged; try again or tell a program admin."


@dataclass(frozen=True)
class Answer:
    reply: Reply
    outcome: Outcome = Outcome.ALLOWED
    org_id: str | None = None
    detail: str = ""


def org_refusal(services: Services, *, user_id: str, action: Action, org_id: str) -> Answer | None:
    """None when the user may `action` on `org_id`; else the answer saying why not.

    An org the user cannot see gets the same words whether it exists or not (refusals reveal nothing), with
    the orgs they can see and a "did you mean" among those; for an admin, who sees every org, it does not
    exist. An org they see but whose role is too low gets the role refusal."""
    access = services.access
    visible = access.visible_orgs(user_id)
    if org_id not in visible:
        admin = access.is_admin(user_id)
        reason = unknown_org(org_id, visible, admin=admin)
        outcome = Outcome.INVALID if admin else Outcome.REFUSED
        # Audited under the org named when it exists: its operators see who tried (the asker never does).
        named = org_id if services.program.org(org_id) is not None else None
        return Answer(blocks.refusal(reason), outcome, named, reason)
    decision = access.decide(user_id=user_id, action=action, org_id=org_id)
    if decision.allowed:
        return None
    return Answer(blocks.refusal(decision.reason), Outcome.REFUSED, org_id, decision.reason)


# (services, user_id, channel_id, text, the command payload) -> the answer and any continuation messages
Answerer = Callable[[Services, str, str, str, dict[str, Any]], Awaitable[tuple[Answer, Sequence[Reply]]]]


async def answer_command(
    ack: AsyncAck, command: dict[str, Any], context: dict[str, Any], logger: Logger, *, answer: Answerer
) -> None:
    await ack()  # empty ack: the one reply goes through the response URL
    services: Services = context["services"]
    received = services.clock()
    user_id, channel_id, text = command["user_id"], command["channel_id"], command.get("text") or ""
    name = command.get("command") or "/?"
    try:
        result, more = await answer(services, user_id, channel_id, text, command)
    except Exception:
        logger.exception("%s %r from %s failed", name, text[:200], user_id)
        result, more = Answer(blocks.problem(INTERNAL_ERROR), Outcome.FAILED, detail="internal error"), ()
    await services.poster.respond(command["response_url"], result.reply)
    for reply in more:
        await services.poster.respond(command["response_url"], reply)
    # An answer that names no org (bad input, say) is audited under the org the command would have meant, so
    # that org's operators see their own typos in /cluster audit, not only admins.
    org_id = result.org_id or services.access.default_org(user_id=user_id, channel_id=channel_id)
    services.audit.record(
        at=received,
        user_id=user_id,
        channel_id=channel_id,
        command=name[:32],
        text=text,
        outcome=result.outcome,
        org_id=org_id,
        detail=result.detail,
    )
    services.metrics.command(command=name, text=text, outcome=result.outcome.value)
