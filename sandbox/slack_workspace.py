"""A local Slack workspace: the subset of Slack's Web API that Pitcrew uses, plus a browser console.

`LocalSlack` plays Slack's part on both sides of the wire:

* the bot's `AsyncWebClient(base_url=local_slack.api_url)` calls `POST /api/{method}` on it;
* it delivers slash commands, button clicks and modal submissions to the bot's `/slack/events` URL as
  form posts signed exactly as Slack signs them, and hands out `response_url`s that behave like Slack's.

Everything it sees is kept in `messages`, `open_views` and `calls`, so tests can assert on what a user would see.
The same object backs the console page (`GET /`) that `pitcrew demo` opens in a browser.
"""

import asyncio
import contextlib
import hashlib
import json
import logging
import mimetypes
import secrets
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode

import httpx
from slack_sdk.signature import SignatureVerifier
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

logger = logging.getLogger(__name__)

# Fixed fake values for fields Slack sends but Bolt does not check.
VERIFICATION_TOKEN = "pitcrewlocalverificationtoken"
API_APP_ID = "A0PITCREW"
BOT_ID = "B0PITCREW"
TEAM_DOMAIN = "pitcrew-local"

# Slack's documented response_url limits: 5 uses within 30 minutes.
RESPONSE_URL_MAX_USES = 5
RESPONSE_URL_TTL_SECONDS = 30 * 60
# How long wait_for / wait_for_view wait by default: they return as soon as the message or modal is there,
# so this bounds only a failing wait, and it is generous for a loaded machine (CI, suites run side by side).
WAIT_SECONDS = 15.0
# Slack shows "operation_timeout" when a command or action is not acknowledged within 3 seconds.
ACK_DEADLINE_SECONDS = 3.0

# A trigger_id opens one modal, within 3 seconds of the interaction that produced it (docs.slack.dev, modals).
TRIGGER_TTL_SECONDS = 3.0
# Spent triggers are kept this long so a late views.open is told "expired", not "invalid".
TRIGGER_KEEP_SECONDS = 3600.0
# Modal limits from Slack's view reference: title/submit/close 24 chars, private_metadata 3000,
# callback_id and external_id 255, 100 blocks; a modal's stack holds the root view plus two pushed views.
MODAL_TEXT_MAX = 24
PRIVATE_METADATA_MAX = 3000
VIEW_ID_FIELD_MAX = 255
MODAL_BLOCKS_MAX = 100
VIEW_STACK_MAX = 3
# Keys of a stored view that are LocalSlack's bookkeeping, not part of Slack's view object.
_VIEW_INTERNAL_KEYS = ("user_id", "errors", "response_error")
# Where each input element keeps its value in `view.state.values` (view_submission payload reference).
_STATE_FIELDS = {
    "plain_text_input": "value",
    "email_text_input": "value",
    "url_text_input": "value",
    "number_text_input": "value",
    "static_select": "selected_option",
    "radio_buttons": "selected_option",
    "datepicker": "selected_date",
    "timepicker": "selected_time",
    "users_select": "selected_user",
    "conversations_select": "selected_conversation",
    "channels_select": "selected_channel",
}

_CONSOLE_HTML = Path(__file__).with_name("console.html")
_T = TypeVar("_T")


@dataclass
class Message:
    """One entry in a channel as a user would see it (messages, ephemerals and typed commands)."""

    ts: str
    channel: str
    user: str
    text: str
    blocks: list[dict[str, Any]] = field(default_factory=list)
    kind: str = "message"  # "message" | "ephemeral" | "command"
    ephemeral_to: str | None = None  # set for ephemerals and for commands (only their author sees them)
    thread_ts: str | None = None
    edits: int = 0
    files: list[dict[str, Any]] = field(default_factory=list)
    via: str = "chat.postMessage"


@dataclass
class ApiCall:
    """One Web API (or response_url) request received, with its parameters minus the token."""

    method: str
    params: dict[str, Any]


@dataclass
class _ResponseUrl:
    user_id: str
    channel_id: str
    created: float
    original_ts: str | None = None  # the clicked message, for replace_original / delete_original
    uses: int = 0


@dataclass
class _Trigger:
    user_id: str
    created: float
    used: bool = False


@dataclass
class _StoredFile:
    id: str
    filename: str
    length: int
    title: str = ""
    content: bytes | None = None
    created: int = 0


@dataclass
class _Failure:
    status: int
    retry_after: int
    remaining: int


class SlackApiFailure(Exception):
    """An `ok: false` Web API answer, raised inside a method handler."""

    def __init__(self, error: str, **extra: Any) -> None:
        super().__init__(error)
        self.error = error
        self.extra = extra


def signed_headers(body: str, *, secret: str, timestamp: int) -> dict[str, str]:
    """Headers of a request from Slack: v0 HMAC-SHA256 over `v0:{timestamp}:{body}`."""
    signature = SignatureVerifier(secret).generate_signature(timestamp=str(timestamp), body=body)
    return {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": str(timestamp),
        "X-Slack-Signature": signature or "",
        "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
    }


