"""Buttons on an alert: Acknowledge, Watch, Replace node, Reboot node, Run deep health check (a failed or faulty
node, a job's culprit), Silence 1/4/24 h, Unsilence.

Each acks first, authorizes (operators of the alert's org and admins), then lets the alert desk
(bot.alerts.desk) or bot.operations act, answers the clicker, and records it in the audit log.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck

from bot.access import Action
from bot.clusters.changes import ClusterBusy, NotPlanned, PlanPending
from bot.clusters.checks import check_from_alert
from bot.clusters.model import Backend
from bot.services import Services
from bot.slack import blocks
from bot.slack.alerts import nothing_changed
from bot.slack.checks import check_plan
from handlers.gate import gated
from storage.models import Episode, Outcome, Silence

UNKNOWN = "This alert is not known (any more)."
SILENCE_HOURS = re.compile(r"alert_silence_(\d{1,2})")


async def _episode_for(
    services: Services, body: dict[str, Any], *, command: str
) -> tuple[Episode | None, blocks.Reply | None]:
    """The clicked alert's episode if the clicker may act on it; else the answer saying why not."""
    user_id = body["user"]["id"]
    value = str(body["actions"][0].get("value") or "")[:32]
    row = await services.alerts.episode(value)  # None too for a value that is no episode id ("²", 999999999999)
    if row is None:
        return None, blocks.problem(UNKNOWN)
    decision = services.access.decide(user_id=user_id, action=Action.OPERATE, org_id=row.org_id)
    if not decision.allowed:
        _audit(services, body, row, command=command, outcome=Outcome.REFUSED, detail=decision.reason)
        return None, blocks.refusal(decision.reason)
    return row, None


def _audit(
    services: Services, body: dict[str, Any], row: Episode, *, command: str, outcome: Outcome, detail: str
) -> None:
    services.audit.record(
        at=services.clock(),
        user_id=body["user"]["id"],
        channel_id=str((body.get("channel") or {}).get("id") or ""),
        command=command,
        text=f"episode {row.id} {row.org_id}/{row.cluster_name} " + " ".join(row.node_ids[-1:]),
        outcome=outcome,
        org_id=row.org_id,
        detail=detail,
    )


async def _act(
    body: dict[str, Any],
    context: dict[str, Any],
    *,
    command: str,
    act: Callable[[Services, Episode], Awaitable[blocks.Reply | None]],
) -> None:
    """Authorize the click on its alert, act, and answer the clicker when there is something to say."""
    services: Services = context["services"]
    reply: blocks.Reply | None
    row, reply = await _episode_for(services, body, command=command)
    if row is not None:
        reply = await act(services, row)
    if reply is not None:
        await services.poster.respond(body["response_url"], reply)


async def acknowledge_callback(ack: AsyncAck, body: dict[str, Any], context: dict[str, Any]) -> None:
    await ack()

    async def acknowledge(services: Services, row: Episode) -> blocks.Reply | None:
        outcome = await services.alerts.acknowledge(row, user_id=body["user"]["id"])
        why_not = nothing_changed(outcome, tz=services.tz) if outcome else None
        _audit(services, body, row, command="alert_ack", outcome=Outcome.DONE, detail=why_not or "acknowledged")
        return blocks.problem(why_not) if why_not else None  # done: the alert itself shows who

    await _act(body, context, command="alert_ack", act=acknowledge)


async def silence_callback(ack: AsyncAck, body: dict[str, Any], context: dict[str, Any]) -> None:
    await ack()
    match = SILENCE_HOURS.fullmatch(str(body["actions"][0].get("action_id")))
    hours = int(match[1]) if match else 1

    async def silence(services: Services, row: Episode) -> blocks.Reply | None:
        until, outcome = await services.alerts.silence(row, user_id=body["user"]["id"], hours=hours)
        why_not = nothing_changed(outcome, tz=services.tz) if outcome else None
        detail = why_not or f"{hours} h, until {until:%Y-%m-%d %H:%M} UTC"
        _audit(services, body, row, command="alert_silence", outcome=Outcome.DONE, detail=detail)
        return blocks.problem(why_not) if why_not else None  # done: the alert's thread says it

    await _act(body, context, command="alert_silence", act=silence)


async def unsilence_callback(ack: AsyncAck, body: dict[str, Any], context: dict[str, Any]) -> None:
    """End a silence early (its value is the silence's id): operators of its org and admins; a second press
    says it had already ended."""
    await ack()
    services: Services = context["services"]
    user_id = body["user"]["id"]
    reply: blocks.Reply | None
    value = str(body["actions"][0].get("value") or "")[:32]
    silence = await services.alerts.get_silence(value)
    if silence is None:
        reply = blocks.problem("This silence is not known (any more).")
    else:
        decision = services.access.decide(user_id=user_id, action=Action.OPERATE, org_id=silence.org_id)
        if not decision.allowed:
            _audit_silence(services, body, silence, outcome=Outcome.REFUSED, detail=decision.reason)
            reply = blocks.refusal(decision.reason)
        else:
            outcome = await services.alerts.unsilence(silence, user_id=user_id)
            why_not = nothing_changed(outcome, tz=services.tz) if outcome else None
            _audit_silence(services, body, silence, outcome=Outcome.DONE, detail=why_not or "ended early")
            reply = blocks.problem(why_not) if why_not else None  # done: the thread and the alert say it
    if reply is not None:
        await services.poster.respond(body["response_url"], reply)


