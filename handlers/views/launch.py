"""The launch form (bot.slack.launch_form): opened by the Home tab's "Launch…" button (action `launch_open`, value
= the org id) or by `/cluster launch` alone; its submission is planned by the same `Changes.launch` as the
command and leads to the same plan message with Confirm.

A submission is checked and planned before it is answered: what is wrong is shown under its field
(`response_action: errors`) and nothing is stored. A plan is posted in the org's channel (or where the form was
opened, if that is the org's or the coordination channel); the modal's view id is the request, so a retried
submission proposes one change and posts one plan. Planning that takes longer than Slack waits for the answer
closes the form and posts its outcome when it comes (a refusal then goes to the asker's DM)."""

from __future__ import annotations

import asyncio
import re
from logging import Logger
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck

from bot.access import Action
from bot.clusters.changes import LaunchPlanned, NotPlanned
from bot.clusters.templates import COUNT, launch_problems
from bot.names import unknown_org
from bot.services import Services
from bot.slack import blocks
from bot.slack.launch_form import (
    COUNT_BLOCK,
    NAME_BLOCK,
    PARAM_PREFIX,
    TEMPLATE_BLOCK,
    VALUE,
    FormMeta,
    default_template,
    form_errors,
    launch_form,
    refusal_view,
)
from handlers.gate import gated
from storage.models import Outcome

ANSWER_WITHIN = 2.5  # seconds: Slack drops a view_submission answer after 3
_COUNT = re.compile(r"\s*[0-9]{1,5}\s*")


def form_refusal(services: Services, *, user_id: str, org_id: str) -> str | None:
    """Why `user_id` gets no launch form for `org_id`, or None: the same words as the command's refusals."""
    access = services.access
    visible = access.visible_orgs(user_id)
    if org_id not in visible:
        return unknown_org(org_id, visible, admin=access.is_admin(user_id))
    decision = access.decide(user_id=user_id, action=Action.OPERATE, org_id=org_id)
    return None if decision.allowed else decision.reason


def form_view(services: Services, *, org_id: str, channel_id: str) -> dict[str, Any]:
    org = services.program.org(org_id)
    assert org is not None  # a visible org is in the program
    template = default_template(services.templates, org)
    meta = FormMeta(org_id=org_id, channel_id=channel_id, template=template.id)
    return launch_form(services.templates, org=org, template=template, meta=meta)


async def open_launch_form_callback(
    ack: AsyncAck, body: dict[str, Any], context: dict[str, Any], logger: Logger
) -> None:
    """The Home tab's "Launch…" (or any `launch_open` button): the form for the org its value names."""
    await ack()
    services: Services = context["services"]
    user_id = body["user"]["id"]
    org_id = str((body.get("actions") or [{}])[0].get("value") or "")[:40]
    channel_id = str((body.get("channel") or {}).get("id") or "")
    refusal = form_refusal(services, user_id=user_id, org_id=org_id)
    view = refusal_view(refusal) if refusal else form_view(services, org_id=org_id, channel_id=channel_id)
    _audit(
        services,
        user_id,
        channel_id,
        org_id if services.program.org(org_id) else None,
        Outcome.REFUSED if refusal else Outcome.ALLOWED,
        refusal or "launch form opened",
        text="button: launch…",
    )
    try:
        await services.poster.open_view(trigger_id=str(body.get("trigger_id") or ""), view=view)
    except Exception:  # an expired trigger (over 3 s): nothing to answer in from the Home tab but the log
        logger.warning("opening the launch form for %s failed", user_id, exc_info=True)


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _values(view: dict[str, Any]) -> dict[str, str]:
    """Every input's value by block id ("" for an empty one); selects give their option's value."""
    values: dict[str, str] = {}
    for block_id, actions in _object(_object(view.get("state")).get("values")).items():
        field = _object(_object(actions).get(VALUE))
        if "selected_option" in field or field.get("type") == "static_select":
            value = _object(field.get("selected_option")).get("value")
        else:
            value = field.get("value")
        values[str(block_id)] = value.strip() if isinstance(value, str) else ""
    return values


def _typed(values: dict[str, str]) -> dict[str, str]:
    """What was typed, by field: name, count and each parameter by its name."""
    typed = {k.removeprefix(PARAM_PREFIX): v for k, v in values.items() if k.startswith(PARAM_PREFIX)}
    typed[NAME_BLOCK] = values.get(NAME_BLOCK, "")
    typed[COUNT] = values.get(COUNT_BLOCK, "")
    return typed


