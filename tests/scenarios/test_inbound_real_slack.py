"""POST /slack/events as real Slack sends it, through the pre-Bolt check (bot.inbound) and Bolt behind it.

Bodies are shaped as Slack's own samples (api.slack.com reference payloads: every field Slack sends, nulls
included) and signed exactly as Slack signs them: v0 HMAC-SHA256 over `v0:{timestamp}:{body}`, lowercase hex.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Awaitable
from typing import Any
from urllib.parse import quote, urlencode

import httpx
import pytest
from slack_bolt.async_app import AsyncBoltRequest

from sandbox.world import SIGNING_SECRET, Sandbox
from storage import crud
from tests.scenarios.conftest import ADMIN, ask
from tests.waiting import wait_for

FORM = "application/x-www-form-urlencoded"
JSON = "application/json"
TEAM = {"id": "T0SANDBOX", "domain": "sandbox"}
USER = {"id": ADMIN, "username": "admin", "name": "admin", "team_id": "T0SANDBOX"}


def sign(raw: bytes, timestamp: str, secret: str = SIGNING_SECRET) -> str:
    return "v0=" + hmac.new(secret.encode(), f"v0:{timestamp}:".encode() + raw, hashlib.sha256).hexdigest()


async def post(
    world: Sandbox,
    body: str | bytes,
    *,
    content_type: str = FORM,
    age: int = 0,
    signature: str | None = None,
    headers: dict[str, str] | list[tuple[str, str]] | None = None,
    signed: bool = True,
) -> httpx.Response:
    raw = body.encode() if isinstance(body, str) else body
    timestamp = str(int(time.time()) - age)
    sent: list[tuple[str, str]] = [
        ("Content-Type", content_type),
        ("User-Agent", "Slackbot 1.0 (+https://api.slack.com/robots)"),
    ]
    if signed:
        sent += [
            ("X-Slack-Request-Timestamp", timestamp),
            ("X-Slack-Signature", signature if signature is not None else sign(raw, timestamp)),
        ]
    sent += list(headers.items()) if isinstance(headers, dict) else list(headers or [])
    started = time.monotonic()
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.post(f"{world.bot_url}/slack/events", content=raw, headers=sent)
    assert time.monotonic() - started < 3, "Slack gives up after 3 s"
    return response


async def audited(world: Sandbox) -> list[tuple[str, str]]:
    await world.pitcrew.services.drain()
    await world.pitcrew.services.audit.flush()
    async with world.pitcrew.services.db.session() as session:
        return [(e.command, e.outcome) for e in await crud.audit_entries(session)]


async def _nonempty(rows: Awaitable[list[tuple[str, str]]]) -> list[tuple[str, str]] | None:
    return (await rows) or None


def interaction(payload: dict[str, Any]) -> str:
    return urlencode({"payload": json.dumps(payload)})


def command_form(world: Sandbox, text: str) -> str:
    form = world.slack.slash_command_form(user_id=ADMIN, channel_id="C0PROGRAM", command="/cluster", text=text)
    return urlencode(form)


# --- Events API ---------------------------------------------------------------------------------------------


async def test_url_verification_answers_the_challenge(sandbox: Sandbox) -> None:
    challenge = "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
    body = json.dumps({"token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "challenge": challenge, "type": "url_verification"})
    response = await post(sandbox, body, content_type=JSON)
    assert response.status_code == 200
    assert challenge in response.text


def app_home_opened(event_id: str = "Ev08MFMKH6") -> str:
    return json.dumps(
        {
            "token": "XXYYZZ",
            "team_id": "T0SANDBOX",
            "context_team_id": "T0SANDBOX",
            "context_enterprise_id": None,
            "api_app_id": "A0PITCREW",
            "event": {
                "type": "app_home_opened",
                "user": ADMIN,
                "channel": "D0ADMIN",
                "tab": "home",
                "view": {"id": "V0HOME", "team_id": "T0SANDBOX", "type": "home", "blocks": [], "state": {"values": {}}},
                "event_ts": "1515449522000016",
            },
            "type": "event_callback",
            "event_id": event_id,
            "event_time": 1515449522,
            "authorizations": [
                {
                    "enterprise_id": None,
                    "team_id": "T0SANDBOX",
                    "user_id": "U0BOT",
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "is_ext_shared_channel": False,
            "event_context": "4-eyJldCI6ImFwcF9ob21lX29wZW5lZCJ9",
        }
    )


@pytest.mark.parametrize("content_type", [JSON, "application/json; charset=utf-8"])
async def test_an_event_callback_is_a_quiet_200(sandbox: Sandbox, content_type: str) -> None:
    response = await post(sandbox, app_home_opened(), content_type=content_type)
    assert response.status_code == 200, response.text


async def test_slack_retries_of_an_event_are_200_and_change_nothing(sandbox: Sandbox) -> None:
    before = len(sandbox.slack.messages)
    for attempt in ("1", "2", "3"):
        response = await post(
            sandbox,
            app_home_opened(),
            content_type=JSON,
            headers={"X-Slack-Retry-Num": attempt, "X-Slack-Retry-Reason": "http_timeout"},
        )
        assert response.status_code == 200, response.text
    await sandbox.pitcrew.services.drain()
    assert len(sandbox.slack.messages) == before


async def test_app_rate_limited_is_200(sandbox: Sandbox) -> None:
    body = json.dumps(
        {
            "token": "Jhj5dZrVaK7ZwHHjRyZWjbDl",
            "type": "app_rate_limited",
            "team_id": "T0SANDBOX",
            "minute_rate_limited": 1518467820,
            "api_app_id": "A0PITCREW",
        }
    )
    response = await post(sandbox, body, content_type=JSON)
    assert response.status_code == 200, response.text


# --- ssl_check ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("signed", [True, False])
async def test_ssl_check_is_answered_200(sandbox: Sandbox, signed: bool) -> None:
    """Slack's certificate check (ssl_check=1&token=...): Bolt answers it before verifying a signature."""
    response = await post(sandbox, "ssl_check=1&token=Jhj5dZrVaK7ZwHHjRyZWjbDl", signed=signed)
    assert response.status_code == 200, response.text
    assert not response.content
    assert await audited(sandbox) == []


