"""Block Kit for alerts, one presenter per kind (node, cluster, job, faulty_node; registered in PRESENTERS): the message
in the org's channel (edited as the episode moves), the grouped message of a storm, thread notes, the
compact line in the coordination channel, and the lines of silences."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol
from zoneinfo import ZoneInfo

from bot.alerts.desk import AlreadyAcknowledged, AlreadyEnded, AlreadySilenced, NothingChanged
from bot.alerts.kind import Action, AlertKind, AlertView, Tone
from bot.alerts.kinds import capacity as capacity_kind
from bot.alerts.kinds import cluster as cluster_kind
from bot.alerts.kinds import degradation as degradation_kind
from bot.alerts.kinds import faulty as faulty_kind
from bot.alerts.kinds import idle as idle_kind
from bot.alerts.kinds import job as job_kind
from bot.alerts.kinds import node as node_kind
from bot.clusters.console import cluster_url, node_url
from bot.clusters.model import Backend, Cluster, Health
from bot.mrkdwn import cut, visible
from bot.node_metrics.series import PeerChart, on_trainium
from bot.plots import ThroughputChart
from bot.slack import charts
from bot.slack.blocks import Block, Reply, button, context, escape, fit, header, section, sections, when
from bot.slack.capacity import capacity_alert, capacity_coordination_line, capacity_held_back

ACK_ACTION = "alert_ack"
REPLACE_ACTION = "alert_replace"
REBOOT_ACTION = "alert_reboot"
CHECK_ACTION = "alert_check"  # Run deep health check (HyperPod)
WATCH_ACTION = "alert_watch"  # acknowledge with a reminder (a divergence)
SILENCE_HOURS = (1, 4, 24)
SILENCE_ACTION = "alert_silence_{hours}"  # one action id per button: Slack wants them unique in a block
UNSILENCE_ACTION = "alert_unsilence"  # its value is the silence's id, not an episode's
NODES_LISTED = 30


def _duration(start: datetime, end: datetime) -> str:
    minutes = max(0, round((end - start).total_seconds() / 60))
    return f"{minutes} min" if minutes < 120 else f"{minutes / 60:.1f} h"


def failed_as(episode: Any) -> tuple[str, str]:
    """The status and message a failure had when it failed (an episode stored before they were kept: its
    last ones); `status` follows the node, or its replacement, from then on."""
    if getattr(episode, "failed_status", ""):
        return episode.failed_status, episode.failed_message
    return episode.status, episode.message


def status_of(episode: Any) -> tuple[str, str]:
    """The status to show beside a node: its own while it fails, what failed once it is over."""
    return (episode.status, episode.message) if episode.state == "open" else failed_as(episode)


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def _group_health(cluster: Cluster | None, group: str) -> str:
    if cluster is None:
        return "unknown"
    nodes = [node for node in cluster.nodes if node.group == group]
    healthy = sum(1 for node in nodes if node.health is Health.HEALTHY)
    return f"{healthy}/{len(nodes)} healthy"


def _recovery(cluster: Cluster | None) -> str:
    if cluster is None or cluster.backend is not Backend.HYPERPOD:
        return "Slurm replaces failed static nodes" if cluster is not None else "unknown"
    mode = cluster.extra.get("node_recovery", "")
    return {"Automatic": "Automatic (HyperPod reboots or replaces it)", "None": "Off: act on it yourself"}.get(
        mode, mode or "unknown"
    )


def _silence_buttons(value: str, silence: Any | None) -> list[dict[str, Any]]:
    """Silence 1/4/24 h, or, while the cluster is silenced, the one button that ends it."""
    if silence is not None and getattr(silence, "id", None):
        return [button(UNSILENCE_ACTION, "Unsilence", str(silence.id))]
    return [button(SILENCE_ACTION.format(hours=h), f"Silence {h} h", value) for h in SILENCE_HOURS]


def _buttons(episode: Any, actions: Sequence[Action], silence: Any | None = None) -> Block:
    """The alert's buttons in the order its kind gives them (bot.alerts.severity: the one its fault calls for
    first, styled primary)."""
    value = str(episode.storm_id or episode.id)
    elements: list[dict[str, Any]] = []
    owned = bool(episode.acked_by)
    for action in actions:
        if action is Action.ACKNOWLEDGE and not owned:
            elements.append(button(ACK_ACTION, "Acknowledge", value))
        elif action is Action.WATCH and not owned:
            elements.append(button(WATCH_ACTION, "Watch", value))
        elif action is Action.REPLACE:
            elements.append(button(REPLACE_ACTION, "Replace node", value))
        elif action is Action.REBOOT:
            elements.append(button(REBOOT_ACTION, "Reboot node", value))
        elif action is Action.CHECK:
            elements.append(button(CHECK_ACTION, "Run deep health check", value))
        elif action is Action.SILENCE:
            elements += _silence_buttons(value, silence)
    if (
        elements
        and elements[0]["action_id"] != UNSILENCE_ACTION
        and not elements[0]["action_id"].startswith("alert_silence_")
    ):
        elements[0] = {**elements[0], "style": "primary"}  # the first is what the alert calls for
    return {"type": "actions", "block_id": f"alert:{value}", "elements": elements}


def _footer(episode: Any, tz: ZoneInfo, silence: Any | None) -> list[str]:
    parts = [f"Episode #{episode.id}"]
    if episode.reopened:
        parts.append(f"failed again {episode.reopened} time" + ("s" if episode.reopened > 1 else ""))
    follows = getattr(episode, "follows", None)
    if follows:
        parts.append(f"follows <{follows}|the earlier alert>")
    if episode.acked_by:
        parts.append(f"acknowledged by <@{episode.acked_by}> at {when(episode.acked_at, tz)}")
    escalated = getattr(episode, "escalated_at", None)
    if escalated is not None:
        parts.append(f"escalated to the coordination channel at {when(escalated, tz)}")
    if silence is not None:
        parts.append(f"cluster silenced until {when(silence.until, tz)} by <@{silence.set_by}>")
    return parts


def silence_message(silence: Any, *, tz: ZoneInfo) -> Reply:
    """The message a silence posts in the thread it was set from: what it holds back, until when, and the
    button that ends it early; edited once it has ended."""
    cluster = escape(silence.cluster_name)
    if silence.ended_at is not None:
        text = (
            f":loud_sound: Silence of `{cluster}` ended by <@{silence.ended_by}> at {when(silence.ended_at, tz)} "
            f"(it was set by <@{silence.set_by}> until {when(silence.until, tz)}). New alerts post in the channel."
        )
        return Reply(text=text.replace("`", ""), blocks=[section(text)], public=True)
    text = (
        f":mute: Silenced until {when(silence.until, tz)} by <@{silence.set_by}>: new node, cluster and "
        f"throughput alerts of `{cluster}` go to this thread."
    )
    actions = {
        "type": "actions",
        "block_id": f"silence:{silence.id}",
        "elements": [button(UNSILENCE_ACTION, "Unsilence", str(silence.id))],
    }
    return Reply(text=text.replace("`", ""), blocks=[section(text), actions], public=True)


def held_back_line(what: str, detail: str, *, at: datetime, tz: ZoneInfo) -> Reply:
    """One line in a silence's thread for an alert it held back: what, and when."""
    shown = escape(cut(visible(detail, one_line=True), 300)) if detail else ""
    text = f":mute: Held back, {when(at, tz)}: {what}" + (f" · {shown}" if shown else "")
    return thread_note(text)


