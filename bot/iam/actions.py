"""Every AWS action Pitcrew performs: the one table the onboarding policies are generated from.

A row is one IAM action on one kind of resource: what calls it (boto3 calls as `service.Operation`, with the
client's service id; ParallelCluster API routes as `execute-api METHOD /path`, `*` for a path parameter; the
Prometheus HTTP API as `aps METHOD /path`), the feature that needs it, whether it reads or changes, the resource
it can be scoped to, and which program-file entry makes an org need it. `tests/iam/test_table.py` fails when the
code calls something the table lacks (or the table lists what nothing calls), and the IAM-enforced scenario tests
run Pitcrew against a role made from this table.

Resource patterns use placeholders filled per org: {partition}, {region}, {account}, {api} and {stage} (from
`aws.parallelcluster_api`), {workspace} (from `metrics.prometheus_url`), {execution_role} (each role in `launch`
defaults), and on Pitcrew's side {org_role} and {queue}. A `*` resource is what AWS allows for that action
(List and Describe actions that name no resource); such statements are held to the org's region with
`aws:RequestedRegion` instead.

Not in the table, because Pitcrew needs no permission for them: `sts:GetCallerIdentity` (always allowed), and
the cluster configuration a ParallelCluster DescribeCluster links to (a presigned S3 URL, signed by the API).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Access(StrEnum):
    READ = "read"
    CHANGE = "change"


class Needs(StrEnum):
    """Which program-file entry of an org makes it need a permission."""

    ALWAYS = "always"
    PCLUSTER_API = "aws.parallelcluster_api"
    THROUGHPUT = "throughput"  # a CloudWatch throughput source
    SIGV4_METRICS = "metrics.sigv4"  # Amazon Managed Service for Prometheus
    LAUNCH_ROLE = "launch.execution_role_arn"
    EVENT_QUEUE = "monitor.event_queue_url"


class Principal(StrEnum):
    ORG_ROLE = "the org's role"  # granted by the template `pitcrew onboard` prints
    PITCREW = "Pitcrew's own credentials"  # the service's task role (or whatever the standard chain gives it)


@dataclass(frozen=True)
class Permission:
    action: str  # as IAM names it, e.g. sagemaker:DescribeCluster
    access: Access
    feature: str  # what needs it, as a person would say it
    resource: str  # the ARN pattern it can be scoped to (placeholders above), or "*"
    calls: tuple[str, ...]  # how the code performs it (see the module docstring)
    group: str  # rows of one group (same access, and one resource or one action) make one policy statement
    needs: Needs = Needs.ALWAYS
    principal: Principal = Principal.ORG_ROLE
    why_unscoped: str = ""  # for a "*" resource: why it cannot be narrowed
    condition: tuple[tuple[str, str, str], ...] = ()  # (operator, key, value) added to its statement

    @property
    def service(self) -> str:
        return self.action.split(":", 1)[0]


CLUSTER = "arn:{partition}:sagemaker:{region}:{account}:cluster/*"  # HyperPod cluster ARNs end in an id, not a name
_LIST = "List actions take no resource: held to the org's region by aws:RequestedRegion"
_DESCRIBE = "EC2 Describe actions take no resource: held to the org's region by aws:RequestedRegion"
_CLOUDWATCH = "CloudWatch metric reads take no resource: held to the org's region by aws:RequestedRegion"
_API = "arn:{partition}:execute-api:{region}:{account}:{api}/{stage}/"
_PCLUSTER = "ParallelCluster API"


def _route(method: str, path: str, access: Access, feature: str, needs: Needs = Needs.PCLUSTER_API) -> Permission:
    """A ParallelCluster API route: API Gateway authorizes it as execute-api:Invoke on METHOD/path."""
    return Permission(
        "execute-api:Invoke",
        access,
        feature,
        _API + method + path,
        (f"execute-api {method} {path}",),
        group="ParallelClusterApi",
        needs=needs,
    )


PERMISSIONS: tuple[Permission, ...] = (
    # --- reads, the org's role ---------------------------------------------------------------------------------
    Permission(
        "sagemaker:ListClusters",
        Access.READ,
        "HyperPod clusters: /cluster list, status and nodes, the node sweep, the Home, reserved capacity",
        "*",
        ("sagemaker.ListClusters",),
        group="HyperPodList",
        why_unscoped=_LIST,
    ),
    Permission(
        "sagemaker:DescribeCluster",
        Access.READ,
        "HyperPod clusters: their groups and status; a change reads the cluster before it is made",
        CLUSTER,
        ("sagemaker.DescribeCluster",),
        group="HyperPodClusters",
    ),
    Permission(
        "sagemaker:ListClusterNodes",
        Access.READ,
        "HyperPod nodes and their health (/cluster nodes, the node sweep, node alerts)",
        CLUSTER,
        ("sagemaker.ListClusterNodes",),
        group="HyperPodClusters",
    ),
    Permission(
        "sagemaker:ListTags",
        Access.READ,
        "where orgs share an account, the cluster tag pitcrew:org says whose a HyperPod cluster is",
        CLUSTER,
        ("sagemaker.ListTags",),
        group="HyperPodClusters",
    ),
    Permission(
        "sagemaker:ListTrainingPlans",
        Access.READ,
        "reserved capacity: SageMaker training plans (the Home, ending-capacity notices)",
        "*",
        ("sagemaker.ListTrainingPlans",),
        group="HyperPodList",
        why_unscoped=_LIST,
    ),
    Permission(
        "ec2:DescribeInstances",
        Access.READ,
        "ParallelCluster clusters without their API (EC2 tags); which instances hold reserved capacity",
        "*",
        ("ec2.DescribeInstances",),
        group="Ec2Describe",
        why_unscoped=_DESCRIBE,
    ),
    Permission(
        "ec2:DescribeInstanceStatus",
        Access.READ,
        "ParallelCluster node health (EC2 status checks), in /cluster nodes and the node sweep",
        "*",
        ("ec2.DescribeInstanceStatus",),
        group="Ec2Describe",
        why_unscoped=_DESCRIBE,
    ),
    Permission(
        "ec2:DescribeCapacityReservations",
        Access.READ,
        "reserved capacity: Capacity Blocks for ML and On-Demand Capacity Reservations",
        "*",
        ("ec2.DescribeCapacityReservations",),
        group="Ec2Describe",
        why_unscoped=_DESCRIBE,
    ),
    Permission(
        "cloudwatch:ListMetrics",
        Access.READ,
        "training throughput from CloudWatch: which series a wildcard dimension names",
        "*",
        ("cloudwatch.ListMetrics",),
        group="CloudWatchThroughput",
        needs=Needs.THROUGHPUT,
        why_unscoped=_CLOUDWATCH,
    ),
    Permission(
        "cloudwatch:GetMetricData",
        Access.READ,
        "training throughput from CloudWatch (stall and slowdown detection)",
        "*",
        ("cloudwatch.GetMetricData",),
        group="CloudWatchThroughput",
        needs=Needs.THROUGHPUT,
        why_unscoped=_CLOUDWATCH,
    ),
    Permission(
        "aps:QueryMetrics",
        Access.READ,
        "per-node GPU and EFA metrics from Amazon Managed Service for Prometheus (the culprit, faulty nodes)",
        "arn:{partition}:aps:{region}:{account}:workspace/{workspace}",
        ("aps POST /api/v1/query_range",),
        group="ManagedPrometheus",
        needs=Needs.SIGV4_METRICS,
    ),
    _route("GET", "/v3/clusters", Access.READ, f"{_PCLUSTER}: ListClusters"),
    _route("GET", "/v3/clusters/*", Access.READ, f"{_PCLUSTER}: DescribeCluster (status, configuration)"),
    _route("GET", "/v3/clusters/*/instances", Access.READ, f"{_PCLUSTER}: DescribeClusterInstances (nodes)"),
    # --- changes, the org's role -------------------------------------------------------------------------------
    Permission(
        "sagemaker:CreateCluster",
        Access.CHANGE,
        "/cluster launch and the launch form (HyperPod)",
        CLUSTER,
        ("sagemaker.CreateCluster",),
        group="HyperPodClusters",
    ),
    Permission(
        "sagemaker:AddTags",
        Access.CHANGE,
        "/cluster launch (HyperPod): the cluster is created with tags (pitcrew:org, the template), "
        "which SageMaker authorizes as AddTags",
        CLUSTER,
        ("sagemaker.CreateCluster", "sagemaker.AddTags"),  # AddTags itself: pitcrew doctor's probe
        group="HyperPodClusters",
    ),
    Permission(
        "sagemaker:UpdateCluster",
        Access.CHANGE,
        "/cluster scale (HyperPod)",
        CLUSTER,
        ("sagemaker.UpdateCluster",),
        group="HyperPodClusters",
    ),
    Permission(
        "sagemaker:BatchRebootClusterNodes",
        Access.CHANGE,
        "/cluster reboot and a node alert's Reboot button",
        CLUSTER,
        ("sagemaker.BatchRebootClusterNodes",),
        group="HyperPodClusters",
    ),
    Permission(
        "sagemaker:BatchReplaceClusterNodes",
        Access.CHANGE,
        "/cluster replace and a node alert's Replace button",
        CLUSTER,
        ("sagemaker.BatchReplaceClusterNodes",),
        group="HyperPodClusters",
    ),
    Permission(
        "sagemaker:StartClusterHealthCheck",
        Access.CHANGE,
        "/cluster check and a node alert's Run deep health check button (HyperPod)",
        CLUSTER,
        ("sagemaker.StartClusterHealthCheck",),
        group="HyperPodClusters",
    ),
    Permission(
        "sagemaker:ListClusterEvents",
        Access.READ,
        "HyperPod's provisioning and scaling events (clusters with continuous provisioning): cluster alerts",
        CLUSTER,
        ("sagemaker.ListClusterEvents",),
        group="HyperPodClusters",
    ),
    Permission(
        "sagemaker:DescribeClusterEvent",
        Access.READ,
        "the failure message of a HyperPod provisioning or scaling event in a cluster alert",
        CLUSTER,
        ("sagemaker.DescribeClusterEvent",),
        group="HyperPodClusters",
    ),
    Permission(
        "logs:FilterLogEvents",
        Access.READ,
        "HyperPod's health-monitoring agent's detections (fault type and reason) in node alerts",
        "arn:{partition}:logs:{region}:{account}:log-group:/aws/sagemaker/Clusters/*",
        ("logs.FilterLogEvents",),
        group="HyperPodAgentLogs",
    ),
    Permission(
        "sagemaker:DeleteCluster",
        Access.CHANGE,
        "/cluster delete (HyperPod)",
        CLUSTER,
        ("sagemaker.DeleteCluster",),
        group="HyperPodClusters",
    ),
    Permission(
        "iam:PassRole",
        Access.CHANGE,
        "/cluster launch and scale (HyperPod): each instance group names its execution role",
        "{execution_role}",
        ("sagemaker.CreateCluster", "sagemaker.UpdateCluster"),
        group="PassExecutionRole",
        needs=Needs.LAUNCH_ROLE,
        condition=(("StringEquals", "iam:PassedToService", "sagemaker.amazonaws.com"),),
    ),
    _route("POST", "/v3/clusters", Access.CHANGE, f"{_PCLUSTER}: CreateCluster and its dry run (/cluster launch)"),
    _route("PUT", "/v3/clusters/*", Access.CHANGE, f"{_PCLUSTER}: UpdateCluster and its dry run (/cluster scale)"),
    _route(
        "PATCH",
        "/v3/clusters/*/computefleet",
        Access.CHANGE,
        f"{_PCLUSTER}: UpdateComputeFleet (stopping the fleet for a scale down, /cluster start)",
    ),
    _route("DELETE", "/v3/clusters/*", Access.CHANGE, f"{_PCLUSTER}: DeleteCluster (/cluster delete)"),
    # --- Pitcrew's own credentials -----------------------------------------------------------------------------
    Permission(
        "sts:AssumeRole",
        Access.READ,
        "reaching each org's account through its role (with its external id)",
        "{org_role}",
        ("sts.AssumeRole",),
        group="OrgRoles",
        principal=Principal.PITCREW,
    ),
    Permission(
        "sqs:ReceiveMessage",
        Access.READ,
        "the central events queue: HyperPod events forwarded by each org's EventBridge rule",
        "{queue}",
        ("sqs.ReceiveMessage",),
        group="EventQueue",
        needs=Needs.EVENT_QUEUE,
        principal=Principal.PITCREW,
    ),
    Permission(
        "sqs:DeleteMessage",
        Access.CHANGE,
        "the central events queue: a handled event is deleted (DeleteMessageBatch is authorized as DeleteMessage)",
        "{queue}",
        ("sqs.DeleteMessageBatch",),
        group="EventQueue",
        needs=Needs.EVENT_QUEUE,
        principal=Principal.PITCREW,
    ),
    Permission(
        "sqs:GetQueueAttributes",
        Access.READ,
        "pitcrew doctor: the events queue answers (without taking its messages)",
        "{queue}",
        ("sqs.GetQueueAttributes",),
        group="EventQueue",
        needs=Needs.EVENT_QUEUE,
        principal=Principal.PITCREW,
    ),
)


# Calls the code makes that need no permission: GetCallerIdentity is always allowed (doctor names Pitcrew's principal).
FREE_CALLS = frozenset({"sts.GetCallerIdentity"})


def calls() -> frozenset[str]:
    """Every call the table accounts for."""
    return frozenset(call for permission in PERMISSIONS for call in permission.calls)


def for_call(call: str) -> tuple[Permission, ...]:
    """The rows a call needs (CreateCluster needs three: itself, AddTags and PassRole)."""
    return tuple(permission for permission in PERMISSIONS if call in permission.calls)


def for_operation(operation: str) -> Permission | None:
    """The row of a boto3 operation by its name alone (a ClientError knows its operation, not its service),
    preferring the row whose action is named after it."""
    rows = [p for p in PERMISSIONS for call in p.calls if call.split(".", 1)[-1] == operation and "." in call]
    return next((p for p in rows if p.action.endswith(f":{operation}")), rows[0] if rows else None)
