"""`/cluster ...`: each subcommand's run (parse and help: bot.commands' table): authorize -> ask the fleet or
plan the change (bot.clusters.changes) -> render. Nothing else."""

from __future__ import annotations

import logging
from datetime import timedelta

from bot.access import Action
from bot.clusters.changes import ClusterBusy, FleetStopOffered, NotPlanned, PlanPending, Shown
from bot.clusters.checks import chosen_checks, plan_check
from bot.clusters.fleet import describe_error
from bot.clusters.model import Backend, Cluster
from bot.commands import (
    CLUSTER,
    CheckNodes,
    ClusterNodes,
    ClusterRef,
    ClusterStatus,
    DeleteCluster,
    LaunchCluster,
    LaunchForm,
    ListApprovals,
    ListCapacity,
    ListClusters,
    ListTemplates,
    NodeAction,
    RunDoctor,
    ScaleGroup,
    ShowAudit,
    ShowThroughput,
    StartFleet,
    UsageError,
)
from bot.iam.doctor import checkup
from bot.names import did_you_mean, listing, unknown_org
from bot.services import Services
from bot.slack import blocks
from bot.slack import capacity as capacity_blocks
from bot.slack.approvals import approvals_list
from bot.slack.checks import check_plan
from bot.slack.doctor import doctor_reply
from handlers.commands.reply import Answer, Call, SlashCommand, org_refusal
from handlers.gate import gated
from handlers.views.launch import form_view
from storage.models import Outcome


def _orgs_meant(call: Call, target: str | None) -> list[str] | Answer:
    """The orgs a listing is about: none named, the channel's org or one's own; `all`, every org one may see
    (every org for an admin); an org named, that org, or the refusal that says what exists."""
    services, user_id = call.services, call.user_id
    if target is None:
        return services.access.default_orgs(user_id=user_id, channel_id=call.channel_id)
    if target == "all":
        return services.access.visible_orgs(user_id)  # narrowed for non-admins
    refused = org_refusal(services, user_id=user_id, action=Action.VIEW, org_id=target)
    return refused if refused else [target]


async def _list(call: Call, parsed: ListClusters) -> Answer:
    services = call.services
    org_ids = _orgs_meant(call, parsed.target)
    if isinstance(org_ids, Answer):
        return org_ids
    results = await services.fleet.list_orgs(org_ids)
    # Recording what was seen (fresh from AWS, not from the cache) must not delay the reply.
    services.spawn(services.remember([c for r in results if not r.cached for c in r.clusters]))
    operable = [] if parsed.public else [o for o in org_ids if _may_operate(services, call.user_id, o)]
    reply = blocks.cluster_list(
        results, org_names=services.org_names, tz=services.tz, public=parsed.public, operable=operable
    )
    return Answer(reply, org_id=org_ids[0] if len(org_ids) == 1 else None)


async def _capacity(call: Call, parsed: ListCapacity) -> Answer:
    """Reserved capacity of the org(s) meant, as `/cluster list` picks them (admins: `all`; others their own)."""
    services = call.services
    org_ids = _orgs_meant(call, parsed.target)
    if isinstance(org_ids, Answer):
        return org_ids
    if services.capacity is None:
        return Answer(blocks.problem("Reserved capacity is not available in this Pitcrew."), Outcome.FAILED)
    results = await services.capacity.many(org_ids)
    reply = capacity_blocks.capacity_list(
        results, org_names=services.org_names, tz=services.tz, now=services.clock(), public=parsed.public
    )
    return Answer(reply, org_id=org_ids[0] if len(org_ids) == 1 else None)


async def _find_cluster(
    services: Services, ref: ClusterRef, *, user_id: str, missing: Outcome = Outcome.ALLOWED
) -> Cluster | Answer:
    """The one cluster `ref` names among the orgs the user may see, or the answer saying why not (`missing`:
    the outcome recorded for a name that matches none, or several)."""
    visible = services.access.visible_orgs(user_id)
    if ref.org is not None and ref.org not in visible:
        # Refusals reveal nothing: the same answer whether the org exists or not.
        reason = unknown_org(ref.org, visible, admin=services.access.is_admin(user_id))
        return Answer(blocks.refusal(reason), Outcome.REFUSED, detail="org not visible")
    org_ids = [ref.org] if ref.org else visible
    lookup = await services.fleet.find(ref.name, org_ids)
    if not lookup.found:
        return await _not_found(services, ref, org_ids, lookup.errors, missing)
    if len(lookup.found) > 1:
        return Answer(blocks.ambiguous(ref.name, lookup.found), missing, detail="ambiguous")
    return lookup.found[0]