def node_alert(
    episode: Any,
    *,
    cluster: Cluster | None,
    org_name: str,
    tz: ZoneInfo,
    now: datetime,
    actions: Sequence[Action],
    silence: Any | None = None,
) -> Reply:
    """One failing node (or a failed cluster), as the org channel sees it; edited as it moves, and each edit
    re-renders the facts as they are now (the node that replaced it, the group's health, who owns it)."""
    ref = f"{episode.org_id}/{episode.cluster_name}"
    is_open = episode.state == "open"
    backend = Backend(episode.backend)
    provisioning = episode.kind == "cluster" and episode.node_key not in ("", "cluster")
    if provisioning:  # HyperPod's provisioning events (bot.monitor.diagnosis), the cluster itself still up
        group = f", group `{escape(episode.group_name)}`" if episode.group_name else ""
        what = f"`{ref}`{group}"
    elif episode.kind == "cluster":
        what = f"`{ref}` is {episode.status}" if is_open else f"cluster `{ref}`"
    else:
        what = f"node `{episode.node_ids[0]}` of `{ref}`"
        if len(episode.node_ids) > 1:
            what += f", replaced by `{episode.node_ids[-1]}`"
    if is_open and provisioning:
        title = f"Provisioning failed: {what}"
    elif is_open:
        title = f"{'Cluster failed' if episode.kind == 'cluster' else 'Node failed'}: {what}"
    else:
        title = f"Recovered after {_duration(episode.opened_at, episode.closed_at or now)}: {what}"
    fields = [f"*Org*\n{escape(org_name)} (`{episode.org_id}`)", f"*Cluster*\n`{ref}` · {backend.label}"]
    if episode.kind == "node":
        history = " → ".join(f"`{node_id}`" for node_id in episode.node_ids)
        fields += [
            f"*Group*\n`{escape(episode.group_name)}` · {episode.instance_type}",
            f"*Node*\n{history}",
            f"*Group health now*\n{_group_health(cluster, episode.group_name)}",
            f"*Node recovery*\n{_recovery(cluster)}",
        ]
    if is_open:
        fields += [
            f"*Status*\n`{escape(episode.status)}`" + (f": {escape(episode.message)[:300]}" if episode.message else ""),
            f"*Failed at*\n{when(episode.opened_at, tz)}",
        ]
        if getattr(episode, "diagnosis", ""):  # HyperPod's own word, beside AWS's status message
            fields.append(f"*Diagnosis*\n{escape(episode.diagnosis)[:300]}")
    else:  # what it was, and what it is now: no status that reads as if it still failed
        status, message = failed_as(episode)
        failed_at = episode.failing_since if episode.reopened and episode.failing_since else episode.opened_at
        fields += [
            f"*Failed at*\n{when(failed_at, tz)} with `{escape(status)}`"
            + (f": {escape(message)[:300]}" if message else ""),
            f"*Now*\n{_sentence(episode.outcome) if getattr(episode, 'outcome', '') else 'Recovered'}",
        ]
    icon = ":red_circle:" if is_open else ":large_green_circle:"
    body: list[Block] = [section(f"{icon} *{title}*"), section(" ", fields=fields)]
    if not is_open and episode.kind == "node":
        body.append(section(f"Node-hours lost: {episode.node_hours_lost:.2f} ({episode.instance_type})"))
    if is_open:
        body.append(_buttons(episode, actions, silence=silence))
    body.append(context(" · ".join(_footer(episode, tz, silence))))
    text = title.replace("`", "") + (f": {episode.status} {episode.message}".rstrip() if is_open else "")
    return Reply(text=text[:3000], blocks=body, public=True)


