"""SageMaker HyperPod clusters of one org, over boto3's `sagemaker` client."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from bot.clusters.model import (
    Backend,
    Cluster,
    ClusterNotFound,
    InstanceGroup,
    Node,
    hyperpod_node_health,
)

ORG_TAG = "pitcrew:org"
PAGE_SIZE = 100  # the API's maximum; fewer round trips for big clusters


def _missing(error: ClientError) -> bool:
    return error.response.get("Error", {}).get("Code") in ("ResourceNotFound", "ResourceNotFoundException")


class HyperPodBackend:
    backend = Backend.HYPERPOD

    def __init__(self, *, org_id: str, sagemaker: Any, shared_account: bool = False) -> None:
        self._org = org_id
        self._client = sagemaker
        # Where several orgs share one account, the pitcrew:org tag decides whose a cluster is.
        self._check_tag = shared_account

    def list_clusters(self) -> list[Cluster]:
        clusters = []
        for page in self._client.get_paginator("list_clusters").paginate():
            for summary in page["ClusterSummaries"]:
                if self._check_tag and not self._tagged_ours(summary["ClusterArn"]):
                    continue
                try:
                    clusters.append(self._cluster(summary["ClusterName"]))
                except ClusterNotFound:
                    continue  # deleted between the list and the describe
        return sorted(clusters, key=lambda cluster: cluster.name)

    def get_cluster(self, name: str) -> Cluster:
        cluster = self._cluster(name)
        if self._check_tag and not self._tagged_ours(cluster.extra["arn"]):
            raise ClusterNotFound(name)
        return cluster

    def create(self, *, request: dict[str, Any]) -> str:
        """create_cluster with the rendered request; its ClusterArn."""
        return str(self._client.create_cluster(**request)["ClusterArn"])

    def _tagged_ours(self, arn: str) -> bool:
        tags = self._client.list_tags(ResourceArn=arn).get("Tags", [])
        return any(tag["Key"] == ORG_TAG and tag["Value"] == self._org for tag in tags)

    def _cluster(self, name: str) -> Cluster:
        try:
            described = self._client.describe_cluster(ClusterName=name)
        except ClientError as error:
            if _missing(error):
                raise ClusterNotFound(name) from None
            raise
        nodes = self._nodes(name)
        groups = tuple(
            InstanceGroup(
                name=group["InstanceGroupName"],
                instance_type=group.get("InstanceType", ""),
                current=group.get("CurrentCount", 0),
                target=group.get("TargetCount"),
                status=group.get("Status", ""),
            )
            for group in described.get("InstanceGroups", [])
        )
        extra = {"arn": described["ClusterArn"]}
        if described.get("NodeRecovery"):
            extra["node_recovery"] = described["NodeRecovery"]
        orchestrator = described.get("Orchestrator", {})
        extra["orchestrator"] = "EKS" if "Eks" in orchestrator else "Slurm"
        return Cluster(
            org=self._org,
            name=described["ClusterName"],
            backend=Backend.HYPERPOD,
            status=described["ClusterStatus"],
            groups=groups,
            created=described.get("CreationTime"),
            failure_message=described.get("FailureMessage", ""),
            nodes=nodes,
            extra=extra,
        )

    def _nodes(self, name: str) -> tuple[Node, ...]:
        nodes = []
        pages = self._client.get_paginator("list_cluster_nodes").paginate(
            ClusterName=name, PaginationConfig={"PageSize": PAGE_SIZE}
        )
        for page in pages:
            for summary in page["ClusterNodeSummaries"]:
                status = summary["InstanceStatus"]["Status"]
                nodes.append(
                    Node(
                        node_id=summary["InstanceId"],
                        group=summary["InstanceGroupName"],
                        instance_type=summary["InstanceType"],
                        status=status,
                        health=hyperpod_node_health(status),
                        launch_time=summary.get("LaunchTime"),
                        message=summary["InstanceStatus"].get("Message", ""),
                    )
                )
        return tuple(nodes)
