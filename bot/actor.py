"""Who is acting right now: the Slack workspace (team) of the person whose request is being answered.

Identity across Slack Connect is (team, user): an org engineer in their own workspace has a user id that the
program file lists, but Pitcrew accepts it only from the teams the org names (bot.access). The team is set once
per Slack request by a middleware (`act_as_requester` in bot.app.build_app) and read here by the access rules
and the audit log, so every decision and every audit row, in the listener and in work it spawns, sees the same
actor without each call passing it along. Outside a request (monitors, the digest) there is no actor: None.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

_TEAM: ContextVar[str | None] = ContextVar("pitcrew_actor_team", default=None)


def current_team() -> str | None:
    """The acting person's team id, or None outside a Slack request (or when Slack did not say)."""
    return _TEAM.get()


def set_actor(team_id: str | None) -> None:
    """The actor's team from here on in this task and in tasks it starts. For Bolt's middleware, which cannot wrap
    the listener (Bolt runs listeners after the middleware chain returns, in tasks that copy this context): each
    Slack request is served in a task of its own, so the value ends with it."""
    _TEAM.set(team_id or None)


@contextmanager
def acting_from(team_id: str | None) -> Iterator[None]:
    """Within the block (and tasks started in it), the actor's team is `team_id`."""
    token = _TEAM.set(team_id or None)
    try:
        yield
    finally:
        _TEAM.reset(token)


def _text(value: Any) -> str | None:
    return value[:24] if isinstance(value, str) and value else None


def actor_team(body: dict[str, Any]) -> str | None:
    """The acting person's team in a Slack request body: `user_team` on events (else the event's `team`, which
    Slack sets to the actor's in shared channels, else the envelope's), `user.team_id` on clicks and forms,
    `team_id` on slash commands (only the installed workspace's members can use its slash commands)."""
    event = body.get("event")
    if body.get("type") == "event_callback" and isinstance(event, dict):
        return _text(event.get("user_team")) or _text(event.get("team")) or _text(body.get("team_id"))
    user = body.get("user")
    if isinstance(user, dict) and _text(user.get("team_id")):
        return _text(user.get("team_id"))
    team = body.get("team")
    if isinstance(team, dict) and _text(team.get("id")):
        return _text(team.get("id"))
    return _text(body.get("team_id"))
