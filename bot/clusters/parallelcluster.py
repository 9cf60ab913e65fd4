"""AWS ParallelCluster clusters of one org.

Two ways in: the ParallelCluster REST API (API Gateway, SigV4-signed with botocore, sent with httpx),
or, for an org that runs no API, EC2 instances tagged `parallelcluster:cluster-name`. Both take node
health from EC2 status checks, which the API does not report.
"""

from __future__ import annotations

import json
import logging
import random
import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NoReturn
from urllib.parse import quote, urlencode

import httpx
import yaml
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest

from bot.clusters.backend import Capabilities, GroupNotFound, NodeBatchResult, ResizePlan, Unsupported
from bot.clusters.model import (
    ORG_TAG,
    Backend,
    Cluster,
    ClusterNotFound,
    InstanceGroup,
    Node,
    pcluster_node_health,
)
from bot.clusters.requests import LaunchRequest

# Slurm on ParallelCluster replaces unhealthy static nodes itself; one node is rebooted on the head node.
NO_NODE_ACTIONS = (
    "is a ParallelCluster cluster, where Slurm replaces unhealthy static nodes itself "
    "(or reboot one with `scontrol reboot` on the head node)."
)

NAME_TAG = "parallelcluster:cluster-name"
NODE_TYPE_TAG = "parallelcluster:node-type"
QUEUE_TAG = "parallelcluster:queue-name"
STATUS_BATCH = 100  # describe_instance_status takes at most 100 ids per call
_NODE_TYPE_FROM_TAG = {"Compute": "ComputeNode", "": "ComputeNode"}
EC2_NOTE = "Seen through EC2 tags: this org has no ParallelCluster API, so status and targets are estimates."
log = logging.getLogger(__name__)


# An update refusal that stopping the compute fleet clears. ParallelCluster's update_policy.py says "All compute
# nodes must be stopped" (COMPUTE_FLEET_STOP), "... or QueueUpdateStrategy must be set [to TERMINATE]"
# (QUEUE_UPDATE_STRATEGY, RESIZE_UPDATE_STRATEGY_ON_REMOVE) and, in older releases, "requires the compute fleet
# to be stopped first"; the sandbox's emulator words its rules the same way.
_FLEET_STOP_REFUSAL = re.compile(r"compute (?:nodes|fleet) (?:must|to) be stopped|QueueUpdateStrategy", re.IGNORECASE)


class ParallelClusterApiError(Exception):
    def __init__(self, status: int, message: str, update_errors: tuple[str, ...] = (), *, attempts: int = 1) -> None:
        tried = f" (after {attempts} attempts)" if attempts > 1 else ""
        super().__init__(f"ParallelCluster API answered {status}{tried}: {message}")
        self.status = status
        self.message = message
        self.update_errors = update_errors  # messages of updateValidationErrors, when an update was refused
        self.attempts = attempts

    @property
    def needs_fleet_stop(self) -> bool:
        """The update was refused only for changes a stopped compute fleet (or QueueUpdateStrategy: TERMINATE)
        would allow, such as shrinking a queue: stop the fleet and update again. False when any refused change
        is of another kind (unsupported, say), since stopping the fleet would not get that one through."""
        return bool(self.update_errors) and all(_FLEET_STOP_REFUSAL.search(error) for error in self.update_errors)


def _api_error(response: httpx.Response) -> ParallelClusterApiError:
    """The API's message, with its validation messages (the part a person can act on)."""
    try:
        content = response.json()
    except ValueError:
        return ParallelClusterApiError(response.status_code, response.text[:200])
    if not isinstance(content, dict):
        return ParallelClusterApiError(response.status_code, response.text[:200])
    parts = [str(content.get("message", ""))]
    for key in ("configurationValidationErrors", "validationMessages", "updateValidationErrors"):
        parts += [str(item.get("message", "")) for item in content.get(key, []) or [] if item.get("level") != "INFO"]
    update_errors = tuple(str(item.get("message", "")) for item in content.get("updateValidationErrors", []) or [])
    return ParallelClusterApiError(response.status_code, "; ".join(p for p in parts if p)[:600], update_errors)


