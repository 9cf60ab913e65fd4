"""Seeding program.example.yml into moto: the GENIAC day-one totals, per-account isolation, faults."""

from __future__ import annotations

from collections import Counter
from typing import Any

import boto3
import httpx
import pytest
import yaml
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from bot.config import OrgConfig, ProgramConfig, load_program, normalize_instance_type
from bot.resources import example_program
from sandbox.moto_support import reset_moto_server
from sandbox.pcluster_api import ParallelClusterApi
from sandbox.seed import CURATED_LAYOUT, MAX_CLUSTER_NODES, SeedReport, plan_program, seed_program

EXAMPLE = example_program()
HEAD_AND_CONTROLLER = {"m5.8xlarge", "m5.12xlarge"}


@pytest.fixture(scope="module")
def program() -> ProgramConfig:
    return load_program(EXAMPLE)


@pytest.fixture(scope="module")
def seeded(endpoint: str, program: ProgramConfig) -> SeedReport:
    reset_moto_server(endpoint)
    return seed_program(program, endpoint_url=endpoint)


def _credentials(endpoint: str, org: OrgConfig) -> Credentials:
    assert org.aws.role_arn and org.aws.external_id
    issued = boto3.client("sts", region_name="us-east-1", endpoint_url=endpoint).assume_role(
        RoleArn=org.aws.role_arn, RoleSessionName="pitcrew-test", ExternalId=org.aws.external_id
    )["Credentials"]
    return Credentials(issued["AccessKeyId"], issued["SecretAccessKey"], issued["SessionToken"])


def _client(endpoint: str, org: OrgConfig, service: str) -> Any:
    creds = _credentials(endpoint, org)
    return boto3.client(
        service,
        region_name=org.aws.region,
        endpoint_url=endpoint,
        aws_access_key_id=creds.access_key,
        aws_secret_access_key=creds.secret_key,
        aws_session_token=creds.token,
    )


def _hyperpod(endpoint: str, org: OrgConfig) -> dict[str, list[dict[str, Any]]]:
    """Cluster name -> its nodes, read through the org's role as Pitcrew reads them."""
    sagemaker = _client(endpoint, org, "sagemaker")
    out = {}
    for page in sagemaker.get_paginator("list_clusters").paginate():
        for summary in page["ClusterSummaries"]:
            name = summary["ClusterName"]
            out[name] = [
                node
                for nodes in sagemaker.get_paginator("list_cluster_nodes").paginate(ClusterName=name)
                for node in nodes["ClusterNodeSummaries"]
            ]
    return out


def _pcluster(endpoint: str, org: OrgConfig) -> dict[str, list[dict[str, Any]]]:
    ec2 = _client(endpoint, org, "ec2")
    out: dict[str, list[dict[str, Any]]] = {}
    filters = [{"Name": "tag-key", "Values": ["parallelcluster:cluster-name"]}]
    for page in ec2.get_paginator("describe_instances").paginate(Filters=filters):
        for reservation in page["Reservations"]:
            for instance in reservation["Instances"]:
                tags = {tag["Key"]: tag["Value"] for tag in instance["Tags"]}
                instance["_tags"] = tags
                out.setdefault(tags["parallelcluster:cluster-name"], []).append(instance)
    return out


@pytest.fixture(scope="module")
def observed(endpoint: str, program: ProgramConfig, seeded: SeedReport) -> dict[str, dict[str, Any]]:
    """Per org: what its own credentials see of each backend."""
    assert seeded.clusters  # seeded first
    return {
        org.id: {"hyperpod": _hyperpod(endpoint, org), "pcluster": _pcluster(endpoint, org)} for org in program.orgs
    }


def test_seeding_is_fast(seeded: SeedReport) -> None:
    # Wall clock: 6-9 s of CPU in the suite's workers (2026-12-05), more beside another full run of the suite (the
    # CI's loaded run); the bound is what a newcomer starting `make run` would call slow.
    assert seeded.seconds < 30


