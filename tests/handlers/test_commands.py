"""Slash-command listeners called directly: they ack empty and answer once through the response URL."""

from __future__ import annotations

from handlers.commands.cluster import cluster_command_callback
from handlers.commands.track import track_command_callback
from sandbox.slack import Message
from sandbox.world import Sandbox
from tests.handlers.conftest import LOGGER, Ack, context
from tests.scenarios.conftest import ADMIN, COORDINATION, body

ALICE, GUEST, KUMO = "U0ALICE01", "U0GUEST01", "C0KUMOLAB"


async def replies_to(world: Sandbox, user: str, before: int) -> list[Message]:
    await world.pitcrew.services.drain()
    return [m for m in world.slack.messages[before:] if m.user == world.slack.bot_user_id and m.ephemeral_to == user]


async def test_cluster_list_acks_empty_and_answers_with_the_fleet(sandbox: Sandbox, ack: Ack) -> None:
    before = len(sandbox.slack.messages)
    command = sandbox.slack.slash_command_form(user_id=ADMIN, channel_id=COORDINATION, command="/cluster", text="list")
    await cluster_command_callback(ack=ack, command=command, context=context(sandbox), logger=LOGGER)
    assert ack.calls == [{}]
    (reply,) = await replies_to(sandbox, ADMIN, before)
    assert "kumo-labs" in body(reply)


async def test_a_stranger_is_refused_and_nothing_else_is_said(sandbox: Sandbox, ack: Ack) -> None:
    before = len(sandbox.slack.messages)
    command = sandbox.slack.slash_command_form(user_id=GUEST, channel_id=KUMO, command="/cluster", text="list")
    await cluster_command_callback(ack=ack, command=command, context=context(sandbox), logger=LOGGER)
    assert ack.calls == [{}]
    (reply,) = await replies_to(sandbox, GUEST, before)
    assert "not a member" in body(reply).lower() or "not part of" in body(reply).lower(), body(reply)


async def test_track_with_bad_input_gets_its_usage(sandbox: Sandbox, ack: Ack) -> None:
    before = len(sandbox.slack.messages)
    command = sandbox.slack.slash_command_form(user_id=ALICE, channel_id=KUMO, command="/track", text="show --weeks 99")
    await track_command_callback(ack=ack, command=command, context=context(sandbox), logger=LOGGER)
    assert ack.calls == [{}]
    (reply,) = await replies_to(sandbox, ALICE, before)
    assert "--weeks" in body(reply)
