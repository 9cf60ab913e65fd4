"""The ParallelCluster API emulator: spec-shaped answers, SigV4 like API Gateway, pagination, YAML."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime
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

from bot.sandbox.asgi_server import serve_asgi
from bot.sandbox.moto_support import reset_moto_server
from bot.sandbox.pcluster_api import ParallelClusterApi, cluster_config_yaml

ACCOUNT_A, ACCOUNT_B = "111111111111", "222222222222"
REGION = "us-east-1"
# shared/ lies beside the repository, on developers' machines and in CI alike.
SPEC = Path(__file__).resolve().parents[3] / "shared" / "specs" / "parallelcluster-api-3.12.openapi.yaml"


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
    async with serve_asgi(api) as base:
        yield api, base


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
        request = AWSRequest(method="DELETE", url=root + "/v3/clusters/x", headers={})
        SigV4Auth(creds_a, "execute-api", REGION).add_auth(request)
        response = await http.delete(root + "/v3/clusters/x", headers=dict(request.headers.items()))
        assert response.status_code == 403


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
    from bot.sandbox.pcluster_api import Ec2InstanceRecord

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
