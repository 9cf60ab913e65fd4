"""The local Slack workspace's state: its people and channels, the messages and modals each person sees,
and the bookkeeping (timestamps, response URLs, triggers, injected failures) that its Web API, the user
driver and the console share."""

import asyncio
import contextlib
import logging
import mimetypes
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
from starlette.responses import JSONResponse, Response

logger = logging.getLogger(__name__)

# Fixed fake values for fields Slack sends but Bolt does not check.
VERIFICATION_TOKEN = "pitcrewlocalverificationtoken"
API_APP_ID = "A0PITCREW"
BOT_ID = "B0PITCREW"
TEAM_DOMAIN = "pitcrew-local"
# The name of the workspace Pitcrew is installed in (auth.test `team`, the console's header).
HOST_TEAM_NAME = "Pitcrew (local)"

# Slack's documented response_url limits: 5 uses within 30 minutes.
RESPONSE_URL_MAX_USES = 5
RESPONSE_URL_TTL_SECONDS = 30 * 60
# How long wait_for / wait_for_view wait by default: they return as soon as the message or modal is there,
# so this bounds only a failing wait, and it is generous for a loaded machine (CI, suites run side by side).
WAIT_SECONDS = 15.0
# Slack shows "operation_timeout" when a command or action is not acknowledged within 3 seconds.
ACK_DEADLINE_SECONDS = 3.0

# A trigger_id opens one modal, within 3 seconds of the interaction that produced it.
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

EVENT_TRACES_KEPT = 200  # the console shows the latest; older ones are dropped

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
class DeliveryAttempt:
    """One try at delivering an event: the app's HTTP status (None: no answer in time, or no connection), and
    why Slack counts it failed (`X-Slack-Retry-Reason` of the next try; None when it succeeded)."""

    retry_num: int
    status: int | None
    reason: str | None
    elapsed: float


@dataclass
class EventTrace:
    """An event and Slack's attempts to deliver it (send_event_with_retries)."""

    event_id: str
    ts: str
    user: str
    body: str
    attempts: list[DeliveryAttempt] = field(default_factory=list)
    delivered: bool = False
    gave_up: bool = False
    next_retry_in: float | None = None  # seconds, while a retry is waiting


@dataclass
class ApiCall:
    """One Web API (or response_url) request received, with its parameters minus the token."""

    method: str
    params: dict[str, Any]


@dataclass
class ResponseUrl:
    user_id: str
    channel_id: str
    created: float
    original_ts: str | None = None  # the clicked message, for replace_original / delete_original
    uses: int = 0


@dataclass
class Trigger:
    user_id: str
    created: float
    used: bool = False


@dataclass
class StoredFile:
    id: str
    filename: str
    length: int
    title: str = ""
    content: bytes | None = None
    created: int = 0


@dataclass
class InjectedFailure:
    status: int
    retry_after: int
    remaining: int


class SlackApiFailure(Exception):
    """An `ok: false` Web API answer, raised inside a method handler."""

    def __init__(self, error: str, **extra: Any) -> None:
        super().__init__(error)
        self.error = error
        self.extra = extra


class Workspace:
    """What the workspace holds, and the reads and writes of it that every side of the local Slack uses."""

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
        user_teams: Mapping[str, str] | None = None,
        teams: Mapping[str, str] | None = None,
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
        # Slack Connect: a user listed here belongs to another workspace (team) joined to this one's
        # shared channels; everyone else belongs to `team_id`. `teams` names each team for people.
        self.user_teams: dict[str, str] = dict(user_teams or {})
        self.teams: dict[str, str] = {team_id: HOST_TEAM_NAME, **(teams or {})}

        self.messages: list[Message] = []
        self.calls: list[ApiCall] = []
        self.home_views: dict[str, dict[str, Any]] = {}
        # Open modal views, view_id -> Slack's view object plus "user_id", "errors" ({block_id: message}
        # shown under inputs after a `response_action: errors`) and "response_error" (a reply Slack would
        # not accept). A user's views are in opening order, so the last one is on top.
        self.open_views: dict[str, dict[str, Any]] = {}
        self.files: dict[str, StoredFile] = {}

        self._response_urls: dict[str, ResponseUrl] = {}
        self._triggers: dict[str, Trigger] = {}
        self._failures: dict[str, InjectedFailure] = {}
        self._last_ts_micros = 0
        self._file_seq = 0
        self._view_seq = 0
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        # Events sent with Slack's retries (driver.send_event_with_retries), newest last, and their retry tasks.
        self.event_traces: list[EventTrace] = []
        self._retry_tasks: set[asyncio.Task[None]] = set()
        self._http: httpx.AsyncClient | None = None
        self._http_loop: asyncio.AbstractEventLoop | None = None

    @property
    def api_url(self) -> str:
        """What SLACK_API_URL (the WebClient's base_url) should be set to."""
        return f"{self.base_url}/api/"

    def team_of(self, user_id: str) -> str:
        """The team (workspace) `user_id` belongs to: their own, which for a Slack Connect member is not ours."""
        return self.user_teams.get(user_id, self.team_id)

    def is_external(self, user_id: str) -> bool:
        """Whether `user_id` is a Slack Connect member from another workspace (no slash commands of ours)."""
        return self.team_of(user_id) != self.team_id

    def team_name(self, team_id: str) -> str:
        return self.teams.get(team_id, team_id)

    def channel_messages(self, channel: str, *, visible_to: str | None = None) -> list[Message]:
        """Messages in `channel`, in order; with `visible_to`, only those that user would see."""
        return [
            m for m in self.messages if m.channel == channel and (visible_to is None or self._is_visible(m, visible_to))
        ]

    def fail_next(self, method: str, *, status: int = 429, retry_after: int = 1, count: int = 1) -> None:
        """Make the next `count` calls of `method` ("chat.update", "response_url", ...) fail with `status`."""
        self._failures[method] = InjectedFailure(status=status, retry_after=retry_after, remaining=count)

    def user_views(self, user_id: str) -> list[dict[str, Any]]:
        """`user_id`'s open modal views, bottom to top (the last one is what they see)."""
        return [v for v in self.open_views.values() if v["user_id"] == user_id]

    async def wait_for(
        self, predicate: Callable[[Message], bool], *, since: int = 0, timeout: float = WAIT_SECONDS
    ) -> Message:
        """The first message (present or yet to arrive, re-checked after edits) matching `predicate`.

        `since`: look only from this index of `messages` on (a count taken before acting), rather than asking
        `messages.index(m)` in the predicate, which compares whole messages and made long runs quadratic."""
        return await self._wait_until(
            lambda: next((m for m in self.messages[since:] if predicate(m)), None),
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
        self._triggers[trigger_id] = Trigger(user_id=user_id, created=now)
        return trigger_id

    def _new_response_url(self, *, user_id: str, channel_id: str, original_ts: str | None = None) -> str:
        token = secrets.token_urlsafe(18)
        self._response_urls[token] = ResponseUrl(
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
        # Slack sends the user's own team here, so for a Slack Connect member it is not the host team.
        return {"id": user_id, "username": handle, "name": handle, "team_id": self.team_of(user_id)}

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
            "team": self.team_of(message.user),
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

    def _file_json(self, stored: StoredFile) -> dict[str, Any]:
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
