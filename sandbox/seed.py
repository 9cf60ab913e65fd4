"""Seed a program's clusters into the embedded AWS (a moto server) for the sandbox and the tests.

Each org's clusters are created in its own account, reached as Pitcrew reaches it: STS assume_role of
the org's role_arn with its external_id (moto maps the temporary keys to the role's account). HyperPod
clusters are SageMaker clusters; ParallelCluster clusters are what ParallelCluster leaves in EC2: a
head node and compute nodes tagged `parallelcluster:*` (the sandbox's ParallelCluster API emulator
reads them back).

For program.example.yml the layout is the GENIAC day-one picture: 127 P5 and 24 Trn1 nodes across the
orgs, both backends, in orgs with and without a ParallelCluster API, clusters of at most 64 nodes. Orgs
the curated layout does not know get a small generic cluster per accelerator type in their quota.

Unhealthy nodes are injected through moto's in-process backends (moto_support), so with
`unhealthy=True` the moto server must run in this process (start_moto_server does that).
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import boto3
from botocore.config import Config

from bot.clusters.model import ORG_TAG
from bot.config import OrgConfig, ProgramConfig, normalize_instance_type
from sandbox import moto_support
from sandbox.reserved import SeededReservation, seed_reserved_capacity

__all__ = [
    "CURATED_LAYOUT",
    "ClusterPlan",
    "SeedReport",
    "SeededCluster",
    "UnhealthyNode",
    "plan_program",
    "seed_capacity_failure",
    "seed_program",
]

Backend = Literal["hyperpod", "pcluster"]

MAX_CLUSTER_NODES = 64  # keeps the demo snappy: one ListClusterNodes page, one screen of nodes
GENERIC_CLUSTER_NODES = 8
PCLUSTER_VERSION = "3.12.0"
CONTROLLER_GROUP = "controller-machine"
CONTROLLER_TYPE = "ml.m5.12xlarge"
WORKER_GROUP = "worker-group-1"  # the name awsome-distributed-training's provisioning_parameters use
HEAD_NODE_TYPE = "m5.8xlarge"
SESSION_NAME = "pitcrew-seed"
# moto 5.2.5's HyperPod instance-type allow-list (accelerators only); other types go to ParallelCluster.
MOTO_HYPERPOD_TYPES = frozenset({"p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "trn1.32xlarge", "trn1n.32xlarge"})
CLIENT_CONFIG = Config(retries={"mode": "standard", "max_attempts": 3}, max_pool_connections=4)

# org id -> its clusters: (backend, name, instance type, accelerator nodes). 127 P5, 24 Trn1 in all.
CURATED_LAYOUT: dict[str, tuple[tuple[Backend, str, str, int], ...]] = {
    # kumo-p5-dev runs no job (the simulated ones run on kumo-p5-train): the sandbox's idle cluster.
    "kumo-labs": (("hyperpod", "kumo-p5-train", "p5.48xlarge", 32), ("pcluster", "kumo-p5-dev", "p5.48xlarge", 4)),
    "sakura-ai": (("hyperpod", "sakura-trn1-pretrain", "trn1.32xlarge", 16),),
    "fuji-ml": (("pcluster", "fuji-p5-pretrain", "p5.48xlarge", 24),),
    "hikari-compute": (("pcluster", "hikari-p5-llm", "p5.48xlarge", 16),),
    "hoshi-vision": (("hyperpod", "hoshi-p5-vlm", "p5.48xlarge", 15),),
    "tsubame-nlp": (("hyperpod", "tsubame-p5-sft", "p5.48xlarge", 8),),
    "yama-bio": (("hyperpod", "yama-p5-protein", "p5.48xlarge", 8),),
    "nami-speech": (("pcluster", "nami-p5-asr", "p5.48xlarge", 8),),
    "sora-multimodal": (("pcluster", "sora-p5-mm", "p5.48xlarge", 8),),
    "mori-finance": (("hyperpod", "mori-p5-finetune", "p5.48xlarge", 4),),
    "kaze-robotics": (("pcluster", "kaze-trn1-train", "trn1.32xlarge", 8),),
    "umi-lang": (),  # still onboarding: quota, no clusters yet
}


@dataclass(frozen=True)
class _Fault:
    """One unhealthy node to inject: the preferred cluster, else the next seeded one of that backend."""

    backend: Backend
    preferred_cluster: str
    index: int  # which accelerator node of the cluster (wraps around small clusters)
    status: str  # HyperPod ClusterInstanceStatus, or "stopped" / "impaired" for EC2
    message: str = ""
    # What a deep health check of the node finds (sandbox.moto_support.set_deep_health_check_result): the hardware
    # faults fail it, as they would on AWS; None: it passes.
    check_finds: str | None = None


FAULTS: tuple[_Fault, ...] = (
    _Fault(
        "hyperpod",
        "kumo-p5-train",
        7,
        "Failure",
        "Node health check failed: GPU XID 79 (fallen off the bus)",
        check_finds="InstanceStress: GPU 5 not found by DCGM diagnostics (XID 79, fallen off the bus)",
    ),
    _Fault(
        "hyperpod",
        "sakura-trn1-pretrain",
        3,
        "Failure",
        "Node health check failed: Neuron device 5 reported an uncorrectable memory error (NeuronCore hardware error)",
        check_finds="InstanceStress: Trainium device 5 failed the HBM memory test (uncorrected ECC errors)",
    ),
    _Fault(
        "hyperpod",
        "hoshi-p5-vlm",
        2,
        "DeepHealthCheckInProgress",
        "Deep health checks in progress: InstanceStress, InstanceConnectivity",
    ),
    _Fault("hyperpod", "tsubame-p5-sft", 5, "Pending", "Provisioning a replacement instance"),
    _Fault("pcluster", "fuji-p5-pretrain", 11, "stopped", "Stopped by the sandbox seed (instance stopped)"),
    _Fault("pcluster", "hikari-p5-llm", 4, "impaired", "Instance status check failed: reachability"),
)


# The Continuous-provisioning cluster (HyperPod on EKS): its cluster events are read, and `seed_program(...,
# provisioning_failure=True)` (the demo) records a scale-up that found no capacity, which Pitcrew alerts.
CONTINUOUS_CLUSTER = "mori-p5-finetune"
CAPACITY_FAILURE = (
    "InsufficientInstanceCapacity: We currently do not have sufficient ml.p5.48xlarge capacity in the Availability "
    "Zone you requested (us-east-1a). Our system will be working on provisioning additional capacity."
)


@dataclass(frozen=True)
class ClusterPlan:
    org_id: str
    backend: Backend
    name: str
    instance_type: str  # accelerator type without the `ml.` prefix
    count: int  # accelerator nodes (HyperPod workers / ParallelCluster compute nodes)


@dataclass(frozen=True)
class SeededCluster:
    org_id: str
    account_id: str
    region: str
    backend: Backend
    name: str
    instance_type: str  # as created: ml.p5.48xlarge for HyperPod, p5.48xlarge for EC2
    count: int  # accelerator nodes
    node_ids: tuple[str, ...]  # accelerator node ids (HyperPod node ids are EC2 instance ids too)
    instances: dict[str, int]  # every instance by type, controller/head node included


@dataclass(frozen=True)
class UnhealthyNode:
    org_id: str
    account_id: str
    region: str
    backend: Backend
    cluster: str
    node_id: str
    status: str  # HyperPod status, or "stopped" (EC2 state) / "impaired" (EC2 status check)
    message: str


@dataclass
class SeedReport:
    clusters: list[SeededCluster]
    unhealthy: list[UnhealthyNode]
    seconds: float
    clusters_by_org: dict[str, list[str]] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)  # instance type as created -> instances
    reserved: list[SeededReservation] = field(default_factory=list)  # sandbox.reserved: a block, a plan

    def __post_init__(self) -> None:
        if not self.clusters_by_org:
            for cluster in self.clusters:
                self.clusters_by_org.setdefault(cluster.org_id, []).append(cluster.name)
        if not self.totals:
            counted: Counter[str] = Counter()
            for cluster in self.clusters:
                counted.update(cluster.instances)
            self.totals = dict(sorted(counted.items()))

    def total(self, instance_type: str) -> int:
        """Instances of a type on both backends (`ml.` prefix or not), e.g. total("p5.48xlarge") == 127."""
        wanted = normalize_instance_type(instance_type)
        return sum(count for itype, count in self.totals.items() if normalize_instance_type(itype) == wanted)

    def summary(self) -> str:
        lines = [
            f"seeded {len(self.clusters)} clusters in {len(self.clusters_by_org)} orgs in {self.seconds:.2f}s: "
            + ", ".join(f"{itype} x{count}" for itype, count in self.totals.items())
        ]
        lines += [
            f"  {c.org_id}: {c.backend} {c.name} {c.count} x {c.instance_type} ({c.account_id} {c.region})"
            for c in self.clusters
        ]
        lines += [f"  unhealthy: {u.org_id}/{u.cluster} {u.node_id} {u.status}" for u in self.unhealthy]
        return "\n".join(lines)


# --- planning (pure) ----------------------------------------------------------------------------------


def _family(instance_type: str) -> str:
    return normalize_instance_type(instance_type).split(".")[0]


def plan_program(program: ProgramConfig) -> list[ClusterPlan]:
    """The clusters to seed, respecting each org's quota (clusters shrink to fit; none if quota is 0)."""
    plans: list[ClusterPlan] = []
    for position, org in enumerate(program.orgs):
        if org.id in CURATED_LAYOUT:
            wanted = [(backend, name, itype, count) for backend, name, itype, count in CURATED_LAYOUT[org.id]]
        else:
            wanted = _generic_layout(org, position)
        held: Counter[str] = Counter()
        for backend, name, itype, count in wanted:
            allowed = org.quota_for(itype)
            fits = count if allowed is None else max(0, min(count, allowed - held[itype]))
            fits = min(fits, MAX_CLUSTER_NODES)
            if fits > 0:
                held[itype] += fits
                plans.append(ClusterPlan(org.id, backend, name, itype, fits))
    return plans