class LocalSlack:
    """An in-process Slack workspace serving the Web API, response_urls and the console as one ASGI app."""

    def __init__(
        self,
        *,
        signing_secret: str,
        bot_token: str,
        users: Mapping[str, str],
        channels: Mapping[str, str],
        events_url: str = "",
        team_id: str = "T0PITCREW",
        bot_user_id: str = "U0PITCREW",
        base_url: str = "",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.signing_secret = signing_secret
        self.bot_token = bot_token
        self.users: dict[str, str] = dict(users)
        self.channels: dict[str, str] = dict(channels)
        # Both URLs are plain attributes because the ports are only known once the servers are up.
        self.events_url = events_url
        self.base_url = base_url
        self.team_id = team_id
        self.bot_user_id = bot_user_id
        self.bot_name = "pitcrew"
        self.clock = clock

        self.messages: list[Message] = []
        self.calls: list[ApiCall] = []
        self.home_views: dict[str, dict[str, Any]] = {}
        # Open modal views, view_id -> Slack's view object plus "user_id", "errors" ({block_id: message}
        # shown under inputs after a `response_action: errors`) and "response_error" (a reply Slack would
        # not accept). A user's views are in opening order, so the last one is on top.
        self.open_views: dict[str, dict[str, Any]] = {}
        self.files: dict[str, _StoredFile] = {}

        self._response_urls: dict[str, _ResponseUrl] = {}
        self._triggers: dict[str, _Trigger] = {}
        self._failures: dict[str, _Failure] = {}
        self._last_ts_micros = 0
        self._file_seq = 0
        self._view_seq = 0
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self._http: httpx.AsyncClient | None = None
        self._http_loop: asyncio.AbstractEventLoop | None = None
        self._methods: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "auth.test": self._auth_test,
            "chat.postMessage": self._chat_post_message,
            "chat.update": self._chat_update,
            "chat.postEphemeral": self._chat_post_ephemeral,
            "chat.delete": self._chat_delete,
            "chat.getPermalink": self._chat_get_permalink,
            "views.publish": self._views_publish,
            "views.open": self._views_open,
            "views.update": self._views_update,
            "users.info": self._users_info,
            "conversations.info": self._conversations_info,
            "conversations.open": self._conversations_open,
            "files.getUploadURLExternal": self._files_get_upload_url,
            "files.completeUploadExternal": self._files_complete_upload,
        }
        self.app = Starlette(
            routes=[
                Route("/api/{method}", self._handle_api, methods=["GET", "POST"]),
                Route("/upload/{file_id}", self._handle_upload, methods=["POST", "PUT"]),
                Route("/files/{file_id}", self._handle_file, methods=["GET"]),
                Route("/response/{token}", self._handle_response_url, methods=["POST"]),
                Route("/", self._handle_console_page, methods=["GET"]),
                Route("/console/state", self._handle_console_state, methods=["GET"]),
                Route("/console/command", self._handle_console_command, methods=["POST"]),
                Route("/console/action", self._handle_console_action, methods=["POST"]),
                Route("/console/view-submit", self._handle_console_view_submit, methods=["POST"]),
                Route("/console/view-close", self._handle_console_view_close, methods=["POST"]),
                Route("/console/command-forms", self._handle_console_command_forms, methods=["POST"]),
            ],
            lifespan=self._lifespan,
        )

    # ------------------------------------------------------------------ public helpers

    @property
    def api_url(self) -> str:
        """What SLACK_API_URL (the WebClient's base_url) should be set to."""
        return f"{self.base_url}/api/"

    def channel_messages(self, channel: str, *, visible_to: str | None = None) -> list[Message]:
        """Messages in `channel`, in order; with `visible_to`, only those that user would see."""
        return [
            m for m in self.messages if m.channel == channel and (visible_to is None or self._is_visible(m, visible_to))
        ]

    def fail_next(self, method: str, *, status: int = 429, retry_after: int = 1, count: int = 1) -> None:
        """Make the next `count` calls of `method` ("chat.update", "response_url", ...) fail with `status`."""
        self._failures[method] = _Failure(status=status, retry_after=retry_after, remaining=count)

    async def send_command(
        self,
        *,
        user_id: str,
        channel_id: str,
        command: str,
        text: str,
        timestamp: int | None = None,
        signing_secret: str | None = None,
    ) -> httpx.Response:
        """Deliver a slash command to the bot as Slack would, and show any ack body to the user."""
        form = self.slash_command_form(user_id=user_id, channel_id=channel_id, command=command, text=text)
        response = await self._deliver(urlencode(form), timestamp=timestamp, signing_secret=signing_secret)
        if response.status_code == 200 and response.content:
            self._show_ack_body(response, user_id=user_id, channel_id=channel_id)
        return response

    def slash_command_form(self, *, user_id: str, channel_id: str, command: str, text: str) -> dict[str, str]:
        """The form Slack posts for a slash command, with a response URL of its own; the command is shown
        to its author. send_command delivers it; the benchmark signs and sends batches of them itself."""
        token = self._new_response_url(user_id=user_id, channel_id=channel_id)
        form = {
            "token": VERIFICATION_TOKEN,
            "team_id": self.team_id,
            "team_domain": TEAM_DOMAIN,
            "channel_id": channel_id,
            "channel_name": self._channel_name(channel_id),
            "user_id": user_id,
            "user_name": self._user_handle(user_id),
            "command": command,
            "text": text,
            "api_app_id": API_APP_ID,
            "is_enterprise_install": "false",
            "response_url": f"{self.base_url}/response/{token}",
            "trigger_id": self._trigger_id(user_id),
        }
        self._add_message(
            Message(
                ts=self._next_ts(),
                channel=channel_id,
                user=user_id,
                text=f"{command} {text}".strip(),
                kind="command",
                ephemeral_to=user_id,
                via="command",
            )
        )
        return form

    async def click(
        self,
        *,
        user_id: str,
        message: Message,
        action_id: str,
        value: str | None = None,
        timestamp: int | None = None,
    ) -> httpx.Response:
        """Click the button `action_id` in `message` as `user_id` (a `block_actions` delivery)."""
        found = _find_action(message.blocks, action_id)
        if found is None:
            raise ValueError(f"no element with action_id={action_id!r} in message {message.ts}")
        block_id, element = found
        is_ephemeral = message.kind == "ephemeral"
        token = self._new_response_url(user_id=user_id, channel_id=message.channel, original_ts=message.ts)
        action: dict[str, Any] = {
            "action_id": action_id,
            "block_id": block_id,
            "type": element.get("type", "button"),
            "action_ts": self._next_ts(),
        }
        if "text" in element:
            action["text"] = element["text"]
        chosen = value if value is not None else element.get("value")
        if chosen is not None:
            action["value"] = chosen
        if "style" in element:
            action["style"] = element["style"]
        payload: dict[str, Any] = {
            "type": "block_actions",
            "user": self._user_ref(user_id),
            "api_app_id": API_APP_ID,
            "token": VERIFICATION_TOKEN,
            "container": {
                "type": "message",
                "message_ts": message.ts,
                "channel_id": message.channel,
                "is_ephemeral": is_ephemeral,
            },
            "trigger_id": self._trigger_id(user_id),
            "team": {"id": self.team_id, "domain": TEAM_DOMAIN},
            "enterprise": None,
            "is_enterprise_install": False,
            "channel": {"id": message.channel, "name": self._channel_name(message.channel)},
            "state": {"values": {}},
            "response_url": f"{self.base_url}/response/{token}",
            "actions": [action],
        }
        # Real Slack leaves `message` out of clicks on ephemeral messages; mirroring that keeps handlers
        # honest (they must use container/response_url there).
        if not is_ephemeral:
            payload["message"] = self._message_json(message)
        body = urlencode({"payload": json.dumps(payload)})
        return await self._deliver(body, timestamp=timestamp, signing_secret=None)

    def user_views(self, user_id: str) -> list[dict[str, Any]]:
        """`user_id`'s open modal views, bottom to top (the last one is what they see)."""
        return [v for v in self.open_views.values() if v["user_id"] == user_id]

    async def submit_view(
        self,
        *,
        user_id: str,
        view_id: str,
        values: Mapping[str, Mapping[str, str]],
        timestamp: int | None = None,
    ) -> httpx.Response:
        """Press Submit on modal `view_id` as `user_id` after typing `values` ({block_id: {action_id: text}};
        a select takes an option's value), deliver the `view_submission`, and apply the bot's reply as Slack
        does: an empty 200 closes the view; `response_action` errors / update / push / clear act on the stack.

        Raises ValueError for what Slack's client would not let a user submit: a view that is not open for
        them, a block_id/action_id that is not an input of the view, or a required input left empty.
        """
        stored = self._user_view(user_id, view_id)
        stored["state"] = {"values": _submission_state(stored["blocks"], values)}
        payload: dict[str, Any] = {
            "type": "view_submission",
            "team": {"id": self.team_id, "domain": TEAM_DOMAIN},
            "user": self._user_ref(user_id),
            "api_app_id": API_APP_ID,
            "token": VERIFICATION_TOKEN,
            "trigger_id": self._trigger_id(user_id),
            "view": self._view_json(stored),
            "response_urls": [],
            "is_enterprise_install": False,
            "enterprise": None,
        }
        body = urlencode({"payload": json.dumps(payload)})
        response = await self._deliver(body, timestamp=timestamp, signing_secret=None)
        self._apply_view_response(stored, response)
        self._notify()
        return response

    async def close_view(self, *, user_id: str, view_id: str, timestamp: int | None = None) -> httpx.Response | None:
        """Close modal `view_id` as `user_id` (the X button); Slack sends `view_closed` only to views opened
        with `notify_on_close`, so the bot's response is returned then and None otherwise."""
        stored = self._user_view(user_id, view_id)
        del self.open_views[view_id]
        self._notify()
        if not stored["notify_on_close"]:
            return None
        payload = {
            "type": "view_closed",
            "team": {"id": self.team_id, "domain": TEAM_DOMAIN},
            "user": self._user_ref(user_id),
            "api_app_id": API_APP_ID,
            "token": VERIFICATION_TOKEN,
            "view": self._view_json(stored),
            "is_cleared": False,
            "is_enterprise_install": False,
            "enterprise": None,
        }
        return await self._deliver(
            urlencode({"payload": json.dumps(payload)}), timestamp=timestamp, signing_secret=None
        )

    async def wait_for(self, predicate: Callable[[Message], bool], *, timeout: float = WAIT_SECONDS) -> Message:
        """The first message (present or yet to arrive, re-checked after edits) matching `predicate`."""
        return await self._wait_until(
            lambda: next((m for m in list(self.messages) if predicate(m)), None),
            timeout=timeout,
            failure=lambda: f"no matching message within {timeout}s; messages:\n{self.describe()}",
        )

    async def wait_for_view(
        self, *, user_id: str, callback_id: str | None = None, timeout: float = WAIT_SECONDS
    ) -> dict[str, Any]:
        """The modal on top of `user_id`'s screen (present or yet to open), with `callback_id` if given."""

        def top() -> dict[str, Any] | None:
            views = self.user_views(user_id)
            if views and (callback_id is None or views[-1]["callback_id"] == callback_id):
                return views[-1]
            return None

        return await self._wait_until(
            top,
            timeout=timeout,
            failure=lambda: (
                f"no modal{f' {callback_id!r}' if callback_id else ''} for {user_id} within {timeout}s; "
                f"open: {[(v['id'], v['callback_id']) for v in self.user_views(user_id)]}"
            ),
        )

    async def _wait_until(self, find: Callable[[], _T | None], *, timeout: float, failure: Callable[[], str]) -> _T:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            waiter = (loop, asyncio.Event())
            self._waiters.append(waiter)
            try:
                found = find()
                if found is not None:
                    return found
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise TimeoutError(failure())
                # On timeout, loop once more so a last-moment change still counts.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(waiter[1].wait(), remaining)
            finally:
                self._waiters.remove(waiter)

    def describe(self, limit: int = 30) -> str:
        """A short human-readable dump of the latest messages, for failure messages."""
        if not self.messages:
            return "  (none)"
        lines = []
        for m in self.messages[-limit:]:
            to = f" to={m.ephemeral_to}" if m.kind == "ephemeral" else ""
            thread = f" thread={m.thread_ts}" if m.thread_ts else ""
            edited = f" edits={m.edits}" if m.edits else ""
            text = m.text if len(m.text) <= 100 else m.text[:97] + "..."
            lines.append(
                f"  [{m.ts}] {m.kind}{to} #{self._channel_name(m.channel)} {m.user} via {m.via}"
                f"{thread}{edited} blocks={len(m.blocks)} files={len(m.files)}: {text!r}"
            )
        return "\n".join(lines)

    async def aclose(self) -> None:
        """Close the outgoing HTTP client (also done when the ASGI app shuts down)."""
        client, self._http = self._http, None
        # A client from another (possibly closed) loop cannot be closed from here; just drop it.
        if client is not None and self._http_loop is asyncio.get_running_loop():
            await client.aclose()

    # ------------------------------------------------------------------ outgoing requests (Slack -> bot)

    def _client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        # A client is bound to the loop that created it; tests may reuse a LocalSlack across loops.
        if self._http is None or self._http_loop is not loop:
            self._http = httpx.AsyncClient(timeout=10.0)
            self._http_loop = loop
        return self._http

    async def _deliver(self, body: str, *, timestamp: int | None, signing_secret: str | None) -> httpx.Response:
        if not self.events_url:
            raise RuntimeError("LocalSlack.events_url is not set; point it at the bot's /slack/events URL")
        headers = signed_headers(
            body,
            secret=signing_secret if signing_secret is not None else self.signing_secret,
            timestamp=timestamp if timestamp is not None else int(self.clock()),
        )
        started = time.monotonic()
        response = await self._client().post(self.events_url, content=body.encode(), headers=headers)
        elapsed = time.monotonic() - started
        if elapsed > ACK_DEADLINE_SECONDS:
            logger.warning("bot took %.1fs to ack; real Slack gives up after 3s (operation_timeout)", elapsed)
        return response

    def _show_ack_body(self, response: httpx.Response, *, user_id: str, channel_id: str) -> None:
        content_type = response.headers.get("content-type", "")
        payload: dict[str, Any]
        if "json" in content_type:
            try:
                parsed = response.json()
            except ValueError:
                return
            if not isinstance(parsed, dict):
                return
            payload = parsed
        else:
            payload = {"text": response.text}
        text = payload.get("text") or ""
        blocks = _as_blocks(payload.get("blocks"))
        if not text and not blocks:
            return
        in_channel = payload.get("response_type") == "in_channel"
        self._add_message(
            Message(
                ts=self._next_ts(),
                channel=channel_id,
                user=self.bot_user_id,
                text=str(text),
                blocks=blocks,
                kind="message" if in_channel else "ephemeral",
                ephemeral_to=None if in_channel else user_id,
                via="ack",
            )
        )

    # ------------------------------------------------------------------ state helpers

    def _next_ts(self) -> str:
        # Microseconds since the epoch, forced strictly increasing so ts stays unique with a frozen clock.
        micros = max(int(self.clock() * 1_000_000), self._last_ts_micros + 1)
        self._last_ts_micros = micros
        return f"{micros // 1_000_000}.{micros % 1_000_000:06d}"

    def _trigger_id(self, user_id: str) -> str:
        """A trigger_id for an interaction by `user_id`, remembered so views.open can check it like Slack."""
        now = self.clock()
        # Oldest first (insertion order), so a load generator issuing thousands keeps this small.
        while self._triggers:
            oldest_id, oldest = next(iter(self._triggers.items()))
            if now - oldest.created < TRIGGER_KEEP_SECONDS:
                break
            del self._triggers[oldest_id]
        trigger_id = f"{int(now)}.{secrets.randbelow(10**12)}.{secrets.token_hex(16)}"
        self._triggers[trigger_id] = _Trigger(user_id=user_id, created=now)
        return trigger_id

    def _new_response_url(self, *, user_id: str, channel_id: str, original_ts: str | None = None) -> str:
        token = secrets.token_urlsafe(18)
        self._response_urls[token] = _ResponseUrl(
            user_id=user_id, channel_id=channel_id, created=self.clock(), original_ts=original_ts
        )
        return token

    def _notify(self) -> None:
        for loop, event in list(self._waiters):
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if loop is running:
                event.set()
            elif not loop.is_closed():
                loop.call_soon_threadsafe(event.set)

    def _add_message(self, message: Message) -> Message:
        self.messages.append(message)
        self._notify()
        return message

    def _find_message(self, channel: str, ts: str) -> Message | None:
        for m in self.messages:
            if m.channel == channel and m.ts == ts:
                return m
        return None

    def _dm_id(self, user_id: str) -> str:
        return "D" + user_id[1:]

    def _dm_user(self, channel: str) -> str | None:
        for user_id in self.users:
            if self._dm_id(user_id) == channel:
                return user_id
        return None

    def _resolve_channel(self, channel: Any) -> str:
        """A channel id, a "#name", a DM id, or a user id (which means the app's DM with that user)."""
        if not isinstance(channel, str) or not channel:
            raise SlackApiFailure("channel_not_found")
        if channel in self.channels or self._dm_user(channel) is not None:
            return channel
        if channel in self.users:
            return self._dm_id(channel)
        name = channel.lstrip("#")
        for channel_id, channel_name in self.channels.items():
            if channel_name == name:
                return channel_id
        raise SlackApiFailure("channel_not_found")

    def _channel_name(self, channel: str) -> str:
        if channel in self.channels:
            return self.channels[channel]
        return "directmessage" if self._dm_user(channel) is not None else channel

    def _user_ref(self, user_id: str) -> dict[str, str]:
        """The `user` object of interaction payloads."""
        handle = self._user_handle(user_id)
        return {"id": user_id, "username": handle, "name": handle, "team_id": self.team_id}

    def _user_handle(self, user_id: str) -> str:
        name = self.users.get(user_id, user_id)
        return "".join(ch for ch in name.lower().replace(" ", ".") if ch.isalnum() or ch in "._-")

    def _is_visible(self, message: Message, user_id: str) -> bool:
        dm_user = self._dm_user(message.channel)
        if dm_user is not None and dm_user != user_id:
            return False
        if message.kind in ("ephemeral", "command"):
            return message.ephemeral_to == user_id
        return True

    def _message_json(self, message: Message) -> dict[str, Any]:
        """A message as Slack's API returns it (chat.postMessage `message`, block_actions `message`)."""
        data: dict[str, Any] = {
            "type": "message",
            "user": message.user,
            "ts": message.ts,
            "text": message.text,
            "team": self.team_id,
        }
        if message.user == self.bot_user_id:
            data.update(bot_id=BOT_ID, app_id=API_APP_ID)
        if message.blocks:
            data["blocks"] = message.blocks
        if message.thread_ts:
            data["thread_ts"] = message.thread_ts
        if message.edits:
            data["edited"] = {"user": message.user, "ts": message.ts}
        if message.files:
            data["files"] = [self._file_json(self.files[f["id"]]) for f in message.files if f["id"] in self.files]
        return data

    # ------------------------------------------------------------------ Web API (bot -> Slack)

    async def _handle_api(self, request: Request) -> Response:
        method = request.path_params["method"]
        params = await _request_params(request)
        token = params.pop("token", None)
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            token = auth[7:].strip()
        self.calls.append(ApiCall(method=method, params=params))
        if method not in self._methods:
            return JSONResponse({"ok": False, "error": "unknown_method"}, status_code=404)
        failure = self._take_failure(method)
        if failure is not None:
            return failure
        if not token:
            return JSONResponse({"ok": False, "error": "not_authed"})
        if token != self.bot_token:
            return JSONResponse({"ok": False, "error": "invalid_auth"})
        try:
            result = self._methods[method](params)
        except SlackApiFailure as failed:
            return JSONResponse({"ok": False, "error": failed.error, **failed.extra})
        return JSONResponse({"ok": True, **result})

    def _take_failure(self, method: str) -> Response | None:
        failure = self._failures.get(method)
        if failure is None or failure.remaining <= 0:
            return None
        failure.remaining -= 1
        if failure.remaining <= 0:
            del self._failures[method]
        error = "ratelimited" if failure.status == 429 else "internal_error"
        headers = {"Retry-After": str(failure.retry_after)} if failure.status == 429 else {}
        return JSONResponse({"ok": False, "error": error}, status_code=failure.status, headers=headers)

    def _auth_test(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": f"https://{TEAM_DOMAIN}.slack.com/",
            "team": "Pitcrew (local)",
            "user": self.bot_name,
            "team_id": self.team_id,
            "user_id": self.bot_user_id,
            "bot_id": BOT_ID,
            "is_enterprise_install": False,
        }

    def _message_content(self, params: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        text = params.get("text")
        blocks = _parse_blocks(params.get("blocks"), limit=50)
        if not text and not blocks:
            raise SlackApiFailure("no_text")
        return ("" if text is None else str(text)), blocks

    def _post_bot_message(self, params: dict[str, Any], **kind: Any) -> Message:
        """A bot message from chat.postMessage/postEphemeral params; `kind` sets the ephemeral fields."""
        channel = self._resolve_channel(params.get("channel"))
        text, blocks = self._message_content(params)
        thread_ts = params.get("thread_ts") or None
        return self._add_message(
            Message(
                ts=self._next_ts(),
                channel=channel,
                user=self.bot_user_id,
                text=text,
                blocks=blocks,
                thread_ts=str(thread_ts) if thread_ts else None,
                **kind,
            )
        )

    def _chat_post_message(self, params: dict[str, Any]) -> dict[str, Any]:
        message = self._post_bot_message(params)
        return {"channel": message.channel, "ts": message.ts, "message": self._message_json(message)}

    def _bot_message(self, params: dict[str, Any], *, cant: str) -> Message:
        channel = self._resolve_channel(params.get("channel"))
        ts = params.get("ts")
        message = self._find_message(channel, str(ts)) if ts else None
        # Ephemerals and typed commands cannot be edited through the Web API on real Slack either.
        if message is None or message.kind != "message":
            raise SlackApiFailure("message_not_found")
        if message.user != self.bot_user_id:
            raise SlackApiFailure(cant)
        return message

    def _chat_update(self, params: dict[str, Any]) -> dict[str, Any]:
        message = self._bot_message(params, cant="cant_update_message")
        if not params.get("text") and not _parse_blocks(params.get("blocks"), limit=50):
            raise SlackApiFailure("no_text")
        # Omitted fields keep their previous value, as on Slack.
        if "text" in params:
            message.text = str(params["text"] or "")
        if "blocks" in params:
            message.blocks = _parse_blocks(params["blocks"], limit=50)
        message.edits += 1
        self._notify()
        return {
            "channel": message.channel,
            "ts": message.ts,
            "text": message.text,
            "message": self._message_json(message),
        }

    def _chat_post_ephemeral(self, params: dict[str, Any]) -> dict[str, Any]:
        self._resolve_channel(params.get("channel"))  # channel_not_found before user_not_found, as Slack
        user = params.get("user")
        if not isinstance(user, str) or user not in self.users:
            raise SlackApiFailure("user_not_found")
        message = self._post_bot_message(params, kind="ephemeral", ephemeral_to=user, via="chat.postEphemeral")
        return {"message_ts": message.ts}

    def _chat_delete(self, params: dict[str, Any]) -> dict[str, Any]:
        message = self._bot_message(params, cant="cant_delete_message")
        self.messages.remove(message)
        self._notify()
        return {"channel": message.channel, "ts": message.ts}

    def _chat_get_permalink(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._resolve_channel(params.get("channel"))
        ts = str(params.get("message_ts") or "")
        if self._find_message(channel, ts) is None:
            raise SlackApiFailure("message_not_found")
        return {"channel": channel, "permalink": f"{self.base_url}/#channel={channel}&ts={ts}"}

    def _views_publish(self, params: dict[str, Any]) -> dict[str, Any]:
        user_id = params.get("user_id")
        if not isinstance(user_id, str) or user_id not in self.users:
            raise SlackApiFailure("user_not_found")
        view = _parse_json_value(params.get("view"))
        if not isinstance(view, dict) or view.get("type") != "home":
            raise SlackApiFailure("invalid_arguments")
        blocks = _parse_blocks(view.get("blocks"), limit=100)
        self._view_seq += 1
        stored = {
            "id": f"V{self._view_seq:08d}",
            "team_id": self.team_id,
            "type": "home",
            "blocks": blocks,
            "private_metadata": view.get("private_metadata", ""),
            "callback_id": view.get("callback_id", ""),
            "external_id": view.get("external_id", ""),
            "state": {"values": {}},
            "hash": secrets.token_hex(8),
            "title": view.get("title"),
            "app_id": API_APP_ID,
            "bot_id": BOT_ID,
        }
        self.home_views[user_id] = stored
        self._notify()
        return {"view": stored}

    def _views_open(self, params: dict[str, Any]) -> dict[str, Any]:
        trigger = self._valid_trigger(params)
        content = _modal_content(params.get("view"))
        self._check_external_id(content["external_id"])
        # Only a successful call spends the trigger, so a bot can fix its view and retry within 3 s.
        trigger.used = True
        return {"view": self._view_json(self._add_view(trigger.user_id, content))}

    def _views_update(self, params: dict[str, Any]) -> dict[str, Any]:
        view_id, external_id = params.get("view_id"), params.get("external_id")
        if not view_id and not external_id:
            raise SlackApiFailure(
                "invalid_arguments", response_metadata=_messages(["either view_id or external_id is required"])
            )
        if view_id:
            stored = self.open_views.get(str(view_id))
        else:
            stored = next((v for v in self.open_views.values() if v["external_id"] == external_id), None)
        if stored is None:
            raise SlackApiFailure("not_found")
        if params.get("hash") and params["hash"] != stored["hash"]:
            raise SlackApiFailure("hash_conflict")
        content = _modal_content(params.get("view"))
        if content["external_id"] != stored["external_id"]:
            self._check_external_id(content["external_id"])
        self._update_view(stored, content)
        self._notify()
        return {"view": self._view_json(stored)}

    def _valid_trigger(self, params: dict[str, Any]) -> _Trigger:
        trigger_id = params.get("trigger_id") or params.get("interactivity_pointer")
        trigger = self._triggers.get(str(trigger_id)) if trigger_id else None
        if trigger is None:
            raise SlackApiFailure("invalid_trigger_id")
        if trigger.used:
            raise SlackApiFailure("exchanged_trigger_id")
        if self.clock() - trigger.created > TRIGGER_TTL_SECONDS:
            raise SlackApiFailure("expired_trigger_id")
        return trigger

    def _check_external_id(self, external_id: str) -> None:
        if external_id and any(v["external_id"] == external_id for v in self.open_views.values()):
            raise SlackApiFailure("duplicate_external_id")

    def _add_view(
        self,
        user_id: str,
        content: dict[str, Any],
        *,
        root_view_id: str | None = None,
        previous_view_id: str | None = None,
    ) -> dict[str, Any]:
        self._view_seq += 1
        view_id = f"V{self._view_seq:08d}"
        stored: dict[str, Any] = {
            "id": view_id,
            "team_id": self.team_id,
            **content,
            "state": {"values": {}},
            "hash": self._view_hash(),
            "previous_view_id": previous_view_id,
            "root_view_id": root_view_id or view_id,
            "app_id": API_APP_ID,
            "app_installed_team_id": self.team_id,
            "bot_id": BOT_ID,
            "user_id": user_id,
            "errors": {},
            "response_error": None,
        }
        self.open_views[view_id] = stored
        self._notify()
        return stored

    def _update_view(self, stored: dict[str, Any], content: dict[str, Any]) -> None:
        # A replacement view that names no external_id keeps the one the view was opened with.
        stored.update({**content, "external_id": content["external_id"] or stored["external_id"]})
        stored["hash"] = self._view_hash()
        stored["errors"] = {}
        stored["response_error"] = None
        # Slack keeps what the user typed in inputs that survive the update (same block_id, action_id, type).
        old = stored["state"]["values"]
        kept: dict[str, dict[str, Any]] = {}
        for block in content["blocks"]:
            element = block.get("element") if block.get("type") == "input" else None
            if isinstance(element, dict):
                entry = old.get(block["block_id"], {}).get(element.get("action_id"))
                if entry is not None and entry.get("type") == element.get("type"):
                    kept[block["block_id"]] = {element["action_id"]: entry}
        stored["state"] = {"values": kept}

    def _view_hash(self) -> str:
        return f"{int(self.clock())}.{secrets.token_hex(4)}"

    def _view_json(self, stored: dict[str, Any]) -> dict[str, Any]:
        """A stored view as Slack's API and payloads show it, without LocalSlack's bookkeeping."""
        return {k: v for k, v in stored.items() if k not in _VIEW_INTERNAL_KEYS}

    def _user_view(self, user_id: str, view_id: str) -> dict[str, Any]:
        stored = self.open_views.get(view_id)
        if stored is None or stored["user_id"] != user_id:
            open_ids = [v["id"] for v in self.user_views(user_id)]
            raise ValueError(f"view {view_id!r} is not open for {user_id}; open: {open_ids}")
        return stored

    def _apply_view_response(self, stored: dict[str, Any], response: httpx.Response) -> None:
        """What Slack does with the bot's answer to a view_submission (docs: modals, "Responding to submissions")."""
        if stored["id"] not in self.open_views:
            return  # closed meanwhile
        user_id = stored["user_id"]
        body = response.content.strip()
        answer = _parse_response_body(body, "application/json")  # {} unless a JSON object
        action = answer.get("response_action")
        problem: str
        if response.status_code != 200:
            problem = f"HTTP {response.status_code}"
        elif not body:
            del self.open_views[stored["id"]]
            return
        elif action == "errors":
            errors = answer.get("errors")
            inputs = {b["block_id"] for b in stored["blocks"] if b.get("type") == "input"}
            if (
                isinstance(errors, dict)
                and errors
                and all(k in inputs and isinstance(m, str) for k, m in errors.items())
            ):
                stored["errors"] = dict(errors)
                stored["response_error"] = None
                return
            problem = f"errors must map input block_ids of the view {sorted(inputs)} to messages: {errors!r}"
        elif action == "clear":
            for view_id in [v["id"] for v in self.user_views(user_id)]:
                del self.open_views[view_id]
            return
        elif action in ("update", "push"):
            try:
                content = _modal_content(answer.get("view"))
            except SlackApiFailure as failed:
                problem = f"invalid view: {failed.extra.get('response_metadata', {}).get('messages', failed.error)}"
            else:
                if action == "update":
                    self._update_view(stored, content)
                    return
                if (
                    len([v for v in self.user_views(user_id) if v["root_view_id"] == stored["root_view_id"]])
                    < VIEW_STACK_MAX
                ):
                    self._add_view(user_id, content, root_view_id=stored["root_view_id"], previous_view_id=stored["id"])
                    return
                problem = "push_limit_reached"
        else:
            problem = f"unexpected response body {response.text[:200]!r}"
        # Slack keeps the modal open and shows a generic connection error; say what was wrong here.
        stored["response_error"] = problem
        logger.warning("view_submission answer for %s not accepted: %s", stored["id"], problem)

    def _user_json(self, user_id: str) -> dict[str, Any]:
        name = self.bot_name if user_id == self.bot_user_id else self.users[user_id]
        return {
            "id": user_id,
            "team_id": self.team_id,
            "name": self._user_handle(user_id) if user_id != self.bot_user_id else self.bot_name,
            "real_name": name,
            "deleted": False,
            "is_bot": user_id == self.bot_user_id,
            "is_admin": False,
            "tz": "UTC",
            "tz_label": "Coordinated Universal Time",
            "tz_offset": 0,
            "profile": {
                "display_name": name,
                "display_name_normalized": name,
                "real_name": name,
                "real_name_normalized": name,
                "email": f"{self._user_handle(user_id)}@{TEAM_DOMAIN}.example",
            },
        }

    def _users_info(self, params: dict[str, Any]) -> dict[str, Any]:
        user = params.get("user")
        if user != self.bot_user_id and (not isinstance(user, str) or user not in self.users):
            raise SlackApiFailure("user_not_found")
        return {"user": self._user_json(str(user))}

    def _channel_json(self, channel: str) -> dict[str, Any]:
        dm_user = self._dm_user(channel)
        if dm_user is not None:
            return {"id": channel, "is_im": True, "user": dm_user, "is_channel": False, "is_private": True}
        return {
            "id": channel,
            "name": self.channels[channel],
            "is_channel": True,
            "is_group": False,
            "is_im": False,
            "is_private": False,
            "is_archived": False,
            "is_member": True,
            "num_members": len(self.users) + 1,
        }

    def _conversations_info(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = params.get("channel")
        if not isinstance(channel, str) or (channel not in self.channels and self._dm_user(channel) is None):
            raise SlackApiFailure("channel_not_found")
        return {"channel": self._channel_json(channel)}

    def _conversations_open(self, params: dict[str, Any]) -> dict[str, Any]:
        users = str(params.get("users") or "").split(",")
        if len(users) != 1 or users[0] not in self.users:
            raise SlackApiFailure("user_not_found")
        return {"channel": self._channel_json(self._dm_id(users[0]))}

    def _files_get_upload_url(self, params: dict[str, Any]) -> dict[str, Any]:
        filename = params.get("filename")
        try:
            length = int(params.get("length", ""))
        except ValueError:
            raise SlackApiFailure("invalid_arguments") from None
        if not filename:
            raise SlackApiFailure("invalid_arguments")
        self._file_seq += 1
        file_id = f"F{self._file_seq:08d}"
        self.files[file_id] = _StoredFile(id=file_id, filename=str(filename), length=length, created=int(self.clock()))
        return {"upload_url": f"{self.base_url}/upload/{file_id}", "file_id": file_id}

    def _file_json(self, stored: _StoredFile) -> dict[str, Any]:
        url = f"{self.base_url}/files/{stored.id}"
        mimetype = mimetypes.guess_type(stored.filename)[0] or "application/octet-stream"
        return {
            "id": stored.id,
            "created": stored.created,
            "timestamp": stored.created,
            "name": stored.filename,
            "title": stored.title or stored.filename,
            "mimetype": mimetype,
            "filetype": Path(stored.filename).suffix.lstrip(".") or "binary",
            "user": self.bot_user_id,
            "size": len(stored.content or b""),
            "url_private": url,
            "url_private_download": url,
            "permalink": url,
            "is_public": True,
        }

    def _files_complete_upload(self, params: dict[str, Any]) -> dict[str, Any]:
        requested = _parse_json_value(params.get("files"))
        if not isinstance(requested, list) or not requested:
            raise SlackApiFailure("invalid_arguments")
        completed: list[_StoredFile] = []
        for item in requested:
            stored = self.files.get(str(item.get("id"))) if isinstance(item, dict) else None
            if stored is None or stored.content is None:
                raise SlackApiFailure("file_not_found")
            stored.title = str(item.get("title") or stored.filename)
            completed.append(stored)
        targets = [c for c in str(params.get("channels") or "").split(",") if c]
        if params.get("channel_id"):
            targets.insert(0, str(params["channel_id"]))
        resolved = [self._resolve_channel(c) for c in targets]
        thread_ts = params.get("thread_ts") or None
        shared = [
            {"id": f.id, "title": f.title, "filename": f.filename, "url": f"{self.base_url}/files/{f.id}"}
            for f in completed
        ]
        for channel in resolved:
            self._add_message(
                Message(
                    ts=self._next_ts(),
                    channel=channel,
                    user=self.bot_user_id,
                    text=str(params.get("initial_comment") or ""),
                    thread_ts=str(thread_ts) if thread_ts else None,
                    files=[dict(f) for f in shared],
                    via="files",
                )
            )
        return {"files": [self._file_json(f) for f in completed]}

    async def _handle_upload(self, request: Request) -> Response:
        stored = self.files.get(request.path_params["file_id"])
        if stored is None:
            return PlainTextResponse("file_not_found", status_code=404)
        # slack_sdk posts the raw bytes (application/octet-stream); that is the only form accepted here.
        stored.content = await request.body()
        return PlainTextResponse(f"OK - {len(stored.content)}")

    async def _handle_file(self, request: Request) -> Response:
        stored = self.files.get(request.path_params["file_id"])
        if stored is None or stored.content is None:
            return PlainTextResponse("file_not_found", status_code=404)
        mimetype = mimetypes.guess_type(stored.filename)[0] or "application/octet-stream"
        return Response(stored.content, media_type=mimetype)

    # ------------------------------------------------------------------ response_url

    async def _handle_response_url(self, request: Request) -> Response:
        raw = await request.body()
        body = _parse_response_body(raw, request.headers.get("content-type", ""))
        self.calls.append(ApiCall(method="response_url", params=body))
        failure = self._take_failure("response_url")
        if failure is not None:
            return failure
        entry = self._response_urls.get(request.path_params["token"])
        if entry is None:
            return PlainTextResponse("invalid_token", status_code=404)
        if self.clock() - entry.created > RESPONSE_URL_TTL_SECONDS:
            return PlainTextResponse("expired_url", status_code=404)
        if entry.uses >= RESPONSE_URL_MAX_USES:
            return PlainTextResponse("used_url", status_code=404)
        entry.uses += 1

        original = self._find_message(entry.channel_id, entry.original_ts) if entry.original_ts else None
        if _truthy(body.get("delete_original")):
            if original is not None:
                self.messages.remove(original)
                self._notify()
            return PlainTextResponse("ok")

        text = str(body.get("text") or "")
        try:
            blocks = _parse_blocks(body.get("blocks"), limit=50)
        except SlackApiFailure:
            return PlainTextResponse("invalid_blocks", status_code=400)
        if not text and not blocks:
            return PlainTextResponse("no_text", status_code=400)
        # replace_original only means something for clicks; on a slash command's response_url Slack
        # ignores it and posts a new message.
        if _truthy(body.get("replace_original")) and original is not None:
            original.text = text
            original.blocks = blocks
            original.edits += 1
            self._notify()
            return PlainTextResponse("ok")
        in_channel = body.get("response_type") == "in_channel"
        thread_ts = body.get("thread_ts") or None
        self._add_message(
            Message(
                ts=self._next_ts(),
                channel=entry.channel_id,
                user=self.bot_user_id,
                text=text,
                blocks=blocks,
                kind="message" if in_channel else "ephemeral",
                ephemeral_to=None if in_channel else entry.user_id,
                thread_ts=str(thread_ts) if thread_ts else None,
                via="response_url",
            )
        )
        return PlainTextResponse("ok")

    # ------------------------------------------------------------------ console

    async def _handle_console_page(self, request: Request) -> Response:
        return HTMLResponse(_CONSOLE_HTML.read_text(encoding="utf-8"))

    def console_state(self, user_id: str) -> dict[str, Any]:
        """What the console shows `user_id`: people, channels, visible messages and their home tab."""
        messages = []
        for m in self.messages:
            if self._is_visible(m, user_id):
                data = asdict(m)
                data["user_name"] = self.bot_name if m.user == self.bot_user_id else self.users.get(m.user, m.user)
                data["is_bot"] = m.user == self.bot_user_id
                messages.append(data)
        return {
            "team": {"id": self.team_id, "domain": TEAM_DOMAIN},
            "bot": {"id": self.bot_user_id, "name": self.bot_name},
            "users": [{"id": uid, "name": name} for uid, name in self.users.items()],
            "channels": [{"id": cid, "name": name} for cid, name in self.channels.items()],
            "dm": self._dm_id(user_id) if user_id in self.users else None,
            "messages": messages,
            "home": self.home_views.get(user_id),
            "modals": [dict(v) for v in self.user_views(user_id)],  # bottom to top, with errors
        }

    async def _handle_console_state(self, request: Request) -> Response:
        user_id = request.query_params.get("user") or next(iter(self.users), "")
        return JSONResponse(self.console_state(user_id))

    async def _handle_console_command_forms(self, request: Request) -> Response:
        """Unsigned slash-command forms with live response URLs, for a load generator that signs and sends
        them itself (bench/ack_latency.py), so that measuring is not slowed by this server's own work."""
        data = await _json_object(request)
        count = min(int(data.get("count") or 1), 1000)
        forms = [
            self.slash_command_form(
                user_id=str(data.get("user_id") or ""),
                channel_id=str(data.get("channel_id") or ""),
                command=str(data.get("command") or ""),
                text=str(data.get("text") or ""),
            )
            for _ in range(count)
        ]
        return JSONResponse({"forms": forms})

    async def _handle_console_command(self, request: Request) -> Response:
        data = await _json_object(request)
        user_id = str(data.get("user_id") or "")
        channel_id = str(data.get("channel_id") or "")
        line = str(data.get("text") or "").strip()
        if not line.startswith("/") or len(line) < 2:
            return JSONResponse({"status": 400, "error": "type a slash command, e.g. /cluster list"}, 400)
        command, _, text = line.partition(" ")
        try:
            response = await self.send_command(
                user_id=user_id, channel_id=channel_id, command=command, text=text.strip()
            )
        except (httpx.HTTPError, RuntimeError) as error:
            return JSONResponse({"status": 502, "error": f"could not reach the bot: {error!r}"}, 502)
        return JSONResponse({"status": response.status_code, "body": response.text[:500]})

    async def _handle_console_action(self, request: Request) -> Response:
        data = await _json_object(request)
        user_id = str(data.get("user_id") or "")
        message = self._find_message(str(data.get("channel") or ""), str(data.get("ts") or ""))
        if message is None or not self._is_visible(message, user_id):
            return JSONResponse({"status": 404, "error": "message not found"}, 404)
        value = data.get("value")
        try:
            response = await self.click(
                user_id=user_id,
                message=message,
                action_id=str(data.get("action_id") or ""),
                value=None if value is None else str(value),
            )
        except ValueError as error:
            return JSONResponse({"status": 400, "error": str(error)}, 400)
        except (httpx.HTTPError, RuntimeError) as error:
            return JSONResponse({"status": 502, "error": f"could not reach the bot: {error!r}"}, 502)
        return JSONResponse({"status": response.status_code, "body": response.text[:500]})

    async def _handle_console_view_submit(self, request: Request) -> Response:
        data = await _json_object(request)
        raw = data.get("values") or {}
        if not isinstance(raw, dict) or not all(isinstance(v, dict) for v in raw.values()):
            return JSONResponse({"status": 400, "error": "values must be {block_id: {action_id: text}}"}, 400)
        values = {str(b): {str(a): str(t) for a, t in typed.items() if t is not None} for b, typed in raw.items()}
        try:
            response = await self.submit_view(
                user_id=str(data.get("user_id") or ""), view_id=str(data.get("view_id") or ""), values=values
            )
        except ValueError as error:
            return JSONResponse({"status": 400, "error": str(error)}, 400)
        except (httpx.HTTPError, RuntimeError) as error:
            return JSONResponse({"status": 502, "error": f"could not reach the bot: {error!r}"}, 502)
        return JSONResponse({"status": response.status_code, "body": response.text[:500]})

    async def _handle_console_view_close(self, request: Request) -> Response:
        data = await _json_object(request)
        try:
            response = await self.close_view(
                user_id=str(data.get("user_id") or ""), view_id=str(data.get("view_id") or "")
            )
        except ValueError as error:
            return JSONResponse({"status": 400, "error": str(error)}, 400)
        except (httpx.HTTPError, RuntimeError) as error:
            return JSONResponse({"status": 502, "error": f"could not reach the bot: {error!r}"}, 502)
        if response is None:  # no view_closed sent: nothing for the bot to answer
            return JSONResponse({"status": 200, "body": ""})
        return JSONResponse({"status": response.status_code, "body": response.text[:500]})

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await self.aclose()


# ---------------------------------------------------------------------- parsing helpers


async def _request_params(request: Request) -> dict[str, Any]:
    """Query string, form body and JSON body merged: slack_sdk uses all three depending on the method."""
    params: dict[str, Any] = dict(request.query_params)
    raw = await request.body()
    if not raw:
        return params
    content_type = request.headers.get("content-type", "")
    if "json" in content_type:
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            params.update(parsed)
    elif "x-www-form-urlencoded" in content_type:
        params.update(parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True))
    return params


def _parse_response_body(raw: bytes, content_type: str) -> dict[str, Any]:
    text = raw.decode("utf-8", "replace")
    if "x-www-form-urlencoded" in content_type:
        form = dict(parse_qsl(text, keep_blank_values=True))
        text = form.get("payload", "")
    try:
        parsed = json.loads(text) if text else {}
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


async def _json_object(request: Request) -> dict[str, Any]:
    try:
        parsed = json.loads(await request.body() or b"{}")
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _parse_json_value(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def _truthy(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.lower() in ("true", "1"))


def _as_blocks(value: Any) -> list[dict[str, Any]]:
    try:
        return _parse_blocks(value, limit=100)
    except SlackApiFailure:
        return []


def _parse_blocks(value: Any, *, limit: int) -> list[dict[str, Any]]:
    """Blocks from a list or a JSON string, checked against the Block Kit limits Slack enforces."""
    if value is None or value == "":
        return []
    blocks = _parse_json_value(value)
    if not isinstance(blocks, list) or not all(isinstance(b, dict) for b in blocks):
        raise SlackApiFailure("invalid_blocks", errors=["blocks must be a JSON array of objects"])
    errors = _block_errors(blocks, limit=limit)
    if errors:
        raise SlackApiFailure("invalid_blocks", errors=errors)
    return blocks


def _text_of(obj: Any) -> str:
    if isinstance(obj, dict):
        return str(obj.get("text", ""))
    return ""


def _block_errors(blocks: list[dict[str, Any]], *, limit: int) -> list[str]:
    """The subset of Slack's Block Kit validation that catches the usual mistakes (see docs limits)."""
    errors: list[str] = []
    if len(blocks) > limit:
        errors.append(f"no more than {limit} items allowed [json-pointer:/blocks]")

    def check(cond: bool, message: str, pointer: str) -> None:
        if not cond:
            errors.append(f"{message} [json-pointer:{pointer}]")

    for i, block in enumerate(blocks):
        at = f"/blocks/{i}"
        kind = block.get("type")
        check(isinstance(kind, str), "missing required field: type", at)
        if "block_id" in block:
            check(len(str(block["block_id"])) <= 255, "must be less than 256 characters", f"{at}/block_id")
        if kind == "header":
            check(0 < len(_text_of(block.get("text"))) <= 150, "must be 1-150 characters", f"{at}/text/text")
        elif kind == "section":
            text, fields = block.get("text"), block.get("fields")
            check(text is not None or bool(fields), "must provide text or fields", at)
            check(len(_text_of(text)) <= 3000, "must be less than 3001 characters", f"{at}/text/text")
            if fields is not None:
                check(
                    isinstance(fields, list) and len(fields) <= 10,
                    "no more than 10 items allowed",
                    f"{at}/fields",
                )
            if isinstance(block.get("accessory"), dict):
                errors.extend(_element_errors(block["accessory"], f"{at}/accessory"))
        elif kind == "actions":
            elements = block.get("elements")
            check(
                isinstance(elements, list) and 0 < len(elements) <= 25,
                "must have 1-25 elements",
                f"{at}/elements",
            )
            for j, element in enumerate(elements if isinstance(elements, list) else []):
                errors.extend(_element_errors(element, f"{at}/elements/{j}"))
        elif kind == "context":
            elements = block.get("elements")
            check(
                isinstance(elements, list) and 0 < len(elements) <= 10,
                "must have 1-10 elements",
                f"{at}/elements",
            )
        elif kind == "input":
            check(0 < len(_text_of(block.get("label"))) <= 2000, "must be 1-2000 characters", f"{at}/label/text")
            element = block.get("element")
            if isinstance(element, dict) and isinstance(element.get("type"), str):
                errors.extend(_element_errors(element, f"{at}/element"))
            else:
                errors.append(f"missing required field: element [json-pointer:{at}]")
        elif kind == "image":
            check(bool(block.get("image_url") or block.get("slack_file")), "missing image_url", at)
            check(bool(block.get("alt_text")), "missing required field: alt_text", at)
    return errors


def _messages(errors: list[str]) -> dict[str, list[str]]:
    """Slack's `response_metadata` for invalid_arguments: one "[ERROR] ..." line per problem."""
    return {"messages": [f"[ERROR] {e}" for e in errors]}


def _modal_content(value: Any) -> dict[str, Any]:
    """The fields of a modal view object as Slack keeps them, or invalid_arguments with Slack's messages."""
    view = _parse_json_value(value)
    if not isinstance(view, dict):
        problem = "missing required field: view" if value is None else "must be a JSON object [json-pointer:/view]"
        raise SlackApiFailure("invalid_arguments", response_metadata=_messages([problem]))
    errors = _modal_errors(view)
    if errors:
        raise SlackApiFailure("invalid_arguments", response_metadata=_messages(errors))
    return {
        "type": "modal",
        "title": view["title"],
        "submit": view.get("submit"),
        "close": view.get("close"),
        "blocks": _with_ids(view["blocks"]),
        "private_metadata": str(view.get("private_metadata") or ""),
        "callback_id": str(view.get("callback_id") or ""),
        "external_id": str(view.get("external_id") or ""),
        "clear_on_close": _truthy(view.get("clear_on_close")),
        "notify_on_close": _truthy(view.get("notify_on_close")),
    }


def _modal_errors(view: dict[str, Any]) -> list[str]:
    """What Slack rejects in a modal view object (limits from the view reference), json-pointers under /view."""
    errors: list[str] = []
    if view.get("type") != "modal":
        errors.append("must be modal [json-pointer:/view/type]")
    for key, required in (("title", True), ("submit", False), ("close", False)):
        text = view.get(key)
        if text is None:
            if required:
                errors.append(f"missing required field: {key} [json-pointer:/view]")
        elif not isinstance(text, dict) or text.get("type") != "plain_text":
            errors.append(f"must be a plain_text text object [json-pointer:/view/{key}]")
        elif not 0 < len(_text_of(text)) <= MODAL_TEXT_MAX:
            errors.append(f"must be 1-{MODAL_TEXT_MAX} characters [json-pointer:/view/{key}/text]")
    for key, limit in (
        ("callback_id", VIEW_ID_FIELD_MAX),
        ("external_id", VIEW_ID_FIELD_MAX),
        ("private_metadata", PRIVATE_METADATA_MAX),
    ):
        if len(str(view.get(key) or "")) > limit:
            errors.append(f"must be less than {limit + 1} characters [json-pointer:/view/{key}]")
    blocks = view.get("blocks")
    if not isinstance(blocks, list) or not all(isinstance(b, dict) for b in blocks):
        errors.append("missing required field: blocks [json-pointer:/view]")
        return errors
    errors.extend(
        e.replace("[json-pointer:/blocks", "[json-pointer:/view/blocks")
        for e in _block_errors(blocks, limit=MODAL_BLOCKS_MAX)
    )
    seen: set[str] = set()
    for i, block in enumerate(blocks):
        if "block_id" in block:
            if str(block["block_id"]) in seen:
                errors.append(f"duplicate block_id [json-pointer:/view/blocks/{i}/block_id]")
            seen.add(str(block["block_id"]))
    if view.get("submit") is None and any(b.get("type") == "input" for b in blocks):
        errors.append("must provide submit when the view has input blocks [json-pointer:/view/submit]")
    return errors


def _with_ids(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Blocks as Slack returns them: every block has a block_id and every input element an action_id.

    Slack makes up random ids; these are derived from the content instead, so tests are repeatable and an
    unchanged block in the same place keeps its id (and what was typed in it) across views.update.
    """

    def derived(index: int, obj: dict[str, Any]) -> str:
        return hashlib.sha1(json.dumps([index, obj], sort_keys=True).encode()).hexdigest()[:5]

    result = []
    for index, block in enumerate(blocks):
        block = dict(block)
        block.setdefault("block_id", derived(index, block))
        element = block.get("element")
        if block.get("type") == "input" and isinstance(element, dict) and "action_id" not in element:
            block["element"] = {**element, "action_id": derived(index, element)}
        result.append(block)
    return result


def _submission_state(
    blocks: list[dict[str, Any]], values: Mapping[str, Mapping[str, str]]
) -> dict[str, dict[str, dict[str, Any]]]:
    """`view.state.values` after the user typed `values` into the view's input blocks, shaped as Slack does:
    {block_id: {action_id: {"type": "plain_text_input", "value": "..."}}}, with every input present
    (untouched ones keep their initial value, or null)."""
    inputs = {
        str(b["block_id"]): b["element"]
        for b in blocks
        if b.get("type") == "input" and isinstance(b.get("element"), dict)
    }
    for block_id, by_action in values.items():
        for action_id in by_action:
            element = inputs.get(block_id)
            if element is None or element.get("action_id") != action_id:
                raise ValueError(f"no input element {block_id}/{action_id} in the view; inputs: {_input_ids(inputs)}")
    state: dict[str, dict[str, dict[str, Any]]] = {}
    for block in blocks:
        block_id = str(block.get("block_id"))
        if block_id not in inputs:
            continue
        element = inputs[block_id]
        kind, action_id = str(element.get("type")), str(element.get("action_id"))
        typed = values.get(block_id, {}).get(action_id)
        field_name = _STATE_FIELDS.get(kind)
        if field_name is None:
            if typed is not None:
                raise ValueError(f"{kind} inputs are not emulated (block {block_id})")
            state[block_id] = {action_id: {"type": kind}}
            continue
        value: Any
        if typed is None:
            value = element.get("initial_" + field_name.removeprefix("selected_"))
        elif typed == "":
            value = None  # Slack sends null for an emptied field, never ""
        elif field_name == "selected_option":
            value = _option(element, typed)
        else:
            value = typed
        # Slack's client refuses to submit these, so the bot would never see them.
        if value is None and not block.get("optional"):
            raise ValueError(f"input {block_id} is required; Slack would not submit the view without it")
        if kind == "plain_text_input" and isinstance(value, str):
            low, high = int(element.get("min_length") or 0), int(element.get("max_length") or 3000)
            if not low <= len(value) <= high:
                raise ValueError(f"input {block_id} takes {low}-{high} characters, got {len(value)}")
        state[block_id] = {action_id: {"type": kind, field_name: value}}
    return state


def _input_ids(inputs: Mapping[str, dict[str, Any]]) -> list[str]:
    return [f"{block_id}/{element.get('action_id')}" for block_id, element in inputs.items()]


def _option(element: dict[str, Any], value: str) -> dict[str, Any]:
    options = list(element.get("options") or [])
    for group in element.get("option_groups") or []:
        options.extend(group.get("options") or [])
    for option in options:
        if isinstance(option, dict) and option.get("value") == value:
            return option
    raise ValueError(f"no option with value {value!r} in {element.get('action_id')}")


def _element_errors(element: Any, at: str) -> list[str]:
    if not isinstance(element, dict):
        return [f"must be an object [json-pointer:{at}]"]
    errors = []
    if element.get("type") == "button":
        if not 0 < len(_text_of(element.get("text"))) <= 75:
            errors.append(f"must be 1-75 characters [json-pointer:{at}/text/text]")
        if len(str(element.get("value", ""))) > 2000:
            errors.append(f"must be less than 2001 characters [json-pointer:{at}/value]")
    if len(str(element.get("action_id", ""))) > 255:
        errors.append(f"must be less than 256 characters [json-pointer:{at}/action_id]")
    return errors


def _find_action(blocks: list[dict[str, Any]], action_id: str) -> tuple[str, dict[str, Any]] | None:
    """(block_id, element) of the interactive element `action_id` in actions blocks or section accessories."""
    for index, block in enumerate(blocks):
        candidates: list[Any] = []
        if block.get("type") == "actions":
            candidates = list(block.get("elements") or [])
        elif isinstance(block.get("accessory"), dict):
            candidates = [block["accessory"]]
        for element in candidates:
            if isinstance(element, dict) and element.get("action_id") == action_id:
                # Slack gives blocks without a block_id a random one; derive a stable one instead.
                block_id = block.get("block_id") or hashlib.sha1(f"{index}:{action_id}".encode()).hexdigest()[:5]
                return str(block_id), element
    return None
