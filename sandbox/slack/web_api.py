"""The local Slack's Web API (bot -> Slack): `POST /api/{method}`, file uploads and downloads, and the
response URLs it hands out, as Slack answers them."""

import json
import mimetypes
import secrets
from collections.abc import Callable
from functools import cached_property
from typing import Any
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from sandbox.slack.blocks import (
    error_messages,
    modal_content,
    parse_blocks,
    parse_json_value,
    parse_response_body,
    truthy,
)
from sandbox.slack.workspace import (
    API_APP_ID,
    BOT_ID,
    RESPONSE_URL_MAX_USES,
    RESPONSE_URL_TTL_SECONDS,
    TEAM_DOMAIN,
    TRIGGER_TTL_SECONDS,
    ApiCall,
    Message,
    SlackApiFailure,
    StoredFile,
    Trigger,
    Workspace,
)


class WebApi(Workspace):
    """The Web API methods Pitcrew calls, answered from and into the workspace's state."""

    @cached_property
    def methods(self) -> dict[str, Callable[[dict[str, Any]], dict[str, Any]]]:
        """Web API method name -> its handler."""
        return {
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

    async def _handle_api(self, request: Request) -> Response:
        method = request.path_params["method"]
        params = await request_params(request)
        token = params.pop("token", None)
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            token = auth[7:].strip()
        self.calls.append(ApiCall(method=method, params=params))
        if method not in self.methods:
            return JSONResponse({"ok": False, "error": "unknown_method"}, status_code=404)
        failure = self._take_failure(method)
        if failure is not None:
            return failure
        if not token:
            return JSONResponse({"ok": False, "error": "not_authed"})
        if token != self.bot_token:
            return JSONResponse({"ok": False, "error": "invalid_auth"})
        try:
            result = self.methods[method](params)
        except SlackApiFailure as failed:
            return JSONResponse({"ok": False, "error": failed.error, **failed.extra})
        return JSONResponse({"ok": True, **result})

    def _auth_test(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": f"https://{TEAM_DOMAIN}.slack.com/",
            "team": self.team_name(self.team_id),
            "user": self.bot_name,
            "team_id": self.team_id,
            "user_id": self.bot_user_id,
            "bot_id": BOT_ID,
            "is_enterprise_install": False,
        }

    def _message_content(self, params: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        text = params.get("text")
        blocks = parse_blocks(params.get("blocks"), limit=50)
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
        if not params.get("text") and not parse_blocks(params.get("blocks"), limit=50):
            raise SlackApiFailure("no_text")
        # Omitted fields keep their previous value, as on Slack.
        if "text" in params:
            message.text = str(params["text"] or "")
        if "blocks" in params:
            message.blocks = parse_blocks(params["blocks"], limit=50)
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
        view = parse_json_value(params.get("view"))
        if not isinstance(view, dict) or view.get("type") != "home":
            raise SlackApiFailure("invalid_arguments")
        blocks = parse_blocks(view.get("blocks"), limit=100)
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
        content = modal_content(params.get("view"))
        self._check_external_id(content["external_id"])
        # Only a successful call spends the trigger, so a bot can fix its view and retry within 3 s.
        trigger.used = True
        return {"view": self._view_json(self._add_view(trigger.user_id, content))}

    def _views_update(self, params: dict[str, Any]) -> dict[str, Any]:
        view_id, external_id = params.get("view_id"), params.get("external_id")
        if not view_id and not external_id:
            raise SlackApiFailure(
                "invalid_arguments", response_metadata=error_messages(["either view_id or external_id is required"])
            )
        if view_id:
            stored = self.open_views.get(str(view_id))
        else:
            stored = next((v for v in self.open_views.values() if v["external_id"] == external_id), None)
        if stored is None:
            raise SlackApiFailure("not_found")
        if params.get("hash") and params["hash"] != stored["hash"]:
            raise SlackApiFailure("hash_conflict")
        content = modal_content(params.get("view"))
        if content["external_id"] != stored["external_id"]:
            self._check_external_id(content["external_id"])
        self._update_view(stored, content)
        self._notify()
        return {"view": self._view_json(stored)}

    def _valid_trigger(self, params: dict[str, Any]) -> Trigger:
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

    def _user_json(self, user_id: str) -> dict[str, Any]:
        name = self.bot_name if user_id == self.bot_user_id else self.users[user_id]
        return {
            "id": user_id,
            "team_id": self.team_of(user_id),  # a Slack Connect member's own team, as Slack answers
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
        self.files[file_id] = StoredFile(id=file_id, filename=str(filename), length=length, created=int(self.clock()))
        return {"upload_url": f"{self.base_url}/upload/{file_id}", "file_id": file_id}

    def _files_complete_upload(self, params: dict[str, Any]) -> dict[str, Any]:
        requested = parse_json_value(params.get("files"))
        if not isinstance(requested, list) or not requested:
            raise SlackApiFailure("invalid_arguments")
        completed: list[StoredFile] = []
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

    async def _handle_response_url(self, request: Request) -> Response:
        raw = await request.body()
        body = parse_response_body(raw, request.headers.get("content-type", ""))
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
        if truthy(body.get("delete_original")):
            if original is not None:
                self.messages.remove(original)
                self._notify()
            return PlainTextResponse("ok")

        text = str(body.get("text") or "")
        try:
            blocks = parse_blocks(body.get("blocks"), limit=50)
        except SlackApiFailure:
            return PlainTextResponse("invalid_blocks", status_code=400)
        if not text and not blocks:
            return PlainTextResponse("no_text", status_code=400)
        # replace_original only means something for clicks; on a slash command's response_url Slack
        # ignores it and posts a new message.
        if truthy(body.get("replace_original")) and original is not None:
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


async def request_params(request: Request) -> dict[str, Any]:
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