def storm_alert(
    episodes: Sequence[Any],
    *,
    cluster: Cluster | None,
    org_name: str,
    tz: ZoneInfo,
    actions: Sequence[Action],
    silence: Any | None = None,
) -> Reply:
    """Many nodes of one cluster failing at once: one message listing them, not one message each."""
    first = episodes[0]
    ref = f"{first.org_id}/{first.cluster_name}"
    still = [e for e in episodes if e.state == "open"]
    title = (
        f":rotating_light: {len(episodes)} nodes of `{ref}` failed together ({len(still)} still failing)"
        if still
        else f":large_green_circle: All {len(episodes)} nodes of `{ref}` recovered"
    )
    lines = [
        f"{':red_circle:' if e.state == 'open' else ':large_green_circle:'} `{e.node_ids[-1]}` · "
        f"{escape(e.group_name)} · `{escape(status)}`" + (f" {escape(message)[:120]}" if message else "")
        for e in episodes[:NODES_LISTED]
        for status, message in [status_of(e)]
    ]
    if len(episodes) > NODES_LISTED:
        lines.append(f"…and {len(episodes) - NODES_LISTED} more (`/cluster nodes {first.cluster_name} --failed`)")
    groups = sorted({e.group_name for e in episodes})
    health = " · ".join(f"{escape(g)}: {_group_health(cluster, g)}" for g in groups)
    body: list[Block] = [
        header(f"{len(episodes)} nodes failed: {first.cluster_name}"),
        section(title, fields=[f"*Org*\n{escape(org_name)}", f"*Failed at*\n{when(first.opened_at, tz)}"]),
        *sections(lines),
        section(f"*Group health now*: {health} · *Node recovery*: {_recovery(cluster)}"),
    ]
    if still:
        body.append(_buttons(first, actions, silence=silence))
    body.append(context(" · ".join(_footer(first, tz, silence))))
    text = f"{ref}: {len(episodes)} nodes failed together, {len(still)} still failing"
    return Reply(text=text, blocks=fit(body, overflow="{hidden} more blocks"), public=True)


def coordination_line(episodes: Sequence[Any], *, channel: str, now: datetime) -> Reply:
    """The compact line in the coordination channel; edited when the episode ends."""
    first = episodes[0]
    ref = f"{first.org_id}/{first.cluster_name}"
    open_count = sum(1 for e in episodes if e.state == "open")
    status, message = status_of(first)
    if first.kind == "cluster":
        what = f"cluster {escape(status)}" + (f" ({escape(message)[:100]})" if message else "")
    elif len(episodes) > 1:
        what = f"{len(episodes)} nodes failed together"
    else:
        replaced = f" (replaced by `{first.node_ids[-1]}`)" if len(first.node_ids) > 1 else ""
        what = f"node `{first.node_ids[0]}`{replaced} {escape(status)}" + (
            f" ({escape(message)[:100]})" if message else ""
        )
    if open_count:
        text = f":red_circle: `{ref}`: {what} · details in <#{channel}>"
    else:
        took = _duration(first.opened_at, max((e.closed_at or now) for e in episodes))
        text = f":large_green_circle: `{ref}`: {what} · recovered after {took} · <#{channel}>"
    return Reply(text=text.replace("`", ""), blocks=[section(text)], public=True)


def thread_note(text: str) -> Reply:
    return Reply(text=text.replace("`", ""), blocks=[section(text)], public=True)


JOB_KINDS = {"stall": "Training stalled", "slowdown": "Training slowed down"}


