"""/cluster help|list|status|nodes, driven as Slack drives it: signed HTTP requests into `pitcrew serve`'s
app, AWS in a moto server, replies read back from the local Slack."""

from __future__ import annotations

import re

from sandbox.world import Sandbox
from tests.conftest import SeededAws
from tests.scenarios.conftest import ADMIN, COORDINATION, ask, body

ALICE = "U0ALICE01"  # kumo-labs operator
BOB = "U0BOB0001"  # kumo-labs viewer
HANA = "U0HANA001"  # sakura-ai operator
GUEST = "U0GUEST01"  # in no org
KUMO_CHANNEL, SAKURA_CHANNEL = "C0KUMOLAB", "C0SAKURA1"


def org_channel(sandbox: Sandbox, org_id: str) -> str:
    org = sandbox.program.org(org_id)
    assert org is not None
    return org.channel


async def test_admin_lists_every_org_and_cluster(sandbox: Sandbox, seeded_aws: SeededAws) -> None:
    reply = await ask(sandbox, user=ADMIN, channel=COORDINATION, text="list all")
    text = body(reply)
    assert reply.kind == "ephemeral" and reply.via == "response_url"
    for org in sandbox.program.orgs:
        assert f"`{org.id}`" in text
    for cluster in seeded_aws.report.clusters:
        assert f"*{cluster.name}*" in text
    assert "HyperPod" in text and "ParallelCluster" in text
    assert re.search(r"\d+ clusters, \d+ nodes, [1-9]\d* unhealthy", text)
    assert not [call for call in sandbox.slack.calls if call.method == "chat.postMessage"]


async def test_admin_outside_org_channels_defaults_to_all_orgs(sandbox: Sandbox) -> None:
    reply = await ask(sandbox, user=ADMIN, channel=COORDINATION, text="list")
    assert "12 orgs" in reply.text


async def test_list_defaults_to_the_channel_org_or_the_users_own(sandbox: Sandbox) -> None:
    in_own = await ask(sandbox, user=ALICE, channel=KUMO_CHANNEL, text="list")
    assert "kumo-p5-train" in body(in_own) and "sakura" not in body(in_own)
    # In another org's channel the default is still the caller's own org: the channel grants nothing.
    elsewhere = await ask(sandbox, user=ALICE, channel=SAKURA_CHANNEL, text="list")
    assert "kumo-p5-train" in body(elsewhere) and "sakura-trn1-pretrain" not in body(elsewhere)
    admin_in_sakura = await ask(sandbox, user=ADMIN, channel=SAKURA_CHANNEL, text="list")
    assert "sakura-trn1-pretrain" in body(admin_in_sakura) and "kumo-p5-train" not in body(admin_in_sakura)


async def test_list_all_from_a_viewer_is_narrowed(sandbox: Sandbox) -> None:
    reply = await ask(sandbox, user=BOB, channel=KUMO_CHANNEL, text="list all")
    text = body(reply)
    assert "kumo-p5-train" in text and "kumo-p5-dev" in text
    assert "sakura" not in text and "fuji" not in text


async def test_status_of_a_hyperpod_cluster(sandbox: Sandbox, seeded_aws: SeededAws) -> None:
    reply = await ask(sandbox, user=ALICE, channel=KUMO_CHANNEL, text="status kumo-p5-train")
    text = body(reply)
    assert "HyperPod" in text and "`InService`" in text
    assert "worker-group-1" in text and "ml.p5.48xlarge" in text and "32 of 32 instances" in text
    failed = next(u for u in seeded_aws.report.unhealthy if u.cluster == "kumo-p5-train")
    assert failed.node_id in text and "XID 79" in text
    assert "JST" in text  # times in the program's timezone


async def test_status_through_the_parallelcluster_api(sandbox: Sandbox) -> None:
    reply = await ask(sandbox, user=ADMIN, channel=COORDINATION, text="status hikari-compute/hikari-p5-llm")
    text = body(reply)
    assert "ParallelCluster" in text and "CREATE_COMPLETE" in text and "RUNNING" in text  # fleet status
    assert "*1 unhealthy*" in text and "impaired" in text
    assert sandbox.pcluster_api.requests, "the ParallelCluster API was used"


async def test_status_of_a_parallelcluster_seen_only_through_ec2(sandbox: Sandbox) -> None:
    reply = await ask(sandbox, user=ADMIN, channel=COORDINATION, text="status fuji-p5-pretrain")
    text = body(reply)
    assert "ParallelCluster" in text and "no ParallelCluster API" in text
    assert "stopped" in text and "*1 unhealthy*" in text


async def test_nodes_lists_failed_first_and_counts_per_group(sandbox: Sandbox, seeded_aws: SeededAws) -> None:
    reply = await ask(sandbox, user=HANA, channel=SAKURA_CHANNEL, text="nodes sakura-trn1-pretrain")
    text = body(reply)
    assert "17 nodes" in text
    assert "*worker-group-1*: 1 Failure, 15 Running" in text
    node_lines = [line for line in text.splitlines() if "`i-" in line]
    assert len(node_lines) == 17 and "Failure" in node_lines[0]
    failed_only = await ask(sandbox, user=HANA, channel=SAKURA_CHANNEL, text="nodes sakura-trn1-pretrain --failed")
    assert len([line for line in body(failed_only).splitlines() if "`i-" in line]) == 1


async def test_transitional_nodes_are_not_failures(sandbox: Sandbox) -> None:
    reply = await ask(sandbox, user=ADMIN, channel=COORDINATION, text="nodes tsubame-p5-sft --failed")
    assert "No unhealthy nodes" in body(reply)
    everything = await ask(sandbox, user=ADMIN, channel=COORDINATION, text="nodes tsubame-p5-sft")
    assert "*Pending*" in body(everything) and ":large_yellow_circle:" in body(everything)


async def test_public_flag_answers_in_channel(sandbox: Sandbox) -> None:
    reply = await ask(sandbox, user=ALICE, channel=KUMO_CHANNEL, text="status kumo-p5-dev --public")
    assert reply.kind == "message" and reply.ephemeral_to is None
    assert not [call for call in sandbox.slack.calls if call.method == "chat.postMessage"]


async def test_help_shows_only_what_the_caller_may_run(sandbox: Sandbox) -> None:
    viewer = await ask(sandbox, user=BOB, channel=KUMO_CHANNEL, text="help")
    assert "/cluster list" in body(viewer) and "viewer of `kumo-labs`" in body(viewer)
    admin = await ask(sandbox, user=ADMIN, channel=COORDINATION, text="help")
    assert "program admin" in body(admin)