# --- slash commands -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "status payload",
        "status payload=%7B%7D",
        "status a&b=c",
        "status a+b",
        "status 100%",
        "status %ZZ %",
        "status 東京 クラスタ",
        "status 🚀🔥 :rocket:",
        "status " + "x" * 4000,
    ],
)
async def test_slash_command_texts_are_answered(sandbox: Sandbox, text: str) -> None:
    reply = await ask(sandbox, user=ADMIN, channel="C0PROGRAM", text=text)
    assert "internal error" not in reply.text.lower()


@pytest.mark.parametrize(
    "content_type",
    [
        "application/x-www-form-urlencoded; charset=utf-8",
        "application/x-www-form-urlencoded;charset=UTF-8",
        "Application/X-WWW-Form-Urlencoded",
    ],
)
async def test_form_content_type_variants(sandbox: Sandbox, content_type: str) -> None:
    before = len(sandbox.slack.messages)
    response = await post(sandbox, command_form(sandbox, "help"), content_type=content_type)
    assert response.status_code == 200, response.text
    await sandbox.slack.wait_for(lambda m: True, since=before)


async def test_slack_style_percent_encoding_is_read_as_typed(sandbox: Sandbox) -> None:
    """Slack encodes a space as + and a + as %2B; the audit log keeps the text as typed."""
    form = sandbox.slack.slash_command_form(user_id=ADMIN, channel_id="C0PROGRAM", command="/cluster", text="x")
    form["text"] = "status a+b c&d=e 100%"
    raw = "&".join(f"{k}={quote(v, safe='', encoding='utf-8').replace('%20', '+')}" for k, v in form.items())
    before = len(sandbox.slack.messages)
    response = await post(sandbox, raw)
    assert response.status_code == 200, response.text
    await sandbox.slack.wait_for(lambda m: True, since=before)
    await sandbox.pitcrew.services.drain()


