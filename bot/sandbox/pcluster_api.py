"""A stand-in for the AWS ParallelCluster REST API (v3.12), one per account and region, for the sandbox.

The real API is an API Gateway in the org's account, SigV4-signed for `execute-api`, backed by
CloudFormation stacks. Here a cluster is what EC2 says it is: the instances tagged
`parallelcluster:cluster-name`, read from moto's in-process EC2 backend by default. Every org's API
lives under one server at `/pcluster/{account_id}/{region}`, so the sandbox sets an org's
`parallelcluster_api` to e.g. `http://127.0.0.1:PORT/pcluster/111111111111/us-east-1`.

Served (shapes from /work/shared/specs/parallelcluster-api-3.12.openapi.yaml):
  GET  .../v3/clusters                          ListClusters (region, nextToken, clusterStatus)
  GET  .../v3/clusters/{clusterName}            DescribeCluster (404 when unknown)
  GET  .../v3/clusters/{clusterName}/instances  DescribeClusterInstances (nextToken, nodeType, queueName)
  GET  .../config/{clusterName}.yaml            the cluster configuration (a presigned S3 URL in AWS)
Anything else answers as API Gateway does for a resource it does not have: 403 Missing Authentication Token.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import re
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import yaml
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

__all__ = [
    "PCLUSTER_VERSION",
    "Ec2InstanceRecord",
    "ParallelClusterApi",
    "SigningKey",
    "moto_instances",
    "moto_signing_key",
]

PCLUSTER_VERSION = "3.12.0"
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
AUTH_PATTERN = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/,\s]+)/(?P<date>\d{8})/(?P<region>[^/]+)/(?P<service>[^/]+)/aws4_request,"
    r"\s*SignedHeaders=(?P<headers>[a-z0-9;-]+),\s*Signature=(?P<signature>[0-9a-f]{64})"
)
SIGNATURE_MISMATCH = (
    "The request signature we calculated does not match the signature you provided. Check your AWS Secret "
    "Access Key and signing method. Consult the service documentation for details."
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


@dataclass
class _Cluster:
    name: str
    instances: list[Ec2InstanceRecord] = field(default_factory=list)

    @property
    def head(self) -> Ec2InstanceRecord | None:
        return next((i for i in self.instances if _node_type(i.tags) == "HeadNode"), None)


class ParallelClusterApi(Starlette):
    """ASGI app emulating every org's ParallelCluster API; see the module docstring for the routes.

    instances: reads EC2 instances of an (account, region); moto's in-process backend by default.
    signing_keys: finds the secret of an access key, to check signatures and that the caller is in the
        API's account; moto's STS by default. Requests are refused like API Gateway refuses them.
    """

    def __init__(
        self,
        *,
        instances: InstanceSource = moto_instances,
        signing_keys: SigningKeyLookup | None = moto_signing_key,
        page_size: int = 10,
        instance_page_size: int = 50,
        version: str = PCLUSTER_VERSION,
    ) -> None:
        self._instances = instances
        self._signing_keys = signing_keys
        self._page_size = page_size
        self._instance_page_size = instance_page_size
        self._version = version
        self._configs: dict[tuple[str, str, str], str] = {}
        # Requests seen, by URL path (query excluded), for tests and the sandbox status line.
        self.requests: Counter[str] = Counter()
        super().__init__(
            routes=[
                Route(PREFIX + "/v3/clusters", self._list_clusters, methods=["GET"]),
                Route(PREFIX + "/v3/clusters/{cluster_name}", self._describe_cluster, methods=["GET"]),
                Route(PREFIX + "/v3/clusters/{cluster_name}/instances", self._describe_instances, methods=["GET"]),
                Route(PREFIX + "/config/{cluster_name}.yaml", self._cluster_config, methods=["GET"]),
            ],
            exception_handlers={404: self._no_such_route, 405: self._no_such_route},
        )

    # --- helpers for the sandbox and tests -----------------------------------------------------------

    @staticmethod
    def api_url(base_url: str, account_id: str, region: str) -> str:
        """The `parallelcluster_api` value for an org, given this app's base URL."""
        return f"{base_url.rstrip('/')}/pcluster/{account_id}/{region}"

    def store_config(self, account_id: str, region: str, cluster_name: str, config_yaml: str) -> None:
        """Serve this YAML as the cluster's configuration instead of deriving one from its instances."""
        yaml.safe_load(config_yaml)  # refuse what the bot could not parse either
        self._configs[(account_id, region, cluster_name)] = config_yaml

    def reset_counters(self) -> None:
        self.requests.clear()

    # --- auth ------------------------------------------------------------------------------------------

    def _authorize(self, request: Request) -> Response | None:
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
        if not hmac.compare_digest(self._signature(request, match, key), match["signature"]):
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
    def _signature(request: Request, match: re.Match[str], key: SigningKey) -> str:
        """Recompute the SigV4 signature over exactly the bytes received and the headers the client signed."""
        raw_path = request.scope.get("raw_path") or request.url.path.encode()
        query = request.scope.get("query_string", b"")
        host = request.headers.get("host", "")
        url = f"{request.url.scheme}://{host}{raw_path.decode()}" + (f"?{query.decode()}" if query else "")
        headers = {name: request.headers.get(name, "") for name in match["headers"].split(";")}
        credentials = Credentials(match["key"], key.secret_access_key, request.headers.get("x-amz-security-token"))
        auth = SigV4Auth(credentials, match["service"], match["region"])
        signed = AWSRequest(method=request.method, url=url, headers=headers)
        signed.context["timestamp"] = request.headers["x-amz-date"]
        return str(auth.signature(auth.string_to_sign(signed, auth.canonical_request(signed)), signed))

    # --- clusters from EC2 -----------------------------------------------------------------------------

    def _clusters(self, account_id: str, region: str) -> dict[str, _Cluster]:
        clusters: dict[str, _Cluster] = {}
        for instance in self._instances(account_id, region):
            name = instance.tags.get(NAME_TAG)
            if name and instance.state not in GONE_STATES:
                clusters.setdefault(name, _Cluster(name)).instances.append(instance)
        return dict(sorted(clusters.items()))

    @staticmethod
    def _stack_arn(account_id: str, region: str, name: str) -> str:
        # A stable, made-up stack id: the same cluster always gets the same ARN.
        stack_id = uuid.uuid5(uuid.NAMESPACE_URL, f"pcluster:{account_id}:{region}:{name}")
        return f"arn:aws:cloudformation:{region}:{account_id}:stack/{name}/{stack_id}"

    def _summary(self, account_id: str, region: str, cluster: _Cluster) -> dict[str, Any]:
        head = cluster.head
        return {
            "clusterName": cluster.name,
            "region": region,
            "version": (head.tags.get(VERSION_TAG) if head else None) or self._version,
            "cloudformationStackArn": self._stack_arn(account_id, region, cluster.name),
            "cloudformationStackStatus": "CREATE_COMPLETE",
            "clusterStatus": "CREATE_COMPLETE",
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

    def _region(self, request: Request) -> str | Response:
        region = request.query_params.get("region") or request.path_params["region"]
        if not REGION_PATTERN.fullmatch(region):
            return _error(400, f"Bad Request: invalid region '{region}'")
        return region

    # --- routes ----------------------------------------------------------------------------------------

    async def _list_clusters(self, request: Request) -> Response:
        self.requests[request.url.path] += 1
        if refusal := self._authorize(request):
            return refusal
        region = self._region(request)
        if isinstance(region, Response):
            return region
        account_id = request.path_params["account_id"]
        summaries = [self._summary(account_id, region, c) for c in self._clusters(account_id, region).values()]
        wanted = request.query_params.getlist("clusterStatus")
        if wanted:
            summaries = [s for s in summaries if s["clusterStatus"] in wanted]
        page = self._page(request, summaries, self._page_size)
        if isinstance(page, Response):
            return page
        items, token = page
        return JSONResponse({"clusters": items, **({"nextToken": token} if token else {})})

    async def _describe_cluster(self, request: Request) -> Response:
        self.requests[request.url.path] += 1
        if refusal := self._authorize(request):
            return refusal
        region = self._region(request)
        if isinstance(region, Response):
            return region
        account_id, name = request.path_params["account_id"], request.path_params["cluster_name"]
        if not CLUSTER_NAME_PATTERN.fullmatch(name):
            return _error(400, f"Bad Request: invalid cluster name '{name}'")
        cluster = self._clusters(account_id, region).get(name)
        if cluster is None:
            return _error(
                404, f"Cluster '{name}' does not exist or belongs to an incompatible ParallelCluster major version."
            )
        head = cluster.head
        launched = [instance.launch_time for instance in cluster.instances]
        created = head.launch_time if head else min(launched)
        config_url = str(request.base_url).rstrip("/") + (
            f"/pcluster/{request.path_params['account_id']}/{request.path_params['region']}/config/{name}.yaml"
        )
        summary = self._summary(account_id, region, cluster)
        # The spec spells it cloudformationStackStatus in summaries but cloudFormationStackStatus here.
        summary["cloudFormationStackStatus"] = summary.pop("cloudformationStackStatus")
        body = {
            **summary,
            "computeFleetStatus": "RUNNING",
            "creationTime": _iso(created),
            "lastUpdatedTime": _iso(created),
            "clusterConfiguration": {"url": config_url},
            "tags": [{"key": k, "value": v} for k, v in sorted((head.tags if head else {}).items())],
        }
        if head:
            body["headNode"] = self._ec2_instance(head)
        return JSONResponse(body)

    async def _describe_instances(self, request: Request) -> Response:
        self.requests[request.url.path] += 1
        if refusal := self._authorize(request):
            return refusal
        region = self._region(request)
        if isinstance(region, Response):
            return region
        node_type = request.query_params.get("nodeType")
        if node_type and node_type not in NODE_TYPES:
            return _error(400, f"Bad Request: nodeType must be one of {', '.join(NODE_TYPES)}")
        queue = request.query_params.get("queueName")
        cluster = self._clusters(request.path_params["account_id"], region).get(request.path_params["cluster_name"])
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
        stored = self._configs.get((account_id, region, name))
        if stored is not None:
            return PlainTextResponse(stored, media_type="application/x-yaml")
        cluster = self._clusters(account_id, region).get(name)
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
