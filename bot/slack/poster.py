"""The one way Pitcrew speaks in Slack: replies through response URLs, posts and edits through the Web API.

Posts keep a pace per channel, Slack's one message per second unless told otherwise (the sandbox's tests
use none); 429s are retried by the client's rate-limit retry handler (configured in bot.app).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import aiohttp
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.blocks import Reply

if TYPE_CHECKING:
    from bot.metrics import Metrics

log = logging.getLogger(__name__)
POST_INTERVAL = 1.0  # seconds between posts to one channel (chat.postMessage's special tier)


class Poster:
    """The Publisher (bot.publishing) that talks to Slack."""

    def __init__(
        self,
        *,
        client: AsyncWebClient,
        post_interval: float = POST_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        metrics: Metrics | None = None,
    ) -> None:
        self._client = client
        self._metrics = metrics  # Web API calls are counted on the client; replies through response URLs here
        # Response URLs get one pooled, keep-alive aiohttp session (made in the running loop on first use).
        # Bolt's respond() opens a new session per call, and httpx's async client costs several times
        # more CPU per request here (measured with py-spy under bench/ack_latency.py): either would
        # compete with acking the next command under load.
        self._http: aiohttp.ClientSession | None = None
        self._post_interval = post_interval
        self._clock, self._sleep = clock, sleep
        self._channel_locks: dict[str, asyncio.Lock] = {}
        self._last_post: dict[str, float] = {}

    @property
    def client(self) -> AsyncWebClient:
        return self._client

    async def respond(self, response_url: str, reply: Reply, *, replace_original: bool = False) -> bool:
        """Answer a command or click through its response URL: ephemeral unless the reply is public.

        Returns False (and logs) when Slack refused it, e.g. a URL used 5 times or older than 30 minutes."""
        payload = {
            "text": reply.text,
            "blocks": reply.blocks,
            "response_type": "in_channel" if reply.public else "ephemeral",
            "replace_original": replace_original,
        }
        if self._http is None:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10, connect=5))
        try:
            async with self._http.post(response_url, json=payload) as answer:
                self._count_reply(answer.status)
                if answer.status != 200:
                    log.warning("response URL refused the reply: %s %s", answer.status, (await answer.text())[:200])
                    return False
        except (aiohttp.ClientError, TimeoutError) as error:
            self._count_reply("error")
            log.warning("response URL unreachable: %r", error)
            return False
        return True

    def _count_reply(self, status: int | str) -> None:
        if self._metrics is not None:
            self._metrics.slack_call(method="response_url", status=status)

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.close()

    async def post(self, *, channel: str, reply: Reply, thread_ts: str | None = None) -> str:
        """Post in a channel at Slack's pace; returns the message ts (for later edits)."""
        lock = self._channel_locks.setdefault(channel, asyncio.Lock())
        async with lock:
            wait = self._last_post.get(channel, float("-inf")) + self._post_interval - self._clock()
            if wait > 0:
                await self._sleep(wait)
            answer = await self._client.chat_postMessage(
                channel=channel, text=reply.text, blocks=reply.blocks, thread_ts=thread_ts
            )
            self._last_post[channel] = self._clock()
        return str(answer["ts"])

    async def post_ephemeral(self, *, channel: str, user: str, reply: Reply, thread_ts: str | None = None) -> None:
        """Show a message to one person in a channel (or a thread of it); nobody else sees it, and it cannot be
        edited later. Not paced: ephemerals do not count against chat.postMessage's one per second."""
        await self._client.chat_postEphemeral(
            channel=channel, user=user, text=reply.text, blocks=reply.blocks, thread_ts=thread_ts
        )

    async def update(self, *, channel: str, ts: str, reply: Reply) -> None:
        await self._client.chat_update(channel=channel, ts=ts, text=reply.text, blocks=reply.blocks)

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
        """Share a file (a chart PNG) in a channel or a thread; returns its file id.

        Uses `files_upload_v2`: files.getUploadURLExternal and files.completeUploadExternal go to the
        client's base_url (SLACK_API_URL); the bytes go to the upload URL the first call returns, as given.
        Both calls are Tier 4 (100+/min), not chat.postMessage's one-per-second, so uploads are not paced.
        Errors (SlackApiError, SlackRequestError for a refused upload URL, network errors) propagate, as in post().
        Returns None only if Slack answered ok without a file, which it does not do for a single file."""
        answer = await self._client.files_upload_v2(
            channel=channel,
            file=content,
            filename=filename,
            title=title,
            thread_ts=thread_ts,
            initial_comment=initial_comment,
        )
        shared = answer.get("file") or next(iter(answer.get("files") or []), None)
        return str(shared["id"]) if isinstance(shared, dict) and shared.get("id") else None

    async def open_view(self, *, trigger_id: str, view: dict[str, Any]) -> None:
        """Open a modal; Slack accepts it only within 3 seconds of the click that gave the trigger id."""
        await self._client.views_open(trigger_id=trigger_id, view=view)

    async def open_dm(self, user_id: str) -> str:
        """The id of the direct-message channel between Pitcrew and a user (for what cannot be ephemeral)."""
        answer = await self._client.conversations_open(users=user_id)
        return str(answer["channel"]["id"])
