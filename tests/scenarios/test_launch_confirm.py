"""Launch for real: plan in the channel, Confirm by the requester or an admin starts it exactly once,
the progress message is edited until the cluster is up, and a restarted bot resumes watching."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterator
from typing import Any

import pytest

from sandbox.moto_support import advance_hyperpod, hyperpod_progress
from sandbox.slack import Message
from sandbox.world import Sandbox
from storage import crud
from tests.conftest import SeededAws
from tests.scenarios.conftest import ADMIN, ask

ALICE, BOB, HANA = "U0ALICE01", "U0BOB0001", "U0HANA001"
KUMO = "C0KUMOLAB"
LAUNCH = (
    "launch hyperpod-p5 {name} --count 2 "
    "--param execution_role_arn=arn:aws:iam::111111111111:role/SageMakerHyperPodExecutionRole "
    "--param lifecycle_s3_uri=s3://sagemaker-kumo-labs-lifecycle/base-config/"
)


@pytest.fixture
def cleanup(seeded_aws: SeededAws) -> Iterator[list[str]]:
    """Names of HyperPod clusters a test created in kumo-labs, deleted afterwards (moto is shared)."""
    names: list[str] = []
    yield names
    org = seeded_aws.program.org("kumo-labs")
    assert org is not None
    sagemaker = seeded_aws.accounts.client(org, "sagemaker")
    existing = {c["ClusterName"] for c in sagemaker.list_clusters()["ClusterSummaries"]}
    for name in names:
        if name in existing:
            sagemaker.delete_cluster(ClusterName=name)


def kumo_clusters(seeded_aws: SeededAws) -> list[str]:
    from moto.sagemaker.models import sagemaker_backends

    return sorted(sagemaker_backends["111111111111"]["us-east-1"].clusters)


def progress_messages(world: Sandbox, name: str) -> list[Message]:
    return [
        m
        for m in world.slack.messages
        if m.kind == "message" and f"kumo-labs/{name}" in m.text and "Launching" in m.text
    ]


async def plan(world: Sandbox, name: str) -> Message:
    reply = await ask(world, user=ALICE, channel=KUMO, text=LAUNCH.format(name=name))
    assert reply.kind == "message", "a plan to change a cluster is shown in the channel"
    assert "Confirm launch" in str(reply.blocks)
    return reply


async def test_confirm_launches_once_and_edits_progress_to_done(
    sandbox: Sandbox, seeded_aws: SeededAws, cleanup: list[str]
) -> None:
    cleanup.append("kumo-new")
    planned = await plan(sandbox, "kumo-new")
    assert "kumo-new" not in kumo_clusters(seeded_aws)  # nothing before Confirm
    clicks = await asyncio.gather(
        *(sandbox.slack.click(user_id=ALICE, message=planned, action_id="operation_confirm") for _ in range(2))
    )
    assert all(click.status_code == 200 for click in clicks)
    done = await sandbox.slack.wait_for(
        lambda m: "Launching kumo-labs/kumo-new" in m.text and "Done: `InService`" in m.text, timeout=15
    )
    assert len(progress_messages(sandbox, "kumo-new")) == 1 and done.edits >= 1
    assert kumo_clusters(seeded_aws).count("kumo-new") == 1
    # The second click was told, and started nothing (its answer may follow the Done edit: wait for it).
    await sandbox.slack.wait_for(lambda m: m.ephemeral_to == ALICE and "already running" in m.text)
    assert len(progress_messages(sandbox, "kumo-new")) == 1
    await sandbox.pitcrew.services.drain()
    async with sandbox.pitcrew.services.db.session() as session:
        entries = await crud.audit_entries(session, org_id="kumo-labs")
    steps = [(e.command, e.outcome) for e in reversed(entries)]
    assert steps == [("/cluster", "allowed"), ("operation_confirm", "allowed"), ("launch", "done")]


@pytest.mark.parametrize(("clicker", "reason"), [(HANA, "Only <@U0ALICE01>"), (BOB, "Only <@U0ALICE01>")])
async def test_others_cannot_confirm(sandbox: Sandbox, seeded_aws: SeededAws, clicker: str, reason: str) -> None:
    planned = await plan(sandbox, "kumo-nope")
    before = seeded_aws.state()
    await sandbox.slack.click(user_id=clicker, message=planned, action_id="operation_confirm")
    refusal = await sandbox.slack.wait_for(lambda m: m.ephemeral_to == clicker and "Only" in m.text)
    assert reason in refusal.text
    assert seeded_aws.state() == before and not progress_messages(sandbox, "kumo-nope")
    stale = copy.deepcopy(planned)  # a client still showing the buttons after the plan was decided
    cancelled = await sandbox.slack.click(user_id=ALICE, message=planned, action_id="operation_cancel")
    assert cancelled.status_code == 200
    await sandbox.slack.wait_for(lambda m: "cancelled" in m.text and "kumo-nope" in m.text)
    await sandbox.slack.click(user_id=ADMIN, message=stale, action_id="operation_confirm")
    late = await sandbox.slack.wait_for(lambda m: m.ephemeral_to == ADMIN and "already" in m.text)
    assert "already cancelled" in late.text
    assert seeded_aws.state() == before


async def test_a_restarted_bot_resumes_watching_and_never_creates_twice(
    sandbox_factory: Any, seeded_aws: SeededAws, cleanup: list[str]
) -> None:
    cleanup.append("kumo-slow")
    with hyperpod_progress(60, create_seconds=60):  # the cluster stays Creating until advanced
        async with sandbox_factory() as first:
            await first.pitcrew.ready.wait()
            planned = await plan(first, "kumo-slow")
            await first.slack.click(user_id=ALICE, message=planned, action_id="operation_confirm")
            await first.slack.wait_for(lambda m: "kumo-slow" in m.text and "Creating" in m.text, timeout=15)
            slack = first.slack
        # The bot is gone; the cluster is still Creating. A new bot on the same database and workspace:
        async with sandbox_factory(slack=slack) as second:
            await second.pitcrew.ready.wait()
            advance_hyperpod("111111111111", "us-east-1", "kumo-slow")
            second.pitcrew.services.operations.first_poll = 0.1
            done = await slack.wait_for(lambda m: "kumo-slow" in m.text and "Done: `InService`" in m.text, timeout=20)
    assert len(progress_messages(second, "kumo-slow")) == 1 and done.edits >= 2
    assert kumo_clusters(seeded_aws).count("kumo-slow") == 1


@pytest.mark.parametrize("value", ["", "no-such-operation", "x" * 3000, "'; DROP TABLE operations; --"])
async def test_a_tampered_button_value_changes_nothing(sandbox: Sandbox, seeded_aws: SeededAws, value: str) -> None:
    planned = await plan(sandbox, "kumo-tamper")
    before = seeded_aws.state()
    response = await sandbox.slack.click(user_id=ALICE, message=planned, action_id="operation_confirm", value=value)
    assert response.status_code == 200
    answer = await sandbox.slack.wait_for(lambda m: m.ephemeral_to == ALICE and "not known" in m.text)
    assert "Traceback" not in answer.text
    assert seeded_aws.state() == before and not progress_messages(sandbox, "kumo-tamper")
