"""One-line launches and the launch form, through the HTTP app against moto and the local Slack.

The example program gives every org launch defaults (orgs[].launch: execution role, lifecycle scripts, subnet,
security group), so `/cluster launch hyperpod-p5 NAME --count 16` needs nothing else; `--param` overrides. The
form (`/cluster launch` alone, or the Home tab's Launch…) is prefilled from them, shows what is wrong under the
field, and leads to the same plan and Confirm. A confirmed plan keeps its request, quota and cost, says who
confirmed it, and the progress follows it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from sqlmodel import select

from bot.config import ProgramConfig
from sandbox.world import Sandbox
from storage import crud
from storage.models import Operation
from tests.conftest import SeededAws
from tests.scenarios.conftest import ADMIN, COORDINATION, ask, body
from tests.waiting import wait_for

ALICE, BOB, HANA = "U0ALICE01", "U0BOB0001", "U0HANA001"
KUMO, SAKURA = "C0KUMOLAB", "C0SAKURA1"


def _quota_for_these_launches(program: ProgramConfig) -> ProgramConfig:
    """sakura-ai may hold P5 and fuji-ml Trainium: an accelerator an org's quota does not list has quota 0."""
    more = {"sakura-ai": {"p5.48xlarge": 16}, "fuji-ml": {"trn1.32xlarge": 8}}
    orgs = [o.model_copy(update={"quota": {**o.quota, **more.get(o.id, {})}}) for o in program.orgs]
    return program.model_copy(update={"orgs": orgs})


@pytest.fixture
async def sandbox(sandbox_factory: Callable[..., Any]) -> AsyncIterator[Sandbox]:
    async with sandbox_factory(program_transform=_quota_for_these_launches) as world:
        await world.pitcrew.ready.wait()
        await world.pitcrew.services.drain()
        yield world


@pytest.fixture
def created(seeded_aws: SeededAws) -> Iterator[list[tuple[str, str]]]:
    """(org, name) of HyperPod clusters a test created, deleted afterwards (moto is shared by the session)."""
    names: list[tuple[str, str]] = []
    yield names
    for org_id, name in names:
        org = seeded_aws.program.org(org_id)
        assert org is not None
        sagemaker = seeded_aws.accounts.client(org, "sagemaker")
        if name in {c["ClusterName"] for c in sagemaker.list_clusters()["ClusterSummaries"]}:
            sagemaker.delete_cluster(ClusterName=name)


async def operations(world: Sandbox, name: str) -> list[Operation]:
    async with world.pitcrew.services.db.session() as session:
        rows = (await session.exec(select(Operation).where(Operation.cluster_name == name))).all()
    return list(rows)


