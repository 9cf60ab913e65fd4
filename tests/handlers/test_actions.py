"""Button listeners called directly, with the `block_actions` payload the local Slack builds for the click."""

from __future__ import annotations

from handlers.actions.operations import cancel_callback
from handlers.actions.track import open_track_modal_callback
from sandbox.world import Sandbox
from tests.handlers.conftest import LOGGER, Ack, context
from tests.scenarios.conftest import ask, body

ALICE, BOB, KUMO = "U0ALICE01", "U0BOB0001", "C0KUMOLAB"
LAUNCH = (
    "launch hyperpod-p5 kumo-handler-test --count 2 "
    "--param execution_role_arn=arn:aws:iam::111111111111:role/SageMakerHyperPodExecutionRole "
    "--param lifecycle_s3_uri=s3://sagemaker-kumo-labs-lifecycle/base-config/"
)


async def test_cancel_acks_and_replaces_the_plan(sandbox: Sandbox, ack: Ack) -> None:
    planned = await ask(sandbox, user=ALICE, channel=KUMO, text=LAUNCH)
    click = sandbox.slack.click_payload(user_id=ALICE, message=planned, action_id="operation_cancel")
    await cancel_callback(ack=ack, body=click, context=context(sandbox))
    assert ack.calls == [{}]
    cancelled = await sandbox.slack.wait_for(lambda m: "cancelled" in m.text and "kumo-handler-test" in m.text)
    assert cancelled.ts == planned.ts, "the plan's message itself now says cancelled"
    assert "Confirm" not in body(cancelled)


async def test_add_a_record_opens_the_form_for_an_operator_and_refuses_a_viewer(sandbox: Sandbox, ack: Ack) -> None:
    home = await ask(sandbox, user=ALICE, channel=KUMO, text="", command="/track")
    click = sandbox.slack.click_payload(user_id=ALICE, message=home, action_id="track_add")
    await open_track_modal_callback(ack=ack, body=click, context=context(sandbox), logger=LOGGER)
    assert ack.calls == [{}]
    view = await sandbox.slack.wait_for_view(user_id=ALICE, callback_id="track_add_record")
    assert view["type"] == "modal"

    viewer_home = await ask(sandbox, user=BOB, channel=KUMO, text="", command="/track")
    assert "track_add" not in str(viewer_home.blocks), "a viewer is not offered the button"
    # A button a viewer presses anyway (an operator's /track shared with them, an older message): refused.
    click = sandbox.slack.click_payload(user_id=BOB, message=home, action_id="track_add")
    await open_track_modal_callback(ack=ack, body=click, context=context(sandbox), logger=LOGGER)
    assert ack.calls == [{}, {}]
    refusal = await sandbox.slack.wait_for(lambda m: m.ephemeral_to == BOB and "not write" in m.text)
    assert refusal and not sandbox.slack.user_views(BOB)
