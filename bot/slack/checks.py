"""Block Kit of a deep health check's plan (bot.clusters.checks): the nodes, the checks and what they do, then
Confirm. Its progress message is every change's (bot.slack.blocks.operation_progress)."""

from __future__ import annotations

from bot.clusters.checks import CheckPlanned
from bot.slack.blocks import (
    Block,
    Reply,
    _decide_context,
    context,
    escape,
    fit,
    header,
    plan_buttons,
    section,
    sections,
)

CHECK_WORDS = {
    "InstanceStress": "`InstanceStress`: the accelerators and memory under load (GPU: DCGM diagnostics; "
    "Trainium: the Neuron hardware tests)",
    "InstanceConnectivity": "`InstanceConnectivity`: the EFA network between the nodes (NCCL / collective tests)",
}


def check_plan(planned: CheckPlanned) -> Reply:
    cluster, nodes = planned.cluster, planned.nodes
    count = f"{len(nodes)} node{'s' if len(nodes) != 1 else ''}"
    lines = [f"`{n.node_id}` · {escape(n.group)} · {n.instance_type} · {n.status}" for n in nodes]
    body: list[Block] = [
        header(f"Plan: deep health check of {count} of {cluster.name}"),
        section(f"Run HyperPod's deep health checks on these nodes of `{cluster.ref}` (StartClusterHealthCheck):"),
        *sections(lines),
        section("*Checks*\n" + "\n".join(CHECK_WORDS.get(c, f"`{c}`") for c in planned.checks)),
        section(
            "While it runs a node is `DeepHealthCheckInProgress` and takes no job; it comes back `Running` if it "
            "passes, or in `Failure` with what failed. The node's alerts follow it and say the result."
        ),
    ]
    if planned.operation_id is None:
        body.append(context("Dry run: nothing was changed."))
    else:
        body += [plan_buttons(planned.operation_id, confirm="Confirm deep health check"), _decide_context()]
    text = f"Plan: deep health check ({', '.join(planned.checks)}) of {count} of {cluster.ref}: " + ", ".join(
        n.node_id for n in nodes
    )
    return Reply(
        text=text,
        blocks=fit(body, overflow="{hidden} more blocks of nodes not shown"),
        public=planned.operation_id is not None,
    )