def _generic_layout(org: OrgConfig, position: int) -> list[tuple[Backend, str, str, int]]:
    prefix = org.id.split("-")[0]
    out: list[tuple[Backend, str, str, int]] = []
    for itype, allowed in org.quota.items():
        itype = normalize_instance_type(itype)
        if allowed <= 0 or _family(itype) in ("m5", "c5", "t3"):
            continue
        # Alternate backends across orgs so a custom program still shows both.
        backend: Backend = "hyperpod" if position % 2 == 0 and itype in MOTO_HYPERPOD_TYPES else "pcluster"
        out.append((backend, f"{prefix}-{_family(itype)}-train", itype, min(allowed, GENERIC_CLUSTER_NODES)))
    return out


# --- seeding ------------------------------------------------------------------------------------------


@dataclass
class _OrgClients:
    org: OrgConfig
    account_id: str
    sagemaker: Any
    ec2: Any


def _base_session(session: boto3.Session | None) -> boto3.Session:
    session = session or boto3.Session()
    if session.get_credentials() is None:
        # moto accepts any key; the sandbox may run without AWS variables set.
        session = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing")
    return session


def _org_clients(
    base: boto3.Session, sts: Any, org: OrgConfig, endpoint_url: str, backends: set[Backend]
) -> _OrgClients:
    """Clients in the org's account: through its role when it has one, else with the base credentials."""
    keys: dict[str, str] = {}
    if org.aws.role_arn:
        params = {"RoleArn": org.aws.role_arn, "RoleSessionName": SESSION_NAME}
        if org.aws.external_id:
            params["ExternalId"] = org.aws.external_id
        credentials = sts.assume_role(**params)["Credentials"]
        keys = {
            "aws_access_key_id": credentials["AccessKeyId"],
            "aws_secret_access_key": credentials["SecretAccessKey"],
            "aws_session_token": credentials["SessionToken"],
        }
        account_id = org.aws.role_arn.split(":")[4]
    else:
        account_id = sts.get_caller_identity()["Account"]

    def client(service: str, needed: bool) -> Any:
        # Only the clients the org's clusters need: each one costs tens of milliseconds to build.
        if not needed:
            return None
        return base.client(service, region_name=org.aws.region, endpoint_url=endpoint_url, config=CLIENT_CONFIG, **keys)

    return _OrgClients(
        org, account_id, client("sagemaker", "hyperpod" in backends), client("ec2", "pcluster" in backends)
    )


