"""The launch form's submission listener called directly, with the `view_submission` payload the local Slack
builds: a retried submission (the same view) proposes one launch and posts one plan; a bad field is answered
with `errors` under it and stores nothing."""

from __future__ import annotations

from sqlmodel import select

from handlers.views.launch import launch_submission_callback
from sandbox.world import Sandbox
from storage.models import Operation
from tests.handlers.conftest import LOGGER, Ack, context
from tests.scenarios.conftest import ask

ALICE, KUMO = "U0ALICE01", "C0KUMOLAB"


async def open_form(world: Sandbox) -> str:
    await ask(world, user=ALICE, channel=KUMO, text="launch")
    view = await world.slack.wait_for_view(user_id=ALICE, callback_id="launch_form")
    return str(view["id"])


async def launches(world: Sandbox, name: str) -> list[Operation]:
    async with world.pitcrew.services.db.session() as session:
        return list((await session.exec(select(Operation).where(Operation.cluster_name == name))).all())


async def test_a_retried_submission_proposes_one_launch_and_posts_one_plan(sandbox: Sandbox, ack: Ack) -> None:
    view_id = await open_form(sandbox)
    values = {"name": {"value": "kumo-retry"}, "count": {"value": "1"}}
    submission = sandbox.slack.submission_payload(user_id=ALICE, view_id=view_id, values=values)
    await launch_submission_callback(ack=ack, body=submission, context=context(sandbox), logger=LOGGER)
    await launch_submission_callback(ack=ack, body=submission, context=context(sandbox), logger=LOGGER)
    assert ack.calls == [{}, {}], "a plain ack closes the form"
    await sandbox.pitcrew.services.drain()
    plans = [m for m in sandbox.slack.messages if "Plan: kumo-retry from hyperpod-p5" in str(m.blocks)]
    assert len(plans) == 1 and plans[0].channel == KUMO
    (stored,) = await launches(sandbox, "kumo-retry")
    assert f'"value": "{stored.id}"' in str(plans[0].blocks).replace("'", '"')


async def test_a_bad_parameter_is_answered_under_its_field(sandbox: Sandbox, ack: Ack) -> None:
    view_id = await open_form(sandbox)
    values = {"name": {"value": "kumo-bad"}, "count": {"value": "1"}, "param_lifecycle_s3_uri": {"value": "s3://x/"}}
    submission = sandbox.slack.submission_payload(user_id=ALICE, view_id=view_id, values=values)
    await launch_submission_callback(ack=ack, body=submission, context=context(sandbox), logger=LOGGER)
    (answer,) = ack.calls
    assert answer["response_action"] == "errors"
    assert list(answer["errors"]) == ["param_lifecycle_s3_uri"]
    assert "lifecycle_s3_uri must look like s3://sagemaker-" in answer["errors"]["param_lifecycle_s3_uri"]
    assert await launches(sandbox, "kumo-bad") == []
