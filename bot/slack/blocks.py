"""Block Kit builders: small functions, each returning a Reply with a plain-text fallback.

Limits respected here (Slack's): 50 blocks per message, 3000 characters per section text,
150 per header, 10 elements per context block.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from bot import audit_view, mrkdwn
from bot.clusters import console
from bot.clusters.fleet import OrgClusters
from bot.clusters.health import ClusterHealth, Look, cluster_health
from bot.clusters.held import held_instances
from bot.clusters.model import Backend, Cluster, Health, Node
from bot.clusters.plans import LaunchPlan, ScalePlan
from bot.clusters.requests import (
    NodeFailure,
    NodeRequest,
    ScaleRequest,
    operation_summary,
    stored_request,
)
from bot.clusters.templates import TemplateSet
from bot.commands import UsageError
from bot.mrkdwn import when
from bot.publishing import Block, Reply
from bot.slack.launch_form import LAUNCH_OPEN_ACTION
from bot.slack.reserved import reservation_blocks

MAX_BLOCKS = 50
MAX_SECTION = 3000
MAX_HEADER = 150
NODES_LISTED_IN_FULL = 40  # above this a nodes reply summarizes and lists only unhealthy nodes


def header(text: str) -> Block:
    return {"type": "header", "text": {"type": "plain_text", "text": _clip(text, MAX_HEADER), "emoji": True}}


def section(text: str, *, fields: Sequence[str] = ()) -> Block:
    """A section; blank `text` with fields gives a fields-only section (Slack wants non-empty text or none)."""
    block: Block = {"type": "section"}
    if text.strip() or not fields:
        block["text"] = {"type": "mrkdwn", "text": _clip(text, MAX_SECTION)}
    if fields:
        block["fields"] = [{"type": "mrkdwn", "text": _clip(item, 2000)} for item in fields[:10]]
    return block


def context(*texts: str) -> Block:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": _clip(t, MAX_SECTION)} for t in texts[:10]]}


def divider() -> Block:
    return {"type": "divider"}


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def sections(lines: Iterable[str]) -> list[Block]:
    """Lines packed into as few sections as fit 3000 characters each; never cut mid-line."""
    blocks: list[Block] = []
    chunk: list[str] = []
    size = 0
    for line in lines:
        if chunk and size + len(line) + 1 > MAX_SECTION:
            blocks.append(section("\n".join(chunk)))
            chunk, size = [], 0
        chunk.append(line)
        size += len(line) + 1
    if chunk:
        blocks.append(section("\n".join(chunk)))
    return blocks


def fit(blocks: list[Block], *, overflow: str) -> list[Block]:
    """Keep within 50 blocks; what does not fit is said, never dropped silently."""
    if len(blocks) <= MAX_BLOCKS:
        return blocks
    hidden = len(blocks) - (MAX_BLOCKS - 1)
    return [*blocks[: MAX_BLOCKS - 1], context(overflow.format(hidden=hidden))]


def escape(text: str) -> str:
    """User and AWS text in mrkdwn: Slack's three control characters escaped (no links or mentions), and
    control characters shown as symbols, never echoed raw (bot.mrkdwn)."""
    return mrkdwn.escape(text)


_HEALTH_ICON = {
    Health.HEALTHY: ":large_green_circle:",
    Health.UNHEALTHY: ":red_circle:",
    Health.TRANSITIONAL: ":large_yellow_circle:",
}


# The one colour rule (bot.clusters.health) as every view draws it: a stopped compute fleet is white, not green.
LOOK_ICON = {
    Look.HEALTHY: ":large_green_circle:",
    Look.CHANGING: ":large_yellow_circle:",
    Look.FAILING: ":red_circle:",
    Look.STOPPED: ":white_circle:",
}


def health_icon(health: ClusterHealth) -> str:
    return LOOK_ICON[health.look]


def cluster_icon(cluster: Cluster) -> str:
    return health_icon(cluster_health(cluster))


def _groups_line(cluster: Cluster) -> str:
    parts = []
    for group in cluster.groups:
        target = f"/{group.target}" if group.target is not None else ""
        parts.append(f"{escape(group.name)} {group.instance_type} {group.current}{target}")
    return " · ".join(parts) if parts else "no instance groups"


def _health_text(cluster: Cluster) -> str:
    """The compute fleet's state when it is not running, and the node counts (bot.clusters.health)."""
    return cluster_health(cluster).summary(strong=True)


def cluster_line(cluster: Cluster) -> str:
    return (
        f"{cluster_icon(cluster)} *{escape(cluster.name)}* · {cluster.backend.label} · `{cluster.status}` · "
        f"{_health_text(cluster)}\n      {_groups_line(cluster)}"
    )


