"""SageMaker HyperPod EventBridge events, delivered to one central SQS queue, as hints for the node monitor.

Each org's EventBridge rule forwards two HyperPod detail-types to the queue named by
`monitor.event_queue_url` (docs/eventbridge.md). An event is a hint, not the truth: it says which
cluster (and node) to look at now instead of at the next sweep. SageMaker may send several events for
one change, so consumers dedupe on `NodeHint.event_id` and stay idempotent.

`parse_event` is pure. `EventQueue` is a thin synchronous wrapper over an SQS client (boto3): the caller
runs it in a worker thread, and deletes a message only once it has stored what the message means.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "CLUSTER_STATE_CHANGE",
    "DETAIL_TYPES",
    "NODE_HEALTH_EVENT",
    "SOURCE",
    "EventError",
    "EventQueue",
    "EventQueueError",
    "NodeHint",
    "Received",
    "parse_event",
]

SOURCE = "aws.sagemaker"
NODE_HEALTH_EVENT = "SageMaker HyperPod Cluster Node Health Event"
CLUSTER_STATE_CHANGE = "SageMaker HyperPod Cluster State Change"
DETAIL_TYPES = (NODE_HEALTH_EVENT, CLUSTER_STATE_CHANGE)

# arn:<partition>:sagemaker:<region>:<account>:cluster/<cluster id> (botocore's ClusterArn pattern, a little
# looser on the id so a future id format is not refused).
CLUSTER_ARN = re.compile(
    r"arn:aws[a-z-]*:sagemaker:(?P<region>[a-z0-9-]+):(?P<account>[0-9]{12}):cluster/[A-Za-z0-9-]+"
)
ACCOUNT_ID = re.compile(r"[0-9]{12}")

SQS_MAX_WAIT_SECONDS = 20  # ReceiveMessage WaitTimeSeconds: 0..20
SQS_MAX_BATCH = 10  # ReceiveMessage MaxNumberOfMessages and DeleteMessageBatch entries: 1..10


@dataclass(frozen=True)
class NodeHint:
    """What one HyperPod event says: look at this cluster (and node) now."""

    event_id: str  # the EventBridge event id (envelope "id"); dedupe key
    detail_type: str
    account_id: str  # envelope "account", else the account in detail.ClusterArn (moto omits "account")
    region: str  # envelope "region", else from the ARN
    cluster_name: str
    node_id: str | None  # detail.InstanceId for node health events; None for cluster state changes
    healthy: bool | None  # node health: HealthSummary.HealthStatus == "Healthy"; None for cluster state changes
    reason: str  # HealthStatusReason, or the cluster's FailureMessage
    repair_action: str  # HealthSummary.RepairAction ("" when absent)
    cluster_status: str | None  # detail.ClusterStatus for cluster state changes
    time: datetime | None  # envelope "time"


class EventError(ValueError):
    """A message that is not a usable event; its str says why, in one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(" ".join(reason.split()))


class EventQueueError(RuntimeError):
    """The queue refused to delete some messages (DeleteMessageBatch entries that Failed)."""


def parse_event(body: str) -> NodeHint | None:
    """The hint in an SQS message body (an EventBridge event, or an SNS notification carrying one).

    None for events Pitcrew does not act on (another source or detail-type); EventError for a body that
    is not a usable event.
    """
    event = _json_object(body, "message body")
    if isinstance(event.get("Message"), str) and "detail-type" not in event:  # routed through SNS
        event = _json_object(event["Message"], "SNS Message")
    if "detail-type" not in event and "source" not in event:
        raise EventError(f"not an EventBridge event: no source or detail-type (keys: {_keys(event)})")
    source, detail_type = event.get("source"), event.get("detail-type")
    if source != SOURCE or detail_type not in DETAIL_TYPES:
        return None
    assert isinstance(detail_type, str)
    detail = event.get("detail")
    if not isinstance(detail, Mapping):
        raise EventError(f"{detail_type}: detail is {_kind(detail)}, not an object")
    event_id = _text(event, "id", "envelope", required=True)

    cluster_arn = _text(detail, "ClusterArn", detail_type, required=True)
    arn = CLUSTER_ARN.fullmatch(cluster_arn)
    if arn is None:
        raise EventError(f"{detail_type}: ClusterArn {_show(cluster_arn)} is not a SageMaker cluster ARN")
    cluster_name = _text(detail, "ClusterName", detail_type, required=True)
    account = event.get("account")
    region = event.get("region")
    common: dict[str, Any] = {
        "event_id": event_id,
        "detail_type": detail_type,
        "account_id": account if isinstance(account, str) and ACCOUNT_ID.fullmatch(account) else arn["account"],
        "region": region if isinstance(region, str) and region else arn["region"],
        "cluster_name": cluster_name,
        "time": _time(event.get("time")),
    }

    if detail_type == NODE_HEALTH_EVENT:
        node_id = _text(detail, "InstanceId", detail_type, required=True)
        summary = detail.get("HealthSummary")
        if not isinstance(summary, Mapping):
            raise EventError(f"{detail_type} for {cluster_name}/{node_id}: HealthSummary is {_kind(summary)}")
        where = f"{detail_type} HealthSummary"
        status = _text(summary, "HealthStatus", where, required=True)
        return NodeHint(
            node_id=node_id,
            healthy=status == "Healthy",
            reason=_text(summary, "HealthStatusReason", where),
            repair_action=_text(summary, "RepairAction", where),
            cluster_status=None,
            **common,
        )
    return NodeHint(
        node_id=None,
        healthy=None,
        reason=_text(detail, "FailureMessage", detail_type),
        repair_action="",
        cluster_status=_text(detail, "ClusterStatus", detail_type, required=True),
        **common,
    )


