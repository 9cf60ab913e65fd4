"""SageMaker HyperPod clusters of one org, over boto3's `sagemaker` client."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from bot.clusters import diagnosis
from bot.clusters.backend import Capabilities, GroupNotFound, NodeBatchResult, ResizePlan, Unsupported
from bot.clusters.model import (
    ORG_TAG,
    Backend,
    Cluster,
    ClusterNotFound,
    InstanceGroup,
    Node,
    hyperpod_node_health,
)
from bot.clusters.requests import LaunchRequest, NodeFailure
from bot.iam.denied import is_denied

__all__ = ["ORG_TAG", "GroupNotFound", "HyperPodBackend", "NodeBatchResult", "NodeFailure"]  # older import paths
PAGE_SIZE = 100  # the API's maximum; fewer round trips for big clusters


def _missing(error: ClientError) -> bool:
    return error.response.get("Error", {}).get("Code") in ("ResourceNotFound", "ResourceNotFoundException")


def _request_id(response: dict[str, Any]) -> str:
    return str(response.get("ResponseMetadata", {}).get("RequestId", ""))


def _fit(value: Any, shape: Any) -> Any:
    """`value` (from an output shape) reduced to what the input `shape` accepts; None when nothing fits.

    Output and input shapes share member names but not always nested shapes (ClusterKubernetesConfigDetails
    has CurrentLabels/DesiredLabels where ClusterKubernetesConfig has Labels), so structures are filtered
    member by member, and one left without a required member (or empty) is dropped rather than sent half-made.
    """
    if value is None:
        return None
    if shape.type_name == "structure":
        if not isinstance(value, dict):
            return None
        fitted = {}
        for key, member in shape.members.items():
            if key in value and (item := _fit(value[key], member)) is not None:
                fitted[key] = item
        if not fitted or any(key not in fitted for key in shape.required_members):
            return None
        return fitted
    if shape.type_name == "list":
        if not isinstance(value, list):
            return None
        return [item for item in (_fit(element, shape.member) for element in value) if item is not None]
    return value


class HyperPodBackend:
    backend = Backend.HYPERPOD
    capabilities = Capabilities(changes=True, node_actions=True, fleet=False)

    def __init__(
        self, *, org_id: str, sagemaker: Any, shared_account: bool = False, logs: Callable[[], Any] | None = None
    ) -> None:
        self._org = org_id
        self._client = sagemaker
        self._logs = logs  # CloudWatch Logs (the health-monitoring agent's detections), made when first needed
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

    def launch(self, request: LaunchRequest) -> str:
        """create_cluster with the rendered request; its ClusterArn."""
        if request.create_cluster is None:
            raise Unsupported("a HyperPod cluster is created from create_cluster arguments, not a YAML")
        return str(self._client.create_cluster(**request.create_cluster)["ClusterArn"])

    def plan_resize(self, cluster: Cluster, *, group: str, count: int) -> ResizePlan:
        """From the cluster as listed: UpdateCluster has no dry run to ask."""
        found = next((g for g in cluster.groups if g.name == group), None)
        if found is None:
            names = ", ".join(f"`{g.name}`" for g in cluster.groups) or "none"
            raise GroupNotFound(f"`{cluster.name}` has no instance group `{group}`; its groups: {names}.")
        before = found.target if found.target is not None else found.current
        return ResizePlan(before=before, instance_type=found.instance_type)

    def stop_fleet(self, *, name: str) -> None:
        raise Unsupported("a HyperPod cluster has no compute fleet to stop")

    def start_fleet(self, *, name: str) -> None:
        raise Unsupported("a HyperPod cluster has no compute fleet to start")

    def resize(self, *, name: str, group: str, count: int) -> str:
        """UpdateCluster with the group's whole spec as described, at `count` instances; the RequestId.

        The whole spec because UpdateCluster requires ExecutionRole (and the docs do not say what an omitted
        field does to an existing group), so everything the group has that the input shape accepts is sent back.
        """
        described = self._describe(name)
        if self._check_tag and not self._tagged_ours(described["ClusterArn"]):
            raise ClusterNotFound(name)
        groups = described.get("InstanceGroups", [])
        details = next((g for g in groups if g["InstanceGroupName"] == group), None)
        if details is None:
            existing = ", ".join(g["InstanceGroupName"] for g in groups) or "none"
            raise GroupNotFound(f"Cluster {name} has no instance group {group}; its groups: {existing}.")
        spec_shape = self._client.meta.service_model.shape_for("ClusterInstanceGroupSpecification")
        details_shape = self._client.meta.service_model.shape_for("ClusterInstanceGroupDetails")
        spec: dict[str, Any] = {}
        for key, member in spec_shape.members.items():
            if key in details_shape.members and (value := _fit(details.get(key), member)) is not None:
                spec[key] = value
        spec["InstanceCount"] = count  # details say TargetCount/CurrentCount; the input says InstanceCount
        # Same meaning, other names. Left out, the image would be "the latest available" (botocore's docs),
        # so scaling a group pinned to an AMI could also change its software.
        renamed = {
            "ImageId": details.get("DesiredImageId") or details.get("CurrentImageId"),
            "MinInstanceCount": details.get("MinCount"),
        }
        for key, value in renamed.items():
            if key in spec_shape.members and value is not None:
                spec[key] = value
        return _request_id(self._client.update_cluster(ClusterName=name, InstanceGroups=[spec]))

    def reboot_nodes(self, *, name: str, node_ids: Sequence[str]) -> NodeBatchResult:
        """BatchRebootClusterNodes in chunks of the model's maximum; partial failures per node."""
        return self._node_batches("BatchRebootClusterNodes", self._client.batch_reboot_cluster_nodes, name, node_ids)

    def replace_nodes(self, *, name: str, node_ids: Sequence[str]) -> NodeBatchResult:
        """BatchReplaceClusterNodes (new hardware, volumes wiped) in chunks of the model's maximum."""
        return self._node_batches("BatchReplaceClusterNodes", self._client.batch_replace_cluster_nodes, name, node_ids)

    def health_check(self, *, name: str, checks: Sequence[str], nodes: Sequence[tuple[str, str]]) -> str:
        """StartClusterHealthCheck of `nodes` ((group, instance id)), one configuration per group; the RequestId."""
        self._check_ours(name)
        by_group: dict[str, list[str]] = {}
        for group, node_id in nodes:
            by_group.setdefault(group, []).append(node_id)
        configurations = [
            {"InstanceGroupName": group, "InstanceIds": ids, "DeepHealthChecks": list(checks)}
            for group, ids in by_group.items()
        ]
        return _request_id(
            self._client.start_cluster_health_check(ClusterName=name, DeepHealthCheckConfigurations=configurations)
        )

    def cluster_events(self, *, name: str, since: datetime) -> list[diagnosis.ClusterEvent]:
        """The cluster's events since a time, oldest first (ListClusterEvents; a failure's message from
        DescribeClusterEvent). Only clusters with continuous provisioning have them: ask only of those."""
        events: list[diagnosis.ClusterEvent] = []
        token: str | None = None
        while True:
            page = self._client.list_cluster_events(
                ClusterName=name,
                EventTimeAfter=since,
                SortBy="EventTime",
                SortOrder="Ascending",
                MaxResults=100,
                **({"NextToken": token} if token else {}),
            )
            for item in page.get("Events", []):
                failure = ""
                if item.get("EventLevel") in ("Error", "Warn"):
                    details = self._client.describe_cluster_event(ClusterName=name, EventId=item["EventId"])
                    failure = diagnosis.failure_message(details.get("EventDetails") or {})
                events.append(
                    diagnosis.ClusterEvent(
                        event_id=str(item["EventId"]),
                        at=item["EventTime"],
                        level=str(item.get("EventLevel", "")),
                        resource_type=str(item.get("ResourceType", "")),
                        description=str(item.get("Description", "")),
                        group=str(item.get("InstanceGroupName", "")),
                        instance_id=str(item.get("InstanceId", "")),
                        failure_message=failure,
                    )
                )
            token = page.get("NextToken")
            if not token:
                return sorted(events, key=lambda event: event.at)

    def detections(self, *, name: str, arn: str, since: datetime) -> list[diagnosis.Detection]:
        """The health-monitoring agent's detections since a time (FilterLogEvents on the cluster's log group,
        its SagemakerHealthMonitoringAgent streams); none when the group does not exist (yet)."""
        if self._logs is None:
            return []
        client = self._logs()
        found: list[diagnosis.Detection] = []
        arguments: dict[str, Any] = {
            "logGroupName": diagnosis.log_group(name, arn),
            "logStreamNamePrefix": diagnosis.AGENT_STREAM_PREFIX,
            "filterPattern": diagnosis.AGENT_FILTER,
            "startTime": int(since.timestamp() * 1000),
        }
        while True:
            try:
                page = client.filter_log_events(**arguments)
            except ClientError as error:
                if _missing(error):
                    return found
                raise
            for item in page.get("events", []):
                detection = diagnosis.parse_detection(
                    event_id=str(item.get("eventId", "")),
                    at=datetime.fromtimestamp(int(item.get("timestamp", 0)) / 1000, UTC),
                    stream=str(item.get("logStreamName", "")),
                    message=str(item.get("message", "")),
                )
                if detection is not None:
                    found.append(detection)
            if not page.get("nextToken") or not page.get("events"):
                return found
            arguments["nextToken"] = page["nextToken"]

    def delete(self, *, name: str) -> str:
        """DeleteCluster; the RequestId."""
        self._check_ours(name)
        try:
            return _request_id(self._client.delete_cluster(ClusterName=name))
        except ClientError as error:
            if _missing(error):
                raise ClusterNotFound(name) from None
            raise

    def _node_batches(
        self, operation: str, call: Callable[..., dict[str, Any]], name: str, node_ids: Sequence[str]
    ) -> NodeBatchResult:
        self._check_ours(name)
        limit = int(
            self._client.meta.service_model.operation_model(operation).input_shape.members["NodeIds"].metadata["max"]
        )
        unique = list(dict.fromkeys(node_ids))  # a repeated id is one node, and would waste a slot in a chunk
        successful: list[str] = []
        failed: list[NodeFailure] = []
        request_ids: list[str] = []
        for start in range(0, len(unique), limit):
            chunk = unique[start : start + limit]
            try:
                response = call(ClusterName=name, NodeIds=chunk)
            except ClientError as error:
                if is_denied(error):  # the role may not do this to any node: one refusal, not a failure per node
                    raise
                # One chunk refused as a whole (throttled, not found, ...): its nodes failed, the others still run.
                err = error.response.get("Error", {})
                code, message = str(err.get("Code", "ClientError")), str(err.get("Message", error))
                failed += [NodeFailure(node_id, code, message) for node_id in chunk]
                if rid := _request_id(error.response):
                    request_ids.append(rid)
                continue
            request_ids.append(_request_id(response))
            successful += response.get("Successful", [])
            # Partial failure comes in the body of an HTTP 200 (ErrorCode; BatchDeleteClusterNodes says Code).
            failed += [
                NodeFailure(
                    item["NodeId"], str(item.get("ErrorCode") or item.get("Code", "")), str(item.get("Message", ""))
                )
                for item in response.get("Failed", [])
            ]
        return NodeBatchResult(successful=tuple(successful), failed=tuple(failed), request_ids=tuple(request_ids))

    def _check_ours(self, name: str) -> None:
        """In a shared account, another org's cluster is not there for this org: never change it."""
        if self._check_tag and not self._tagged_ours(self._describe(name)["ClusterArn"]):
            raise ClusterNotFound(name)

    def _describe(self, name: str) -> dict[str, Any]:
        try:
            described: dict[str, Any] = self._client.describe_cluster(ClusterName=name)
        except ClientError as error:
            if _missing(error):
                raise ClusterNotFound(name) from None
            raise
        return described

    def _tagged_ours(self, arn: str) -> bool:
        tags = self._client.list_tags(ResourceArn=arn).get("Tags", [])
        return any(tag["Key"] == ORG_TAG and tag["Value"] == self._org for tag in tags)

    def _cluster(self, name: str) -> Cluster:
        described = self._describe(name)
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
        if described.get("NodeProvisioningMode"):
            extra["provisioning"] = described["NodeProvisioningMode"]
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