def inputs(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {b["block_id"]: b["element"] for b in view["blocks"] if b.get("type") == "input"}


async def test_a_one_line_launch_takes_the_orgs_defaults_and_confirmed_stays_readable(
    sandbox: Sandbox, created: list[tuple[str, str]]
) -> None:
    created.append(("sakura-ai", "sakura-p5"))
    plan = await ask(sandbox, user=HANA, channel=SAKURA, text="launch hyperpod-p5 sakura-p5 --count 16")
    text = body(plan)
    assert plan.kind == "message" and "Confirm launch" in str(plan.blocks), text
    assert "arn:aws:iam::222222222222:role/SageMakerHyperPodExecutionRole" in text
    assert "s3://sagemaker-sakura-ai-lifecycle/base-config/" in text and '"InstanceCount": 16' in text
    assert "p5.48xlarge: held 0 + 16 → 16 of 16 allowed" in text and "/hour" in text
    await sandbox.slack.click(user_id=HANA, message=plan, action_id="operation_confirm")
    await sandbox.slack.wait_for(lambda m: "Launching sakura-ai/sakura-p5" in m.text and "Done" in m.text, timeout=20)
    confirmed = next(m for m in sandbox.slack.messages if m.ts == plan.ts)
    shown = body(confirmed)
    # The plan is still there to read, with who confirmed it, and no buttons left to press.
    assert "Quota before → after" in shown and "/hour" in shown and "create_cluster request" in shown
    assert f"Confirmed by <@{HANA}>" in shown and "Confirm launch" not in str(confirmed.blocks)
    progress = next(m for m in sandbox.slack.messages if "Launching sakura-ai/sakura-p5" in m.text)
    assert float(progress.ts) > float(plan.ts), "the progress comes after the plan, not in its place"


async def test_param_overrides_a_default(sandbox: Sandbox) -> None:
    plan = await ask(
        sandbox,
        user=ALICE,
        channel=KUMO,
        text="launch hyperpod-p5 kumo-over --count 1 --dry-run --param lifecycle_s3_uri=s3://sagemaker-kumo-x/y/",
    )
    assert "s3://sagemaker-kumo-x/y/" in body(plan) and "sagemaker-kumo-labs-lifecycle" not in body(plan)


def without_launch_defaults(program: ProgramConfig) -> ProgramConfig:
    return program.model_copy(update={"orgs": [o.model_copy(update={"launch": {}}) for o in program.orgs]})


async def test_a_missing_parameter_says_which_and_both_ways_to_set_it(sandbox_factory: Callable[..., Any]) -> None:
    async with sandbox_factory(program_transform=without_launch_defaults) as world:
        await world.pitcrew.ready.wait()
        refused = await ask(world, user=ALICE, channel=KUMO, text="launch hyperpod-p5 kumo-bare --count 1")
    text = body(refused)
    assert "execution_role_arn is required" in text and "Plan:" not in text
    assert "`--param execution_role_arn=VALUE`" in text and "orgs[].launch.execution_role_arn" in text


async def test_the_form_shows_a_bad_field_under_it_then_plans_once(sandbox: Sandbox, seeded_aws: SeededAws) -> None:
    opened = await ask(sandbox, user=ALICE, channel=KUMO, text="launch")
    assert opened.kind == "ephemeral" and "launch form" in opened.text
    view = await sandbox.slack.wait_for_view(user_id=ALICE, callback_id="launch_form")
    fields = inputs(view)
    assert fields["template"]["initial_option"]["value"] == "hyperpod-p5"
    role = "arn:aws:iam::111111111111:role/SageMakerHyperPodExecutionRole"
    assert fields["param_execution_role_arn"]["initial_value"] == role  # prefilled from the org's defaults
    assert fields["count"]["initial_value"] == "4"  # the template's default
    before = seeded_aws.state()
    view_id = view["id"]
    bad = {"name": {"value": "kumo-form"}, "count": {"value": "2"}, "param_subnet_id": {"value": "subnet-zz"}}
    await sandbox.slack.submit_view(user_id=ALICE, view_id=view_id, values=bad)
    errors = sandbox.slack.open_views[view_id]["errors"]
    assert list(errors) == ["param_subnet_id"] and "subnet_id must look like subnet-" in errors["param_subnet_id"]
    await sandbox.slack.submit_view(
        user_id=ALICE, view_id=view_id, values={"name": {"value": "kumo-form"}, "count": {"value": "lots"}}
    )
    assert "whole number" in sandbox.slack.open_views[view_id]["errors"]["count"]
    await sandbox.slack.submit_view(
        user_id=ALICE, view_id=view_id, values={"name": {"value": "kumo-p5-train"}, "count": {"value": "2"}}
    )
    assert "already has a HyperPod cluster" in sandbox.slack.open_views[view_id]["errors"]["name"]
    await sandbox.slack.submit_view(
        user_id=ALICE, view_id=view_id, values={"name": {"value": "kumo-form"}, "count": {"value": "5"}}
    )
    assert "Over quota" in sandbox.slack.open_views[view_id]["errors"]["count"]
    assert await operations(sandbox, "kumo-form") == [] and seeded_aws.state() == before
    good = {"name": {"value": "kumo-form"}, "count": {"value": "2"}, "param_subnet_id": {"value": ""}}
    good["param_security_group_id"] = {"value": ""}  # both cleared: the org's defaults fill them again
    await sandbox.slack.submit_view(user_id=ALICE, view_id=view_id, values=good)
    assert view_id not in sandbox.slack.open_views, "a good submission closes the form"
    plan = await sandbox.slack.wait_for(lambda m: "Plan: kumo-form from hyperpod-p5" in str(m.blocks))
    assert plan.channel == KUMO and plan.kind == "message" and "Confirm launch" in str(plan.blocks)
    assert "p5.48xlarge: held 36 + 2 → 38 of 40 allowed" in body(plan) and role in body(plan)
    (stored,) = await operations(sandbox, "kumo-form")
    assert stored.status == "planned" and stored.requested_by == ALICE and stored.channel_id == KUMO
    assert seeded_aws.state() == before  # nothing before Confirm
    await sandbox.pitcrew.services.drain()
    async with sandbox.pitcrew.services.db.session() as session:
        entries = await crud.audit_entries(session, org_id="kumo-labs")
    steps = [(e.command, e.outcome) for e in reversed(entries) if e.command == "launch_form"]
    assert steps == [("launch_form", "invalid")] * 2 + [("launch_form", "refused")] * 2 + [("launch_form", "allowed")]


async def test_the_form_shows_every_bad_field_at_once(sandbox: Sandbox, seeded_aws: SeededAws) -> None:
    await ask(sandbox, user=ALICE, channel=KUMO, text="launch")
    view = await sandbox.slack.wait_for_view(user_id=ALICE, callback_id="launch_form")
    before = seeded_aws.state()
    bad = {
        "name": {"value": "-not a name-"},
        "count": {"value": "lots"},
        "param_subnet_id": {"value": "subnet-zz"},
        "param_security_group_id": {"value": "sg-?"},
    }
    await sandbox.slack.submit_view(user_id=ALICE, view_id=view["id"], values=bad)
    errors = sandbox.slack.open_views[view["id"]]["errors"]
    assert set(errors) == {"name", "count", "param_subnet_id", "param_security_group_id"}, errors
    assert "HyperPod cluster names are" in errors["name"] and "whole number" in errors["count"]
    assert "subnet_id must look like subnet-" in errors["param_subnet_id"]
    assert "security_group_id must" in errors["param_security_group_id"]
    assert await operations(sandbox, "-not a name-") == [] and seeded_aws.state() == before


async def test_choosing_another_template_shows_its_parameters(sandbox: Sandbox) -> None:
    await ask(sandbox, user=ALICE, channel=KUMO, text="launch")
    view = await sandbox.slack.wait_for_view(user_id=ALICE, callback_id="launch_form")
    values = {"template": {"value": "pcluster-p5-efa"}, "name": {"value": "kumo-pc"}, "count": {"value": "1"}}
    await sandbox.slack.submit_view(user_id=ALICE, view_id=view["id"], values=values)
    shown = sandbox.slack.user_views(ALICE)[-1]
    fields = inputs(shown)
    assert "param_os" in fields and "param_execution_role_arn" not in fields
    assert fields["param_subnet_id"]["initial_value"] == "subnet-01111111111110a1b"
    assert fields["name"]["initial_value"] == "kumo-pc" and fields["count"]["initial_value"] == "1"


async def test_a_viewer_gets_no_form(sandbox: Sandbox) -> None:
    refused = await ask(sandbox, user=BOB, channel=KUMO, text="launch")
    assert "operator" in body(refused) and not sandbox.slack.user_views(BOB)


async def test_the_home_tabs_launch_button_opens_the_form_for_its_org(sandbox: Sandbox) -> None:
    await sandbox.slack.open_home(user_id=ALICE)
    await wait_for(lambda: sandbox.slack.home_views.get(ALICE), what="Alice's Home")
    response = await sandbox.slack.click_home(user_id=ALICE, action_id="launch_open", value="kumo-labs")
    assert response.status_code == 200
    view = await sandbox.slack.wait_for_view(user_id=ALICE, callback_id="launch_form")
    assert '"org_id": "kumo-labs"' in view["private_metadata"]


async def test_an_admin_names_the_org_and_the_plan_goes_where_the_form_was_opened(sandbox: Sandbox) -> None:
    told = await ask(sandbox, user=ADMIN, channel=COORDINATION, text="launch")
    assert "`/cluster launch --org ORG` opens its launch form" in body(told) and not sandbox.slack.user_views(ADMIN)
    await ask(sandbox, user=ADMIN, channel=COORDINATION, text="launch --org fuji-ml")
    view = await sandbox.slack.wait_for_view(user_id=ADMIN, callback_id="launch_form")
    assert inputs(view)["param_execution_role_arn"]["initial_value"].startswith("arn:aws:iam::333333333333:")
    values = {"name": {"value": "fuji-full"}, "count": {"value": "1"}}
    await sandbox.slack.submit_view(user_id=ADMIN, view_id=view["id"], values=values)
    # fuji-ml holds all 24 of its P5 quota: over quota, said under the count.
    assert "Over quota: p5.48xlarge: held 24" in sandbox.slack.open_views[view["id"]]["errors"]["count"]
    values = {"template": {"value": "hyperpod-trn1"}, "name": {"value": "fuji-trn"}, "count": {"value": "2"}}
    await sandbox.slack.submit_view(user_id=ADMIN, view_id=view["id"], values=values)  # shows trn1's parameters
    await sandbox.slack.submit_view(user_id=ADMIN, view_id=view["id"], values={"name": {"value": "fuji-trn"}})
    plan = await sandbox.slack.wait_for(lambda m: "Plan: fuji-trn from hyperpod-trn1" in str(m.blocks))
    assert plan.channel == COORDINATION and "Confirm launch" in str(plan.blocks)