def test_report_totals(seeded: SeedReport) -> None:
    assert seeded.total("p5.48xlarge") == 127
    assert seeded.total("ml.p5.48xlarge") == 127
    assert seeded.total("trn1.32xlarge") == 24
    assert seeded.totals["ml.p5.48xlarge"] + seeded.totals["p5.48xlarge"] == 127
    assert seeded.totals["ml.trn1.32xlarge"] + seeded.totals["trn1.32xlarge"] == 24
    assert seeded.clusters_by_org["kumo-labs"] == ["kumo-p5-train", "kumo-p5-dev"]
    assert "umi-lang" not in seeded.clusters_by_org
    assert "seeded 12 clusters in 11 orgs" in seeded.summary()


def test_totals_through_each_orgs_role(observed: dict[str, dict[str, Any]], program: ProgramConfig) -> None:
    totals: Counter[str] = Counter()
    for org in program.orgs:
        held: Counter[str] = Counter()
        for nodes in observed[org.id]["hyperpod"].values():
            held.update(normalize_instance_type(node["InstanceType"]) for node in nodes)
        for instances in observed[org.id]["pcluster"].values():
            held.update(instance["InstanceType"] for instance in instances)
        for itype, count in held.items():
            if itype not in HEAD_AND_CONTROLLER:
                allowed = org.quota_for(itype)
                assert allowed is not None and count <= allowed, (org.id, itype, count, allowed)
        totals.update(held)
    assert totals["p5.48xlarge"] == 127
    assert totals["trn1.32xlarge"] == 24


def test_clusters_stay_small(observed: dict[str, dict[str, Any]]) -> None:
    for backends in observed.values():
        for clusters in backends.values():
            for name, nodes in clusters.items():
                assert len(nodes) <= MAX_CLUSTER_NODES + 1, name  # + controller or head node


def test_each_account_sees_only_its_own_clusters(
    observed: dict[str, dict[str, Any]], seeded: SeedReport, endpoint: str, program: ProgramConfig
) -> None:
    for org in program.orgs:
        mine = [c for c in seeded.clusters if c.org_id == org.id]
        assert sorted(observed[org.id]["hyperpod"]) == sorted(c.name for c in mine if c.backend == "hyperpod")
        assert sorted(observed[org.id]["pcluster"]) == sorted(c.name for c in mine if c.backend == "pcluster")
        assert {c.account_id for c in mine} <= {org.aws.account_id}
    # Pitcrew's own (base) credentials are moto's default account, where nothing was seeded.
    base = boto3.client("sagemaker", region_name="us-east-1", endpoint_url=endpoint)
    assert base.list_clusters()["ClusterSummaries"] == []


def test_both_backends_with_and_without_an_api(seeded: SeedReport, program: ProgramConfig) -> None:
    with_api = {org.id for org in program.orgs if org.aws.parallelcluster_api}
    combos = {(c.backend, c.org_id in with_api) for c in seeded.clusters}
    assert combos == {("hyperpod", True), ("hyperpod", False), ("pcluster", True), ("pcluster", False)}


@pytest.mark.usefixtures("seeded")
def test_hyperpod_clusters_look_real(endpoint: str, program: ProgramConfig) -> None:
    kumo = program.org("kumo-labs")
    assert kumo is not None
    sagemaker = _client(endpoint, kumo, "sagemaker")
    described = sagemaker.describe_cluster(ClusterName="kumo-p5-train")
    groups = {group["InstanceGroupName"]: group for group in described["InstanceGroups"]}
    assert groups["controller-machine"]["InstanceType"] == "ml.m5.12xlarge"
    assert groups["controller-machine"]["CurrentCount"] == 1
    worker = groups["worker-group-1"]
    assert worker["InstanceType"] == "ml.p5.48xlarge"
    assert worker["TargetCount"] == 32
    assert worker["ThreadsPerCore"] == 1
    assert worker["LifeCycleConfig"] == {
        "SourceS3Uri": "s3://sagemaker-kumo-labs-lifecycle/base-config/",
        "OnCreate": "on_create.sh",
    }
    assert worker["Status"] == "Degraded"  # holds one of the seeded Failure nodes
    assert described["Orchestrator"] == {"Slurm": {"SlurmConfigStrategy": "Managed"}}
    tags = sagemaker.list_tags(ResourceArn=described["ClusterArn"])["Tags"]
    assert {"Key": "pitcrew:org", "Value": "kumo-labs"} in tags


