"""HyperPod EventBridge events -> SQS -> NodeHint: the parser alone, then the whole path through moto's
EventBridge and SQS over HTTP, with the rule from docs/eventbridge.md."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from bot.clusters.accounts import AwsAccounts
from bot.config import load_program
from bot.monitor.events import (
    CLUSTER_STATE_CHANGE,
    NODE_HEALTH_EVENT,
    EventError,
    EventQueue,
    EventQueueError,
    NodeHint,
    Received,
    parse_event,
)
from sandbox.world import EXAMPLE_PROGRAM

ROOT = Path(__file__).resolve().parents[2]
REGION = "us-east-1"
CLUSTER_ARN = "arn:aws:sagemaker:us-east-1:111111111111:cluster/abc123"
NODE = "i-0123456789abcdef0"
UNHEALTHY_DETAIL = {
    "ClusterName": "kumo-p5-train",
    "ClusterArn": CLUSTER_ARN,
    "InstanceId": NODE,
    "Tags": {"team": "pretrain"},
    "HealthSummary": {
        "HealthStatus": "Unhealthy",
        "HealthStatusReason": "XidHardwareFailure: GPU 3 Xid 79 (fell off the bus)",
        "RepairAction": "Replace",
        "Recommendation": "The node will be replaced",
    },
}
HEALTHY_DETAIL = {
    "ClusterName": "kumo-p5-train",
    "ClusterArn": CLUSTER_ARN,
    "InstanceId": NODE,
    "HealthSummary": {"HealthStatus": "Healthy", "HealthStatusReason": "", "RepairAction": "None"},
}
FAILED_CLUSTER_DETAIL = {
    "ClusterArn": CLUSTER_ARN,
    "ClusterName": "kumo-p5-train",
    "ClusterStatus": "Failed",
    "CreationTime": 1735787045000,
    "FailureMessage": "Insufficient capacity for ml.p5.48xlarge in us-east-1a",
    "InstanceGroups": [{"InstanceGroupName": "worker", "CurrentCount": 2, "TargetCount": 4, "Status": "Failed"}],
    "NodeRecovery": "Automatic",
}


def envelope(detail_type: str, detail: Any, **fields: Any) -> dict[str, Any]:
    """An event as EventBridge delivers it to SQS (the body is the event JSON)."""
    event = {
        "version": "0",
        "id": "0f5f8a7e-0000-4a5b-9c1d-123456789abc",
        "detail-type": detail_type,
        "source": "aws.sagemaker",
        "account": "111111111111",
        "time": "2025-01-02T03:04:05Z",
        "region": "us-east-1",
        "resources": [CLUSTER_ARN],
        "detail": detail,
    }
    event.update(fields)
    return event


def body(event: dict[str, Any]) -> str:
    return json.dumps(event)


# --- parse_event ----------------------------------------------------------------------------------------


def test_node_health_event_every_field() -> None:
    hint = parse_event(body(envelope(NODE_HEALTH_EVENT, UNHEALTHY_DETAIL)))
    assert hint == NodeHint(
        event_id="0f5f8a7e-0000-4a5b-9c1d-123456789abc",
        detail_type=NODE_HEALTH_EVENT,
        account_id="111111111111",
        region="us-east-1",
        cluster_name="kumo-p5-train",
        node_id=NODE,
        healthy=False,
        reason="XidHardwareFailure: GPU 3 Xid 79 (fell off the bus)",
        repair_action="Replace",
        cluster_status=None,
        time=datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC),
    )


def test_healthy_node_and_absent_optional_fields() -> None:
    hint = parse_event(body(envelope(NODE_HEALTH_EVENT, HEALTHY_DETAIL)))
    assert hint is not None
    assert (hint.healthy, hint.reason, hint.repair_action) == (True, "", "None")
    detail = {**HEALTHY_DETAIL, "HealthSummary": {"HealthStatus": "Healthy"}}
    hint = parse_event(body(envelope(NODE_HEALTH_EVENT, detail)))
    assert hint is not None
    assert (hint.healthy, hint.reason, hint.repair_action) == (True, "", "")


def test_cluster_state_change_every_field() -> None:
    hint = parse_event(body(envelope(CLUSTER_STATE_CHANGE, FAILED_CLUSTER_DETAIL, id="evt-2")))
    assert hint == NodeHint(
        event_id="evt-2",
        detail_type=CLUSTER_STATE_CHANGE,
        account_id="111111111111",
        region="us-east-1",
        cluster_name="kumo-p5-train",
        node_id=None,
        healthy=None,
        reason="Insufficient capacity for ml.p5.48xlarge in us-east-1a",
        repair_action="",
        cluster_status="Failed",
        time=datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC),
    )
    in_service = {key: value for key, value in FAILED_CLUSTER_DETAIL.items() if key != "FailureMessage"}
    hint = parse_event(body(envelope(CLUSTER_STATE_CHANGE, {**in_service, "ClusterStatus": "InService"})))
    assert hint is not None
    assert (hint.cluster_status, hint.reason) == ("InService", "")


def test_account_and_region_come_from_the_arn_when_the_envelope_lacks_them() -> None:
    event = envelope(
        NODE_HEALTH_EVENT, {**UNHEALTHY_DETAIL, "ClusterArn": CLUSTER_ARN.replace("us-east-1", "ap-northeast-1")}
    )
    del event["account"], event["region"]
    hint = parse_event(body(event))
    assert hint is not None
    assert (hint.account_id, hint.region) == ("111111111111", "ap-northeast-1")
    # The envelope wins where it has them (an event forwarded between buses keeps its source account).
    hint = parse_event(body(envelope(NODE_HEALTH_EVENT, UNHEALTHY_DETAIL, account="222222222222", region="us-west-2")))
    assert hint is not None
    assert (hint.account_id, hint.region) == ("222222222222", "us-west-2")


def test_time_is_optional_and_extra_fields_are_ignored() -> None:
    event = envelope(NODE_HEALTH_EVENT, {**UNHEALTHY_DETAIL, "NewField": [1, 2]}, extra={"x": 1})
    del event["time"]
    hint = parse_event(body(event))
    assert hint is not None
    assert hint.time is None
    hint = parse_event(body(envelope(NODE_HEALTH_EVENT, UNHEALTHY_DETAIL, time="2025-01-02T12:04:05+09:00")))
    assert hint is not None
    assert hint.time == datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_other_detail_types_and_sources_are_ignored() -> None:
    assert parse_event(body(envelope("SageMaker HyperPod Cluster Event", {"EventDetails": {}}))) is None
    assert parse_event(body(envelope("SageMaker Training Job State Change", {"TrainingJobName": "x"}))) is None
    assert parse_event(body(envelope(NODE_HEALTH_EVENT, UNHEALTHY_DETAIL, source="com.example.spoof"))) is None
    assert parse_event(body(envelope("EC2 Instance State-change Notification", {}, source="aws.ec2"))) is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "message body is not JSON"),
        ("", "message body is not JSON"),
        ("[1, 2]", "message body is a JSON list, not a JSON object"),
        ('{"hello": "world"}', "not an EventBridge event: no source or detail-type (keys: hello)"),
        (body(envelope(NODE_HEALTH_EVENT, "oops")), f"{NODE_HEALTH_EVENT}: detail is a JSON str, not an object"),
        (
            body(envelope(NODE_HEALTH_EVENT, {k: v for k, v in UNHEALTHY_DETAIL.items() if k != "InstanceId"})),
            f"{NODE_HEALTH_EVENT}: no InstanceId",
        ),
        (
            body(envelope(NODE_HEALTH_EVENT, {**UNHEALTHY_DETAIL, "ClusterName": ""})),
            f"{NODE_HEALTH_EVENT}: no ClusterName",
        ),
        (
            body(envelope(CLUSTER_STATE_CHANGE, {k: v for k, v in FAILED_CLUSTER_DETAIL.items() if k != "ClusterArn"})),
            f"{CLUSTER_STATE_CHANGE}: no ClusterArn",
        ),
        (
            body(
                envelope(
                    NODE_HEALTH_EVENT,
                    {**UNHEALTHY_DETAIL, "ClusterArn": "arn:aws:ec2:us-east-1:111111111111:instance/i-1"},
                )
            ),
            f"{NODE_HEALTH_EVENT}: ClusterArn 'arn:aws:ec2:us-east-1:111111111111:instance/i-1' "
            "is not a SageMaker cluster ARN",
        ),
        (
            body(envelope(NODE_HEALTH_EVENT, {**UNHEALTHY_DETAIL, "ClusterArn": "kumo-p5-train"})),
            f"{NODE_HEALTH_EVENT}: ClusterArn 'kumo-p5-train' is not a SageMaker cluster ARN",
        ),
        (
            body(envelope(NODE_HEALTH_EVENT, {**UNHEALTHY_DETAIL, "InstanceId": 42})),
            f"{NODE_HEALTH_EVENT}: InstanceId is a JSON int, not a string",
        ),
        (
            body(envelope(NODE_HEALTH_EVENT, {k: v for k, v in UNHEALTHY_DETAIL.items() if k != "HealthSummary"})),
            f"{NODE_HEALTH_EVENT} for kumo-p5-train/{NODE}: HealthSummary is missing",
        ),
        (
            body(envelope(CLUSTER_STATE_CHANGE, {**FAILED_CLUSTER_DETAIL, "ClusterStatus": None})),
            f"{CLUSTER_STATE_CHANGE}: no ClusterStatus",
        ),
        (body({**envelope(NODE_HEALTH_EVENT, UNHEALTHY_DETAIL), "id": None}), "envelope: no id"),
    ],
)
def test_unusable_bodies_raise_event_error_with_one_clear_line(text: str, message: str) -> None:
    with pytest.raises(EventError) as raised:
        parse_event(text)
    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value)
    assert isinstance(raised.value, ValueError)


def test_a_very_long_bad_arn_is_clipped_in_the_message() -> None:
    with pytest.raises(EventError, match=r"ClusterArn 'x{120}\.\.\.' is not a SageMaker cluster ARN"):
        parse_event(body(envelope(NODE_HEALTH_EVENT, {**UNHEALTHY_DETAIL, "ClusterArn": "x" * 5000})))


def test_sns_wrapped_event_is_unwrapped() -> None:
    event = envelope(NODE_HEALTH_EVENT, UNHEALTHY_DETAIL)
    notification = {
        "Type": "Notification",
        "MessageId": "5a8b4c2e-0000-0000-0000-000000000000",
        "TopicArn": "arn:aws:sns:us-east-1:123456789012:pitcrew-events",
        "Message": json.dumps(event),
        "Timestamp": "2025-01-02T03:04:06.000Z",
    }
    assert parse_event(json.dumps(notification)) == parse_event(body(event))
    with pytest.raises(EventError, match=r"^SNS Message is not JSON"):
        parse_event(json.dumps({**notification, "Message": "plain text"}))
    unrelated = {**notification, "Message": json.dumps(envelope("Other", {}, source="aws.ec2"))}
    assert parse_event(json.dumps(unrelated)) is None


# --- EventQueue against moto's EventBridge and SQS over HTTP ------------------------------------------


def documented_pattern() -> dict[str, Any]:
    """The event pattern exactly as docs/eventbridge.md gives it (the first JSON block naming the source)."""
    text = (ROOT / "docs" / "eventbridge.md").read_text()
    for block in re.findall(r"```json\n(.*?)```", text, flags=re.S):
        value = json.loads(block)
        if "source" in value and "detail-type" in value:
            return value
    raise AssertionError("docs/eventbridge.md has no event pattern")


@dataclass
class Wiring:
    sqs: Any
    events: Any
    queue_url: str


@pytest.fixture
def wired_queue(moto_endpoint: str) -> Iterator[Wiring]:
    """A queue of its own and a rule on the default bus forwarding HyperPod events to it; removed after."""
    sqs = boto3.client("sqs", region_name=REGION)
    events = boto3.client("events", region_name=REGION)
    name = f"pitcrew-events-{uuid.uuid4().hex[:8]}"
    queue_url = sqs.create_queue(QueueName=name)["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name=name, EventPattern=json.dumps(documented_pattern()), State="ENABLED")
    events.put_targets(Rule=name, Targets=[{"Id": "pitcrew-events", "Arn": queue_arn}])
    try:
        yield Wiring(sqs, events, queue_url)
    finally:
        events.remove_targets(Rule=name, Ids=["pitcrew-events"])
        events.delete_rule(Name=name)
        sqs.delete_queue(QueueUrl=queue_url)


def put(events: Any, detail_type: str, detail: dict[str, Any], source: str = "aws.sagemaker") -> str:
    answer = events.put_events(
        Entries=[
            {
                "Source": source,
                "DetailType": detail_type,
                "Detail": json.dumps(detail),
                "Resources": [detail.get("ClusterArn", "")],
                "Time": datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC),
            }
        ]
    )
    assert answer["FailedEntryCount"] == 0, answer
    return str(answer["Entries"][0]["EventId"])


def receive_all(queue: EventQueue, count: int) -> list[Received]:
    got: list[Received] = []
    for _ in range(5):
        got += queue.receive()
        if len(got) >= count:
            break
    return got


def queue_depth(wiring: Wiring) -> int:
    attributes = wiring.sqs.get_queue_attributes(
        QueueUrl=wiring.queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])


def test_eventbridge_to_sqs_to_hints(wired_queue: Wiring) -> None:
    events = wired_queue.events
    unhealthy = put(events, NODE_HEALTH_EVENT, UNHEALTHY_DETAIL)
    healthy = put(events, NODE_HEALTH_EVENT, HEALTHY_DETAIL)
    failed = put(events, CLUSTER_STATE_CHANGE, FAILED_CLUSTER_DETAIL)
    put(events, "Order Placed", {"ClusterArn": CLUSTER_ARN, "order": 1}, source="com.example.shop")

    queue = EventQueue(sqs=AwsAccounts().home_client("sqs", REGION), queue_url=wired_queue.queue_url, wait_seconds=1)
    received = receive_all(queue, 3)
    assert all(item.problem == "" and item.receipt_handle and item.message_id for item in received)
    # The rule filters the unrelated event out; had it got through, it would carry no hint.
    hints = {item.hint.event_id: item.hint for item in received if item.hint is not None}
    assert set(hints) == {unhealthy, healthy, failed}
    assert len(received) == 3

    moment = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    # moto's envelope has no "account": the account comes from the ClusterArn.
    assert hints[unhealthy] == NodeHint(
        unhealthy, NODE_HEALTH_EVENT, "111111111111", REGION, "kumo-p5-train", NODE, False,
        "XidHardwareFailure: GPU 3 Xid 79 (fell off the bus)", "Replace", None, moment,
    )  # fmt: skip
    assert (hints[healthy].node_id, hints[healthy].healthy, hints[healthy].repair_action) == (NODE, True, "None")
    assert hints[failed] == NodeHint(
        failed, CLUSTER_STATE_CHANGE, "111111111111", REGION, "kumo-p5-train", None, None,
        "Insufficient capacity for ml.p5.48xlarge in us-east-1a", "", "Failed", moment,
    )  # fmt: skip

    queue.delete([item.receipt_handle for item in received])
    assert EventQueue(sqs=queue._sqs, queue_url=wired_queue.queue_url, wait_seconds=1).receive() == []
    assert queue_depth(wired_queue) == 0


def test_bad_bodies_are_reported_and_deleted_in_batches_of_ten(wired_queue: Wiring) -> None:
    sqs = wired_queue.sqs
    for index in range(11):
        sqs.send_message(QueueUrl=wired_queue.queue_url, MessageBody=f"not json {index}")
    sqs.send_message(QueueUrl=wired_queue.queue_url, MessageBody=json.dumps(envelope("Other", {}, source="aws.ec2")))

    queue = EventQueue(sqs=sqs, queue_url=wired_queue.queue_url, wait_seconds=1, batch=5)
    received = receive_all(queue, 12)
    assert len(received) == 12
    problems = [item.problem for item in received if item.problem]
    assert len(problems) == 11
    assert all(problem.startswith("message body is not JSON") for problem in problems)
    assert [item.hint for item in received] == [None] * 12

    handles = [item.receipt_handle for item in received]
    queue.delete(handles + handles[:2])  # 12 distinct handles: two DeleteMessageBatch calls
    assert queue_depth(wired_queue) == 0
    queue.delete([])


def test_delete_raises_when_an_entry_fails(wired_queue: Wiring) -> None:
    queue = EventQueue(sqs=wired_queue.sqs, queue_url=wired_queue.queue_url, wait_seconds=0)
    with pytest.raises(EventQueueError, match="could not delete 1 of 1 messages: 'bogus': ReceiptHandleIsInvalid"):
        queue.delete(["bogus"])


def test_queue_settings_are_checked() -> None:
    sqs = boto3.client("sqs", region_name=REGION, endpoint_url="http://127.0.0.1:9")
    with pytest.raises(ValueError, match=r"wait_seconds must be 0\.\.20"):
        EventQueue(sqs=sqs, queue_url="q", wait_seconds=21)
    with pytest.raises(ValueError, match=r"batch must be 1\.\.10"):
        EventQueue(sqs=sqs, queue_url="q", batch=11)
    short = boto3.client("sqs", region_name=REGION, endpoint_url="http://127.0.0.1:9", config=Config(read_timeout=20))
    with pytest.raises(ValueError, match="read_timeout"):
        EventQueue(sqs=short, queue_url="q")
    EventQueue(sqs=short, queue_url="q", wait_seconds=19)


# --- AwsAccounts.home_client -----------------------------------------------------------------------------


def test_home_client_uses_pitcrews_own_credentials_and_the_endpoint(moto_endpoint: str) -> None:
    accounts = AwsAccounts()
    home = accounts.home_client("sts", REGION)
    assert home.meta.endpoint_url == moto_endpoint
    assert home.meta.region_name == REGION
    own = home.get_caller_identity()
    assert "assumed-role" not in own["Arn"]
    assert own == boto3.client("sts", region_name=REGION).get_caller_identity() | {
        "ResponseMetadata": own["ResponseMetadata"]
    }

    org = next(org for org in load_program(EXAMPLE_PROGRAM).orgs if org.aws.role_arn)
    assumed = accounts.client(org, "sts").get_caller_identity()
    assert "assumed-role" in assumed["Arn"]  # the org's client went through its role ...
    assert accounts.home_client("sts", REGION).get_caller_identity()["Arn"] == own["Arn"]  # ... the home one never
    assert accounts.assume_role_calls == 1

    sqs = accounts.home_client("sqs", REGION)
    assert sqs.meta.endpoint_url == moto_endpoint
    assert sqs.meta.config.read_timeout > 20  # room for a 20 s long poll
    assert sqs.meta.config.retries["mode"] == "adaptive"  # otherwise the org clients' config
