"""The onboarding templates against moto with IAM enforcement on: with the operate tier every command, button and
monitor that touches the org works; with the read tier every read works and every change is refused with one
sentence naming the missing permission and the tier to deploy (never "internal error"), changes nothing, and is
audited as refused. Every call Pitcrew made is a call of the table."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import pytest

from bot.iam import actions
from bot.monitor.cloudwatch import CloudWatchPull
from bot.monitor.events import EventQueue
from bot.slack.blocks import DELETE_VIEW
from sandbox.moto_support import set_hyperpod_node_status
from sandbox.slack import Message
from sandbox.world import Sandbox
from storage import crud
from tests.conftest import SeededAws
from tests.iam.conftest import IamAws, enforced_world
from tests.scenarios.conftest import ADMIN, ask, body

ALICE = "U0ALICE01"
KUMO = "C0KUMOLAB"
ACCOUNT, REGION = "111111111111", "us-east-1"
TRAIN, DEV = "kumo-p5-train", "kumo-p5-dev"  # HyperPod, 32 x p5; ParallelCluster (with its API), 4 x p5
WORKERS, GPU_QUEUE = "worker-group-1", "compute-gpu"
LAUNCH = "launch hyperpod-p5 kumo-iam --count 2"  # the rest from kumo-labs's launch defaults
PROBLEMS = ("lacks", "refused", "AWS error", "AWS said", "unreachable", "could not", "Could not", "errors")
OPERATE = "deploy the operate tier (`pitcrew onboard kumo-labs --tier operate`)"


def workers(status: str = "Running") -> list[str]:
    from moto.sagemaker.models import sagemaker_backends

    cluster = sagemaker_backends[ACCOUNT][REGION].clusters[TRAIN]
    return sorted(
        node.instance_id
        for node in list(cluster.nodes.values())
        if node.instance_group_name == WORKERS and node.status == status
    )


async def confirm(world: Sandbox, planned: Message, starts: str) -> Message:
    after = len(world.slack.messages)
    response = await world.slack.click(user_id=ALICE, message=planned, action_id="operation_confirm")
    assert response.status_code == 200
    return await finished(world, starts, after)


async def finished(world: Sandbox, starts: str, after: int) -> Message:
    return await world.slack.wait_for(
        lambda m: (
            m.kind == "message"
            and m.text.startswith(starts)
            and any(word in m.text for word in ("Done:", "Failed:", "Refused:"))
            and m in world.slack.messages[after:]
        ),
        timeout=30,
    )


async def delete_through_the_modal(world: Sandbox, cluster: str) -> Message:
    planned = await ask(world, user=ALICE, channel=KUMO, text=f"delete {cluster}")
    after = len(world.slack.messages)
    await world.slack.click(user_id=ALICE, message=planned, action_id="delete_open")
    modal = await world.slack.wait_for_view(user_id=ALICE, callback_id=DELETE_VIEW, timeout=15)
    await world.slack.submit_view(user_id=ALICE, view_id=modal["id"], values={"typed_name": {"name": cluster}})
    return await finished(world, f"Deleting kumo-labs/{cluster}", after)


async def audit(world: Sandbox) -> list[tuple[str, str]]:
    await world.pitcrew.services.drain()
    async with world.pitcrew.services.db.session() as session:
        entries = await crud.audit_entries(session, org_id="kumo-labs")
    return [(entry.command, entry.outcome) for entry in reversed(entries)]


def never_internal(world: Sandbox) -> None:
    for message in world.slack.messages:
        text = body(message)
        assert "internal error" not in text.lower() and "Traceback" not in text, text
        assert "<?xml" not in text and "ErrorResponse" not in text, f"an AWS error body was shown: {text}"


async def every_read(world: Sandbox, caplog: pytest.LogCaptureFixture) -> None:
    """Each read command, the node sweep, reserved capacity, the CloudWatch pull and the events queue."""
    listed = await ask(world, user=ALICE, channel=KUMO, text="list")
    assert TRAIN in body(listed) and DEV in body(listed) and not [w for w in PROBLEMS if w in body(listed)]
    for text in (f"status {TRAIN}", f"nodes {TRAIN}", f"status {DEV}", f"nodes {DEV} --failed", "capacity"):
        reply = await ask(world, user=ALICE, channel=KUMO, text=text)
        assert not [word for word in PROBLEMS if word in body(reply)], (text, body(reply))
    everyone = await ask(world, user=ADMIN, channel="C0PROGRAM", text="list all")
    assert TRAIN in body(everyone)
    services = world.pitcrew.services
    report = await services.monitor.sweep()
    assert report.skipped_orgs == () and report.clusters == 2
    assert services.capacity is not None
    await services.capacity.reservations("kumo-labs")
    pull = CloudWatchPull(db=services.db, accounts=services.fleet._accounts, program=world.program)
    with caplog.at_level(logging.WARNING, logger="bot.monitor.cloudwatch"):
        await pull.pull()
    assert not [r for r in caplog.records if "CloudWatch throughput pull" in r.getMessage()], caplog.text
    queue_url = world.program.monitor.event_queue_url
    assert queue_url is not None
    queue = EventQueue(sqs=services.fleet._accounts.home_client("sqs", REGION), queue_url=queue_url, wait_seconds=0)
    _send_event(queue_url)
    received = queue.receive()
    assert [r.hint.cluster_name for r in received if r.hint] == [TRAIN]
    queue.delete([r.receipt_handle for r in received])


def _send_event(queue_url: str) -> None:
    """An EventBridge event on the queue, put there in-process (enforcement would refuse moto's default keys)."""
    from moto.sqs.models import sqs_backends

    event = {
        "version": "0",
        "id": "11111111-2222-3333-4444-555555555555",
        "detail-type": "SageMaker HyperPod Cluster State Change",
        "source": "aws.sagemaker",
        "account": ACCOUNT,
        "region": REGION,
        "time": "2026-12-01T00:00:00Z",
        "resources": [],
        "detail": {
            "ClusterName": TRAIN,
            "ClusterStatus": "InService",
            "ClusterArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/kumo0train",
        },
    }
    sqs_backends["123456789012"][REGION].send_message(queue_url.rsplit("/", 1)[-1], json.dumps(event))


def calls_in_the_table(iam_aws: IamAws) -> None:
    made = set(iam_aws.calls)
    assert made, "the recorder saw Pitcrew's calls"
    assert made <= actions.calls(), f"calls the table (bot/iam/actions.py) lacks: {made - actions.calls()}"


async def test_operate_tier_reads(
    sandbox_factory: Callable[..., Any], iam_aws: IamAws, caplog: pytest.LogCaptureFixture
) -> None:
    async with enforced_world(sandbox_factory, iam_aws, tier="operate") as world:
        await every_read(world, caplog)
        never_internal(world)
    calls_in_the_table(iam_aws)


async def test_operate_tier_changes_hyperpod(sandbox_factory: Callable[..., Any], iam_aws: IamAws) -> None:
    async with enforced_world(sandbox_factory, iam_aws, tier="operate") as world:
        planned = await ask(world, user=ALICE, channel=KUMO, text=f"scale {TRAIN} {WORKERS} 33")
        done = await confirm(world, planned, f"Scaling kumo-labs/{TRAIN}")
        assert "Done:" in done.text, body(done)
        first, second = workers()[:2]
        planned = await ask(world, user=ALICE, channel=KUMO, text=f"reboot {TRAIN} {first}")
        assert "Done:" in (await confirm(world, planned, f"Rebooting nodes of kumo-labs/{TRAIN}")).text
        # The Replace button of a node alert: the same plan and Confirm as the command.
        set_hyperpod_node_status(ACCOUNT, REGION, TRAIN, second, "Failure", "XID 79")
        await world.pitcrew.services.monitor.sweep()
        alert = await world.slack.wait_for(lambda m: second in m.text and m.channel == KUMO and m.thread_ts is None)
        await world.slack.click(user_id=ALICE, message=alert, action_id="alert_replace")
        planned = await world.slack.wait_for(lambda m: "Confirm replace" in str(m.blocks) and second in body(m))
        assert "Done:" in (await confirm(world, planned, f"Replacing nodes of kumo-labs/{TRAIN}")).text
        planned = await ask(world, user=ALICE, channel=KUMO, text=LAUNCH)
        assert "Done:" in (await confirm(world, planned, "Launching kumo-labs/kumo-iam")).text
        assert "Done:" in (await delete_through_the_modal(world, "kumo-iam")).text
        steps = await audit(world)
        assert not [step for step in steps if step[1] in ("refused", "failed")], steps
        assert [s for s in steps if s[0] in ("scale", "reboot", "replace", "launch", "delete")] == [
            ("scale", "done"),
            ("reboot", "done"),
            ("replace", "done"),
            ("launch", "done"),
            ("delete", "done"),
        ]
        never_internal(world)
    calls_in_the_table(iam_aws)


async def test_operate_tier_changes_parallelcluster(sandbox_factory: Callable[..., Any], iam_aws: IamAws) -> None:
    async with enforced_world(sandbox_factory, iam_aws, tier="operate") as world:
        planned = await ask(world, user=ALICE, channel=KUMO, text=f"scale {DEV} {GPU_QUEUE} 5")
        assert "dry run accepted" in body(planned), body(planned)
        assert "Done:" in (await confirm(world, planned, f"Scaling kumo-labs/{DEV}")).text
        shrink = await ask(world, user=ALICE, channel=KUMO, text=f"scale {DEV} {GPU_QUEUE} 2")
        assert "Stop compute fleet" in str(shrink.blocks), body(shrink)
        assert "Done:" in (await confirm(world, shrink, f"Stopping the compute fleet of kumo-labs/{DEV}")).text
        assert "Done:" in (await delete_through_the_modal(world, DEV)).text
        assert not world.pcluster_api.spec_violations
        never_internal(world)
    calls_in_the_table(iam_aws)


async def test_read_tier_reads(
    sandbox_factory: Callable[..., Any], iam_aws: IamAws, caplog: pytest.LogCaptureFixture
) -> None:
    async with enforced_world(sandbox_factory, iam_aws, tier="read") as world:
        await every_read(world, caplog)
        never_internal(world)
    calls_in_the_table(iam_aws)


async def test_read_tier_refuses_every_change_naming_the_permission(
    sandbox_factory: Callable[..., Any], iam_aws: IamAws, seeded_aws: SeededAws
) -> None:
    async with enforced_world(sandbox_factory, iam_aws, tier="read") as world:
        before = seeded_aws.state()
        node = workers()[0]
        refused: list[tuple[str, str]] = []
        for text, starts, action in (
            (f"scale {TRAIN} {WORKERS} 33", f"Scaling kumo-labs/{TRAIN}", "sagemaker:UpdateCluster"),
            (f"reboot {TRAIN} {node}", f"Rebooting nodes of kumo-labs/{TRAIN}", "sagemaker:BatchRebootClusterNodes"),
            (f"replace {TRAIN} {node}", f"Replacing nodes of kumo-labs/{TRAIN}", "sagemaker:BatchReplaceClusterNodes"),
            (LAUNCH, "Launching kumo-labs/kumo-iam", "sagemaker:CreateCluster"),
        ):
            planned = await ask(world, user=ALICE, channel=KUMO, text=text)
            done = await confirm(world, planned, starts)
            sentence = f"Pitcrew's role in kumo-labs lacks {action}; {OPERATE}"
            assert f"Refused: {sentence}" in body(done), body(done)
            answer = await world.slack.wait_for(lambda m, p=planned: m.ts == p.ts and "was refused" in m.text)
            assert sentence in answer.text and "operation_confirm" not in str(answer.blocks)
            refused.append((text.split()[0], "refused"))
        deleted = await delete_through_the_modal(world, TRAIN)
        assert f"Refused: Pitcrew's role in kumo-labs lacks sagemaker:DeleteCluster; {OPERATE}" in body(deleted)
        # ParallelCluster asks its dry run at plan time: the refusal comes before any button.
        reply = await ask(world, user=ALICE, channel=KUMO, text=f"scale {DEV} {GPU_QUEUE} 5")
        lacks = "Pitcrew's role in kumo-labs lacks execute-api:Invoke on its ParallelCluster API"
        assert body(reply).startswith(f"{lacks}; {OPERATE}"), body(reply)
        assert "operation_confirm" not in str(reply.blocks)
        assert seeded_aws.state() == before, "nothing changed"
        steps = await audit(world)
        changes = [s for s in steps if s[0] in ("scale", "reboot", "replace", "launch", "delete")]
        assert changes == [*refused, ("delete", "refused")]
        assert steps[-1] == ("/cluster", "refused")  # the ParallelCluster scale, refused at its plan
        never_internal(world)
    calls_in_the_table(iam_aws)


def test_a_refusal_names_the_action_from_the_call_when_the_message_does_not() -> None:
    """Real SageMaker says AccessDeniedException with the action in its message; moto's XML body reaches botocore
    as code "403"; either way the sentence names the permission, and the body is never shown."""
    from botocore.exceptions import ClientError

    from bot.clusters.fleet import describe_error
    from bot.iam.denied import translated

    real = ClientError(
        {
            "Error": {
                "Code": "AccessDeniedException",
                "Message": "User: arn:aws:sts::1:assumed-role/PitcrewOps/s is not authorized to perform: "
                "sagemaker:UpdateCluster on resource: arn:aws:sagemaker:us-east-1:1:cluster/abc because no "
                "identity-based policy allows the sagemaker:UpdateCluster action",
            },
            "ResponseMetadata": {"HTTPStatusCode": 400},
        },
        "UpdateCluster",
    )
    bare = ClientError({"Error": {"Code": "403", "Message": "<?xml ...>"}}, "BatchReplaceClusterNodes")
    read = ClientError({"Error": {"Code": "UnauthorizedOperation", "Message": ""}}, "DescribeInstances")
    assume = ClientError({"Error": {"Code": "AccessDenied", "Message": "..."}}, "AssumeRole")
    said = [describe_error(translated("kumo-labs", e, change=True)) for e in (real, bare, read, assume)]
    assert said[0] == f"Pitcrew's role in kumo-labs lacks sagemaker:UpdateCluster; {OPERATE}"
    assert said[1] == f"Pitcrew's role in kumo-labs lacks sagemaker:BatchReplaceClusterNodes; {OPERATE}"
    assert said[2].startswith("Pitcrew's role in kumo-labs lacks ec2:DescribeInstances, which every tier grants")
    assert said[3].startswith("Pitcrew cannot assume its role in kumo-labs")
    assert all("<?xml" not in line for line in said)