# --- signatures ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("age", "status"), [(295, 200), (-299, 200), (302, 401), (-302, 401)])
async def test_timestamp_window_is_five_minutes_either_way(sandbox: Sandbox, age: int, status: int) -> None:
    response = await post(sandbox, "ssl_check=1&token=t", age=age)  # a request that changes nothing
    assert response.status_code == 200  # ssl_check is answered whatever its signature, as Bolt does
    response = await post(sandbox, app_home_opened(), content_type=JSON, age=age)
    assert response.status_code == status, response.text


@pytest.mark.parametrize(
    "mangle",
    [
        lambda s: s.upper(),
        lambda s: "v0=" + s[3:].upper(),
        lambda s: "v1=" + s[3:],
        lambda s: s[3:],
        lambda s: s + "0",
        lambda s: s[:-1],
    ],
)
async def test_mangled_signatures_are_401(sandbox: Sandbox, mangle: Any) -> None:
    raw = app_home_opened().encode()
    timestamp = str(int(time.time()))
    response = await post(sandbox, raw, content_type=JSON, signature=mangle(sign(raw, timestamp)))
    assert response.status_code == 401


async def test_a_reencoded_body_is_401(sandbox: Sandbox) -> None:
    raw = command_form(sandbox, "status a b")
    timestamp = str(int(time.time()))
    signature = sign(raw.encode(), timestamp)
    reencoded = raw.replace("+", "%20")
    assert reencoded != raw
    response = await post(sandbox, reencoded, signature=signature)
    assert response.status_code == 401


async def test_duplicated_signature_headers_do_not_500(sandbox: Sandbox) -> None:
    raw = app_home_opened().encode()
    timestamp = str(int(time.time()))
    good = sign(raw, timestamp)
    for first, second in ((good, "v0=bad"), ("v0=bad", good), (good, good)):
        response = await post(
            sandbox,
            raw,
            content_type=JSON,
            signed=False,
            headers=[
                ("X-Slack-Request-Timestamp", timestamp),
                ("X-Slack-Signature", first),
                ("X-Slack-Signature", second),
            ],
        )
        assert response.status_code in (200, 401), response.text


# --- interactivity ------------------------------------------------------------------------------------------


def message_click(world: Sandbox, *, action: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "block_actions",
        "user": USER,
        "api_app_id": "A0PITCREW",
        "token": "9s8d9as89d8as9d8as989",
        "container": {"type": "message", "message_ts": "1548261231.000200", "channel_id": "C0PROGRAM"},
        "trigger_id": "12321423423.333649436676.d8c1bb837935619ccad0f624c448ffb3",
        "team": TEAM,
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": "C0PROGRAM", "name": "program"},
        "message": {
            "type": "message",
            "subtype": "bot_message",
            "text": "old",
            "ts": "1548261231.000200",
            "bot_id": "B0PITCREW",
            "blocks": [],
        },
        "state": {"values": {}},
        "response_url": f"{world.world_url}/response/nosuch",
        "actions": [action],
    }


def modal_view(callback_id: str, values: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "id": "V0MODAL",
        "team_id": "T0SANDBOX",
        "type": "modal",
        "blocks": [{"type": "input", "block_id": "name", "element": {"type": "plain_text_input"}}],
        "private_metadata": "",
        "callback_id": callback_id,
        "state": {"values": values or {}},
        "hash": "156772938.1827394",
        "title": {"type": "plain_text", "text": "Pitcrew", "emoji": True},
        "clear_on_close": False,
        "notify_on_close": False,
        "close": None,
        "submit": None,
        "previous_view_id": None,
        "root_view_id": "V0MODAL",
        "app_id": "A0PITCREW",
        "external_id": "",
        "app_installed_team_id": "T0SANDBOX",
        "bot_id": "B0PITCREW",
    }