# Retries, as botocore's "standard" retry mode does for AWS's own clients (botocore/retries/standard.py):
# - at most 3 attempts in all (DEFAULT_MAX_ATTEMPTS = 3);
# - before attempt i + 1, a delay of rand(0, 1) * min(base * 2 ** (i - 1), 20 s) (ExponentialBackoff.delay_amount:
#   truncated binary exponential backoff with full jitter), base 1 s for throttling and 50 ms for other
#   transient failures (its throttling_base_scale and non_throttling_base_scale);
# - throttling is 429 (API Gateway's answer past the API's 100 rps, burst 10); transient is 500/502/503/504 and
#   connection errors (_TRANSIENT_STATUS_CODES, _TRANSIENT_EXCEPTION_CLS);
# - a server's wait raises the delay to it. botocore reads x-amz-retry-after (ms) and caps the wait at the
#   jittered delay + 5 s; here HTTP Retry-After (seconds) is read too, and a wait longer than the 20 s cap is
#   honoured by not retrying at all (the error says how long the API asked for) rather than by asking early.
# Not copied: standard mode's retry quota (a token bucket per client; backends here live for one call) and
# adaptive mode's client-side rate limiter (Pitcrew makes a handful of these calls a minute, not hundreds).
#
# botocore retries every operation alike because AWS's own APIs take client tokens; ParallelCluster's do not, so
# a change is retried only where the first attempt certainly did nothing: a GET or a dry run (changes nothing)
# on any of the above; a change (create, update, delete, compute fleet) only on 429 and 503 (refused at the
# gateway before the ParallelCluster Lambda ran) and on failing to connect (nothing was sent). Not on 500 or
# 502 (the Lambda ran and failed part-way, or its answer was lost) nor 504 (API Gateway stops waiting after
# 29 s while the Lambda, with its 30 s timeout, may still be creating the stack), nor on a read timeout.
MAX_ATTEMPTS = 3
MAX_BACKOFF = 20.0
THROTTLING_BASE = 1.0
TRANSIENT_BASE = 0.05
THROTTLED = frozenset({429})
TRANSIENT = frozenset({500, 502, 503, 504})
NOT_PROCESSED = frozenset({429, 503})  # the codes a change is retried on


def retry_after_seconds(response: httpx.Response) -> float | None:
    """The server's wait, from Retry-After (seconds) or x-amz-retry-after (milliseconds); None if absent."""
    for header, scale in (("retry-after", 1.0), ("x-amz-retry-after", 0.001)):
        value = response.headers.get(header)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            continue  # an HTTP date, say: the backoff alone decides
        if seconds >= 0:
            return seconds
    return None


def backoff(attempt: int, *, throttled: bool, rand: Callable[[], float] = random.random) -> float:
    """The delay after failed attempt `attempt` (1-based): full jitter over a capped exponential."""
    base = THROTTLING_BASE if throttled else TRANSIENT_BASE
    return rand() * min(base * 2 ** (attempt - 1), MAX_BACKOFF)


@dataclass(frozen=True)
class QueueResize:
    configuration: str  # the new whole YAML
    queue: str
    compute_resource: str
    instance_type: str
    before: int  # the resource's MinCount before
    after: int  # the new count


