"""The local Slack's browser console (`GET /`, the page `pitcrew demo` opens): what a chosen person sees,
and their commands, clicks and submissions, sent through the user driver."""

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from sandbox.slack.driver import UserDriver
from sandbox.slack.workspace import TEAM_DOMAIN

CONSOLE_HTML = Path(__file__).with_name("console.html")


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
        try:
            response = await self.send_command(
                user_id=user_id, channel_id=channel_id, command=command, text=text.strip()
            )
        except (httpx.HTTPError, RuntimeError) as error:
            return JSONResponse({"status": 502, "error": f"could not reach the bot: {error!r}"}, 502)
        return JSONResponse({"status": response.status_code, "body": response.text[:500]})

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