async def _not_found(
    services: Services, ref: ClusterRef, org_ids: list[str], errors: dict[str, str], outcome: Outcome
) -> Answer:
    """No such cluster among those the user may see: say which they can see (from the short-lived listing
    cache when it is warm), and "did you mean" among those only."""
    reply = blocks.not_found(str(ref), unreachable=errors)
    listings = await services.fleet.list_orgs(org_ids)
    names = sorted({cluster.name for listed in listings for cluster in listed.clusters})
    where = f" in `{ref.org}`" if ref.org else ""
    line = f"Clusters you can see{where}: {listing(names)}.{did_you_mean(ref.name, names)}"
    reply = blocks.Reply(text=f"{reply.text} {line}", blocks=[*reply.blocks, blocks.context(line)])
    return Answer(reply, outcome, detail="not found")


async def _one_cluster(call: Call, parsed: ClusterStatus | ClusterNodes) -> Answer:
    services, user_id = call.services, call.user_id
    found = await _find_cluster(services, parsed.cluster, user_id=user_id)
    if isinstance(found, Answer):
        return found
    cluster = found
    names, tz = services.org_names, services.tz
    if isinstance(parsed, ClusterStatus):
        org = services.program.org(cluster.org)
        region = org.aws.region if org else None  # the console links' region
        reply = blocks.cluster_status(
            cluster,
            org_name=names[cluster.org],
            tz=tz,
            public=parsed.public,
            region=region,
            may_operate=not parsed.public and _may_operate(services, user_id, cluster.org),
        )
    else:
        reply = blocks.cluster_nodes(cluster, tz=tz, failed_only=parsed.failed_only, public=parsed.public)
    return Answer(reply, org_id=cluster.org)


def _may_operate(services: Services, user_id: str, org_id: str) -> bool:
    """Whether the caller may change the org's clusters: only then is a Start button shown (refusals before buttons)."""
    return services.access.may(user_id=user_id, action=Action.OPERATE, org_id=org_id)


async def _launch_form(call: Call, parsed: LaunchForm) -> Answer:
    """`/cluster launch` alone: the launch form for the org the channel (or `--org`) means."""
    services, user_id, channel_id = call.services, call.user_id, call.channel_id
    org_id = parsed.org or services.access.default_org(user_id=user_id, channel_id=channel_id)
    if org_id is None:
        error = UsageError(
            "Say which org the cluster is for: `/cluster launch --org ORG` opens its launch form, "
            "`/cluster launch TEMPLATE NAME --org ORG` plans in one line.",
            call.spec.usage,
        )
        return Answer(blocks.usage_error(error), Outcome.INVALID, detail=error.message)
    refusal = org_refusal(services, user_id=user_id, action=Action.OPERATE, org_id=org_id)
    if refusal:
        return refusal
    name = services.org_names.get(org_id, org_id)
    if call.trigger_id is None:  # a mention or a DM: Slack opens a form only from a slash command or a click
        return Answer(blocks.launch_form_offer(org_id=org_id, org_name=name), org_id=org_id, detail="form offered")
    view = form_view(services, org_id=org_id, channel_id=channel_id)
    try:
        # The command's trigger id (its request key) opens the modal; it lives 3 seconds.
        await services.poster.open_view(trigger_id=call.trigger_id or "", view=view)
    except Exception:
        logging.getLogger(__name__).warning("opening the launch form for %s failed", user_id, exc_info=True)
        message = "Slack did not open the launch form in time; run `/cluster launch` again."
        return Answer(blocks.problem(message), Outcome.FAILED, org_id, "launch form not opened")
    reply = blocks.Reply(
        text=f"The launch form for {name} is open.",
        blocks=[
            blocks.context(
                f"The launch form for *{blocks.escape(name)}* is open. In one line: "
                "`/cluster launch TEMPLATE NAME --count N` (the org's launch defaults fill the rest)."
            )
        ],
    )
    return Answer(reply, org_id=org_id, detail="launch form opened")