def job_alert(
    episode: Any, *, org_name: str, tz: ZoneInfo, now: datetime, actions: Sequence[Action], silence: Any | None = None
) -> Reply:
    """A training job's throughput episode (episode.status is "stall" or "slowdown"; its message holds the
    figures and any node failure in the same window)."""
    ref = f"{episode.org_id}/{episode.cluster_name}"
    is_open = episode.state == "open"
    since = episode.failing_since or episode.opened_at
    what = f"job `{escape(episode.node_key)}` on `{ref}`"
    if is_open:
        title = f"{JOB_KINDS.get(episode.status, 'Throughput anomaly')}: {what}"
    else:
        title = f"Throughput back after {_duration(since, episode.closed_at or now)}: {what}"
    fields = [
        f"*Org*\n{escape(org_name)} (`{episode.org_id}`)",
        f"*Job*\n`{escape(episode.node_key)}` on `{escape(episode.cluster_name)}`",
        f"*Kind*\n{'hang: no throughput' if episode.status == 'stall' else 'slowdown against its own baseline'}",
        f"*Since*\n{when(since, tz)}",
    ]
    icon = ":red_circle:" if is_open else ":large_green_circle:"
    body: list[Block] = [section(f"{icon} *{title}*"), section(" ", fields=fields)]
    if episode.message:
        body.append(section(escape(episode.message)[:2500]))
    if is_open:
        body.append(_buttons(episode, actions, silence=silence))
    body.append(context(" · ".join([*_footer(episode, tz, silence), "chart in the thread"])))
    text = title.replace("`", "") + (f": {episode.message}" if is_open and episode.message else "")
    return Reply(text=text[:3000], blocks=body, public=True)


def job_coordination_line(episode: Any, *, channel: str, now: datetime) -> Reply:
    ref = f"{episode.org_id}/{episode.cluster_name}"
    kind = JOB_KINDS.get(episode.status, "throughput anomaly").lower()
    if episode.state == "open":
        text = f":red_circle: `{ref}` job `{escape(episode.node_key)}`: {kind} · details in <#{channel}>"
    else:
        took = _duration(episode.failing_since or episode.opened_at, episode.closed_at or now)
        job = escape(episode.node_key)
        text = f":large_green_circle: `{ref}` job `{job}`: throughput back after {took} · <#{channel}>"
    return Reply(text=text.replace("`", ""), blocks=[section(text)], public=True)


def degradation_alert(
    episode: Any, *, org_name: str, tz: ZoneInfo, now: datetime, actions: Sequence[Action], silence: Any | None = None
) -> Reply:
    """A training job's small, lasting drop (issue 23): a low-urgency notice (its message holds the figures and
    what the per-node metrics say); no coordination line, never escalated."""
    ref = f"{episode.org_id}/{episode.cluster_name}"
    is_open = episode.state == "open"
    since = episode.failing_since or episode.opened_at
    what = f"job `{escape(episode.node_key)}` on `{ref}`"
    if is_open:
        title = f"Throughput degraded: {what}"
    else:
        title = f"Degradation over after {_duration(since, episode.closed_at or now)}: {what}"
    fields = [
        f"*Org*\n{escape(org_name)} (`{episode.org_id}`)",
        f"*Job*\n`{escape(episode.node_key)}` on `{escape(episode.cluster_name)}`",
        "*Kind*\ndegradation: a small, lasting drop (low urgency)",
        f"*Since*\n{when(since, tz)}",
    ]
    icon = ":large_yellow_circle:" if is_open else ":white_circle:"
    body: list[Block] = [section(f"{icon} *{title}*"), section(" ", fields=fields)]
    if episode.message:
        body.append(section(escape(episode.message)[:2500]))
    if is_open:
        body.append(_buttons(episode, actions, silence=silence))
    body.append(context(" · ".join([*_footer(episode, tz, silence), "chart in the thread"])))
    text = title.replace("`", "") + (f": {episode.message}" if is_open and episode.message else "")
    return Reply(text=text[:3000], blocks=body, public=True)


FAULT_CAUSES = {
    "gpu": "a GPU gone (XID, or no utilization and power)",
    "gpu_memory": "GPU memory errors (ECC, row remapping)",
    "thermal": "a GPU throttled (clock down, hot or power capped)",
    "network": "EFA traffic far below its peers', retransmits up",
}
# On a Trainium node (its evidence speaks of NeuronCores and Trainium devices), the same causes in its words.
TRAINIUM_FAULT_CAUSES = {
    "gpu": "a Trainium device missing, a NeuronCore stuck or hardware execution errors",
    "gpu_memory": "Trainium device memory errors (uncorrected or rising ECC, HBM or SRAM)",
}


def _fault_cause(cause: str | None, evidence: str) -> str:
    words = TRAINIUM_FAULT_CAUSES.get(cause or "") if on_trainium(evidence) else None
    return words or FAULT_CAUSES.get(cause or "", "diverges from its peers")


FAULT_CLOSED = {
    faulty_kind.CLEARED: "Back in line with its peers",
    faulty_kind.LEFT: "Left the cluster",
}


