"""The ParallelCluster API emulator: spec-shaped answers, SigV4 like API Gateway, pagination, YAML."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import boto3
import httpx
import pytest
import yaml
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from jsonschema import Draft7Validator

from sandbox.asgi_server import serve_asgi
from sandbox.moto_support import reset_moto_server
from sandbox.pcluster_api import DEFAULT_SPEC_PATH, ParallelClusterApi, cluster_config_yaml, load_spec_checker

ACCOUNT_A, ACCOUNT_B = "111111111111", "222222222222"
REGION = "us-east-1"
# The copy in the repository (sandbox/specs/README.md names its source), the one the emulator loads.
SPEC = DEFAULT_SPEC_PATH


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(SPEC.read_text())  # missing spec: a failure, never a silent skip
    return loaded


def _check(spec: dict[str, Any], schema: str, body: Any) -> None:
    """Validate against a component schema, its $refs resolved within the spec document."""
    validator = Draft7Validator({"$ref": f"#/components/schemas/{schema}", "components": spec["components"]})
    errors = sorted(validator.iter_errors(body), key=str)
    assert not errors, f"{schema}: " + "; ".join(error.message for error in errors[:5])


@pytest.fixture(autouse=True)
def _fresh(endpoint: str) -> None:
    reset_moto_server(endpoint)


def _assume(endpoint: str, account: str) -> Credentials:
    sts = boto3.client("sts", region_name=REGION, endpoint_url=endpoint)
    issued = sts.assume_role(
        RoleArn=f"arn:aws:iam::{account}:role/PitcrewOps", RoleSessionName="pitcrew", ExternalId="pitcrew-test"
    )["Credentials"]
    return Credentials(issued["AccessKeyId"], issued["SecretAccessKey"], issued["SessionToken"])


@pytest.fixture
def creds_a(endpoint: str) -> Credentials:
    return _assume(endpoint, ACCOUNT_A)


@pytest.fixture
def ec2_a(endpoint: str, creds_a: Credentials) -> Any:
    return boto3.client(
        "ec2",
        region_name=REGION,
        endpoint_url=endpoint,
        aws_access_key_id=creds_a.access_key,
        aws_secret_access_key=creds_a.secret_key,
        aws_session_token=creds_a.token,
    )


@pytest.fixture
async def served() -> AsyncIterator[tuple[ParallelClusterApi, str]]:
    api = ParallelClusterApi()
    assert api.checks_spec
    async with serve_asgi(api) as base:
        yield api, base
    # Whatever a test sent, the emulator itself never answered off the spec.
    assert [v for v in api.spec_violations if v.direction == "response"] == []


def _launch(
    ec2: Any, name: str, compute: int = 2, *, queue: str = "compute-gpu", instance_type: str = "p5.48xlarge"
) -> list[str]:
    """A ParallelCluster cluster as EC2 sees it; returns the compute instance ids."""

    def tags(extra: dict[str, str]) -> list[dict[str, Any]]:
        pairs = {"parallelcluster:cluster-name": name, "pitcrew:org": "kumo-labs", **extra}
        return [{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in pairs.items()]}]

    ec2.run_instances(
        ImageId="ami-0123456789abcdef0",
        InstanceType="m5.8xlarge",
        MinCount=1,
        MaxCount=1,
        TagSpecifications=tags({"Name": "HeadNode", "parallelcluster:node-type": "HeadNode"}),
    )
    if not compute:
        return []
    launched = ec2.run_instances(
        ImageId="ami-0123456789abcdef0",
        InstanceType=instance_type,
        MinCount=compute,
        MaxCount=compute,
        TagSpecifications=tags(
            {"Name": "Compute", "parallelcluster:node-type": "ComputeNode", "parallelcluster:queue-name": queue}
        ),
    )
    return [instance["InstanceId"] for instance in launched["Instances"]]


async def _get(
    http: httpx.AsyncClient,
    url: str,
    creds: Credentials | None,
    params: dict[str, str] | None = None,
    *,
    service: str = "execute-api",
    region: str = REGION,
) -> httpx.Response:
    """GET signed as botocore signs for API Gateway (or unsigned when creds is None)."""
    full = f"{url}?{urlencode(sorted(params.items()))}" if params else url
    headers = {"Accept": "application/json"}
    if creds is not None:
        request = AWSRequest(method="GET", url=full, headers=headers)
        SigV4Auth(creds, service, region).add_auth(request)
        headers = dict(request.headers.items())
    return await http.get(full, headers=headers)


async def _all_pages(
    http: httpx.AsyncClient,
    url: str,
    creds: Credentials,
    key: str,
    spec: dict[str, Any],
    schema: str,
    params: dict[str, str] | None = None,
) -> tuple[list[dict[str, Any]], int]:
    items: list[dict[str, Any]] = []
    token: str | None = None
    pages = 0
    while True:
        response = await _get(http, url, creds, {**(params or {}), **({"nextToken": token} if token else {})})
        assert response.status_code == 200, response.text
        body = response.json()
        _check(spec, schema, body)
        pages += 1
        items += body[key]
        token = body.get("nextToken")
        if not token:
            return items, pages


async def test_unsigned_requests_get_missing_authentication_token(
    served: tuple[ParallelClusterApi, str], creds_a: Credentials
) -> None:
    api, base = served
    url = api.api_url(base, ACCOUNT_A, REGION) + "/v3/clusters"
    async with httpx.AsyncClient() as http:
        response = await _get(http, url, None)
        assert response.status_code == 403
        assert response.json() == {"message": "Missing Authentication Token"}
        assert response.headers["x-amzn-ErrorType"] == "MissingAuthenticationTokenException"

        request = AWSRequest(method="GET", url=url, headers={})
        SigV4Auth(creds_a, "execute-api", REGION).add_auth(request)
        no_date = {k: v for k, v in request.headers.items() if k.lower() != "x-amz-date"}
        response = await http.get(url, headers=no_date)
        assert response.status_code == 403
        assert "X-Amz-Date" in response.json()["message"]

        response = await http.get(url, headers={"Authorization": "Bearer abc", "X-Amz-Date": "20260101T000000Z"})
        assert response.status_code == 403


async def test_signatures_are_checked(
    served: tuple[ParallelClusterApi, str], endpoint: str, creds_a: Credentials
) -> None:
    api, base = served
    url = api.api_url(base, ACCOUNT_A, REGION) + "/v3/clusters"
    async with httpx.AsyncClient() as http:
        assert (await _get(http, url, creds_a)).status_code == 200
        wrong_service = await _get(http, url, creds_a, service="sagemaker")
        assert wrong_service.status_code == 403
        assert "execute-api" in wrong_service.json()["message"]
        wrong_region = await _get(http, url, creds_a, region="us-west-2")
        assert wrong_region.status_code == 403

        wrong_secret = Credentials(creds_a.access_key, "not-the-secret", creds_a.token)
        mismatch = await _get(http, url, wrong_secret)
        assert mismatch.status_code == 403
        assert mismatch.json()["message"].startswith("The request signature we calculated does not match")

        # Signed for one query, sent with another: API Gateway recomputes over what it received.
        request = AWSRequest(method="GET", url=url + "?region=us-east-1", headers={})
        SigV4Auth(creds_a, "execute-api", REGION).add_auth(request)
        tampered = await http.get(url + "?region=us-west-2", headers=dict(request.headers.items()))
        assert tampered.status_code == 403

        other_account = await _get(http, url, _assume(endpoint, ACCOUNT_B))
        assert other_account.status_code == 403
        assert "is not authorized to perform: execute-api:Invoke" in other_account.json()["message"]

        # Keys moto did not issue (the static test keys) cannot be checked; their shape is enough.
        assert (await _get(http, url, Credentials("testing", "testing"))).status_code == 200


async def test_list_clusters_paginates_and_validates(
    served: tuple[ParallelClusterApi, str], spec: dict[str, Any], ec2_a: Any, creds_a: Credentials, endpoint: str
) -> None:
    api, base = served
    names = [f"cluster-{i:02d}" for i in range(23)]
    for name in names:
        _launch(ec2_a, name, compute=0)
    gone = _launch(ec2_a, "deleted-cluster", compute=1)
    ec2_a.terminate_instances(InstanceIds=gone)
    head_of_gone = [
        i["InstanceId"]
        for r in ec2_a.describe_instances(
            Filters=[{"Name": "tag:parallelcluster:cluster-name", "Values": ["deleted-cluster"]}]
        )["Reservations"]
        for i in r["Instances"]
    ]
    ec2_a.terminate_instances(InstanceIds=head_of_gone)
    ec2_a.run_instances(ImageId="ami-0123456789abcdef0", InstanceType="m5.large", MinCount=1, MaxCount=1)

    url = api.api_url(base, ACCOUNT_A, REGION) + "/v3/clusters"
    async with httpx.AsyncClient() as http:
        clusters, pages = await _all_pages(http, url, creds_a, "clusters", spec, "ListClustersResponseContent")
        assert sorted(c["clusterName"] for c in clusters) == names
        assert pages == 3
        assert {c["clusterStatus"] for c in clusters} == {"CREATE_COMPLETE"}
        assert {c["region"] for c in clusters} == {REGION}
        filtered = await _get(http, url, creds_a, {"clusterStatus": "DELETE_IN_PROGRESS"})
        assert filtered.json() == {"clusters": []}

        # Each account and region is its own API.
        url_b = api.api_url(base, ACCOUNT_B, REGION) + "/v3/clusters"
        response = await _get(http, url_b, _assume(endpoint, ACCOUNT_B))
        assert response.json() == {"clusters": []}
        other_region = await _get(http, url, creds_a, {"region": "us-west-2"})
        assert other_region.json() == {"clusters": []}


async def test_describe_cluster(
    served: tuple[ParallelClusterApi, str], spec: dict[str, Any], ec2_a: Any, creds_a: Credentials
) -> None:
    api, base = served
    _launch(ec2_a, "kumo-p5-dev", compute=4)
    url = api.api_url(base, ACCOUNT_A, REGION) + "/v3/clusters/kumo-p5-dev"
    async with httpx.AsyncClient() as http:
        response = await _get(http, url, creds_a, {"region": REGION})
        assert response.status_code == 200
        body = response.json()
        _check(spec, "DescribeClusterResponseContent", body)
        assert body["clusterName"] == "kumo-p5-dev"
        assert body["clusterStatus"] == "CREATE_COMPLETE"
        assert body["cloudFormationStackStatus"] == "CREATE_COMPLETE"
        assert body["computeFleetStatus"] == "RUNNING"
        assert body["version"] == "3.12.0"
        assert body["scheduler"] == {"type": "slurm"}
        assert body["cloudformationStackArn"].startswith(
            f"arn:aws:cloudformation:{REGION}:{ACCOUNT_A}:stack/kumo-p5-dev/"
        )
        assert body["headNode"]["instanceType"] == "m5.8xlarge"
        assert body["headNode"]["state"] == "running"
        datetime.fromisoformat(body["creationTime"].replace("Z", "+00:00"))
        tags = {tag["key"]: tag["value"] for tag in body["tags"]}
        assert tags["pitcrew:org"] == "kumo-labs"
        assert tags["parallelcluster:cluster-name"] == "kumo-p5-dev"

        # The configuration URL is presigned in AWS: fetched without signing.
        config_response = await http.get(body["clusterConfiguration"]["url"])
        assert config_response.status_code == 200
        config = yaml.safe_load(config_response.text)
        assert config["Region"] == REGION
        assert config["HeadNode"]["InstanceType"] == "m5.8xlarge"
        assert config["Scheduling"]["Scheduler"] == "slurm"
        [queue] = config["Scheduling"]["SlurmQueues"]
        assert queue["Name"] == "compute-gpu"
        assert queue["CapacityType"] == "ONDEMAND"
        [resource] = queue["ComputeResources"]
        assert resource["InstanceType"] == "p5.48xlarge"
        assert resource["MinCount"] == resource["MaxCount"] == 4
        assert resource["Efa"] == {"Enabled": True}

        missing = await _get(http, api.api_url(base, ACCOUNT_A, REGION) + "/v3/clusters/nope", creds_a)
        assert missing.status_code == 404
        _check(spec, "NotFoundExceptionResponseContent", missing.json())
        assert "nope" in missing.json()["message"]
        missing_config = await http.get(api.api_url(base, ACCOUNT_A, REGION) + "/config/nope.yaml")
        assert missing_config.status_code == 404


async def test_stored_configuration_wins(served: tuple[ParallelClusterApi, str], ec2_a: Any) -> None:
    api, base = served
    _launch(ec2_a, "kumo-p5-dev", compute=2)
    stored = "Region: us-east-1\nScheduling:\n  Scheduler: slurm\n  SlurmQueues: []\n"
    api.store_config(ACCOUNT_A, REGION, "kumo-p5-dev", stored)
    async with httpx.AsyncClient() as http:
        response = await http.get(api.api_url(base, ACCOUNT_A, REGION) + "/config/kumo-p5-dev.yaml")
    assert response.text == stored
    with pytest.raises(yaml.YAMLError):
        api.store_config(ACCOUNT_A, REGION, "x", "a: [unclosed")


async def test_describe_instances_paginates_130(
    served: tuple[ParallelClusterApi, str], spec: dict[str, Any], ec2_a: Any, creds_a: Credentials
) -> None:
    api, base = served
    compute = _launch(ec2_a, "fuji-p5-pretrain", compute=100)
    compute += _launch_queue(ec2_a, "fuji-p5-pretrain", "compute-trn", 30)
    ec2_a.stop_instances(InstanceIds=[compute[5]])
    ec2_a.terminate_instances(InstanceIds=[compute[6]])
    url = api.api_url(base, ACCOUNT_A, REGION) + "/v3/clusters/fuji-p5-pretrain/instances"
    schema = "DescribeClusterInstancesResponseContent"
    async with httpx.AsyncClient() as http:
        instances, pages = await _all_pages(http, url, creds_a, "instances", spec, schema)
        ids = [instance["instanceId"] for instance in instances]
        assert len(ids) == len(set(ids)) == 130  # head node + 130 compute - 1 terminated
        assert pages == 3
        assert instances[0]["nodeType"] == "HeadNode"
        assert "queueName" not in instances[0]
        by_id = {instance["instanceId"]: instance for instance in instances}
        assert by_id[compute[5]]["state"] == "stopped"
        assert compute[6] not in by_id
        assert {instance["queueName"] for instance in instances[1:]} == {"compute-gpu", "compute-trn"}

        only_compute, _ = await _all_pages(http, url, creds_a, "instances", spec, schema, {"nodeType": "ComputeNode"})
        assert len(only_compute) == 129
        only_head, _ = await _all_pages(http, url, creds_a, "instances", spec, schema, {"nodeType": "HeadNode"})
        assert [instance["instanceType"] for instance in only_head] == ["m5.8xlarge"]
        trn, _ = await _all_pages(http, url, creds_a, "instances", spec, schema, {"queueName": "compute-trn"})
        assert len(trn) == 30
        assert {instance["instanceType"] for instance in trn} == {"trn1.32xlarge"}

        bad = await _get(http, url, creds_a, {"nodeType": "Worker"})
        assert bad.status_code == 400
        _check(spec, "BadRequestExceptionResponseContent", bad.json())
        bad_token = await _get(http, url, creds_a, {"nextToken": "garbage!"})
        assert bad_token.status_code == 400

        unknown = await _get(http, api.api_url(base, ACCOUNT_A, REGION) + "/v3/clusters/nope/instances", creds_a)
        assert unknown.status_code == 200
        assert unknown.json() == {"instances": []}


def _launch_queue(ec2: Any, name: str, queue: str, count: int) -> list[str]:
    launched = ec2.run_instances(
        ImageId="ami-0123456789abcdef0",
        InstanceType="trn1.32xlarge",
        MinCount=count,
        MaxCount=count,
        TagSpecifications=[
            {
                "ResourceType": "instance",
                "Tags": [
                    {"Key": "parallelcluster:cluster-name", "Value": name},
                    {"Key": "parallelcluster:node-type", "Value": "Compute"},  # what ParallelCluster itself writes
                    {"Key": "parallelcluster:queue-name", "Value": queue},
                ],
            }
        ],
    )
    return [instance["InstanceId"] for instance in launched["Instances"]]


async def test_unknown_routes_answer_like_api_gateway(
    served: tuple[ParallelClusterApi, str], creds_a: Credentials
) -> None:
    api, base = served
    root = api.api_url(base, ACCOUNT_A, REGION)
    async with httpx.AsyncClient() as http:
        for path in ("/v3/nothing", "/v2/clusters", "/v3/clusters/a/b/c"):
            response = await _get(http, root + path, creds_a)
            assert response.status_code == 403
            assert response.json() == {"message": "Missing Authentication Token"}
        # A method the resource does not have (DELETE /v3/clusters/{name} is DeleteCluster now).
        request = AWSRequest(method="PATCH", url=root + "/v3/clusters/x1", headers={})
        SigV4Auth(creds_a, "execute-api", REGION).add_auth(request)
        response = await http.patch(root + "/v3/clusters/x1", headers=dict(request.headers.items()))
        assert response.status_code == 403
        assert response.json() == {"message": "Missing Authentication Token"}


async def test_request_counters(served: tuple[ParallelClusterApi, str], creds_a: Credentials, ec2_a: Any) -> None:
    api, base = served
    _launch(ec2_a, "c1", compute=1)
    root = api.api_url(base, ACCOUNT_A, REGION)
    path = f"/pcluster/{ACCOUNT_A}/{REGION}"
    async with httpx.AsyncClient() as http:
        await _get(http, root + "/v3/clusters", creds_a)
        await _get(http, root + "/v3/clusters", None)
        await _get(http, root + "/v3/clusters/c1", creds_a)
        await _get(http, root + "/v3/clusters/c1/instances", creds_a)
    assert api.requests[path + "/v3/clusters"] == 2
    assert api.requests[path + "/v3/clusters/c1"] == 1
    assert api.requests[path + "/v3/clusters/c1/instances"] == 1
    api.reset_counters()
    assert not api.requests


def test_config_yaml_from_instances_alone() -> None:
    from sandbox.pcluster_api import Ec2InstanceRecord

    now = datetime(2026, 11, 30, 0, 0)
    head = Ec2InstanceRecord(
        "i-0", "m5.8xlarge", "running", now, "10.0.0.1", {"parallelcluster:node-type": "HeadNode"}, subnet_id="subnet-1"
    )
    workers = [
        Ec2InstanceRecord(
            f"i-{n}",
            "p5.48xlarge",
            "running",
            now,
            "10.0.0.2",
            {"parallelcluster:node-type": "ComputeNode", "parallelcluster:queue-name": "gpu"},
        )
        for n in range(1, 4)
    ]
    config = yaml.safe_load(cluster_config_yaml("ap-northeast-1", [head, *workers]))
    assert config["HeadNode"] == {"InstanceType": "m5.8xlarge", "Networking": {"SubnetId": "subnet-1"}}
    [queue] = config["Scheduling"]["SlurmQueues"]
    assert queue["ComputeResources"] == [
        {"Name": "p5-48xlarge", "InstanceType": "p5.48xlarge", "MinCount": 3, "MaxCount": 3, "Efa": {"Enabled": True}}
    ]


async def test_the_bots_backend_reads_the_emulator(
    served: tuple[ParallelClusterApi, str], ec2_a: Any, creds_a: Credentials
) -> None:
    """Pitcrew's own ParallelCluster client signs, pages and parses what the emulator serves."""
    from bot.clusters.parallelcluster import ParallelClusterApiBackend

    api, base = served
    compute = _launch(ec2_a, "kumo-p5-dev", compute=60)
    ec2_a.stop_instances(InstanceIds=[compute[0]])

    def read() -> Any:
        with httpx.Client(timeout=10) as http:
            backend = ParallelClusterApiBackend(
                org_id="kumo-labs",
                api_url=api.api_url(base, ACCOUNT_A, REGION),
                region=REGION,
                credentials=lambda: creds_a,
                ec2=ec2_a,
                http=http,
            )
            return backend.list_clusters()

    [cluster] = await asyncio.to_thread(read)
    assert cluster.name == "kumo-p5-dev"
    assert len(cluster.nodes) == 61
    assert sum(node.status == "stopped" for node in cluster.nodes) == 1
    assert api.requests[f"/pcluster/{ACCOUNT_A}/{REGION}/v3/clusters/kumo-p5-dev/instances"] == 2


