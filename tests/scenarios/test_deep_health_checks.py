"""Deep health checks from Slack (issue 22 item 5), end to end: the alert's Run deep health check button and
`/cluster check` (also by mention) make a plan, Confirm runs StartClusterHealthCheck on the moto server (the node
goes DeepHealthCheckInProgress, then Running or Failure as the seeded world says), the progress message is edited
until done, the alerts of the node say the result in their thread, and everything is audited. Bad inputs get one
message with the usage line; a second press while a check waits or runs starts nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from bot.alerts.desk import WATCH_FOR
from sandbox.moto_support import hyperpod_progress, reset_moto_server, set_hyperpod_node_status
from sandbox.seed import CONTINUOUS_CLUSTER, FAULTS, seed_capacity_failure
from sandbox.slack import Message
from sandbox.world import Sandbox
from storage import crud
from storage.models import Episode
from tests.conftest import SeededAws
from tests.scenarios.conftest import ask, body

ALICE, BOB, KOJI = "U0ALICE01", "U0BOB0001", "U0KOJI001"
KUMO = "C0KUMOLAB"
ACCOUNT, REGION = "111111111111", "us-east-1"
TRAIN, WORKERS, DEV = "kumo-p5-train", "worker-group-1", "kumo-p5-dev"
SEEDED_XID = next(f.check_finds for f in FAULTS if f.preferred_cluster == TRAIN)


@pytest.fixture
def reseed(moto_endpoint: str) -> Iterator[None]:
    with hyperpod_progress(0.3, create_seconds=0.3, delete_seconds=0.3):
        yield
    reset_moto_server(moto_endpoint)  # these tests change node statuses: the next test gets the seeded program back


@pytest.fixture
async def world(sandbox_factory: Callable[..., Any], reseed: None) -> AsyncIterator[Sandbox]:
    async with sandbox_factory() as sandbox:
        await sandbox.pitcrew.ready.wait()
        await sandbox.pitcrew.services.drain()
        sandbox.pitcrew.services.operations.first_poll = 0.2  # seconds here, where AWS takes minutes
        sandbox.pitcrew.services.operations.max_poll = 0.5
        await sweep(sandbox)  # the seeded failures' alerts
        yield sandbox


async def sweep(world: Sandbox) -> None:
    await world.pitcrew.services.monitor.sweep()
    await world.pitcrew.services.drain()


def nodes(seeded_aws: SeededAws, status: str) -> list[dict[str, Any]]:
    org = seeded_aws.program.org("kumo-labs")
    assert org is not None
    client = seeded_aws.accounts.client(org, "sagemaker")
    pages = client.get_paginator("list_cluster_nodes").paginate(ClusterName=TRAIN)
    return [
        n
        for page in pages
        for n in page["ClusterNodeSummaries"]
        if n["InstanceGroupName"] == WORKERS and n["InstanceStatus"]["Status"] == status
    ]


def status_of(seeded_aws: SeededAws, node_id: str) -> tuple[str, str]:
    org = seeded_aws.program.org("kumo-labs")
    assert org is not None
    client = seeded_aws.accounts.client(org, "sagemaker")
    found = client.describe_cluster_node(ClusterName=TRAIN, NodeId=node_id)["NodeDetails"]["InstanceStatus"]
    return found["Status"], found.get("Message", "")


def alert_of(world: Sandbox, node_id: str) -> Message:
    (alert,) = [m for m in world.slack.channel_messages(KUMO) if node_id in m.text and m.thread_ts is None]
    return alert


def now_of(world: Sandbox, message: Message) -> Message:
    return next(m for m in world.slack.messages if m.ts == message.ts and m.channel == message.channel)


def thread(world: Sandbox, message: Message) -> list[str]:
    return [m.text for m in world.slack.messages if m.thread_ts == message.ts]


def buttons(message: Message) -> list[str]:
    return [e["action_id"] for b in message.blocks if b["type"] == "actions" for e in b["elements"]]


async def finished(world: Sandbox, starts: str) -> Message:
    return await world.slack.wait_for(
        lambda m: m.kind == "message" and m.text.startswith(starts) and ("Done:" in m.text or "Failed:" in m.text),
        timeout=30,
    )


async def audit(world: Sandbox) -> list[tuple[str, str]]:
    await world.pitcrew.services.drain()
    async with world.pitcrew.services.db.session() as session:
        entries = await crud.audit_entries(session, org_id="kumo-labs")
    return [(entry.command, entry.outcome) for entry in reversed(entries)]


async def test_a_deep_health_check_runs_from_the_alert_and_its_failure_is_posted(
    world: Sandbox, seeded_aws: SeededAws
) -> None:
    (failed,) = nodes(seeded_aws, "Failure")
    node = failed["InstanceId"]
    alert = alert_of(world, node)
    assert buttons(alert)[:2] == ["alert_replace", "alert_ack"], "XID 79 is a hard fault: Replace node first"
    assert "alert_check" in buttons(alert)

    await world.slack.click(user_id=BOB, message=alert, action_id="alert_check")
    refusal = await world.slack.wait_for(lambda m: m.ephemeral_to == BOB)
    assert "viewer" in refusal.text

    await world.slack.click(user_id=ALICE, message=alert, action_id="alert_check")
    plan = await world.slack.wait_for(lambda m: m.text.startswith("Plan: deep health check") and node in m.text)
    assert "InstanceStress" in body(plan) and "InstanceConnectivity" in body(plan)
    assert "Confirm deep health check" in str(plan.blocks)
    assert status_of(seeded_aws, node)[0] == "Failure", "nothing changes before Confirm"

    # Pressed again while the plan waits: that plan stands, nothing new is planned.
    await world.slack.click(user_id=ALICE, message=alert, action_id="alert_check")
    again = await world.slack.wait_for(lambda m: m.ephemeral_to == ALICE and "already has a plan" in m.text)
    assert "operation_confirm" not in str(again.blocks)
    assert len([m for m in world.slack.messages if m.text.startswith("Plan: deep health check")]) == 1

    await world.slack.click(user_id=ALICE, message=plan, action_id="operation_confirm")
    await world.slack.wait_for(lambda m: m.thread_ts == alert.ts and "Deep health check of" in m.text)
    # While it runs: a third press says so and offers nothing.
    await world.slack.click(user_id=ALICE, message=now_of(world, alert), action_id="alert_check")
    busy = await world.slack.wait_for(lambda m: m.ephemeral_to == ALICE and "already" in m.text and m is not again)
    assert "operation_confirm" not in str(busy.blocks)

    done = await finished(world, f"Deep health check of kumo-labs/{TRAIN}")
    assert "Done:" in done.text and "failed the deep health check" in done.text and done.edits >= 1
    assert status_of(seeded_aws, node) == ("Failure", f"Deep health check failed: {SEEDED_XID}")
    await world.slack.wait_for(
        lambda m: m.thread_ts == alert.ts and "Deep health check of" in m.text and "failed (" in m.text
    )
    # The thread's line comes first, the alert's edit right after it, from the change's watch (no drain waits
    # for that): wait for the edit itself (reading at once failed on a loaded machine).
    shown = await world.slack.wait_for(
        lambda m: m.ts == alert.ts and m.channel == alert.channel and "Deep health check failed" in body(m)
    )
    await world.pitcrew.services.drain()
    said = thread(world, alert)
    assert sum("Deep health check of" in t and "failed" in t for t in said) == 1, said
    assert any(SEEDED_XID in t for t in said)
    assert buttons(shown)[0] == "alert_replace", "a failed check offers Replace node first"
    steps = await audit(world)
    assert ("alert_check", "refused") in steps and ("alert_check", "allowed") in steps
    assert ("operation_confirm", "allowed") in steps and ("check", "done") in steps


async def test_cluster_check_runs_from_a_command_and_the_node_alert_says_it_passed(
    world: Sandbox, seeded_aws: SeededAws
) -> None:
    node = nodes(seeded_aws, "Running")[0]["InstanceId"]
    set_hyperpod_node_status(ACCOUNT, REGION, TRAIN, node, "Failure", "GPU XID 13: graphics engine exception")
    await sweep(world)
    alert = alert_of(world, node)
    assert buttons(alert)[0] == "alert_reboot", "XID 13 is resettable: Reboot node first"

    plan = await ask(world, user=ALICE, channel=KUMO, text=f"check {TRAIN} {node} --stress")
    assert plan.kind == "message" and "InstanceStress" in body(plan) and "InstanceConnectivity" not in body(plan)
    await world.slack.click(user_id=ALICE, message=plan, action_id="operation_confirm")
    done = await finished(world, f"Deep health check of kumo-labs/{TRAIN}")
    assert "deep health check passed" in done.text
    assert status_of(seeded_aws, node)[0] == "Running"
    await world.slack.wait_for(lambda m: m.thread_ts == alert.ts and "passed (InstanceStress)" in m.text)
    said = thread(world, alert)
    assert any("started (InstanceStress)" in t for t in said), said
    assert any("passed (InstanceStress)" in t for t in said), said
    # The alert's own edit follows its thread's line: waited for, so the sweep's edit is the last.
    await world.slack.wait_for(lambda m: m.ts == alert.ts and "Deep health check passed" in body(m))
    await sweep(world)
    assert "Recovered" in now_of(world, alert).text

    # The same by mention, as an engineer in the org's own workspace: a dry run plans and changes nothing.
    before = len(world.slack.messages)
    await world.slack.send_mention(
        user_id=KOJI, channel_id=KUMO, text=f"{world.slack.bot_mention} cluster check {TRAIN} {node} --dry-run"
    )
    dry = await world.slack.wait_for(lambda m: "Dry run" in str(m.blocks), since=before)
    assert "Plan: deep health check" in dry.text and "operation_confirm" not in str(dry.blocks)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("check", "needs a cluster name"),
        (f"check {TRAIN}", "needs the ids of the nodes"),
        (f"check {TRAIN} node-7", "is not a node id"),
        (f"check {TRAIN} i-0123456789abcdef0", "is not a node of"),
        (f"check {DEV} i-0123456789abcdef0", "Deep health checks are HyperPod's"),
        ("check no-such-cluster i-0123456789abcdef0", "No cluster `no-such-cluster`"),
        (f"check {TRAIN} i-0123456789abcdef0 --quick", "is not an option"),
    ],
)
async def test_bad_check_commands_get_one_message_with_the_usage_line(world: Sandbox, text: str, said: str) -> None:
    reply = await ask(world, user=ALICE, channel=KUMO, text=text)
    assert reply.kind == "ephemeral" and said in body(reply) and "Usage:" in body(reply), body(reply)
    assert "operation_confirm" not in str(reply.blocks)
    assert not [m for m in world.slack.messages if m.text.startswith("Plan:")], "nothing planned"


async def test_a_viewer_is_refused_check_and_a_node_in_a_check_is_not_checked_twice(
    world: Sandbox, seeded_aws: SeededAws
) -> None:
    refused = await ask(
        world, user=BOB, channel=KUMO, text=f"check {TRAIN} {nodes(seeded_aws, 'Running')[0]['InstanceId']}"
    )
    assert "viewer" in refused.text and "operation_confirm" not in str(refused.blocks)
    node = nodes(seeded_aws, "Running")[1]["InstanceId"]
    set_hyperpod_node_status(
        ACCOUNT, REGION, TRAIN, node, "DeepHealthCheckInProgress", "Deep health check: InstanceStress"
    )
    reply = await ask(world, user=ALICE, channel=KUMO, text=f"check {TRAIN} {node}")
    assert "already in a deep health check" in body(reply) and "operation_confirm" not in str(reply.blocks)


async def test_a_diverging_node_offers_watch_first_which_acknowledges_and_reminds_once(
    world: Sandbox, seeded_aws: SeededAws
) -> None:
    services = world.pitcrew.services
    desk = services.alerts
    node = nodes(seeded_aws, "Running")[2]["InstanceId"]
    now = desk.clock()
    opened = await desk.open(
        Episode(
            org_id="kumo-labs",
            backend="hyperpod",
            cluster_name=TRAIN,
            node_key=node,
            kind="faulty_node",
            state="open",
            node_ids=[node],
            cause="thermal",
            message="GPU 3 at 1,210 MHz and 92 °C, peers 1,980 MHz",
            opened_at=now,
            failing_since=now,
            updated_at=now,
        )
    )
    assert opened is not None
    await desk.announce([opened], silence=None)
    alert = alert_of(world, node)
    assert buttons(alert)[:2] == ["alert_watch", "alert_ack"], "a divergence only: Watch first"
    assert "alert_check" in buttons(alert)

    await world.slack.click(user_id=ALICE, message=alert, action_id="alert_watch")
    await world.slack.wait_for(lambda m: m.thread_ts == alert.ts and "is watching this" in m.text)
    shown = await world.slack.wait_for(lambda m: m.ts == alert.ts and "acknowledged by <@U0ALICE01>" in body(m))
    assert "alert_watch" not in buttons(shown) and "alert_ack" not in buttons(shown)
    assert await desk.remind() == 0, "not due yet"
    clock = desk.clock
    desk.clock = lambda: clock() + WATCH_FOR
    try:
        assert await desk.remind() == 1
        assert await desk.remind() == 0, "once"
    finally:
        desk.clock = clock
    assert sum(":alarm_clock:" in t for t in thread(world, alert)) == 1
    assert ("alert_watch", "done") in await audit(world)


async def test_the_sandbox_continuous_cluster_shows_its_capacity_failure(world: Sandbox, seeded_aws: SeededAws) -> None:
    """What `make run` seeds for the demo (seed_program(provisioning_failure=True)): the Continuous-provisioning
    cluster's failed scale-up is one 'Provisioning failed' alert in its org's channel, naming the capacity."""
    seed_capacity_failure(seeded_aws.report.clusters)
    await sweep(world)
    await sweep(world)
    alerts = [m for m in world.slack.channel_messages("C0MORIFIN") if CONTINUOUS_CLUSTER in m.text]
    assert len(alerts) == 1, [m.text for m in alerts]
    text = body(alerts[0])
    assert "Provisioning failed" in text and "InsufficientInstanceCapacity" in text and WORKERS in text