def faulty_node_alert(
    episode: Any, *, org_name: str, tz: ZoneInfo, now: datetime, actions: Sequence[Action], silence: Any | None = None
) -> Reply:
    """A node that diverges from its peers while still up (episode.cause the cause, episode.message the
    evidence); edited when it is back in line or has left the cluster."""
    ref = f"{episode.org_id}/{episode.cluster_name}"
    node = escape(episode.node_key)
    is_open = episode.state == "open"
    since = episode.failing_since or episode.opened_at
    cause = escape(episode.cause or "unknown")
    what = f"`{node}` of `{ref}` ({cause})"
    if is_open:
        title = f"Faulty node: {what}"
    else:
        closed = FAULT_CLOSED.get(episode.status, "No longer watched")
        title = f"{closed} after {_duration(since, episode.closed_at or now)}: {what}"
    backend = Backend(episode.backend).label if episode.backend in {b.value for b in Backend} else episode.backend
    fields = [
        f"*Org*\n{escape(org_name)} (`{episode.org_id}`)",
        f"*Cluster*\n`{ref}` · {backend}",
        f"*Node*\n`{node}`",
        f"*Cause*\n`{cause}`: {_fault_cause(episode.cause, episode.message or '')}",
        f"*Diverging since*\n{when(since, tz)}",
    ]
    if is_open and getattr(episode, "diagnosis", ""):  # HyperPod's word: the last deep health check, say
        fields.append(f"*Diagnosis*\n{escape(episode.diagnosis)[:300]}")
    icon = ":warning:" if is_open else ":large_green_circle:"
    body: list[Block] = [section(f"{icon} *{title}*"), section(" ", fields=fields)]
    if episode.message:
        body.append(section(f"*Evidence*: {escape(episode.message)[:2500]}"))
    if is_open:
        body.append(section("Found by comparing the node with its peers: no job needs to have slowed yet."))
        body.append(_buttons(episode, actions, silence=silence))
    body.append(context(" · ".join(_footer(episode, tz, silence))))
    text = title.replace("`", "") + (f": {episode.message}" if is_open and episode.message else "")
    return Reply(text=text[:3000], blocks=body, public=True)


def faulty_node_coordination_line(episode: Any, *, channel: str, now: datetime) -> Reply:
    ref = f"{episode.org_id}/{episode.cluster_name}"
    what = f"faulty node `{escape(episode.node_key)}` ({escape(episode.cause or 'unknown')})"
    if episode.state == "open":
        text = f":warning: `{ref}`: {what} · details in <#{channel}>"
    else:
        took = _duration(episode.failing_since or episode.opened_at, episode.closed_at or now)
        closed = FAULT_CLOSED.get(episode.status, "no longer watched").lower()
        text = f":large_green_circle: `{ref}`: {what} · {closed} after {took} · <#{channel}>"
    return Reply(text=text.replace("`", ""), blocks=[section(text)], public=True)


# ------------------------------------------------------------------------------------- presenters per kind


class KindPresenter(Protocol):
    """How one kind of alert reads."""

    def alert(self, view: AlertView) -> Reply: ...

    def coordination(self, view: AlertView, *, channel: str) -> Reply: ...

    def held_back(self, row: Any) -> str:
        """What a silence held back, for its line in the silenced alert's thread."""
        ...


class NodePresenter:
    """A failed node (a storm's members in one message) or a failed cluster: they read alike."""

    def alert(self, view: AlertView) -> Reply:
        if len(view.rows) > 1:
            return storm_alert(
                view.rows,
                cluster=view.cluster,
                org_name=view.org_name,
                tz=view.tz,
                actions=view.actions,
                silence=view.silence,
            )
        return node_alert(
            view.first,
            cluster=view.cluster,
            org_name=view.org_name,
            tz=view.tz,
            now=view.now,
            actions=view.actions,
            silence=view.silence,
        )

    def coordination(self, view: AlertView, *, channel: str) -> Reply:
        return coordination_line(view.rows, channel=channel, now=view.now)

    def held_back(self, row: Any) -> str:
        return f"node `{row.node_ids[-1]}` {row.status}" if row.node_ids else f"the cluster {row.status}"


class JobPresenter:
    def alert(self, view: AlertView) -> Reply:
        return job_alert(
            view.first, org_name=view.org_name, tz=view.tz, now=view.now, actions=view.actions, silence=view.silence
        )

    def coordination(self, view: AlertView, *, channel: str) -> Reply:
        return job_coordination_line(view.first, channel=channel, now=view.now)

    def held_back(self, row: Any) -> str:
        return f"job `{row.node_key}` {row.status}"


class FaultyNodePresenter:
    def alert(self, view: AlertView) -> Reply:
        return faulty_node_alert(
            view.first, org_name=view.org_name, tz=view.tz, now=view.now, actions=view.actions, silence=view.silence
        )

    def coordination(self, view: AlertView, *, channel: str) -> Reply:
        return faulty_node_coordination_line(view.first, channel=channel, now=view.now)

    def held_back(self, row: Any) -> str:
        return f"faulty node `{escape(row.node_key)}` ({escape(row.cause or 'unknown')})"