# --- create, update, delete, compute fleet ---------------------------------------------------------------

GPU = "Scheduling.SlurmQueues[gpu].ComputeResources[p5]"


class _Clock:
    """A clock the tests move by hand: the emulator's operations take `progress_seconds` of it."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def tick(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


async def _send(
    http: httpx.AsyncClient,
    method: str,
    url: str,
    creds: Credentials,
    params: Sequence[tuple[str, str]] | dict[str, str] | None = None,
    body: Any = None,
    *,
    raw: bytes | None = None,
) -> httpx.Response:
    """A request signed as botocore signs for API Gateway, its JSON body included in the signature."""
    pairs = sorted(params.items()) if isinstance(params, dict) else sorted(params or [])
    full = f"{url}?{urlencode(pairs)}" if pairs else url
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    headers = {"Accept": "application/json", **({"Content-Type": "application/json"} if data else {})}
    request = AWSRequest(method=method, url=full, headers=headers, data=data)
    SigV4Auth(creds, "execute-api", REGION).add_auth(request)
    return await http.request(method, full, headers=dict(request.headers.items()), content=data)


def _config(
    min_count: int = 2,
    max_count: int = 4,
    *,
    instance_type: str = "p5.48xlarge",
    strategy: str | None = None,
    key: str | None = "kumo-ops",
    head_type: str = "m5.8xlarge",
) -> str:
    """A ParallelCluster configuration as the bot renders one: a GPU queue and a small CPU queue."""
    head: dict[str, Any] = {"InstanceType": head_type, "Networking": {"SubnetId": "subnet-0123456789abcdef0"}}
    if key:
        head["Ssh"] = {"KeyName": key}
    scheduling: dict[str, Any] = {"Scheduler": "slurm"}
    if strategy:
        scheduling["SlurmSettings"] = {"QueueUpdateStrategy": strategy}
    scheduling["SlurmQueues"] = [
        {
            "Name": "gpu",
            "CapacityType": "ONDEMAND",
            "Networking": {"SubnetIds": ["subnet-0123456789abcdef0"], "PlacementGroup": {"Enabled": True}},
            "ComputeResources": [
                {
                    "Name": "p5",
                    "InstanceType": instance_type,
                    "MinCount": min_count,
                    "MaxCount": max_count,
                    "Efa": {"Enabled": True},
                }
            ],
        },
        {
            "Name": "cpu",
            "Networking": {"SubnetIds": ["subnet-0123456789abcdef0"]},
            "ComputeResources": [{"Name": "c5", "InstanceType": "c5.xlarge", "MinCount": 1, "MaxCount": 2}],
        },
    ]
    config = {
        "Region": REGION,
        "Image": {"Os": "ubuntu2204"},
        "HeadNode": head,
        "Scheduling": scheduling,
        "Tags": [{"Key": "pitcrew:org", "Value": "kumo-labs"}],
    }
    return str(yaml.safe_dump(config, sort_keys=False))


@dataclass
class Emulator:
    api: ParallelClusterApi
    base: str
    clock: _Clock
    http: httpx.AsyncClient
    creds: Credentials
    spec: dict[str, Any]

    @property
    def root(self) -> str:
        return self.api.api_url(self.base, ACCOUNT_A, REGION)

    async def call(
        self,
        method: str,
        path: str,
        expect: int,
        schema: str | None,
        *,
        body: Any = None,
        params: Sequence[tuple[str, str]] | dict[str, str] | None = None,
        raw: bytes | None = None,
    ) -> Any:
        """Send, check the status, validate the answer against the spec's schema; the parsed answer."""
        response = await _send(self.http, method, self.root + path, self.creds, params, body, raw=raw)
        assert response.status_code == expect, response.text
        if schema is None:
            assert response.content == b""
            return None
        parsed = response.json()
        _check(self.spec, schema, parsed)
        return parsed

    async def create(self, name: str, config: str | None = None, **params: str) -> Any:
        body = {"clusterName": name, "clusterConfiguration": config or _config()}
        return await self.call("POST", "/v3/clusters", 202, "CreateClusterResponseContent", body=body, params=params)

    async def describe(self, name: str) -> Any:
        return await self.call("GET", f"/v3/clusters/{name}", 200, "DescribeClusterResponseContent")

    async def update(self, name: str, config: str, expect: int = 202, **params: str) -> Any:
        schema = {
            202: "UpdateClusterResponseContent",
            400: "UpdateClusterBadRequestExceptionResponseContent",
            412: "DryrunOperationExceptionResponseContent",
        }[expect]
        body = {"clusterConfiguration": config}
        return await self.call("PUT", f"/v3/clusters/{name}", expect, schema, body=body, params=params)

    async def fleet(self, name: str, status: str | None = None) -> str:
        if status:
            body = {"status": status}
            await self.call("PATCH", f"/v3/clusters/{name}/computefleet", 204, None, body=body)
        described = await self.call(
            "GET", f"/v3/clusters/{name}/computefleet", 200, "DescribeComputeFleetResponseContent"
        )
        return str(described["status"])

    async def instances(self, name: str, **params: str) -> list[dict[str, Any]]:
        path = f"/v3/clusters/{name}/instances"
        body = await self.call("GET", path, 200, "DescribeClusterInstancesResponseContent", params=params)
        assert "nextToken" not in body
        return list(body["instances"])

    async def compute(self, name: str, queue: str = "gpu") -> int:
        return len(await self.instances(name, nodeType="ComputeNode", queueName=queue))

    async def config(self, name: str) -> str:
        response = await self.http.get((await self.describe(name))["clusterConfiguration"]["url"])
        assert response.status_code == 200
        return response.text