def resize_queue(configuration: str, *, group: str, count: int) -> QueueResize:
    """The configuration with one compute resource at MinCount = MaxCount = count.

    `group` is a Slurm queue with one compute resource, or QUEUE/RESOURCE. Static nodes only (Min = Max), as the
    reference architectures run them: dynamic nodes would let Slurm launch past the count the org's quota allowed.
    Everything else is kept as it was (key order too); comments in the YAML do not survive.
    """
    if count < 0:
        raise ValueError(f"a node count is 0 or more, not {count}")
    config = yaml.safe_load(configuration)
    if not isinstance(config, dict):
        raise ValueError("the cluster configuration is not a YAML mapping")
    queue_name, _, resource_name = group.partition("/")
    queues = (config.get("Scheduling") or {}).get("SlurmQueues") or []
    queue = next((q for q in queues if isinstance(q, dict) and q.get("Name") == queue_name), None)
    if queue is None:
        names = ", ".join(str(q.get("Name")) for q in queues if isinstance(q, dict)) or "none"
        raise GroupNotFound(f"The cluster has no Slurm queue {queue_name}; its queues: {names}.")
    resources = [r for r in queue.get("ComputeResources") or [] if isinstance(r, dict)]
    choices = ", ".join(f"{queue_name}/{r.get('Name')}" for r in resources) or "none"
    if not resources:
        raise GroupNotFound(f"Queue {queue_name} has no compute resources.")
    if not resource_name:
        if len(resources) != 1:
            raise GroupNotFound(
                f"Queue {queue_name} has {len(resources)} compute resources; name one of them: {choices}."
            )
        resource = resources[0]
    else:
        found = next((r for r in resources if r.get("Name") == resource_name), None)
        if found is None:
            raise GroupNotFound(
                f"Queue {queue_name} has no compute resource {resource_name}; its resources: {choices}."
            )
        resource = found
    before = int(resource.get("MinCount", 0) or 0)
    resource["MinCount"] = resource["MaxCount"] = count
    instance_type = resource.get("InstanceType") or next(
        (entry.get("InstanceType") for entry in resource.get("Instances", []) or [] if isinstance(entry, dict)), ""
    )
    return QueueResize(
        configuration=str(yaml.safe_dump(config, sort_keys=False)),
        queue=queue_name,
        compute_resource=str(resource.get("Name", "")),
        instance_type=str(instance_type or ""),
        before=before,
        after=count,
    )


def _group_name(node_type: str, queue: str | None) -> str:
    return queue or node_type


def _impaired(ec2: Any, instance_ids: list[str]) -> set[str]:
    """Ids whose instance or system status check is impaired."""
    impaired: set[str] = set()
    for start in range(0, len(instance_ids), STATUS_BATCH):
        batch = instance_ids[start : start + STATUS_BATCH]
        paginator = ec2.get_paginator("describe_instance_status")
        for page in paginator.paginate(InstanceIds=batch, IncludeAllInstances=True):
            for status in page["InstanceStatuses"]:
                checks = (status.get("InstanceStatus", {}), status.get("SystemStatus", {}))
                if any(check.get("Status") == "impaired" for check in checks):
                    impaired.add(status["InstanceId"])
    return impaired


def _groups_from_nodes(nodes: Iterable[Node], targets: dict[tuple[str, str], int]) -> tuple[InstanceGroup, ...]:
    counted = Counter((node.group, node.instance_type) for node in nodes if node.status != "terminated")
    keys = sorted(set(counted) | set(targets))
    return tuple(
        InstanceGroup(
            name=group, instance_type=itype, current=counted.get((group, itype), 0), target=targets.get((group, itype))
        )
        for group, itype in keys
    )