async def _launch_plan(call: Call, parsed: LaunchCluster | LaunchForm) -> Answer:
    if isinstance(parsed, LaunchForm):
        return await _launch_form(call, parsed)
    services, user_id, channel_id = call.services, call.user_id, call.channel_id
    org_id = parsed.org or services.access.default_org(user_id=user_id, channel_id=channel_id)
    if org_id is None:
        error = UsageError("Say which org the cluster is for with `--org ORG`.", call.spec.usage)
        return Answer(blocks.usage_error(error), Outcome.INVALID, detail=error.message)
    refusal = org_refusal(services, user_id=user_id, action=Action.OPERATE, org_id=org_id)
    if refusal:
        return refusal
    try:
        planned = await services.changes.launch(
            org_id=org_id,
            template_id=parsed.template,
            name=parsed.name,
            params=dict(parsed.params),
            count=parsed.count,
            dry_run=parsed.dry_run,
            user_id=user_id,
            channel_id=channel_id,
        )
    except NotPlanned as not_planned:
        return _not_planned(not_planned, call.spec.usage)
    key = planned.plan.template.key
    if planned.operation_id is None:
        return Answer(blocks.launch_plan(planned.plan), org_id=org_id, detail=f"dry run of {key}")
    reply = await gated(
        services, blocks.launch_plan(planned.plan, operation_id=planned.operation_id), planned.operation_id
    )
    return Answer(reply, org_id=org_id, detail=f"launch of {key} proposed as {planned.operation_id}")


async def _audit(call: Call, parsed: ShowAudit) -> Answer:
    services, user_id, channel_id = call.services, call.user_id, call.channel_id
    access = services.access
    org_id = parsed.org
    if org_id is None and not access.is_admin(user_id):  # an admin naming no org sees every org
        org_id = access.default_org(user_id=user_id, channel_id=channel_id)
        if org_id is None:
            error = UsageError("Say which org's audit log to show.", call.spec.usage)
            return Answer(blocks.usage_error(error), Outcome.INVALID, detail=error.message)
    if org_id is not None:
        # An org that does not exist says so, with the orgs there are, rather than "nothing recorded".
        refused = org_refusal(services, user_id=user_id, action=Action.OPERATE, org_id=org_id)
        if refused is not None:
            return refused
    since = services.clock() - timedelta(days=parsed.days)
    limit = 40
    entries = await services.audit_entries(
        org_id=org_id, since=since, user_id=parsed.user, action=parsed.action, limit=limit
    )
    scope = f"{services.org_names.get(org_id, org_id)} ({org_id})" if org_id else "every org"
    reply = blocks.audit_reply(
        entries,
        scope=scope,
        days=parsed.days,
        tz=services.tz,
        ids=parsed.ids,
        user=parsed.user,
        action=parsed.action,
        limit=limit,
        home_team=access.home_team,
        team_names=services.team_names,
    )
    return Answer(reply, org_id=org_id)


def _not_planned(not_planned: NotPlanned, usage: str) -> Answer:
    org_id, detail = not_planned.org_id, not_planned.detail
    if not_planned.shown is Shown.USAGE:
        error = UsageError(not_planned.message, usage)
        return Answer(blocks.usage_error(error), not_planned.outcome, org_id, error.message)
    shown = blocks.refusal if not_planned.shown is Shown.REFUSAL else blocks.problem
    return Answer(shown(not_planned.message), not_planned.outcome, org_id, detail)


def _busy(busy: ClusterBusy, org_id: str) -> Answer:
    return Answer(blocks.problem(blocks.busy_text(busy.running)), Outcome.REFUSED, org_id, "cluster busy")


def _pending(services: Services, pending: PlanPending, org_id: str) -> Answer:
    """A plan that a pending one covers: said, pointing at that one, with no Confirm of its own."""
    said = blocks.pending_text(pending.pending, expires_at=pending.expires_at, tz=services.tz)
    return Answer(blocks.problem(said), Outcome.REFUSED, org_id, f"plan pending: {pending.pending.id}")


