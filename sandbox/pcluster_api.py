"""A stand-in for the AWS ParallelCluster REST API (v3.12), one per account and region, for the sandbox.

The real API is an API Gateway in the org's account, SigV4-signed for `execute-api`, backed by
CloudFormation stacks. Here a cluster is what EC2 says it is: the instances tagged
`parallelcluster:cluster-name`, read from moto's in-process EC2 backend by default, plus, for clusters
this API created, updated, deleted or started/stopped, the state a CloudFormation stack would hold (status,
configuration, compute fleet status). Every org's API lives under one server at
`/pcluster/{account_id}/{region}`, so the sandbox sets an org's `parallelcluster_api` to e.g.
`http://127.0.0.1:PORT/pcluster/111111111111/us-east-1`.

Served (shapes from specs/parallelcluster-api-3.12.openapi.yaml beside this module; see specs/README.md):
  GET    .../v3/clusters                            ListClusters (region, nextToken, clusterStatus)
  POST   .../v3/clusters                            CreateCluster (dryrun, suppressValidators, validationFailureLevel,
                                                    rollbackOnFailure, region): 202, 409 name in use, 412 dry run
  GET    .../v3/clusters/{clusterName}              DescribeCluster (404 when unknown)
  PUT    .../v3/clusters/{clusterName}              UpdateCluster (dryrun, forceUpdate, ...): 202 with the changeSet,
                                                    400 when ParallelCluster's update rules refuse, 412 dry run
  DELETE .../v3/clusters/{clusterName}              DeleteCluster: 202
  GET    .../v3/clusters/{clusterName}/computefleet DescribeComputeFleet
  PATCH  .../v3/clusters/{clusterName}/computefleet UpdateComputeFleet (START_REQUESTED | STOP_REQUESTED): 204
  GET    .../v3/clusters/{clusterName}/instances    DescribeClusterInstances (nextToken, nodeType, queueName)
  GET    .../config/{clusterName}.yaml              the cluster configuration (a presigned S3 URL in AWS)
Anything else answers as API Gateway does for a resource it does not have: 403 Missing Authentication Token.

Checked against the spec: every request's parameters and body, and every answer of the operations above, are
validated with jsonschema against the spec's component schemas. A request off the spec gets 400 (naming the
problem); an answer off the spec (an emulator bug) becomes a 500. Both are recorded in `spec_violations`, so
tests can assert that nothing went off the spec. Stricter than the real API (connexion, no strict validation)
on purpose: unknown query parameters and unknown body properties are refused too (`strict=False` to allow).

Time: create, update and delete take `progress_seconds` (the *_IN_PROGRESS status, then *_COMPLETE; a deleted
cluster disappears); a compute fleet stop or start is X_REQUESTED for the first half, STOPPING/STARTING for
the second, then STOPPED/RUNNING. Evaluated lazily whenever the cluster is read; `advance()` finishes whatever
is in progress at once. EC2 follows: a create launches the head node and MinCount instances per compute
resource; an update that completes, and a fleet start, bring each compute resource back to its MinCount
(launching or terminating); a fleet stop terminates the compute instances (as ParallelCluster does with
Slurm: static nodes are relaunched on start); a delete terminates every instance of the cluster.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import json
import logging
import re
import uuid
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import yaml
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from jsonschema import Draft7Validator
from jsonschema.exceptions import best_match
from starlette.applications import Starlette
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

__all__ = [
    "DEFAULT_SPEC_PATH",
    "DRYRUN_MESSAGE",
    "PCLUSTER_VERSION",
    "Ec2Fleet",
    "Ec2InstanceRecord",
    "LaunchSpec",
    "MotoEc2Fleet",
    "OpenApiChecker",
    "ParallelClusterApi",
    "SigningKey",
    "SpecViolation",
    "load_spec_checker",
    "moto_instances",
    "moto_signing_key",
]

logger = logging.getLogger(__name__)

PCLUSTER_VERSION = "3.12.0"
# Package data (specs/README.md names its source), so every install and a bare clone has it.
DEFAULT_SPEC_PATH = Path(__file__).resolve().parent / "specs" / "parallelcluster-api-3.12.openapi.yaml"
PREFIX = "/pcluster/{account_id}/{region}"
NAME_TAG = "parallelcluster:cluster-name"
NODE_TYPE_TAG = "parallelcluster:node-type"
QUEUE_TAG = "parallelcluster:queue-name"
COMPUTE_RESOURCE_TAG = "parallelcluster:compute-resource-name"
VERSION_TAG = "parallelcluster:version"
NODE_TYPES = ("HeadNode", "LoginNode", "ComputeNode")  # also the order instances are listed in
GONE_STATES = frozenset({"shutting-down", "terminated"})  # ParallelCluster lists "alive" instances only
REGION_PATTERN = re.compile(r"[a-z]{2}(-[a-z]+)+-\d")
CLUSTER_NAME_PATTERN = re.compile(r"[a-zA-Z][a-zA-Z0-9-]+")
CLUSTER_NAME_MAX = 60
QUEUE_NAME_PATTERN = re.compile(r"[a-z][a-z0-9-]*")  # also compute resource names
QUEUE_NAME_MAX = 25
DEFAULT_MAX_COUNT = 10
QUEUE_UPDATE_STRATEGIES = ("COMPUTE_FLEET_STOP", "DRAIN", "TERMINATE")
VALIDATION_LEVELS = ("INFO", "WARNING", "ERROR")  # in rising order
SCHEMA_VALIDATOR = "ConfigSchemaValidator"  # problems no suppressValidators can hide
DRYRUN_MESSAGE = "Request would have succeeded, but DryRun flag is set."
INVALID_CONFIG_MESSAGE = "Invalid cluster configuration."
AUTH_PATTERN = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/,\s]+)/(?P<date>\d{8})/(?P<region>[^/]+)/(?P<service>[^/]+)/aws4_request,"
    r"\s*SignedHeaders=(?P<headers>[a-z0-9;-]+),\s*Signature=(?P<signature>[0-9a-f]{64})"
)
SIGNATURE_MISMATCH = (
    "The request signature we calculated does not match the signature you provided. Check your AWS Secret "
    "Access Key and signing method. Consult the service documentation for details."
)
# Update rules (ParallelCluster's update policies, reduced to what a Slurm cluster's scaling meets).
RESIZE_RULE = (
    "The applied change may terminate existing compute nodes (it lowers MinCount or MaxCount, removes a queue or "
    "compute resource, or raises MinCount by more than MaxCount), so it requires the compute fleet to be stopped "
    "first, or Scheduling.SlurmSettings.QueueUpdateStrategy set to TERMINATE. Stop the compute fleet "
    "(UpdateComputeFleet with status STOP_REQUESTED) and update again once it is STOPPED, or set "
    "QueueUpdateStrategy: TERMINATE in the new configuration."
)
FLEET_STOP_RULE = (
    "All compute nodes must be stopped. Stop the compute fleet (UpdateComputeFleet with status STOP_REQUESTED) "
    "and update again once it is STOPPED."
)
UNSUPPORTED_PARAMETERS = frozenset(
    {"Region", "Image.Os", "Scheduling.Scheduler", "HeadNode.InstanceType", "HeadNode.Networking.SubnetId"}
)
_RESOURCE_PARAMETER = re.compile(
    r"Scheduling\.SlurmQueues\[(?P<queue>[^\]]+)\](?:\.ComputeResources\[(?P<resource>[^\]]+)\](?:\.(?P<field>.+))?)?"
)


@dataclass(frozen=True)
class Ec2InstanceRecord:
    """What the emulator needs of one EC2 instance (a subset of DescribeInstances' Instance)."""

    instance_id: str
    instance_type: str
    state: str  # EC2 state name: pending | running | shutting-down | terminated | stopping | stopped
    launch_time: datetime
    private_ip: str
    tags: Mapping[str, str]
    public_ip: str | None = None
    subnet_id: str | None = None
    key_name: str | None = None


@dataclass(frozen=True)
class SigningKey:
    """A secret key the emulator can check signatures with, and the account the key belongs to."""

    account_id: str
    secret_access_key: str
    principal_arn: str


@dataclass(frozen=True)
class LaunchSpec:
    """Instances a cluster operation launches: all of one type, all with the same tags."""

    instance_type: str
    count: int
    tags: Mapping[str, str]
    image_id: str
    subnet_id: str | None = None
    key_name: str | None = None


class Ec2Fleet(Protocol):
    """Where the emulator launches and terminates the instances its clusters are made of."""

    def launch(self, account_id: str, region: str, spec: LaunchSpec) -> list[str]: ...

    def terminate(self, account_id: str, region: str, instance_ids: Sequence[str]) -> None: ...


@dataclass(frozen=True)
class SpecViolation:
    """A request the emulator refused for being off the spec, or an answer of its own that was off it."""

    operation: str
    direction: str  # "request" | "response"
    status: int  # the status answered (400 for requests; the off-spec status for responses)
    problem: str


_Page = tuple[list[dict[str, Any]], str | None]  # one page of items and the next token
InstanceSource = Callable[[str, str], Iterable[Ec2InstanceRecord]]
SigningKeyLookup = Callable[[str, str], "SigningKey | None"]  # (access key id, account id of the API)


def moto_instances(account_id: str, region: str) -> list[Ec2InstanceRecord]:
    """Instances of moto's in-process EC2 backend (the one ThreadedMotoServer serves) for one account/region."""
    from moto.ec2.models import ec2_backends

    backend = ec2_backends[account_id][region]
    records = []
    for reservation in list(backend.reservations.values()):
        for instance in list(reservation.instances):
            launched = instance.launch_time
            if isinstance(launched, str):
                launched = datetime.fromisoformat(launched.replace("Z", "+00:00"))
            records.append(
                Ec2InstanceRecord(
                    instance_id=instance.id,
                    instance_type=instance.instance_type,
                    state=instance.state,
                    launch_time=launched if launched.tzinfo else launched.replace(tzinfo=UTC),
                    private_ip=instance.private_ip or "",
                    public_ip=instance.public_ip,
                    tags={tag["key"]: tag["value"] for tag in instance.get_tags()},
                    subnet_id=instance.subnet_id,
                    key_name=instance.key_name,
                )
            )
    return records


class MotoEc2Fleet:
    """Launches into and terminates from moto's in-process EC2 backend (what `moto_instances` reads)."""

    def launch(self, account_id: str, region: str, spec: LaunchSpec) -> list[str]:
        from moto.ec2.models import ec2_backends

        backend = ec2_backends[account_id][region]
        subnet_id = spec.subnet_id
        if subnet_id:
            try:
                backend.get_subnet(subnet_id)
            except Exception:  # a template's placeholder subnet moto never heard of: moto's default subnet
                subnet_id = None
        reservation = backend.run_instances(
            spec.image_id,
            spec.count,
            None,
            [],
            instance_type=spec.instance_type,
            is_instance_type_default=False,
            region_name=region,
            subnet_id=subnet_id,
            key_name=spec.key_name,
            tags={"instance": dict(spec.tags)},
        )
        return [instance.id for instance in reservation.instances]

    def terminate(self, account_id: str, region: str, instance_ids: Sequence[str]) -> None:
        from moto.ec2.models import ec2_backends

        if instance_ids:
            ec2_backends[account_id][region].terminate_instances(list(instance_ids))


def moto_signing_key(access_key_id: str, account_id: str) -> SigningKey | None:
    """The secret behind credentials that moto's STS assume_role issued, if it did.

    `account_id` (the API's account) is where the key is looked for first. Keys moto did not issue
    (e.g. the static "testing" keys) give None: those requests pass on the Authorization header's shape.
    """
    from moto.sts.models import sts_backends

    accounts = [account_id, *(other for other in list(sts_backends) if other != account_id)]
    for account in accounts:
        if account not in sts_backends:
            continue
        for backend in list(sts_backends[account].values()):
            for role in list(backend.assumed_roles):
                if role.access_key_id == access_key_id:
                    return SigningKey(role.account_id, role.secret_access_key, role.arn)
    return None


def _node_type(tags: Mapping[str, str]) -> str:
    # ParallelCluster itself tags compute instances "Compute"; the API reports them as "ComputeNode".
    value = tags.get(NODE_TYPE_TAG, "ComputeNode")
    value = "ComputeNode" if value == "Compute" else value
    return value if value in NODE_TYPES else "ComputeNode"


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _now() -> datetime:
    return datetime.now(UTC)


def _encode_token(offset: int) -> str:
    # Opaque like the real API's tokens; unpadded urlsafe base64 needs no escaping in a query string.
    return base64.urlsafe_b64encode(f"pcluster-emulator:{offset}".encode()).decode().rstrip("=")


def _decode_token(token: str) -> int | None:
    try:
        text = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    prefix, _, offset = text.partition(":")
    return int(offset) if prefix == "pcluster-emulator" and offset.isdigit() else None


def _error(status: int, message: str, error_type: str | None = None) -> JSONResponse:
    headers = {"x-amzn-ErrorType": error_type} if error_type else None
    return JSONResponse({"message": message}, status_code=status, headers=headers)


def _forbidden(message: str, error_type: str) -> JSONResponse:
    return _error(403, message, error_type)


class _Answer(Exception):
    """Raised by a handler to answer with this response right away (an error, usually)."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


def _bad_request(message: str) -> _Answer:
    return _Answer(_error(400, f"Bad Request: {message}"))


def _not_found(name: str) -> _Answer:
    return _Answer(
        _error(404, f"Cluster '{name}' does not exist or belongs to an incompatible ParallelCluster major version.")
    )


def _bool_query(request: Request, name: str, default: bool) -> bool:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if raw.lower() not in ("true", "false"):
        raise _bad_request(f"Wrong type, expected 'boolean' for query parameter '{name}'")
    return raw.lower() == "true"


# --- the spec checker ----------------------------------------------------------------------------------


def _closed(node: Any) -> Any:
    """A copy of a schema tree where objects with declared properties allow no others."""
    if isinstance(node, dict):
        out = {key: _closed(value) for key, value in node.items()}
        if out.get("type") == "object" and "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [_closed(value) for value in node]
    return node


def _problem(error: Any) -> str:
    where = ".".join(str(part) for part in error.absolute_path)
    return f"{error.message} (at {where})" if where else str(error.message)


@dataclass(frozen=True)
class _Operation:
    operation_id: str
    method: str
    path: str
    parameters: Mapping[tuple[str, str], Mapping[str, Any]]  # (in, name) -> the parameter object
    body_schema: Mapping[str, Any] | None
    responses: Mapping[str, Mapping[str, Any] | None]  # status -> its JSON schema, None when it has no content


class OpenApiChecker:
    """Checks requests and responses of the spec's operations against its parameters and component schemas.

    Requests are checked as the spec has them (`strict` also refuses parameters and body properties it does not
    name); responses always strictly: an answer with a property the spec does not name is off the spec.
    """

    def __init__(self, spec: Mapping[str, Any]) -> None:
        components = spec.get("components", {})
        self._roots = {False: {"components": components}, True: {"components": _closed(components)}}
        self._validators: dict[tuple[str, bool], Draft7Validator] = {}
        self.operations: dict[str, _Operation] = {}
        for path, item in spec.get("paths", {}).items():
            shared = item.get("parameters", [])
            for method, operation in item.items():
                if method not in ("get", "put", "post", "delete", "patch") or "operationId" not in operation:
                    continue
                parameters = {(p["in"], p["name"]): p for p in [*shared, *operation.get("parameters", [])]}
                body = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
                responses = {
                    str(status): (answer.get("content", {}).get("application/json", {}).get("schema"))
                    for status, answer in operation.get("responses", {}).items()
                }
                self.operations[operation["operationId"]] = _Operation(
                    operation["operationId"], method.upper(), path, parameters, body.get("schema"), responses
                )

    def _validator(self, schema: Mapping[str, Any], strict: bool) -> Draft7Validator:
        key = (json.dumps(schema, sort_keys=True), strict)
        if key not in self._validators:
            root = {**(_closed(dict(schema)) if strict else schema), **self._roots[strict]}
            self._validators[key] = Draft7Validator(root, format_checker=Draft7Validator.FORMAT_CHECKER)
        return self._validators[key]

    def _resolve(self, schema: Mapping[str, Any]) -> Mapping[str, Any]:
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            resolved: Mapping[str, Any] = self._roots[False]["components"]["schemas"][ref.rsplit("/", 1)[1]]
            return resolved
        return schema

    def check_parameters(
        self, operation_id: str, path_params: Mapping[str, str], query: QueryParams, *, strict: bool = True
    ) -> str | None:
        """None when the path and query parameters are on the spec, else what is wrong."""
        operation = self.operations[operation_id]
        for (where, name), parameter in operation.parameters.items():
            schema = parameter.get("schema", {})
            if where == "path":
                if name not in path_params:
                    continue
                values: list[str] = [path_params[name]]
            elif where == "query":
                values = query.getlist(name)
            else:
                continue
            if not values:
                if parameter.get("required"):
                    return f"Missing {where} parameter '{name}'"
                continue
            try:
                value = self._convert(values, self._resolve(schema))
            except ValueError as wrong:
                return f"Wrong type, expected '{wrong}' for {where} parameter '{name}'"
            error = best_match(self._validator(schema, False).iter_errors(value))
            if error is not None:
                return f"{error.message} for {where} parameter '{name}'"
        if strict:
            known = {name for (where, name) in operation.parameters if where == "query"}
            unknown = sorted(set(query.keys()) - known)
            if unknown:
                return f"query parameter(s) {', '.join(unknown)} not in the spec of {operation_id}"
        return None

    def _convert(self, values: list[str], schema: Mapping[str, Any]) -> Any:
        kind = schema.get("type")
        if kind == "array":
            items = self._resolve(schema.get("items", {}))
            return [self._convert([value], items) for value in values]
        value = values[-1]
        if kind == "boolean":
            if value.lower() not in ("true", "false"):
                raise ValueError("boolean")
            return value.lower() == "true"
        if kind == "integer":
            try:
                return int(value)
            except ValueError:
                raise ValueError("integer") from None
        return value

    def check_body(self, operation_id: str, body: Any, *, strict: bool = True) -> str | None:
        """None when the request body is on the spec (or the operation takes none), else what is wrong."""
        schema = self.operations[operation_id].body_schema
        if schema is None:
            return None
        error = best_match(self._validator(schema, strict).iter_errors(body))
        return None if error is None else f"request body: {_problem(error)}"

    def check_response(self, operation_id: str, status: int, body: bytes) -> str | None:
        """None when this answer is one the spec has for the operation, else what is wrong."""
        operation = self.operations[operation_id]
        if str(status) not in operation.responses:
            return f"{operation_id} answered {status}, not among the spec's statuses {sorted(operation.responses)}"
        schema = operation.responses[str(status)]
        if status == 204 or schema is None:
            # A 204 has no content in HTTP, whatever the spec lists for it.
            return f"{operation_id} answered {status} with a body" if body else None
        if not body:
            return f"{operation_id} answered {status} with no body"
        try:
            parsed = json.loads(body)
        except ValueError:
            return f"{operation_id} answered {status} with a body that is not JSON"
        error = best_match(self._validator(schema, True).iter_errors(parsed))
        return None if error is None else f"{operation_id} {status}: {_problem(error)}"


@functools.lru_cache(maxsize=4)
def _cached_checker(path: str, _mtime_ns: int) -> OpenApiChecker:
    # The modification time is part of the cache key only: an edited spec is loaded again.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(path, encoding="utf-8") as stream:
        spec = yaml.load(stream, Loader=loader)  # a safe loader (the C one when built)
    return OpenApiChecker(spec)


def load_spec_checker(path: Path | None = None) -> OpenApiChecker:
    """The checker of the spec at `path` (default: DEFAULT_SPEC_PATH).

    A missing spec is an error, raised at start: an emulator that checks nothing would pass off-spec calls.
    """
    path = path or DEFAULT_SPEC_PATH
    try:
        mtime = path.stat().st_mtime_ns
    except OSError as error:
        raise FileNotFoundError(
            f"ParallelCluster API spec not found at {path}: the emulator checks every request against it and "
            "does not start without it (it ships in sandbox/specs/; reinstall the package or pass spec_path)"
        ) from error
    return _cached_checker(str(path.resolve()), mtime)


# --- cluster configurations --------------------------------------------------------------------------


def _message(level: str, validator: str, text: str) -> dict[str, str]:
    """A ConfigValidationMessage."""
    return {"id": validator, "type": validator, "level": level, "message": text}


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _tag_map(tags: Any) -> dict[str, str]:
    if not isinstance(tags, list):
        return {}
    return {
        str(tag["Key"]): str(tag.get("Value", ""))
        for tag in tags
        if isinstance(tag, dict) and isinstance(tag.get("Key"), str)
    }


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


@dataclass(frozen=True)
class _Resource:
    """One compute resource of a Slurm queue, as a configuration has it."""

    queue: str
    name: str
    instance_type: str
    min_count: int
    max_count: int
    subnet_id: str | None
    tags: Mapping[str, str]  # the queue's Tags


def _instance_type(resource: Mapping[str, Any]) -> str | None:
    if isinstance(resource.get("InstanceType"), str):
        return str(resource["InstanceType"])
    flexible = resource.get("Instances")
    if isinstance(flexible, list) and flexible and isinstance(flexible[0], dict):
        kind = flexible[0].get("InstanceType")
        return kind if isinstance(kind, str) else None
    return None


def _resources(config: Mapping[str, Any]) -> dict[tuple[str, str], _Resource]:
    """The compute resources of a configuration by (queue, resource) name; whatever is malformed is skipped."""
    out: dict[tuple[str, str], _Resource] = {}
    queues = _mapping(config.get("Scheduling")).get("SlurmQueues")
    for queue in queues if isinstance(queues, list) else []:
        if not isinstance(queue, dict) or not isinstance(queue.get("Name"), str):
            continue
        subnets = _mapping(queue.get("Networking")).get("SubnetIds")
        subnet = subnets[0] if isinstance(subnets, list) and subnets and isinstance(subnets[0], str) else None
        resources = queue.get("ComputeResources")
        for resource in resources if isinstance(resources, list) else []:
            if not isinstance(resource, dict) or not isinstance(resource.get("Name"), str):
                continue
            kind = _instance_type(resource)
            low, high = resource.get("MinCount", 0), resource.get("MaxCount", DEFAULT_MAX_COUNT)
            if kind is None or not _is_count(low) or not _is_count(high):
                continue
            out[(queue["Name"], resource["Name"])] = _Resource(
                queue["Name"], resource["Name"], kind, low, high, subnet, _tag_map(queue.get("Tags"))
            )
    return out


def _queue_update_strategy(config: Mapping[str, Any]) -> str:
    settings = _mapping(_mapping(config.get("Scheduling")).get("SlurmSettings"))
    return str(settings.get("QueueUpdateStrategy", "COMPUTE_FLEET_STOP"))


def _check_name(name: str) -> list[dict[str, str]]:
    if CLUSTER_NAME_PATTERN.fullmatch(name) and len(name) <= CLUSTER_NAME_MAX:
        return []
    return [
        _message(
            "ERROR",
            "ClusterNameValidator",
            f"Error: The cluster name '{name}' is not valid. It can contain only alphanumeric characters "
            f"(case-sensitive) and hyphens, must start with an alphabetic character and can't be longer than "
            f"{CLUSTER_NAME_MAX} characters.",
        )
    ]


def _check_config(text: str) -> tuple[dict[str, Any] | None, list[dict[str, str]]]:
    """The parsed configuration (None when it is no mapping) and the ConfigValidationMessages it earns."""
    schema_errors: list[dict[str, str]] = []

    def wrong(text: str) -> None:
        schema_errors.append(_message("ERROR", SCHEMA_VALIDATOR, text))

    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as problem:
        return None, [_message("ERROR", SCHEMA_VALIDATOR, f"The configuration is not valid YAML: {problem}")]
    if not isinstance(config, dict):
        return None, [_message("ERROR", SCHEMA_VALIDATOR, "The configuration must be a YAML mapping.")]
    if "Region" in config and not isinstance(config["Region"], str):
        wrong("Region: Not a valid string.")
    head = config.get("HeadNode")
    if not isinstance(head, dict):
        wrong("HeadNode: Missing data for required field.")
    elif not isinstance(head.get("InstanceType"), str):
        wrong("HeadNode.InstanceType: Missing data for required field.")
    scheduling = config.get("Scheduling")
    queues: Any = None
    if not isinstance(scheduling, dict):
        wrong("Scheduling: Missing data for required field.")
    else:
        if scheduling.get("Scheduler") != "slurm":
            wrong("Scheduling.Scheduler: this emulator serves Slurm clusters only: must be 'slurm'.")
        strategy = _mapping(scheduling.get("SlurmSettings")).get("QueueUpdateStrategy")
        if strategy is not None and strategy not in QUEUE_UPDATE_STRATEGIES:
            wrong(
                f"Scheduling.SlurmSettings.QueueUpdateStrategy: Must be one of: {', '.join(QUEUE_UPDATE_STRATEGIES)}."
            )
        queues = scheduling.get("SlurmQueues")
        if not isinstance(queues, list) or not queues:
            wrong("Scheduling.SlurmQueues: Missing data for required field: at least one queue.")
            queues = []
    names: set[str] = set()
    for q, queue in enumerate(queues or []):
        where = f"Scheduling.SlurmQueues[{q}]"
        if not isinstance(queue, dict):
            wrong(f"{where}: Not a mapping.")
            continue
        queue_name = queue.get("Name")
        if not isinstance(queue_name, str) or not QUEUE_NAME_PATTERN.fullmatch(queue_name):
            wrong(f"{where}.Name: must start with a lowercase letter and have only lowercase letters, digits and '-'.")
        elif len(queue_name) > QUEUE_NAME_MAX or queue_name in names:
            wrong(f"{where}.Name: '{queue_name}' is too long or used twice.")
        else:
            names.add(queue_name)
            where = f"Scheduling.SlurmQueues[{queue_name}]"
        resources = queue.get("ComputeResources")
        if not isinstance(resources, list) or not resources:
            wrong(f"{where}.ComputeResources: Missing data for required field: at least one compute resource.")
            continue
        resource_names: set[str] = set()
        for r, resource in enumerate(resources):
            spot = f"{where}.ComputeResources[{r}]"
            if not isinstance(resource, dict):
                wrong(f"{spot}: Not a mapping.")
                continue
            resource_name = resource.get("Name")
            if not isinstance(resource_name, str) or not QUEUE_NAME_PATTERN.fullmatch(resource_name):
                wrong(f"{spot}.Name: must start with a lowercase letter and have only lowercase letters, digits, '-'.")
            elif resource_name in resource_names:
                wrong(f"{spot}.Name: '{resource_name}' is used twice in the queue.")
            else:
                resource_names.add(resource_name)
                spot = f"{where}.ComputeResources[{resource_name}]"
            if _instance_type(resource) is None:
                wrong(f"{spot}.InstanceType: Missing data for required field.")
            low, high = resource.get("MinCount", 0), resource.get("MaxCount", DEFAULT_MAX_COUNT)
            if not _is_count(low) or low < 0:
                wrong(f"{spot}.MinCount: Must be an integer greater than or equal to 0.")
            if not _is_count(high) or high < 1:
                wrong(f"{spot}.MaxCount: Must be an integer greater than or equal to 1.")
            if _is_count(low) and _is_count(high) and low > high:
                wrong(f"{spot}: MinCount ({low}) must be lower than or equal to MaxCount ({high}).")
    tags = config.get("Tags")
    if tags is not None:
        well_formed = isinstance(tags, list) and all(
            isinstance(t, dict) and isinstance(t.get("Key"), str) and isinstance(t.get("Value", ""), str) for t in tags
        )
        if not well_formed:
            wrong("Tags: must be a list of {Key: string, Value: string}.")
        elif any(str(t["Key"]).startswith("parallelcluster:") for t in tags):
            schema_errors.append(
                _message("ERROR", "TagKeyValidator", "The tag key prefix 'parallelcluster:' is reserved.")
            )
    messages = list(schema_errors)
    if isinstance(head, dict) and not _mapping(head.get("Ssh")).get("KeyName"):
        messages.append(
            _message(
                "WARNING",
                "KeyPairValidator",
                "If you do not specify a key pair, you can't connect to the instance unless you choose an AMI that "
                "is configured to allow users another way to log in",
            )
        )
    return config, messages


def _sift(
    messages: list[dict[str, str]], level: str, suppressed: Sequence[str]
) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """(failures, the rest): what is at or above the failure level, after the suppressed validators are dropped."""
    hidden = {s.partition(":")[2] for s in suppressed if s.startswith("type:")}
    kept = [
        m for m in messages if m["type"] == SCHEMA_VALIDATOR or ("ALL" not in suppressed and m["type"] not in hidden)
    ]
    floor = VALIDATION_LEVELS.index(level)
    failures = [m for m in kept if VALIDATION_LEVELS.index(m["level"]) >= floor]
    return failures, [m for m in kept if VALIDATION_LEVELS.index(m["level"]) < floor]


def _named_list(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(item, dict) and isinstance(item.get("Name"), str) for item in value
    )


def _diff(old: Any, new: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """(parameter, current, requested) for every difference; lists of named sections are matched by Name."""
    if isinstance(old, dict) and isinstance(new, dict):
        pairs = [
            (f"{path}.{key}" if path else str(key), old.get(key), new.get(key), key in old, key in new)
            for key in [*old, *(k for k in new if k not in old)]
        ]
    elif _named_list(old) and _named_list(new):
        old_named = {item["Name"]: item for item in old}
        new_named = {item["Name"]: item for item in new}
        pairs = [
            (f"{path}[{name}]", old_named.get(name), new_named.get(name), name in old_named, name in new_named)
            for name in [*old_named, *(n for n in new_named if n not in old_named)]
        ]
    else:
        return [] if old == new else [(path, old, new)]
    changes: list[tuple[str, Any, Any]] = []
    for parameter, before, after, was, is_ in pairs:
        if was and is_:
            changes += _diff(before, after, parameter)
        else:
            changes.append((parameter, before if was else None, after if is_ else None))
    return changes


def _shown(value: Any) -> str:
    """A value as the spec's Change has it: a string, '-' for none."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)


def _change(parameter: str, current: Any, requested: Any) -> dict[str, str]:
    return {"parameter": parameter, "currentValue": _shown(current), "requestedValue": _shown(requested)}


def _shrinks(before: _Resource | None, after: _Resource | None) -> bool:
    """Could going from `before` to `after` terminate nodes? (Adding capacity never does.)"""
    if before is None:
        return False
    if after is None:
        return True
    return (
        after.min_count < before.min_count
        or after.max_count < before.max_count
        or after.max_count - after.min_count < before.max_count - before.min_count
    )


def _update_errors(
    changes: list[tuple[str, Any, Any]], old: Mapping[str, Any], new: Mapping[str, Any], *, fleet: str, force: bool
) -> list[dict[str, str]]:
    """UpdateErrors for the changes ParallelCluster's update policies refuse (forceUpdate skips the ones that only
    need an action first, never the unsupported ones)."""
    running = fleet != "STOPPED"
    terminate = _queue_update_strategy(new) == "TERMINATE"
    before, after = _resources(old), _resources(new)
    errors = []
    for parameter, current, requested in changes:
        rule: str | None = None
        if parameter in UNSUPPORTED_PARAMETERS:
            rule = (
                f"Update actions are not currently supported for the '{parameter}' parameter. Restore its value to "
                f"'{_shown(current)}'. If you need this change, please consider creating a new cluster instead."
            )
        elif (match := _RESOURCE_PARAMETER.fullmatch(parameter)) and running and not force:
            queue, resource, detail = match["queue"], match["resource"], match["field"]
            if resource is None:  # a whole queue added or removed
                removed = [key for key in before if key[0] == queue and key not in after]
                rule = RESIZE_RULE if requested is None and removed and not terminate else None
            elif detail is None or detail in ("MinCount", "MaxCount"):
                key = (queue, resource)
                rule = RESIZE_RULE if _shrinks(before.get(key), after.get(key)) and not terminate else None
            elif detail == "InstanceType" or detail.startswith("Instances"):
                rule = FLEET_STOP_RULE
        if rule:
            errors.append({**_change(parameter, current, requested), "message": rule})
    return errors


# --- clusters ------------------------------------------------------------------------------------------


@dataclass
class _ClusterState:
    """What CloudFormation and ParallelCluster's DynamoDB table would hold for a cluster this API touched."""

    account_id: str
    region: str
    name: str
    stack_arn: str
    version: str
    created: datetime
    updated: datetime
    status: str  # ClusterStatus
    stack_status: str  # CloudFormationStackStatus
    config: dict[str, Any]
    tags: dict[str, str]  # the head node's, also shown once the head node is gone
    fleet: str  # ComputeFleetStatus
    fleet_updated: datetime
    rollback: bool = True
    due: datetime | None = None  # when the create, update or delete in progress ends
    failure: tuple[str, str] | None = None  # (code, reason) it ends with, set by `fail()`
    previous: tuple[dict[str, Any], str] | None = None  # configuration (and YAML) an update in progress replaces
    failures: list[dict[str, str]] = field(default_factory=list)
    fleet_target: str | None = None  # STOPPED or RUNNING while a stop or start is under way
    fleet_halfway: datetime | None = None  # when X_REQUESTED becomes STOPPING / STARTING
    fleet_due: datetime | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.account_id, self.region, self.name)