def usage_error(error: UsageError) -> Reply:
    text = f"{error.message}\nUsage: {error.usage}"
    return Reply(text=text, blocks=[section(f":warning: {error.message}"), context(f"Usage: `{error.usage}`")])


def launch_form_offer(*, org_id: str, org_name: str) -> Reply:
    """`/cluster launch` alone by mention or DM: Slack opens a form only from a click, so a button opens it."""
    rest = "or plan in one line: `cluster launch TEMPLATE NAME --count N` (the org's launch defaults fill the rest)."
    return Reply(
        text=f"Open the launch form for {org_name} with the button, {rest}",
        blocks=[
            section(f"Open the launch form for *{escape(org_name)}* with the button, {rest}"),
            {"type": "actions", "elements": [button(LAUNCH_OPEN_ACTION, "Launch form…", org_id, style="primary")]},
        ],
    )


def refusal(reason: str) -> Reply:
    return Reply(text=reason, blocks=[section(f":no_entry: {reason}")])


def problem(message: str) -> Reply:
    return Reply(text=message, blocks=[section(f":warning: {message}")])


def cluster_list(
    results: Sequence[OrgClusters],
    *,
    org_names: dict[str, str],
    tz: ZoneInfo,
    public: bool = False,
    operable: Iterable[str] = (),
) -> Reply:
    """Each org's clusters; a stopped compute fleet of an org in `operable` (the caller may operate it) gets its
    Start button."""
    total = sum(len(result.clusters) for result in results)
    nodes = sum(len(c.nodes) for result in results for c in result.clusters)
    unhealthy = sum(len(c.unhealthy) for result in results for c in result.clusters)
    scope = org_names[results[0].org] if len(results) == 1 else f"{len(results)} orgs"
    summary = f"{total} clusters, {nodes} nodes, {unhealthy} unhealthy"
    # The totals per type, counted as quota counts them: what a program admin used to add up by hand.
    held = held_instances(c for result in results for c in result.clusters)
    totals = ", ".join(f"{n:,} x {t}" for t, n in sorted(held.items(), key=lambda item: (-item[1], item[0])) if n)
    summary += f" · held: {totals}" if totals else " · nothing held"
    blocks: list[Block] = [
        header(f"Clusters · {scope}"),
        context(f"{summary} · as of {when(min(r.as_of for r in results), tz)}"),
    ]
    fallback = [f"Clusters of {scope}: {summary}"]
    for result in results:
        lines = [f"*{escape(org_names[result.org])}* (`{result.org}`)"]
        lines += [cluster_line(cluster) for cluster in result.clusters]
        if not result.clusters and not result.errors:
            lines.append("_no clusters_")
        lines += [f":warning: could not read: {escape(error)}" for error in result.errors]
        blocks += sections(lines)
        if result.org in set(operable) and (stopped := [c for c in result.clusters if _stopped(c)]):
            blocks.append({"type": "actions", "elements": [start_fleet_button(c.org, c.name) for c in stopped[:25]]})
        fallback.append(f"{result.org}: {len(result.clusters)} clusters" + (" (errors)" if result.errors else ""))
    blocks = fit(blocks, overflow="{hidden} more blocks not shown: ask for one org with /cluster list ORG")
    return Reply(text="\n".join(fallback), blocks=blocks, public=public)


def _stopped(cluster: Cluster) -> bool:
    return cluster_health(cluster).look is Look.STOPPED