def test_parallelcluster_instances_are_tagged(observed: dict[str, dict[str, Any]]) -> None:
    instances = observed["fuji-ml"]["pcluster"]["fuji-p5-pretrain"]
    heads = [i for i in instances if i["_tags"]["parallelcluster:node-type"] == "HeadNode"]
    compute = [i for i in instances if i["_tags"]["parallelcluster:node-type"] == "ComputeNode"]
    assert [h["InstanceType"] for h in heads] == ["m5.8xlarge"]
    assert heads[0]["_tags"]["Name"] == "HeadNode"
    assert len(compute) == 24
    for instance in compute:
        assert instance["InstanceType"] == "p5.48xlarge"
        assert instance["_tags"]["parallelcluster:queue-name"] == "compute-gpu"
        assert instance["_tags"]["Name"] == "Compute"
    assert {i["_tags"]["pitcrew:org"] for i in instances} == {"fuji-ml"}
    trn = observed["kaze-robotics"]["pcluster"]["kaze-trn1-train"]
    assert {i["InstanceType"] for i in trn} == {"m5.8xlarge", "trn1.32xlarge"}


def test_unhealthy_nodes(
    observed: dict[str, dict[str, Any]], seeded: SeedReport, endpoint: str, program: ProgramConfig
) -> None:
    statuses: Counter[str] = Counter()
    messages = {}
    for backends in observed.values():
        for nodes in backends["hyperpod"].values():
            for node in nodes:
                statuses[node["InstanceStatus"]["Status"]] += 1
                if node["InstanceStatus"]["Status"] != "Running":
                    messages[node["InstanceId"]] = node["InstanceStatus"]["Message"]
                else:
                    assert node["InstanceStatus"]["Message"] == ""
    assert statuses["Failure"] == 2
    assert statuses["DeepHealthCheckInProgress"] == 1
    assert statuses["Pending"] == 1
    assert set(statuses) == {"Running", "Failure", "DeepHealthCheckInProgress", "Pending"}
    assert any("XID 79" in message for message in messages.values())

    stopped = []
    impaired = []
    for org in program.orgs:
        ids = [i["InstanceId"] for instances in observed[org.id]["pcluster"].values() for i in instances]
        stopped += [
            i
            for instances in observed[org.id]["pcluster"].values()
            for i in instances
            if i["State"]["Name"] == "stopped"
        ]
        if ids:
            ec2 = _client(endpoint, org, "ec2")
            for status in ec2.describe_instance_status(InstanceIds=ids, IncludeAllInstances=True)["InstanceStatuses"]:
                if "impaired" in (status["InstanceStatus"]["Status"], status["SystemStatus"]["Status"]):
                    impaired.append(status["InstanceId"])
    assert len(stopped) == 1
    assert stopped[0]["_tags"]["parallelcluster:node-type"] == "ComputeNode"
    assert len(impaired) == 1

    reported = Counter(node.status for node in seeded.unhealthy)
    assert reported == Counter(
        {"Failure": 2, "DeepHealthCheckInProgress": 1, "Pending": 1, "stopped": 1, "impaired": 1}
    )
    assert {n.node_id for n in seeded.unhealthy if n.status == "stopped"} == {stopped[0]["InstanceId"]}
    assert {n.node_id for n in seeded.unhealthy if n.status == "impaired"} == set(impaired)
    assert {n.node_id for n in seeded.unhealthy if n.backend == "hyperpod"} == set(messages)
    # Faults land in orgs with and without a ParallelCluster API.
    with_api = {org.id for org in program.orgs if org.aws.parallelcluster_api}
    assert {n.org_id in with_api for n in seeded.unhealthy} == {True, False}