class CapacityPresenter:
    """Reserved capacity about to end (bot.slack.capacity renders it)."""

    def alert(self, view: AlertView) -> Reply:
        row = view.first
        buttons = _buttons(row, view.actions) if row.state == "open" else None
        return capacity_alert(
            row, org_name=view.org_name, tz=view.tz, now=view.now, buttons=buttons, footer=_footer(row, view.tz, None)
        )

    def coordination(self, view: AlertView, *, channel: str) -> Reply:
        return capacity_coordination_line(view.first, channel=channel, tz=view.tz)

    def held_back(self, row: Any) -> str:
        return capacity_held_back(row)


IDLE_CLOSED = {  # how a notice closed, as it happened: only "Busy again" means its nodes were put to work
    idle_kind.BUSY: "Busy again",
    idle_kind.STOPPED: "Nodes stopped",
    idle_kind.GONE: "Nodes gone",
    idle_kind.RELEASED: "No longer watched",
}


def idle_alert(
    episode: Any, *, org_name: str, tz: ZoneInfo, now: datetime, actions: Sequence[Action], silence: Any | None = None
) -> Reply:
    """Accelerator nodes of a cluster running no job (episode.message: their counts, then their cost a day);
    its idle time reads as of the last edit, and it is edited when a job reports again."""
    ref = f"{episode.org_id}/{episode.cluster_name}"
    counts, cost = idle_kind.read_message(episode.message)
    since = episode.failing_since or episode.opened_at
    is_open = episode.state == "open"
    idle_for = _duration(since, now if is_open else (episode.closed_at or now))
    if is_open:
        title = f"Idle accelerators: `{ref}`"
        summary = f"*{escape(counts)} idle for {idle_for}*" + (f", {escape(cost)}" if cost else "")
    else:
        title = f"{IDLE_CLOSED.get(episode.status, 'No longer watched')} after {idle_for} idle: `{ref}`"
        summary = f"{escape(counts)} were idle for {idle_for}" + (f" ({escape(cost)})" if cost else "")
    backend = Backend(episode.backend).label if episode.backend in {b.value for b in Backend} else episode.backend
    shown = ", ".join(f"`{escape(n)}`" for n in episode.node_ids[:NODES_LISTED])
    more = len(episode.node_ids) - NODES_LISTED
    fields = [
        f"*Org*\n{escape(org_name)} (`{episode.org_id}`)",
        f"*Cluster*\n`{ref}` · {backend}",
        f"*No job since*\n{when(since, tz)}",
        f"*Nodes*\n{shown}" + (f" and {more} more" if more > 0 else ""),
    ]
    icon = ":zzz:" if is_open else ":large_green_circle:" if episode.status == idle_kind.BUSY else ":white_circle:"
    body: list[Block] = [section(f"{icon} *{title}*"), section(summary, fields=fields[:10])]
    if is_open:
        body.append(
            section(
                "No throughput sample from any job of this cluster, and no job alert open on it. Start a job, or "
                f"give the nodes back: `/cluster scale {escape(episode.cluster_name)} GROUP COUNT` or "
                f"`/cluster delete {escape(episode.cluster_name)}`."
            )
        )
        body.append(_buttons(episode, actions, silence=silence))
    body.append(context(" · ".join(_footer(episode, tz, silence))))
    text = f"{title.replace('`', '')}: {counts} idle for {idle_for}" + (f", {cost}" if cost else "")
    return Reply(text=text[:3000], blocks=body, public=True)


def idle_coordination_line(episode: Any, *, channel: str, now: datetime) -> Reply:
    ref = f"{episode.org_id}/{episode.cluster_name}"
    counts, cost = idle_kind.read_message(episode.message)
    since = episode.failing_since or episode.opened_at
    if episode.state == "open":
        what = f"{escape(counts)} idle for {_duration(since, now)}" + (f", {escape(cost)}" if cost else "")
        text = f":zzz: `{ref}`: {what} · details in <#{channel}>"
    else:
        took = _duration(since, episode.closed_at or now)
        closed = IDLE_CLOSED.get(episode.status, "no longer watched").lower()
        icon = ":large_green_circle:" if episode.status == idle_kind.BUSY else ":white_circle:"
        text = f"{icon} `{ref}`: {escape(counts)}: {closed} after {took} idle · <#{channel}>"
    return Reply(text=text.replace("`", ""), blocks=[section(text)], public=True)


class IdlePresenter:
    def alert(self, view: AlertView) -> Reply:
        return idle_alert(
            view.first, org_name=view.org_name, tz=view.tz, now=view.now, actions=view.actions, silence=view.silence
        )

    def coordination(self, view: AlertView, *, channel: str) -> Reply:
        return idle_coordination_line(view.first, channel=channel, now=view.now)

    def held_back(self, row: Any) -> str:
        counts, _ = idle_kind.read_message(row.message)
        return f"{counts} idle"


