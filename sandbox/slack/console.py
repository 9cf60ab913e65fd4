"""The local Slack's browser console (`GET /`, the page `pitcrew demo` opens): what a chosen person sees,
and their commands, clicks and submissions, sent through the user driver."""

import json
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from sandbox.slack.driver import UserDriver
from sandbox.slack.workspace import TEAM_DOMAIN, EventTrace, Message, SlackApiFailure

CONSOLE_HTML = Path(__file__).with_name("console.html")
SLACKBOT = "USLACKBOT"  # who speaks for Slack itself ("Only visible to you" notices)
# Slack's client sends a typed link as <URL>.
_URL = re.compile(r"https?://[^\s<>]+")
DELIVERIES_SHOWN = 5


def slack_text(typed: str, *, bot_name: str, bot_user_id: str) -> tuple[str, bool]:
    """What Slack's client sends for `typed`, and whether it mentions the bot: &, < and > escaped, links in
    <…>, and @Pitcrew (as picked from the autocomplete) written <@U…>."""
    text = typed.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _URL.sub(lambda m: f"<{m.group(0)}>", text)
    text, mentions = re.subn(rf"@{re.escape(bot_name)}\b", f"<@{bot_user_id}>", text, flags=re.IGNORECASE)
    return text, mentions > 0


def trace_json(trace: EventTrace) -> dict[str, Any]:
    """An event's deliveries for the console (without the body)."""
    data = asdict(trace)
    del data["body"]
    return data