def _audit_silence(
    services: Services, body: dict[str, Any], silence: Silence, *, outcome: Outcome, detail: str
) -> None:
    services.audit.record(
        at=services.clock(),
        user_id=body["user"]["id"],
        channel_id=str((body.get("channel") or {}).get("id") or ""),
        command="alert_unsilence",
        text=f"silence {silence.id} {silence.org_id}/{silence.cluster_name}",
        outcome=outcome,
        org_id=silence.org_id,
        detail=detail,
    )


async def node_action_callback(ack: AsyncAck, body: dict[str, Any], context: dict[str, Any]) -> None:
    """Replace node / Reboot node: the same plan and Confirm as `/cluster replace|reboot`, posted in the channel."""
    await ack()
    verb = "replace" if body["actions"][0].get("action_id") == "alert_replace" else "reboot"

    async def plan(services: Services, row: Episode) -> blocks.Reply | None:
        return await _plan_node_action(services, body, row, verb)

    await _act(body, context, command=f"alert_{verb}", act=plan)


async def _plan_node_action(services: Services, body: dict[str, Any], row: Episode, verb: str) -> blocks.Reply:
    # The node the alert names: a failed node's, a faulty node's, or a job alert's culprit (whose episode
    # names its cluster only: the cluster's backend comes from the clusters Pitcrew knows).
    target = await services.alerts.node_target(row)
    if target is None:
        return blocks.problem(f"This alert names no node of `{row.org_id}/{row.cluster_name}` to {verb}.")
    backend, node_id = target
    try:
        planned = await services.changes.node_from_alert(
            org_id=row.org_id,
            backend=backend,
            cluster_name=row.cluster_name,
            node_id=node_id,
            verb=verb,
            user_id=body["user"]["id"],
            channel_id=row.channel_id,
        )
    except NotPlanned as not_planned:
        return blocks.problem(not_planned.message)
    except ClusterBusy as busy:
        return blocks.problem(blocks.busy_text(busy.running))
    except PlanPending as pending:  # pressed twice, or on two alerts of one node: the first plan stands
        detail = f"plan pending: {pending.pending.id}"
        _audit(services, body, row, command=f"alert_{verb}", outcome=Outcome.REFUSED, detail=detail)
        return blocks.problem(blocks.pending_text(pending.pending, expires_at=pending.expires_at, tz=services.tz))
    detail = f"proposed as {planned.operation_id}"
    _audit(services, body, row, command=f"alert_{verb}", outcome=Outcome.ALLOWED, detail=detail)
    plan = blocks.node_action_plan(verb, planned.cluster, list(planned.nodes), operation_id=planned.operation_id)
    return await gated(services, plan, planned.operation_id)


async def check_callback(ack: AsyncAck, body: dict[str, Any], context: dict[str, Any]) -> None:
    """Run deep health check: the same plan and Confirm as `/cluster check CLUSTER NODE`, both checks, for the
    alert's node (HyperPod). A second press while its plan waits, or while a check runs, says so and offers
    nothing."""
    await ack()

    async def plan(services: Services, row: Episode) -> blocks.Reply | None:
        return await _plan_check(services, body, row)

    await _act(body, context, command="alert_check", act=plan)


async def _plan_check(services: Services, body: dict[str, Any], row: Episode) -> blocks.Reply:
    target = await services.alerts.node_target(row)
    if target is None or target[0] is not Backend.HYPERPOD:
        return blocks.problem(
            f"This alert names no HyperPod node of `{row.org_id}/{row.cluster_name}`: deep health checks are "
            "HyperPod's."
        )
    try:
        planned = await check_from_alert(
            services.changes,
            org_id=row.org_id,
            cluster_name=row.cluster_name,
            node_id=target[1],
            user_id=body["user"]["id"],
            channel_id=row.channel_id,
        )
    except NotPlanned as not_planned:
        _audit(services, body, row, command="alert_check", outcome=not_planned.outcome, detail=not_planned.detail)
        return blocks.problem(not_planned.message)
    except ClusterBusy as busy:
        _audit(services, body, row, command="alert_check", outcome=Outcome.REFUSED, detail="cluster busy")
        return blocks.problem(blocks.busy_text(busy.running))
    except PlanPending as pending:
        detail = f"plan pending: {pending.pending.id}"
        _audit(services, body, row, command="alert_check", outcome=Outcome.REFUSED, detail=detail)
        return blocks.problem(blocks.pending_text(pending.pending, expires_at=pending.expires_at, tz=services.tz))
    _audit(
        services,
        body,
        row,
        command="alert_check",
        outcome=Outcome.ALLOWED,
        detail=f"proposed as {planned.operation_id}",
    )
    return check_plan(planned)


async def watch_callback(ack: AsyncAck, body: dict[str, Any], context: dict[str, Any]) -> None:
    """Watch (a node that only diverges from its peers): acknowledged, with a reminder in the alert's thread if it
    is still open after WATCH_HOURS."""
    await ack()

    async def watch(services: Services, row: Episode) -> blocks.Reply | None:
        outcome = await services.alerts.watch(row, user_id=body["user"]["id"])
        why_not = nothing_changed(outcome, tz=services.tz) if outcome else None
        _audit(services, body, row, command="alert_watch", outcome=Outcome.DONE, detail=why_not or "watching")
        return blocks.problem(why_not) if why_not else None  # done: the alert and its thread say it

    await _act(body, context, command="alert_watch", act=watch)