def cluster_status(
    cluster: Cluster,
    *,
    org_name: str,
    tz: ZoneInfo,
    public: bool = False,
    region: str | None = None,
    may_operate: bool = False,
) -> Reply:
    """A cluster's status; with its org's `region`, links to its (and its unhealthy nodes') console pages; a
    stopped compute fleet shown to someone who `may_operate` it, its Start button."""
    fields = [
        f"*Org*\n{escape(org_name)} (`{cluster.org}`)",
        f"*Backend*\n{cluster.backend.label}",
        f"*Status*\n`{cluster.status}`",
        f"*Created*\n{when(cluster.created, tz)}",
        f"*Nodes*\n{cluster_health(cluster).counts(strong=True)}",
    ]
    for key, label in (
        ("compute_fleet", "Compute fleet"),
        ("node_recovery", "Node recovery"),
        ("orchestrator", "Orchestrator"),
    ):
        if cluster.extra.get(key):
            fields.append(f"*{label}*\n{escape(cluster.extra[key])}")
    blocks: list[Block] = [
        header(f"{cluster.ref}"),
        section(f"{cluster_icon(cluster)} *{cluster.name}*{_fleet_words(cluster)}", fields=fields),
    ]
    if may_operate and _stopped(cluster):
        blocks.append({"type": "actions", "elements": [start_fleet_button(cluster.org, cluster.name)]})
    if region:
        link = console.cluster_url(cluster.backend, region, cluster.name)
        blocks.append(context(f":link: <{link}|{escape(cluster.name)} in the AWS console>"))
    if cluster.failure_message:
        blocks.append(section(f":rotating_light: *Failure:* {escape(cluster.failure_message)}"))
    group_lines = []
    health = Counter((node.group, node.health) for node in cluster.nodes)
    for group in cluster.groups:
        target = f" of {group.target}" if group.target is not None else ""
        status = f" · {group.status}" if group.status else ""
        bad = health[(group.name, Health.UNHEALTHY)]
        healthy = health[(group.name, Health.HEALTHY)]
        group_lines.append(
            f"*{escape(group.name)}* · {group.instance_type} · {group.current}{target} instances{status} · "
            f"{healthy} healthy" + (f", *{bad} unhealthy*" if bad else "")
        )
    blocks.append(divider())
    blocks += sections(group_lines or ["_no instance groups_"])
    if cluster.unhealthy:
        urls = {
            node.node_id: console.node_url(cluster.backend, region, cluster.name, node.node_id)
            for node in cluster.unhealthy[:20]
            if region and cluster.backend is Backend.PCLUSTER  # a HyperPod node's page is its cluster's
        }
        lines = (_node_line(node, tz, url=urls.get(node.node_id)) for node in cluster.unhealthy[:20])
        blocks += sections(["*Unhealthy nodes*", *lines])
    if cluster.note:
        blocks.append(context(cluster.note))
    text = f"{cluster.ref} ({cluster.backend.label}): {cluster.status}, {_health_text(cluster)}".replace("*", "")
    return Reply(text=text, blocks=fit(blocks, overflow="{hidden} more blocks: see /cluster nodes"), public=public)


def _fleet_words(cluster: Cluster) -> str:
    fleet = cluster_health(cluster).fleet
    return f" · compute fleet *{fleet}*" if fleet else ""


def _node_line(node: Node, tz: ZoneInfo, *, url: str | None = None) -> str:
    message = f" — {escape(node.message)}" if node.message else ""
    shown = f"<{url}|{escape(node.node_id)}>" if url else f"`{node.node_id}`"
    return (
        f"{_HEALTH_ICON[node.health]} {shown} · {escape(node.group)} · {node.instance_type} · "
        f"*{node.status}* · launched {when(node.launch_time, tz)}{message}"
    )


def _node_order(node: Node) -> tuple[int, str, str]:
    rank = {Health.UNHEALTHY: 0, Health.TRANSITIONAL: 1, Health.HEALTHY: 2}[node.health]
    return rank, node.group, node.node_id


def cluster_nodes(cluster: Cluster, *, tz: ZoneInfo, failed_only: bool = False, public: bool = False) -> Reply:
    nodes = sorted(cluster.nodes, key=_node_order)
    counts = cluster.counts_by_group_and_status()
    per_group: dict[str, list[str]] = {}
    for (group, status), count in sorted(counts.items()):
        per_group.setdefault(group, []).append(f"{count} {status}")
    summary_lines = [f"*{escape(g)}*: " + ", ".join(parts) for g, parts in per_group.items()]
    blocks: list[Block] = [
        header(f"Nodes · {cluster.ref}"),
        section(f"{cluster_icon(cluster)} *{len(nodes)} nodes* · {_health_text(cluster)}\n" + "\n".join(summary_lines)),
    ]
    shown = [n for n in nodes if n.health is Health.UNHEALTHY] if failed_only else nodes
    summarized = len(shown) > NODES_LISTED_IN_FULL
    if summarized and not failed_only:
        shown = [n for n in nodes if n.health is Health.UNHEALTHY]
        blocks.append(
            context(
                f"{len(nodes)} nodes is more than {NODES_LISTED_IN_FULL}: "
                "the counts above summarize them; only unhealthy nodes are listed below."
            )
        )
    if failed_only and not shown:
        blocks.append(section(":large_green_circle: No unhealthy nodes."))
    elif shown:
        blocks.append(divider())
        blocks += sections(_node_line(node, tz) for node in shown)
    if cluster.note:
        blocks.append(context(cluster.note))
    text = f"{cluster.ref}: {len(nodes)} nodes, {_health_text(cluster)}".replace("*", "")
    return Reply(text=text, blocks=fit(blocks, overflow="{hidden} more blocks of nodes not shown"), public=public)


def ambiguous(name: str, clusters: Sequence[Cluster]) -> Reply:
    choices = ", ".join(f"`{c.ref}`" for c in clusters)
    text = f"Several orgs have a cluster named {name}: {choices}. Say which one, as ORG/CLUSTER."
    return Reply(text=text, blocks=[section(f":twisted_rightwards_arrows: {text}")])