@dataclass
class _Cluster:
    name: str
    instances: list[Ec2InstanceRecord] = field(default_factory=list)  # alive ones
    state: _ClusterState | None = None  # None: known from EC2 tags alone, never touched through this API

    @property
    def head(self) -> Ec2InstanceRecord | None:
        return next((i for i in self.instances if _node_type(i.tags) == "HeadNode"), None)


@dataclass(frozen=True)
class _Call:
    """A request that passed authentication and the spec: its account, region (query or path) and JSON body."""

    account_id: str
    region: str
    body: Any


_Handler = Callable[[Request, _Call], Awaitable[Response]]
IN_PROGRESS = frozenset({"CREATE_IN_PROGRESS", "UPDATE_IN_PROGRESS", "DELETE_IN_PROGRESS"})
UPDATABLE = frozenset({"CREATE_COMPLETE", "UPDATE_COMPLETE", "UPDATE_FAILED"})


class ParallelClusterApi(Starlette):
    """ASGI app emulating every org's ParallelCluster API; see the module docstring for the routes.

    instances: reads EC2 instances of an (account, region); moto's in-process backend by default.
    ec2: launches and terminates the instances of clusters this API creates or changes; moto's by default.
    signing_keys: finds the secret of an access key, to check signatures and that the caller is in the
        API's account; moto's STS by default. Requests are refused like API Gateway refuses them.
    progress_seconds: how long a create, update, delete, or compute fleet stop/start takes.
    clock: the time those are measured with (tests may pass one they move by hand).
    spec_path: the OpenAPI spec to check requests and answers against (default DEFAULT_SPEC_PATH); when the
        file is absent the emulator does not start (FileNotFoundError).
    strict: also refuse query parameters and body properties the spec does not name.
    """

    def __init__(
        self,
        *,
        instances: InstanceSource = moto_instances,
        ec2: Ec2Fleet | None = None,
        signing_keys: SigningKeyLookup | None = moto_signing_key,
        page_size: int = 10,
        instance_page_size: int = 50,
        version: str = PCLUSTER_VERSION,
        progress_seconds: float = 3.0,
        clock: Callable[[], datetime] = _now,
        spec_path: Path | None = None,
        strict: bool = True,
    ) -> None:
        self._instances = instances
        self._ec2: Ec2Fleet = ec2 or MotoEc2Fleet()
        self._signing_keys = signing_keys
        self._page_size = page_size
        self._instance_page_size = instance_page_size
        self._version = version
        self._progress = timedelta(seconds=progress_seconds)
        self._clock = clock
        self._strict = strict
        self._checker = load_spec_checker(spec_path)
        self._configs: dict[tuple[str, str, str], str] = {}
        self._states: dict[tuple[str, str, str], _ClusterState] = {}
        # Requests seen, by URL path (query excluded), for tests and the sandbox status line.
        self.requests: Counter[str] = Counter()
        # Requests refused for being off the spec, and answers of the emulator's own that were (a bug).
        self.spec_violations: list[SpecViolation] = []
        clusters, cluster = PREFIX + "/v3/clusters", PREFIX + "/v3/clusters/{cluster_name}"
        super().__init__(
            routes=[
                Route(clusters, self._operation("ListClusters", self._list_clusters), methods=["GET"]),
                Route(clusters, self._operation("CreateCluster", self._create_cluster), methods=["POST"]),
                Route(cluster, self._operation("DescribeCluster", self._describe_cluster), methods=["GET"]),
                Route(cluster, self._operation("UpdateCluster", self._update_cluster), methods=["PUT"]),
                Route(cluster, self._operation("DeleteCluster", self._delete_cluster), methods=["DELETE"]),
                Route(
                    cluster + "/computefleet",
                    self._operation("DescribeComputeFleet", self._describe_compute_fleet),
                    methods=["GET"],
                ),
                Route(
                    cluster + "/computefleet",
                    self._operation("UpdateComputeFleet", self._update_compute_fleet),
                    methods=["PATCH"],
                ),
                Route(
                    cluster + "/instances",
                    self._operation("DescribeClusterInstances", self._describe_instances),
                    methods=["GET"],
                ),
                Route(PREFIX + "/config/{cluster_name}.yaml", self._cluster_config, methods=["GET"]),
            ],
            exception_handlers={404: self._no_such_route, 405: self._no_such_route},
        )

    # --- helpers for the sandbox and tests -----------------------------------------------------------

    @staticmethod
    def api_url(base_url: str, account_id: str, region: str) -> str:
        """The `parallelcluster_api` value for an org, given this app's base URL."""
        return f"{base_url.rstrip('/')}/pcluster/{account_id}/{region}"

    @property
    def checks_spec(self) -> bool:
        """Whether requests and answers are checked: always, since the emulator does not start without its spec."""
        return bool(self._checker.operations)

    def store_config(self, account_id: str, region: str, cluster_name: str, config_yaml: str) -> None:
        """Serve this YAML as the cluster's configuration instead of deriving one from its instances."""
        yaml.safe_load(config_yaml)  # refuse what the bot could not parse either
        self._configs[(account_id, region, cluster_name)] = config_yaml

    def reset_counters(self) -> None:
        self.requests.clear()

    def advance(self, account_id: str, region: str, cluster_name: str | None = None) -> str | None:
        """Finish now whatever is in progress for a cluster (every cluster of the account/region when no name):
        create, update, delete, compute fleet stop/start, with their effects on EC2.

        Returns the cluster's status afterwards (None once deleted, or when this API never touched it)."""
        now = self._clock()
        for state in list(self._states.values()):
            if (state.account_id, state.region) != (account_id, region):
                continue
            if cluster_name is not None and state.name != cluster_name:
                continue
            if state.due is not None:
                state.due = min(state.due, now)
            if state.fleet_target is not None:
                state.fleet_halfway = state.fleet_due = min(state.fleet_due or now, now)
        self._settle(account_id, region)
        if cluster_name is None:
            return None
        settled = self._states.get((account_id, region, cluster_name))
        return settled.status if settled else None

    def fail(
        self,
        account_id: str,
        region: str,
        cluster_name: str,
        reason: str = "Failed to run cluster configuration on the head node.",
        code: str = "HeadNodeBootstrapFailure",
    ) -> None:
        """Make the create or update in progress end in failure (CREATE_FAILED, rolled back unless the create
        said rollbackOnFailure=false; UPDATE_FAILED, the previous configuration restored)."""
        state = self._states.get((account_id, region, cluster_name))
        if state is None or state.status not in ("CREATE_IN_PROGRESS", "UPDATE_IN_PROGRESS"):
            raise ValueError(f"{cluster_name}: no create or update in progress to fail")
        state.failure = (code, reason)

    # --- auth ------------------------------------------------------------------------------------------

    def _authorize(self, request: Request, body: bytes = b"") -> Response | None:
        """None when the request may proceed, else API Gateway's refusal (IAM authorizer on every route)."""
        header = request.headers.get("authorization")
        if not header:
            return _forbidden("Missing Authentication Token", "MissingAuthenticationTokenException")
        if not request.headers.get("x-amz-date"):
            return _forbidden(
                "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header. "
                f"Authorization={header}",
                "IncompleteSignatureException",
            )
        match = AUTH_PATTERN.fullmatch(header.strip())
        if not match:
            return _forbidden(
                "Authorization header requires 'Credential' parameter. Authorization header requires "
                f"'Signature' parameter. Authorization={header}",
                "IncompleteSignatureException",
            )
        region = request.path_params["region"]
        if match["service"] != "execute-api":
            return _forbidden(
                "Credential should be scoped to correct service: 'execute-api'. ", "InvalidSignatureException"
            )
        if match["region"] != region:
            return _forbidden(
                f"Credential should be scoped to a valid region, not '{match['region']}'. ", "InvalidSignatureException"
            )
        key = self._signing_keys(match["key"], request.path_params["account_id"]) if self._signing_keys else None
        if key is None:
            return None
        if not hmac.compare_digest(self._signature(request, match, key, body), match["signature"]):
            return _forbidden(SIGNATURE_MISMATCH, "InvalidSignatureException")
        account_id = request.path_params["account_id"]
        if key.account_id != account_id:
            resource = f"arn:aws:execute-api:{region}:{account_id}:pcluster/prod/{request.method}{request.url.path}"
            return _forbidden(
                f"User: {key.principal_arn} is not authorized to perform: execute-api:Invoke on resource: {resource}",
                "AccessDeniedException",
            )
        return None

    @staticmethod
    def _signature(request: Request, match: re.Match[str], key: SigningKey, body: bytes = b"") -> str:
        """Recompute the SigV4 signature over exactly the bytes received and the headers the client signed."""
        raw_path = request.scope.get("raw_path") or request.url.path.encode()
        query = request.scope.get("query_string", b"")
        host = request.headers.get("host", "")
        url = f"{request.url.scheme}://{host}{raw_path.decode()}" + (f"?{query.decode()}" if query else "")
        headers = {name: request.headers.get(name, "") for name in match["headers"].split(";")}
        credentials = Credentials(match["key"], key.secret_access_key, request.headers.get("x-amz-security-token"))
        auth = SigV4Auth(credentials, match["service"], match["region"])
        signed = AWSRequest(method=request.method, url=url, headers=headers, data=body or None)
        signed.context["timestamp"] = request.headers["x-amz-date"]
        return str(auth.signature(auth.string_to_sign(signed, auth.canonical_request(signed)), signed))

    # --- requests and answers, checked against the spec ------------------------------------------------

    def _operation(self, operation_id: str, handler: _Handler) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            self.requests[request.url.path] += 1
            body = await request.body()
            if refusal := self._authorize(request, body):
                return refusal  # API Gateway's answer, before the API: not one the spec describes
            try:
                response = await handler(request, self._call(operation_id, request, body))
            except _Answer as answer:
                response = answer.response
            return self._checked(operation_id, response)

        endpoint.__name__ = operation_id
        return endpoint

    def _call(self, operation_id: str, request: Request, body: bytes) -> _Call:
        parsed: Any = None
        if request.method in ("POST", "PUT", "PATCH"):
            if not body:
                raise self._off_spec(operation_id, "request body is required")
            try:
                parsed = json.loads(body)
            except ValueError:
                raise self._off_spec(operation_id, "request body is not valid JSON") from None
        if operation_id in self._checker.operations:
            path_params = (
                {"clusterName": request.path_params["cluster_name"]} if "cluster_name" in request.path_params else {}
            )
            problem = self._checker.check_parameters(
                operation_id, path_params, request.query_params, strict=self._strict
            ) or self._checker.check_body(operation_id, parsed, strict=self._strict)
            if problem:
                raise self._off_spec(operation_id, problem)
        region = request.query_params.get("region") or request.path_params["region"]
        if not REGION_PATTERN.fullmatch(region):
            raise _bad_request(f"invalid region '{region}'")
        return _Call(request.path_params["account_id"], region, parsed)

    def _off_spec(self, operation_id: str, problem: str) -> _Answer:
        self.spec_violations.append(SpecViolation(operation_id, "request", 400, problem))
        logger.info("%s: request off the spec: %s", operation_id, problem)
        return _bad_request(problem)

    def _checked(self, operation_id: str, response: Response) -> Response:
        if operation_id not in self._checker.operations:
            return response
        problem = self._checker.check_response(operation_id, response.status_code, bytes(response.body))
        if problem is None:
            return response
        self.spec_violations.append(SpecViolation(operation_id, "response", response.status_code, problem))
        logger.error("%s: the emulator answered off the spec: %s", operation_id, problem)
        return JSONResponse({"message": f"Emulator answered off the spec: {problem}"}, status_code=500)

    # --- clusters: EC2 plus what this API did ----------------------------------------------------------

    def _clusters(self, account_id: str, region: str) -> dict[str, _Cluster]:
        self._settle(account_id, region)
        clusters: dict[str, _Cluster] = {}
        tagged: set[str] = set()
        for instance in self._instances(account_id, region):
            name = instance.tags.get(NAME_TAG)
            if not name:
                continue
            tagged.add(name)
            if instance.state not in GONE_STATES:
                clusters.setdefault(name, _Cluster(name)).instances.append(instance)
        for key, state in list(self._states.items()):
            if key[:2] != (account_id, region):
                continue
            if state.name not in tagged:  # EC2 no longer knows the cluster at all (moto was reset): forget it
                self._forget(key)
                continue
            clusters.setdefault(state.name, _Cluster(state.name)).state = state
        return dict(sorted(clusters.items()))

    def _cluster(self, call: _Call, name: str) -> _Cluster:
        cluster = self._clusters(call.account_id, call.region).get(name)
        if cluster is None:
            raise _not_found(name)
        return cluster

    def _forget(self, key: tuple[str, str, str]) -> None:
        self._states.pop(key, None)
        self._configs.pop(key, None)

    def _adopt(self, account_id: str, region: str, cluster: _Cluster) -> _ClusterState:
        """The state of a cluster known from EC2 alone, as CloudFormation would have it: created, running."""
        if cluster.state is not None:
            return cluster.state
        key = (account_id, region, cluster.name)
        head = cluster.head
        created = head.launch_time if head else min(i.launch_time for i in cluster.instances)
        text = self._configs.get(key) or cluster_config_yaml(region, cluster.instances)
        loaded = yaml.safe_load(text)
        state = _ClusterState(
            account_id=account_id,
            region=region,
            name=cluster.name,
            stack_arn=self._stack_arn(account_id, region, cluster.name),
            version=(head.tags.get(VERSION_TAG) if head else None) or self._version,
            created=created,
            updated=created,
            status="CREATE_COMPLETE",
            stack_status="CREATE_COMPLETE",
            config=loaded if isinstance(loaded, dict) else {},
            tags=dict(head.tags) if head else {},
            fleet="RUNNING",
            fleet_updated=created,
        )
        self._states[key] = state
        self._configs[key] = text
        cluster.state = state
        return state

    def _settle(self, account_id: str, region: str) -> None:
        """Apply what has come due: operations ending, compute fleets stopping or starting."""
        now = self._clock()
        for state in list(self._states.values()):
            if (state.account_id, state.region) != (account_id, region):
                continue
            steps: list[tuple[datetime, int]] = []
            if state.due is not None and state.due <= now:
                steps.append((state.due, 0))
            if state.fleet_target is not None and state.fleet_due is not None and state.fleet_due <= now:
                steps.append((state.fleet_due, 1))
            for _, step in sorted(steps):
                if step == 0:
                    self._finish_operation(state)
                elif state.key in self._states:
                    self._finish_fleet(state)
            if state.fleet_target is not None and state.fleet_halfway is not None and state.fleet_halfway <= now:
                state.fleet = "STOPPING" if state.fleet_target == "STOPPED" else "STARTING"

    def _finish_operation(self, state: _ClusterState) -> None:
        ended = state.due or self._clock()
        state.due, failure, state.failure = None, state.failure, None
        state.updated = ended
        if state.status == "DELETE_IN_PROGRESS":
            self._forget(state.key)
        elif state.status == "CREATE_IN_PROGRESS" and failure:
            state.status = "CREATE_FAILED"
            state.stack_status = "ROLLBACK_COMPLETE" if state.rollback else "CREATE_FAILED"
            state.failures = [{"failureCode": failure[0], "failureReason": failure[1]}]
            if state.rollback:
                self._terminate(state, lambda _: True)
        elif state.status == "CREATE_IN_PROGRESS":
            state.status = state.stack_status = "CREATE_COMPLETE"
            state.fleet, state.fleet_updated = "RUNNING", ended
            self._reconcile(state)
        elif state.status == "UPDATE_IN_PROGRESS" and failure:
            state.status, state.stack_status = "UPDATE_FAILED", "UPDATE_ROLLBACK_COMPLETE"
            if state.previous:
                state.config, self._configs[state.key] = state.previous
        elif state.status == "UPDATE_IN_PROGRESS":
            state.status = state.stack_status = "UPDATE_COMPLETE"
            if state.fleet == "RUNNING":
                self._reconcile(state)
        state.previous = None

    def _finish_fleet(self, state: _ClusterState) -> None:
        state.fleet, state.fleet_updated = state.fleet_target or state.fleet, state.fleet_due or self._clock()
        state.fleet_target = state.fleet_halfway = state.fleet_due = None
        self._reconcile(state)

    def _alive(self, state: _ClusterState) -> list[Ec2InstanceRecord]:
        return [
            i
            for i in self._instances(state.account_id, state.region)
            if i.tags.get(NAME_TAG) == state.name and i.state not in GONE_STATES
        ]

    def _terminate(self, state: _ClusterState, which: Callable[[Ec2InstanceRecord], bool]) -> None:
        doomed = [i.instance_id for i in self._alive(state) if which(i)]
        if doomed:
            self._ec2.terminate(state.account_id, state.region, doomed)

    def _reconcile(self, state: _ClusterState) -> None:
        """Bring the compute instances to MinCount per compute resource (none while the fleet is not RUNNING):
        static nodes only, as there are no jobs to start dynamic ones."""
        if state.status in ("DELETE_IN_PROGRESS", "CREATE_FAILED"):
            return
        wanted = _resources(state.config) if state.fleet == "RUNNING" else {}
        held: dict[tuple[str, str], list[Ec2InstanceRecord]] = defaultdict(list)
        doomed = []
        for instance in self._alive(state):
            if _node_type(instance.tags) != "ComputeNode":
                continue
            resource_name = instance.tags.get(COMPUTE_RESOURCE_TAG) or _resource_name(instance.instance_type)
            key = (instance.tags.get(QUEUE_TAG, "compute"), resource_name)
            resource = wanted.get(key)
            if resource is None or resource.instance_type != instance.instance_type:
                doomed.append(instance.instance_id)
            else:
                held[key].append(instance)
        for key, resource in wanted.items():
            have = sorted(held[key], key=lambda i: (i.launch_time, i.instance_id))
            doomed += [i.instance_id for i in have[resource.min_count :]]
            if len(have) < resource.min_count:
                self._launch_compute(state, resource, resource.min_count - len(have))
        if doomed:
            self._ec2.terminate(state.account_id, state.region, doomed)

    def _image(self, state: _ClusterState) -> str:
        custom = _mapping(state.config.get("Image")).get("CustomAmi")
        if isinstance(custom, str):
            return custom
        digest = hashlib.sha256(f"aws-parallelcluster-{state.version}-{state.region}".encode()).hexdigest()
        return f"ami-{digest[:17]}"

    def _launch_head(self, state: _ClusterState) -> dict[str, str]:
        head = _mapping(state.config.get("HeadNode"))
        tags = {
            **_tag_map(state.config.get("Tags")),
            "Name": "HeadNode",
            NAME_TAG: state.name,
            NODE_TYPE_TAG: "HeadNode",
            VERSION_TAG: state.version,
        }
        key_name = _mapping(head.get("Ssh")).get("KeyName")
        subnet = _mapping(head.get("Networking")).get("SubnetId")
        self._ec2.launch(
            state.account_id,
            state.region,
            LaunchSpec(
                instance_type=str(head.get("InstanceType")),
                count=1,
                tags=tags,
                image_id=self._image(state),
                subnet_id=subnet if isinstance(subnet, str) else None,
                key_name=key_name if isinstance(key_name, str) else None,
            ),
        )
        return tags

    def _launch_compute(self, state: _ClusterState, resource: _Resource, count: int) -> None:
        tags = {
            **_tag_map(state.config.get("Tags")),
            **resource.tags,
            "Name": "Compute",
            NAME_TAG: state.name,
            NODE_TYPE_TAG: "ComputeNode",  # what the seed writes; ParallelCluster's own "Compute" reads the same
            QUEUE_TAG: resource.queue,
            COMPUTE_RESOURCE_TAG: resource.name,
            VERSION_TAG: state.version,
        }
        key_name = _mapping(_mapping(state.config.get("HeadNode")).get("Ssh")).get("KeyName")
        self._ec2.launch(
            state.account_id,
            state.region,
            LaunchSpec(
                instance_type=resource.instance_type,
                count=count,
                tags=tags,
                image_id=self._image(state),
                subnet_id=resource.subnet_id,
                key_name=key_name if isinstance(key_name, str) else None,
            ),
        )

    @staticmethod
    def _stack_arn(account_id: str, region: str, name: str, stack_id: uuid.UUID | None = None) -> str:
        # A stable, made-up stack id for clusters known from EC2: the same cluster always gets the same ARN.
        stack_id = stack_id or uuid.uuid5(uuid.NAMESPACE_URL, f"pcluster:{account_id}:{region}:{name}")
        return f"arn:aws:cloudformation:{region}:{account_id}:stack/{name}/{stack_id}"

    def _summary(self, account_id: str, region: str, cluster: _Cluster) -> dict[str, Any]:
        state, head = cluster.state, cluster.head
        return {
            "clusterName": cluster.name,
            "region": region,
            "version": state.version if state else (head.tags.get(VERSION_TAG) if head else None) or self._version,
            "cloudformationStackArn": state.stack_arn if state else self._stack_arn(account_id, region, cluster.name),
            "cloudformationStackStatus": state.stack_status if state else "CREATE_COMPLETE",
            "clusterStatus": state.status if state else "CREATE_COMPLETE",
            "scheduler": {"type": "slurm"},
        }

    @staticmethod
    def _ec2_instance(instance: Ec2InstanceRecord) -> dict[str, Any]:
        out = {
            "instanceId": instance.instance_id,
            "instanceType": instance.instance_type,
            "launchTime": _iso(instance.launch_time),
            "privateIpAddress": instance.private_ip,
            "state": instance.state,
        }
        if instance.public_ip:
            out["publicIpAddress"] = instance.public_ip
        return out

    def _fleet(self, cluster: _Cluster) -> tuple[str, datetime]:
        if cluster.state:
            return cluster.state.fleet, cluster.state.fleet_updated
        head = cluster.head
        return "RUNNING", head.launch_time if head else min(i.launch_time for i in cluster.instances)

    def _validation_options(self, request: Request) -> tuple[str, list[str]]:
        level = request.query_params.get("validationFailureLevel", "ERROR")
        if level not in VALIDATION_LEVELS:
            raise _bad_request(f"validationFailureLevel must be one of {', '.join(VALIDATION_LEVELS)}")
        suppressed = request.query_params.getlist("suppressValidators")
        for value in suppressed:
            if not re.fullmatch(r"ALL|type:[A-Za-z0-9]+", value):
                raise _bad_request(f"suppressValidators: '{value}' is not ALL or type:<validator>")
        return level, suppressed

    # --- routes ----------------------------------------------------------------------------------------

    async def _list_clusters(self, request: Request, call: _Call) -> Response:
        clusters = self._clusters(call.account_id, call.region).values()
        summaries = [self._summary(call.account_id, call.region, c) for c in clusters]
        wanted = request.query_params.getlist("clusterStatus")
        if wanted:
            summaries = [s for s in summaries if s["clusterStatus"] in wanted]
        page = self._page(request, summaries, self._page_size)
        if isinstance(page, Response):
            return page
        items, token = page
        return JSONResponse({"clusters": items, **({"nextToken": token} if token else {})})

    async def _create_cluster(self, request: Request, call: _Call) -> Response:
        body = call.body if isinstance(call.body, dict) else {}
        name, text = body.get("clusterName"), body.get("clusterConfiguration")
        if not isinstance(name, str):
            raise _bad_request("clusterName is required")
        if not isinstance(text, str) or not text.strip():
            raise _bad_request("configuration is required and cannot be empty")
        dryrun = _bool_query(request, "dryrun", False)
        rollback = _bool_query(request, "rollbackOnFailure", True)
        level, suppressed = self._validation_options(request)
        config, messages = _check_config(text)
        messages = _check_name(name) + messages
        region = call.region
        if config is not None and isinstance(config.get("Region"), str):
            if "region" in request.query_params and config["Region"] != region:
                raise _bad_request(f"the region parameter ({region}) and the configuration's Region differ")
            region = config["Region"]
            if not REGION_PATTERN.fullmatch(region):
                raise _bad_request(f"invalid region '{region}'")
        failures, ignored = _sift(messages, level, suppressed)
        if config is None or failures:
            return JSONResponse(
                {"message": INVALID_CONFIG_MESSAGE, "configurationValidationErrors": failures}, status_code=400
            )
        if name in self._clusters(call.account_id, region):
            return _error(409, f"Cluster '{name}' already exists.")
        if dryrun:
            return JSONResponse({"message": DRYRUN_MESSAGE, "validationMessages": ignored}, status_code=412)
        now = self._clock()
        state = _ClusterState(
            account_id=call.account_id,
            region=region,
            name=name,
            stack_arn=self._stack_arn(call.account_id, region, name, uuid.uuid4()),
            version=self._version,
            created=now,
            updated=now,
            status="CREATE_IN_PROGRESS",
            stack_status="CREATE_IN_PROGRESS",
            config=config,
            tags={},
            fleet="UNKNOWN",  # until the head node reports one
            fleet_updated=now,
            rollback=rollback,
            due=now + self._progress,
        )
        state.tags = self._launch_head(state)
        for resource in _resources(config).values():
            if resource.min_count:
                self._launch_compute(state, resource, resource.min_count)
        self._states[state.key] = state
        self._configs[state.key] = text
        cluster = _Cluster(name, state=state)
        out: dict[str, Any] = {"cluster": self._summary(call.account_id, region, cluster)}
        if ignored:
            out["validationMessages"] = ignored
        return JSONResponse(out, status_code=202)

    async def _describe_cluster(self, request: Request, call: _Call) -> Response:
        name = request.path_params["cluster_name"]
        if not CLUSTER_NAME_PATTERN.fullmatch(name):
            return _error(400, f"Bad Request: invalid cluster name '{name}'")
        cluster = self._cluster(call, name)
        head, state = cluster.head, cluster.state
        if state:
            created, updated = state.created, state.updated
        else:
            created = head.launch_time if head else min(instance.launch_time for instance in cluster.instances)
            updated = created
        config_url = str(request.base_url).rstrip("/") + (
            f"/pcluster/{request.path_params['account_id']}/{call.region}/config/{name}.yaml"
        )
        summary = self._summary(call.account_id, call.region, cluster)
        # The spec spells it cloudformationStackStatus in summaries but cloudFormationStackStatus here.
        summary["cloudFormationStackStatus"] = summary.pop("cloudformationStackStatus")
        tags = head.tags if head else (state.tags if state else {})
        body = {
            **summary,
            "computeFleetStatus": self._fleet(cluster)[0],
            "creationTime": _iso(created),
            "lastUpdatedTime": _iso(updated),
            "clusterConfiguration": {"url": config_url},
            "tags": [{"key": k, "value": v} for k, v in sorted(tags.items())],
        }
        if head:
            body["headNode"] = self._ec2_instance(head)
        if state and state.status == "CREATE_FAILED":
            body["failures"] = state.failures
        return JSONResponse(body)

    async def _update_cluster(self, request: Request, call: _Call) -> Response:
        name = request.path_params["cluster_name"]
        body = call.body if isinstance(call.body, dict) else {}
        text = body.get("clusterConfiguration")
        if not isinstance(text, str) or not text.strip():
            raise _bad_request("configuration is required and cannot be empty")
        dryrun = _bool_query(request, "dryrun", False)
        force = _bool_query(request, "forceUpdate", False)
        level, suppressed = self._validation_options(request)
        cluster = self._cluster(call, name)
        state = self._adopt(call.account_id, call.region, cluster)
        if state.status not in UPDATABLE:
            return JSONResponse(
                {"message": f"Cluster '{name}' is in {state.status} status and cannot be updated until it is done."},
                status_code=400,
            )
        config, messages = _check_config(text)
        failures, ignored = _sift(messages, level, suppressed)
        if config is None or failures:
            return JSONResponse(
                {"message": INVALID_CONFIG_MESSAGE, "configurationValidationErrors": failures}, status_code=400
            )
        changes = _diff(state.config, config)
        change_set = [_change(*change) for change in changes]
        if not changes:
            return JSONResponse(
                {"message": "No changes found in your cluster configuration.", "changeSet": []}, status_code=400
            )
        errors = _update_errors(changes, state.config, config, fleet=state.fleet, force=force)
        if errors:
            fleet = f" while the compute fleet is {state.fleet}" if state.fleet != "STOPPED" else ""
            return JSONResponse(
                {
                    "message": f"Update failure: {len(errors)} of the requested changes cannot be applied{fleet}; "
                    "see updateValidationErrors for what to do.",
                    "changeSet": change_set,
                    "updateValidationErrors": errors,
                },
                status_code=400,
            )
        if dryrun:
            return JSONResponse(
                {"message": DRYRUN_MESSAGE, "changeSet": change_set, "validationMessages": ignored}, status_code=412
            )
        now = self._clock()
        state.previous = (state.config, self._configs.get(state.key, ""))
        state.config, self._configs[state.key] = config, text
        state.status = state.stack_status = "UPDATE_IN_PROGRESS"
        state.updated, state.due = now, now + self._progress
        out: dict[str, Any] = {"cluster": self._summary(call.account_id, call.region, cluster), "changeSet": change_set}
        if ignored:
            out["validationMessages"] = ignored
        return JSONResponse(out, status_code=202)

    async def _delete_cluster(self, request: Request, call: _Call) -> Response:
        name = request.path_params["cluster_name"]
        cluster = self._clusters(call.account_id, call.region).get(name)
        if cluster is None:
            return _error(
                404,
                f"Cluster '{name}' does not exist or belongs to an incompatible ParallelCluster major version. In case "
                "you have running instances belonging to a deleted cluster please use the DeleteClusterInstances API.",
            )
        state = self._adopt(call.account_id, call.region, cluster)
        if state.status != "DELETE_IN_PROGRESS":
            now = self._clock()
            self._terminate(state, lambda _: True)
            state.status = state.stack_status = "DELETE_IN_PROGRESS"
            state.updated, state.due, state.failure, state.previous = now, now + self._progress, None, None
            state.fleet_target = state.fleet_halfway = state.fleet_due = None
        return JSONResponse({"cluster": self._summary(call.account_id, call.region, cluster)}, status_code=202)

    async def _describe_compute_fleet(self, request: Request, call: _Call) -> Response:
        status, since = self._fleet(self._cluster(call, request.path_params["cluster_name"]))
        return JSONResponse({"status": status, "lastStatusUpdatedTime": _iso(since)})

    async def _update_compute_fleet(self, request: Request, call: _Call) -> Response:
        name = request.path_params["cluster_name"]
        wanted = call.body.get("status") if isinstance(call.body, dict) else None
        cluster = self._cluster(call, name)
        if wanted not in ("START_REQUESTED", "STOP_REQUESTED"):
            raise _bad_request(
                "the update compute fleet status can only be set to `START_REQUESTED` or `STOP_REQUESTED` for Slurm "
                "clusters."
            )
        state = self._adopt(call.account_id, call.region, cluster)
        if state.status in ("CREATE_IN_PROGRESS", "DELETE_IN_PROGRESS", "CREATE_FAILED"):
            raise _bad_request(f"the compute fleet of cluster '{name}' cannot be changed while it is {state.status}.")
        target = "STOPPED" if wanted == "STOP_REQUESTED" else "RUNNING"
        if state.fleet_target != target and (state.fleet_target is not None or state.fleet != target):
            now = self._clock()
            state.fleet, state.fleet_updated, state.fleet_target = wanted, now, target
            state.fleet_halfway, state.fleet_due = now + self._progress / 2, now + self._progress
        return Response(status_code=204)

    async def _describe_instances(self, request: Request, call: _Call) -> Response:
        node_type = request.query_params.get("nodeType")
        if node_type and node_type not in NODE_TYPES:
            return _error(400, f"Bad Request: nodeType must be one of {', '.join(NODE_TYPES)}")
        queue = request.query_params.get("queueName")
        cluster = self._clusters(call.account_id, call.region).get(request.path_params["cluster_name"])
        # The real operation does not look the stack up first: an unknown cluster has no instances.
        instances = cluster.instances if cluster else []
        selected = []
        for instance in instances:
            kind = _node_type(instance.tags)
            if (node_type and kind != node_type) or (queue and instance.tags.get(QUEUE_TAG) != queue):
                continue
            item = {**self._ec2_instance(instance), "nodeType": kind}
            if kind == "ComputeNode" and instance.tags.get(QUEUE_TAG):
                item["queueName"] = instance.tags[QUEUE_TAG]
            selected.append(item)
        selected.sort(
            key=lambda i: (NODE_TYPES.index(i["nodeType"]), i.get("queueName", ""), i["launchTime"], i["instanceId"])
        )
        page = self._page(request, selected, self._instance_page_size)
        if isinstance(page, Response):
            return page
        items, token = page
        return JSONResponse({"instances": items, **({"nextToken": token} if token else {})})

    async def _cluster_config(self, request: Request) -> Response:
        # In AWS this is a presigned S3 URL, so it carries no Authorization header and needs none.
        self.requests[request.url.path] += 1
        account_id, region = request.path_params["account_id"], request.path_params["region"]
        name = request.path_params["cluster_name"]
        clusters = self._clusters(account_id, region) if REGION_PATTERN.fullmatch(region) else {}
        stored = self._configs.get((account_id, region, name))
        if stored is not None:
            return PlainTextResponse(stored, media_type="application/x-yaml")
        cluster = clusters.get(name)
        if cluster is None:
            return Response(
                '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NoSuchKey</Code>'
                "<Message>The specified key does not exist.</Message></Error>",
                status_code=404,
                media_type="application/xml",
            )
        return PlainTextResponse(cluster_config_yaml(region, cluster.instances), media_type="application/x-yaml")

    async def _no_such_route(self, request: Request, exc: Exception) -> Response:
        # API Gateway answers an unknown resource or method like an unsigned request, even when signed.
        self.requests[request.url.path] += 1
        return _forbidden("Missing Authentication Token", "MissingAuthenticationTokenException")

    @staticmethod
    def _page(request: Request, items: list[dict[str, Any]], size: int) -> _Page | Response:
        token = request.query_params.get("nextToken")
        start = 0
        if token:
            decoded = _decode_token(token)
            if decoded is None:
                return _error(400, "Bad Request: invalid nextToken")
            start = decoded
        end = start + size
        return items[start:end], (_encode_token(end) if end < len(items) else None)