BUTTON = {
    "action_id": "nosuch_button",
    "block_id": "b1",
    "text": {"type": "plain_text", "text": "Go", "emoji": True},
    "value": "x",
    "type": "button",
    "action_ts": "1548426417.840180",
}


async def test_a_click_in_a_message_is_200(sandbox: Sandbox) -> None:
    response = await post(sandbox, interaction(message_click(sandbox, action=BUTTON)))
    assert response.status_code == 200, response.text


async def test_a_click_in_a_modal_is_200(sandbox: Sandbox) -> None:
    payload = message_click(sandbox, action=BUTTON)
    del payload["response_url"], payload["message"], payload["channel"]
    payload["container"] = {"type": "view", "view_id": "V0MODAL"}
    payload["view"] = modal_view("nosuch_form")
    response = await post(sandbox, interaction(payload))
    assert response.status_code == 200, response.text


async def test_a_select_in_a_message_is_200(sandbox: Sandbox) -> None:
    select = {
        "type": "static_select",
        "action_id": "nosuch_select",
        "block_id": "b2",
        "selected_option": {"text": {"type": "plain_text", "text": "A"}, "value": "a"},
        "placeholder": {"type": "plain_text", "text": "Pick"},
        "action_ts": "1548426417.840180",
    }
    response = await post(sandbox, interaction(message_click(sandbox, action=select)))
    assert response.status_code == 200, response.text


def submission(kind: str, values: dict[str, Any]) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "type": kind,
        "team": TEAM,
        "user": USER,
        "api_app_id": "A0PITCREW",
        "token": "XXX",
        "trigger_id": "1.2.3",
        "view": modal_view("nosuch_form", values),
        "response_urls": [],
        "is_enterprise_install": False,
        "enterprise": None,
    }
    if kind == "view_closed":
        payload["is_cleared"] = False
        del payload["trigger_id"], payload["response_urls"]
    return payload


EMPTY_INPUTS = {
    "name": {"input": {"type": "plain_text_input", "value": None}},
    "pick": {"select": {"type": "static_select", "selected_option": None}},
    "many": {"checks": {"type": "checkboxes", "selected_options": []}},
    "when": {"date": {"type": "datepicker", "selected_date": "2026-12-01"}},
    "who": {"users": {"type": "multi_users_select", "selected_users": ["U1"]}},
    "count": {"n": {"type": "number_input", "value": "3"}},
    "rich": {"r": {"type": "rich_text_input", "rich_text_value": {"type": "rich_text", "elements": []}}},
}


@pytest.mark.parametrize("kind", ["view_submission", "view_closed"])
async def test_form_submissions_of_every_input_kind_are_200(sandbox: Sandbox, kind: str) -> None:
    response = await post(sandbox, interaction(submission(kind, EMPTY_INPUTS)))
    assert response.status_code == 200, response.text


async def test_a_global_shortcut_is_a_quiet_200(sandbox: Sandbox) -> None:
    payload = {
        "type": "shortcut",
        "token": "XXXXXXXXXXXXX",
        "action_ts": "1581106241.371594",
        "team": TEAM,
        "user": USER,
        "is_enterprise_install": False,
        "enterprise": None,
        "callback_id": "nosuch_shortcut",
        "trigger_id": "944799105734.773906753841.38b5894552bdd4a780554ee59d1f3638",
    }
    response = await post(sandbox, interaction(payload))
    assert response.status_code == 200, response.text
    assert not response.content
    assert ("nosuch_shortcut", "invalid") in await audited(sandbox)