@pytest.fixture
async def emulator(spec: dict[str, Any], creds_a: Credentials) -> AsyncIterator[Emulator]:
    clock = _Clock()
    api = ParallelClusterApi(progress_seconds=10, clock=clock)
    async with serve_asgi(api) as base, httpx.AsyncClient(timeout=10) as http:
        yield Emulator(api, base, clock, http, creds_a, spec)
    assert [v for v in api.spec_violations if v.direction == "response"] == []


def _ec2_instances(ec2: Any, name: str) -> list[dict[str, Any]]:
    pages = ec2.get_paginator("describe_instances").paginate(
        Filters=[{"Name": "tag:parallelcluster:cluster-name", "Values": [name]}]
    )
    return [i for page in pages for r in page["Reservations"] for i in r["Instances"]]


def _alive(ec2: Any, name: str) -> list[dict[str, Any]]:
    return [i for i in _ec2_instances(ec2, name) if i["State"]["Name"] not in ("shutting-down", "terminated")]


async def test_create_dry_run_creates_nothing_then_create_completes(emulator: Emulator, ec2_a: Any) -> None:
    config = _config(key=None)  # no key pair: ParallelCluster's KeyPairValidator warns
    body = {"clusterName": "kumo-p5-new", "clusterConfiguration": config}
    dry = await emulator.call(
        "POST", "/v3/clusters", 412, "DryrunOperationExceptionResponseContent", body=body, params={"dryrun": "true"}
    )
    assert dry["message"] == "Request would have succeeded, but DryRun flag is set."
    [warning] = dry["validationMessages"]
    assert (warning["type"], warning["level"]) == ("KeyPairValidator", "WARNING")
    assert _ec2_instances(ec2_a, "kumo-p5-new") == []
    assert (await emulator.call("GET", "/v3/clusters", 200, "ListClustersResponseContent")) == {"clusters": []}

    created = await emulator.create("kumo-p5-new", config, rollbackOnFailure="true")
    cluster = created["cluster"]
    assert cluster["clusterName"] == "kumo-p5-new"
    assert cluster["clusterStatus"] == cluster["cloudformationStackStatus"] == "CREATE_IN_PROGRESS"
    assert cluster["cloudformationStackArn"].startswith(
        f"arn:aws:cloudformation:{REGION}:{ACCOUNT_A}:stack/kumo-p5-new/"
    )
    assert (cluster["region"], cluster["version"], cluster["scheduler"]) == (REGION, "3.12.0", {"type": "slurm"})
    assert [m["type"] for m in created["validationMessages"]] == ["KeyPairValidator"]

    described = await emulator.describe("kumo-p5-new")
    assert described["clusterStatus"] == "CREATE_IN_PROGRESS"
    assert described["computeFleetStatus"] == "UNKNOWN"
    assert described["headNode"]["instanceType"] == "m5.8xlarge"
    emulator.clock.tick(9.9)
    assert (await emulator.describe("kumo-p5-new"))["clusterStatus"] == "CREATE_IN_PROGRESS"
    emulator.clock.tick(0.1)  # read lazily: the next read finds it done
    described = await emulator.describe("kumo-p5-new")
    assert described["clusterStatus"] == described["cloudFormationStackStatus"] == "CREATE_COMPLETE"
    assert described["computeFleetStatus"] == "RUNNING"
    assert described["creationTime"] == "2026-11-30T09:00:00.000Z"
    assert described["lastUpdatedTime"] == "2026-11-30T09:00:10.000Z"
    tags = {tag["key"]: tag["value"] for tag in described["tags"]}
    assert tags["pitcrew:org"] == "kumo-labs"
    assert await emulator.config("kumo-p5-new") == config  # the configuration as posted

    instances = await emulator.instances("kumo-p5-new")
    assert [(i["nodeType"], i.get("queueName"), i["instanceType"]) for i in instances] == [
        ("HeadNode", None, "m5.8xlarge"),
        ("ComputeNode", "cpu", "c5.xlarge"),
        ("ComputeNode", "gpu", "p5.48xlarge"),
        ("ComputeNode", "gpu", "p5.48xlarge"),
    ]
    in_ec2 = {i["InstanceId"]: {t["Key"]: t["Value"] for t in i["Tags"]} for i in _ec2_instances(ec2_a, "kumo-p5-new")}
    assert set(in_ec2) == {i["instanceId"] for i in instances}
    gpu = [tags for tags in in_ec2.values() if tags.get("parallelcluster:queue-name") == "gpu"]
    assert len(gpu) == 2
    assert gpu[0]["parallelcluster:node-type"] == "ComputeNode"
    assert gpu[0]["parallelcluster:compute-resource-name"] == "p5"
    assert gpu[0]["Name"] == "Compute"
    assert gpu[0]["pitcrew:org"] == "kumo-labs"
    [head] = [tags for tags in in_ec2.values() if tags["parallelcluster:node-type"] == "HeadNode"]
    assert (head["Name"], head["parallelcluster:version"]) == ("HeadNode", "3.12.0")

    listed = await emulator.call("GET", "/v3/clusters", 200, "ListClustersResponseContent")
    assert [(c["clusterName"], c["clusterStatus"]) for c in listed["clusters"]] == [("kumo-p5-new", "CREATE_COMPLETE")]
    assert emulator.api.spec_violations == []


