"""Each injected fault named with its fix, against moto with IAM enforcement on and the roles `pitcrew onboard`
prints: a wrong ExternalId, a removed permission (a change of the operate tier, a read of either), and the read tier
itself (said, not a failure). The bot missing from a channel: tests/doctor/test_doctor_sandbox.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from bot.config import ProgramConfig
from bot.iam.doctor import Doctor, DoctorReport, Status
from sandbox.world import Sandbox
from tests.iam.conftest import IamAws, enforced_world

ROLE = "arn:aws:iam::111111111111:role/PitcrewOps"


def lines_of(report: DoctorReport, org_id: str = "kumo-labs") -> dict[str, tuple[Status, str]]:
    org = next(o for o in report.orgs if o.org_id == org_id)
    return {check.name: (check.status, check.detail) for check in org.checks}


async def doctor(world: Sandbox, iam_aws: IamAws, program: ProgramConfig | None = None) -> DoctorReport:
    services = world.pitcrew.services
    return await Doctor(
        program=program or world.program, accounts=iam_aws.accounts(), slack=services.poster.client
    ).run()


def without(action: str, policy: str) -> None:
    """The org's admin removes one action from the role's policy (in moto's state: enforcement is on)."""
    from moto.iam.models import iam_backends

    role = iam_backends["111111111111"]["aws"].get_role_by_arn(ROLE)
    document = json.loads(role.policies[policy])
    for statement in document["Statement"]:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        statement["Action"] = [a for a in actions if a != action]
    document["Statement"] = [s for s in document["Statement"] if s["Action"]]
    role.policies[policy] = json.dumps(document)


async def test_the_operate_tier_passes_every_check(sandbox_factory: Callable[..., Any], iam_aws: IamAws) -> None:
    async with enforced_world(sandbox_factory, iam_aws, tier="operate") as world:
        report = await doctor(world, iam_aws)
        assert report.ok, "\n".join(report.lines())
        found = lines_of(report)
        assert found["role"] == (Status.OK, f"assumed {ROLE}")
        assert (
            found["sagemaker:UpdateCluster"][0] is Status.OK
            and found["execute-api DELETE /v3/clusters/*"][0] is Status.OK
        )
        assert lines_of(report, "program")["events queue"][0] is Status.OK  # Pitcrew's own credentials read it


async def test_a_wrong_external_id_is_named_with_its_fix(sandbox_factory: Callable[..., Any], iam_aws: IamAws) -> None:
    async with enforced_world(sandbox_factory, iam_aws, tier="operate") as world:
        wrong = world.program.with_aws(lambda org: {"external_id": "not-the-one"} if org.id == "kumo-labs" else {})
        report = await doctor(world, iam_aws, wrong)
        assert not report.ok
        status, detail = lines_of(report)["role"]
        assert status is Status.FAIL
        assert detail.startswith(f"cannot assume {ROLE}: a wrong ExternalId (the program file says `not-the-one`)")
        assert "pitcrew onboard kumo-labs --principal arn:aws:iam::123456789012:user/pitcrew" in detail
        assert lines_of(report)["permissions"] == (Status.NOTE, "not checked: the role cannot be assumed")


async def test_a_removed_change_permission_is_named_with_the_tier_to_deploy(
    sandbox_factory: Callable[..., Any], iam_aws: IamAws
) -> None:
    async with enforced_world(sandbox_factory, iam_aws, tier="operate") as world:
        without("sagemaker:UpdateCluster", "pitcrew-operate")
        report = await doctor(world, iam_aws)
        assert not report.ok
        problems = [c for o in report.orgs for c in o.problems]
        assert [(c.name, c.detail) for c in problems] == [
            (
                "sagemaker:UpdateCluster",
                "Pitcrew's role in kumo-labs lacks sagemaker:UpdateCluster; deploy the operate tier "
                "(`pitcrew onboard kumo-labs --tier operate`)",
            )
        ]


async def test_the_read_tier_is_said_and_a_removed_read_is_named(
    sandbox_factory: Callable[..., Any], iam_aws: IamAws
) -> None:
    async with enforced_world(sandbox_factory, iam_aws, tier="read") as world:
        report = await doctor(world, iam_aws)
        assert report.ok, "\n".join(report.lines())
        found = lines_of(report)
        assert found["changes"][0] is Status.NOTE and found["changes"][1].startswith("read tier: launch, scale")
        assert "sagemaker:UpdateCluster" not in found  # said once, as the tier
        without("sagemaker:ListClusterNodes", "pitcrew-read")
        report = await doctor(world, iam_aws)
        assert [(c.name, c.detail) for o in report.orgs for c in o.problems] == [
            (
                "sagemaker:ListClusterNodes",
                "Pitcrew's role in kumo-labs lacks sagemaker:ListClusterNodes, which every tier grants; deploy its "
                "template again (`pitcrew onboard kumo-labs`)",
            )
        ]
        assert "Traceback" not in "\n".join(report.lines())
