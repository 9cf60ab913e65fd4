"""HyperPod's own diagnosis as plain data (bot.clusters.diagnosis): what an event means, what a detection says."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from bot.clusters.diagnosis import ClusterEvent, Outcome, failure_message, log_group, parse_detection

AT = datetime(2026, 12, 6, 10, 0, tzinfo=UTC)


def _event(level: str, description: str, failure: str = "") -> ClusterEvent:
    return ClusterEvent("e1", AT, level, "InstanceGroup", description, group="workers", failure_message=failure)


def test_event_outcomes() -> None:
    assert _event("Error", "Scaling failed", "InsufficientInstanceCapacity").outcome is Outcome.FAILED
    assert _event("Info", "Instance group scaled up").outcome is Outcome.SUCCEEDED
    assert _event("Info", "Lifecycle script failed on one instance").outcome is Outcome.NEWS
    assert _event("Warn", "Retrying").outcome is Outcome.NEWS
    line = _event("Error", "Scaling failed", "InsufficientInstanceCapacity: none left").line
    assert line == "Scaling failed: InsufficientInstanceCapacity: none left (group `workers`)"


def test_failure_message_from_any_part_of_the_metadata() -> None:
    details = {"EventDetails": {"EventMetadata": {"Instance": {"FailureMessage": "on_create.sh exited with 1"}}}}
    assert failure_message(details) == "on_create.sh exited with 1"
    assert failure_message({}) == ""


def test_a_detection_names_its_node_fault_and_reason() -> None:
    message = json.dumps(
        {
            "details: ": {"reason": "XidHardwareFailure", "message": "Node condition NvidiaErrorReboot is now: True"},
            "HealthMonitoringAgentDetectionEvent": "HealthEvent",
        }
    )
    found = parse_detection(event_id="1", at=AT, stream="SagemakerHealthMonitoringAgent/w/i-0abc12345", message=message)
    assert found is not None and found.instance_id == "i-0abc12345"
    assert found.line == "HyperPod: NvidiaErrorReboot (XidHardwareFailure)"
    assert parse_detection(event_id="2", at=AT, stream="other/i-0abc12345", message=message) is None
    assert parse_detection(event_id="3", at=AT, stream="SagemakerHealthMonitoringAgent/w/i-1", message="hi") is None


def test_log_group_is_named_by_the_cluster_id() -> None:
    arn = "arn:aws:sagemaker:us-east-1:111111111111:cluster/abc123def"
    assert log_group("train", arn) == "/aws/sagemaker/Clusters/train/abc123def"
