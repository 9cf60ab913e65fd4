"""Reading an org's reservations from AWS, through its accounts (bot.clusters.accounts): SageMaker
ListTrainingPlans, and for the HyperPod clusters that name a plan (ClusterSummary.TrainingPlanArns) their
DescribeCluster instance groups' TrainingPlanArn; EC2 DescribeCapacityReservations (Capacity Blocks for ML and
On-Demand Capacity Reservations), and which ParallelCluster nodes they hold:

1. a compute resource's `CapacityReservationTarget.CapacityReservationId` in the cluster's configuration (read
   through the ParallelCluster API, where the org has one), or an instance's own `CapacityReservationId`
   (EC2 DescribeInstances, where EC2 says it);
2. else, for a cluster with no explicit target, by instance type and availability zone: its compute instances of
   the reservation's type in the reservation's zone, up to the reservation's size.

Synchronous (boto3): the service runs it in a worker thread."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

import yaml

from bot.capacity.model import LIVE_STATUSES, Reservation
from bot.clusters.model import ORG_TAG, Backend, Cluster
from bot.clusters.parallelcluster import NAME_TAG, NODE_TYPE_TAG, QUEUE_TAG
from bot.config import OrgConfig, normalize_instance_type

log = logging.getLogger(__name__)
COMPUTE_NODE_TAGS = frozenset({"Compute", "ComputeNode", ""})  # ParallelCluster tags compute instances "Compute"
ConfigReader = Callable[[str], str | None]  # a ParallelCluster cluster's configuration YAML, None if unknown


def _pages(call: Callable[..., dict[str, Any]], key: str, **kwargs: Any) -> Iterator[dict[str, Any]]:
    token: str | None = None
    while True:
        page = call(**kwargs, **({"NextToken": token} if token else {}))
        yield from page.get(key, [])
        token = page.get("NextToken")
        if not token:
            return


def _aware(value: Any) -> datetime | None:
    return value if isinstance(value, datetime) else None


def training_plans(org: OrgConfig, sagemaker: Any, clusters: Sequence[Cluster]) -> list[Reservation]:
    """The org's live training plans, each with the org's HyperPod instance groups that use it."""
    ours = {c.name for c in clusters if c.backend is Backend.HYPERPOD}
    users: dict[str, list[tuple[str, str, int]]] = defaultdict(list)
    for summary in _pages(sagemaker.list_clusters, "ClusterSummaries"):
        if summary["ClusterName"] not in ours or not summary.get("TrainingPlanArns"):
            continue
        described = sagemaker.describe_cluster(ClusterName=summary["ClusterName"])
        for group in described.get("InstanceGroups", []):
            if group.get("TrainingPlanArn"):
                count = int(group.get("CurrentCount", group.get("TargetCount", 0)) or 0)
                users[group["TrainingPlanArn"]].append((summary["ClusterName"], group["InstanceGroupName"], count))
    plans = []
    for plan in _pages(sagemaker.list_training_plans, "TrainingPlanSummaries"):
        if plan["Status"] not in LIVE_STATUSES:
            continue
        capacity = plan.get("ReservedCapacitySummaries") or [{}]
        plans.append(
            Reservation(
                org_id=org.id,
                source="training_plan",
                id=plan["TrainingPlanArn"],
                name=plan["TrainingPlanName"],
                instance_type=str(capacity[0].get("InstanceType", "")),
                total=int(plan.get("TotalInstanceCount", 0) or 0),
                available=plan.get("AvailableInstanceCount"),
                start=_aware(plan.get("StartTime")),
                end=_aware(plan.get("EndTime")),
                status=plan["Status"],
                clusters=tuple(sorted(users.get(plan["TrainingPlanArn"], []))),
                zone=str(capacity[0].get("AvailabilityZone", "")),
            )
        )
    return plans


def _targets(configuration: str | None) -> dict[tuple[str, str], str]:
    """(queue, instance type) -> the capacity reservation its compute resource targets."""
    try:
        config = yaml.safe_load(configuration or "") or {}
    except yaml.YAMLError:
        return {}
    targets: dict[tuple[str, str], str] = {}
    if not isinstance(config, dict):
        return targets
    for queue in (config.get("Scheduling") or {}).get("SlurmQueues") or []:
        for resource in queue.get("ComputeResources") or []:
            target = (resource.get("CapacityReservationTarget") or {}).get("CapacityReservationId")
            types = [resource.get("InstanceType")] + [i.get("InstanceType") for i in resource.get("Instances") or []]
            for itype in filter(None, types):
                if target:
                    targets[(str(queue.get("Name", "")), normalize_instance_type(str(itype)))] = str(target)
    return targets


def _tagged_org(reservation: dict[str, Any]) -> str | None:
    """The org a reservation's `pitcrew:org` tag names (where orgs share an account), else None."""
    return next((t["Value"] for t in reservation.get("Tags", []) if t.get("Key") == ORG_TAG), None)


