"""Edges of the fleet: clusters over 100 nodes, one name in several orgs, orgs that fail or time out,
and the audit log of every command."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bot.clusters.accounts import AwsAccounts
from bot.config import OrgConfig, ProgramConfig
from sandbox.moto_support import set_hyperpod_node_status
from sandbox.pcluster_api import ParallelClusterApi
from sandbox.world import Sandbox
from storage import crud
from storage.models import AuditEntry
from tests.conftest import SeededAws
from tests.scenarios.conftest import ADMIN, COORDINATION, ask, body
from tests.waiting import wait_for

BOB = "U0BOB0001"


def create_hyperpod(accounts: AwsAccounts, program: ProgramConfig, org_id: str, name: str, workers: int) -> Any:
    org = program.org(org_id)
    assert org is not None
    sagemaker = accounts.client(org, "sagemaker")
    group = {
        "InstanceGroupName": "workers",
        "InstanceType": "ml.p5.48xlarge",
        "InstanceCount": workers,
        "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lifecycle/base/", "OnCreate": "on_create.sh"},
        "ExecutionRole": f"arn:aws:iam::{org.aws.account_id}:role/HyperPodExecution",
        "ThreadsPerCore": 1,
    }
    sagemaker.create_cluster(ClusterName=name, InstanceGroups=[group], Tags=[{"Key": "pitcrew:org", "Value": org_id}])
    return sagemaker


@pytest.fixture
def big_cluster(seeded_aws: SeededAws) -> Iterator[list[str]]:
    sagemaker = create_hyperpod(seeded_aws.accounts, seeded_aws.program, "kumo-labs", "kumo-p5-big", 130)
    try:
        pages = sagemaker.get_paginator("list_cluster_nodes").paginate(ClusterName="kumo-p5-big")
        node_ids = [node["InstanceId"] for page in pages for node in page["ClusterNodeSummaries"]]
        set_hyperpod_node_status("111111111111", "us-east-1", "kumo-p5-big", node_ids[117], "Failure", "EFA fault")
        yield node_ids
    finally:
        sagemaker.delete_cluster(ClusterName="kumo-p5-big")


async def test_cluster_over_100_nodes_is_read_whole_and_summarized(sandbox: Sandbox, big_cluster: list[str]) -> None:
    assert len(set(big_cluster)) == 130  # moto's repeated NextToken past 100 nodes is fixed in the test support
    reply = await ask(sandbox, user=ADMIN, channel=COORDINATION, text="nodes kumo-labs/kumo-p5-big")
    text = body(reply)
    assert "130 nodes" in text and "129/130 nodes healthy" in text
    assert "*workers*: 1 Failure, 129 Running" in text
    assert "only unhealthy nodes are listed" in text
    assert [line for line in text.splitlines() if "`i-" in line] == [
        line for line in text.splitlines() if big_cluster[117] in line
    ]
    assert len(reply.blocks) <= 50
    listed = await ask(sandbox, user=ADMIN, channel=COORDINATION, text="list kumo-labs")
    assert "129/130 nodes healthy" in body(listed)


@pytest.fixture
def same_name_in_two_orgs(seeded_aws: SeededAws) -> Iterator[None]:
    clients = [
        create_hyperpod(seeded_aws.accounts, seeded_aws.program, org, "shared-name", 2)
        for org in ("kumo-labs", "sakura-ai")
    ]
    try:
        yield
    finally:
        for client in clients:
            client.delete_cluster(ClusterName="shared-name")


async def test_a_name_in_several_visible_orgs_asks_which(sandbox: Sandbox, same_name_in_two_orgs: None) -> None:
    reply = await ask(sandbox, user=ADMIN, channel=COORDINATION, text="status shared-name")
    assert "`kumo-labs/shared-name`" in body(reply) and "`sakura-ai/shared-name`" in body(reply)
    chosen = await ask(sandbox, user=ADMIN, channel=COORDINATION, text="status sakura-ai/shared-name")
    assert "sakura-ai/shared-name" in body(chosen) and "HyperPod" in body(chosen)
    # A viewer who sees only one of them gets it, with no hint that the other exists.
    viewer = await ask(sandbox, user=BOB, channel=COORDINATION, text="status shared-name")
    assert "kumo-labs/shared-name" in body(viewer) and "sakura" not in body(viewer)


def _kumo_api_in_wrong_account(program: ProgramConfig) -> ProgramConfig:
    """kumo-labs's ParallelCluster API URL points into another account, whose API refuses kumo's role."""

    def other_account(org: OrgConfig) -> dict[str, Any]:
        if org.id != "kumo-labs" or not org.aws.parallelcluster_api:
            return {}
        base = org.aws.parallelcluster_api.split("/pcluster/")[0]
        return {"parallelcluster_api": ParallelClusterApi.api_url(base, "222222222222", org.aws.region)}

    return program.with_aws(other_account)


async def test_one_orgs_failure_is_a_line_not_a_failed_command(sandbox_factory: Any) -> None:
    async with sandbox_factory(program_transform=_kumo_api_in_wrong_account) as world:
        await world.pitcrew.ready.wait()
        reply = await ask(world, user=ADMIN, channel=COORDINATION, text="list all")
    text = body(reply)
    kumo = text.split("(`kumo-labs`)")[1].split("(`sakura-ai`)")[0]
    assert "kumo-p5-train" in kumo  # HyperPod still read
    # The API in another account refuses kumo's role: said as what to do, never as AWS's error body.
    assert ":warning: could not read: ParallelCluster: Pitcrew's role in kumo-labs lacks execute-api:Invoke" in kumo
    assert "resource policy admits the role" in kumo
    assert "sakura-trn1-pretrain" in text and "kaze-trn1-train" in text


async def test_slow_orgs_time_out_as_lines(sandbox_factory: Any) -> None:
    async with sandbox_factory(settings_overrides={"pitcrew_org_timeout": 0.001}) as world:
        await world.pitcrew.ready.wait()
        reply = await ask(world, user=ADMIN, channel=COORDINATION, text="list all")
    text = body(reply)
    assert text.count("could not read: timed out") == 12
    assert "12 orgs" in reply.text


async def test_every_command_is_audited(sandbox: Sandbox) -> None:
    await ask(sandbox, user=ADMIN, channel=COORDINATION, text="list sakura-ai")
    await ask(sandbox, user=BOB, channel="C0KUMOLAB", text="list sakura-ai")
    await ask(sandbox, user=BOB, channel="C0KUMOLAB", text="frobnicate")
    await ask(sandbox, user="U0GUEST01", channel="C0KUMOLAB", text="list all")

    async def four_rows() -> list[AuditEntry] | None:
        async with sandbox.pitcrew.services.db.session() as session:
            found = await crud.audit_entries(session)
        return found if len(found) >= 4 else None

    entries = await wait_for(four_rows, what="4 audit rows")  # each is written just after its reply is sent
    got = [(e.user_id, e.org_id, e.text, e.outcome) for e in reversed(entries)]
    assert got == [
        (ADMIN, "sakura-ai", "list sakura-ai", "allowed"),
        (BOB, "sakura-ai", "list sakura-ai", "refused"),
        (BOB, "kumo-labs", "frobnicate", "invalid"),  # bad input: the org it was typed for
        ("U0GUEST01", None, "list all", "refused"),
    ]
    async with sandbox.pitcrew.services.db.session() as session:
        seen = await crud.clusters_seen(session, org_id="sakura-ai")
    assert [(row.name, row.backend, row.nodes_total) for row in seen] == [("sakura-trn1-pretrain", "hyperpod", 17)]


def _sora_moves_into_yamas_account(program: ProgramConfig) -> ProgramConfig:
    """sora-multimodal and yama-bio share account 777777777777 in us-west-2: the pitcrew:org tag decides."""
    shared = {"account_id": "777777777777", "role_arn": "arn:aws:iam::777777777777:role/PitcrewOps"}
    return program.with_aws(lambda org: shared if org.id == "sora-multimodal" else {})


async def test_orgs_sharing_an_account_see_only_their_tagged_clusters(sandbox_factory: Any) -> None:
    async with sandbox_factory(program_transform=_sora_moves_into_yamas_account) as world:
        await world.pitcrew.ready.wait()
        listing = await ask(world, user=ADMIN, channel=COORDINATION, text="list all")
        sora_operator = await ask(world, user="U0DAIKI01", channel="C0SORAMM1", text="status yama-p5-protein")
        yama_operator = await ask(world, user="U0EMI0001", channel="C0SORAMM1", text="status yama-p5-protein")
    text = body(listing)
    sora = text.split("(`sora-multimodal`)")[1].split("(`mori-finance`)")[0]
    yama = text.split("(`yama-bio`)")[1].split("(`nami-speech`)")[0]
    assert "yama-p5-protein" in yama and "yama-p5-protein" not in sora and "_no clusters_" in sora
    assert "No cluster `yama-p5-protein`" in body(sora_operator)
    assert "yama-bio/yama-p5-protein" in body(yama_operator)
