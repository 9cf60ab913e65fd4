"""Plans that the world has moved past: a second plan for what a pending plan already covers, and a plan whose
nodes left before it was confirmed. Pure.

Confirming one of two plans for the same node makes the other stale: its request names an instance that is
gone by then, and AWS refuses it (InstanceIdNotFound). So a new plan is refused while a plan it would make stale
is pending (planned and not expired): node plans (replace, reboot) stand beside each other when they name
different nodes; any other plan of a cluster (scale, delete, a compute fleet's stop or start) stands alone.
What slips past that (a plan made before a node left by other means) is caught at Confirm by `moved`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from bot.clusters.model import Cluster
from bot.clusters.requests import Kind, NodeRequest, stored_request
from storage.models import Operation

NODE_KINDS = frozenset({Kind.REPLACE, Kind.REBOOT, Kind.CHECK})


def _node_ids(operation: Operation) -> frozenset[str]:
    request = stored_request(operation)
    return frozenset(request.node_ids) if isinstance(request, NodeRequest) else frozenset()


def conflicts(operation: Operation, *, kind: Kind, node_ids: Iterable[str] = ()) -> bool:
    """Whether a pending `operation` of the cluster stands in the way of a new plan of `kind` (on `node_ids`)."""
    if operation.kind == Kind.LAUNCH.value:
        return False  # a launch is of a cluster that does not exist yet, never of this one
    if kind in NODE_KINDS and operation.kind in {k.value for k in NODE_KINDS}:
        return bool(_node_ids(operation) & set(node_ids))
    return True


def in_the_way(pending: Sequence[Operation], *, kind: Kind, node_ids: Iterable[str] = ()) -> Operation | None:
    """The earliest of the cluster's pending plans that a new plan of `kind` (on `node_ids`) would conflict
    with, or None. Earliest by (requested_at, id): every replica picks the same one."""
    wanted = tuple(node_ids)
    found = [operation for operation in pending if conflicts(operation, kind=kind, node_ids=wanted)]
    return min(found, key=lambda o: (o.requested_at, o.id)) if found else None


def moved(request: NodeRequest, cluster: Cluster | None, *, ref: str) -> str | None:
    """Why a node plan can no longer be sent as it was made (its cluster or some of its nodes are gone, or on
    their way out: replaced or removed since), or None when every node it names is still there."""
    if cluster is None:
        return f"`{ref}` is gone"
    present = {node.node_id for node in cluster.nodes if not node.leaving}
    left = [node_id for node_id in request.node_ids if node_id not in present]
    if not left:
        return None
    named = ", ".join(f"`{node_id}`" for node_id in left[:5]) + (f" and {len(left) - 5} more" if len(left) > 5 else "")
    verb = "is" if len(left) == 1 else "are"
    return f"{named} {verb} no longer in `{ref}` (replaced or removed since the plan was made)"