async def _cluster_to_change(services: Services, ref: ClusterRef, *, user_id: str, usage: str) -> Cluster | Answer:
    """The one cluster `ref` names that the user may change and that is not already changing, or the answer
    saying why not. Clusters the user may not see get the same answer as clusters that do not exist."""
    found = await _find_cluster(services, ref, user_id=user_id, missing=Outcome.INVALID)
    if isinstance(found, Answer):
        return found
    cluster = found
    decision = services.access.decide(user_id=user_id, action=Action.OPERATE, org_id=cluster.org)
    if not decision.allowed:
        return Answer(blocks.refusal(decision.reason), Outcome.REFUSED, cluster.org, decision.reason)
    try:
        await services.changes.check_changeable(cluster)
    except NotPlanned as not_planned:
        return _not_planned(not_planned, usage)
    except ClusterBusy as busy:
        return _busy(busy, cluster.org)
    return cluster


async def _scale_plan(call: Call, parsed: ScaleGroup) -> Answer:
    services, user_id, channel_id, usage = call.services, call.user_id, call.channel_id, call.spec.usage
    found = await _cluster_to_change(services, parsed.cluster, user_id=user_id, usage=usage)
    if isinstance(found, Answer):
        return found
    cluster = found
    try:
        planned = await services.changes.scale(
            cluster,
            group=parsed.group,
            count=parsed.count,
            dry_run=parsed.dry_run,
            user_id=user_id,
            channel_id=channel_id,
        )
    except NotPlanned as not_planned:
        return _not_planned(not_planned, usage)
    except PlanPending as pending:
        return _pending(services, pending, cluster.org)
    if isinstance(planned, FleetStopOffered):
        stop_id = planned.operation_id
        reply = blocks.fleet_stop_offer(
            cluster, group=planned.group, count=planned.count, reasons=planned.reasons, operation_id=stop_id
        )
        return Answer(reply, org_id=cluster.org, detail=f"shrink needs the fleet stopped; stop offered as {stop_id}")
    if planned.operation_id is None:
        return Answer(blocks.scale_plan(planned.plan), org_id=cluster.org, detail="dry run")
    reply = await gated(
        services, blocks.scale_plan(planned.plan, operation_id=planned.operation_id), planned.operation_id
    )
    return Answer(reply, org_id=cluster.org, detail=f"proposed as {planned.operation_id}")


async def _node_plan(call: Call, parsed: NodeAction) -> Answer:
    services, user_id, channel_id, usage = call.services, call.user_id, call.channel_id, call.spec.usage
    found = await _cluster_to_change(services, parsed.cluster, user_id=user_id, usage=usage)
    if isinstance(found, Answer):
        return found
    try:
        planned = await services.changes.nodes(
            found,
            verb=parsed.verb,
            node_ids=parsed.node_ids,
            dry_run=parsed.dry_run,
            user_id=user_id,
            channel_id=channel_id,
        )
    except NotPlanned as not_planned:
        return _not_planned(not_planned, usage)
    except PlanPending as pending:
        return _pending(services, pending, found.org)
    reply = blocks.node_action_plan(
        planned.verb, planned.cluster, list(planned.nodes), operation_id=planned.operation_id
    )
    reply = await gated(services, reply, planned.operation_id)
    detail = "dry run" if planned.operation_id is None else f"proposed as {planned.operation_id}"
    return Answer(reply, org_id=found.org, detail=detail)


