"""bot.inbound: the checks in front of Bolt. Pure: bytes and headers in, a parsed body or a refusal out."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any
from urllib.parse import urlencode

import pytest

from bot.inbound import Refused, SlackRequest, read_slack_request
from sandbox.slack import signed_headers

SECRET = "s3cret"


def read(body: str, *, secret: str = SECRET, age: int = 0, **headers: str) -> SlackRequest | Refused:
    signed = {k.lower(): v for k, v in signed_headers(body, secret=secret, timestamp=int(time.time()) - age).items()}
    signed.update({k.lower().replace("_", "-"): v for k, v in headers.items()})
    return read_slack_request(body.encode(), signed, secret=SECRET, now=time.time())


def command(**fields: str) -> str:
    form = {"command": "/cluster", "text": "list", "user_id": "U1", "channel_id": "C1", "response_url": "https://x/r"}
    form.update(fields)
    return urlencode(form)


def test_a_signed_command_is_parsed_once_even_when_its_text_says_payload() -> None:
    checked = read(command(text="status payload=1"))
    assert isinstance(checked, SlackRequest) and checked.body["text"] == "status payload=1"


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"secret": "wrong"}, "wrong X-Slack-Signature"),
        ({"age": 301}, "more than 5 minutes"),
        ({"x_slack_request_timestamp": "soon"}, "malformed X-Slack-Request-Timestamp"),
        ({"x_slack_request_timestamp": "\u00b2"}, "malformed X-Slack-Request-Timestamp"),
        ({"x_slack_request_timestamp": ""}, "malformed X-Slack-Request-Timestamp"),
        ({"x_slack_signature": ""}, "missing X-Slack-Signature"),
        ({"x_slack_signature": "v0=\u00e9"}, "wrong X-Slack-Signature"),
    ],
)
def test_signature_problems_are_401(kwargs: dict[str, Any], reason: str) -> None:
    checked = read(command(), **kwargs)
    assert isinstance(checked, Refused) and checked.status == 401 and reason in checked.reason


def interaction(payload: Any) -> str:
    return urlencode({"payload": json.dumps(payload)})


CLICK = {
    "type": "block_actions",
    "user": {"id": "U1"},
    "response_url": "https://x/r",
    "actions": [{"action_id": "a", "value": "v"}],
}


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("", "empty"),
        ("payload=notjson", "not JSON"),
        ("payload=null", "not an object"),
        ("payload=%5B1%2C2%5D", "not an object"),
        ("token=x", "neither a slash command nor an interaction"),
        (command(user_id=""), "no `user_id`"),
        (command(response_url="javascript:x"), "not a URL"),
        (interaction({**CLICK, "user": None}), "`user` is missing"),
        (interaction({**CLICK, "user": {"id": 5}}), "has no id"),
        (interaction({**CLICK, "actions": [{"value": "v"}]}), "no `action_id`"),
        (interaction({**CLICK, "actions": [{"action_id": "a", "value": 5}]}), "`value` is not a string"),
        (interaction({k: v for k, v in CLICK.items() if k != "response_url"}), "`response_url`"),
        (interaction({**CLICK, "team": 5}), "`team` is neither an id nor an object"),
        (interaction({**CLICK, "type": "interactive_message"}), "not an interaction Pitcrew handles"),
        (interaction({**CLICK, "type": "shortcut", "callback_id": 5}), "`callback_id` is not a string"),
        (interaction({**CLICK, "type": "shortcut", "user": "U1"}), "`user` is missing"),
        (
            interaction({"type": "view_submission", "user": {"id": "U1"}, "view": {"id": "V", "callback_id": "c"}}),
            "`state`",
        ),
    ],
)
def test_signed_bodies_not_shaped_as_slack_sends_them_are_400(body: str, reason: str) -> None:
    checked = read(body)
    assert isinstance(checked, Refused) and checked.status == 400 and reason in checked.reason, checked


def test_bodies_that_are_not_utf8_or_too_big_are_400() -> None:
    now = int(time.time())
    raw = b"command=%2Fcluster&text=\xff"
    digest = hmac.new(SECRET.encode(), f"v0:{now}:".encode() + raw, hashlib.sha256).hexdigest()  # over the bytes sent
    headers = {"x-slack-request-timestamp": str(now), "x-slack-signature": f"v0={digest}"}
    checked = read_slack_request(raw, headers, secret=SECRET, now=now)
    assert isinstance(checked, Refused) and checked.status == 400 and "UTF-8" in checked.reason
    big = read("a" * 1_000_001)
    assert isinstance(big, Refused) and big.status == 400


def test_events_api_json_is_parsed_and_checked() -> None:
    checked = read(json.dumps({"type": "url_verification", "challenge": "c"}), content_type="application/json")
    assert isinstance(checked, SlackRequest) and checked.body["challenge"] == "c"
    refused = read(json.dumps({"type": "event_callback", "event": []}), content_type="application/json")
    assert isinstance(refused, Refused) and refused.status == 400


@pytest.mark.parametrize("offset", [300, -300])
def test_a_timestamp_exactly_five_minutes_away_is_accepted_as_bolt_does(offset: int) -> None:
    now = 1_700_000_000
    body = command()
    headers = {k.lower(): v for k, v in signed_headers(body, secret=SECRET, timestamp=now - offset).items()}
    assert isinstance(read_slack_request(body.encode(), headers, secret=SECRET, now=now), SlackRequest)
    late = read_slack_request(body.encode(), headers, secret=SECRET, now=now + (1 if offset > 0 else -1))
    assert isinstance(late, Refused) and late.status == 401


@pytest.mark.parametrize("headers", [{}, {"x-slack-request-timestamp": "1", "x-slack-signature": "v0=x"}])
def test_ssl_check_is_passed_to_bolt_unsigned_as_bolt_answers_it(headers: dict[str, str]) -> None:
    checked = read_slack_request(b"ssl_check=1&token=t", headers, secret=SECRET, now=time.time())
    assert isinstance(checked, SlackRequest) and checked.body == {"ssl_check": "1", "token": "t"}


def test_a_command_saying_ssl_check_is_still_verified() -> None:
    body = command(ssl_check="1")
    checked = read_slack_request(body.encode(), {}, secret=SECRET, now=time.time())
    assert isinstance(checked, Refused) and checked.status == 401


@pytest.mark.parametrize("kind", ["shortcut", "message_action", "block_suggestion"])
def test_unregistered_interactions_reach_bolt(kind: str) -> None:
    payload = {"type": kind, "user": {"id": "U1"}, "team": {"id": "T1"}, "callback_id": "c", "action_id": "a"}
    checked = read(interaction(payload))
    assert isinstance(checked, SlackRequest) and checked.body["type"] == kind
