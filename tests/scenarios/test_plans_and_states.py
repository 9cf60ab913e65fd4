"""Issue 21 items 4 and 5, through the HTTP app against moto, the ParallelCluster API emulator and the local Slack.

"Plans know the world moved": a second plan for what a pending plan covers says so and offers no Confirm; a
plan whose nodes left says so at Confirm and sends nothing; an alert offers no buttons for a node that left.
"States are shown as they are": a stopped compute fleet is shown stopped wherever its cluster is (and can be
started again: a plan with its quota check, Confirm, progress, audited); one colour rule for every view.
"""

from __future__ import annotations

import asyncio
import copy
import re
from typing import Any

from sandbox.moto_support import set_hyperpod_node_status
from sandbox.slack import Message
from sandbox.world import Sandbox
from storage import crud
from storage.models import OperationStatus
from tests.conftest import SeededAws
from tests.scenarios import test_cluster_changes as changes
from tests.scenarios.conftest import ADMIN, COORDINATION, ask, body
from tests.scenarios.test_cluster_changes import (
    ACCOUNT,
    ALICE,
    BOB,
    DEV,
    GPU_QUEUE,
    KUMO,
    REGION,
    TRAIN,
    audit_steps,
    confirm_and_wait,
    sagemaker,
    worker_nodes,
)
from tests.scenarios.test_home import actions, open_home, text_of

# The change scenarios' fixtures: `world` with fast progress, and moto reseeded after (these tests change it).
globals().update(reseed=changes.reseed, world=changes.world)

XID = "GPU XID 79: GPU has fallen off the bus"


def action_ids(message: Message) -> set[str]:
    return {e["action_id"] for b in message.blocks if b["type"] == "actions" for e in b["elements"]}


def now_of(world: Sandbox, message: Message) -> Message:
    return next(m for m in world.slack.messages if m.ts == message.ts and m.channel == message.channel)


async def sweep(world: Sandbox) -> None:
    await world.pitcrew.services.monitor.sweep()
    await world.pitcrew.services.drain()


async def until(check: Any, *, what: str, seconds: float = 15.0) -> None:
    for _ in range(int(seconds / 0.1)):
        if await check():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


# --- item 4: plans know the world moved -----------------------------------------------------------------------


async def test_replace_twice_gives_one_plan_and_a_plan_whose_node_left_sends_nothing(
    world: Sandbox, seeded_aws: SeededAws
) -> None:
    node, other = worker_nodes(seeded_aws)[:2]
    first = await ask(world, user=ALICE, channel=KUMO, text=f"replace {TRAIN} {node}")
    assert "Confirm replace" in str(first.blocks)

    again = await ask(world, user=ALICE, channel=KUMO, text=f"replace {TRAIN} {node}")
    assert again.kind == "ephemeral" and not action_ids(again), "no second Confirm for the same node"
    said = body(again)
    assert "already has a plan waiting for Confirm" in said and f"replace kumo-labs/{TRAIN} {node}" in said, said
    assert f"<@{ALICE}>" in said and "Nothing new was planned" in said
    reboot = await ask(world, user=ALICE, channel=KUMO, text=f"reboot {TRAIN} {other} {node}")
    assert not action_ids(reboot) and "already has a plan waiting" in body(reboot), "a plan naming it too"
    scale = await ask(world, user=ALICE, channel=KUMO, text=f"scale {TRAIN} worker-group-1 33")
    assert not action_ids(scale) and "already has a plan waiting" in body(scale), "nor one of the whole cluster"
    beside = await ask(world, user=ALICE, channel=KUMO, text=f"reboot {TRAIN} {other}")
    assert "Confirm reboot" in str(beside.blocks), "a plan for another node stands beside it"

    # The node leaves by other means (the console, say) before the first plan is confirmed.
    assert sagemaker(seeded_aws).batch_replace_cluster_nodes(ClusterName=TRAIN, NodeIds=[node])["Successful"]

    async def gone() -> bool:
        return node not in worker_nodes(seeded_aws)

    await until(gone, what=f"{node} to leave")
    await world.slack.click(user_id=ALICE, message=first, action_id="operation_confirm")
    answered = await world.slack.wait_for(lambda m: m.ts == first.ts and "Nothing was sent" in m.text)
    assert f"`{node}` is no longer in `kumo-labs/{TRAIN}`" in answered.text
    assert not action_ids(answered), "the plan's buttons are gone"
    assert not [m for m in world.slack.messages if m.text.startswith("Replacing nodes")], "AWS was not asked"
    steps = await audit_steps(world)
    assert ("operation_confirm", "refused") in steps and ("replace", "failed") not in steps
    async with world.pitcrew.services.db.session() as session:
        rows = list(await crud.operations_with_status(session, status=OperationStatus.CANCELLED.value))
    assert [o.request["node_ids"] for o in rows] == [[node]] and rows[0].detail.startswith("not sent: ")

    # Decided: the node can be planned for again (the plan beside it still stands).
    fresh = await ask(world, user=ALICE, channel=KUMO, text=f"replace {TRAIN} {worker_nodes(seeded_aws)[2]}")
    assert "Confirm replace" in str(fresh.blocks)