async def test_create_refusals(emulator: Emulator, ec2_a: Any) -> None:
    _launch(ec2_a, "kumo-p5-dev", compute=1)  # a cluster known from EC2 alone holds its name too
    conflict = await emulator.call(
        "POST",
        "/v3/clusters",
        409,
        "ConflictExceptionResponseContent",
        body={"clusterName": "kumo-p5-dev", "clusterConfiguration": _config()},
    )
    assert conflict["message"] == "Cluster 'kumo-p5-dev' already exists."
    await emulator.create("kumo-new")
    await emulator.call(  # in progress or not
        "POST",
        "/v3/clusters",
        409,
        "ConflictExceptionResponseContent",
        body={"clusterName": "kumo-new", "clusterConfiguration": _config()},
        params={"dryrun": "true"},
    )

    async def off_spec(body: Any = None, params: dict[str, str] | None = None, raw: bytes | None = None) -> str:
        answer = await emulator.call(
            "POST", "/v3/clusters", 400, "BadRequestExceptionResponseContent", body=body, params=params, raw=raw
        )
        assert answer["message"].startswith("Bad Request: ")
        return str(answer["message"])

    violations = len(emulator.api.spec_violations)
    assert "'clusterConfiguration' is a required property" in await off_spec({"clusterName": "a-1"})
    assert "'dryRun' was unexpected" in await off_spec(
        {"clusterName": "a-1", "clusterConfiguration": _config(), "dryRun": True}
    )
    assert "7 is not of type 'string' (at clusterName)" in await off_spec(
        {"clusterName": 7, "clusterConfiguration": _config()}
    )
    assert "does not match" in await off_spec({"clusterName": "1-bad", "clusterConfiguration": _config()})
    good = {"clusterName": "a-1", "clusterConfiguration": _config()}
    assert "expected 'boolean' for query parameter 'dryrun'" in await off_spec(good, {"dryrun": "yes"})
    assert "'FATAL' is not one of" in await off_spec(good, {"validationFailureLevel": "FATAL"})
    assert "dryRun" in await off_spec(good, {"dryRun": "true"})  # a typo would have created the cluster
    assert "not valid JSON" in await off_spec(raw=b"{not json")
    assert len(emulator.api.spec_violations) == violations + 8
    assert {v.direction for v in emulator.api.spec_violations} == {"request"}
    assert _ec2_instances(ec2_a, "a-1") == []

    async def invalid(name: str, config: str, **params: str) -> list[dict[str, str]]:
        body = {"clusterName": name, "clusterConfiguration": config}
        schema = "CreateClusterBadRequestExceptionResponseContent"
        answer = await emulator.call("POST", "/v3/clusters", 400, schema, body=body, params=params)
        assert answer["message"] == "Invalid cluster configuration."
        return list(answer["configurationValidationErrors"])

    [too_long] = await invalid("a" * 61, _config())
    assert too_long["type"] == "ClusterNameValidator"
    [unparsed] = await invalid("a-1", "HeadNode: [unclosed")
    assert "not valid YAML" in unparsed["message"]
    [backwards] = await invalid("a-1", _config(5, 4))
    assert backwards["message"] == f"{GPU}: MinCount (5) must be lower than or equal to MaxCount (4)."
    no_head = yaml.safe_load(_config())
    del no_head["HeadNode"]
    assert [e["message"] for e in await invalid("a-1", yaml.safe_dump(no_head))] == [
        "HeadNode: Missing data for required field."
    ]
    [warned] = await invalid("a-1", _config(key=None), validationFailureLevel="WARNING")
    assert warned["type"] == "KeyPairValidator"
    suppressed = await emulator.call(
        "POST",
        "/v3/clusters",
        412,
        "DryrunOperationExceptionResponseContent",
        body={"clusterName": "a-1", "clusterConfiguration": _config(key=None)},
        params=[
            ("dryrun", "true"),
            ("validationFailureLevel", "WARNING"),
            ("suppressValidators", "type:KeyPairValidator"),
        ],
    )
    assert suppressed["validationMessages"] == []
    assert _ec2_instances(ec2_a, "a-1") == []