async def test_the_emulator_serves_the_seeded_clusters(
    seeded: SeedReport, endpoint: str, program: ProgramConfig
) -> None:
    api = ParallelClusterApi()
    transport = httpx.ASGITransport(app=api)
    async with httpx.AsyncClient(transport=transport, base_url="http://pcluster.sandbox") as http:
        for org in program.orgs:
            url = api.api_url("http://pcluster.sandbox", org.aws.account_id, org.aws.region) + "/v3/clusters"
            request = AWSRequest(method="GET", url=url, headers={})
            SigV4Auth(_credentials(endpoint, org), "execute-api", org.aws.region).add_auth(request)
            response = await http.get(url, headers=dict(request.headers.items()))
            assert response.status_code == 200, response.text
            names = sorted(c["clusterName"] for c in response.json()["clusters"])
            assert names == sorted(c.name for c in seeded.clusters if c.org_id == org.id and c.backend == "pcluster")


def _remapped(prefix: str, org_ids: list[str], **quota: dict[str, int]) -> ProgramConfig:
    """A copy of some orgs moved to fresh accounts, so they seed beside the module's seeded state."""
    data = yaml.safe_load(EXAMPLE.read_text())
    orgs = []
    for org in data["orgs"]:
        if org["id"] in org_ids:
            account = prefix + org["aws"]["account_id"][len(prefix) :]
            org["aws"]["account_id"] = account
            org["aws"]["role_arn"] = f"arn:aws:iam::{account}:role/PitcrewOps"
            org["quota"] = quota.get(org["id"].replace("-", "_"), org["quota"])
            orgs.append(org)
    data["orgs"] = orgs
    return ProgramConfig.model_validate(data)


@pytest.mark.usefixtures("seeded")
def test_quota_shrinks_clusters_and_faults_are_optional(endpoint: str, program: ProgramConfig) -> None:
    small = _remapped("90", ["kumo-labs", "sakura-ai"], kumo_labs={"p5.48xlarge": 10})
    report = seed_program(small, endpoint_url=endpoint, unhealthy=False)
    assert report.unhealthy == []
    assert [(c.name, c.count) for c in report.clusters] == [("kumo-p5-train", 10), ("sakura-trn1-pretrain", 16)]
    kumo = small.org("kumo-labs")
    assert kumo is not None
    nodes = _hyperpod(endpoint, kumo)["kumo-p5-train"]
    assert {node["InstanceStatus"]["Status"] for node in nodes} == {"Running"}
    assert len(nodes) == 11
    # The module's kumo-labs, in its own account, is untouched.
    original = program.org("kumo-labs")
    assert original is not None
    assert len(_hyperpod(endpoint, original)["kumo-p5-train"]) == 33


def test_plan_for_orgs_outside_the_curated_layout(program: ProgramConfig) -> None:
    data = yaml.safe_load(EXAMPLE.read_text())
    data["orgs"] = [
        {
            "id": "hotaru-labs",
            "name": "Hotaru Labs",
            "channel": "C0HOTARU1",
            "aws": {"account_id": "161616161616", "region": "us-east-1"},
            "quota": {"p5.48xlarge": 100, "trn1.32xlarge": 4, "m5.8xlarge": 2},
        },
        {
            "id": "tsuki-ai",
            "name": "Tsuki AI",
            "channel": "C0TSUKI01",
            "aws": {"account_id": "171717171717", "region": "us-west-2"},
            "quota": {"p5.48xlarge": 0},
        },
    ]
    plans = plan_program(ProgramConfig.model_validate(data))
    assert [(p.org_id, p.backend, p.name, p.instance_type, p.count) for p in plans] == [
        ("hotaru-labs", "hyperpod", "hotaru-p5-train", "p5.48xlarge", 8),
        ("hotaru-labs", "hyperpod", "hotaru-trn1-train", "trn1.32xlarge", 4),
    ]
    example = plan_program(program)
    assert sum(p.count for p in example if p.instance_type == "p5.48xlarge") == 127
    assert {p.org_id for p in example} == {org_id for org_id, layout in CURATED_LAYOUT.items() if layout}
