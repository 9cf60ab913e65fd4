"""The App Home end to end: app_home_opened delivered by the local Slack to Pitcrew over HTTP (signed as Slack
signs it), the Home each role is shown through views.publish, its buttons, and its refresh after a change.

People of the sandbox program: an admin, kumo-labs' operator (Alice) and viewer (Bob), and a guest of no org."""

from __future__ import annotations

from typing import Any

from sandbox.world import Sandbox
from tests.scenarios.conftest import ADMIN
from tests.waiting import wait_for

ALICE, BOB, GUEST = "U0ALICE01", "U0BOB0001", "U0GUEST01"
KUMO = "C0KUMOLAB"


def text_of(view: dict[str, Any]) -> str:
    parts: list[str] = []
    for block in view["blocks"]:
        if isinstance(block.get("text"), dict):
            parts.append(block["text"]["text"])
        for element in block.get("elements", []):
            text = element.get("text", "") if isinstance(element, dict) else ""
            parts.append(text["text"] if isinstance(text, dict) else text)
    return "\n".join(parts)


def actions(view: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (e["action_id"], e.get("value", ""))
        for b in view["blocks"]
        if b["type"] == "actions"
        for e in b["elements"]
    ]


async def open_home(world: Sandbox, user: str) -> dict[str, Any]:
    before = world.slack.home_views.get(user, {}).get("id")
    response = await world.slack.open_home(user_id=user)
    assert response.status_code == 200, response.text

    def published() -> dict[str, Any] | None:
        view = world.slack.home_views.get(user)
        return view if view is not None and view["id"] != before else None

    return await wait_for(published, what=f"the Home of {user}")


async def test_an_admin_sees_every_org_in_one_view_within_100_blocks(sandbox: Sandbox) -> None:
    view = await open_home(sandbox, ADMIN)
    text = text_of(view)
    assert len(view["blocks"]) <= 100
    assert "Admin view, every org" in text
    assert f"*{len(sandbox.program.orgs)} orgs*" in text
    for org in sandbox.program.orgs:
        assert f"`{org.id}`" in text
    assert not any(action_id == "launch_open" for action_id, _ in actions(view))