def not_found(ref: str, *, unreachable: dict[str, str]) -> Reply:
    text = f"No cluster `{ref}` among the clusters you can see."
    if unreachable:
        text += " Could not search: " + "; ".join(f"{org} ({why})" for org, why in unreachable.items())
    return Reply(text=text, blocks=[section(f":mag: {escape(text)}"), context("Usage: `/cluster list` shows them.")])


def templates_reply(templates: TemplateSet, *, public: bool = False) -> Reply:
    blocks: list[Block] = [header("Cluster templates")]
    for template in templates:
        params = []
        for name, spec in template.parameters.items():
            need = (
                "required" if spec.required else (f"default {spec.default}" if spec.default is not None else "optional")
            )
            params.append(f"`{name}` ({spec.hint()}; {need})")
        instances = ", ".join(template.instance_types)
        blocks.append(
            section(
                f"*{template.id}* v{template.version} · {Backend(template.backend).label} · {instances}\n"
                f"{escape(template.description)}\n" + "\n".join(f"• {p}" for p in params)
            )
        )
    taken = templates.prices.taken
    blocks.append(
        context(
            "Launch one with `/cluster launch TEMPLATE NAME --dry-run [--count N] [--param KEY=VALUE ...]`. "
            + (f"Prices as of {taken.isoformat()}." if taken else "")
        )
    )
    text = "Cluster templates: " + ", ".join(templates.ids)
    return Reply(text=text, blocks=fit(blocks, overflow="{hidden} more templates not shown"), public=public)


def launch_plan(plan: LaunchPlan, *, operation_id: str | None = None) -> Reply:
    """The plan; with an operation id, public with Confirm and Cancel buttons, else a dry run."""
    template, backend = plan.template, Backend(plan.template.backend)
    fields = [
        f"*Org*\n{escape(plan.org.name)} (`{plan.org.id}`)",
        f"*Template*\n`{template.key}` · {backend.label}",
        f"*Region*\n{plan.org.aws.region}",
        "*Instances*\n" + "\n".join(f"{n} x {t}" for t, n in plan.instances.items()),
    ]
    if plan.cost is not None:
        hourly, daily = plan.cost
        note = " (some prices unconfirmed)" if plan.unconfirmed_prices else ""
        fields.append(f"*Estimated cost*\n${hourly:,.2f}/hour · ${daily:,.0f}/day on demand{note}")
    quota_lines = [
        f"{line.instance_type}: held {line.held} + {line.requested} → {line.after}"
        + (f" of {line.allowed} allowed" if line.allowed is not None else " (not limited)")
        for line in plan.quota
    ]
    request = (
        "create_cluster request:\n```" + json.dumps(plan.request, separators=(", ", ": "))[:2400] + "```"
        if plan.request is not None
        else "POST /v3/clusters clusterConfiguration:\n```" + (plan.cluster_yaml or "")[:2400] + "```"
    )
    blocks: list[Block] = [
        header(f"Plan: {plan.name} from {template.id}"),
        section(f"A new {backend.label} cluster `{plan.name}` for {escape(plan.org.name)}.", fields=fields),
        section("*Quota before → after*\n" + "\n".join(quota_lines)),
        *reservation_blocks(plan.reservations),
        section(request),
    ]
    if operation_id is None:
        blocks.append(context("Dry run: nothing was created and AWS was not asked to change anything."))
    else:
        blocks += [
            plan_buttons(operation_id, confirm="Confirm launch"),
            {
                **context("Only the requester or a program admin can confirm. Nothing is created before that."),
                "block_id": PLAN_NOTE_BLOCK,
            },
        ]
    text = f"Plan for {plan.org.id}/{plan.name} from {template.key}: " + ", ".join(
        f"{n} x {t}" for t, n in plan.instances.items()
    )
    return Reply(text=text, blocks=blocks, public=operation_id is not None)


CONFIRM_ACTION = "operation_confirm"
PLAN_NOTE_BLOCK = "plan_note"  # the line under a plan's buttons, gone with them once it is decided
CANCEL_ACTION = "operation_cancel"
DELETE_OPEN_ACTION = "delete_open"  # opens the modal where the cluster's name is typed
DELETE_VIEW = "delete_confirm"  # that modal's callback_id
DELETE_NAME_BLOCK, DELETE_NAME_INPUT = "typed_name", "name"
_KIND_TITLE = {  # icon, title, what the progress message's text fallback starts with
    "launch": (":rocket:", "Launch", "Launching"),
    "scale": (":straight_ruler:", "Scale", "Scaling"),
    "reboot": (":arrows_counterclockwise:", "Reboot", "Rebooting nodes of"),
    "replace": (":recycle:", "Replace nodes", "Replacing nodes of"),
    "delete": (":wastebasket:", "Delete", "Deleting"),
    "stop_fleet": (":octagonal_sign:", "Stop compute fleet", "Stopping the compute fleet of"),
    "start_fleet": (":arrow_forward:", "Start compute fleet", "Starting the compute fleet of"),
    "check": (":stethoscope:", "Deep health check", "Deep health check of"),
}
START_FLEET_ACTION = "fleet_start"  # a stopped compute fleet's Start button; the value is ORG/CLUSTER