async def test_a_message_shortcut_is_a_quiet_200(sandbox: Sandbox) -> None:
    payload = {
        "type": "message_action",
        "token": "Nj2rfC2hU8mAfgaJLemZgO7H",
        "action_ts": "1581106241.371594",
        "team": TEAM,
        "user": USER,
        "channel": {"id": "C0PROGRAM", "name": "program"},
        "is_enterprise_install": False,
        "enterprise": None,
        "callback_id": "nosuch_message_shortcut",
        "trigger_id": "13345224609.8534564800.6f8ab1f53e13d0cd15f96106292d5536",
        "response_url": f"{sandbox.world_url}/response/nosuch",
        "message_ts": "1548261231.000200",
        "message": {"type": "message", "user": ADMIN, "ts": "1548261231.000200", "text": "hi"},
    }
    response = await post(sandbox, interaction(payload))
    assert response.status_code == 200, response.text
    assert not response.content
    assert ("nosuch_message_shortcut", "invalid") in await audited(sandbox)


async def test_block_suggestion_gets_an_empty_option_list(sandbox: Sandbox) -> None:
    payload = {
        "type": "block_suggestion",
        "user": USER,
        "container": {"type": "view", "view_id": "V0MODAL"},
        "api_app_id": "A0PITCREW",
        "token": "XXX",
        "action_id": "nosuch_external",
        "block_id": "b3",
        "value": "ab",
        "team": TEAM,
        "enterprise": None,
        "is_enterprise_install": False,
        "view": modal_view("nosuch_form"),
    }
    response = await post(sandbox, interaction(payload))
    assert response.status_code == 200, response.text
    assert response.json() == {"options": []}


# --- issue 11, defect 2: bad shapes answered below 500 and at once ------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        "payload=notjson",
        "payload=null",
        "payload=%5B1%2C2%5D",
        "",
        "payload=",
        "payload=%7B%7D",
        interaction({"type": "view_submission", "user": USER, "view": modal_view("f") | {"state": "x"}}),
        interaction({"type": "view_submission", "user": USER, "view": modal_view("f") | {"state": None}}),
        interaction({"type": "view_submission", "user": USER, "view": modal_view("f") | {"state": {"values": 1}}}),
        interaction(
            {
                "type": "view_submission",
                "user": USER,
                "view": modal_view("f", {"b": {"a": {"type": "static_select", "selected_option": "x"}}}),
            }
        ),
        interaction({"type": "view_submission", "view": modal_view("f")}),
    ],
)
async def test_signed_bodies_that_are_no_slack_payload_are_4xx(sandbox: Sandbox, body: str) -> None:
    response = await post(sandbox, body)
    assert 400 <= response.status_code < 500, response.text


async def test_a_non_numeric_timestamp_is_401(sandbox: Sandbox) -> None:
    raw = app_home_opened()
    response = await post(
        sandbox,
        raw,
        content_type=JSON,
        signed=False,
        headers={"X-Slack-Request-Timestamp": "soon", "X-Slack-Signature": sign(raw.encode(), "soon")},
    )
    assert response.status_code == 401


@pytest.mark.parametrize("drop", ["action_id", "user", "response_url"])
async def test_clicks_missing_a_field_are_answered_at_once(sandbox: Sandbox, drop: str) -> None:
    payload = message_click(sandbox, action=BUTTON)
    if drop == "action_id":
        payload["actions"] = [{k: v for k, v in BUTTON.items() if k != "action_id"}]
    else:
        del payload[drop]
    response = await post(sandbox, interaction(payload))  # post() asserts it took under 3 s
    assert 200 <= response.status_code < 500


# --- a listener that fails right after its ack ----------------------------------------------------------------
# Bolt's async runner sets `ack.response = None` when a listener raises after ack(); if that happens before its
# 10 ms poll has seen the ack, Bolt waits out the 3 s ack timeout and Slack shows the user a timeout error.


