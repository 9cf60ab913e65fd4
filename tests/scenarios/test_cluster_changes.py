"""Scale, replace, reboot and delete through Slack, against moto and the ParallelCluster API emulator:
a plan in the channel, Confirm by the requester or an admin, a progress message edited until done.

These tests change the seeded clusters, so each one leaves moto empty behind it and the next test that
needs the seeded program gets it afresh (tests/conftest.py seeded_aws)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from bot.clusters.hyperpod import HyperPodBackend
from bot.slack.blocks import DELETE_VIEW
from bot.slack.operations import decision_reply
from sandbox.moto_support import hyperpod_progress, reset_moto_server, set_hyperpod_node_status
from sandbox.slack import Message
from sandbox.world import Sandbox
from storage import crud
from tests.conftest import SeededAws
from tests.scenarios.conftest import ADMIN, ask, body

ALICE, BOB, HANA = "U0ALICE01", "U0BOB0001", "U0HANA001"
KUMO = "C0KUMOLAB"
ACCOUNT, REGION = "111111111111", "us-east-1"
TRAIN, DEV = "kumo-p5-train", "kumo-p5-dev"  # HyperPod, 32 x p5; ParallelCluster (with its API), 4 x p5
WORKERS, GPU_QUEUE = "worker-group-1", "compute-gpu"


@pytest.fixture
def reseed(moto_endpoint: str) -> Iterator[None]:
    """Let the next test have the seeded program back: these tests change it."""
    with hyperpod_progress(0.3, create_seconds=0.3, delete_seconds=0.3):
        yield
    reset_moto_server(moto_endpoint)


@pytest.fixture
async def world(sandbox_factory: Callable[..., Any], reseed: None) -> AsyncIterator[Sandbox]:
    async with sandbox_factory(pcluster_progress_seconds=0.3) as sandbox:
        await sandbox.pitcrew.ready.wait()
        await sandbox.pitcrew.services.drain()
        sandbox.pitcrew.services.operations.first_poll = 0.2  # seconds here, where AWS takes minutes
        sandbox.pitcrew.services.operations.max_poll = 0.5
        yield sandbox


def sagemaker(seeded_aws: SeededAws) -> Any:
    org = seeded_aws.program.org("kumo-labs")
    assert org is not None
    return seeded_aws.accounts.client(org, "sagemaker")


def group_counts(seeded_aws: SeededAws, cluster: str, group: str) -> tuple[int, int]:
    described = sagemaker(seeded_aws).describe_cluster(ClusterName=cluster)
    found = next(g for g in described["InstanceGroups"] if g["InstanceGroupName"] == group)
    return found["TargetCount"], found["CurrentCount"]


def worker_nodes(seeded_aws: SeededAws, status: str = "Running") -> list[str]:
    pages = sagemaker(seeded_aws).get_paginator("list_cluster_nodes").paginate(ClusterName=TRAIN)
    return [
        node["InstanceId"]
        for page in pages
        for node in page["ClusterNodeSummaries"]
        if node["InstanceGroupName"] == WORKERS and node["InstanceStatus"]["Status"] == status
    ]


async def confirm_and_wait(world: Sandbox, planned: Message, starts: str, *, user: str = ALICE) -> Message:
    after = len(world.slack.messages)
    response = await world.slack.click(user_id=user, message=planned, action_id="operation_confirm")
    assert response.status_code == 200
    return await finished(world, starts, after=after)


async def finished(world: Sandbox, starts: str, *, after: int = 0) -> Message:
    """The progress message starting with `starts`, posted after the first `after` messages, once it ends."""
    newer = world.slack.messages[after:]
    return await world.slack.wait_for(
        lambda m: (
            m.kind == "message"
            and m.text.startswith(starts)
            and ("Done:" in m.text or "Failed:" in m.text)
            and (m in newer or m in world.slack.messages[after:])
        ),
        timeout=30,
    )


async def audit_steps(world: Sandbox) -> list[tuple[str, str]]:
    await world.pitcrew.services.drain()
    async with world.pitcrew.services.db.session() as session:
        entries = await crud.audit_entries(session, org_id="kumo-labs")
    return [(entry.command, entry.outcome) for entry in reversed(entries)]


async def test_scale_hyperpod_group_up_then_down(world: Sandbox, seeded_aws: SeededAws) -> None:
    assert group_counts(seeded_aws, TRAIN, WORKERS) == (32, 32)
    planned = await ask(world, user=ALICE, channel=KUMO, text=f"scale {TRAIN} {WORKERS} 34")
    assert planned.kind == "message" and "Confirm scale" in str(planned.blocks)
    text = body(planned)
    assert "32 → *34*" in text and "p5.48xlarge: held 36 + 2 → 38 of 40 allowed" in text
    assert group_counts(seeded_aws, TRAIN, WORKERS) == (32, 32), "nothing changes before Confirm"
    done = await confirm_and_wait(world, planned, f"Scaling kumo-labs/{TRAIN}")
    assert "Done:" in done.text and f"{WORKERS} 34/34" in done.text and done.edits >= 1
    assert group_counts(seeded_aws, TRAIN, WORKERS) == (34, 34)

    shrink = await ask(world, user=ALICE, channel=KUMO, text=f"scale {TRAIN} {WORKERS} 30")
    assert "SageMaker chooses which nodes to remove" in body(shrink)
    await confirm_and_wait(world, shrink, f"Scaling kumo-labs/{TRAIN}")
    assert group_counts(seeded_aws, TRAIN, WORKERS) == (30, 30)
    assert await audit_steps(world) == [
        ("/cluster", "allowed"),
        ("operation_confirm", "allowed"),
        ("scale", "done"),
        ("/cluster", "allowed"),
        ("operation_confirm", "allowed"),
        ("scale", "done"),
    ]


async def test_scale_over_quota_is_refused_with_the_numbers(world: Sandbox, seeded_aws: SeededAws) -> None:
    before = seeded_aws.state()
    reply = await ask(world, user=ALICE, channel=KUMO, text=f"scale {TRAIN} {WORKERS} 40")
    assert reply.kind == "ephemeral" and "Confirm" not in str(reply.blocks)
    assert "held 36, requested 8 more, allowed 40" in reply.text
    assert seeded_aws.state() == before


async def test_scale_refusals_and_bad_input_change_nothing(world: Sandbox, seeded_aws: SeededAws) -> None:
    before = seeded_aws.state()
    viewer = await ask(world, user=BOB, channel=KUMO, text=f"scale {TRAIN} {WORKERS} 33")
    assert viewer.kind == "ephemeral" and "viewer" in viewer.text and "Confirm" not in str(viewer.blocks)
    stranger = await ask(world, user=HANA, channel=KUMO, text=f"scale kumo-labs/{TRAIN} {WORKERS} 33")
    assert "Confirm" not in str(stranger.blocks) and "kumo-labs" in stranger.text
    no_group = await ask(world, user=ALICE, channel=KUMO, text=f"scale {TRAIN} workers 33")
    assert f"no instance group `workers`; its groups: `controller-machine`, `{WORKERS}`" in no_group.text
    assert "Usage: /cluster scale" in no_group.text
    dry = await ask(world, user=ALICE, channel=KUMO, text=f"scale {TRAIN} {WORKERS} 33 --dry-run")
    assert dry.kind == "ephemeral" and "Dry run" in body(dry) and "Confirm" not in str(dry.blocks)
    assert seeded_aws.state() == before


async def test_only_the_requester_or_an_admin_confirms_and_one_change_at_a_time(
    world: Sandbox, seeded_aws: SeededAws
) -> None:
    planned = await ask(world, user=ALICE, channel=KUMO, text=f"scale {TRAIN} {WORKERS} 33")
    await world.slack.click(user_id=HANA, message=planned, action_id="operation_confirm")
    refusal = await world.slack.wait_for(lambda m: m.ephemeral_to == HANA and "Only <@U0ALICE01>" in m.text)
    assert refusal.kind == "ephemeral" and group_counts(seeded_aws, TRAIN, WORKERS) == (32, 32)
    # A second plan while this one waits would be stale once it ran: refused, pointing at it (issue 21).
    second = await ask(world, user=ADMIN, channel=KUMO, text=f"scale kumo-labs/{TRAIN} {WORKERS} 31")
    assert "already has a plan waiting" in second.text and not [b for b in second.blocks if b["type"] == "actions"]
    clicks = await asyncio.gather(
        world.slack.click(user_id=ALICE, message=planned, action_id="operation_confirm"),
        world.slack.click(user_id=ALICE, message=planned, action_id="operation_confirm"),
    )
    assert all(click.status_code == 200 for click in clicks)
    await finished(world, f"Scaling kumo-labs/{TRAIN}")
    assert group_counts(seeded_aws, TRAIN, WORKERS) == (33, 33)
    # The losing click is answered (its handling is over) before the progress messages are counted.
    await world.slack.wait_for(lambda m: m.ephemeral_to == ALICE and "already" in m.text)
    progress = [m for m in world.slack.messages if m.kind == "message" and m.text.startswith("Scaling")]
    assert len(progress) == 1, "a double click scales once"

    # Plans of different nodes stand side by side; confirmed together, one runs and the other waits its turn.
    one, other = worker_nodes(seeded_aws)[:2]
    mine = await ask(world, user=ALICE, channel=KUMO, text=f"reboot {TRAIN} {one}")
    theirs = await ask(world, user=ADMIN, channel=KUMO, text=f"reboot kumo-labs/{TRAIN} {other}")
    await world.slack.click(user_id=ALICE, message=mine, action_id="operation_confirm")
    await world.slack.wait_for(lambda m: m.kind == "message" and m.text.startswith("Rebooting nodes"))
    await world.slack.click(user_id=ADMIN, message=theirs, action_id="operation_confirm")
    busy = await world.slack.wait_for(lambda m: m.ephemeral_to == ADMIN and "already changing" in m.text)
    assert "Wait until its progress message says done" in busy.text
    await finished(world, f"Rebooting nodes of kumo-labs/{TRAIN}")


async def test_scale_pcluster_queue_up_then_down_through_a_stopped_fleet(world: Sandbox) -> None:
    planned = await ask(world, user=ALICE, channel=KUMO, text=f"scale {DEV} {GPU_QUEUE} 6")
    text = body(planned)
    assert "4 → *6*" in text and "dry run accepted these changes" in text and "MinCount" in text
    done = await confirm_and_wait(world, planned, f"Scaling kumo-labs/{DEV}")
    assert "Done: `UPDATE_COMPLETE`" in done.text and f"{GPU_QUEUE} 6/6" in done.text

    refused = await ask(world, user=ALICE, channel=KUMO, text=f"scale {DEV} {GPU_QUEUE} 2")
    text = body(refused)
    assert "will not shrink" in text and "QueueUpdateStrategy: TERMINATE" in text
    assert "Stop compute fleet" in str(refused.blocks)
    stopped = await confirm_and_wait(world, refused, f"Stopping the compute fleet of kumo-labs/{DEV}")
    assert "Done:" in stopped.text

    planned = await ask(world, user=ALICE, channel=KUMO, text=f"scale {DEV} {GPU_QUEUE} 2")
    assert "6 → *2*" in body(planned)
    done = await confirm_and_wait(world, planned, f"Scaling kumo-labs/{DEV}")
    assert "Done:" in done.text and "compute fleet is stopped" in done.text
    assert not world.pcluster_api.spec_violations, "every request and answer was on the ParallelCluster spec"


async def test_replace_reports_a_partial_failure_and_follows_the_new_node(
    world: Sandbox, seeded_aws: SeededAws
) -> None:
    good, busy = worker_nodes(seeded_aws)[:2]
    set_hyperpod_node_status(ACCOUNT, REGION, TRAIN, busy, "Pending", "rebooting")
    planned = await ask(world, user=ALICE, channel=KUMO, text=f"replace {TRAIN} {good} {busy}")
    assert "wipes the root and secondary volumes" in body(planned)
    done = await confirm_and_wait(world, planned, f"Replacing nodes of kumo-labs/{TRAIN}")
    text = body(done)
    assert "Done:" in done.text
    assert f"Not done*: {busy}: InvalidInstanceStatus" in text
    nodes = worker_nodes(seeded_aws)
    assert good not in nodes and len(nodes) + len(worker_nodes(seeded_aws, "Pending")) >= 32 - 1
    steps = await audit_steps(world)
    assert steps[-1] == ("replace", "done")


async def test_replace_progress_names_the_successor(world: Sandbox, seeded_aws: SeededAws) -> None:
    """The README promises "the old node leaving and its successor joining": the finished progress names both."""
    before = set(worker_nodes(seeded_aws))
    old = sorted(before)[0]
    planned = await ask(world, user=ALICE, channel=KUMO, text=f"replace {TRAIN} {old}")
    done = await confirm_and_wait(world, planned, f"Replacing nodes of kumo-labs/{TRAIN}")
    (new,) = set(worker_nodes(seeded_aws)) - before
    assert "Done:" in done.text and f"`{old}` replaced by `{new}`" in body(done), body(done)


async def test_reboot_brings_the_same_nodes_back(world: Sandbox, seeded_aws: SeededAws) -> None:
    chosen = worker_nodes(seeded_aws)[:2]
    planned = await ask(world, user=ALICE, channel=KUMO, text=f"reboot {TRAIN} {' '.join(chosen)}")
    done = await confirm_and_wait(world, planned, f"Rebooting nodes of kumo-labs/{TRAIN}")
    assert "Done:" in done.text
    assert set(chosen) <= set(worker_nodes(seeded_aws))


async def test_node_ids_not_in_the_cluster_are_refused(world: Sandbox, seeded_aws: SeededAws) -> None:
    before = seeded_aws.state()
    reply = await ask(world, user=ALICE, channel=KUMO, text=f"replace {TRAIN} i-0123456789abcdef0")
    assert "is not a node of `kumo-labs/kumo-p5-train`" in reply.text and "Usage: /cluster replace" in reply.text
    on_pcluster = await ask(world, user=ALICE, channel=KUMO, text=f"reboot {DEV} i-0123456789abcdef0")
    assert "acts on HyperPod nodes" in on_pcluster.text
    assert seeded_aws.state() == before


async def test_delete_needs_the_typed_name(world: Sandbox, seeded_aws: SeededAws) -> None:
    planned = await ask(world, user=ALICE, channel=KUMO, text=f"delete {TRAIN}")
    assert "cannot be undone" in body(planned) and "Delete…" in str(planned.blocks)
    stranger = await world.slack.click(user_id=BOB, message=planned, action_id="delete_open")
    assert stranger.status_code == 200
    await world.slack.wait_for(lambda m: m.ephemeral_to == BOB and "Only <@U0ALICE01>" in m.text)
    # The refusal is the click's last step (a modal would open instead of it), so none can open later.
    assert not world.slack.open_views, "no modal for someone who may not delete"

    # Confirm without the modal (a payload no button of Pitcrew's makes) does not skip the typed name.
    operation_id = planned.blocks[2]["elements"][0]["value"]
    decision = await world.pitcrew.services.operations.confirm(operation_id, user_id=ALICE)
    assert "typing the cluster's name" in decision_reply(decision).text and not decision.replaces
    await world.slack.click(user_id=ALICE, message=planned, action_id="delete_open")
    # The click is acked before views.open reaches Slack: wait (bounded) for the modal to be on screen.
    modal = await world.slack.wait_for_view(user_id=ALICE, callback_id=DELETE_VIEW, timeout=15)
    assert list(world.slack.open_views) == [modal["id"]]
    view_id = modal["id"]
    wrong = await world.slack.submit_view(user_id=ALICE, view_id=view_id, values={"typed_name": {"name": "kumo"}})
    assert wrong.status_code == 200
    shown = world.slack.open_views[view_id]
    assert "Type kumo-p5-train exactly" in shown["errors"]["typed_name"]
    assert TRAIN in {c["ClusterName"] for c in sagemaker(seeded_aws).list_clusters()["ClusterSummaries"]}

    await world.slack.submit_view(user_id=ALICE, view_id=view_id, values={"typed_name": {"name": TRAIN}})
    assert not world.slack.open_views, "a matching name closes the modal"
    done = await finished(world, f"Deleting kumo-labs/{TRAIN}")
    assert "Done:" in done.text
    assert TRAIN not in {c["ClusterName"] for c in sagemaker(seeded_aws).list_clusters()["ClusterSummaries"]}
    steps = await audit_steps(world)
    assert ("delete_confirm", "invalid") in steps and steps[-2:] == [
        ("operation_confirm", "allowed"),
        ("delete", "done"),
    ]


async def test_an_aws_refusal_at_confirm_is_one_clear_message_and_audited(
    world: Sandbox, seeded_aws: SeededAws
) -> None:
    planned = await ask(world, user=ALICE, channel=KUMO, text=f"scale {TRAIN} {WORKERS} 33")
    # Between plan and Confirm, someone changes the cluster outside Pitcrew: it is Updating for a while.
    with hyperpod_progress(60):
        HyperPodBackend(org_id="kumo-labs", sagemaker=sagemaker(seeded_aws)).resize(name=TRAIN, group=WORKERS, count=31)
    failed = await confirm_and_wait(world, planned, f"Scaling kumo-labs/{TRAIN}")
    assert "Failed: AWS refused: AWS said ConflictException" in failed.text
    assert "wait until it is InService" in failed.text and "Traceback" not in body(failed)
    plan_now = await world.slack.wait_for(lambda m: m.ts == planned.ts and "failed" in m.text)
    assert "The scale of `kumo-p5-train` failed" in plan_now.text, "the plan is replaced: no button to press again"
    assert "operation_confirm" not in str(plan_now.blocks)
    await world.pitcrew.services.drain()
    async with world.pitcrew.services.db.session() as session:
        (last, *_) = await crud.audit_entries(session, org_id="kumo-labs")
    assert (last.command, last.outcome) == ("scale", "failed") and "(request " in last.detail


async def test_progress_goes_to_a_dm_when_the_channel_refuses_it(world: Sandbox, seeded_aws: SeededAws) -> None:
    """Review finding: where Pitcrew may not post (a private channel it is not in), progress was lost."""
    planned = await ask(world, user=ALICE, channel=KUMO, text=f"scale {TRAIN} {WORKERS} 33")
    world.slack.fail_next("chat.postMessage", status=500)
    after = len(world.slack.messages)
    await world.slack.click(user_id=ALICE, message=planned, action_id="operation_confirm")
    done = await finished(world, f"Scaling kumo-labs/{TRAIN}", after=after)
    assert done.channel.startswith("D"), "the progress went to the confirmer's DM"
    told = await world.slack.wait_for(lambda m: m.ts == planned.ts and "your DM" in m.text)
    assert "Progress is in your DM with Pitcrew" in told.text
    assert group_counts(seeded_aws, TRAIN, WORKERS) == (33, 33)