async def launch_submission_callback(
    ack: AsyncAck, body: dict[str, Any], context: dict[str, Any], logger: Logger
) -> None:
    services: Services = context["services"]
    user_id, view = body["user"]["id"], _object(body.get("view"))
    meta = FormMeta.loads(view.get("private_metadata"))
    values = _values(view)
    org = services.program.org(meta.org_id) if meta else None
    if meta is None or org is None:
        await ack(response_action="errors", errors={TEMPLATE_BLOCK: "This form is out of date; open it again."})
        _audit(services, user_id, "", None, Outcome.INVALID, "launch form without its org")
        return
    refusal = form_refusal(services, user_id=user_id, org_id=org.id)
    if refusal:  # the role may have changed since the form opened
        await ack(response_action="errors", errors={TEMPLATE_BLOCK: refusal})
        _audit(services, user_id, meta.channel_id, org.id, Outcome.REFUSED, refusal)
        return
    typed = _typed(values)
    chosen = services.templates.get(values.get(TEMPLATE_BLOCK, ""))
    if chosen is None:
        await ack(response_action="errors", errors={TEMPLATE_BLOCK: "Choose a template."})
        _audit(services, user_id, meta.channel_id, org.id, Outcome.INVALID, "no template chosen")
        return
    if chosen.id != meta.template:  # another template chosen: show its parameters, keeping what was typed
        kept = {k: v for k, v in typed.items() if k in (NAME_BLOCK, COUNT)}  # parameters: the new template's
        new_meta = FormMeta(org_id=org.id, channel_id=meta.channel_id, template=chosen.id)
        note = f"The parameters of `{chosen.id}` are shown now; check them and press *Plan launch* again."
        form = launch_form(services.templates, org=org, template=chosen, meta=new_meta, typed=kept, note=note)
        await ack(response_action="update", view=form)
        return
    count = int(typed[COUNT]) if _COUNT.fullmatch(typed[COUNT]) else None
    params = {k: v for k, v in typed.items() if k not in (NAME_BLOCK, COUNT) and k in chosen.parameters and v}
    # Every field that is wrong, at once: one submit per mistake is a slow way to fill in a form.
    problems = launch_problems(chosen, name=typed[NAME_BLOCK], given=params, defaults=org.launch, count=count)
    if count is None:
        problems[COUNT] = f"Give the number of nodes as a whole number; got {typed[COUNT][:20]!r}."
    if problems:
        await ack(response_action="errors", errors=form_errors(problems, chosen))
        _audit(services, user_id, meta.channel_id, org.id, Outcome.INVALID, " ".join(problems.values()))
        return
    target = _plan_channel(services, meta, org.channel)
    command = f"launch {chosen.id} {typed[NAME_BLOCK][:63]} --count {count}" + "".join(
        f" --param {k}={v}" for k, v in params.items()
    )
    planning = asyncio.ensure_future(
        services.changes.launch(
            org_id=org.id,
            template_id=chosen.id,
            name=typed[NAME_BLOCK],
            params=params,
            count=count,
            dry_run=False,
            user_id=user_id,
            channel_id=target,
            request_key=str(view.get("id") or "") or None,
        )
    )
    done, _ = await asyncio.wait({planning}, timeout=ANSWER_WITHIN)
    if done and isinstance(planning.exception(), NotPlanned):
        refused = planning.exception()
        assert isinstance(refused, NotPlanned)
        await ack(response_action="errors", errors=form_errors({refused.field: refused.message}, chosen))
        _audit(services, user_id, meta.channel_id, org.id, refused.outcome, refused.detail, text=command)
        return
    await ack()  # closes the form; the plan (or why not) is posted
    try:
        planned = await planning
    except NotPlanned as refused:  # known only after the form closed: the asker is told in their DM
        _audit(services, user_id, meta.channel_id, org.id, refused.outcome, refused.detail, text=command)
        dm = await services.poster.open_dm(user_id)
        await services.poster.post(channel=dm, reply=blocks.refusal(f"The launch was not planned: {refused.message}"))
        return
    _audit(services, user_id, meta.channel_id, org.id, Outcome.ALLOWED, _detail(planned), text=command)
    if planned.again:
        return  # a retried submission: its plan was posted the first time
    reply = await gated(
        services, blocks.launch_plan(planned.plan, operation_id=planned.operation_id), planned.operation_id
    )
    try:
        await services.poster.post(channel=target, reply=reply)
    except Exception:
        logger.warning("posting the launch plan in %s failed; sending it to %s", target, user_id, exc_info=True)
        await services.poster.post(channel=await services.poster.open_dm(user_id), reply=reply)


def _detail(planned: LaunchPlanned) -> str:
    again = " (again)" if planned.again else ""
    return f"launch of {planned.plan.template.key} proposed as {planned.operation_id}{again}"


def _plan_channel(services: Services, meta: FormMeta, org_channel: str) -> str:
    """Where the plan goes: where the form was opened if that is the org's or the coordination channel (Pitcrew
    posts there), else the org's channel."""
    if meta.channel_id in (org_channel, services.program.coordination_channel):
        return meta.channel_id
    return org_channel


def _audit(
    services: Services,
    user_id: str,
    channel_id: str,
    org_id: str | None,
    outcome: Outcome,
    detail: str,
    *,
    text: str = "modal: launch",
) -> None:
    services.audit.record(
        at=services.clock(),
        user_id=user_id,
        channel_id=channel_id,
        command="launch_form",
        text=text[:1000],
        outcome=outcome,
        org_id=org_id,
        detail=detail[:2000],
    )
