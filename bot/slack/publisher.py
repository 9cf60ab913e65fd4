"""What the rest of Pitcrew needs from Slack to say something: the Publisher protocol.

`bot.slack.poster.Poster` is the one implementation that talks to Slack; coordinators and handlers
depend on this protocol, so a test can hand them any object with these methods.
"""

from __future__ import annotations

from typing import Any, Protocol

from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.blocks import Reply


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