def capacity_reservations(
    org: OrgConfig, ec2: Any, clusters: Sequence[Cluster], configuration: ConfigReader
) -> list[Reservation]:
    """The org's live EC2 capacity reservations, each with the ParallelCluster queues whose nodes it holds."""
    found = [
        r
        for r in _pages(ec2.describe_capacity_reservations, "CapacityReservations")
        if r["State"] in LIVE_STATUSES and _tagged_org(r) in (None, org.id)
    ]
    if not found:
        return []
    names = {c.name for c in clusters if c.backend is Backend.PCLUSTER}
    # cluster -> [(queue, type, zone, the instance's own reservation)] of its compute instances that run
    instances: dict[str, list[tuple[str, str, str, str]]] = defaultdict(list)
    if names:
        pages = ec2.get_paginator("describe_instances").paginate(
            Filters=[
                {"Name": "tag-key", "Values": [NAME_TAG]},
                {"Name": "instance-state-name", "Values": ["pending", "running"]},
            ]
        )
        for page in pages:
            for group in page["Reservations"]:
                for instance in group["Instances"]:
                    tags = {tag["Key"]: tag["Value"] for tag in instance.get("Tags", [])}
                    if tags.get(NAME_TAG) not in names or tags.get(NODE_TYPE_TAG, "") not in COMPUTE_NODE_TAGS:
                        continue
                    instances[tags[NAME_TAG]].append(
                        (
                            tags.get(QUEUE_TAG, ""),
                            normalize_instance_type(instance["InstanceType"]),
                            str(instance.get("Placement", {}).get("AvailabilityZone", "")),
                            str(instance.get("CapacityReservationId", "")),
                        )
                    )
    held: dict[str, dict[tuple[str, str], int]] = defaultdict(lambda: defaultdict(int))  # rid -> (cluster, queue)
    loose: list[tuple[str, str, str, str]] = []  # (cluster, queue, type, zone) of instances with no target known
    for cluster_name in sorted(instances):
        targets = _targets(configuration(cluster_name))
        explicit = bool(targets) or any(own for *_, own in instances[cluster_name])
        for queue, itype, zone, own in instances[cluster_name]:
            rid = own or targets.get((queue, itype))
            if rid:
                held[rid][(cluster_name, queue)] += 1
            elif not explicit:
                loose.append((cluster_name, queue, itype, zone))
    reservations = []
    for item in sorted(
        found, key=lambda r: (r.get("EndDate") is None, r.get("EndDate") or 0, r["CapacityReservationId"])
    ):
        rid = item["CapacityReservationId"]
        uses = held.get(rid, {})
        room = int(item.get("TotalInstanceCount", 0) or 0) - sum(uses.values())
        if not uses:  # no explicit target anywhere: matched by instance type and zone, up to its size
            matched: dict[tuple[str, str], int] = defaultdict(int)
            for entry in list(loose):
                cluster_name, queue, itype, zone = entry
                if (
                    room > 0
                    and itype == normalize_instance_type(item["InstanceType"])
                    and zone == item["AvailabilityZone"]
                ):
                    matched[(cluster_name, queue)] += 1
                    loose.remove(entry)
                    room -= 1
            uses = matched
        block = item.get("ReservationType") == "capacity-block"
        reservations.append(
            Reservation(
                org_id=org.id,
                source="capacity_block" if block else "capacity_reservation",
                id=rid,
                name=rid,
                instance_type=item["InstanceType"],
                total=int(item.get("TotalInstanceCount", 0) or 0),
                available=item.get("AvailableInstanceCount"),
                start=_aware(item.get("StartDate")),
                end=_aware(item.get("EndDate")),
                status=item["State"],
                clusters=tuple(sorted((c, q, n) for (c, q), n in uses.items())),
                zone=str(item.get("AvailabilityZone", "")),
            )
        )
    return reservations


def read_reservations(
    org: OrgConfig, *, sagemaker: Any, ec2: Any, clusters: Sequence[Cluster], configuration: ConfigReader
) -> list[Reservation]:
    """Everything reserved for the org, soonest end first (open-ended last)."""
    found = training_plans(org, sagemaker, clusters) + capacity_reservations(org, ec2, clusters, configuration)
    return sorted(found, key=lambda r: (r.end is None, r.end or datetime.max.replace(tzinfo=None), r.key))