async def test_an_alerts_replace_pressed_twice_gives_one_plan_and_its_buttons_go_once_the_node_leaves(
    world: Sandbox, seeded_aws: SeededAws
) -> None:
    await sweep(world)  # the seeded failures: opened now, not looked at below
    node = worker_nodes(seeded_aws)[0]
    set_hyperpod_node_status(ACCOUNT, REGION, TRAIN, node, "Failure", XID)
    await sweep(world)
    (alert,) = [m for m in world.slack.channel_messages(KUMO) if node in m.text and m.thread_ts is None]
    assert {"alert_replace", "alert_reboot"} <= action_ids(alert)

    await world.slack.click(user_id=ALICE, message=alert, action_id="alert_replace")
    plan = await world.slack.wait_for(lambda m: "Plan: replace" in m.text and node in m.text)
    await world.slack.click(user_id=ALICE, message=alert, action_id="alert_replace")
    second = await world.slack.wait_for(lambda m: m.ephemeral_to == ALICE and "already has a plan waiting" in m.text)
    assert not action_ids(second)
    await world.pitcrew.services.drain()
    assert [m for m in world.slack.messages if "Plan: replace" in m.text] == [plan], "pressed twice: one plan"
    steps = await audit_steps(world)
    assert steps.count(("alert_replace", "allowed")) == 1 and ("alert_replace", "refused") in steps

    # The node goes (HyperPod replacing it on its own): the alert, still open, offers nothing to act on it.
    before = copy.deepcopy(alert)  # the alert as someone's Slack still shows it (the local Slack edits in place)
    set_hyperpod_node_status(ACCOUNT, REGION, TRAIN, node, "ShuttingDown")
    await sweep(world)
    leaving = now_of(world, alert)
    assert "Recovered" not in leaving.text and "ShuttingDown" in body(leaving), body(leaving)
    assert not {"alert_replace", "alert_reboot"} & action_ids(leaving) and "alert_ack" in action_ids(leaving)
    await world.slack.click(user_id=ALICE, message=before, action_id="alert_replace")
    await world.slack.wait_for(lambda m: m.ephemeral_to == ALICE and "is no longer in" in m.text)

    await world.slack.click(user_id=ALICE, message=plan, action_id="operation_confirm")
    answered = await world.slack.wait_for(lambda m: m.ts == plan.ts and "Nothing was sent" in m.text)
    assert f"`{node}` is no longer in `kumo-labs/{TRAIN}`" in answered.text
    assert not [m for m in world.slack.messages if m.text.startswith("Replacing nodes")], "AWS was not asked"


# --- item 5: states are shown as they are ---------------------------------------------------------------------

ICON = re.compile(r"(:[a-z_]+:) (?:\*([a-z0-9-]+)\*|`([a-z0-9-]+)`) ")


def icons(text: str) -> dict[str, str]:
    """Cluster name -> the icon a view puts before it (`/cluster list`: *name*, the Home and /track doc: `name`)."""
    return {match[2] or match[3]: match[1] for match in ICON.finditer(text)}


def start_buttons(blocks: list[dict[str, Any]]) -> list[str]:
    return [
        e["value"] for b in blocks if b["type"] == "actions" for e in b["elements"] if e["action_id"] == "fleet_start"
    ]


async def stop_the_dev_fleet(world: Sandbox) -> None:
    """As an operator does it: a shrink ParallelCluster refuses while the fleet runs offers Stop compute fleet."""
    offered = await ask(world, user=ALICE, channel=KUMO, text=f"scale {DEV} {GPU_QUEUE} 2")
    stopped = await confirm_and_wait(world, offered, f"Stopping the compute fleet of kumo-labs/{DEV}")
    assert "Done:" in stopped.text
    await sweep(world)  # the clusters as last seen: what the Home and the tracking document show


async def test_one_colour_rule_for_every_cluster_in_the_list_the_home_and_the_doc(world: Sandbox) -> None:
    await sweep(world)
    listed = icons(body(await ask(world, user=ADMIN, channel=COORDINATION, text="list all")))
    home = icons(text_of(await open_home(world, ADMIN)))
    shared = sorted(set(listed) & set(home))
    assert len(shared) >= 5, shared
    assert {name: home[name] for name in shared} == {name: listed[name] for name in shared}
    for org in ("kumo-labs", "fuji-ml", "hikari-compute"):
        doc = icons(body(await ask(world, user=ADMIN, channel=COORDINATION, text=f"doc {org}", command="/track")))
        assert doc and doc == {name: listed[name] for name in doc}, org