def _fake_id(prefix: str, *parts: str, length: int = 17) -> str:
    return f"{prefix}-{hashlib.sha256('/'.join(parts).encode()).hexdigest()[:length]}"


def _orchestration(account: str, region: str, name: str) -> dict[str, Any]:
    """The cluster's orchestrator and provisioning mode: the Continuous-provisioning cluster is orchestrated by
    EKS, as continuous provisioning needs (moto 5.2.5 keeps no Orchestrator; the sandbox's moto_support keeps
    NodeProvisioningMode); the others by Slurm."""
    if name != CONTINUOUS_CLUSTER:
        return {"Orchestrator": {"Slurm": {"SlurmConfigStrategy": "Managed"}}}
    eks = f"arn:aws:eks:{region}:{account}:cluster/{name}-eks"
    return {"Orchestrator": {"Eks": {"ClusterArn": eks}}, "NodeProvisioningMode": "Continuous"}


def _seed_hyperpod(clients: _OrgClients, plan: ClusterPlan) -> SeededCluster:
    org = clients.org
    account = clients.account_id
    lifecycle = {"SourceS3Uri": f"s3://sagemaker-{org.id}-lifecycle/base-config/", "OnCreate": "on_create.sh"}
    role = f"arn:aws:iam::{account}:role/SageMakerHyperPodExecutionRole-{org.id}"
    worker_type = "ml." + plan.instance_type
    clients.sagemaker.create_cluster(
        ClusterName=plan.name,
        InstanceGroups=[
            {
                "InstanceGroupName": CONTROLLER_GROUP,
                "InstanceType": CONTROLLER_TYPE,
                "InstanceCount": 1,
                "LifeCycleConfig": lifecycle,
                "ExecutionRole": role,
                "ThreadsPerCore": 1,
            },
            {
                "InstanceGroupName": WORKER_GROUP,
                "InstanceType": worker_type,
                "InstanceCount": plan.count,
                "LifeCycleConfig": lifecycle,
                "ExecutionRole": role,
                "ThreadsPerCore": 1,
            },
        ],
        VpcConfig={
            "SecurityGroupIds": [_fake_id("sg", account, org.id)],
            "Subnets": [_fake_id("subnet", account, org.aws.region, org.id)],
        },
        **_orchestration(account, org.aws.region, plan.name),
        NodeRecovery="Automatic",
        Tags=[{"Key": ORG_TAG, "Value": org.id}],
    )
    workers: list[str] = []
    pages = clients.sagemaker.get_paginator("list_cluster_nodes").paginate(
        ClusterName=plan.name, InstanceGroupNameContains=WORKER_GROUP
    )
    for page in pages:
        workers += [node["InstanceId"] for node in page["ClusterNodeSummaries"]]
    return SeededCluster(
        org_id=org.id,
        account_id=account,
        region=org.aws.region,
        backend="hyperpod",
        name=plan.name,
        instance_type=worker_type,
        count=plan.count,
        node_ids=tuple(workers),
        instances={CONTROLLER_TYPE: 1, worker_type: plan.count},
    )