def button(action_id: str, text: str, value: str, *, style: str | None = None) -> dict[str, Any]:
    element: dict[str, Any] = {
        "type": "button",
        "action_id": action_id,
        "text": {"type": "plain_text", "text": text},
        "value": value,
    }
    if style:
        element["style"] = style
    return element


def _plan_actions(operation_id: str, go: dict[str, Any]) -> Block:
    """A plan's buttons: the one that goes ahead, and Cancel."""
    cancel = button(CANCEL_ACTION, "Cancel", operation_id)
    return {"type": "actions", "block_id": f"plan:{operation_id}", "elements": [go, cancel]}


def plan_buttons(operation_id: str, *, confirm: str = "Confirm", danger: bool = False) -> Block:
    style = "danger" if danger else "primary"
    return _plan_actions(operation_id, button(CONFIRM_ACTION, confirm, operation_id, style=style))


def _decide_context() -> Block:
    note = context("Only the requester or a program admin can confirm. Nothing changes before that.")
    return {**note, "block_id": PLAN_NOTE_BLOCK}


def confirmed_plan(plan: dict[str, Any], operation: Any) -> Reply | None:
    """The plan message as it reads once confirmed: everything it said (request, quota, cost, reserved capacity,
    whatever lines the plan has), without its buttons and their note, and who confirmed it; the progress
    message follows it. None when `plan` (the message the click came from) is not a plan of this operation."""
    shown = plan.get("blocks")
    if not isinstance(shown, list) or not any(
        isinstance(b, dict) and b.get("block_id") == f"plan:{operation.id}" for b in shown
    ):
        return None
    kept = [
        b
        for b in shown
        if isinstance(b, dict)
        and not str(b.get("block_id", "")).startswith("plan:")
        and b.get("block_id") != PLAN_NOTE_BLOCK
    ]
    dm = str(operation.channel_id).startswith("D")  # the progress could not be posted where the plan is
    where = "Progress is in your DM with Pitcrew." if dm else "Progress is posted below."
    line = f"Confirmed by <@{operation.confirmed_by}>. {where}"
    text = str(plan.get("text") or operation_summary(operation))
    return Reply(text=f"{text}. {line}", blocks=[*kept, context(f":white_check_mark: {line}")], public=True)


def busy_text(other: Any) -> str:
    return (
        f"`{other.org_id}/{other.cluster_name}` is already changing ({operation_summary(other)}, confirmed by "
        f"<@{other.confirmed_by or other.requested_by}>). Wait until its progress message says done, then try again."
    )


def pending_text(pending: Any, *, expires_at: datetime, tz: ZoneInfo) -> str:
    """A new plan refused because `pending` (bot.clusters.changes.PlanPending) already covers it."""
    return (
        f"`{pending.org_id}/{pending.cluster_name}` already has a plan waiting for Confirm that this would make "
        f"stale: *{escape(operation_summary(pending))}*, asked by <@{pending.requested_by}> "
        f"{when(pending.requested_at, tz)}. Nothing new was planned: confirm or cancel that plan (its requester "
        f"or a program admin can), or run this again once it is decided or has expired ({when(expires_at, tz)})."
    )


def failed_nodes_text(failed: Sequence[NodeFailure]) -> str:
    return "; ".join(f"{f.node_id}: {f.code} ({escape(f.message)[:160]})" for f in failed)


