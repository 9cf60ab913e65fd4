"""A message and who posts it: what the domain hands on without knowing Slack's Block Kit.

A `Reply` is a message as presenters build it (bot.slack and the other renderers): Block Kit blocks and a
plain-text fallback. The `Publisher` protocol is what the rest of Pitcrew needs from Slack to say something;
`bot.slack.poster.Poster` is the one implementation that talks to Slack, and coordinators (the alert desk,
operations, the digest, the Home tab) and handlers depend on this protocol, so a test can hand them any object
with these methods. Both live below the presenters: the domain hands a presenter's Reply to the publisher
without importing a presenter.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from slack_sdk.web.async_client import AsyncWebClient

from bot import mrkdwn

Block = dict[str, Any]


@dataclass(frozen=True)
class Reply:
    text: str  # notification and accessibility fallback
    blocks: list[Block] = field(default_factory=list)
    public: bool = False  # in_channel instead of ephemeral

    def __post_init__(self) -> None:
        # The last line of defence: whatever a builder forgot to escape, no raw control character reaches
        # Slack (newline and tab are kept; button values are JSON, which has none).
        object.__setattr__(self, "text", mrkdwn.visible(self.text))
        object.__setattr__(self, "blocks", _visible(self.blocks))

    def as_message(self) -> dict[str, Any]:
        return {"text": self.text, "blocks": self.blocks}


def _visible(value: Any) -> Any:
    if isinstance(value, str):
        return mrkdwn.visible(value)
    if isinstance(value, list):
        return [_visible(item) for item in value]
    if isinstance(value, dict):
        return {key: _visible(item) for key, item in value.items()}
    return value


class Publisher(Protocol):
    @property
    def client(self) -> AsyncWebClient:
        """The Web API client, for reads (chat.getPermalink) that say nothing."""
        ...

    async def respond(self, response_url: str, reply: Reply, *, replace_original: bool = False) -> bool:
        """Answer a command or a click through its response URL; False when Slack refused it."""
        ...

    async def post(self, *, channel: str, reply: Reply, thread_ts: str | None = None) -> str:
        """Post in a channel (paced per channel); the message ts."""
        ...

    async def post_ephemeral(self, *, channel: str, user: str, reply: Reply, thread_ts: str | None = None) -> None:
        """Show a message to one person in a channel or a thread of it (chat.postEphemeral)."""
        ...

    async def update(self, *, channel: str, ts: str, reply: Reply) -> None: ...

    async def upload(
        self,
        *,
        channel: str,
        filename: str,
        content: bytes,
        title: str,
        thread_ts: str | None = None,
        initial_comment: str | None = None,
    ) -> str | None:
        """Share a file in a channel or a thread; its file id."""
        ...

    async def open_view(self, *, trigger_id: str, view: dict[str, Any]) -> None: ...

    async def open_dm(self, user_id: str) -> str:
        """The direct-message channel with a user."""
        ...

    async def aclose(self) -> None: ...