async def _check_plan(call: Call, parsed: CheckNodes) -> Answer:
    services, user_id, channel_id, usage = call.services, call.user_id, call.channel_id, call.spec.usage
    found = await _find_cluster(services, parsed.cluster, user_id=user_id, missing=Outcome.INVALID)
    if isinstance(found, Answer):
        return found
    decision = services.access.decide(user_id=user_id, action=Action.OPERATE, org_id=found.org)
    if not decision.allowed:
        return Answer(blocks.refusal(decision.reason), Outcome.REFUSED, found.org, decision.reason)
    if found.backend is not Backend.HYPERPOD:  # said before the backend's own "no changes without the API"
        error = UsageError(
            f"Deep health checks are HyperPod's (StartClusterHealthCheck); `{found.ref}` is a "
            f"{found.backend.label} cluster.",
            usage,
        )
        return Answer(blocks.usage_error(error), Outcome.INVALID, found.org, error.message)
    try:
        await services.changes.check_changeable(found)
        # Read fresh, not from the listing cache: a node may have gone into a check (or left) seconds ago.
        found = await services.fleet.get(found.org, found.backend, found.name) or found
    except NotPlanned as not_planned:
        return _not_planned(not_planned, usage)
    except ClusterBusy as busy:
        return _busy(busy, found.org)
    except Exception as error:
        said = f"Could not read `{found.ref}`: {describe_error(error)}"
        return Answer(blocks.problem(said), Outcome.FAILED, found.org, said)
    try:
        planned = await plan_check(
            services.changes,
            found,
            node_ids=parsed.node_ids,
            checks=chosen_checks(stress=parsed.stress, connectivity=parsed.connectivity),
            dry_run=parsed.dry_run,
            user_id=user_id,
            channel_id=channel_id,
        )
    except NotPlanned as not_planned:
        return _not_planned(not_planned, usage)
    except PlanPending as pending:
        return _pending(services, pending, found.org)
    detail = "dry run" if planned.operation_id is None else f"proposed as {planned.operation_id}"
    return Answer(check_plan(planned), org_id=found.org, detail=detail)


async def _start_plan(call: Call, parsed: StartFleet) -> Answer:
    services, user_id, channel_id, usage = call.services, call.user_id, call.channel_id, call.spec.usage
    found = await _cluster_to_change(services, parsed.cluster, user_id=user_id, usage=usage)
    if isinstance(found, Answer):
        return found
    try:
        planned = await services.changes.start_fleet(
            found, dry_run=parsed.dry_run, user_id=user_id, channel_id=channel_id
        )
    except NotPlanned as not_planned:
        return _not_planned(not_planned, usage)
    except PlanPending as pending:
        return _pending(services, pending, found.org)
    reply = blocks.fleet_start_plan(found, back=planned.back, quota=planned.quota, operation_id=planned.operation_id)
    detail = "dry run" if planned.operation_id is None else f"proposed as {planned.operation_id}"
    return Answer(reply, org_id=found.org, detail=detail)


async def _delete_plan(call: Call, parsed: DeleteCluster) -> Answer:
    services, user_id, channel_id = call.services, call.user_id, call.channel_id
    found = await _cluster_to_change(services, parsed.cluster, user_id=user_id, usage=call.spec.usage)
    if isinstance(found, Answer):
        return found
    try:
        planned = await services.changes.delete(found, user_id=user_id, channel_id=channel_id)
    except PlanPending as pending:
        return _pending(services, pending, found.org)
    reply = await gated(services, blocks.delete_plan(found, operation_id=planned.operation_id), planned.operation_id)
    return Answer(reply, org_id=found.org, detail=f"proposed as {planned.operation_id}")


async def _throughput(call: Call, parsed: ShowThroughput) -> Answer:
    services, user_id, channel_id = call.services, call.user_id, call.channel_id
    ref = parsed.cluster
    visible = services.access.visible_orgs(user_id)
    if ref.org is not None and ref.org not in visible:
        reason = unknown_org(ref.org, visible, admin=services.access.is_admin(user_id))
        return Answer(blocks.refusal(reason), Outcome.REFUSED, detail="org not visible")
    org_ids = [ref.org] if ref.org else visible
    now = services.clock()
    summaries = await services.throughput.summary(org_ids, ref.name, hours=parsed.hours, now=now)
    if not summaries:
        # No samples may mean no such cluster: then say so as `/cluster status` does (which clusters the caller
        # can see, and a near miss among those only); a cluster that exists just has had no samples yet.
        lookup = await services.fleet.find(ref.name, org_ids)
        if not lookup.found:
            return await _not_found(services, ref, org_ids, lookup.errors, Outcome.ALLOWED)
        reply = blocks.throughput_reply([], cluster=ref.name, hours=parsed.hours, tz=services.tz, chart_where="")
        return Answer(reply, detail="no samples")
    orgs = sorted({s.org for s in summaries})
    # Files cannot be ephemeral: the chart goes to the channel with --public, else to the asker's DM.
    where = channel_id if parsed.public else await services.poster.open_dm(user_id)
    services.spawn(_send_chart(services, orgs[0], ref.name, hours=parsed.hours, channel=where))
    chart_where = "Chart: posted below." if parsed.public else "Chart: sent to you in a direct message from Pitcrew."
    reply = blocks.throughput_reply(
        summaries, cluster=ref.name, hours=parsed.hours, tz=services.tz, chart_where=chart_where, public=parsed.public
    )
    return Answer(reply, org_id=orgs[0] if len(orgs) == 1 else None)


