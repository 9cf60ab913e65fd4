"""Slack's Web API unreachable when a command arrives (Bolt's auth.test cannot be made): the command is still
audited and its user told through the response URL, which Slack serves apart from the Web API."""

from __future__ import annotations

from typing import Any

from storage import crud
from tests.scenarios.conftest import ask, body
from tests.waiting import wait_for

ALICE, KUMO = "U0ALICE01", "C0KUMOLAB"


async def test_a_command_while_the_web_api_is_unreachable_is_audited_and_answered(sandbox_factory: Any) -> None:
    # Port 9 (discard) refuses connections: every Web API call fails, response URLs still work.
    async with sandbox_factory(settings_overrides={"slack_api_url": "http://127.0.0.1:9/api/"}) as world:
        await world.pitcrew.ready.wait()
        reply = await ask(world, user=ALICE, channel=KUMO, text="status kumo-p5-train")
        assert "internal error" not in body(reply) and "could not" in body(reply)
        services = world.pitcrew.services

        async def audited() -> list[Any] | None:
            await services.drain()
            async with services.db.session() as session:
                rows = await crud.audit_entries(session)
            return rows or None

        rows = await wait_for(audited, what="the command's audit row")
        assert [(row.user_id, row.text) for row in rows] == [(ALICE, "status kumo-p5-train")]