class Console(UserDriver):
    """The console page's JSON endpoints."""

    async def _handle_console_page(self, request: Request) -> Response:
        return HTMLResponse(CONSOLE_HTML.read_text(encoding="utf-8"))

    def console_state(self, user_id: str) -> dict[str, Any]:
        """What the console shows `user_id`: people, channels, visible messages and their home tab."""
        messages = []
        for m in self.messages:
            if self._is_visible(m, user_id):
                data = asdict(m)
                data["user_name"] = self._display_name(m.user)
                data["is_bot"] = m.user == self.bot_user_id
                # Slack marks people from another workspace next to their name.
                data["external_team"] = self.team_name(self.team_of(m.user)) if self.is_external(m.user) else None
                messages.append(data)
        return {
            "team": {"id": self.team_id, "domain": TEAM_DOMAIN, "name": self.team_name(self.team_id)},
            "bot": {"id": self.bot_user_id, "name": self.bot_name},
            "users": [
                {
                    "id": uid,
                    "name": name,
                    "team_id": self.team_of(uid),
                    "team_name": self.team_name(self.team_of(uid)),
                    "external": self.is_external(uid),
                }
                for uid, name in self.users.items()
            ],
            "channels": [{"id": cid, "name": name} for cid, name in self.channels.items()],
            "dm": self._dm_id(user_id) if user_id in self.users else None,
            "messages": messages,
            "home": self.home_views.get(user_id),
            "modals": [dict(v) for v in self.user_views(user_id)],  # bottom to top, with errors
            "deliveries": [trace_json(t) for t in self.event_traces if t.user == user_id][-DELIVERIES_SHOWN:],
        }

    def _display_name(self, user_id: str) -> str:
        if user_id == self.bot_user_id:
            return self.bot_name
        return "Slackbot" if user_id == SLACKBOT else self.users.get(user_id, user_id)

    async def _handle_console_state(self, request: Request) -> Response:
        user_id = request.query_params.get("user") or next(iter(self.users), "")
        return JSONResponse(self.console_state(user_id))

    async def _handle_console_command_forms(self, request: Request) -> Response:
        """Unsigned slash-command forms with live response URLs, for a load generator that signs and sends
        them itself (bench/ack_latency.py), so that measuring is not slowed by this server's own work."""
        data = await json_object(request)
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
        data = await json_object(request)
        user_id = str(data.get("user_id") or "")
        channel_id = str(data.get("channel_id") or "")
        line = str(data.get("text") or "").strip()
        if not line.startswith("/") or len(line) < 2:
            return JSONResponse({"status": 400, "error": "type a slash command, e.g. /cluster list"}, 400)
        command, _, text = line.partition(" ")
        if user_id in self.users and self.is_external(user_id):
            return self._refuse_foreign_command(user_id, channel_id, command, text.strip())
        try:
            response = await self.send_command(
                user_id=user_id, channel_id=channel_id, command=command, text=text.strip()
            )
        except (httpx.HTTPError, RuntimeError) as error:
            return JSONResponse({"status": 502, "error": f"could not reach the bot: {error!r}"}, 502)
        return JSONResponse({"status": response.status_code, "body": response.text[:500]})

    def _refuse_foreign_command(self, user_id: str, channel_id: str, command: str, text: str) -> Response:
        """What Slack does with another workspace's slash command typed by an external member of a shared
        channel: nothing is sent to the app, and Slackbot tells them (only them) so."""
        said = (
            f"{command} is not a valid command. In Slack, external members of a shared channel can only use "
            f"their own workspace's slash commands. Mention @{self.bot_name.capitalize()} instead: "
            f"@{self.bot_name.capitalize()} {command.lstrip('/')} {text}".rstrip()
        )
        try:
            channel = self._resolve_channel(channel_id)
        except SlackApiFailure:
            channel = self._dm_id(user_id)
        self._add_message(
            Message(
                ts=self._next_ts(),
                channel=channel,
                user=SLACKBOT,
                text=said,
                kind="ephemeral",
                ephemeral_to=user_id,
                via="slackbot",
            )
        )
        return JSONResponse({"status": 400, "error": said}, 400)

    async def _handle_console_message(self, request: Request) -> Response:
        """A message typed in the message box (not a slash command): in the DM with the bot it is a `message.im`
        event; in a channel, a mention of @Pitcrew is an `app_mention` and anything else is only shown there
        (Pitcrew does not read channel messages). Events are delivered with Slack's retries."""
        data = await json_object(request)
        user_id = str(data.get("user_id") or "")
        channel_id = str(data.get("channel_id") or "")
        thread_ts = str(data.get("thread_ts") or "") or None
        typed = str(data.get("text") or "").strip()
        if user_id not in self.users:
            return JSONResponse({"status": 404, "error": "no such user"}, 404)
        dm = self._dm_id(user_id)
        if channel_id != dm and channel_id not in self.channels:
            return JSONResponse({"status": 404, "error": "no such channel"}, 404)
        if not typed:
            return JSONResponse({"status": 400, "error": "type a message"}, 400)
        text, mentioned = slack_text(typed, bot_name=self.bot_name, bot_user_id=self.bot_user_id)
        if thread_ts is not None and self._find_message(channel_id, thread_ts) is None:
            return JSONResponse({"status": 404, "error": "no such thread"}, 404)
        if channel_id == dm:
            event = self.post_dm(user_id=user_id, text=text, thread_ts=thread_ts)
            kind, team_id = "dm", None
        elif mentioned:
            event, team_id = self.post_mention(user_id=user_id, channel_id=channel_id, text=text, thread_ts=thread_ts)
            kind = "mention"
        else:
            message = Message(
                ts=self._next_ts(), channel=channel_id, user=user_id, text=text, thread_ts=thread_ts, via="message"
            )
            self._add_message(message)
            return JSONResponse({"status": 200, "kind": "message", "ts": message.ts, "delivery": None})
        try:
            trace = await self.send_event_with_retries(event, team_id=team_id)
        except RuntimeError as error:  # no events URL: the bot is not up
            return JSONResponse({"status": 502, "error": f"could not reach the bot: {error}"}, 502)
        first = trace.attempts[0]
        return JSONResponse({"status": first.status or 0, "kind": kind, "ts": trace.ts, "delivery": trace_json(trace)})

    async def _handle_console_home_opened(self, request: Request) -> Response:
        """The Home tab shown: app_home_opened to the bot, as Slack sends it."""
        user_id = str((await json_object(request)).get("user_id") or "")
        if user_id not in self.users:
            return JSONResponse({"status": 404, "error": "no such user"}, 404)
        try:
            response = await self.open_home(user_id=user_id)
        except (httpx.HTTPError, RuntimeError) as error:
            return JSONResponse({"status": 502, "error": f"could not reach the bot: {error!r}"}, 502)
        return JSONResponse({"status": response.status_code, "body": response.text[:500]})

    async def _handle_console_home_action(self, data: dict[str, Any]) -> Response:
        """A button in the Home tab (a click from a view: no message, no response URL)."""
        value = data.get("value")
        try:
            response = await self.click_home(
                user_id=str(data.get("user_id") or ""),
                action_id=str(data.get("action_id") or ""),
                value=None if value is None else str(value),
            )
        except ValueError as error:
            return JSONResponse({"status": 400, "error": str(error)}, 400)
        except (httpx.HTTPError, RuntimeError) as error:
            return JSONResponse({"status": 502, "error": f"could not reach the bot: {error!r}"}, 502)
        return JSONResponse({"status": response.status_code, "body": response.text[:500]})

    async def _handle_console_action(self, request: Request) -> Response:
        data = await json_object(request)
        if data.get("channel") == "home":
            return await self._handle_console_home_action(data)
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
        data = await json_object(request)
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
        data = await json_object(request)
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


async def json_object(request: Request) -> dict[str, Any]:
    try:
        parsed = json.loads(await request.body() or b"{}")
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}