class DegradationPresenter:
    """A degradation notice: in the org's channel only (the desk posts no coordination line for it)."""

    def alert(self, view: AlertView) -> Reply:
        return degradation_alert(
            view.first, org_name=view.org_name, tz=view.tz, now=view.now, actions=view.actions, silence=view.silence
        )

    def coordination(self, view: AlertView, *, channel: str) -> Reply:
        return job_coordination_line(view.first, channel=channel, now=view.now)  # not posted (NOT_COORDINATED)

    def held_back(self, row: Any) -> str:
        return f"job `{row.node_key}` degraded"


# A new kind: its module in bot.alerts.kinds, its presenter above, and its line here.
PRESENTERS: Mapping[str, KindPresenter] = {
    node_kind.KIND.name: NodePresenter(),
    cluster_kind.KIND.name: NodePresenter(),
    job_kind.KIND.name: JobPresenter(),
    faulty_kind.KIND.name: FaultyNodePresenter(),
    capacity_kind.KIND.name: CapacityPresenter(),
    idle_kind.KIND.name: IdlePresenter(),
    degradation_kind.KIND.name: DegradationPresenter(),
}


TONES = {Tone.NEWS: "", Tone.WORSE: ":red_circle: ", Tone.RECOVERED: ":large_green_circle: Recovered: "}


CLUSTER_BACKENDS = frozenset(backend.value for backend in Backend)


def console_links(view: AlertView, *, region: str | None, backend_hint: str | None = None) -> str | None:
    """The alert's cluster (and its one node) in the AWS console, as one context line; None where the region
    or the cluster's backend is not known (a job names its cluster, not the backend: `backend_hint` is what
    the last sweep listed it under)."""
    row = view.first
    backend = row.backend if row.backend in CLUSTER_BACKENDS else (view.cluster.backend if view.cluster else None)
    backend = backend or backend_hint
    if not region or backend is None:
        return None
    links = [f"<{cluster_url(backend, region, row.cluster_name)}|{escape(row.cluster_name)} in the AWS console>"]
    if len(view.rows) == 1 and row.node_key != "cluster" and row.node_ids and backend == Backend.PCLUSTER.value:
        node = row.node_ids[-1]
        links.append(f"<{node_url(backend, region, row.cluster_name, node)}|{escape(node)} in the EC2 console>")
    return ":link: " + " · ".join(links)


def with_console_links(reply: Reply, view: AlertView, *, region: str | None, backend_hint: str | None = None) -> Reply:
    """The reply with its console line before the footer (the last block), within Slack's 50 blocks."""
    line = console_links(view, region=region, backend_hint=backend_hint)
    if line is None or len(reply.blocks) >= 50:
        return reply
    at = len(reply.blocks) - 1 if reply.blocks and reply.blocks[-1].get("type") == "context" else len(reply.blocks)
    return Reply(text=reply.text, blocks=[*reply.blocks[:at], context(line), *reply.blocks[at:]], public=reply.public)


def escalation_message(
    line: Reply,
    episode: Any,
    *,
    link: str | None,
    operators: Sequence[str],
    minutes: float,
    actions: Sequence[Action],
    over: bool = False,
    tz: ZoneInfo | None = None,
) -> Reply:
    """An alert nobody acknowledged in time, posted again in the coordination channel: its coordination
    line, the org's operators mentioned, a link to the alert, and its Acknowledge button. Edited with the
    alert: once someone acknowledged it, who and when (no button); once it is `over`, that, and the line
    as it ended."""
    shown = line.blocks[0]["text"]["text"] if line.blocks and "text" in line.blocks[0] else line.text
    where = f"<{link}|Open the alert>" if link else f"the alert is in <#{episode.channel_id}>"
    after = f"{minutes:g} min"
    owner = episode.acked_by
    if over:
        by = f"; acknowledged by <@{owner}>" if owner else "; nobody acknowledged it"
        head = f":white_check_mark: *Escalated after {after} unacknowledged, now over*{by}"
        text = f"Escalated after {after} unacknowledged, now over{by}: {line.text}"
    elif owner:
        at = f" at {when(episode.acked_at, tz)}" if tz is not None and episode.acked_at else ""
        head = f":eyes: *Escalated after {after} unacknowledged* · Acknowledged by <@{owner}>{at}"
        text = f"Escalated after {after} unacknowledged, acknowledged by <@{owner}>{at}: {line.text}"
    else:
        who = " ".join(f"<@{user}>" for user in operators) or "(no operators are listed for this org)"
        head = f":rotating_light: *Not acknowledged after {after}* · {who}"
        text = f"Not acknowledged after {after}: {line.text} · {who}"  # the fallback notifies the operators too
    body: list[Block] = [section(head), section(f"{shown}\n{where}")]
    if Action.ACKNOWLEDGE in actions and not over and not owner:
        body.append(_buttons(episode, [Action.ACKNOWLEDGE]))
    return Reply(text=text[:3000], blocks=body, public=True)