def _json_object(text: str, what: str) -> Mapping[str, Any]:
    try:
        value = json.loads(text)
    except (TypeError, ValueError) as error:  # JSONDecodeError is a ValueError
        raise EventError(f"{what} is not JSON: {error}") from None
    if not isinstance(value, dict):
        raise EventError(f"{what} is {_kind(value)}, not a JSON object")
    return value


def _text(data: Mapping[str, Any], key: str, where: str, *, required: bool = False) -> str:
    value = data.get(key)
    if value is None or value == "":
        if required:
            raise EventError(f"{where}: no {key}")
        return ""
    if not isinstance(value, str):
        raise EventError(f"{where}: {key} is {_kind(value)}, not a string")
    return value


def _time(value: Any) -> datetime | None:
    """Envelope time ("2025-01-02T03:04:05Z") in UTC; None when absent or unreadable (only a label)."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def _kind(value: Any) -> str:
    return "missing" if value is None else f"a JSON {type(value).__name__}"


def _show(value: str, limit: int = 120) -> str:
    return repr(value if len(value) <= limit else value[:limit] + "...")


def _keys(data: Mapping[str, Any]) -> str:
    names = sorted(str(key) for key in data)
    return ", ".join(names[:8]) + (", ..." if len(names) > 8 else "") if names else "none"


@dataclass(frozen=True)
class Received:
    """One message from the queue and what it means."""

    receipt_handle: str
    message_id: str
    hint: NodeHint | None  # None: not an event we act on (delete it)
    problem: str  # non-empty when the body was not a usable event (delete it too, after logging)


class EventQueue:
    """The central events queue, read with Pitcrew's own credentials (AwsAccounts.home_client("sqs", region))."""

    def __init__(self, *, sqs: Any, queue_url: str, wait_seconds: int = 20, batch: int = 10) -> None:
        if not 0 <= wait_seconds <= SQS_MAX_WAIT_SECONDS:
            raise ValueError(f"wait_seconds must be 0..{SQS_MAX_WAIT_SECONDS}, not {wait_seconds}")
        if not 1 <= batch <= SQS_MAX_BATCH:
            raise ValueError(f"batch must be 1..{SQS_MAX_BATCH}, not {batch}")
        # A long poll holds the response for up to wait_seconds; a client that gives up reading sooner
        # would turn every quiet poll into a ReadTimeoutError.
        read_timeout = getattr(getattr(getattr(sqs, "meta", None), "config", None), "read_timeout", None)
        if isinstance(read_timeout, int | float) and read_timeout <= wait_seconds:
            raise ValueError(
                f"the SQS client's read_timeout ({read_timeout} s) must exceed wait_seconds ({wait_seconds})"
            )
        self._sqs = sqs
        self.queue_url = queue_url
        self.wait_seconds = wait_seconds
        self.batch = batch

    def receive(self) -> list[Received]:
        """One long poll: up to `batch` messages, each parsed (never raises for a bad body)."""
        answer = self._sqs.receive_message(
            QueueUrl=self.queue_url, WaitTimeSeconds=self.wait_seconds, MaxNumberOfMessages=self.batch
        )
        received: list[Received] = []
        for message in answer.get("Messages", []):
            hint: NodeHint | None = None
            problem = ""
            try:
                hint = parse_event(message.get("Body", ""))
            except EventError as error:
                problem = str(error)
            received.append(Received(message["ReceiptHandle"], message.get("MessageId", ""), hint, problem))
        return received

    def delete(self, receipt_handles: Sequence[str]) -> None:
        """Delete messages, 10 per DeleteMessageBatch; EventQueueError naming any that failed (after trying all)."""
        handles = list(dict.fromkeys(receipt_handles))  # a handle given twice is deleted once
        failures: list[str] = []
        for start in range(0, len(handles), SQS_MAX_BATCH):
            chunk = handles[start : start + SQS_MAX_BATCH]
            answer = self._sqs.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[{"Id": str(index), "ReceiptHandle": handle} for index, handle in enumerate(chunk)],
            )
            for failed in answer.get("Failed", []):
                handle = chunk[int(failed["Id"])]
                failures.append(f"{_show(handle, 40)}: {failed.get('Code', '?')} {failed.get('Message', '')}".strip())
        if failures:
            raise EventQueueError(
                f"could not delete {len(failures)} of {len(handles)} messages: " + "; ".join(failures)
            )