def scale_plan(plan: ScalePlan, *, operation_id: str | None = None) -> Reply:
    cluster = plan.cluster
    verb = "Grow" if plan.growing else "Shrink"
    fields = [
        f"*Cluster*\n`{cluster.ref}` · {cluster.backend.label}",
        f"*Group*\n`{escape(plan.group)}` · {plan.instance_type}",
        f"*Nodes*\n{plan.before} → *{plan.after}*",
    ]
    if plan.cost_change is not None:
        sign = "+" if plan.cost_change >= 0 else "-"
        hourly = abs(plan.cost_change)
        fields.append(f"*Cost change*\n{sign}${hourly:,.2f}/hour · {sign}${hourly * 24:,.0f}/day on demand")
    body: list[Block] = [
        header(f"Plan: scale {cluster.name}"),
        section(
            f"{verb} `{escape(plan.group)}` of `{cluster.ref}` from {plan.before} to {plan.after} nodes.", fields=fields
        ),
    ]
    if plan.quota:
        body.append(
            section(
                "*Quota before → after*\n"
                + "\n".join(
                    f"{q.instance_type}: held {q.held} + {q.requested} → {q.after}"
                    + (f" of {q.allowed} allowed" if q.allowed is not None else " (not limited)")
                    for q in plan.quota
                )
            )
        )
    body += reservation_blocks(plan.reservations)
    if not plan.growing:
        chooser = (
            "SageMaker chooses which nodes to remove"
            if cluster.backend is Backend.HYPERPOD
            else ("ParallelCluster terminates the nodes above the new count")
        )
        body.append(section(f":warning: {chooser}; jobs running on them are stopped."))
    if plan.change_set:
        body.append(
            section(
                "ParallelCluster's dry run accepted these changes:\n```" + "\n".join(plan.change_set)[:2500] + "```"
            )
        )
    if operation_id is None:
        body.append(context("Dry run: nothing was changed."))
    else:
        body += [plan_buttons(operation_id, confirm="Confirm scale", danger=not plan.growing), _decide_context()]
    text = f"Plan: scale {cluster.ref} {plan.group} from {plan.before} to {plan.after} nodes"
    return Reply(text=text, blocks=body, public=operation_id is not None)


def fleet_stop_offer(
    cluster: Cluster, *, group: str, count: int, reasons: Sequence[str], operation_id: str | None
) -> Reply:
    """ParallelCluster will not shrink a running fleet: the two ways out, the first one as a button."""
    unique = list(dict.fromkeys(reasons))[:5]  # one message per refused parameter: often the same words twice
    why = "\n".join(f"• {escape(_clip(reason, 600))}" for reason in unique) or "• (no reason given)"
    text = (
        f"ParallelCluster will not shrink `{cluster.ref}` while its compute fleet is running. Two ways:\n"
        f"1. *Stop the compute fleet* (every compute node stops, and running jobs with it), then run "
        f"`/cluster scale {cluster.name} {group} {count}` again, and start the fleet after (`pcluster "
        f"update-compute-fleet --status START_REQUESTED`).\n"
        f"2. Set `Scheduling.SlurmSettings.QueueUpdateStrategy: TERMINATE` in the cluster's configuration: "
        f"ParallelCluster then terminates only the nodes above the new count. That is a configuration change "
        f"for the org's engineers to make."
    )
    body: list[Block] = [
        header(f"Cannot shrink {cluster.name} while it runs"),
        section(text),
        section("*ParallelCluster said*\n" + why),
    ]
    if operation_id is None:
        body.append(context("Dry run: nothing was changed."))
    else:
        body += [plan_buttons(operation_id, confirm="Stop compute fleet", danger=True), _decide_context()]
    return Reply(
        text=f"ParallelCluster will not shrink {cluster.ref} while its compute fleet runs",
        blocks=body,
        public=operation_id is not None,
    )


def start_fleet_button(org_id: str, name: str) -> dict[str, Any]:
    """Where a stopped compute fleet is shown to someone who may operate it: the button that plans its start."""
    return button(START_FLEET_ACTION, f"Start compute fleet of {name}"[:75], f"{org_id}/{name}")


def fleet_start_plan(
    cluster: Cluster, *, back: Mapping[str, int], quota: Sequence[Any], operation_id: str | None = None
) -> Reply:
    """Starting a stopped compute fleet: the static nodes that come back, against quota; Confirm and Cancel."""
    nodes = ", ".join(f"{n:,} x {t}" for t, n in sorted(back.items())) or "no static nodes (dynamic ones only)"
    body: list[Block] = [
        header(f"Plan: start the compute fleet of {cluster.name}"),
        section(
            f"Start the stopped compute fleet of `{cluster.ref}` ({cluster.backend.label}): Slurm runs jobs again, "
            f"and ParallelCluster launches its static nodes: *{nodes}*.",
        ),
    ]
    if quota:
        body.append(
            section(
                "*Quota before → after*\n"
                + "\n".join(
                    f"{q.instance_type}: held {q.held} + {q.requested} → {q.after}"
                    + (f" of {q.allowed} allowed" if q.allowed is not None else " (not limited)")
                    for q in quota
                )
            )
        )
    if operation_id is None:
        body.append(context("Dry run: nothing was changed."))
    else:
        body += [plan_buttons(operation_id, confirm="Start compute fleet"), _decide_context()]
    text = f"Plan: start the compute fleet of {cluster.ref}: {nodes}"
    return Reply(text=text, blocks=body, public=operation_id is not None)