def _resource_name(instance_type: str) -> str:
    # ComputeResource names allow lowercase letters, digits and hyphens: p5.48xlarge -> p5-48xlarge.
    return re.sub(r"[^a-z0-9-]", "-", instance_type.lower())


def cluster_config_yaml(region: str, instances: Iterable[Ec2InstanceRecord]) -> str:
    """A ParallelCluster v3 configuration that would have built these instances.

    Each queue/instance type becomes a compute resource with MinCount = MaxCount = the instances it has
    now (static nodes, as the reference templates use), EFA on, on-demand capacity.
    """
    head: Ec2InstanceRecord | None = None
    queues: dict[str, dict[tuple[str, str], int]] = defaultdict(lambda: defaultdict(int))
    subnets: dict[str, str] = {}
    for instance in instances:
        kind = _node_type(instance.tags)
        if kind == "HeadNode":
            head = instance
        elif kind == "ComputeNode":
            queue_name = instance.tags.get(QUEUE_TAG, "compute")
            resource = instance.tags.get(COMPUTE_RESOURCE_TAG) or _resource_name(instance.instance_type)
            queues[queue_name][(resource, instance.instance_type)] += 1
            if instance.subnet_id:
                subnets.setdefault(queue_name, instance.subnet_id)
    config: dict[str, Any] = {"Region": region, "Image": {"Os": "ubuntu2204"}}
    if head:
        head_node: dict[str, Any] = {"InstanceType": head.instance_type}
        if head.subnet_id:
            head_node["Networking"] = {"SubnetId": head.subnet_id}
        if head.key_name:
            head_node["Ssh"] = {"KeyName": head.key_name}
        config["HeadNode"] = head_node
    slurm_queues = []
    for queue_name, resources in sorted(queues.items()):
        queue: dict[str, Any] = {"Name": queue_name, "CapacityType": "ONDEMAND"}
        networking: dict[str, Any] = {"PlacementGroup": {"Enabled": False}}
        if queue_name in subnets:
            networking["SubnetIds"] = [subnets[queue_name]]
        queue["Networking"] = networking
        queue["ComputeResources"] = [
            {"Name": name, "InstanceType": itype, "MinCount": count, "MaxCount": count, "Efa": {"Enabled": True}}
            for (name, itype), count in sorted(resources.items())
        ]
        slurm_queues.append(queue)
    config["Scheduling"] = {
        "Scheduler": "slurm",
        "SlurmSettings": {"QueueUpdateStrategy": "DRAIN"},
        "SlurmQueues": slurm_queues,
    }
    return str(yaml.safe_dump(config, sort_keys=False))
