"""Failed-node alerts end to end: moto's node statuses, the node monitor's sweeps and the EventBridge
queue, the local Slack's channels and threads, and the buttons on the alert.

The monitor's schedule is off in these tests (they call its sweep, as the scheduler would), except where
the EventBridge consumer itself is under test. The seeded program already has failed nodes: each test
sweeps once first, so what it looks at is only what it changed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from sqlalchemy import update

from bot.config import MonitorConfig, ProgramConfig
from sandbox.moto_support import (
    hyperpod_progress,
    reset_moto_server,
    set_hyperpod_cluster_status,
    set_hyperpod_node_status,
)
from sandbox.slack import Message
from sandbox.world import Sandbox
from storage import crud
from storage.models import Silence
from tests.conftest import SeededAws
from tests.scenarios.conftest import COORDINATION, body

ALICE, BOB = "U0ALICE01", "U0BOB0001"
KUMO = "C0KUMOLAB"
ACCOUNT, REGION = "111111111111", "us-east-1"
TRAIN, WORKERS = "kumo-p5-train", "worker-group-1"
XID = "GPU XID 79: GPU has fallen off the bus"


@pytest.fixture
def reseed(moto_endpoint: str) -> Iterator[None]:
    with hyperpod_progress(0.2, create_seconds=0.2, delete_seconds=0.2):
        yield
    reset_moto_server(moto_endpoint)  # the next test that needs the seeded program gets it afresh


@pytest.fixture
async def world(sandbox_factory: Callable[..., Any], reseed: None) -> AsyncIterator[Sandbox]:
    async with sandbox_factory() as sandbox:
        await sandbox.pitcrew.ready.wait()
        await sandbox.pitcrew.services.drain()
        await sandbox.pitcrew.services.monitor.sweep()  # the seeded failures: opened now, not counted below
        yield sandbox


def running_workers(seeded_aws: SeededAws) -> list[str]:
    org = seeded_aws.program.org("kumo-labs")
    assert org is not None
    client = seeded_aws.accounts.client(org, "sagemaker")
    pages = client.get_paginator("list_cluster_nodes").paginate(ClusterName=TRAIN)
    return [
        n["InstanceId"]
        for page in pages
        for n in page["ClusterNodeSummaries"]
        if n["InstanceGroupName"] == WORKERS and n["InstanceStatus"]["Status"] == "Running"
    ]


def alerts_about(world: Sandbox, node_id: str, channel: str = KUMO) -> list[Message]:
    return [m for m in world.slack.channel_messages(channel) if node_id in m.text and m.thread_ts is None]


def thread(world: Sandbox, message: Message) -> list[Message]:
    return [m for m in world.slack.messages if m.thread_ts == message.ts]


def now_of(world: Sandbox, message: Message) -> Message:
    return next(m for m in world.slack.messages if m.ts == message.ts and m.channel == message.channel)


async def sweep(world: Sandbox) -> None:
    await world.pitcrew.services.monitor.sweep()
    await world.pitcrew.services.drain()


async def test_a_failed_node_is_alerted_once_across_sweeps_and_its_recovery_threads(
    world: Sandbox, seeded_aws: SeededAws
) -> None:
    node = running_workers(seeded_aws)[0]
    set_hyperpod_node_status(ACCOUNT, REGION, TRAIN, node, "Failure", XID)
    for _ in range(3):
        await sweep(world)
    (alert,) = alerts_about(world, node)
    text = body(alert)
    for fact in ("Kumo Labs", f"kumo-labs/{TRAIN}", "HyperPod", WORKERS, "ml.p5.48xlarge", "Failure", XID, "healthy"):
        assert fact in text, fact
    assert "Node recovery" in text and "Failed at" in text
    assert {e["action_id"] for b in alert.blocks if b["type"] == "actions" for e in b["elements"]} >= {
        "alert_ack",
        "alert_replace",
        "alert_reboot",
        "alert_silence_1",
        "alert_silence_4",
        "alert_silence_24",
    }
    (line,) = alerts_about(world, node, COORDINATION)
    assert f"kumo-labs/{TRAIN}" in line.text and "<#C0KUMOLAB>" in body(line)

    set_hyperpod_node_status(ACCOUNT, REGION, TRAIN, node, "Running")
    await sweep(world)
    recovered = now_of(world, alert)
    assert "Recovered after" in recovered.text or "recovered" in recovered.text
    assert "alert_ack" not in str(recovered.blocks), "a closed alert has no buttons"
    assert any("Recovered" in m.text for m in thread(world, alert))
    assert "recovered after" in now_of(world, line).text
    async with world.pitcrew.services.db.session() as session:
        (episode,) = [
            e
            for e in await crud.episodes_between(session, org_id="kumo-labs", since=EVER[0], until=EVER[1])
            if node in e.node_ids
        ]
    assert episode.state == "closed" and episode.node_hours_lost >= 0 and episode.instance_type == "ml.p5.48xlarge"


EVER = (datetime(2000, 1, 1, tzinfo=UTC), datetime(2100, 1, 1, tzinfo=UTC))


async def test_a_replaced_node_stays_in_one_episode(world: Sandbox, seeded_aws: SeededAws) -> None:
    node = running_workers(seeded_aws)[1]
    set_hyperpod_node_status(ACCOUNT, REGION, TRAIN, node, "Failure", XID)
    await sweep(world)
    (alert,) = alerts_about(world, node)
    org = seeded_aws.program.org("kumo-labs")
    assert org is not None
    client = seeded_aws.accounts.client(org, "sagemaker")
    answer = client.batch_replace_cluster_nodes(ClusterName=TRAIN, NodeIds=[node])
    assert answer["Successful"] == [node]
    for _ in range(100):  # ShuttingDown, gone, a successor Pending, then Running: sweep until it recovered
        await sweep(world)
        if "Recovered after" in now_of(world, alert).text:
            break
        await asyncio.sleep(0.1)
    notes = [m.text for m in thread(world, alert)]
    assert any("replace" in n for n in notes) and any("Recovered" in n for n in notes)
    final = now_of(world, alert)
    assert "Recovered after" in final.text and "→" in body(final), "the message shows the old and the new id"
    successor = body(final).split("→")[1].split("`")[1]
    assert successor.startswith("i-") and successor != node
    assert alerts_about(world, successor) == [now_of(world, alert)], "the successor is no alert of its own"


async def test_many_failures_in_one_sweep_make_one_grouped_message(world: Sandbox, seeded_aws: SeededAws) -> None:
    nodes = running_workers(seeded_aws)[:20]
    before = len(world.slack.channel_messages(KUMO))
    for node in nodes:
        set_hyperpod_node_status(ACCOUNT, REGION, TRAIN, node, "Failure", XID)
    await sweep(world)
    posted = [m for m in world.slack.channel_messages(KUMO)[before:] if m.thread_ts is None]
    assert len(posted) == 1 and "20 nodes" in posted[0].text
    assert all(node in body(posted[0]) for node in nodes[:20])


async def test_a_failed_cluster_is_alerted(world: Sandbox) -> None:
    set_hyperpod_cluster_status(ACCOUNT, REGION, TRAIN, "Failed", "InsufficientInstanceCapacity for ml.p5.48xlarge")
    await sweep(world)
    (alert,) = [m for m in world.slack.channel_messages(KUMO) if "Cluster failed" in m.text]
    assert "InsufficientInstanceCapacity" in body(alert)


async def test_ack_shows_who_and_silence_holds_back_new_messages(world: Sandbox, seeded_aws: SeededAws) -> None:
    first, second = running_workers(seeded_aws)[:2]
    set_hyperpod_node_status(ACCOUNT, REGION, TRAIN, first, "Failure", XID)
    await sweep(world)
    (alert,) = alerts_about(world, first)
    await world.slack.click(user_id=ALICE, message=alert, action_id="alert_ack")
    acked = await world.slack.wait_for(lambda m: m.ts == alert.ts and "acknowledged by <@U0ALICE01>" in body(m))
    assert "alert_ack" not in str(acked.blocks)
    await world.slack.click(user_id=ALICE, message=acked, action_id="alert_silence_1")
    await world.slack.wait_for(lambda m: m.thread_ts == alert.ts and "Silenced until" in m.text)
    set_hyperpod_node_status(ACCOUNT, REGION, TRAIN, second, "Failure", XID)
    await sweep(world)
    assert not alerts_about(world, second), "silenced: no new message"
    assert any(second in m.text for m in thread(world, alert)), "but it is shown in the silenced alert's thread"
    await world.pitcrew.services.drain()
    async with world.pitcrew.services.db.session() as session:
        entries = await crud.audit_entries(session, org_id="kumo-labs")
    assert {("alert_ack", "done"), ("alert_silence", "done")} <= {(e.command, e.outcome) for e in entries}

    # The hour is over: the next failure gets a message of its own again.
    async with world.pitcrew.services.db.session() as session:
        await session.exec(update(Silence).values(until=datetime.now(UTC) - timedelta(seconds=1)))
        await session.commit()
    third = running_workers(seeded_aws)[0]
    set_hyperpod_node_status(ACCOUNT, REGION, TRAIN, third, "Failure", XID)
    await sweep(world)
    assert len(alerts_about(world, third)) == 1


async def test_a_viewer_cannot_press_replace(world: Sandbox, seeded_aws: SeededAws) -> None:
    node = running_workers(seeded_aws)[0]
    set_hyperpod_node_status(ACCOUNT, REGION, TRAIN, node, "Failure", XID)
    await sweep(world)
    (alert,) = alerts_about(world, node)
    await world.slack.click(user_id=BOB, message=alert, action_id="alert_replace")
    refusal = await world.slack.wait_for(lambda m: m.ephemeral_to == BOB)
    assert "viewer" in refusal.text
    await world.slack.click(user_id=ALICE, message=alert, action_id="alert_replace")
    plan = await world.slack.wait_for(lambda m: "Plan: replace" in m.text and node in m.text)
    assert "wipes the root and secondary volumes" in body(plan) and "Confirm replace" in str(plan.blocks)


async def test_two_instances_on_one_database_post_a_failure_once(
    sandbox_factory: Callable[..., Any], reseed: None, database_url: str, seeded_aws: SeededAws
) -> None:
    """Two monitors with their own engines on one database (SQLite, and Postgres in CI) sweep the same
    failure at the same moment: one episode, one message."""
    from bot.alerts.desk import AlertDesk
    from bot.monitor.nodes import NodeMonitor
    from bot.slack.alerts import SlackAlerts
    from storage.db import Database

    async with sandbox_factory(database_url=database_url) as world:
        await world.pitcrew.ready.wait()
        services = world.pitcrew.services
        await services.monitor.sweep()
        node = running_workers(seeded_aws)[0]
        set_hyperpod_node_status(ACCOUNT, REGION, TRAIN, node, "Failure", XID)
        other_db = Database(url=database_url)
        try:
            desk = AlertDesk(
                db=other_db,
                poster=services.poster,
                program=services.program,
                presenter=SlackAlerts(),
                clusters=services.fleet,
            )
            other = NodeMonitor(desk=desk, fleet=services.fleet)
            await asyncio.gather(services.monitor.sweep(), other.sweep(), services.monitor.sweep(), other.sweep())
        finally:
            await other_db.dispose()
        await services.drain()
        assert len(alerts_about(world, node)) == 1
        assert len(alerts_about(world, node, COORDINATION)) == 1
        async with services.db.session() as session:
            episodes = [e for e in await crud.open_episodes(session, org_id="kumo-labs") if node in e.node_ids]
        assert len(episodes) == 1


async def test_an_eventbridge_event_is_alerted_without_a_sweep_and_a_duplicate_is_ignored(
    sandbox_factory: Callable[..., Any], reseed: None, seeded_aws: SeededAws
) -> None:
    from tests.monitor.test_events import Wiring, documented_pattern  # the queue as docs/eventbridge.md wires it

    sqs, events = boto3.client("sqs", region_name=REGION), boto3.client("events", region_name=REGION)
    queue_url = sqs.create_queue(QueueName="pitcrew-events-scenario")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name="pitcrew-scenario", EventPattern=json.dumps(documented_pattern()), State="ENABLED")
    events.put_targets(Rule="pitcrew-scenario", Targets=[{"Id": "q", "Arn": queue_arn}])
    wiring = Wiring(sqs, events, queue_url)

    def with_queue(program: ProgramConfig) -> ProgramConfig:
        return program.model_copy(update={"monitor": MonitorConfig(node_sweep_seconds=3600, event_queue_url=queue_url)})

    try:
        async with sandbox_factory(monitor=True, program_transform=with_queue) as world:
            await world.pitcrew.ready.wait()
            runner = world.pitcrew.services.scheduler
            assert runner is not None
            runner.scheduler.remove_job("node_sweep")  # no sweep at all: only the event can tell
            node = running_workers(seeded_aws)[0]
            set_hyperpod_node_status(ACCOUNT, REGION, TRAIN, node, "Failure", XID)
            cluster_arn = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/kumo0train"
            detail = {
                "ClusterName": TRAIN,
                "ClusterArn": cluster_arn,
                "InstanceId": node,
                "HealthSummary": {
                    "HealthStatus": "Unhealthy",
                    "HealthStatusReason": "XidHardwareFailure",
                    "RepairAction": "Replace",
                },
            }
            answer = wiring.events.put_events(
                Entries=[
                    {
                        "Source": "aws.sagemaker",
                        "DetailType": "SageMaker HyperPod Cluster Node Health Event",
                        "Detail": json.dumps(detail),
                        "Resources": [cluster_arn],
                    }
                ]
            )
            assert answer["FailedEntryCount"] == 0
            alert = await world.slack.wait_for(
                lambda m: node in m.text and m.channel == KUMO and m.thread_ts is None, timeout=15
            )
            assert XID in body(alert)
            # The same event delivered again (SQS at-least-once, or SageMaker repeating itself): no new message.
            event_id = answer["Entries"][0]["EventId"]
            duplicate = {
                "version": "0",
                "id": event_id,
                "detail-type": "SageMaker HyperPod Cluster Node Health Event",
                "source": "aws.sagemaker",
                "region": REGION,
                "time": "2026-11-29T00:00:00Z",
                "resources": [cluster_arn],
                "detail": detail,
            }
            wiring.sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(duplicate))
            for _ in range(50):
                attributes = wiring.sqs.get_queue_attributes(
                    QueueUrl=queue_url,
                    AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
                )["Attributes"]
                if attributes == {"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0"}:
                    break
                await asyncio.sleep(0.2)
            else:
                raise AssertionError(f"events left on the queue: {attributes}")
            assert len(alerts_about(world, node)) == 1
    finally:
        events.remove_targets(Rule="pitcrew-scenario", Ids=["q"])
        events.delete_rule(Name="pitcrew-scenario")
        sqs.delete_queue(QueueUrl=queue_url)


async def test_an_alert_slack_refused_is_posted_at_a_later_sweep_once(world: Sandbox, seeded_aws: SeededAws) -> None:
    """Review finding: when the first post failed, the episode was stored without a message and never posted."""
    node = running_workers(seeded_aws)[0]
    set_hyperpod_node_status(ACCOUNT, REGION, TRAIN, node, "Failure", XID)
    world.slack.fail_next("chat.postMessage", status=500)
    await sweep(world)
    assert not alerts_about(world, node)
    desk = world.pitcrew.services.alerts
    later = datetime.now(UTC) + timedelta(minutes=3)  # past the grace left for the opener's own post
    desk.clock = lambda: later  # the alert desk's injectable clock, the node monitor's too
    await sweep(world)
    await sweep(world)
    assert len(alerts_about(world, node)) == 1