def node_action_plan(verb: str, cluster: Cluster, nodes: Sequence[Node], *, operation_id: str | None = None) -> Reply:
    title = "Replace" if verb == "replace" else "Reboot"
    lines = [f"`{n.node_id}` · {escape(n.group)} · {n.instance_type} · {n.status}" for n in nodes]
    body: list[Block] = [
        header(f"Plan: {verb} {len(nodes)} node{'s' if len(nodes) != 1 else ''} of {cluster.name}"),
        section(f"{title} these nodes of `{cluster.ref}` ({cluster.backend.label}):"),
        *sections(lines),
    ]
    if verb == "replace":
        body.append(
            section(
                ":warning: *Replacing wipes the root and secondary volumes* of these nodes: each gets new hardware "
                "and a new instance id. Anything not on shared storage (FSx, S3) is lost."
            )
        )
    else:
        body.append(section("A soft reboot: jobs on these nodes are interrupted; local disks are kept."))
    if operation_id is None:
        body.append(context("Dry run: nothing was changed."))
    else:
        body += [plan_buttons(operation_id, confirm=f"Confirm {verb}", danger=verb == "replace"), _decide_context()]
    text = f"Plan: {verb} {len(nodes)} nodes of {cluster.ref}: " + ", ".join(n.node_id for n in nodes)
    return Reply(
        text=text, blocks=fit(body, overflow="{hidden} more blocks of nodes not shown"), public=operation_id is not None
    )


def delete_plan(cluster: Cluster, *, operation_id: str) -> Reply:
    counts = ", ".join(f"{n} x {t}" for t, n in sorted(cluster.instances_by_type().items())) or "no nodes"
    body = [
        header(f"Plan: delete {cluster.name}"),
        section(
            f":warning: Deleting `{cluster.ref}` ({cluster.backend.label}) terminates every node ({counts}) and "
            "cannot be undone. Shared file systems (FSx) and S3 data are kept."
        ),
        _plan_actions(operation_id, button(DELETE_OPEN_ACTION, "Delete…", operation_id, style="danger")),
        context("You will be asked to type the cluster's name. Only the requester or a program admin can delete."),
    ]
    return Reply(text=f"Plan: delete {cluster.ref} ({counts})", blocks=body, public=True)


def delete_modal(operation: Any, *, private_metadata: str) -> dict[str, Any]:
    """The modal where the cluster's name must be typed; its submission is the confirmation."""
    return {
        "type": "modal",
        "callback_id": DELETE_VIEW,
        "private_metadata": private_metadata,
        "title": {"type": "plain_text", "text": "Delete cluster"},
        "submit": {"type": "plain_text", "text": "Delete"},
        "close": {"type": "plain_text", "text": "Keep it"},
        "blocks": [
            section(
                f":warning: This deletes `{operation.org_id}/{operation.cluster_name}` and every node in it. "
                "It cannot be undone."
            ),
            {
                "type": "input",
                "block_id": DELETE_NAME_BLOCK,
                "label": {"type": "plain_text", "text": f"Type {operation.cluster_name} to confirm"},
                "element": {"type": "plain_text_input", "action_id": DELETE_NAME_INPUT},
            },
        ],
    }


def progress_line(cluster: Cluster) -> str:
    groups = ", ".join(
        f"{escape(g.name)} {g.current}/{g.target}" if g.target is not None else f"{escape(g.name)} {g.current}"
        for g in cluster.groups
    )
    return f"`{cluster.status}` · {_health_text(cluster)}" + (f" · {groups}" if groups else "")


def operation_line(operation: Any, cluster: Cluster | None) -> str:
    """Where a running change stands, from the cluster as AWS shows it now."""
    if cluster is None:
        return "Waiting for AWS to show the cluster…" if operation.kind != "delete" else "The cluster is gone."
    request = stored_request(operation)
    if operation.kind == "stop_fleet":
        return f"`{cluster.status}` · compute fleet `{cluster.extra.get('compute_fleet') or 'unknown'}`"
    if isinstance(request, NodeRequest):
        nodes = {node.node_id: node for node in cluster.nodes}
        parts = [f"`{i}` {nodes[i].status if i in nodes else 'gone'}" for i in request.successful or ()]
        before = set(request.before_ids)
        fresh = [n for n in cluster.nodes if n.group in request.groups and n.node_id not in before]
        if fresh:
            parts.append("new: " + ", ".join(f"`{n.node_id}` {n.status}" for n in fresh))
        return f"`{cluster.status}` · " + " · ".join(parts)
    return progress_line(cluster)


