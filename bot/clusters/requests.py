"""What a planned change asks of AWS: one typed request per kind, and its JSON (`Operation.request`). Pure.

`to_json` and `from_json` are the only places the stored shape is written and read; the shape is the one
rows stored before these types existed already hold, so those rows still read. `from_json` never raises
anything but `BadRequest`, whatever the JSON holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from bot.clusters.model import Backend


class Kind(StrEnum):
    LAUNCH = "launch"
    SCALE = "scale"
    REBOOT = "reboot"
    REPLACE = "replace"
    DELETE = "delete"
    STOP_FLEET = "stop_fleet"
    START_FLEET = "start_fleet"
    CHECK = "check"  # a HyperPod deep health check of some nodes (StartClusterHealthCheck)

    @property
    def noun(self) -> str:
        nouns = {
            Kind.STOP_FLEET: "compute fleet stop",
            Kind.START_FLEET: "compute fleet start",
            Kind.CHECK: "deep health check",
        }
        return nouns.get(self, self.value)


class BadRequest(ValueError):
    """A stored request that is not of the shape its kind needs; str() says which field."""


@dataclass(frozen=True)
class LaunchRequest:
    """HyperPod: the create_cluster kwargs. ParallelCluster: the cluster name and its whole YAML."""

    name: str
    create_cluster: Mapping[str, Any] | None = None
    configuration: str | None = None


@dataclass(frozen=True)
class ScaleRequest:
    group: str  # HyperPod instance group, ParallelCluster queue or QUEUE/RESOURCE
    count: int
    before: int | None = None  # shown on the progress message; None in requests stored without it
    instance_type: str = ""  # "" in requests stored without it: any group of that name


@dataclass(frozen=True)
class NodeFailure:
    node_id: str
    code: str  # ErrorCode (reboot/replace) or Code (delete) as AWS gave it
    message: str


@dataclass(frozen=True)
class NodeRequest:
    """Reboot or replace HyperPod nodes. `successful`/`failed` are filled in once AWS answered."""

    node_ids: tuple[str, ...]
    groups: tuple[str, ...]  # the groups the nodes are in
    before_ids: tuple[str, ...]  # every node of those groups when planned: a node not among them is new
    successful: tuple[str, ...] | None = None
    failed: tuple[NodeFailure, ...] | None = None


DEEP_HEALTH_CHECKS = ("InstanceStress", "InstanceConnectivity")  # botocore's DeepHealthCheckType we offer


@dataclass(frozen=True)
class CheckRequest(NodeRequest):
    """A deep health check of HyperPod nodes: a NodeRequest (so the plans of one node stand in each other's way,
    and a node gone before Confirm is caught alike) with the checks and each node's group (StartClusterHealthCheck
    takes one configuration per instance group)."""

    checks: tuple[str, ...] = DEEP_HEALTH_CHECKS
    node_groups: tuple[str, ...] = ()  # the group of each of node_ids, in the same order


@dataclass(frozen=True)
class DeleteRequest:
    pass


@dataclass(frozen=True)
class StopFleetRequest:
    then: str = ""  # the command to run again once the fleet is stopped


@dataclass(frozen=True)
class StartFleetRequest:
    pass


ChangeRequest = LaunchRequest | ScaleRequest | NodeRequest | DeleteRequest | StopFleetRequest | StartFleetRequest


def to_json(request: ChangeRequest) -> dict[str, Any]:
    if isinstance(request, LaunchRequest):
        if request.create_cluster is not None:
            return dict(request.create_cluster)
        return {"clusterName": request.name, "clusterConfiguration": request.configuration or ""}
    if isinstance(request, ScaleRequest):
        return {
            "group": request.group,
            "count": request.count,
            "before": request.before,
            "instance_type": request.instance_type,
        }
    if isinstance(request, NodeRequest):
        shaped: dict[str, Any] = {
            "node_ids": list(request.node_ids),
            "groups": list(request.groups),
            "before_ids": list(request.before_ids),
        }
        if request.successful is not None:
            shaped["successful"] = list(request.successful)
        if request.failed is not None:
            shaped["failed"] = [{"node_id": f.node_id, "code": f.code, "message": f.message} for f in request.failed]
        if isinstance(request, CheckRequest):
            shaped["checks"] = list(request.checks)
            shaped["node_groups"] = list(request.node_groups)
        return shaped
    if isinstance(request, StopFleetRequest):
        return {"then": request.then} if request.then else {}
    if isinstance(request, DeleteRequest | StartFleetRequest):
        return {}
    raise TypeError(f"not a change request: {type(request).__name__}")


def from_json(kind: Kind, backend: Backend, stored: Any) -> ChangeRequest:
    """The typed request of a stored `Operation.request`; BadRequest when it is not of its kind's shape."""
    if not isinstance(stored, dict):
        raise BadRequest(f"a {kind.value} request is a JSON object, not {type(stored).__name__}")
    if kind is Kind.LAUNCH:
        if backend is Backend.HYPERPOD:
            return LaunchRequest(name=_text(stored, "ClusterName"), create_cluster=dict(stored))
        return LaunchRequest(
            name=_text(stored, "clusterName"), configuration=_text(stored, "clusterConfiguration", empty=True)
        )
    if kind is Kind.SCALE:
        return ScaleRequest(
            group=_text(stored, "group"),
            count=_count(stored, "count"),
            before=_count(stored, "before") if stored.get("before") is not None else None,
            instance_type=_text(stored, "instance_type", empty=True, default=""),
        )
    if kind in (Kind.REBOOT, Kind.REPLACE):
        failed = stored.get("failed")
        return NodeRequest(
            node_ids=_texts(stored, "node_ids", default=()),
            groups=_texts(stored, "groups", default=()),
            before_ids=_texts(stored, "before_ids", default=()),
            successful=_texts(stored, "successful") if "successful" in stored else None,
            failed=None if failed is None else _failures(failed),
        )
    if kind is Kind.CHECK:
        checks = _texts(stored, "checks")
        if not checks or any(check not in DEEP_HEALTH_CHECKS for check in checks):
            raise BadRequest("the request's `checks` are not deep health checks")
        node_ids = _texts(stored, "node_ids")
        node_groups = _texts(stored, "node_groups")
        if len(node_groups) != len(node_ids):
            raise BadRequest("the request's `node_groups` do not match its `node_ids`")
        return CheckRequest(
            node_ids=node_ids,
            groups=_texts(stored, "groups", default=()),
            before_ids=_texts(stored, "before_ids", default=()),
            successful=_texts(stored, "successful") if "successful" in stored else None,
            checks=checks,
            node_groups=node_groups,
        )
    if kind is Kind.DELETE:
        return DeleteRequest()
    if kind is Kind.START_FLEET:
        return StartFleetRequest()
    return StopFleetRequest(then=_text(stored, "then", empty=True, default=""))


