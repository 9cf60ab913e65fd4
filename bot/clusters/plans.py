"""Launch plans: what a template would create for an org, checked against its quota and its clusters. Pure.

A plan holds the exact request (HyperPod create_cluster kwargs, or the ParallelCluster cluster YAML), the
instances per type with the quota before and after, and the estimated cost. Nothing here calls AWS: the
org's current clusters are passed in.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import yaml

from bot.capacity.model import Reservation
from bot.clusters.held import held_instances
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

RESERVATION_HORIZON = timedelta(days=7)  # a reservation ending sooner than this is warned of


@dataclass(frozen=True)
class ReservationLine:
    """Where `requested` nodes of one instance type would come from: a reservation the request uses (`used`),
    one of the org's it could use but does not name (`used` False), or none (`reservation` None: On-Demand)."""

    instance_type: str
    requested: int
    reservation: Reservation | None
    used: bool
    now: datetime
    horizon: timedelta
    tz: ZoneInfo  # the program's, for the end time

    @property
    def supplied(self) -> int:
        """How many of the requested nodes the reservation would supply (all, where AWS does not say)."""
        if self.reservation is None or not self.used:
            return 0
        available = self.reservation.available
        return self.requested if available is None else min(self.requested, max(0, available))

    @property
    def short(self) -> int:
        """Requested nodes a used reservation cannot supply (it has fewer available)."""
        return self.requested - self.supplied if self.used else 0

    @property
    def ends_before_horizon(self) -> bool:
        end = self.reservation.end if self.reservation else None
        return self.used and end is not None and end < self.now + self.horizon


def _serves(reservation: Reservation, backend: Backend | None) -> bool:
    """HyperPod draws on training plans, ParallelCluster (EC2) on capacity reservations and Capacity Blocks."""
    if backend is None:
        return True
    return (reservation.source == "training_plan") == (backend is Backend.HYPERPOD)


def _requested_targets(request: Mapping[str, Any] | None, cluster_yaml: str | None) -> set[str]:
    """The reservations a launch request names: HyperPod groups' TrainingPlanArn, ParallelCluster compute
    resources' CapacityReservationTarget.CapacityReservationId."""
    named: set[str] = set()
    for group in (request or {}).get("InstanceGroups", []) or []:
        if group.get("TrainingPlanArn"):
            named.add(str(group["TrainingPlanArn"]))
    try:
        config = yaml.safe_load(cluster_yaml or "") or {}
    except yaml.YAMLError:
        config = {}
    if isinstance(config, dict):
        for queue in (config.get("Scheduling") or {}).get("SlurmQueues") or []:
            for resource in queue.get("ComputeResources") or []:
                target = (resource.get("CapacityReservationTarget") or {}).get("CapacityReservationId")
                if target:
                    named.add(str(target))
    return named


def reservation_lines(
    requested: Mapping[str, int],
    *,
    reservations: Sequence[Reservation],
    named: set[str] | frozenset[str],
    now: datetime,
    tz: ZoneInfo,
    horizon: timedelta = RESERVATION_HORIZON,
    limited: Iterable[str] | None = None,
    backend: Backend | None = None,
) -> tuple[ReservationLine, ...]:
    """One line per requested instance type that the org's quota limits (`limited`: the accelerators; every
    type when None): the named reservation of that type, else the org's soonest-ending live one it could use,
    else none."""
    kept = None if limited is None else {normalize_instance_type(t) for t in limited}
    lines = []
    for instance_type, count in sorted(requested.items()):
        if count <= 0 or (kept is not None and normalize_instance_type(instance_type) not in kept):
            continue
        fitting = [
            r for r in reservations if r.fits(instance_type) and (r.end is None or r.end > now) and _serves(r, backend)
        ]
        used = next((r for r in fitting if r.id in named), None)
        other = next((r for r in fitting if r.available is None or r.available > 0), None)
        lines.append(
            ReservationLine(
                instance_type=normalize_instance_type(instance_type),
                requested=count,
                reservation=used or other,
                used=used is not None,
                now=now,
                horizon=horizon,
                tz=tz,
            )
        )
    return tuple(lines)


def scale_reservation_lines(
    *,
    cluster: Cluster,
    group: str,
    instance_type: str,
    more: int,
    reservations: Sequence[Reservation],
    now: datetime,
    tz: ZoneInfo,
    horizon: timedelta = RESERVATION_HORIZON,
) -> tuple[ReservationLine, ...]:
    """Growing a group by `more`: the reservation its nodes already come from (the group, or its queue, among
    the reservation's clusters), else as for a launch with nothing named."""
    queue = group.split("/", 1)[0]
    named = {
        r.id
        for r in reservations
        if any(name == cluster.name and g.split("/", 1)[0] in (group, queue) for name, g, _ in r.clusters)
    }
    return reservation_lines(
        {instance_type: more},
        reservations=reservations,
        named=named,
        now=now,
        tz=tz,
        horizon=horizon,
        backend=cluster.backend,
    )


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
    listed: bool = True  # False: an accelerator the org's quota does not list (allowed 0)

    @property
    def allowed_text(self) -> str:
        """`allowed 16`, or for a type the quota does not list `allowed 0 (not in the org's quota)`."""
        return f"allowed {self.allowed}" + ("" if self.listed else " (not in the org's quota)")

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
    reservations: tuple[ReservationLine, ...] = ()  # where the accelerator nodes would come from

    @property
    def launch_request(self) -> LaunchRequest:
        return LaunchRequest(name=self.name, create_cluster=self.request, configuration=self.cluster_yaml)


def quota_lines(org: OrgConfig, *, held: Mapping[str, int], requested: Mapping[str, int]) -> tuple[QuotaLine, ...]:
    wanted: Counter[str] = Counter()
    for instance_type, count in requested.items():
        wanted[normalize_instance_type(instance_type)] += count
    return tuple(
        QuotaLine(
            instance_type=t,
            held=held.get(t, 0),
            requested=n,
            allowed=org.quota_for(t),
            listed=org.quota_lists(t) or org.quota_for(t) is None,
        )
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
    reservations: Sequence[Reservation] | None = None,
    now: datetime | None = None,
    tz: ZoneInfo | None = None,
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
                f"{line.instance_type}: held {line.held}, requested {line.requested}, {line.allowed_text}"
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
    lines: tuple[ReservationLine, ...] = ()
    if reservations is not None and now is not None:  # None: reserved capacity could not be read
        lines = reservation_lines(
            instances,
            reservations=reservations,
            named=_requested_targets(request, cluster_yaml),
            now=now,
            tz=tz or ZoneInfo("UTC"),
            limited=[line.instance_type for line in quota if line.allowed is not None],
            backend=backend,
        )
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
        reservations=lines,
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
    reservations: tuple[ReservationLine, ...] = ()  # where the new nodes would come from (growing only)

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
    reservations: Sequence[Reservation] | None = None,
    now: datetime | None = None,
    tz: ZoneInfo | None = None,
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
                f"Over quota: {line.instance_type}: held {line.held}, requested {line.requested} more, "
                f"{line.allowed_text}. Ask for fewer nodes, or ask a program admin to raise the quota."
            )
    price = prices.price_per_hour(instance_type)
    lines: tuple[ReservationLine, ...] = ()
    if after > before and reservations is not None and now is not None:
        lines = scale_reservation_lines(
            cluster=cluster,
            group=group,
            instance_type=instance_type,
            more=after - before,
            reservations=reservations,
            now=now,
            tz=tz or ZoneInfo("UTC"),
        )
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
        reservations=lines,
    )