async def test_update_grows_a_running_cluster_live(emulator: Emulator, ec2_a: Any) -> None:
    await emulator.create("kumo-p5")
    assert emulator.api.advance(ACCOUNT_A, REGION, "kumo-p5") == "CREATE_COMPLETE"
    assert await emulator.compute("kumo-p5") == 2

    updated = await emulator.update("kumo-p5", _config(4, 6))
    assert updated["changeSet"] == [
        {"parameter": f"{GPU}.MinCount", "currentValue": "2", "requestedValue": "4"},
        {"parameter": f"{GPU}.MaxCount", "currentValue": "4", "requestedValue": "6"},
    ]
    assert (
        updated["cluster"]["clusterStatus"] == updated["cluster"]["cloudformationStackStatus"] == "UPDATE_IN_PROGRESS"
    )
    described = await emulator.describe("kumo-p5")
    assert described["clusterStatus"] == "UPDATE_IN_PROGRESS"
    assert described["lastUpdatedTime"] == "2026-11-30T09:00:00.000Z"
    assert (
        yaml.safe_load(await emulator.config("kumo-p5"))["Scheduling"]["SlurmQueues"][0]["ComputeResources"][0][
            "MinCount"
        ]
        == 4
    )
    assert await emulator.compute("kumo-p5") == 2  # nodes come when the update completes
    emulator.clock.tick(10)
    assert (await emulator.describe("kumo-p5"))["clusterStatus"] == "UPDATE_COMPLETE"
    assert await emulator.compute("kumo-p5") == 4
    assert len(_alive(ec2_a, "kumo-p5")) == 1 + 4 + 1

    # Raising MaxCount alone is live too; the node count follows MinCount.
    more = await emulator.update("kumo-p5", _config(4, 8))
    assert more["changeSet"] == [{"parameter": f"{GPU}.MaxCount", "currentValue": "6", "requestedValue": "8"}]
    assert emulator.api.advance(ACCOUNT_A, REGION, "kumo-p5") == "UPDATE_COMPLETE"
    assert await emulator.compute("kumo-p5") == 4