def _tags(pairs: dict[str, str]) -> list[dict[str, Any]]:
    return [{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in pairs.items()]}]


def _seed_pcluster(clients: _OrgClients, plan: ClusterPlan) -> SeededCluster:
    org = clients.org
    image = _fake_id("ami", org.aws.region, "aws-parallelcluster-3.12.0-ubuntu-2204-lts-hvm-x86_64")
    common = {
        "parallelcluster:cluster-name": plan.name,
        "parallelcluster:version": PCLUSTER_VERSION,
        ORG_TAG: org.id,
    }
    clients.ec2.run_instances(
        ImageId=image,
        InstanceType=HEAD_NODE_TYPE,
        MinCount=1,
        MaxCount=1,
        TagSpecifications=_tags({"Name": "HeadNode", **common, "parallelcluster:node-type": "HeadNode"}),
    )
    queue = "compute-gpu" if _family(plan.instance_type).startswith(("p", "g")) else "compute-trn"
    reservation = clients.ec2.run_instances(
        ImageId=image,
        InstanceType=plan.instance_type,
        MinCount=plan.count,
        MaxCount=plan.count,
        TagSpecifications=_tags(
            {
                "Name": "Compute",
                **common,
                "parallelcluster:node-type": "ComputeNode",
                "parallelcluster:queue-name": queue,
                "parallelcluster:compute-resource-name": "distributed-ml",
            }
        ),
    )
    compute = tuple(instance["InstanceId"] for instance in reservation["Instances"])
    return SeededCluster(
        org_id=org.id,
        account_id=clients.account_id,
        region=org.aws.region,
        backend="pcluster",
        name=plan.name,
        instance_type=plan.instance_type,
        count=plan.count,
        node_ids=compute,
        instances={HEAD_NODE_TYPE: 1, plan.instance_type: plan.count},
    )


def _seed_org(clients: _OrgClients, plans: Sequence[ClusterPlan]) -> list[SeededCluster]:
    return [(_seed_hyperpod if plan.backend == "hyperpod" else _seed_pcluster)(clients, plan) for plan in plans]


def _pick(fault: _Fault, clusters: list[SeededCluster], used: set[str]) -> SeededCluster | None:
    same_backend = [c for c in clusters if c.backend == fault.backend]
    preferred = next((c for c in same_backend if c.name == fault.preferred_cluster), None)
    if preferred:
        return preferred
    return next((c for c in same_backend if c.name not in used), same_backend[0] if same_backend else None)


