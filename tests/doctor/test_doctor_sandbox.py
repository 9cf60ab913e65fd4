"""`pitcrew doctor` against the sandbox: every org OK (once each has an ingest token, as onboarding gives it), twelve
orgs checked quickly, the CLI's lines and exit code, `/cluster doctor` for admins only, and the Home showing an org
whose last run failed."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.clusters.accounts import AwsAccounts
from bot.iam.doctor import PROGRAM, DoctorReport, Status, checkup
from bot.ingest.tokens import create_token
from sandbox.world import BOT_TOKEN, Sandbox
from storage import crud
from tests.scenarios.conftest import ADMIN, ask, body

ALICE = "U0ALICE01"
KUMO, SAKURA = "C0KUMOLAB", "C0SAKURA1"
ROOT = Path(__file__).resolve().parents[2]
TWELVE_ORGS_SECONDS = 30.0  # wall clock, so room for a loaded 2-core machine (a CI run beside another); printed


async def onboarded(world: Sandbox) -> None:
    """An ingest token for each org without a CloudWatch source, as `pitcrew token create` makes them."""
    for org in world.program.orgs:
        if org.throughput is None:
            await create_token(world.pitcrew.services.db, org_id=org.id, created_by="test")


async def run(world: Sandbox, org_ids: list[str] | None = None) -> DoctorReport:
    services = world.pitcrew.services
    return await checkup(
        program=world.program, accounts=AwsAccounts(), db=services.db, slack=services.poster.client, org_ids=org_ids
    )


def check(report: DoctorReport, org_id: str, name: str) -> Any:
    org = next(o for o in report.orgs if o.org_id == org_id)
    return next(c for c in org.checks if c.name == name)


async def test_every_org_of_the_sandbox_is_ok_and_twelve_orgs_are_quick(sandbox: Sandbox) -> None:
    await onboarded(sandbox)
    report = await run(sandbox)
    assert report.ok, "\n".join(report.lines())
    assert [o.org_id for o in report.orgs] == [PROGRAM, *(org.id for org in sandbox.program.orgs)]
    assert len(sandbox.program.orgs) == 12
    print(f"\npitcrew doctor, 12 orgs against the sandbox: {report.seconds:.2f} s (fresh sessions)")  # noqa: T201
    assert report.seconds < TWELVE_ORGS_SECONDS
    kumo = next(o for o in report.orgs if o.org_id == "kumo-labs")
    names = [c.name for c in kumo.checks]
    assert names[0] == "role" and "sagemaker:UpdateCluster" in names and "execute-api PUT /v3/clusters/*" in names
    assert check(report, "kumo-labs", "sagemaker:CreateCluster").status is Status.NOTE  # said, not probed
    assert check(report, "kumo-labs", "channel").detail == "#kumo-labs"
    assert not sandbox.pcluster_api.spec_violations, "the probes' requests are on the ParallelCluster spec"
    async with sandbox.pitcrew.services.db.session() as session:
        stored = await crud.doctor_results(session)
    assert len(stored) == 13 and all(row.ok for row in stored)


async def test_the_command_prints_a_line_per_org_and_check_and_exits_0(sandbox: Sandbox, tmp_path: Path) -> None:
    """The real `pitcrew doctor`, in its own process, against the sandbox's AWS, ParallelCluster API and Slack."""
    await onboarded(sandbox)
    program = tmp_path / "program.yml"
    program.write_text(yaml.safe_dump(sandbox.program.model_dump(mode="json", exclude_none=True), sort_keys=False))
    env = {
        **os.environ,
        "PITCREW_CONFIG": str(program),
        "DATABASE_URL": sandbox.pitcrew.services.settings.database_url,
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_API_URL": sandbox.slack.api_url,
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "doctor",
        env=env,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    lines = out.decode().splitlines()
    assert process.returncode == 0, out.decode() + err.decode()
    assert lines[-1].startswith("12 orgs checked in ") and lines[-1].endswith("every check passed")
    assert any(line.split()[:3] == ["kumo-labs", "sagemaker:ListClusters", "OK"] for line in lines)
    assert any(line.split()[:3] == ["umi-lang", "channel", "OK"] for line in lines)
    print(f"\n`pitcrew doctor` (a new process, 12 orgs): {lines[-1]}")  # noqa: T201

    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "doctor",
        "--org",
        "nobody",
        env=env,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 1 and out == b"" and err.decode().startswith("unknown org 'nobody'")


async def test_cluster_doctor_is_for_admins_and_names_what_is_wrong(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    await onboarded(sandbox)
    refused = await ask(sandbox, user=ALICE, channel=KUMO, text="doctor")
    assert "admin" in body(refused).lower() and "Doctor:" not in body(refused)
    without_pitcrew(sandbox, monkeypatch, SAKURA)
    reply = await ask(sandbox, user=ADMIN, channel="C0PROGRAM", text="doctor")
    text = body(reply)
    assert "Doctor: 12 orgs checked" in text and "1 with problems" in text, text
    assert "`sakura-ai`: 1 problem" in text and "Pitcrew is not in #sakura-ai: /invite @Pitcrew there" in text
    assert reply.kind == "ephemeral" and reply.ephemeral_to == ADMIN
    bad = await ask(sandbox, user=ADMIN, channel="C0PROGRAM", text="doctor nobody")
    assert "There is no org `nobody`" in body(bad)
    usage = await ask(sandbox, user=ADMIN, channel="C0PROGRAM", text="doctor a b")
    assert "takes at most one org" in body(usage) and "Usage: /cluster doctor [ORG]" in usage.text


def without_pitcrew(world: Sandbox, monkeypatch: pytest.MonkeyPatch, channel: str) -> None:
    """Pitcrew removed from `channel` (someone took the app out of it): conversations.info says is_member false."""
    shown = world.slack._channel_json

    def channel_json(asked: str) -> dict[str, Any]:
        answer = dict(shown(asked))
        return {**answer, "is_member": False} if asked == channel else answer

    monkeypatch.setattr(world.slack, "_channel_json", channel_json)


def test_tags_of_a_cluster_that_does_not_exist_answer_not_found(sandbox: Sandbox) -> None:
    """The sandbox's moto answers the doctor's AddTags/ListTags probes as AWS does (sandbox/moto_support.py, gap (i)),
    not with a 500."""
    from botocore.exceptions import ClientError

    org = sandbox.program.org("kumo-labs")
    assert org is not None
    sagemaker = AwsAccounts().client(org, "sagemaker")
    arn = "arn:aws:sagemaker:us-east-1:111111111111:cluster/nothere"
    for call in (
        lambda: sagemaker.list_tags(ResourceArn=arn),
        lambda: sagemaker.add_tags(ResourceArn=arn, Tags=[{"Key": "k", "Value": "v"}]),
    ):
        with pytest.raises(ClientError) as raised:
            call()
        assert raised.value.response["Error"]["Code"] == "ResourceNotFound"
