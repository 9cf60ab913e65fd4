"""HyperPod's own diagnosis reaches the alerts, once (issue 22 item 4): a Continuous-provisioning cluster's
capacity failure event opens a cluster alert, a repeat of the same event does nothing, a later failure is a note
on it and a success closes it; the health-monitoring agent's detection of a failed node (its CloudWatch Logs) puts
"HyperPod: <fault type> (<reason>)" beside AWS's status message in the node alert, once."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from sandbox.moto_support import (
    add_hyperpod_cluster_event,
    hyperpod_progress,
    reset_moto_server,
    set_hyperpod_node_status,
)
from sandbox.slack import Message
from sandbox.world import Sandbox
from tests.conftest import SeededAws
from tests.scenarios.conftest import COORDINATION, body

KUMO = "C0KUMOLAB"
ACCOUNT, REGION = "111111111111", "us-east-1"
TRAIN, WORKERS = "kumo-p5-train", "worker-group-1"
CP = "kumo-p5-cp"
ICE = "InsufficientInstanceCapacity: We currently do not have sufficient ml.p5.48xlarge capacity in us-east-1a."


@pytest.fixture
def reseed(moto_endpoint: str) -> Iterator[None]:
    with hyperpod_progress(0.2, create_seconds=0, delete_seconds=0.2):
        yield
    reset_moto_server(moto_endpoint)


@pytest.fixture
async def world(sandbox_factory: Callable[..., Any], reseed: None) -> AsyncIterator[Sandbox]:
    async with sandbox_factory() as sandbox:
        await sandbox.pitcrew.ready.wait()
        await sandbox.pitcrew.services.drain()
        await sandbox.pitcrew.services.monitor.sweep()
        await sandbox.pitcrew.services.drain()
        yield sandbox


def _client(seeded_aws: SeededAws, service: str) -> Any:
    org = seeded_aws.program.org("kumo-labs")
    assert org is not None
    return seeded_aws.accounts.client(org, service)


async def sweep(world: Sandbox) -> None:
    await world.pitcrew.services.monitor.sweep()
    await world.pitcrew.services.drain()


def top(world: Sandbox, needle: str, channel: str = KUMO) -> list[Message]:
    return [m for m in world.slack.channel_messages(channel) if needle in m.text and m.thread_ts is None]


def thread(world: Sandbox, message: Message) -> list[Message]:
    return [m for m in world.slack.messages if m.thread_ts == message.ts]


def now_of(world: Sandbox, message: Message) -> Message:
    return next(m for m in world.slack.messages if m.ts == message.ts and m.channel == message.channel)


async def test_a_capacity_failure_event_is_one_cluster_alert_and_a_success_closes_it(
    world: Sandbox, seeded_aws: SeededAws
) -> None:
    sagemaker = _client(seeded_aws, "sagemaker")
    role = f"arn:aws:iam::{ACCOUNT}:role/SageMakerHyperPodExecutionRole"
    group = {
        "InstanceGroupName": WORKERS,
        "InstanceType": "ml.p5.48xlarge",
        "InstanceCount": 1,
        "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-kumo-lifecycle/", "OnCreate": "on_create.sh"},
        "ExecutionRole": role,
        "ThreadsPerCore": 1,
    }
    sagemaker.create_cluster(ClusterName=CP, InstanceGroups=[group], NodeProvisioningMode="Continuous")
    add_hyperpod_cluster_event(
        ACCOUNT,
        REGION,
        CP,
        description="Failed to scale up instance group",
        instance_group=WORKERS,
        failure_message=ICE,
    )
    for _ in range(3):
        await sweep(world)
    (alert,) = top(world, f"kumo-labs/{CP}")
    text = body(alert)
    assert "Provisioning failed" in text and "InsufficientInstanceCapacity" in text and WORKERS in text
    assert len(top(world, f"kumo-labs/{CP}", COORDINATION)) == 1

    add_hyperpod_cluster_event(
        ACCOUNT,
        REGION,
        CP,
        description="Lifecycle script failed",
        resource_type="Instance",
        instance_group=WORKERS,
        instance_id="i-0123456789abcdef0",
        failure_message="on_create.sh exited with 1",
    )
    await sweep(world)
    await sweep(world)
    notes = [m.text for m in thread(world, alert)]
    assert sum("on_create.sh exited with 1" in n for n in notes) == 1, notes
    assert len(top(world, f"kumo-labs/{CP}")) == 1

    add_hyperpod_cluster_event(
        ACCOUNT, REGION, CP, description="Instance group scaled up", level="Info", instance_group=WORKERS
    )
    await sweep(world)
    assert "Recovered" in now_of(world, alert).text
    assert any("scaled up" in m.text for m in thread(world, alert))


AGENT_LOG = {
    "level": "info",
    "ts": "2026-12-06T10:00:00Z",
    "msg": "NPD caught event",
    "details": {
        "severity": "warn",
        "reason": "XidHardwareFailure",
        "message": 'Node condition NvidiaErrorTerminate is now: True, reason: XidHardwareFailure, message: "NVRM: Xid '
        '(PCI:0000:b9:00): 79, GPU has fallen off the bus"',
    },
    "HealthMonitoringAgentDetectionEvent": "HealthEvent",
}


async def test_an_agent_detection_is_said_in_the_node_alert_once(world: Sandbox, seeded_aws: SeededAws) -> None:
    sagemaker = _client(seeded_aws, "sagemaker")
    nodes = [
        n["InstanceId"]
        for n in sagemaker.list_cluster_nodes(ClusterName=TRAIN)["ClusterNodeSummaries"]
        if n["InstanceGroupName"] == WORKERS and n["InstanceStatus"]["Status"] == "Running"
    ]
    node = nodes[0]
    set_hyperpod_node_status(ACCOUNT, REGION, TRAIN, node, "Failure", "Instance failed health checks")
    await sweep(world)
    (alert,) = top(world, node)
    assert "HyperPod: " not in body(alert)

    arn = sagemaker.describe_cluster(ClusterName=TRAIN)["ClusterArn"]
    logs = _client(seeded_aws, "logs")
    group = f"/aws/sagemaker/Clusters/{TRAIN}/{arn.rsplit('/', 1)[-1]}"
    stream = f"SagemakerHealthMonitoringAgent/{WORKERS}/{node}"
    logs.create_log_group(logGroupName=group)
    logs.create_log_stream(logGroupName=group, logStreamName=stream)
    import time

    logs.put_log_events(
        logGroupName=group,
        logStreamName=stream,
        logEvents=[{"timestamp": int(time.time() * 1000), "message": json.dumps(AGENT_LOG)}],
    )
    for _ in range(3):
        await sweep(world)
    text = body(now_of(world, alert))
    assert "HyperPod: NvidiaErrorTerminate (XidHardwareFailure)" in text
    assert "Instance failed health checks" in text  # beside AWS's status message
    said = [m for m in thread(world, alert) if "NvidiaErrorTerminate" in m.text]
    assert len(said) == 1