_MISSING = object()


def _text(stored: dict[str, Any], key: str, *, empty: bool = False, default: Any = _MISSING) -> str:
    value = stored.get(key, default)
    if value is _MISSING:
        raise BadRequest(f"the request has no `{key}`")
    if not isinstance(value, str) or (not value and not empty):
        raise BadRequest(f"the request's `{key}` is not a name")
    return value


def _count(stored: dict[str, Any], key: str) -> int:
    value = stored.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadRequest(f"the request's `{key}` is not a count")
    return value


def _texts(stored: dict[str, Any], key: str, *, default: Any = _MISSING) -> tuple[str, ...]:
    value = stored.get(key, default)
    if value is _MISSING:
        raise BadRequest(f"the request has no `{key}`")
    if not isinstance(value, list | tuple) or not all(isinstance(item, str) for item in value):
        raise BadRequest(f"the request's `{key}` is not a list of names")
    return tuple(value)


def _failures(value: Any) -> tuple[NodeFailure, ...]:
    if not isinstance(value, list):
        raise BadRequest("the request's `failed` is not a list")
    failures = []
    for item in value:
        if not isinstance(item, dict) or not all(isinstance(item.get(k), str) for k in ("node_id", "code", "message")):
            raise BadRequest("an entry of the request's `failed` is not a node failure")
        failures.append(NodeFailure(node_id=item["node_id"], code=item["code"], message=item["message"]))
    return tuple(failures)


def stored_request(operation: Any) -> ChangeRequest | None:
    """An operation's typed request (`Operation.request`); None when its stored JSON is not of its kind's shape
    (it is then shown without it)."""
    try:
        return from_json(Kind(operation.kind), Backend(operation.backend), operation.request or {})
    except (BadRequest, ValueError):
        return None


def operation_summary(operation: Any) -> str:
    """One line naming the change, e.g. `scale kumo-labs/kumo-p5-train workers 2→4`: the audit log's text for
    it, the digest's list of changes and the messages' fallbacks."""
    request, ref = stored_request(operation), f"{operation.org_id}/{operation.cluster_name}"
    if operation.kind == "launch":
        return f"launch {ref} ({operation.template})"
    if isinstance(request, ScaleRequest):
        return f"scale {ref} {request.group} {request.before}→{request.count}"
    if isinstance(request, CheckRequest):
        return f"check {ref} " + " ".join(request.node_ids) + f" ({', '.join(request.checks)})"
    if isinstance(request, NodeRequest):
        return f"{operation.kind} {ref} " + " ".join(request.node_ids)
    return f"{operation.kind} {ref}"
