"""Launch plans: what a template would create for an org, checked against its quota and its clusters. Pure.

A plan holds the exact request (HyperPod create_cluster kwargs, or the ParallelCluster cluster YAML), the
instances per type with the quota before and after, and the estimated cost. Nothing here calls AWS: the
org's current clusters are passed in.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.clusters.model import Backend, Cluster
from bot.clusters.requests import LaunchRequest
from bot.clusters.templates import (
    ParameterError,
    PriceTable,
    Template,
    estimated_cost,
    render_hyperpod_request,
    render_pcluster_config,
    validate_cluster_name,
)
from bot.config import OrgConfig, normalize_instance_type


class PlanRefused(Exception):
    """The launch cannot go ahead; the message says why and what to do instead. `bad_input`: the request
    itself was malformed (a name or parameter), so the answer carries the usage line."""

    def __init__(self, message: str, *, bad_input: bool = False) -> None:
        super().__init__(message)
        self.bad_input = bad_input


@dataclass(frozen=True)
class QuotaLine:
    instance_type: str  # without the ml. prefix: both backends count against one quota
    held: int
    requested: int
    allowed: int | None  # None: not limited (controller, head and login nodes)

    @property
    def after(self) -> int:
        return self.held + self.requested

    @property
    def over(self) -> bool:
        return self.allowed is not None and self.after > self.allowed


@dataclass(frozen=True)
class LaunchPlan:
    template: Template
    org: OrgConfig
    name: str
    params: Mapping[str, Any]
    instances: Mapping[str, int]
    quota: tuple[QuotaLine, ...]
    cost: tuple[float, float] | None  # per hour, per day
    unconfirmed_prices: tuple[str, ...]  # instance types whose price the table could not confirm
    request: dict[str, Any] | None  # HyperPod create_cluster kwargs
    cluster_yaml: str | None  # ParallelCluster clusterConfiguration

    @property
    def launch_request(self) -> LaunchRequest:
        return LaunchRequest(name=self.name, create_cluster=self.request, configuration=self.cluster_yaml)


def held_instances(clusters: Iterable[Cluster]) -> Counter[str]:
    """Instances an org holds or has asked for, per type without the ml. prefix, across both backends.

    A group counts the larger of its nodes and its target: a cluster still being created (target 10, no
    nodes yet), a scale under way, or a stopped ParallelCluster fleet (its MinCount comes back on start)
    hold their quota, or two requests could each fit and together exceed it."""
    held: Counter[str] = Counter()
    for cluster in clusters:
        counted: Counter[tuple[str, str]] = Counter(
            (node.group, normalize_instance_type(node.instance_type)) for node in cluster.nodes if not node.leaving
        )
        for group in cluster.groups:
            if group.target is not None:
                key = (group.name, normalize_instance_type(group.instance_type))
                counted[key] = max(counted[key], group.target)
        for (_, instance_type), count in counted.items():
            held[instance_type] += count
    return held


def quota_lines(org: OrgConfig, *, held: Mapping[str, int], requested: Mapping[str, int]) -> tuple[QuotaLine, ...]:
    wanted: Counter[str] = Counter()
    for instance_type, count in requested.items():
        wanted[normalize_instance_type(instance_type)] += count
    return tuple(
        QuotaLine(instance_type=t, held=held.get(t, 0), requested=n, allowed=org.quota_for(t))
        for t, n in sorted(wanted.items())
    )


def plan_launch(
    template: Template,
    *,
    org: OrgConfig,
    name: str,
    given: Mapping[str, str],
    count: int | None,
    clusters: Sequence[Cluster],
    prices: PriceTable,
) -> LaunchPlan:
    """The plan, or PlanRefused (bad name, name in use, bad parameters, over quota) with the numbers."""
    problem = validate_cluster_name(name, template.backend)
    if problem:
        raise PlanRefused(problem, bad_input=True)
    backend = Backend(template.backend)
    taken = next((c for c in clusters if c.name == name), None)
    if taken is not None:  # on either backend: ORG/NAME must name one cluster
        raise PlanRefused(
            f"`{org.id}` already has a {taken.backend.label} cluster named `{name}`; choose another name."
        )
    try:
        params = template.resolve(given, count=count)
    except ParameterError as error:
        raise PlanRefused(error.message, bad_input=True) from None
    instances = template.instances(params)
    quota = quota_lines(org, held=held_instances(clusters), requested=instances)
    over = [line for line in quota if line.over]
    if over:
        raise PlanRefused(
            "Over quota: "
            + "; ".join(
                f"{line.instance_type}: held {line.held}, requested {line.requested}, allowed {line.allowed}"
                for line in over
            )
            + ". Ask for fewer nodes (--count), or ask a program admin to raise the quota."
        )
    request = cluster_yaml = None
    if backend is Backend.HYPERPOD:
        request = render_hyperpod_request(template, name=name, org_id=org.id, params=params)
    else:
        cluster_yaml = render_pcluster_config(template, name=name, org_id=org.id, region=org.aws.region, params=params)
    unconfirmed = tuple(t for t in instances if (entry := prices.entry(t)) is not None and not entry.confirmed)
    return LaunchPlan(
        template=template,
        org=org,
        name=name,
        params=params,
        instances=instances,
        quota=quota,
        cost=estimated_cost(prices, instances),
        unconfirmed_prices=unconfirmed,
        request=request,
        cluster_yaml=cluster_yaml,
    )


@dataclass(frozen=True)
class ScalePlan:
    org: OrgConfig
    cluster: Cluster
    group: str  # as the user named it: an instance group, a queue, or QUEUE/RESOURCE
    instance_type: str
    before: int  # the group's target count now
    after: int
    quota: tuple[QuotaLine, ...]  # only when growing: shrinking never needs quota
    cost_change: float | None  # USD per hour, negative when shrinking; None when the type has no price
    change_set: tuple[str, ...] = ()  # ParallelCluster's dry-run change set, one line per parameter

    @property
    def growing(self) -> bool:
        return self.after > self.before


def plan_scale(
    *,
    org: OrgConfig,
    cluster: Cluster,
    group: str,
    instance_type: str,
    before: int,
    after: int,
    clusters: Sequence[Cluster],
    prices: PriceTable,
    change_set: Sequence[str] = (),
) -> ScalePlan:
    """The plan, or PlanRefused: nothing to change, or growing past the org's quota (with the numbers)."""
    if after == before:
        raise PlanRefused(f"`{group}` of `{cluster.name}` is already set to {before} nodes; nothing to change.")
    quota: tuple[QuotaLine, ...] = ()
    if after > before:
        quota = quota_lines(org, held=held_instances(clusters), requested={instance_type: after - before})
        over = [line for line in quota if line.over]
        if over:
            line = over[0]
            raise PlanRefused(
                f"Over quota: {line.instance_type}: held {line.held}, requested {line.requested} more, allowed "
                f"{line.allowed}. Ask for fewer nodes, or ask a program admin to raise the quota."
            )
    price = prices.price_per_hour(instance_type)
    return ScalePlan(
        org=org,
        cluster=cluster,
        group=group,
        instance_type=instance_type,
        before=before,
        after=after,
        quota=quota,
        cost_change=None if price is None else price * (after - before),
        change_set=tuple(change_set),
    )
