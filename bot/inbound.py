"""The front of `POST /slack/events`: a request is checked before Bolt sees it. Pure: no Slack, no storage.

Bolt assumes Slack's shapes: a non-numeric timestamp, a `payload` that is not a JSON object, a `user` that is
a number, or a command whose text happens to contain the word "payload" (Bolt's body parser then looks for a
`payload=` field and finds none) ended in a 500 or in a command silently dropped. Here a request gets 401 when
its signature is missing, wrong or over five minutes old (nothing happens), 400 when it is signed but is no
Slack request we handle, and otherwise its body parsed once, correctly, for Bolt to dispatch.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

MAX_AGE_SECONDS = 5 * 60  # Slack's own rule for replayed requests
MAX_BODY = 1_000_000  # a modal submission of the largest view is well under this
_INTERACTIONS = ("block_actions", "view_submission", "view_closed")
# Sent only if someone adds a shortcut or an external select to the app's configuration; Pitcrew has none, so
# they reach Bolt to be answered 200 (options: an empty list) by handlers.errors, not refused with a 400 the
# user would see as "failed with the error".
_UNREGISTERED = ("shortcut", "message_action", "block_suggestion")
_EVENTS = ("event_callback", "url_verification", "app_rate_limited")


@dataclass(frozen=True)
class Refused:
    status: int  # 401: not from Slack; 400: from Slack (signed) but not a request Pitcrew can read
    reason: str


@dataclass(frozen=True)
class SlackRequest:
    text: str  # the raw body, as signed
    body: dict[str, Any]  # what Bolt's listeners see: the form, the interaction payload, or the event


class _Malformed(Exception):
    pass


def read_slack_request(raw: bytes, headers: Mapping[str, str], *, secret: str, now: float) -> SlackRequest | Refused:
    """The request checked and parsed, or why it is refused."""
    if _is_ssl_check(raw):
        # Slack's certificate check: Bolt answers it 200 before verifying any signature (AsyncSslCheck runs
        # ahead of AsyncRequestVerification), and it causes nothing.
        return SlackRequest(text=raw.decode("ascii"), body=dict(parse_qsl(raw.decode("ascii"))))
    unsigned = _signature_problem(raw, headers, secret=secret, now=now)
    if unsigned:
        return Refused(401, unsigned)
    if len(raw) > MAX_BODY:
        return Refused(400, f"the body is {len(raw):,} bytes; Slack sends far less")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return Refused(400, "the body is not UTF-8")
    try:
        body = _parse(text, headers.get("content-type", ""))
    except _Malformed as problem:
        return Refused(400, str(problem))
    return SlackRequest(text=text, body=body)


def _is_ssl_check(raw: bytes) -> bool:
    if len(raw) > 1000 or not raw.isascii():
        return False
    form = dict(parse_qsl(raw.decode("ascii"), keep_blank_values=True))
    return form.get("ssl_check") == "1" and "command" not in form and "payload" not in form


def _signature_problem(raw: bytes, headers: Mapping[str, str], *, secret: str, now: float) -> str:
    timestamp = headers.get("x-slack-request-timestamp", "")
    signature = headers.get("x-slack-signature", "")
    # ASCII digits only: int() accepts "²" and " 12 ", and a 5000-digit value raises.
    if not (timestamp.isascii() and timestamp.isdigit() and len(timestamp) <= 12):
        return "missing or malformed X-Slack-Request-Timestamp"
    if abs(now - int(timestamp)) > MAX_AGE_SECONDS:
        return "the request timestamp is more than 5 minutes away"
    if not signature:
        return "missing X-Slack-Signature"
    digest = hmac.new(secret.encode(), b"v0:" + timestamp.encode() + b":" + raw, hashlib.sha256).hexdigest()
    # Compared as bytes: compare_digest refuses non-ASCII str, and a header may hold anything.
    if not hmac.compare_digest(f"v0={digest}".encode(), signature.encode("utf-8", "replace")):
        return "wrong X-Slack-Signature"
    return ""


def _parse(text: str, content_type: str) -> dict[str, Any]:
    if not text.strip():
        raise _Malformed("the body is empty")
    if content_type.split(";")[0].strip().lower() == "application/json":
        event = _json(text, "the body")
        _check_event(event)
        return event
    form = dict(parse_qsl(text, keep_blank_values=True))
    if "payload" in form:
        payload = _json(form["payload"], "`payload`")
        _check_interaction(payload)
        return payload
    if "command" in form:
        _check_command(form)
        return form
    raise _Malformed("the body is neither a slash command nor an interaction payload")


def _json(text: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        raise _Malformed(f"{what} is not JSON") from None
    if not isinstance(value, dict):
        raise _Malformed(f"{what} is JSON but not an object")
    return value


def _check_command(form: Mapping[str, str]) -> None:
    if not form["command"].startswith("/"):
        raise _Malformed("`command` does not start with /")
    for key in ("user_id", "channel_id", "response_url"):
        if not form.get(key):
            raise _Malformed(f"the slash command has no `{key}`")
    if not form["response_url"].startswith(("https://", "http://")):
        raise _Malformed("`response_url` is not a URL")


def _check_event(event: dict[str, Any]) -> None:
    kind = event.get("type")
    if kind not in _EVENTS:
        raise _Malformed("the JSON body is not an Events API request")
    if kind == "event_callback":
        _need(event, "event", dict)
    _ids(event)


def _check_interaction(payload: dict[str, Any]) -> None:
    kind = payload.get("type")
    if kind not in _INTERACTIONS + _UNREGISTERED:
        raise _Malformed("`payload.type` is not an interaction Pitcrew handles")
    user = _need(payload, "user", dict)
    if not isinstance(user.get("id"), str) or not user["id"]:
        raise _Malformed("`payload.user` has no id")
    _ids(payload)
    _optional(payload, "trigger_id", str)
    _optional(payload, "callback_id", str)
    _optional(payload, "action_id", str)
    if kind == "block_actions":
        _check_actions(payload)
    elif kind in ("view_submission", "view_closed"):
        _check_view(payload)
    else:
        _optional(payload, "view", dict)


def _check_actions(payload: dict[str, Any]) -> None:
    actions = _need(payload, "actions", list)
    if not actions:
        raise _Malformed("`payload.actions` is empty")
    for action in actions:
        if not isinstance(action, dict):
            raise _Malformed("an action is not an object")
        if not isinstance(action.get("action_id"), str) or not action["action_id"]:
            raise _Malformed("an action has no `action_id`")
        for key in ("value", "block_id"):
            if action.get(key) is not None and not isinstance(action[key], str):
                raise _Malformed(f"an action's `{key}` is not a string")
    container = _optional(payload, "container", dict) or {}
    _optional(payload, "message", dict)
    if container.get("type") != "view":  # a click in a message always comes with its response URL
        url = _need(payload, "response_url", str)
        if not url.startswith(("https://", "http://")):
            raise _Malformed("`payload.response_url` is not a URL")
    _optional(payload, "view", dict)


def _check_view(payload: dict[str, Any]) -> None:
    view = _need(payload, "view", dict)
    for key in ("id", "callback_id"):
        if not isinstance(view.get(key), str):
            raise _Malformed(f"`view.{key}` is not a string")
    for key in ("private_metadata", "hash", "type", "team_id", "app_installed_team_id"):
        _optional(view, key, str)
    _optional(view, "blocks", list)
    state = _need(view, "state", dict)
    values = _need(state, "values", dict)
    for block in values.values():
        if not isinstance(block, dict):
            raise _Malformed("a block of `view.state.values` is not an object")
        for field in block.values():
            if not isinstance(field, dict):
                raise _Malformed("an input of `view.state.values` is not an object")
            _optional(field, "type", str)
            _optional(field, "value", str)
            option = _optional(field, "selected_option", dict)
            if option is not None:
                _optional(option, "value", str)


def _ids(payload: dict[str, Any], depth: int = 0) -> None:
    """The fields Bolt reads into its context: each an id string or an object (None where Slack sends null)."""
    for key in ("team", "enterprise", "channel", "user"):
        value = payload.get(key)
        if value is None or isinstance(value, str):
            continue
        if not isinstance(value, dict):
            raise _Malformed(f"`{key}` is neither an id nor an object")
        for inner in ("id", "team_id", "enterprise_id"):
            _optional(value, inner, str)
    for key in ("team_id", "enterprise_id", "user_id", "channel_id", "thread_ts", "response_url"):
        _optional(payload, key, str)
    for key in ("authorizations", "response_urls"):
        for entry in _optional(payload, key, list) or []:
            if not isinstance(entry, dict):
                raise _Malformed(f"`{key}` holds something that is not an object")
            if depth < 2:
                _ids(entry, depth + 1)
    for key in ("message", "previous_message", "item", "function_data", "assistant_thread", "event"):
        nested = _optional(payload, key, dict)
        if nested is not None and depth < 2:
            _ids(nested, depth + 1)


def _need(parent: dict[str, Any], key: str, kind: type) -> Any:
    value = parent.get(key)
    if not isinstance(value, kind):
        raise _Malformed(f"`{key}` is missing or not {_article(kind)}")
    return value


def _optional(parent: dict[str, Any], key: str, kind: type) -> Any:
    value = parent.get(key)
    if value is not None and not isinstance(value, kind):
        raise _Malformed(f"`{key}` is not {_article(kind)}")
    return value


def _article(kind: type) -> str:
    names: dict[type, str] = {dict: "an object", list: "a list", str: "a string"}
    return names.get(kind, kind.__name__)
