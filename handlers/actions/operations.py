"""Buttons on a plan: Confirm and Cancel (any change), Delete… (opens the typed-name modal); and the Start button
of a stopped compute fleet, which makes the plan `/cluster start` makes.

Each acks first, then lets bot.operations (or bot.clusters.changes) decide, then answers the clicker.
"""

from __future__ import annotations

import json
from logging import Logger
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck

from bot.access import Action
from bot.approvals.desk import Requested
from bot.clusters.changes import ClusterBusy, NotPlanned, PlanPending, Shown
from bot.clusters.fleet import describe_error
from bot.clusters.model import Backend
from bot.operations import Decision
from bot.services import Services
from bot.slack import blocks
from bot.slack.approvals import requested_plan
from bot.slack.blocks import DELETE_OPEN_ACTION, START_FLEET_ACTION
from bot.slack.operations import decision_reply, expired_reply
from storage.models import OperationStatus, Outcome


def _operation_id(body: dict[str, Any]) -> str:
    return str(body["actions"][0].get("value") or "")[:64]


def plan_thread(body: dict[str, Any]) -> str | None:
    """The thread the clicked plan is in (a plan asked for by @mention is posted in the mention's thread)."""
    for where in (body.get("container"), body.get("message")):
        thread = where.get("thread_ts") if isinstance(where, dict) else None
        if isinstance(thread, str) and thread:
            return thread[:32]
    return None


async def _decide(body: dict[str, Any], context: dict[str, Any], *, confirm: bool) -> None:
    services: Services = context["services"]
    user_id = body["user"]["id"]
    operation_id = _operation_id(body)
    operations = services.operations
    plan = body.get("message") if isinstance(body.get("message"), dict) else None  # absent for ephemeral ones
    if confirm:
        # In front of Confirm: a change that needs approval (bot.approvals) is asked for, not started.
        decided = await confirm_or_request(services, operation_id, user_id=user_id, thread_ts=plan_thread(body))
        reply, replaces = answer(services, decided, plan=plan)
    else:
        decision = await operations.cancel(operation_id, user_id=user_id)
        reply, replaces = decision_reply(decision, plan=plan), decision.replaces
    # A decision replaces the plan (its buttons go away); a refusal goes to the clicker alone.
    await services.poster.respond(body["response_url"], reply, replace_original=replaces)


async def confirm_or_request(
    services: Services, operation_id: str, *, user_id: str, name_typed: bool = False, thread_ts: str | None = None
) -> Decision | Requested:
    """Confirm, or (a change that meets a rule of `approvals:`) its approval request."""
    if services.approvals is not None:
        return await services.approvals.confirm(
            operation_id, user_id=user_id, name_typed=name_typed, thread_ts=thread_ts
        )
    return await services.operations.confirm(operation_id, user_id=user_id, name_typed=name_typed, thread_ts=thread_ts)


def answer(
    services: Services, decided: Decision | Requested, *, plan: dict[str, Any] | None
) -> tuple[blocks.Reply, bool]:
    """What the plan's click or form is answered with, and whether it takes the plan's place."""
    if isinstance(decided, Requested):
        return requested_plan(plan, decided.approval, decided.operation, tz=services.tz), True
    return decision_reply(decided, plan=plan), decided.replaces


async def confirm_callback(ack: AsyncAck, body: dict[str, Any], context: dict[str, Any]) -> None:
    await ack()
    await _decide(body, context, confirm=True)


async def cancel_callback(ack: AsyncAck, body: dict[str, Any], context: dict[str, Any]) -> None:
    await ack()
    await _decide(body, context, confirm=False)