class SlackAlerts:
    """The alert desk's presenter (bot.alerts.desk.AlertPresenter): each kind's, and the lines all share.
    `regions` (org id -> its AWS region) gives every alert its console links; `backends` (org, cluster ->
    backend, as the last sweep listed it: bot.monitor.idle.SeenBackends) those of alerts naming a cluster only."""

    def __init__(
        self,
        *,
        presenters: Mapping[str, KindPresenter] = PRESENTERS,
        regions: Mapping[str, str] | None = None,
        backends: Callable[[str, str], str | None] | None = None,
    ) -> None:
        self.presenters = presenters
        self.regions = dict(regions or {})
        self.backends = backends

    def alert(self, kind: AlertKind, view: AlertView) -> Reply:
        reply = self.presenters[kind.name].alert(view)
        row = view.first
        hint = self.backends(row.org_id, row.cluster_name) if self.backends else None
        return with_console_links(reply, view, region=self.regions.get(row.org_id), backend_hint=hint)

    def escalation(
        self, kind: AlertKind, view: AlertView, *, link: str | None, operators: Sequence[str], minutes: float
    ) -> Reply:
        line = self.presenters[kind.name].coordination(view, channel=view.first.channel_id)
        return escalation_message(
            line,
            view.first,
            link=link,
            operators=operators,
            minutes=minutes,
            actions=view.actions,
            over=all(row.state != "open" for row in view.rows),
            tz=view.tz,
        )

    def escalated(self, *, minutes: float, at: datetime, tz: ZoneInfo) -> Reply:
        """The line in the alert's thread when it escalated."""
        return thread_note(
            f":rotating_light: Nobody acknowledged this within {minutes:g} min: posted again in the coordination "
            f"channel at {when(at, tz)}, mentioning the org's operators."
        )

    def coordination(self, kind: AlertKind, view: AlertView, *, channel: str) -> Reply:
        return self.presenters[kind.name].coordination(view, channel=channel)

    def held_back(self, kind: AlertKind, row: Any, *, at: datetime, tz: ZoneInfo) -> Reply:
        return held_back_line(self.presenters[kind.name].held_back(row), row.message, at=at, tz=tz)

    def note(self, text: str, *, tone: Tone = Tone.NEWS) -> Reply:
        return thread_note(TONES[tone] + text)

    def acknowledged(self, user_id: str, *, at: datetime, tz: ZoneInfo) -> Reply:
        return thread_note(f":eyes: <@{user_id}> acknowledged this at {when(at, tz)}.")

    def silence_message(self, silence: Any, *, tz: ZoneInfo) -> Reply:
        return silence_message(silence, tz=tz)

    def silence_ended(self, silence: Any, *, user_id: str, at: datetime, tz: ZoneInfo) -> Reply:
        ref = f"{silence.org_id}/{silence.cluster_name}"
        return thread_note(
            f":loud_sound: <@{user_id}> ended the silence at {when(at, tz)}: new alerts of `{ref}` post again."
        )

    def continued(self, row: Any, *, link: str | None) -> Reply:
        where = f"<{link}|new alert>" if link else "a new alert in the channel"
        note = f":red_circle: `{row.node_ids[-1]}` failed again: `{row.status}` {row.message}".strip()
        return thread_note(f"{note} · continued in {where}")

    def throughput_chart(self, chart: ThroughputChart, *, tz: ZoneInfo) -> bytes:
        return charts.throughput_chart(
            title=chart.title,
            series=chart.series,
            baseline=chart.baseline,
            threshold=chart.threshold,
            bands=chart.bands,
            since=chart.since,
            until=chart.until,
            tz=tz,
            unit=chart.unit,
            zoom=chart.zoom,
        )

    def peer_chart(self, chart: PeerChart, *, tz: ZoneInfo) -> bytes:
        return charts.peer_chart(chart, tz=tz)


def nothing_changed(outcome: NothingChanged, *, tz: ZoneInfo) -> str:
    """Why pressing an alert's button changed nothing, for the one who pressed it."""
    if isinstance(outcome, AlreadyAcknowledged):
        return f"<@{outcome.by}> acknowledged this already, at {when(outcome.at, tz)}."
    if isinstance(outcome, AlreadySilenced):
        return (
            f"`{outcome.org_id}/{outcome.cluster_name}` is already silenced until {when(outcome.until, tz)} "
            f"by <@{outcome.by}>; nothing changed. Unsilence in that alert's thread ends it."
        )
    if isinstance(outcome, AlreadyEnded) and outcome.early:
        by = f" by <@{outcome.by}>" if outcome.by else ""
        return f"This silence already ended{by} at {when(outcome.at, tz)}; nothing changed."
    return f"This silence already ended at {when(outcome.at, tz)}, its set time; nothing changed."
