"""Which changes wait for approval (the program file's `approvals:` block) and why, in words. Pure.

One function reads a planned change as it is stored (an Operation's kind and request), so the plan's button and
the Confirm gate can never disagree: what the plan said needs approval is what Confirm refuses to run without it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from bot.clusters.requests import Kind
from bot.clusters.templates import PriceTable, estimated_cost
from bot.config import ApprovalsConfig


@dataclass(frozen=True)
class Needed:
    """Why a change needs approval: the rule (its key in `approvals:`) and the figure against it."""

    rule: str
    why: str  # "estimated $21,000/day > $5,000"


def launch_groups(request: Mapping[str, Any]) -> list[tuple[str, int]]:
    """(instance type, nodes) per group of a stored launch request: HyperPod's InstanceGroups, or ParallelCluster's
    head node and static compute resources (MinCount) from its YAML. Malformed parts count as nothing."""
    groups: list[tuple[str, int]] = []
    for group in request.get("InstanceGroups") or []:
        if isinstance(group, dict) and isinstance(group.get("InstanceCount"), int):
            groups.append((str(group.get("InstanceType") or ""), int(group["InstanceCount"])))
    configuration = request.get("clusterConfiguration")
    if isinstance(configuration, str) and configuration:
        try:
            config = yaml.safe_load(configuration) or {}
        except yaml.YAMLError:
            config = {}
        if isinstance(config, dict):
            head = (config.get("HeadNode") or {}).get("InstanceType")
            if head:
                groups.append((str(head), 1))
            for queue in (config.get("Scheduling") or {}).get("SlurmQueues") or []:
                for resource in (queue or {}).get("ComputeResources") or []:
                    count = (resource or {}).get("MinCount")
                    if isinstance(count, int):
                        groups.append((str(resource.get("InstanceType") or ""), count))
    return groups


def _usd(amount: float) -> str:
    return f"${amount:,.0f}"


def needed(
    rules: ApprovalsConfig | None, *, kind: str, request: Mapping[str, Any], prices: PriceTable
) -> Needed | None:
    """The first rule a change meets, or None: it needs no approval."""
    if rules is None:
        return None
    if kind == Kind.DELETE.value and rules.delete:
        return Needed("delete", "every cluster delete needs approval")
    if kind == Kind.LAUNCH.value:
        groups = launch_groups(request)
        if rules.launch_over_usd_per_day is not None:
            instances: Counter[str] = Counter()
            for instance_type, count in groups:
                instances[instance_type] += count
            cost = estimated_cost(prices, instances)
            if cost is not None and cost[1] > rules.launch_over_usd_per_day:
                return Needed(
                    "launch_over_usd_per_day",
                    f"estimated {_usd(cost[1])}/day > {_usd(rules.launch_over_usd_per_day)}",
                )
        if rules.nodes_over is not None:
            biggest = max((count for _, count in groups), default=0)
            if biggest > rules.nodes_over:
                return Needed("nodes_over", f"{biggest} nodes in one group > {rules.nodes_over}")
    if kind == Kind.SCALE.value and rules.nodes_over is not None:
        target = request.get("count")
        if isinstance(target, int) and target > rules.nodes_over:
            return Needed("nodes_over", f"{target} nodes in one group > {rules.nodes_over}")
    if kind in (Kind.REPLACE.value, Kind.REBOOT.value) and rules.replace_or_reboot_over is not None:
        nodes = request.get("node_ids")
        many = len(nodes) if isinstance(nodes, list) else 0
        if many > rules.replace_or_reboot_over:
            return Needed("replace_or_reboot_over", f"{kind} of {many} nodes at once > {rules.replace_or_reboot_over}")
    return None


def may_approve(*, approvers: str, admin: bool, role: str | None) -> bool:
    """Whether someone is among a request's approvers (`approvers: admins | operators`): program admins always;
    operators of the change's org when `operators`. The requester is refused apart (bot.approvals.state)."""
    return admin or (approvers == "operators" and role == "operator")