def _inject(clusters: list[SeededCluster], ec2_by_org: dict[str, Any]) -> list[UnhealthyNode]:
    unhealthy: list[UnhealthyNode] = []
    used_nodes: set[str] = set()
    used_clusters: set[str] = set()
    for fault in FAULTS:
        cluster = _pick(fault, clusters, used_clusters)
        if cluster is None or not cluster.node_ids:
            continue
        used_clusters.add(cluster.name)
        candidates = [cluster.node_ids[(fault.index + k) % len(cluster.node_ids)] for k in range(len(cluster.node_ids))]
        node_id = next((n for n in candidates if n not in used_nodes), None)
        if node_id is None:
            continue
        used_nodes.add(node_id)
        try:
            if fault.backend == "hyperpod":
                moto_support.set_hyperpod_node_status(
                    cluster.account_id, cluster.region, cluster.name, node_id, fault.status, fault.message
                )
                if fault.check_finds:
                    moto_support.set_deep_health_check_result(
                        cluster.account_id, cluster.region, cluster.name, node_id, fault.check_finds
                    )
            elif fault.status == "stopped":
                ec2_by_org[cluster.org_id].stop_instances(InstanceIds=[node_id])
            else:
                moto_support.set_ec2_instance_status(
                    cluster.account_id, cluster.region, node_id, instance_status="impaired"
                )
        except LookupError as exc:
            raise RuntimeError(
                "seed_program(unhealthy=True) sets node health through moto's in-process backends, so the moto "
                f"server must run in this process (sandbox.moto_support.start_moto_server): {exc}"
            ) from exc
        unhealthy.append(
            UnhealthyNode(
                cluster.org_id,
                cluster.account_id,
                cluster.region,
                cluster.backend,
                cluster.name,
                node_id,
                fault.status,
                fault.message,
            )
        )
    return unhealthy


def seed_capacity_failure(clusters: Sequence[SeededCluster]) -> None:
    """The Continuous-provisioning cluster tried to add nodes to its workers and found no capacity: the event AWS
    records (ListClusterEvents, DescribeClusterEvent's FailureMessage)."""
    cluster = next((c for c in clusters if c.name == CONTINUOUS_CLUSTER), None)
    if cluster is None:
        return
    moto_support.add_hyperpod_cluster_event(
        cluster.account_id,
        cluster.region,
        cluster.name,
        description=f"Failed to scale up instance group {WORKER_GROUP}: 0 of 4 instances launched",
        instance_group=WORKER_GROUP,
        failure_message=CAPACITY_FAILURE,
    )


def seed_program(
    program: ProgramConfig,
    *,
    endpoint_url: str,
    unhealthy: bool = True,
    session: boto3.Session | None = None,
    plans: Sequence[ClusterPlan] | None = None,
    provisioning_failure: bool = False,
) -> SeedReport:
    """Create the program's clusters in a fresh moto server; see the module docstring.

    session: base credentials (default: the standard chain, else moto's dummy keys).
    plans: the clusters to create (default: plan_program(program)).
    provisioning_failure: the Continuous-provisioning cluster's scale-up failed for capacity (a cluster event,
    InsufficientInstanceCapacity), as the demo shows it; tests that want it ask for it.
    """
    started = time.perf_counter()
    moto_support.apply_moto_patches()  # realistic node ids and settable health, whoever started the server
    base = _base_session(session)
    sts = base.client("sts", region_name="us-east-1", endpoint_url=endpoint_url, config=CLIENT_CONFIG)
    chosen = list(plan_program(program) if plans is None else plans)
    by_org: dict[str, list[ClusterPlan]] = {}
    for plan in chosen:
        by_org.setdefault(plan.org_id, []).append(plan)
    # One org after another: moto serves from this process, so threads only contend for the GIL
    # (measured: 8 workers took 3.0 s where sequential took 1.9-2.6 s).
    org_clients = {
        org.id: _org_clients(base, sts, org, endpoint_url, {plan.backend for plan in by_org[org.id]})
        for org in program.orgs
        if org.id in by_org
    }
    results = [_seed_org(org_clients[org_id], by_org[org_id]) for org_id in org_clients]
    clusters = [cluster for org_result in results for cluster in org_result]
    faults = _inject(clusters, {org_id: c.ec2 for org_id, c in org_clients.items()}) if unhealthy else []
    reserved = seed_reserved_capacity(clusters)
    if provisioning_failure:
        seed_capacity_failure(clusters)
    return SeedReport(clusters=clusters, unhealthy=faults, seconds=time.perf_counter() - started, reserved=reserved)