async def test_a_stopped_fleet_is_shown_stopped_everywhere_and_started_again_as_any_change(world: Sandbox) -> None:
    await stop_the_dev_fleet(world)
    stopped = (
        f":white_circle: *{DEV}* · ParallelCluster · `CREATE_COMPLETE` · compute fleet stopped · 1/1 nodes healthy"
    )
    listed = await ask(world, user=ALICE, channel=KUMO, text="list")
    assert stopped in body(listed), body(listed)
    assert start_buttons(listed.blocks) == [f"kumo-labs/{DEV}"]
    status = await ask(world, user=ALICE, channel=KUMO, text=f"status {DEV}")
    assert f":white_circle: *{DEV}* · compute fleet *stopped*" in body(status)
    assert start_buttons(status.blocks) == [f"kumo-labs/{DEV}"]
    home = await open_home(world, ALICE)
    assert f":white_circle: `{DEV}` (pcluster) compute fleet stopped · 1/1 nodes healthy" in text_of(home)
    assert ("fleet_start", f"kumo-labs/{DEV}") in actions(home)
    doc = body(await ask(world, user=ALICE, channel=KUMO, text="doc kumo-labs", command="/track"))
    assert f":white_circle: `{DEV}` · ParallelCluster · `CREATE_COMPLETE` · compute fleet stopped" in doc, doc
    # A viewer sees it stopped too, and is offered nothing they could not do.
    for reply in (
        await ask(world, user=BOB, channel=KUMO, text="list"),
        await ask(world, user=BOB, channel=KUMO, text=f"status {DEV}"),
    ):
        assert "stopped" in body(reply) and not start_buttons(reply.blocks)
    assert not [a for a in actions(await open_home(world, BOB)) if a[0] == "fleet_start"]
    refused = await ask(world, user=BOB, channel=KUMO, text=f"start {DEV}")
    assert "viewer" in refused.text and not action_ids(refused)

    # Started from the Home's button: the plan (with what comes back, against quota) in the org's channel.
    await world.slack.click_home(user_id=ALICE, action_id="fleet_start", value=f"kumo-labs/{DEV}")
    plan = await world.slack.wait_for(
        lambda m: m.channel == KUMO and m.text.startswith("Plan: start the compute fleet")
    )
    said = body(plan)
    assert "*4 x p5.48xlarge*" in said and "p5.48xlarge: held 32 + 4 → 36 of 40 allowed" in said, said
    assert {"operation_confirm", "operation_cancel"} == action_ids(plan)
    again = await ask(world, user=ALICE, channel=KUMO, text=f"start {DEV}")
    assert "already has a plan waiting" in again.text and not action_ids(again)
    done = await confirm_and_wait(world, plan, f"Starting the compute fleet of kumo-labs/{DEV}")
    assert "Done:" in done.text and "the compute fleet is running" in done.text, done.text
    running = body(await ask(world, user=ALICE, channel=KUMO, text="list"))
    assert f":large_green_circle: *{DEV}* · ParallelCluster · `CREATE_COMPLETE` · 5/5 nodes healthy" in running, running
    steps = await audit_steps(world)
    assert {("fleet_start", "allowed"), ("operation_confirm", "allowed"), ("start_fleet", "done")} <= set(steps)
    not_stopped = await ask(world, user=ALICE, channel=KUMO, text=f"start {DEV}")
    assert "is not stopped" in not_stopped.text and not action_ids(not_stopped)
    assert not world.pcluster_api.spec_violations


async def test_starting_a_fleet_over_quota_is_refused_with_the_numbers(world: Sandbox, seeded_aws: SeededAws) -> None:
    await stop_the_dev_fleet(world)  # kumo-labs holds 32 p5 (its HyperPod cluster) of 40; starting brings 4 back
    grown = await ask(world, user=ALICE, channel=KUMO, text=f"scale {TRAIN} worker-group-1 37")
    await confirm_and_wait(world, grown, f"Scaling kumo-labs/{TRAIN}")
    status = await ask(world, user=ALICE, channel=KUMO, text=f"status {DEV}")
    await world.slack.click(user_id=ALICE, message=status, action_id="fleet_start")
    refused = await world.slack.wait_for(lambda m: m.ephemeral_to == ALICE and "Over quota" in m.text)
    assert "p5.48xlarge: held 37, requested 4 more, allowed 40" in refused.text and not action_ids(refused)
    dry = await ask(world, user=ALICE, channel=KUMO, text=f"start {DEV} --dry-run")
    assert "held 37, requested 4 more, allowed 40" in dry.text
    assert not [m for m in world.slack.messages if m.text.startswith("Plan: start")]