async def open_delete_callback(ack: AsyncAck, body: dict[str, Any], context: dict[str, Any], logger: Logger) -> None:
    """Open the modal at once (its trigger id lives 3 seconds); refusals go to the clicker instead."""
    await ack()
    services: Services = context["services"]
    user_id, operation_id = body["user"]["id"], _operation_id(body)
    operation = await services.operations.get(operation_id)
    if operation is None or operation.kind != "delete":
        reply = blocks.problem("This plan is not known (any more); run the command again.")
    elif refusal := services.operations.may_decide(operation, user_id):
        services.operations.record(
            operation, user_id=user_id, command=DELETE_OPEN_ACTION, outcome=Outcome.REFUSED, detail=refusal
        )
        reply = blocks.refusal(refusal)
    elif operation.status != OperationStatus.PLANNED.value:
        reply = blocks.problem(f"This delete is already {operation.status}; nothing more was done.")
    elif expired := services.operations.expired(operation, user_id=user_id, command=DELETE_OPEN_ACTION):
        await services.poster.respond(body["response_url"], expired_reply(expired), replace_original=True)
        return
    else:
        # The modal's submission has no response URL of its own: carry the plan's, to replace the plan.
        metadata = json.dumps(
            {"operation_id": operation.id, "response_url": body["response_url"], "thread_ts": plan_thread(body)}
        )
        try:
            await services.poster.open_view(
                trigger_id=str(body.get("trigger_id") or ""),
                view=blocks.delete_modal(operation, private_metadata=metadata),
            )
            return
        except Exception:  # an expired or missing trigger (Slack gives it 3 s): say so, not "internal error"
            logger.warning("opening the delete modal of %s failed", operation_id, exc_info=True)
            reply = blocks.problem("Slack did not open the form in time; press Delete… again.")
    await services.poster.respond(body["response_url"], reply)


async def start_fleet_callback(ack: AsyncAck, body: dict[str, Any], context: dict[str, Any]) -> None:
    """Start compute fleet (where a stopped fleet is shown to someone who may operate it): the cluster read
    fresh, the same plan and Confirm as `/cluster start`. Its plan goes where the button was, or (the Home has
    no channel) to the org's channel; a refusal goes to the clicker alone."""
    await ack()
    services: Services = context["services"]
    user_id = body["user"]["id"]
    ref = str(body["actions"][0].get("value") or "")[:120]
    org_id, _, name = ref.partition("/")
    org = services.program.org(org_id)
    channel = str((body.get("channel") or {}).get("id") or (org.channel if org else ""))

    def audit(outcome: Outcome, detail: str) -> None:
        services.audit.record(
            at=services.clock(),
            user_id=user_id,
            channel_id=channel,
            command=START_FLEET_ACTION,
            text=ref,
            outcome=outcome,
            org_id=org_id if org else None,
            detail=detail,
        )

    decision = services.access.decide(user_id=user_id, action=Action.OPERATE, org_id=org_id)
    if org is None or not decision.allowed:
        reason = decision.reason if not decision.allowed else "This cluster is not known (any more)."
        audit(Outcome.REFUSED, reason)
        await tell(services, body, user_id, blocks.refusal(reason))
        return
    try:
        cluster = await services.fleet.get(org_id, Backend.PCLUSTER, name)
        if cluster is None:
            raise NotPlanned(f"`{ref}` is gone.", outcome=Outcome.INVALID, shown=Shown.PROBLEM, org_id=org_id)
        await services.changes.check_changeable(cluster)
        planned = await services.changes.start_fleet(cluster, dry_run=False, user_id=user_id, channel_id=channel)
    except NotPlanned as not_planned:
        audit(not_planned.outcome, not_planned.detail)
        shown = blocks.refusal if not_planned.shown is Shown.REFUSAL else blocks.problem
        await tell(services, body, user_id, shown(not_planned.message))
        return
    except ClusterBusy as busy:
        audit(Outcome.REFUSED, "cluster busy")
        await tell(services, body, user_id, blocks.problem(blocks.busy_text(busy.running)))
        return
    except PlanPending as pending:
        audit(Outcome.REFUSED, f"plan pending: {pending.pending.id}")
        said = blocks.pending_text(pending.pending, expires_at=pending.expires_at, tz=services.tz)
        await tell(services, body, user_id, blocks.problem(said))
        return
    except Exception as error:  # AWS could not be read: said, not an internal error
        audit(Outcome.FAILED, describe_error(error))
        await tell(services, body, user_id, blocks.problem(f"Could not read `{ref}`: {describe_error(error)}"))
        return
    audit(Outcome.ALLOWED, f"proposed as {planned.operation_id}")
    reply = blocks.fleet_start_plan(cluster, back=planned.back, quota=planned.quota, operation_id=planned.operation_id)
    response_url = body.get("response_url")
    if isinstance(response_url, str) and response_url:
        await services.poster.respond(response_url, reply)
    else:
        await services.poster.post(channel=channel, reply=reply)


async def tell(services: Services, body: dict[str, Any], user_id: str, reply: blocks.Reply) -> None:
    """Answer the clicker alone: through the click's response URL, or (a click in the Home) in their DM."""
    response_url = body.get("response_url")
    if isinstance(response_url, str) and response_url:
        await services.poster.respond(response_url, reply)
    else:
        await services.poster.post(channel=await services.poster.open_dm(user_id), reply=reply)
