"""HyperPod's own diagnosis as plain data: its cluster events (provisioning and scaling, clusters with
continuous provisioning) and its health-monitoring agent's detections (CloudWatch Logs of the cluster). Pure:
the reads are the HyperPod backend's (bot.clusters.hyperpod); this says what they mean."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

AGENT_STREAM_PREFIX = "SagemakerHealthMonitoringAgent"
AGENT_FILTER = "HealthMonitoringAgentDetectionEvent"
_CONDITION = re.compile(r"Node condition (\w+) is now")
_FAILED_WORDS = re.compile(r"fail|insufficient|error|unable|could not|rolled back|rollback", re.IGNORECASE)


class Outcome(StrEnum):
    FAILED = "failed"  # a provisioning or scaling attempt failed: an alert, or a note on the open one
    SUCCEEDED = "succeeded"  # provisioning or scaling went through: it closes the alert
    NEWS = "news"  # neither (a warning): said on an open alert only


@dataclass(frozen=True)
class ClusterEvent:
    """One ListClusterEvents entry, with DescribeClusterEvent's failure message where it has one."""

    event_id: str
    at: datetime
    level: str  # Info | Warn | Error
    resource_type: str  # Cluster | InstanceGroup | Instance
    description: str
    group: str = ""
    instance_id: str = ""
    failure_message: str = ""

    @property
    def outcome(self) -> Outcome:
        if self.level == "Error" or self.failure_message:
            return Outcome.FAILED
        if self.level == "Info" and not _FAILED_WORDS.search(self.description):
            return Outcome.SUCCEEDED
        return Outcome.NEWS

    @property
    def line(self) -> str:
        """What it says, in one line: its description, and the failure message when that adds something."""
        where = f"group `{self.group}`" if self.group else ""
        if self.instance_id:
            where = f"{where}, `{self.instance_id}`" if where else f"`{self.instance_id}`"
        said = self.description.strip() or self.failure_message.strip() or f"{self.level} event"
        if self.failure_message and self.failure_message.strip() not in said:
            said = f"{said}: {self.failure_message.strip()}"
        return f"{said} ({where})" if where else said


def failure_message(details: dict[str, Any]) -> str:
    """The FailureMessage of a DescribeClusterEvent's EventDetails.EventMetadata, whichever part holds it."""
    metadata = (details.get("EventDetails") or {}).get("EventMetadata") or {}
    for part in ("InstanceGroupScaling", "InstanceGroup", "Instance", "Cluster", "DatabaseConfiguration"):
        message = (metadata.get(part) or {}).get("FailureMessage")
        if message:
            return str(message)
    return ""


@dataclass(frozen=True)
class Detection:
    """One detection of the health-monitoring agent on one node."""

    event_id: str  # the log event's id
    at: datetime
    instance_id: str
    fault_type: str  # the node condition it set (NvidiaErrorReboot, NeuronErrorTerminate, ...)
    reason: str  # XidHardwareFailure, ...

    @property
    def line(self) -> str:
        return f"HyperPod: {self.fault_type} ({self.reason})" if self.reason else f"HyperPod: {self.fault_type}"


def instance_of_stream(stream: str) -> str:
    """The instance id a `SagemakerHealthMonitoringAgent/<group>/<instance-id>` stream is of ("" if none)."""
    if not stream.startswith(AGENT_STREAM_PREFIX):
        return ""
    last = stream.rsplit("/", 1)[-1]
    return last if last.startswith("i-") else ""


def parse_detection(*, event_id: str, at: datetime, stream: str, message: str) -> Detection | None:
    """A detection from one agent log event; None when it is not one (or names no node).

    The agent logs JSON: {"level", "ts", "msg", "details": {"severity", "reason", "message": "Node condition
    NvidiaErrorReboot is now: True, reason: XidHardwareFailure, message: ..."}, "HealthMonitoringAgentDetectionEvent":
    "HealthEvent"}; `details` has been seen spelled "details: " too."""
    if AGENT_FILTER not in message:
        return None
    try:
        payload = json.loads(message)
    except ValueError:
        payload = {}
    details: dict[str, Any] = {}
    if isinstance(payload, dict):
        found = payload.get("details") or payload.get("details: ")
        details = found if isinstance(found, dict) else {}
    text = str(details.get("message") or message)
    reason = str(details.get("reason") or "")
    if not reason and (match := re.search(r"reason: (\w+)", text)):
        reason = match[1]
    condition = _CONDITION.search(text)
    fault = condition[1] if condition else str(details.get("severity") or "detection")
    instance = instance_of_stream(stream) or str(details.get("instance_id") or details.get("InstanceId") or "")
    if not instance:
        return None
    return Detection(event_id=event_id, at=at, instance_id=instance, fault_type=fault, reason=reason)


def log_group(cluster_name: str, arn: str) -> str:
    """The cluster's log group: /aws/sagemaker/Clusters/<name>/<id>, the id being the ARN's last part."""
    return f"/aws/sagemaker/Clusters/{cluster_name}/{arn.rsplit('/', 1)[-1]}"
