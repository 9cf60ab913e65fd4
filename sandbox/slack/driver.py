"""The local Slack's user driver (Slack -> bot): slash commands, button clicks and modal submissions,
delivered to the bot's events URL signed exactly as Slack signs them, and the bot's answers applied."""

import asyncio
import base64
import hashlib
import json
import logging
import re
import secrets
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx
from slack_sdk.signature import SignatureVerifier

from bot.tls import tls_context
from sandbox.slack.blocks import as_blocks, modal_content, parse_response_body
from sandbox.slack.workspace import (
    ACK_DEADLINE_SECONDS,
    API_APP_ID,
    EVENT_TRACES_KEPT,
    TEAM_DOMAIN,
    VERIFICATION_TOKEN,
    VIEW_STACK_MAX,
    DeliveryAttempt,
    EventTrace,
    Message,
    SlackApiFailure,
    Workspace,
)

logger = logging.getLogger(__name__)
# Where each input element keeps its value in `view.state.values` (view_submission payload reference).
STATE_FIELDS = {
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


# What Slack's mrkdwn-escaped text holds between < and >: a user, a channel, a special mention or a link.
_ANGLE = re.compile(r"<([^<>]*)>")


@dataclass
class EventDelivery:
    """One Events API delivery: the bot's answer, and what a retry (redeliver) sends again."""

    response: httpx.Response
    event_id: str
    ts: str
    body: str


class UserDriver(Workspace):
    """What a person does in Slack, as the HTTP requests Slack sends the bot for it."""

    # Slack retries a failed event delivery 3 times: nearly at once, after 1 minute and after 5 minutes. The
    # sandbox waits 3 s, 10 s and 30 s instead so that a person at the console sees the retries happen.
    retry_delays: tuple[float, ...] = (3.0, 10.0, 30.0)
    # An event is failed when the app has not answered 2xx within this long (Slack: 3 s).
    ack_deadline: float = ACK_DEADLINE_SECONDS

    @property
    def bot_mention(self) -> str:
        """How a mention of the bot appears in the text Slack sends: `<@U0PITCREW>`."""
        return f"<@{self.bot_user_id}>"

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
        payload = self.click_payload(user_id=user_id, message=message, action_id=action_id, value=value)
        body = urlencode({"payload": json.dumps(payload)})
        return await self._deliver(body, timestamp=timestamp, signing_secret=None)

    def click_payload(
        self, *, user_id: str, message: Message, action_id: str, value: str | None = None
    ) -> dict[str, Any]:
        """The `block_actions` payload Slack sends for that click, with a response URL of its own; click()
        delivers it, a listener test hands it to the listener as its body."""
        found = find_action(message.blocks, action_id)
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
                # Slack names the thread a clicked message is in (a reply to a mention, say).
                **({"thread_ts": message.thread_ts} if message.thread_ts else {}),
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
        return payload

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
        payload = self.submission_payload(user_id=user_id, view_id=view_id, values=values)
        body = urlencode({"payload": json.dumps(payload)})
        response = await self._deliver(body, timestamp=timestamp, signing_secret=None)
        self._apply_view_response(stored, response)
        self._notify()
        return response

    def submission_payload(
        self, *, user_id: str, view_id: str, values: Mapping[str, Mapping[str, str]]
    ) -> dict[str, Any]:
        """The `view_submission` payload for `values` typed into modal `view_id` (kept as the view's state);
        submit_view delivers it, a listener test hands it to the listener as its body."""
        stored = self._user_view(user_id, view_id)
        stored["state"] = {"values": submission_state(stored["blocks"], values)}
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
        return payload

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

    async def open_home(self, *, user_id: str, tab: str = "home") -> httpx.Response:
        """Open the app's Home tab as `user_id`: the `app_home_opened` event Slack sends (Events API, JSON),
        with the view the user was last shown, if any."""
        event: dict[str, Any] = {
            "type": "app_home_opened",
            "user": user_id,
            "channel": self._dm_id(user_id),
            "tab": tab,
            "event_ts": self._next_ts(),
        }
        if user_id in self.home_views:
            event["view"] = self.home_views[user_id]
        envelope = self._event_envelope(event, event_id=new_event_id(), team_id=self.team_id)
        return await self._deliver(json.dumps(envelope), timestamp=None, signing_secret=None, json_body=True)

    async def send_mention(
        self,
        *,
        user_id: str,
        channel_id: str,
        text: str,
        thread_ts: str | None = None,
        event_id: str | None = None,
        shared_envelope: bool = False,
    ) -> EventDelivery:
        """`user_id` posts `text` in `channel_id` (in the thread `thread_ts` if given) mentioning the bot: the
        message appears in the channel and Slack delivers `app_mention`. `text` is as Slack sends it, with the
        bot written `<@U…>` (see bot_mention).

        `shared_envelope=True` builds the other shape Slack sends for some shared-channel events: envelope
        `team_id` and `event.team` are the actor's team, and there is no `user_team` / `source_team`.
        """
        event, team_id = self.post_mention(
            user_id=user_id, channel_id=channel_id, text=text, thread_ts=thread_ts, shared_envelope=shared_envelope
        )
        return await self.send_event(event, event_id=event_id, team_id=team_id)

    async def send_dm(
        self, *, user_id: str, text: str, event_id: str | None = None, thread_ts: str | None = None
    ) -> EventDelivery:
        """`user_id` writes `text` in their direct message with the bot: a `message` event with
        `channel_type: im` (what the `message.im` subscription delivers)."""
        return await self.send_event(self.post_dm(user_id=user_id, text=text, thread_ts=thread_ts), event_id=event_id)

    def post_mention(
        self,
        *,
        user_id: str,
        channel_id: str,
        text: str,
        thread_ts: str | None = None,
        shared_envelope: bool = False,
    ) -> tuple[dict[str, Any], str | None]:
        """The person's message shown in the channel, and the `app_mention` event Slack sends for it with the
        envelope team it goes in (None: the host team); send_mention delivers it."""
        ts = self._post_user_message(
            user_id=user_id, channel_id=channel_id, text=text, thread_ts=thread_ts, via="mention"
        )
        team = self.team_of(user_id)
        event = self._typed_event("app_mention", user_id=user_id, channel_id=channel_id, text=text, ts=ts)
        if thread_ts:
            event["thread_ts"] = thread_ts
        if shared_envelope:
            del event["user_team"], event["source_team"]
        return event, (team if shared_envelope else None)

    def post_dm(self, *, user_id: str, text: str, thread_ts: str | None = None) -> dict[str, Any]:
        """The person's message shown in their DM with the bot, and the `message` (`channel_type: im`) event
        Slack sends for it; send_dm delivers it."""
        channel_id = self._dm_id(user_id)
        ts = self._post_user_message(user_id=user_id, channel_id=channel_id, text=text, thread_ts=thread_ts, via="dm")
        event = self._typed_event("message", user_id=user_id, channel_id=channel_id, text=text, ts=ts)
        event["channel_type"] = "im"
        if thread_ts:
            event["thread_ts"] = thread_ts
        return event

    def _typed_event(self, kind: str, *, user_id: str, channel_id: str, text: str, ts: str) -> dict[str, Any]:
        """The fields Slack puts in an event about a message a person typed."""
        team = self.team_of(user_id)
        return {
            "client_msg_id": str(uuid.uuid4()),
            "type": kind,
            "text": text,
            "user": user_id,
            "ts": ts,
            "blocks": [rich_text_block(text)],
            "team": team,
            "user_team": team,
            "source_team": team,
            "channel": channel_id,
            "event_ts": ts,
        }

    async def send_event(
        self, event: dict[str, Any], *, event_id: str | None = None, team_id: str | None = None
    ) -> EventDelivery:
        """Deliver any event (message_changed, bot_message, ...) in an Events API envelope, signed; `team_id`
        is the envelope's team (the host team unless given)."""
        body, event_id = self.event_body(event, event_id=event_id, team_id=team_id)
        response = await self._deliver(body, timestamp=None, signing_secret=None, json_body=True)
        return EventDelivery(response=response, event_id=event_id, ts=str(event.get("ts", "")), body=body)

    def event_body(
        self, event: dict[str, Any], *, event_id: str | None = None, team_id: str | None = None
    ) -> tuple[str, str]:
        """(JSON body, event_id) of the envelope Slack delivers `event` in."""
        envelope = self._event_envelope(event, event_id=event_id or new_event_id(), team_id=team_id or self.team_id)
        return json.dumps(envelope), str(envelope["event_id"])

    async def send_event_with_retries(
        self, event: dict[str, Any], *, event_id: str | None = None, team_id: str | None = None
    ) -> EventTrace:
        """Deliver `event` as Slack does when the app is slow or failing: an attempt that gets no 2xx answer
        within 3 s has failed, and Slack tries again (same body, `X-Slack-Retry-Num` 1, 2, 3) after each of
        `retry_delays`. Returns once the first attempt is over; the retries run in the background and are
        recorded in the returned trace (also in `event_traces`)."""
        body, event_id = self.event_body(event, event_id=event_id, team_id=team_id)
        trace = EventTrace(event_id=event_id, ts=str(event.get("ts", "")), user=str(event.get("user", "")), body=body)
        self.event_traces.append(trace)
        del self.event_traces[:-EVENT_TRACES_KEPT]
        if not await self._attempt(trace):
            task = asyncio.create_task(self._retry(trace))
            self._retry_tasks.add(task)
            task.add_done_callback(self._retry_tasks.discard)
        return trace

    async def _retry(self, trace: EventTrace) -> None:
        for delay in self.retry_delays:
            trace.next_retry_in = delay
            self._notify()
            await asyncio.sleep(delay)
            if await self._attempt(trace):
                return
        trace.next_retry_in = None
        trace.gave_up = True
        self._notify()

    async def _attempt(self, trace: EventTrace) -> bool:
        """One delivery of `trace`'s body; True when the app answered 2xx within the deadline."""
        retry_num = len(trace.attempts)
        headers = {}
        if retry_num:
            headers = {"X-Slack-Retry-Num": str(retry_num), "X-Slack-Retry-Reason": trace.attempts[-1].reason or ""}
        started = time.monotonic()
        status: int | None = None
        reason: str | None = None
        try:
            response = await self._deliver(
                trace.body,
                timestamp=None,
                signing_secret=None,
                json_body=True,
                headers=headers,
                timeout=self.ack_deadline,
            )
        except httpx.TimeoutException:
            reason = "http_timeout"
        except httpx.HTTPError:
            reason = "connection_failed"
        else:
            status = response.status_code
            reason = None if 200 <= status < 300 else "http_error"
        trace.attempts.append(
            DeliveryAttempt(retry_num=retry_num, status=status, reason=reason, elapsed=time.monotonic() - started)
        )
        trace.next_retry_in = None
        trace.delivered = reason is None
        self._notify()
        return trace.delivered

    async def redeliver(
        self, delivery: EventDelivery, *, retry_num: int = 1, reason: str = "http_timeout"
    ) -> httpx.Response:
        """Send the same event again as Slack retries one it thinks was not received: the same body (same
        event_id), freshly signed, with `X-Slack-Retry-Num` and `X-Slack-Retry-Reason`."""
        return await self._deliver(
            delivery.body,
            timestamp=None,
            signing_secret=None,
            json_body=True,
            headers={"X-Slack-Retry-Num": str(retry_num), "X-Slack-Retry-Reason": reason},
        )

    def _event_envelope(self, event: dict[str, Any], *, event_id: str, team_id: str) -> dict[str, Any]:
        """The Events API `event_callback` envelope around `event`, as Slack sends it to the app."""
        user = event.get("user")
        channel = str(event.get("channel") or "")
        external = isinstance(user, str) and user in self.users and self.is_external(user)
        return {
            "token": VERIFICATION_TOKEN,
            "team_id": team_id,
            "api_app_id": API_APP_ID,
            "event": event,
            "type": "event_callback",
            "event_id": event_id,
            "event_time": int(self.clock()),
            # The installation the event is for: always ours, whoever acted.
            "authorizations": [{"team_id": self.team_id, "user_id": self.bot_user_id, "is_bot": True}],
            "is_ext_shared_channel": external,
            "event_context": event_context(str(event.get("type", "")), team_id, channel),
        }

    def _post_user_message(self, *, user_id: str, channel_id: str, text: str, thread_ts: str | None, via: str) -> str:
        """A person's message, visible to everyone in the channel (the DM: only that person); its ts."""
        if user_id not in self.users:
            raise ValueError(f"no user {user_id!r} in the workspace")
        channel = self._resolve_channel(channel_id)
        message = Message(ts=self._next_ts(), channel=channel, user=user_id, text=text, thread_ts=thread_ts, via=via)
        self._add_message(message)
        return message.ts

    async def click_home(self, *, user_id: str, action_id: str, value: str | None = None) -> httpx.Response:
        """Click the button `action_id` in `user_id`'s Home view: a `block_actions` from a view container, which
        (as in Slack) carries no response URL and no channel."""
        view = self.home_views.get(user_id)
        found = find_action(view["blocks"], action_id) if view else None
        if view is None or found is None:
            raise ValueError(f"no element with action_id={action_id!r} in the Home of {user_id}")
        block_id, element = found
        chosen = value if value is not None else element.get("value")
        action: dict[str, Any] = {
            "action_id": action_id,
            "block_id": block_id,
            "type": element.get("type", "button"),
            "action_ts": self._next_ts(),
            "text": element.get("text"),
        }
        if chosen is not None:
            action["value"] = chosen
        payload: dict[str, Any] = {
            "type": "block_actions",
            "user": self._user_ref(user_id),
            "api_app_id": API_APP_ID,
            "token": VERIFICATION_TOKEN,
            "container": {"type": "view", "view_id": view["id"]},
            "trigger_id": self._trigger_id(user_id),
            "team": {"id": self.team_id, "domain": TEAM_DOMAIN},
            "enterprise": None,
            "is_enterprise_install": False,
            "view": view,
            "actions": [action],
        }
        body = urlencode({"payload": json.dumps(payload)})
        return await self._deliver(body, timestamp=None, signing_secret=None)

    async def aclose(self) -> None:
        """Close the outgoing HTTP client (also done when the ASGI app shuts down); pending retries stop."""
        for task in list(self._retry_tasks):
            task.cancel()
        client, self._http = self._http, None
        # A client from another (possibly closed) loop cannot be closed from here; just drop it.
        if client is not None and self._http_loop is asyncio.get_running_loop():
            await client.aclose()

    def _client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        # A client is bound to the loop that created it; tests may reuse a LocalSlack across loops.
        if self._http is None or self._http_loop is not loop:
            self._http = httpx.AsyncClient(timeout=10.0, verify=tls_context())
            self._http_loop = loop
        return self._http

    async def _deliver(
        self,
        body: str,
        *,
        timestamp: int | None,
        signing_secret: str | None,
        json_body: bool = False,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> httpx.Response:
        if not self.events_url:
            raise RuntimeError("LocalSlack.events_url is not set; point it at the bot's /slack/events URL")
        sent = signed_headers(
            body,
            secret=signing_secret if signing_secret is not None else self.signing_secret,
            timestamp=timestamp if timestamp is not None else int(self.clock()),
        )
        if json_body:  # an Events API delivery
            sent["Content-Type"] = "application/json"
        sent.update(headers or {})
        started = time.monotonic()
        response = await self._client().post(
            self.events_url,
            content=body.encode(),
            headers=sent,
            timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT,
        )
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
        blocks = as_blocks(payload.get("blocks"))
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

    def _apply_view_response(self, stored: dict[str, Any], response: httpx.Response) -> None:
        """What Slack does with the bot's answer to a view_submission (docs: modals, "Responding to submissions")."""
        if stored["id"] not in self.open_views:
            return  # closed meanwhile
        user_id = stored["user_id"]
        body = response.content.strip()
        answer = parse_response_body(body, "application/json")  # {} unless a JSON object
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
                content = modal_content(answer.get("view"))
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


def new_event_id() -> str:
    return f"Ev{secrets.token_hex(5).upper()}"


def event_context(event_type: str, team_id: str, channel: str) -> str:
    """An opaque `event_context` shaped like Slack's ("4-" + base64 of a small JSON)."""
    raw = json.dumps({"et": event_type, "tid": team_id, "aid": API_APP_ID, "cid": channel}, separators=(",", ":"))
    return "4-" + base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def rich_text_block(text: str) -> dict[str, Any]:
    """The `rich_text` block Slack's client attaches to a typed message: user and channel mentions,
    links and plain text, as separate elements."""
    elements: list[dict[str, Any]] = []
    position = 0
    for match in _ANGLE.finditer(text):
        if match.start() > position:
            elements.append({"type": "text", "text": unescape(text[position : match.start()])})
        inner = match.group(1)
        target, _, label = inner.partition("|")
        if target.startswith("@"):
            elements.append({"type": "user", "user_id": target[1:]})
        elif target.startswith("#"):
            elements.append({"type": "channel", "channel_id": target[1:]})
        elif target.startswith("!"):
            elements.append({"type": "broadcast", "range": target[1:]})
        else:
            link: dict[str, Any] = {"type": "link", "url": target}
            if label:
                link["text"] = unescape(label)
            elements.append(link)
        position = match.end()
    if position < len(text):
        elements.append({"type": "text", "text": unescape(text[position:])})
    return {
        "type": "rich_text",
        "block_id": hashlib.sha1(text.encode()).hexdigest()[:5],
        "elements": [{"type": "rich_text_section", "elements": elements}],
    }


def unescape(text: str) -> str:
    """Slack escapes &, < and > in message text; rich_text elements hold the characters themselves."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def signed_headers(body: str, *, secret: str, timestamp: int) -> dict[str, str]:
    """Headers of a request from Slack: v0 HMAC-SHA256 over `v0:{timestamp}:{body}`."""
    signature = SignatureVerifier(secret).generate_signature(timestamp=str(timestamp), body=body)
    return {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": str(timestamp),
        "X-Slack-Signature": signature or "",
        "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
    }


def submission_state(
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
                raise ValueError(f"no input element {block_id}/{action_id} in the view; inputs: {input_ids(inputs)}")
    state: dict[str, dict[str, dict[str, Any]]] = {}
    for block in blocks:
        block_id = str(block.get("block_id"))
        if block_id not in inputs:
            continue
        element = inputs[block_id]
        kind, action_id = str(element.get("type")), str(element.get("action_id"))
        typed = values.get(block_id, {}).get(action_id)
        field_name = STATE_FIELDS.get(kind)
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
            value = option(element, typed)
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


def input_ids(inputs: Mapping[str, dict[str, Any]]) -> list[str]:
    return [f"{block_id}/{element.get('action_id')}" for block_id, element in inputs.items()]


def option(element: dict[str, Any], value: str) -> dict[str, Any]:
    options = list(element.get("options") or [])
    for group in element.get("option_groups") or []:
        options.extend(group.get("options") or [])
    for option in options:
        if isinstance(option, dict) and option.get("value") == value:
            return option
    raise ValueError(f"no option with value {value!r} in {element.get('action_id')}")


def find_action(blocks: list[dict[str, Any]], action_id: str) -> tuple[str, dict[str, Any]] | None:
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
