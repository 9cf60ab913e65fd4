"""The one way Pitcrew speaks in Slack: replies through response URLs, posts and edits through the Web API.

Posts keep Slack's pace of about one message per second per channel; 429s are retried by the
client's rate-limit retry handler (configured in bot.app).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.blocks import Reply

Respond = Callable[..., Awaitable[Any]]
POST_INTERVAL = 1.0  # seconds between posts to one channel (chat.postMessage's special tier)


class Poster:
    def __init__(self, *, client: AsyncWebClient, clock: Callable[[], float] = time.monotonic) -> None:
        self._client = client
        self._clock = clock
        self._channel_locks: dict[str, asyncio.Lock] = {}
        self._last_post: dict[str, float] = {}

    @property
    def client(self) -> AsyncWebClient:
        return self._client

    async def respond(self, respond: Respond, reply: Reply) -> None:
        """Answer a command or click through its response URL: ephemeral unless the reply is public."""
        await respond(
            text=reply.text,
            blocks=reply.blocks,
            response_type="in_channel" if reply.public else "ephemeral",
            replace_original=False,
        )

    async def ephemeral(self, *, channel: str, user: str, reply: Reply) -> None:
        await self._client.chat_postEphemeral(channel=channel, user=user, text=reply.text, blocks=reply.blocks)

    async def post(self, *, channel: str, reply: Reply, thread_ts: str | None = None) -> str:
        """Post in a channel at Slack's pace; returns the message ts (for later edits)."""
        lock = self._channel_locks.setdefault(channel, asyncio.Lock())
        async with lock:
            wait = self._last_post.get(channel, float("-inf")) + POST_INTERVAL - self._clock()
            if wait > 0:
                await asyncio.sleep(wait)
            answer = await self._client.chat_postMessage(
                channel=channel, text=reply.text, blocks=reply.blocks, thread_ts=thread_ts
            )
            self._last_post[channel] = self._clock()
        return str(answer["ts"])

    async def update(self, *, channel: str, ts: str, reply: Reply) -> None:
        await self._client.chat_update(channel=channel, ts=ts, text=reply.text, blocks=reply.blocks)
