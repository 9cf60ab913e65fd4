"""Scenario fixtures: a seeded moto server for the session, and per test the sandbox world
(local Slack + ParallelCluster API emulator) with Pitcrew served over real HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from sandbox.slack import Message
from sandbox.world import Sandbox, run_sandbox
from tests.conftest import SeededAws, migrated_sqlite

ADMIN = "U0ADMIN01"
COORDINATION = "C0PROGRAM"


@pytest.fixture
def sandbox_factory(seeded_aws: SeededAws, sqlite_template: Path, tmp_path: Path) -> Callable[..., Any]:
    def make(**kwargs: Any) -> Any:
        # A copy of the session's migrated database, made at the test's first start (a restart keeps its rows).
        path = tmp_path / "pitcrew.db"
        if "database_url" not in kwargs:
            kwargs["database_url"] = f"sqlite+aiosqlite:///{path}"
            if not path.exists():
                migrated_sqlite(sqlite_template, path)
        kwargs.setdefault("accounts", seeded_aws.accounts)  # sessions built once, as in a long-lived bot
        kwargs.setdefault("post_interval", 0.0)  # no pacing: tests need not wait a second per post
        return run_sandbox(**kwargs)

    return make


@pytest.fixture
async def sandbox(sandbox_factory: Callable[..., Any]) -> AsyncIterator[Sandbox]:
    async with sandbox_factory() as world:
        await world.pitcrew.ready.wait()
        await world.pitcrew.services.drain()  # AWS sessions warmed up before the test looks at anything
        yield world


async def ask(world: Sandbox, *, user: str, channel: str, text: str, command: str = "/cluster") -> Message:
    """Type a command as `user` in `channel`; return the bot's one reply, checking there is only one."""
    before = len(world.slack.messages)
    response = await world.slack.send_command(user_id=user, channel_id=channel, command=command, text=text)
    assert response.status_code == 200, response.text
    assert not response.content, "ack carries no text: one command gets one reply message"

    def is_reply(message: Message) -> bool:
        return message.user == world.slack.bot_user_id

    reply = await world.slack.wait_for(is_reply, since=before, timeout=15)
    await world.pitcrew.services.drain()  # bookkeeping done: audit rows written, nothing else in flight
    replies = [m for m in world.slack.messages[before:] if m.user == world.slack.bot_user_id]
    assert replies == [reply], f"expected one reply, got {len(replies)}"
    return reply


def body(message: Message) -> str:
    """Every piece of text a person sees in the message."""
    parts = [message.text]
    for block in message.blocks:
        if "text" in block and isinstance(block["text"], dict):
            parts.append(block["text"]["text"])
        parts += [field["text"] for field in block.get("fields", [])]
        for element in block.get("elements", []):
            text = element.get("text", "") if isinstance(element, dict) else ""
            parts.append(text["text"] if isinstance(text, dict) else text)  # buttons carry plain_text objects
    return "\n".join(parts)