async def test_a_click_failing_right_after_its_ack_is_answered_at_once_and_audited(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    poster = sandbox.pitcrew.services.poster
    respond, calls = poster.respond, []

    async def refused(*_: Any, **__: Any) -> Any:
        raise RuntimeError("the database went away")

    async def fails_once_a_click(*args: Any, **kwargs: Any) -> bool:
        calls.append(args)
        if len(calls) % 2:  # the listener's answer fails; the error handler's message goes through
            raise RuntimeError("the network went away")
        return await respond(*args, **kwargs)

    monkeypatch.setattr(sandbox.pitcrew.services.operations, "cancel", refused)
    monkeypatch.setattr(poster, "respond", fails_once_a_click)
    action = {**BUTTON, "action_id": "operation_cancel", "value": "0123456789abcdef"}
    for _ in range(3):
        started = time.monotonic()
        response = await post(sandbox, interaction(message_click(sandbox, action=action)))
        assert response.status_code == 200, response.text
        assert time.monotonic() - started < 1.5, "answered only after Bolt's 3 s ack timeout"
    assert ("operation_cancel", "failed") in await audited(sandbox)


@pytest.mark.parametrize(
    "action_id",
    [
        "operation_confirm",
        "launch_cancel",
        "delete_open",
        "track_add",
        "alert_ack",
        "alert_silence_1",
        "alert_unsilence",
    ],
)
@pytest.mark.parametrize("response_url", [None, 5])
async def test_socket_mode_clicks_without_a_response_url_are_answered_at_once(
    sandbox: Sandbox, action_id: str, response_url: Any
) -> None:
    """Socket Mode payloads skip bot.inbound: the listeners and the error handler cope with the same shapes."""
    body = message_click(sandbox, action={**BUTTON, "action_id": action_id, "value": "1"})
    body["response_url"] = response_url
    started = time.monotonic()
    response = await sandbox.pitcrew.bolt.async_dispatch(AsyncBoltRequest(body=body, mode="socket_mode"))
    assert time.monotonic() - started < 1.5, "answered only after Bolt's 3 s ack timeout"
    assert response.status < 500
    assert "internal error" not in str(response.body).lower()


@pytest.mark.parametrize("name", ["/cluster", "/track", "/digest"])
async def test_socket_mode_commands_are_answered(sandbox: Sandbox, name: str) -> None:
    before = len(sandbox.slack.messages)
    form = sandbox.slack.slash_command_form(user_id=ADMIN, channel_id="C0PROGRAM", command=name, text="help")
    response = await sandbox.pitcrew.bolt.async_dispatch(AsyncBoltRequest(body=form, mode="socket_mode"))
    assert response.status == 200
    reply = await sandbox.slack.wait_for(lambda m: True, since=before)
    assert "could not handle" not in reply.text and "internal error" not in reply.text.lower()
    # The reply can be seen before the listener has handed its audit row to the writer (seen once under load).
    rows = await wait_for(lambda: _nonempty(audited(sandbox)), what=f"{name}'s audit row")
    assert all(outcome != "failed" for _, outcome in rows)


@pytest.mark.parametrize("name", ["/cluster", "/track", "/digest"])
@pytest.mark.parametrize("change", [{"response_url": None}, {"response_url": 5}, {"text": 5}, {"user_id": 5}])
async def test_socket_mode_commands_not_shaped_as_slack_sends_them_are_answered_at_once_and_audited(
    sandbox: Sandbox, name: str, change: dict[str, Any]
) -> None:
    form = sandbox.slack.slash_command_form(user_id=ADMIN, channel_id="C0PROGRAM", command=name, text="help")
    body = {k: v for k, v in {**form, **change}.items() if v is not None}
    started = time.monotonic()
    response = await sandbox.pitcrew.bolt.async_dispatch(AsyncBoltRequest(body=body, mode="socket_mode"))
    assert time.monotonic() - started < 1.5, "answered only after Bolt's 3 s ack timeout"
    assert response.status < 500
    assert [command for command, _ in await audited(sandbox)] == [name]
