"""Modal submission listeners called directly, with the `view_submission` payload the local Slack builds."""

from __future__ import annotations

from sqlmodel import select

from handlers.views.track import track_submission_callback
from sandbox.world import Sandbox
from storage.models import TrackRecord
from tests.handlers.conftest import LOGGER, Ack, context
from tests.scenarios.conftest import ask

ALICE, KUMO = "U0ALICE01", "C0KUMOLAB"


async def open_form(world: Sandbox) -> str:
    home = await ask(world, user=ALICE, channel=KUMO, text="", command="/track")
    await world.slack.click(user_id=ALICE, message=home, action_id="track_add")
    view = await world.slack.wait_for_view(user_id=ALICE, callback_id="track_add_record")
    return str(view["id"])


def typed(text: str) -> dict[str, dict[str, str]]:
    return {"kind": {"kind": "lesson"}, "org": {"org": "kumo-labs"}, "text": {"text": text}}


async def records(world: Sandbox) -> list[TrackRecord]:
    async with world.pitcrew.services.db.session() as session:
        return list((await session.exec(select(TrackRecord))).all())


async def test_an_empty_record_is_answered_with_errors_under_the_field(sandbox: Sandbox, ack: Ack) -> None:
    view_id = await open_form(sandbox)
    submission = sandbox.slack.submission_payload(user_id=ALICE, view_id=view_id, values=typed("   "))
    await track_submission_callback(ack=ack, body=submission, context=context(sandbox), logger=LOGGER)
    (answer,) = ack.calls
    assert answer["response_action"] == "errors" and "Say what to record" in answer["errors"]["text"]
    assert await records(sandbox) == []


async def test_a_record_is_stored_once_and_confirmed_in_the_channel(sandbox: Sandbox, ack: Ack) -> None:
    view_id = await open_form(sandbox)
    submission = sandbox.slack.submission_payload(user_id=ALICE, view_id=view_id, values=typed("EFA self-rule"))
    await track_submission_callback(ack=ack, body=submission, context=context(sandbox), logger=LOGGER)
    await track_submission_callback(ack=ack, body=submission, context=context(sandbox), logger=LOGGER)  # a retry
    assert ack.calls == [{}, {}], "a plain ack closes the modal"
    await sandbox.slack.wait_for(lambda m: "EFA self-rule" in m.text and m.channel == KUMO)
    (stored,) = await records(sandbox)
    assert (stored.kind, stored.org_id, stored.request_key) == ("lesson", "kumo-labs", view_id)