class ParallelClusterApiBackend:
    """Through the org's ParallelCluster API; EC2 only for status checks."""

    backend = Backend.PCLUSTER
    capabilities = Capabilities(
        changes=True, node_actions=False, fleet=True, dry_run_resize=True, why_no_node_actions=NO_NODE_ACTIONS
    )

    def __init__(
        self,
        *,
        org_id: str,
        api_url: str,
        region: str,
        credentials: Callable[[], Any],
        ec2: Any,
        http: httpx.Client,
        shared_account: bool = False,
        sleep: Callable[[float], None] = time.sleep,
        rand: Callable[[], float] = random.random,
        max_attempts: int = MAX_ATTEMPTS,
    ) -> None:
        self._org = org_id
        self._api = api_url.rstrip("/")
        self._region = region
        self._credentials = credentials
        self._ec2 = ec2
        self._http = http
        self._check_tag = shared_account
        self._sleep = sleep  # these calls run in worker threads (Fleet), so a blocking sleep is right
        self._rand = rand
        self._max_attempts = max_attempts

    def _send(
        self, method: str, path: str, params: dict[str, str] | None = None, body: dict[str, Any] | None = None
    ) -> httpx.Response:
        """A SigV4-signed request (the body is part of the signature), retried as the comment above says.

        The last answer is returned as it came, except a 429 or 5xx that was retried to the end, which raises."""
        query = {"region": self._region, **(params or {})}
        url = f"{self._api}{path}?{urlencode(sorted(query.items()))}"
        content = json.dumps(body).encode() if body is not None else b""
        headers = {"Accept": "application/json", **({"Content-Type": "application/json"} if body is not None else {})}

        def attempt() -> httpx.Response:
            request = AWSRequest(method=method, url=url, data=content, headers=headers)
            # Signed for each attempt: the signature carries the time, and credentials may have been refreshed.
            SigV4Auth(self._credentials(), "execute-api", self._region).add_auth(request)
            return self._http.request(method, url, content=content, headers=dict(request.headers.items()))

        changes_nothing = method == "GET" or query.get("dryrun") == "true"
        return self._retrying(attempt, what=f"{method} {path}", changes_nothing=changes_nothing)

    def _retrying(self, attempt: Callable[[], httpx.Response], *, what: str, changes_nothing: bool) -> httpx.Response:
        retry_on = THROTTLED | TRANSIENT if changes_nothing else NOT_PROCESSED
        for number in range(1, self._max_attempts + 1):
            last = number == self._max_attempts
            try:
                response = attempt()
            except (httpx.ConnectError, httpx.ConnectTimeout):  # nothing was sent: safe to send again
                if last:
                    raise
                delay = backoff(number, throttled=False, rand=self._rand)
            except httpx.TransportError:  # sent, and perhaps acted on: only what changes nothing is sent again
                if last or not changes_nothing:
                    raise
                delay = backoff(number, throttled=False, rand=self._rand)
            else:
                if response.status_code not in retry_on:
                    return response
                wait = retry_after_seconds(response)
                if last or (wait is not None and wait > MAX_BACKOFF):
                    error = _api_error(response)
                    asked = f"; it asks to wait {wait:g} s" if wait is not None and wait > MAX_BACKOFF else ""
                    raise ParallelClusterApiError(
                        error.status, f"{error.message}{asked}", error.update_errors, attempts=number
                    )
                delay = backoff(number, throttled=response.status_code in THROTTLED, rand=self._rand)
                delay = max(delay, wait) if wait is not None else delay
            log.info("ParallelCluster API %s: attempt %d failed; retrying in %.2f s", what, number, delay)
            self._sleep(delay)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _get(self, path: str, params: dict[str, str] | None = None) -> Any:
        response = self._send("GET", path, params)
        if response.status_code == 404:
            raise ClusterNotFound(path)
        if response.status_code >= 400:
            raise _api_error(response)
        return response.json()

    def create(self, *, name: str, configuration: str) -> None:
        """POST /v3/clusters, first with dryrun=true so validation errors come back before anything exists."""
        body = {"clusterName": name, "clusterConfiguration": configuration}
        dry = self._send("POST", "/v3/clusters", {"dryrun": "true"}, body)
        if dry.status_code != 412:  # the API answers a dry run that would succeed with 412
            raise _api_error(dry)
        created = self._send("POST", "/v3/clusters", None, body)
        if created.status_code != 202:
            raise _api_error(created)

    def launch(self, request: LaunchRequest) -> str:
        if request.configuration is None:
            raise Unsupported("a ParallelCluster cluster is created from its YAML configuration")
        self.create(name=request.name, configuration=request.configuration)
        return ""

    def plan_resize(self, cluster: Cluster, *, group: str, count: int) -> ResizePlan:
        """The queue's new configuration checked by a dry run; its objection, if any, is in the plan."""
        resize = resize_queue(self.configuration(cluster.name), group=group, count=count)
        try:
            changes = self.update(name=cluster.name, configuration=resize.configuration, dryrun_only=True)
        except ParallelClusterApiError as objection:
            return ResizePlan(
                before=resize.before,
                instance_type=resize.instance_type,
                objection=objection,
                reasons=objection.update_errors,
                needs_fleet_stop=objection.needs_fleet_stop,
            )
        lines = tuple(
            f"{c.get('parameter', '')}: {c.get('currentValue', '')} → {c.get('requestedValue', '')}" for c in changes
        )
        return ResizePlan(before=resize.before, instance_type=resize.instance_type, change_set=lines)

    def resize(self, *, name: str, group: str, count: int) -> str:
        # The configuration is fetched again: it may have changed since the plan.
        resize = resize_queue(self.configuration(name), group=group, count=count)
        self.update(name=name, configuration=resize.configuration)
        return ""

    def reboot_nodes(self, *, name: str, node_ids: Sequence[str]) -> NodeBatchResult:
        raise Unsupported(f"`{name}` {NO_NODE_ACTIONS}")

    def replace_nodes(self, *, name: str, node_ids: Sequence[str]) -> NodeBatchResult:
        raise Unsupported(f"`{name}` {NO_NODE_ACTIONS}")

    def stop_fleet(self, *, name: str) -> None:
        self.set_compute_fleet(name=name, status="STOP_REQUESTED")

    def start_fleet(self, *, name: str) -> None:
        self.set_compute_fleet(name=name, status="START_REQUESTED")

    def configuration(self, name: str) -> str:
        """The cluster's current configuration YAML, from DescribeCluster's clusterConfiguration.url."""
        return self._configuration_text(self._described(name), name)

    def _described(self, name: str) -> dict[str, Any]:
        """DescribeCluster; ClusterNotFound when it is missing or, in a shared account, another org's."""
        response = self._send("GET", f"/v3/clusters/{quote(name, safe='')}")
        if response.status_code == 404:
            raise ClusterNotFound(name)
        if response.status_code >= 400:
            raise _api_error(response)
        described: dict[str, Any] = response.json()
        tags = {tag["key"]: tag["value"] for tag in described.get("tags", [])}
        if self._check_tag and tags.get(ORG_TAG) != self._org:
            raise ClusterNotFound(name)
        return described

    def _check_ours(self, name: str) -> None:
        # Where orgs share an account, a change must never reach another org's cluster.
        if self._check_tag:
            self._described(name)

    def _configuration_text(self, described: dict[str, Any], name: str) -> str:
        url = described.get("clusterConfiguration", {}).get("url")
        if not url:
            raise ParallelClusterApiError(200, f"DescribeCluster of {name} gave no clusterConfiguration.url")
        # A presigned S3 URL: no signing; S3's 503 SlowDown and 500s retried like the API's GETs.
        response = self._retrying(
            lambda: self._http.get(url), what=f"GET the configuration of {name}", changes_nothing=True
        )
        if response.status_code != 200:
            raise ParallelClusterApiError(response.status_code, f"the configuration of {name}: {response.text[:200]}")
        return response.text

    def update(self, *, name: str, configuration: str, dryrun_only: bool = False) -> list[dict[str, Any]]:
        """PUT /v3/clusters/{name} with the whole new YAML, first as a dry run; the changeSet.

        A refusal raises ParallelClusterApiError with update_errors; needs_fleet_stop tells a shrink refused
        while the compute fleet runs from the rest. dryrun_only: stop after the dry run (its changeSet).
        """
        self._check_ours(name)
        path = f"/v3/clusters/{quote(name, safe='')}"
        body = {"clusterConfiguration": configuration}
        dry = self._send("PUT", path, {"dryrun": "true"}, body)
        if dry.status_code == 404:
            raise ClusterNotFound(name)
        if dry.status_code != 412:  # the API answers a dry run that would succeed with 412
            raise _api_error(dry)
        if dryrun_only:
            return list(dry.json().get("changeSet", []) or [])
        updated = self._send("PUT", path, None, body)
        if updated.status_code == 404:
            raise ClusterNotFound(name)
        if updated.status_code != 202:
            raise _api_error(updated)
        return list(updated.json().get("changeSet", []) or [])

    def set_compute_fleet(self, *, name: str, status: str) -> None:
        """PATCH the compute fleet: START_REQUESTED or STOP_REQUESTED (Slurm)."""
        self._check_ours(name)
        response = self._send("PATCH", f"/v3/clusters/{quote(name, safe='')}/computefleet", None, {"status": status})
        if response.status_code == 404:
            raise ClusterNotFound(name)
        if not 200 <= response.status_code < 300:
            raise _api_error(response)

    def delete(self, *, name: str) -> str:
        """DELETE /v3/clusters/{name}: 202, the cluster goes DELETE_IN_PROGRESS. No request id to return."""
        self._check_ours(name)
        response = self._send("DELETE", f"/v3/clusters/{quote(name, safe='')}")
        if response.status_code == 404:
            raise ClusterNotFound(name)
        if response.status_code != 202:
            raise _api_error(response)
        return ""

    def _paged(self, path: str, key: str, params: dict[str, str] | None = None) -> Iterator[dict[str, Any]]:
        token: str | None = None
        while True:
            page = self._get(path, {**(params or {}), **({"nextToken": token} if token else {})})
            yield from page.get(key, [])
            token = page.get("nextToken")
            if not token:
                return

    def list_clusters(self) -> list[Cluster]:
        clusters = []
        for summary in self._paged("/v3/clusters", "clusters"):
            try:
                cluster = self.get_cluster(summary["clusterName"])
            except ClusterNotFound:
                continue
            clusters.append(cluster)
        return sorted(clusters, key=lambda cluster: cluster.name)

    def get_cluster(self, name: str) -> Cluster:
        described = self._described(name)
        instances = list(self._paged(f"/v3/clusters/{quote(name, safe='')}/instances", "instances"))
        impaired = _impaired(self._ec2, [item["instanceId"] for item in instances]) if instances else set()
        nodes = tuple(
            Node(
                node_id=item["instanceId"],
                group=_group_name(item["nodeType"], item.get("queueName")),
                instance_type=item["instanceType"],
                status="impaired" if item["instanceId"] in impaired else item["state"],
                health=pcluster_node_health(
                    state=item["state"], node_type=item["nodeType"], impaired=item["instanceId"] in impaired
                ),
                launch_time=_parse_time(item.get("launchTime")),
            )
            for item in instances
        )
        failures = "; ".join(
            f"{failure.get('failureCode', '')}: {failure.get('failureReason', '')}".strip(": ")
            for failure in described.get("failures", [])
        )
        extra = {"compute_fleet": described.get("computeFleetStatus", ""), "version": described.get("version", "")}
        return Cluster(
            org=self._org,
            name=described["clusterName"],
            backend=Backend.PCLUSTER,
            status=described["clusterStatus"],
            groups=_groups_from_nodes(nodes, self._targets(described)),
            created=_parse_time(described.get("creationTime")),
            failure_message=failures,
            nodes=nodes,
            extra=extra,
        )

    def _targets(self, described: dict[str, Any]) -> dict[tuple[str, str], int]:
        """Static node counts (MinCount) per queue and type, from the cluster's stored configuration."""
        try:
            config = yaml.safe_load(self._configuration_text(described, described.get("clusterName", ""))) or {}
        except (httpx.HTTPError, yaml.YAMLError, ParallelClusterApiError):
            return {}  # targets are a nicety; the node list is what matters
        if not isinstance(config, dict):
            return {}
        targets: dict[tuple[str, str], int] = defaultdict(int)
        for queue in config.get("Scheduling", {}).get("SlurmQueues", []) or []:
            for resource in queue.get("ComputeResources", []) or []:
                itype = resource.get("InstanceType") or next(
                    (entry.get("InstanceType") for entry in resource.get("Instances", []) or []), ""
                )
                targets[(queue.get("Name", ""), itype)] += int(resource.get("MinCount", 0) or 0)
        return dict(targets)