async def _send_chart(services: Services, org_id: str, cluster: str, *, hours: int, channel: str) -> None:
    try:
        png = await services.throughput.chart(org_id, cluster, None, hours=hours, now=services.clock())
        title = f"{org_id}/{cluster}: last {hours} h"
        await services.poster.upload(channel=channel, filename=f"{cluster}-throughput.png", content=png, title=title)
    except Exception:  # the reply went already; the missing chart is logged
        logging.getLogger(__name__).exception("sending the throughput chart of %s/%s failed", org_id, cluster)


async def _doctor(call: Call, parsed: RunDoctor) -> Answer:
    """Admins: each org's setup checked (bot.iam.doctor), its result kept for the Home."""
    services = call.services
    refused = services.access.decide(user_id=call.user_id, action=Action.ADMINISTER)
    if not refused.allowed:
        return Answer(blocks.refusal(refused.reason), Outcome.REFUSED, detail=refused.reason)
    if parsed.org is not None and services.program.org(parsed.org) is None:
        said = unknown_org(parsed.org, [org.id for org in services.program.orgs], admin=True)
        return Answer(blocks.problem(said), Outcome.INVALID, detail="unknown org")
    report = await checkup(
        program=services.program,
        accounts=services.fleet.accounts,
        db=services.db,
        slack=services.poster.client,
        org_ids=[parsed.org] if parsed.org else None,
    )
    if services.home is not None:
        services.home.changed(None)  # the Home's line about orgs whose last run failed
    outcome = Outcome.ALLOWED if report.ok else Outcome.FAILED
    return Answer(doctor_reply(report), outcome, org_id=parsed.org, detail="ok" if report.ok else "problems found")


async def _approvals(call: Call, parsed: ListApprovals) -> Answer:
    """Changes waiting for approval in the orgs the caller may see (or the one named), ephemeral."""
    services, user_id = call.services, call.user_id
    if parsed.org is not None:
        refused = org_refusal(services, user_id=user_id, action=Action.VIEW, org_id=parsed.org)
        if refused:
            return refused
    desk = services.approvals
    pending = await desk.pending(user_id=user_id) if desk is not None else []
    if parsed.org is not None:
        pending = [(a, o) for a, o in pending if a.org_id == parsed.org]
    approvable = [
        a.id or 0 for a, _ in pending if desk is not None and a.requested_by != user_id and desk.may_approve(a, user_id)
    ]
    reply = approvals_list(pending, may_approve=approvable, user_id=user_id, tz=services.tz, now=services.clock())
    if services.program.approvals is None:
        reply = blocks.Reply(
            text=f"{reply.text} No change needs approval here: the program file has no `approvals:` block.",
            blocks=[
                *reply.blocks,
                blocks.context("No change needs approval: the program file has no `approvals:` block."),
            ],
        )
    return Answer(reply, org_id=parsed.org, detail=f"{len(pending)} pending")


async def _templates(call: Call, parsed: ListTemplates) -> Answer:
    return Answer(blocks.templates_reply(call.services.templates, public=parsed.public))


CLUSTER_COMMAND = SlashCommand(
    commands=CLUSTER,
    title="Pitcrew commands",
    runs={
        "list": _list,
        "capacity": _capacity,
        "status": _one_cluster,
        "nodes": _one_cluster,
        "templates": _templates,
        "launch": _launch_plan,
        "scale": _scale_plan,
        "start": _start_plan,
        "replace": _node_plan,
        "reboot": _node_plan,
        "check": _check_plan,
        "delete": _delete_plan,
        "throughput": _throughput,
        "audit": _audit,
        "approvals": _approvals,
        "doctor": _doctor,
    },
)
cluster_command_callback = CLUSTER_COMMAND.listener