def operation_progress(operation: Any, line: str) -> Reply:
    """The in-channel message of a running operation, edited in place as it moves."""
    who = f"asked by <@{operation.requested_by}>" + (
        f", confirmed by <@{operation.confirmed_by}>" if operation.confirmed_by else ""
    )
    icon, title, doing = _KIND_TITLE.get(operation.kind, (":gear:", operation.kind, operation.kind))
    ref = f"`{operation.org_id}/{operation.cluster_name}`"
    request = stored_request(operation)
    what = f"{ref} from `{operation.template}`" if operation.kind == "launch" else ref
    if isinstance(request, ScaleRequest):
        what = f"{ref} · `{escape(request.group)}` {request.before} → {request.count} nodes"
    body = [section(f"{icon} *{title}* {what}"), section(line)]
    if isinstance(request, NodeRequest) and request.failed:
        body.append(section(":x: *Not done*: " + failed_nodes_text(request.failed)))
    body.append(context(who))
    return Reply(text=f"{doing} {operation_summary(operation)[len(operation.kind) + 1 :]}: {line}", blocks=body)


def operation_decided(operation: Any, verb: str, *, by: str | None = None) -> Reply:
    who = f" by <@{by}>" if by else ""
    title = _KIND_TITLE.get(operation.kind, ("", operation.kind, ""))[1]
    text = f"{title} of {operation.org_id}/{operation.cluster_name} {verb}{who}."
    follow = ""
    if verb == "confirmed":
        dm = str(operation.channel_id).startswith("D")  # it could not be posted where the plan was
        follow = " Progress is in your DM with Pitcrew." if dm else " Progress is posted in this channel."
    return Reply(text=text + follow, blocks=[section(text + follow)], public=True)


def audit_reply(
    entries: Sequence[Any],
    *,
    scope: str,
    days: int,
    tz: ZoneInfo,
    ids: bool = False,
    user: str | None = None,
    action: str | None = None,
    limit: int | None = None,
    home_team: str | None = None,
    team_names: Mapping[str, str] | None = None,
) -> Reply:
    """Audit entries, newest first, one readable line each (bot.audit_view). `scope`: plain words, e.g.
    "Kumo Labs (kumo-labs)" or "every org"; `limit`: how many were asked for, to say when there may be more;
    actors from another workspace than `home_team` are marked external."""
    lines = audit_view.describe_all(entries, tz=tz, ids=ids, home_team=home_team, team_names=team_names)
    period = f"last {days} day{'s' if days != 1 else ''}"
    title = f"Audit · {scope} · {period}"  # a header is plain text: no code spans, no mentions
    only = []
    if action:
        only.append(f"only `{action}`")
    if user:
        only.append(f"only <@{user}>" if audit_view.USER_ID.fullmatch(user) else f"only {mrkdwn.code(user)}")
    filters = (", ".join(only) + ". ") if only else ""
    zone = datetime.now(tz).strftime("%Z")
    notes = [f"{filters}Newest first; times in {zone} ({tz.key})."]
    if limit is not None and len(entries) >= limit:
        notes.append(f"Showing the newest {limit}: narrow with `--days`, `--user` or `--action`.")
    if not ids and entries:
        notes.append("`--ids` adds operation and alert ids.")
    nothing = "_Nothing recorded in that time" + (" that matches._" if only else "._")
    body = sections(lines) if lines else [section(nothing)]
    text = f"{title}: {len(entries)} entr{'y' if len(entries) == 1 else 'ies'}"
    return Reply(
        text=text,
        blocks=fit(
            [header(title), *body, context(" ".join(notes))], overflow="{hidden} more blocks: narrow with --days"
        ),
    )


def throughput_reply(
    summaries: Sequence[Any], *, cluster: str, hours: int, tz: ZoneInfo, chart_where: str, public: bool = False
) -> Reply:
    """Each job's rate now against its baseline; the chart goes where `chart_where` says."""
    icons = {"healthy": ":large_green_circle:", "stall": ":red_circle:", "slowdown": ":large_orange_circle:"}
    lines = []
    for s in summaries:
        rate = f"{s.current:,.0f} {s.unit}" if s.current is not None else "no rate yet"
        baseline = f" · baseline {s.baseline:,.0f}" if s.baseline is not None else ""
        since = f" since {when(s.since, tz)}" if s.since else ""
        icon = icons.get(s.state, ":white_circle:")
        last = f"last sample {when(s.last, tz)}"
        lines.append(f"{icon} `{escape(s.job)}` ({s.org}) · *{s.state}*{since} · {rate}{baseline} · {last}")
    title = f"Throughput · {cluster} · last {hours} h"
    if not lines:
        text = f"No throughput samples for `{escape(cluster)}` in the last {hours} h that you may see."
        hint = "Training scripts post them to `POST /api/v1/throughput` (see the README)."
        return Reply(text=text, blocks=[section(text), context(hint)], public=public)
    body = [header(title), *sections(lines), context(chart_where)]
    return Reply(text=f"{title}: {len(lines)} job(s)", blocks=fit(body, overflow="{hidden} more blocks"), public=public)
