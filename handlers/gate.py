"""The approval gate on a plan as shown (issue 24): shared by the commands, the alerts' node buttons and the launch
form, which all post plans."""

from __future__ import annotations

from bot.services import Services
from bot.slack import blocks
from bot.slack.approvals import gate


async def gated(services: Services, reply: blocks.Reply, operation_id: str | None) -> blocks.Reply:
    """A plan as shown: when its stored change meets a rule of `approvals:`, its Confirm reads "Request approval"
    and the note says why (Confirm itself asks for approval whatever the button says: bot.approvals.desk)."""
    rules = services.program.approvals
    if operation_id is None or rules is None:
        return reply
    operation = await services.operations.get(operation_id)
    need = services.operations.needs_approval(operation) if operation is not None else None
    if need is None:
        return reply
    return gate(
        reply,
        operation_id=operation_id,
        needed=need,
        approvers=rules.approvers,
        count=rules.count,
        ttl_minutes=rules.ttl_minutes,
    )