async def test_shrinking_a_running_fleet_is_refused_until_it_is_stopped(emulator: Emulator, ec2_a: Any) -> None:
    await emulator.create("kumo-p5", _config(2, 4))
    emulator.api.advance(ACCOUNT_A, REGION)

    refused = await emulator.update("kumo-p5", _config(1, 4), expect=400)
    assert "RUNNING" in refused["message"]
    assert refused["changeSet"] == [{"parameter": f"{GPU}.MinCount", "currentValue": "2", "requestedValue": "1"}]
    [error] = refused["updateValidationErrors"]
    assert (error["parameter"], error["currentValue"], error["requestedValue"]) == (f"{GPU}.MinCount", "2", "1")
    assert "STOP_REQUESTED" in error["message"] and "QueueUpdateStrategy: TERMINATE" in error["message"]
    # Dry runs check the update rules too; raising MinCount alone narrows the dynamic range, also refused.
    await emulator.update("kumo-p5", _config(1, 4), expect=400, dryrun="true")
    narrowed = await emulator.update("kumo-p5", _config(3, 4), expect=400)
    assert [e["parameter"] for e in narrowed["updateValidationErrors"]] == [f"{GPU}.MinCount"]
    retyped = await emulator.update("kumo-p5", _config(2, 4, instance_type="p5e.48xlarge"), expect=400)
    [error] = retyped["updateValidationErrors"]
    assert error["parameter"] == f"{GPU}.InstanceType"
    assert error["message"].startswith("All compute nodes must be stopped.")
    assert (await emulator.describe("kumo-p5"))["clusterStatus"] == "CREATE_COMPLETE"  # nothing changed

    assert await emulator.fleet("kumo-p5", "STOP_REQUESTED") == "STOP_REQUESTED"
    emulator.clock.tick(5)
    assert await emulator.fleet("kumo-p5") == "STOPPING"
    await emulator.update("kumo-p5", _config(1, 4), expect=400)  # not stopped yet
    emulator.clock.tick(5)
    assert await emulator.fleet("kumo-p5") == "STOPPED"
    assert (await emulator.describe("kumo-p5"))["computeFleetStatus"] == "STOPPED"
    # ParallelCluster terminates a stopped Slurm fleet's compute nodes; the head node stays.
    assert [i["nodeType"] for i in await emulator.instances("kumo-p5")] == ["HeadNode"]
    assert len(_alive(ec2_a, "kumo-p5")) == 1

    shrunk = await emulator.update("kumo-p5", _config(1, 2, instance_type="p5e.48xlarge"))
    assert [c["parameter"] for c in shrunk["changeSet"]] == [
        f"{GPU}.InstanceType",
        f"{GPU}.MinCount",
        f"{GPU}.MaxCount",
    ]
    assert emulator.api.advance(ACCOUNT_A, REGION, "kumo-p5") == "UPDATE_COMPLETE"
    assert await emulator.compute("kumo-p5") == 0  # still stopped

    assert await emulator.fleet("kumo-p5", "START_REQUESTED") == "START_REQUESTED"
    emulator.clock.tick(5)
    assert await emulator.fleet("kumo-p5") == "STARTING"
    emulator.clock.tick(5)
    assert await emulator.fleet("kumo-p5") == "RUNNING"
    gpu = await emulator.instances("kumo-p5", queueName="gpu")
    assert [i["instanceType"] for i in gpu] == ["p5e.48xlarge"]
    assert await emulator.compute("kumo-p5", "cpu") == 1


async def test_queue_update_strategy_terminate_shrinks_live(emulator: Emulator, ec2_a: Any) -> None:
    await emulator.create("kumo-p5", _config(4, 4, strategy="TERMINATE"))
    emulator.api.advance(ACCOUNT_A, REGION, "kumo-p5")
    before = {i["instanceId"] for i in await emulator.instances("kumo-p5", queueName="gpu")}
    assert len(before) == 4

    shrunk = await emulator.update("kumo-p5", _config(2, 2, strategy="TERMINATE"))
    assert len(shrunk["changeSet"]) == 2
    emulator.api.advance(ACCOUNT_A, REGION, "kumo-p5")
    after = {i["instanceId"] for i in await emulator.instances("kumo-p5", queueName="gpu")}
    assert len(after) == 2 and after < before
    gone = {
        i["InstanceId"]: i["State"]["Name"]
        for i in _ec2_instances(ec2_a, "kumo-p5")
        if i["InstanceId"] in before - after
    }
    assert set(gone.values()) <= {"shutting-down", "terminated"} and len(gone) == 2

    # TERMINATE does not cover an instance type change; the other strategies do not cover shrinking.
    await emulator.update("kumo-p5", _config(2, 2, instance_type="p5e.48xlarge", strategy="TERMINATE"), expect=400)
    drain = await emulator.update("kumo-p5", _config(1, 2, strategy="DRAIN"), expect=400)
    assert [e["parameter"] for e in drain["updateValidationErrors"]] == [f"{GPU}.MinCount"]
    # forceUpdate skips the rules that only need the fleet stopped...
    await emulator.update("kumo-p5", _config(1, 2, strategy="DRAIN"), forceUpdate="true")
    emulator.api.advance(ACCOUNT_A, REGION, "kumo-p5")
    assert await emulator.compute("kumo-p5") == 1
    # ...never the unsupported changes.
    unsupported = await emulator.update(
        "kumo-p5", _config(1, 2, strategy="DRAIN", head_type="m5.12xlarge"), expect=400, forceUpdate="true"
    )
    [error] = unsupported["updateValidationErrors"]
    assert error["parameter"] == "HeadNode.InstanceType"
    assert "not currently supported" in error["message"]