class ParallelClusterEc2Backend:
    """For an org with no ParallelCluster API: clusters are the EC2 instances that carry its tags. Read only."""

    backend = Backend.PCLUSTER

    def __init__(self, *, org_id: str, ec2: Any, shared_account: bool = False) -> None:
        self._org = org_id
        self._ec2 = ec2
        self._check_tag = shared_account
        self.capabilities = Capabilities(
            changes=False,
            node_actions=False,
            fleet=False,
            why_no_node_actions=NO_NODE_ACTIONS,
            why_not=f"`{org_id}` has no ParallelCluster API in the program file (aws.parallelcluster_api), and "
            "launching or changing a ParallelCluster cluster goes through it; its clusters can still be listed and "
            "inspected. Ask a program admin to add it.",
        )

    def _refuse(self) -> NoReturn:
        raise Unsupported(self.capabilities.why_not)

    def launch(self, request: LaunchRequest) -> str:
        self._refuse()

    def plan_resize(self, cluster: Cluster, *, group: str, count: int) -> ResizePlan:
        self._refuse()

    def resize(self, *, name: str, group: str, count: int) -> str:
        self._refuse()

    def reboot_nodes(self, *, name: str, node_ids: Sequence[str]) -> NodeBatchResult:
        self._refuse()

    def replace_nodes(self, *, name: str, node_ids: Sequence[str]) -> NodeBatchResult:
        self._refuse()

    def delete(self, *, name: str) -> str:
        self._refuse()

    def stop_fleet(self, *, name: str) -> None:
        self._refuse()

    def start_fleet(self, *, name: str) -> None:
        self._refuse()

    def _instances(self, name: str | None = None) -> dict[str, list[tuple[dict[str, Any], dict[str, str]]]]:
        """Instances per cluster name, each with its tags as a dict."""
        filters = [{"Name": f"tag:{NAME_TAG}", "Values": [name]} if name else {"Name": "tag-key", "Values": [NAME_TAG]}]
        if self._check_tag:
            filters.append({"Name": f"tag:{ORG_TAG}", "Values": [self._org]})
        by_cluster: dict[str, list[tuple[dict[str, Any], dict[str, str]]]] = defaultdict(list)
        for page in self._ec2.get_paginator("describe_instances").paginate(Filters=filters):
            for reservation in page["Reservations"]:
                for instance in reservation["Instances"]:
                    tags = {tag["Key"]: tag["Value"] for tag in instance.get("Tags", [])}
                    by_cluster[tags[NAME_TAG]].append((instance, tags))
        return by_cluster

    def list_clusters(self) -> list[Cluster]:
        by_cluster = self._instances()
        impaired = _impaired(self._ec2, [i["InstanceId"] for items in by_cluster.values() for i, _ in items])
        return [self._cluster(name, by_cluster[name], impaired) for name in sorted(by_cluster)]

    def get_cluster(self, name: str) -> Cluster:
        instances = self._instances(name).get(name)
        if not instances:
            raise ClusterNotFound(name)
        return self._cluster(name, instances, _impaired(self._ec2, [i["InstanceId"] for i, _ in instances]))

    def _cluster(
        self, name: str, instances: list[tuple[dict[str, Any], dict[str, str]]], impaired: set[str]
    ) -> Cluster:
        nodes = []
        for instance, tags in instances:
            # ParallelCluster tags compute instances "Compute"; its API calls them "ComputeNode".
            tagged = tags.get(NODE_TYPE_TAG, "")
            node_type = _NODE_TYPE_FROM_TAG.get(tagged, tagged)
            state = instance["State"]["Name"]
            is_impaired = instance["InstanceId"] in impaired
            nodes.append(
                Node(
                    node_id=instance["InstanceId"],
                    group=_group_name(node_type, tags.get(QUEUE_TAG)),
                    instance_type=instance["InstanceType"],
                    status="impaired" if is_impaired else state,
                    health=pcluster_node_health(state=state, node_type=node_type, impaired=is_impaired),
                    launch_time=instance.get("LaunchTime"),
                )
            )
        head = next((n for n in nodes if n.group == "HeadNode"), None)
        # Without the API there is no CloudFormation status: the head node's state is the best sign of life.
        status = "RUNNING" if head and head.status == "running" else (head.status.upper() if head else "UNKNOWN")
        launched = [n.launch_time for n in nodes if n.launch_time]
        return Cluster(
            org=self._org,
            name=name,
            backend=Backend.PCLUSTER,
            status=status,
            groups=_groups_from_nodes(nodes, {}),
            created=min(launched) if launched else None,
            nodes=tuple(sorted(nodes, key=lambda n: (n.group, n.node_id))),
            note=EC2_NOTE,
        )


def _parse_time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
