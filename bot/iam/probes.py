"""`pitcrew doctor`'s calls to AWS: each permission of an org's role asked about without changing anything.

AWS checks a permission before it looks for the resource, so a change called on a cluster that does not exist
answers AccessDenied when the permission is missing and a not-found (or validation) error when it is there; the
ParallelCluster API's changes are dry runs or name a cluster that does not exist. The cluster named is
`pitcrew-doctor-<random>`, which no org has. Synchronous (boto3): the doctor runs each org's probes in a thread.

Not probed, and said so: sagemaker:CreateCluster (SageMaker has no dry run, and any request it accepts creates a
cluster) and iam:PassRole (checked only when a request passes a role to a cluster that is then made).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

import httpx
from botocore.exceptions import BotoCoreError, ClientError

from bot.clusters.accounts import AwsAccounts
from bot.clusters.parallelcluster import ParallelClusterApiBackend, ParallelClusterApiError
from bot.config import OrgConfig
from bot.iam.actions import Permission
from bot.iam.denied import is_denied
from bot.iam.policy import execution_roles

PROBE_PREFIX = "pitcrew-doctor-"
NOT_PROBED = {
    "sagemaker:CreateCluster": "not probed: SageMaker has no dry run, and any request it accepts creates a cluster",
    "iam:PassRole": "not probed: AWS checks it only when a request passes a role to a cluster it then makes",
}
_NODE = "i-00000000000000000"  # an instance id of the right shape that no cluster has


class Answer(StrEnum):
    ALLOWED = "allowed"  # AWS answered (a not-found or validation error included): the permission is there
    DENIED = "denied"
    BROKEN = "broken"  # no answer about the permission: unreachable, or an error that says nothing of it


@dataclass(frozen=True)
class ProbeResult:
    permission: Permission
    answer: Answer
    detail: str = ""


class Prober:
    """One org's probes, through the clients Pitcrew itself uses (AwsAccounts)."""

    def __init__(self, org: OrgConfig, accounts: AwsAccounts, http: httpx.Client) -> None:
        self.org = org
        self._accounts = accounts
        self._http = http
        self._name = f"{PROBE_PREFIX}{uuid.uuid4().hex[:12]}"
        self._cluster_arn = f"arn:aws:sagemaker:{org.aws.region}:{org.aws.account_id}:cluster/{uuid.uuid4().hex[:12]}"

    def assume(self) -> None:
        """Assume the org's role (making a client does); raises what STS raised."""
        self._accounts.client(self.org, "sagemaker")

    def _client(self, service: str) -> Any:
        return self._accounts.client(self.org, service)

    def _pcluster(self) -> ParallelClusterApiBackend:
        assert self.org.aws.parallelcluster_api
        return ParallelClusterApiBackend(
            org_id=self.org.id,
            api_url=self.org.aws.parallelcluster_api,
            region=self.org.aws.region,
            credentials=lambda: self._accounts.credentials(self.org),
            ec2=None,
            http=self._http,
            max_attempts=1,
        )

    def _group(self) -> dict[str, Any]:
        """An instance group spec the request shape accepts; the org's own execution role where it names one, so
        a PassRole check (if SageMaker made one before looking for the cluster) would not be the refusal seen."""
        roles = execution_roles(self.org)
        role = roles[0] if roles else f"arn:aws:iam::{self.org.aws.account_id}:role/{self._name}"
        return {
            "InstanceGroupName": "probe",
            "InstanceCount": 1,
            "InstanceType": "ml.p5.48xlarge",
            "ExecutionRole": role,
        }

    def _calls(self) -> dict[str, Callable[[], Any]]:
        """Call (as the table names it) -> a harmless request making it."""
        now = datetime.now(UTC)
        throughput = self.org.throughput
        metric = {"Namespace": throughput.namespace, "MetricName": throughput.metric} if throughput else {}
        name = self._name
        calls: dict[str, Callable[[], Any]] = {
            "sagemaker.ListClusters": lambda: self._client("sagemaker").list_clusters(MaxResults=1),
            "sagemaker.DescribeCluster": lambda: self._client("sagemaker").describe_cluster(ClusterName=name),
            "sagemaker.ListClusterNodes": lambda: self._client("sagemaker").list_cluster_nodes(
                ClusterName=name, MaxResults=1
            ),
            "sagemaker.ListTags": lambda: self._client("sagemaker").list_tags(ResourceArn=self._cluster_arn),
            "sagemaker.ListTrainingPlans": lambda: self._client("sagemaker").list_training_plans(MaxResults=1),
            "ec2.DescribeInstances": lambda: self._client("ec2").describe_instances(MaxResults=5),
            "ec2.DescribeInstanceStatus": lambda: self._client("ec2").describe_instance_status(MaxResults=5),
            "ec2.DescribeCapacityReservations": lambda: self._client("ec2").describe_capacity_reservations(
                MaxResults=1
            ),
            "cloudwatch.ListMetrics": lambda: self._client("cloudwatch").list_metrics(**metric),
            "cloudwatch.GetMetricData": lambda: self._client("cloudwatch").get_metric_data(
                MetricDataQueries=[
                    {"Id": "m", "MetricStat": {"Metric": metric, "Period": 60, "Stat": "Average"}, "ReturnData": True}
                ],
                StartTime=now - timedelta(minutes=5),
                EndTime=now,
            ),
            "sagemaker.UpdateCluster": lambda: self._client("sagemaker").update_cluster(
                ClusterName=name, InstanceGroups=[self._group()]
            ),
            "sagemaker.BatchRebootClusterNodes": lambda: self._client("sagemaker").batch_reboot_cluster_nodes(
                ClusterName=name, NodeIds=[_NODE]
            ),
            "sagemaker.BatchReplaceClusterNodes": lambda: self._client("sagemaker").batch_replace_cluster_nodes(
                ClusterName=name, NodeIds=[_NODE]
            ),
            "sagemaker.DeleteCluster": lambda: self._client("sagemaker").delete_cluster(ClusterName=name),
            # Asked of a cluster (and a log group) that does not exist: answered "not found" once permitted.
            "sagemaker.ListClusterEvents": lambda: self._client("sagemaker").list_cluster_events(
                ClusterName=name, MaxResults=1
            ),
            "sagemaker.DescribeClusterEvent": lambda: self._client("sagemaker").describe_cluster_event(
                ClusterName=name, EventId="pitcrew-doctor-probe"
            ),
            "sagemaker.StartClusterHealthCheck": lambda: self._client("sagemaker").start_cluster_health_check(
                ClusterName=name,
                DeepHealthCheckConfigurations=[
                    {
                        "InstanceGroupName": "pitcrew-doctor",
                        "InstanceIds": [_NODE],
                        "DeepHealthChecks": ["InstanceStress"],
                    }
                ],
            ),
            "logs.FilterLogEvents": lambda: self._client("logs").filter_log_events(
                logGroupName=f"/aws/sagemaker/Clusters/{name}/probe", limit=1
            ),
            "sagemaker.AddTags": lambda: self._client("sagemaker").add_tags(
                ResourceArn=self._cluster_arn, Tags=[{"Key": "pitcrew:doctor", "Value": "probe"}]
            ),
        }
        if self.org.aws.parallelcluster_api:
            api = self._pcluster
            calls |= {
                "execute-api GET /v3/clusters": lambda: api()._send("GET", "/v3/clusters"),
                "execute-api GET /v3/clusters/*": lambda: api()._send("GET", f"/v3/clusters/{name}"),
                "execute-api GET /v3/clusters/*/instances": lambda: api()._send(
                    "GET", f"/v3/clusters/{name}/instances"
                ),
                # A dry run of a configuration no API accepts: refused (400) after the authorizer let it through.
                "execute-api POST /v3/clusters": lambda: api()._send(
                    "POST", "/v3/clusters", {"dryrun": "true"}, {"clusterName": name, "clusterConfiguration": "{}"}
                ),
                "execute-api PUT /v3/clusters/*": lambda: api()._send(
                    "PUT", f"/v3/clusters/{name}", {"dryrun": "true"}, {"clusterConfiguration": "{}"}
                ),
                "execute-api PATCH /v3/clusters/*/computefleet": lambda: api()._send(
                    "PATCH", f"/v3/clusters/{name}/computefleet", None, {"status": "STOP_REQUESTED"}
                ),
                "execute-api DELETE /v3/clusters/*": lambda: api()._send("DELETE", f"/v3/clusters/{name}"),
            }
        return calls

    def probe(self, permission: Permission) -> ProbeResult:
        calls = self._calls()
        # The call named after the action first (AddTags is made by CreateCluster too, which is not probed).
        named = [c for c in permission.calls if c.endswith(permission.action.split(":", 1)[1])]
        call = next((c for c in [*named, *permission.calls] if c in calls), None)
        if permission.action in NOT_PROBED or call is None:
            return ProbeResult(permission, Answer.BROKEN, NOT_PROBED.get(permission.action, "no probe for it"))
        try:
            answered = calls[call]()
        except (ClientError, ParallelClusterApiError) as error:
            if is_denied(error):
                return ProbeResult(permission, Answer.DENIED)
            if isinstance(error, ParallelClusterApiError):  # throttled or failing past its retries
                return ProbeResult(permission, Answer.BROKEN, f"no answer (HTTP {error.status})")
            return ProbeResult(permission, Answer.ALLOWED)  # not found, invalid: asked after the permission
        except (BotoCoreError, httpx.HTTPError) as error:
            return ProbeResult(permission, Answer.BROKEN, f"no answer ({type(error).__name__})")
        if isinstance(answered, httpx.Response) and answered.status_code == 403:
            return ProbeResult(permission, Answer.DENIED)
        return ProbeResult(permission, Answer.ALLOWED)


def queue_problem(queue_url: str, sqs: Any) -> str | None:
    """Why the events queue does not answer Pitcrew's own credentials, or None. GetQueueAttributes, so that its
    messages stay where they are (a receive would hide them from the consumer for a while)."""
    try:
        sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"])
    except ClientError as error:
        code = error.response.get("Error", {}).get("Code", "")
        return "refused" if is_denied(error) else str(code or "error")
    except BotoCoreError as error:
        return f"no answer ({type(error).__name__})"
    return None


def caller(accounts: AwsAccounts, region: str) -> str | None:
    """The principal Pitcrew runs as (what each org's role must trust), or None when STS does not say.
    GetCallerIdentity needs no permission."""
    try:
        arn = str(accounts.home_client("sts", region).get_caller_identity()["Arn"])
    except (ClientError, BotoCoreError):
        return None
    # An assumed role (a task role, an SSO session) is trusted by its role's ARN, not the session's.
    if ":assumed-role/" in arn:
        partition, account, rest = arn.split(":")[1], arn.split(":")[4], arn.split(":assumed-role/", 1)[1]
        return f"arn:{partition}:iam::{account}:role/{rest.split('/', 1)[0]}"
    return arn