async def test_update_dry_run_and_refusals(emulator: Emulator) -> None:
    missing = await emulator.call(
        "PUT", "/v3/clusters/nope", 404, "NotFoundExceptionResponseContent", body={"clusterConfiguration": _config()}
    )
    assert "nope" in missing["message"]
    await emulator.create("kumo-p5")
    busy = await emulator.update("kumo-p5", _config(3, 6), expect=400)
    assert "CREATE_IN_PROGRESS" in busy["message"]
    emulator.api.advance(ACCOUNT_A, REGION, "kumo-p5")

    dry = await emulator.update("kumo-p5", _config(3, 6), expect=412, dryrun="true")
    assert dry["message"] == "Request would have succeeded, but DryRun flag is set."
    assert dry["changeSet"] == [
        {"parameter": f"{GPU}.MinCount", "currentValue": "2", "requestedValue": "3"},
        {"parameter": f"{GPU}.MaxCount", "currentValue": "4", "requestedValue": "6"},
    ]
    assert dry["validationMessages"] == []
    assert (await emulator.describe("kumo-p5"))["clusterStatus"] == "CREATE_COMPLETE"
    assert await emulator.config("kumo-p5") == _config()

    same = await emulator.update("kumo-p5", _config(), expect=400)
    assert same == {"message": "No changes found in your cluster configuration.", "changeSet": []}
    broken = await emulator.update("kumo-p5", _config(3, 2), expect=400)
    assert [e["level"] for e in broken["configurationValidationErrors"]] == ["ERROR"]
    off_spec = await emulator.call(
        "PUT", "/v3/clusters/kumo-p5", 400, "BadRequestExceptionResponseContent", body={"config": _config()}
    )
    assert "'clusterConfiguration' is a required property" in off_spec["message"]

    # A queue added is live; one removed needs the fleet stopped.
    added = yaml.safe_load(_config())
    added["Scheduling"]["SlurmQueues"].append(
        {"Name": "trn", "ComputeResources": [{"Name": "trn1", "InstanceType": "trn1.32xlarge", "MinCount": 1}]}
    )
    grown = await emulator.update("kumo-p5", yaml.safe_dump(added))
    [change] = grown["changeSet"]
    assert change["parameter"] == "Scheduling.SlurmQueues[trn]"
    assert change["currentValue"] == "-"
    emulator.api.advance(ACCOUNT_A, REGION, "kumo-p5")
    assert await emulator.compute("kumo-p5", "trn") == 1
    removed = await emulator.update("kumo-p5", _config(), expect=400)
    [error] = removed["updateValidationErrors"]
    assert (error["parameter"], error["requestedValue"]) == ("Scheduling.SlurmQueues[trn]", "-")


async def test_delete(emulator: Emulator, ec2_a: Any) -> None:
    await emulator.create("kumo-p5")
    emulator.api.advance(ACCOUNT_A, REGION, "kumo-p5")
    deleted = await emulator.call("DELETE", "/v3/clusters/kumo-p5", 202, "DeleteClusterResponseContent")
    assert (
        deleted["cluster"]["clusterStatus"] == deleted["cluster"]["cloudformationStackStatus"] == "DELETE_IN_PROGRESS"
    )
    assert _alive(ec2_a, "kumo-p5") == []
    described = await emulator.describe("kumo-p5")
    assert described["clusterStatus"] == "DELETE_IN_PROGRESS"
    assert "headNode" not in described
    assert {t["key"] for t in described["tags"]} >= {"pitcrew:org", "parallelcluster:cluster-name"}
    listed = await emulator.call(
        "GET", "/v3/clusters", 200, "ListClustersResponseContent", params={"clusterStatus": "DELETE_IN_PROGRESS"}
    )
    assert [c["clusterName"] for c in listed["clusters"]] == ["kumo-p5"]
    await emulator.call("DELETE", "/v3/clusters/kumo-p5", 202, "DeleteClusterResponseContent")  # idempotent
    assert await emulator.instances("kumo-p5") == []

    emulator.clock.tick(10)
    await emulator.call("GET", "/v3/clusters/kumo-p5", 404, "NotFoundExceptionResponseContent")
    assert (await emulator.call("GET", "/v3/clusters", 200, "ListClustersResponseContent")) == {"clusters": []}
    assert (await emulator.http.get(emulator.root + "/config/kumo-p5.yaml")).status_code == 404
    gone = await emulator.call("DELETE", "/v3/clusters/kumo-p5", 404, "NotFoundExceptionResponseContent")
    assert "DeleteClusterInstances" in gone["message"]
    await emulator.create("kumo-p5")  # the name is free again

    # A cluster known from EC2 alone is deleted the same way.
    _launch(ec2_a, "kumo-seeded", compute=3)
    await emulator.call("DELETE", "/v3/clusters/kumo-seeded", 202, "DeleteClusterResponseContent")
    assert _alive(ec2_a, "kumo-seeded") == []
    assert emulator.api.advance(ACCOUNT_A, REGION, "kumo-seeded") is None
    await emulator.call("GET", "/v3/clusters/kumo-seeded", 404, "NotFoundExceptionResponseContent")


async def test_compute_fleet_and_clusters_known_from_ec2_alone(emulator: Emulator, ec2_a: Any) -> None:
    _launch(ec2_a, "kumo-p5-dev", compute=2)
    assert await emulator.fleet("kumo-p5-dev") == "RUNNING"
    path = "/v3/clusters/kumo-p5-dev/computefleet"
    batch_only = await emulator.call(
        "PATCH", path, 400, "BadRequestExceptionResponseContent", body={"status": "DISABLED"}
    )
    assert "`START_REQUESTED` or `STOP_REQUESTED` for Slurm" in batch_only["message"]
    await emulator.call("PATCH", path, 400, "BadRequestExceptionResponseContent", body={"status": "PAUSED"})
    await emulator.call("PATCH", path, 400, "BadRequestExceptionResponseContent", body={})
    for method, body in (("GET", None), ("PATCH", {"status": "STOP_REQUESTED"})):
        await emulator.call(
            method, "/v3/clusters/nope/computefleet", 404, "NotFoundExceptionResponseContent", body=body
        )

    # Scaled as the bot scales: fetch the configuration, change the counts, PUT the whole YAML back.
    config = yaml.safe_load(await emulator.config("kumo-p5-dev"))
    [resource] = config["Scheduling"]["SlurmQueues"][0]["ComputeResources"]
    assert (resource["MinCount"], resource["MaxCount"]) == (2, 2)
    resource["MinCount"] = resource["MaxCount"] = 3
    updated = await emulator.update("kumo-p5-dev", yaml.safe_dump(config, sort_keys=False))
    assert [c["parameter"] for c in updated["changeSet"]] == [
        "Scheduling.SlurmQueues[compute-gpu].ComputeResources[p5-48xlarge].MinCount",
        "Scheduling.SlurmQueues[compute-gpu].ComputeResources[p5-48xlarge].MaxCount",
    ]
    emulator.api.advance(ACCOUNT_A, REGION, "kumo-p5-dev")
    assert await emulator.compute("kumo-p5-dev", "compute-gpu") == 3

    await emulator.fleet("kumo-p5-dev", "STOP_REQUESTED")
    assert await emulator.fleet("kumo-p5-dev", "STOP_REQUESTED") == "STOP_REQUESTED"  # asked twice: same course
    emulator.api.advance(ACCOUNT_A, REGION, "kumo-p5-dev")
    assert await emulator.fleet("kumo-p5-dev") == "STOPPED"
    assert await emulator.compute("kumo-p5-dev", "compute-gpu") == 0
    await emulator.fleet("kumo-p5-dev", "START_REQUESTED")
    emulator.api.advance(ACCOUNT_A, REGION, "kumo-p5-dev")
    assert await emulator.fleet("kumo-p5-dev") == "RUNNING"
    assert await emulator.compute("kumo-p5-dev", "compute-gpu") == 3
    assert len(_alive(ec2_a, "kumo-p5-dev")) == 4


