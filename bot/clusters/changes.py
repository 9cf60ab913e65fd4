"""Planning a cluster change: checked against the cluster, its backend and the org's quota, then proposed.

What a handler calls once it has parsed the command and knows who asks: each method returns what was
planned (and the operation proposed for it, unless a dry run), or raises `NotPlanned` saying why not and
how the answer is meant (bad input, a refusal, a problem). Nothing here speaks Slack; bot.slack.blocks
renders the plans.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol
from zoneinfo import ZoneInfo

from sqlalchemy.exc import IntegrityError

from bot.access import NOT_A_MEMBER
from bot.capacity.model import Reservation
from bot.capacity.service import CapacityService
from bot.clusters.backend import GroupNotFound
from bot.clusters.fleet import Fleet, OrgClusters, describe_error
from bot.clusters.held import back_on_start, held_instances
from bot.clusters.model import Backend, Cluster, FleetPhase, Node
from bot.clusters.pending import in_the_way
from bot.clusters.plans import LaunchPlan, PlanRefused, QuotaLine, ScalePlan, plan_launch, plan_scale, quota_lines
from bot.clusters.requests import (
    ChangeRequest,
    DeleteRequest,
    Kind,
    NodeRequest,
    ScaleRequest,
    StartFleetRequest,
    StopFleetRequest,
    to_json,
)
from bot.clusters.templates import COUNT, ParameterError, PriceTable, Template, TemplateSet, validate_cluster_name
from bot.config import ProgramConfig
from bot.iam.denied import AccessProblem
from storage.models import Operation, Outcome, utcnow


class Proposals(Protocol):
    """What planning needs of `bot.operations.Operations`, which runs the changes planned here and so sits
    above bot.clusters: store a proposed change, read one back, and the change running on a cluster."""

    async def propose(
        self,
        *,
        kind: Kind,
        org_id: str,
        backend: Backend,
        cluster_name: str,
        request: dict[str, Any],
        user_id: str,
        channel_id: str,
        template: str = "",
        operation_id: str | None = None,
    ) -> Operation: ...

    async def busy(self, *, org_id: str, backend: Backend, cluster_name: str) -> Operation | None: ...

    async def get(self, operation_id: str) -> Operation | None: ...

    async def pending(self, *, org_id: str, backend: Backend, cluster_name: str) -> list[Operation]: ...

    def expires_at(self, operation: Operation) -> datetime: ...

    def plan_lock(self, *, org_id: str, backend: Backend, cluster_name: str) -> asyncio.Lock: ...

    async def withdraw(self, operation_id: str, *, reason: str) -> bool: ...


class Shown(StrEnum):
    """How a reason a change was not planned is meant."""

    USAGE = "usage"  # the command was malformed: shown with its usage line
    REFUSAL = "refusal"  # not allowed
    PROBLEM = "problem"  # something is in the way (AWS, the backend, the cluster's state)


class NotPlanned(Exception):
    """Why no change was planned. `detail`: what the audit log records, when it is not the message."""

    def __init__(
        self,
        message: str,
        *,
        outcome: Outcome,
        shown: Shown,
        org_id: str | None,
        detail: str | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.outcome = outcome
        self.shown = shown
        self.org_id = org_id
        self.detail = message if detail is None else detail
        # What the reason is about, for the launch form to show it under its field: "template", "name",
        # "count" or a template parameter's name; None when it is about none of them.
        self.field = field


class ClusterBusy(Exception):
    """Another change of the cluster is running: one at a time, as AWS itself insists."""

    def __init__(self, running: Operation) -> None:
        super().__init__(running.id)
        self.running = running


class PlanPending(Exception):
    """A plan of the cluster waits for Confirm that a new one would make stale (bot.clusters.pending): that one
    stands, and nothing new is planned (no second Confirm button for the same thing)."""

    def __init__(self, pending: Operation, expires_at: datetime) -> None:
        super().__init__(pending.id)
        self.pending = pending
        self.expires_at = expires_at


@dataclass(frozen=True)
class LaunchPlanned:
    plan: LaunchPlan
    operation_id: str | None  # None for a dry run
    again: bool = False  # the request was proposed before (a retried form submission): nothing new stored


def request_operation_id(request_key: str) -> str:
    """The operation id of the change one request (a launch form's view id) proposes: the same for a retry."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"pitcrew:launch:{request_key}").hex


@dataclass(frozen=True)
class ScalePlanned:
    plan: ScalePlan
    operation_id: str | None


@dataclass(frozen=True)
class FleetStopOffered:
    """A resize the backend allows only with the compute fleet stopped: stopping it is what is proposed."""

    cluster: Cluster
    group: str
    count: int
    reasons: tuple[str, ...]
    operation_id: str | None


@dataclass(frozen=True)
class FleetStartPlanned:
    """Starting a stopped compute fleet: what comes back (its static nodes, by instance type) against quota."""

    cluster: Cluster
    back: Mapping[str, int]
    quota: tuple[QuotaLine, ...]
    operation_id: str | None  # None for a dry run


@dataclass(frozen=True)
class NodesPlanned:
    verb: str  # reboot or replace
    cluster: Cluster
    nodes: tuple[Node, ...]
    operation_id: str | None


@dataclass(frozen=True)
class DeletePlanned:
    cluster: Cluster
    operation_id: str


def _launch_field(
    template: Template, name: str, given: Mapping[str, str], count: int | None, clusters: Sequence[Cluster]
) -> str | None:
    """Which launch form field a refused launch plan is about (bot.clusters.plans says only why)."""
    if validate_cluster_name(name, template.backend) or any(cluster.name == name for cluster in clusters):
        return "name"
    try:
        template.resolve(given, count=count)
    except ParameterError as error:
        return error.field
    return COUNT  # over quota: fewer nodes is the way out


def node_request(cluster: Cluster, node_ids: Sequence[str]) -> NodeRequest:
    """Rebooting or replacing these nodes of the cluster, with what is needed to tell when it is done."""
    groups = sorted({node.group for node in cluster.nodes if node.node_id in set(node_ids)})
    return NodeRequest(
        node_ids=tuple(node_ids),
        groups=tuple(groups),
        before_ids=tuple(node.node_id for node in cluster.nodes if node.group in groups),
    )


def node_kind(verb: str) -> Kind:
    return Kind.REPLACE if verb == "replace" else Kind.REBOOT


@dataclass
class Changes:
    fleet: Fleet
    operations: Proposals  # bot.operations.Operations, given by the wiring
    program: ProgramConfig
    templates: TemplateSet
    capacity: CapacityService | None = None  # the plans' reserved-capacity line; none without it

    @property
    def prices(self) -> PriceTable:
        return self.templates.prices

    async def _reservations(self, org_id: str) -> list[Reservation] | None:
        """The org's reservations for a plan's line; None (no line) when they cannot be read now."""
        if self.capacity is None:
            return None
        try:
            return await self.capacity.reservations(org_id)
        except Exception as error:  # the plan goes ahead without the line
            logging.getLogger(__name__).warning("reserved capacity of %s: %s", org_id, describe_error(error))
            return None

    async def propose(
        self,
        kind: Kind,
        *,
        org_id: str,
        backend: Backend,
        cluster_name: str,
        request: ChangeRequest,
        user_id: str,
        channel_id: str,
        template: str = "",
    ) -> str:
        """Store the planned change (its request as `Operation.request` holds it); its operation id."""
        operation = await self.operations.propose(
            kind=kind,
            org_id=org_id,
            backend=backend,
            cluster_name=cluster_name,
            template=template,
            request=to_json(request),
            user_id=user_id,
            channel_id=channel_id,
        )
        return operation.id

    async def _propose_on(
        self, kind: Kind, cluster: Cluster, request: ChangeRequest, user_id: str, channel: str
    ) -> str:
        """Store the plan unless a pending plan of the cluster is in its way (PlanPending). Checked and stored
        under this replica's lock of the cluster; a plan another replica stored meanwhile is found after
        storing, and then the later of the two is withdrawn, so that one stands whichever replica looks."""
        node_ids = request.node_ids if isinstance(request, NodeRequest) else ()
        org_id, backend, name = cluster.org, cluster.backend, cluster.name
        async with self.operations.plan_lock(org_id=org_id, backend=backend, cluster_name=name):
            await self._none_in_the_way(kind, cluster, node_ids)
            operation_id = await self.propose(
                kind,
                org_id=org_id,
                backend=backend,
                cluster_name=name,
                request=request,
                user_id=user_id,
                channel_id=channel,
            )
        others = await self.operations.pending(org_id=org_id, backend=backend, cluster_name=name)
        earlier = in_the_way([o for o in others if o.id != operation_id], kind=kind, node_ids=node_ids)
        mine = await self.operations.get(operation_id)
        if earlier is None or mine is None or (mine.requested_at, mine.id) < (earlier.requested_at, earlier.id):
            return operation_id
        if await self.operations.withdraw(operation_id, reason=f"planned at once with {earlier.id}, which stands"):
            raise PlanPending(earlier, self.operations.expires_at(earlier))
        return operation_id

    async def _none_in_the_way(self, kind: Kind, cluster: Cluster, node_ids: Sequence[str] = ()) -> None:
        """PlanPending when a pending plan of the cluster covers what a new plan of `kind` would."""
        pending = await self.operations.pending(org_id=cluster.org, backend=cluster.backend, cluster_name=cluster.name)
        earlier = in_the_way(pending, kind=kind, node_ids=node_ids)
        if earlier is not None:
            raise PlanPending(earlier, self.operations.expires_at(earlier))

    async def check_changeable(self, cluster: Cluster) -> None:
        """NotPlanned when the cluster's backend makes no changes; ClusterBusy when a change is running."""
        capabilities = await self.fleet.capabilities(cluster.org, cluster.backend)
        if not capabilities.changes:
            why = capabilities.why_not
            raise NotPlanned(why, outcome=Outcome.REFUSED, shown=Shown.REFUSAL, org_id=cluster.org)
        busy = await self.operations.busy(org_id=cluster.org, backend=cluster.backend, cluster_name=cluster.name)
        if busy is not None:
            raise ClusterBusy(busy)

    async def launch(
        self,
        *,
        org_id: str,
        template_id: str,
        name: str,
        params: Mapping[str, Any],
        count: int | None,
        dry_run: bool,
        user_id: str,
        channel_id: str,
        request_key: str | None = None,
    ) -> LaunchPlanned:
        """The launch plan of `template_id` for the org: `params` (`--param`) over the org's launch defaults
        (`orgs[].launch`) over the template's. `request_key`: the request proposing it (the launch form's
        view id), so that a retried request proposes one change, not two."""
        org = self.program.org(org_id)
        if org is None:  # visible, so in the program: only a program file changed under us gets here
            raise NotPlanned(
                NOT_A_MEMBER,
                outcome=Outcome.REFUSED,
                shown=Shown.REFUSAL,
                org_id=org_id,
                detail="org not in the program",
            )
        template = self.templates.get(template_id)
        if template is None:
            known = ", ".join(f"`{t}`" for t in self.templates.ids)
            message = f"There is no template `{template_id}`; the templates are {known}."
            raise NotPlanned(message, outcome=Outcome.INVALID, shown=Shown.USAGE, org_id=org_id, field="template")
        try:
            given = template.with_defaults(params, org.launch, count=count)
        except ParameterError as error:
            raise NotPlanned(
                error.message, outcome=Outcome.INVALID, shown=Shown.USAGE, org_id=org_id, field=error.field
            ) from None
        operation_id = request_operation_id(request_key) if request_key and not dry_run else None
        if operation_id is not None and (earlier := await self.operations.get(operation_id)) is not None:
            return await self._proposed_before(earlier, template, org_id, name, given, count)
        capabilities = await self.fleet.capabilities(org_id, Backend(template.backend))
        if not capabilities.changes:
            raise NotPlanned(capabilities.why_not, outcome=Outcome.REFUSED, shown=Shown.REFUSAL, org_id=org_id)
        (listing,) = await self.fleet.list_orgs([org_id])
        if listing.errors:
            # Quota cannot be checked without knowing what the org holds: say so rather than guess.
            reason = "Cannot check the quota: " + "; ".join(listing.errors)
            raise NotPlanned(reason, outcome=Outcome.FAILED, shown=Shown.PROBLEM, org_id=org_id)
        try:
            plan = plan_launch(
                template,
                org=org,
                name=name,
                given=given,
                count=count,
                clusters=listing.clusters,
                prices=self.prices,
                reservations=await self._reservations(org_id),
                now=utcnow(),
                tz=ZoneInfo(self.program.timezone),
            )
        except PlanRefused as refused:
            field = _launch_field(template, name, given, count, listing.clusters)
            if refused.bad_input:
                raise NotPlanned(
                    str(refused), outcome=Outcome.INVALID, shown=Shown.USAGE, org_id=org_id, field=field
                ) from None
            raise NotPlanned(
                str(refused), outcome=Outcome.REFUSED, shown=Shown.REFUSAL, org_id=org_id, field=field
            ) from None
        if dry_run:
            return LaunchPlanned(plan, None)
        try:
            proposed = await self.operations.propose(
                kind=Kind.LAUNCH,
                org_id=org_id,
                backend=Backend(template.backend),
                cluster_name=plan.name,
                template=template.key,
                request=to_json(plan.launch_request),
                user_id=user_id,
                channel_id=channel_id,
                operation_id=operation_id,
            )
        except IntegrityError:  # the same request proposed meanwhile (another replica): that one stands
            earlier = await self.operations.get(operation_id or "")
            if earlier is None:
                raise
            return LaunchPlanned(plan, earlier.id, again=True)
        return LaunchPlanned(plan, proposed.id)

    async def _proposed_before(
        self,
        earlier: Operation,
        template: Template,
        org_id: str,
        name: str,
        given: Mapping[str, str],
        count: int | None,
    ) -> LaunchPlanned:
        """A request proposed already: its plan, read again for showing (its operation is the one it made)."""
        org = self.program.org(org_id)
        assert org is not None  # checked by the caller
        plan = plan_launch(
            template,
            org=org,
            name=name,
            given=given,
            count=count,
            clusters=[],  # the planned cluster is not in AWS yet, nor is the quota checked again
            prices=self.prices,
        )
        return LaunchPlanned(plan, earlier.id, again=True)

    async def scale(
        self, cluster: Cluster, *, group: str, count: int, dry_run: bool, user_id: str, channel_id: str
    ) -> ScalePlanned | FleetStopOffered:
        """A cluster already checked by check_changeable: its group set to `count` nodes."""
        capabilities = await self.fleet.capabilities(cluster.org, cluster.backend)
        # The org's whole listing is needed only to check the quota of a growing group; where the current
        # count is known only from AWS's dry run (ParallelCluster's configuration), it is fetched alongside it.
        listing_task: asyncio.Task[list[OrgClusters]] | None = None
        if capabilities.dry_run_resize:
            listing_task = asyncio.create_task(self.fleet.list_orgs([cluster.org]))
        try:
            resize = await self.fleet.plan_resize(cluster, group=group, count=count)
        except Exception as error:
            if listing_task is not None:
                await listing_task  # not cancelled: a listing in flight may be shared with another command
            if isinstance(error, GroupNotFound):
                raise NotPlanned(str(error), outcome=Outcome.INVALID, shown=Shown.USAGE, org_id=cluster.org) from None
            reason = describe_error(error)
            raise NotPlanned(
                f"Could not read `{cluster.ref}`'s configuration: {reason}",
                outcome=Outcome.FAILED,
                shown=Shown.PROBLEM,
                org_id=cluster.org,
                detail=reason,
            ) from None
        held: list[Cluster] = []
        if count > resize.before or listing_task is not None:
            (listing,) = await (listing_task or self.fleet.list_orgs([cluster.org]))
            if listing.errors and count > resize.before:
                reason = "Cannot check the quota: " + "; ".join(listing.errors)
                raise NotPlanned(reason, outcome=Outcome.FAILED, shown=Shown.PROBLEM, org_id=cluster.org)
            held = listing.clusters
        org = self.program.org(cluster.org)
        if org is None:  # found in AWS but gone from the program file since the listing
            raise NotPlanned(
                NOT_A_MEMBER,
                outcome=Outcome.REFUSED,
                shown=Shown.REFUSAL,
                org_id=cluster.org,
                detail="org not in the program",
            )
        try:
            plan = plan_scale(
                org=org,
                cluster=cluster,
                group=group,
                instance_type=resize.instance_type,
                before=resize.before,
                after=count,
                clusters=held,
                prices=self.prices,
                change_set=resize.change_set,
                reservations=await self._reservations(cluster.org) if count > resize.before else None,
                now=utcnow(),
                tz=ZoneInfo(self.program.timezone),
            )
        except PlanRefused as refused:
            raise NotPlanned(str(refused), outcome=Outcome.REFUSED, shown=Shown.REFUSAL, org_id=cluster.org) from None
        if resize.objection is not None:
            if not resize.needs_fleet_stop:
                reason = describe_error(resize.objection)
                said = (
                    reason
                    if isinstance(resize.objection, AccessProblem)
                    else f"{cluster.backend.label} refused the change: {reason}"
                )
                raise NotPlanned(
                    said,
                    outcome=Outcome.REFUSED,
                    shown=Shown.PROBLEM,
                    org_id=cluster.org,
                    detail=reason,
                )
            stop_id = None
            if not dry_run:
                then = StopFleetRequest(then=f"/cluster scale {cluster.name} {group} {count}")
                stop_id = await self._propose_on(Kind.STOP_FLEET, cluster, then, user_id, channel_id)
            return FleetStopOffered(cluster, group, count, resize.reasons, stop_id)
        if dry_run:
            return ScalePlanned(plan, None)
        request = ScaleRequest(group=group, count=count, before=resize.before, instance_type=resize.instance_type)
        return ScalePlanned(plan, await self._propose_on(Kind.SCALE, cluster, request, user_id, channel_id))

    async def nodes(
        self, cluster: Cluster, *, verb: str, node_ids: Sequence[str], dry_run: bool, user_id: str, channel_id: str
    ) -> NodesPlanned:
        """A cluster already checked by check_changeable: reboot or replace some of its nodes."""
        capabilities = await self.fleet.capabilities(cluster.org, cluster.backend)
        if not capabilities.node_actions:
            reason = f"`/cluster {verb}` acts on HyperPod nodes; `{cluster.ref}` {capabilities.why_no_node_actions}"
            raise NotPlanned(reason, outcome=Outcome.INVALID, shown=Shown.PROBLEM, org_id=cluster.org)
        by_id = {node.node_id: node for node in cluster.nodes}
        unknown = [node_id for node_id in node_ids if node_id not in by_id]
        if unknown:
            listed = ", ".join(f"`{node_id}`" for node_id in unknown[:5])
            message = (
                f"{listed} {'is not a node' if len(unknown) == 1 else 'are not nodes'} of `{cluster.ref}`; "
                f"`/cluster nodes {cluster.name}` lists them."
            )
            raise NotPlanned(message, outcome=Outcome.INVALID, shown=Shown.USAGE, org_id=cluster.org)
        selected = tuple(by_id[node_id] for node_id in node_ids)
        if dry_run:
            return NodesPlanned(verb, cluster, selected, None)
        request = node_request(cluster, node_ids)
        operation_id = await self._propose_on(node_kind(verb), cluster, request, user_id, channel_id)
        return NodesPlanned(verb, cluster, selected, operation_id)

    async def node_from_alert(
        self,
        *,
        org_id: str,
        backend: Backend,
        cluster_name: str,
        node_id: str,
        verb: str,
        user_id: str,
        channel_id: str,
    ) -> NodesPlanned:
        """An alert's Replace node / Reboot node button: the same plan as `/cluster replace|reboot`, read fresh.

        NotPlanned (a problem) when the cluster cannot be read or the node is gone (or on its way out);
        ClusterBusy when a change is running; PlanPending when a plan for the node waits for Confirm."""
        try:
            cluster = await self.fleet.get(org_id, backend, cluster_name)
        except Exception as error:
            message = f"Could not read `{org_id}/{cluster_name}`: {describe_error(error)}"
            raise NotPlanned(message, outcome=Outcome.FAILED, shown=Shown.PROBLEM, org_id=org_id) from None
        node = next((n for n in cluster.nodes if n.node_id == node_id), None) if cluster else None
        if cluster is None or node is None or node.leaving:
            message = f"`{node_id}` is no longer in `{org_id}/{cluster_name}`; nothing to {verb}."
            raise NotPlanned(message, outcome=Outcome.INVALID, shown=Shown.PROBLEM, org_id=org_id)
        busy = await self.operations.busy(org_id=cluster.org, backend=cluster.backend, cluster_name=cluster.name)
        if busy is not None:
            raise ClusterBusy(busy)
        operation_id = await self._propose_on(
            node_kind(verb), cluster, node_request(cluster, [node_id]), user_id, channel_id
        )
        return NodesPlanned(verb, cluster, (node,), operation_id)

    async def start_fleet(self, cluster: Cluster, *, dry_run: bool, user_id: str, channel_id: str) -> FleetStartPlanned:
        """A cluster already checked by check_changeable: its stopped compute fleet started again. A stopped fleet
        holds nothing, so what starting brings back (bot.clusters.held.back_on_start) is checked against quota."""
        capabilities = await self.fleet.capabilities(cluster.org, cluster.backend)
        if not capabilities.fleet or cluster.fleet is FleetPhase.NONE:
            reason = f"`{cluster.ref}` has no compute fleet to start: only ParallelCluster clusters have one."
            raise NotPlanned(reason, outcome=Outcome.INVALID, shown=Shown.PROBLEM, org_id=cluster.org)
        word = cluster.extra.get("compute_fleet", "")
        if cluster.fleet is FleetPhase.RUNNING:
            reason = f"The compute fleet of `{cluster.ref}` is not stopped (`{word}`): nothing to start."
            raise NotPlanned(reason, outcome=Outcome.INVALID, shown=Shown.PROBLEM, org_id=cluster.org)
        if cluster.fleet is FleetPhase.STOPPING:
            reason = f"The compute fleet of `{cluster.ref}` is still stopping (`{word}`): start it once it is stopped."
            raise NotPlanned(reason, outcome=Outcome.INVALID, shown=Shown.PROBLEM, org_id=cluster.org)
        org = self.program.org(cluster.org)
        if org is None:  # found in AWS but gone from the program file since the listing
            raise NotPlanned(
                NOT_A_MEMBER,
                outcome=Outcome.REFUSED,
                shown=Shown.REFUSAL,
                org_id=cluster.org,
                detail="org not in the program",
            )
        back = back_on_start(cluster)
        (listing,) = await self.fleet.list_orgs([cluster.org])
        if listing.errors and back:
            reason = "Cannot check the quota: " + "; ".join(listing.errors)
            raise NotPlanned(reason, outcome=Outcome.FAILED, shown=Shown.PROBLEM, org_id=cluster.org)
        # The cluster as just read stands for its listed copy (a listing may be some seconds old).
        others = [c for c in listing.clusters if (c.backend, c.name) != (cluster.backend, cluster.name)]
        quota = quota_lines(org, held=held_instances([*others, cluster]), requested=back)
        over = [line for line in quota if line.over]
        if over:
            said = "; ".join(
                f"{line.instance_type}: held {line.held}, requested {line.requested} more, {line.allowed_text}"
                for line in over
            )
            reason = (
                f"Over quota: {said}. Starting the compute fleet of `{cluster.ref}` brings its static nodes back; "
                "scale its queues down first (`/cluster scale`), or ask a program admin to raise the quota."
            )
            raise NotPlanned(reason, outcome=Outcome.REFUSED, shown=Shown.REFUSAL, org_id=cluster.org)
        if dry_run:
            return FleetStartPlanned(cluster, back, quota, None)
        operation_id = await self._propose_on(Kind.START_FLEET, cluster, StartFleetRequest(), user_id, channel_id)
        return FleetStartPlanned(cluster, back, quota, operation_id)

    async def delete(self, cluster: Cluster, *, user_id: str, channel_id: str) -> DeletePlanned:
        """A cluster already checked by check_changeable: its delete, confirmed later by typing its name."""
        return DeletePlanned(
            cluster, await self._propose_on(Kind.DELETE, cluster, DeleteRequest(), user_id, channel_id)
        )