async def test_a_failed_create_rolls_back(emulator: Emulator, ec2_a: Any) -> None:
    await emulator.create("kumo-p5")
    emulator.api.fail(ACCOUNT_A, REGION, "kumo-p5", reason="Head node bootstrap timed out")
    assert emulator.api.advance(ACCOUNT_A, REGION, "kumo-p5") == "CREATE_FAILED"
    described = await emulator.describe("kumo-p5")
    assert described["cloudFormationStackStatus"] == "ROLLBACK_COMPLETE"
    assert described["failures"] == [
        {"failureCode": "HeadNodeBootstrapFailure", "failureReason": "Head node bootstrap timed out"}
    ]
    assert _alive(ec2_a, "kumo-p5") == []
    await emulator.call(
        "PATCH",
        "/v3/clusters/kumo-p5/computefleet",
        400,
        "BadRequestExceptionResponseContent",
        body={"status": "START_REQUESTED"},
    )
    with pytest.raises(ValueError, match="no create or update in progress"):
        emulator.api.fail(ACCOUNT_A, REGION, "kumo-p5")
    await emulator.call("DELETE", "/v3/clusters/kumo-p5", 202, "DeleteClusterResponseContent")


async def test_a_failed_update_keeps_the_previous_configuration(emulator: Emulator) -> None:
    await emulator.create("kumo-p5")
    emulator.api.advance(ACCOUNT_A, REGION, "kumo-p5")
    await emulator.update("kumo-p5", _config(3, 6))
    emulator.api.fail(ACCOUNT_A, REGION, "kumo-p5")
    assert emulator.api.advance(ACCOUNT_A, REGION, "kumo-p5") == "UPDATE_FAILED"
    assert (await emulator.describe("kumo-p5"))["cloudFormationStackStatus"] == "UPDATE_ROLLBACK_COMPLETE"
    assert await emulator.config("kumo-p5") == _config()
    assert await emulator.compute("kumo-p5") == 2
    await emulator.update("kumo-p5", _config(3, 6))  # may be tried again


async def test_the_body_is_part_of_the_signature(emulator: Emulator, ec2_a: Any) -> None:
    url = emulator.root + "/v3/clusters"
    signed = json.dumps({"clusterName": "kumo-a", "clusterConfiguration": _config()}).encode()
    request = AWSRequest(method="POST", url=url, headers={"Content-Type": "application/json"}, data=signed)
    SigV4Auth(emulator.creds, "execute-api", REGION).add_auth(request)
    sent = json.dumps({"clusterName": "kumo-b", "clusterConfiguration": _config()}).encode()
    response = await emulator.http.post(url, headers=dict(request.headers.items()), content=sent)
    assert response.status_code == 403
    assert response.json()["message"].startswith("The request signature we calculated does not match")
    assert _ec2_instances(ec2_a, "kumo-b") == []
    unsigned = await emulator.http.post(url, content=sent)
    assert unsigned.status_code == 403


def test_the_checker_catches_answers_off_the_spec() -> None:
    checker = load_spec_checker(SPEC)
    assert checker is not None
    summary = {
        "clusterName": "c1",
        "region": REGION,
        "version": "3.12.0",
        "cloudformationStackArn": "arn",
        "cloudformationStackStatus": "CREATE_COMPLETE",
        "clusterStatus": "CREATE_COMPLETE",
    }
    assert checker.check_response("ListClusters", 200, json.dumps({"clusters": [summary]}).encode()) is None
    missing = {k: v for k, v in summary.items() if k != "version"}
    problem = checker.check_response("ListClusters", 200, json.dumps({"clusters": [missing]}).encode())
    assert problem is not None and "'version' is a required property" in problem
    typo = {**summary, "cloudFormationStackStatus": "CREATE_COMPLETE"}  # DescribeCluster's spelling
    problem = checker.check_response("ListClusters", 200, json.dumps({"clusters": [typo]}).encode())
    assert problem is not None and "'cloudFormationStackStatus' was unexpected" in problem
    problem = checker.check_response("DeleteCluster", 409, b'{"message": "busy"}')
    assert problem is not None and "not among the spec's statuses" in problem
    assert checker.check_response("UpdateComputeFleet", 204, b"") is None
    assert checker.check_response("UpdateComputeFleet", 204, b'{"status": "STOP_REQUESTED"}') is not None
    bad_time = json.dumps({"status": "RUNNING", "lastStatusUpdatedTime": "yesterday"}).encode()
    assert checker.check_response("DescribeComputeFleet", 200, bad_time) is not None


async def test_an_answer_off_the_spec_becomes_a_500(
    monkeypatch: pytest.MonkeyPatch, ec2_a: Any, creds_a: Credentials
) -> None:
    api = ParallelClusterApi()
    _launch(ec2_a, "c1", compute=0)
    original = api._summary

    def buggy(*args: Any) -> dict[str, Any]:
        return {**original(*args), "clusterState": "oops"}

    monkeypatch.setattr(api, "_summary", buggy)
    transport = httpx.ASGITransport(app=api)
    async with httpx.AsyncClient(transport=transport, base_url="http://pcluster.sandbox") as http:
        response = await _send(
            http, "GET", api.api_url("http://pcluster.sandbox", ACCOUNT_A, REGION) + "/v3/clusters", creds_a
        )
    assert response.status_code == 500
    assert "'clusterState' was unexpected" in response.json()["message"]
    [violation] = api.spec_violations
    assert (violation.operation, violation.direction, violation.status) == ("ListClusters", "response", 200)


def test_the_spec_ships_inside_the_repository() -> None:
    # A clone alone (no folder beside it) has the spec: it lies in the package, as package data.
    repository = Path(__file__).resolve().parents[2]
    assert SPEC.is_relative_to(repository / "sandbox" / "specs")
    assert yaml.safe_load(SPEC.read_text())["info"]["version"] == "3.12.0"
    assert "aws/aws-parallelcluster" in (SPEC.parent / "README.md").read_text()


def test_without_the_spec_the_emulator_does_not_start(tmp_path: Path) -> None:
    # Loudly, at start: an emulator that checked nothing would let the bot's off-spec calls pass.
    with pytest.raises(FileNotFoundError, match=r"ParallelCluster API spec not found at .*absent\.yaml"):
        ParallelClusterApi(spec_path=tmp_path / "absent.yaml")
