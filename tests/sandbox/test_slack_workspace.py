"""LocalSlack against the real slack_sdk / slack_bolt clients, over real HTTP on ephemeral ports."""

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

import httpx
import pytest
from slack_bolt.adapter.starlette.async_handler import AsyncSlackRequestHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from sandbox.asgi_server import serve_asgi
from sandbox.slack import ApiCall, LocalSlack
from tests.sandbox.browser import CHROMIUM, browser_page

SECRET = "test-signing-secret"
TOKEN = "xoxb-test-token"
ALICE, BOB = "U0ALICE", "U0BOB"
OPS, GENERAL = "C0OPS", "C0GENERAL"
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f8cf00000301010018dd8db00000000049454e44ae426082"
)

BUTTONS: list[dict[str, Any]] = [
    {"type": "section", "text": {"type": "mrkdwn", "text": "*Cluster* `demo-1` is idle"}},
    {
        "type": "actions",
        "block_id": "cluster_actions",
        "elements": [
            {
                "type": "button",
                "action_id": "stop_cluster",
                "text": {"type": "plain_text", "text": "Stop"},
                "value": "demo-1",
                "style": "danger",
            },
            {
                "type": "button",
                "action_id": "keep_cluster",
                "text": {"type": "plain_text", "text": "Keep"},
                "value": "keep:demo-1",
            },
        ],
    },
]

MODAL: dict[str, Any] = {
    "type": "modal",
    "callback_id": "launch_cluster",
    "private_metadata": '{"org": "kumo-labs"}',
    "title": {"type": "plain_text", "text": "Launch a cluster"},
    "submit": {"type": "plain_text", "text": "Launch"},
    "close": {"type": "plain_text", "text": "Cancel"},
    "blocks": [
        {"type": "section", "text": {"type": "mrkdwn", "text": "Template *hyperpod-p5*"}},
        {
            "type": "input",
            "block_id": "name",
            "label": {"type": "plain_text", "text": "Cluster name"},
            "element": {"type": "plain_text_input", "action_id": "name_input"},
        },
        {
            "type": "input",
            "block_id": "count",
            "optional": True,
            "label": {"type": "plain_text", "text": "Nodes"},
            "element": {"type": "number_text_input", "action_id": "count_input", "initial_value": "2"},
        },
        {
            "type": "input",
            "block_id": "notes",
            "optional": True,
            "label": {"type": "plain_text", "text": "Notes"},
            "element": {"type": "plain_text_input", "action_id": "notes_input", "multiline": True},
        },
    ],
}


@dataclass
class Receiver:
    """A stand-in for the bot's /slack/events endpoint that checks signatures like Bolt does."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    reply: Callable[[dict[str, str]], Awaitable[Response]] | None = None

    async def endpoint(self, request: Request) -> Response:
        body = (await request.body()).decode()
        valid = SignatureVerifier(SECRET).is_valid_request(body, dict(request.headers))
        form = dict(parse_qsl(body, keep_blank_values=True))
        self.requests.append({"valid": valid, "headers": dict(request.headers), "form": form})
        if not valid:
            return JSONResponse({"error": "invalid request"}, status_code=401)
        if self.reply is not None:
            return await self.reply(form)
        return Response(status_code=200)

    def payload(self, index: int = -1) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.requests[index]["form"]["payload"])
        return parsed


@pytest.fixture
async def slack() -> AsyncIterator[LocalSlack]:
    local = LocalSlack(
        signing_secret=SECRET,
        bot_token=TOKEN,
        users={ALICE: "Alice Smith", BOB: "Bob Jones"},
        channels={OPS: "ops", GENERAL: "general"},
    )
    async with serve_asgi(local.app) as base_url:
        local.base_url = base_url
        yield local


@pytest.fixture
async def receiver(slack: LocalSlack) -> AsyncIterator[Receiver]:
    bot = Receiver()
    app = Starlette(routes=[Route("/slack/events", bot.endpoint, methods=["POST"])])
    async with serve_asgi(app) as base_url:
        slack.events_url = f"{base_url}/slack/events"
        yield bot


@pytest.fixture
def client(slack: LocalSlack) -> AsyncWebClient:
    return AsyncWebClient(token=TOKEN, base_url=slack.api_url)


# ---------------------------------------------------------------------- Web API


async def test_auth_test_identifies_the_bot(slack: LocalSlack, client: AsyncWebClient) -> None:
    response = await client.auth_test()
    assert response["ok"] is True
    assert response["user_id"] == "U0PITCREW"
    assert response["team_id"] == "T0PITCREW"
    assert response["bot_id"]
    assert slack.calls[-1].method == "auth.test"


async def test_post_update_and_ephemeral(slack: LocalSlack, client: AsyncWebClient) -> None:
    posted = await client.chat_postMessage(channel=OPS, text="Cluster demo-1 is idle", blocks=BUTTONS)
    assert posted["channel"] == OPS
    assert posted["message"]["text"] == "Cluster demo-1 is idle"
    assert posted["message"]["blocks"] == BUTTONS
    ts = posted["ts"]

    updated = await client.chat_update(channel=OPS, ts=ts, text="Stopping demo-1", blocks=[])
    assert updated["ts"] == ts
    [message] = slack.channel_messages(OPS)
    assert (message.text, message.blocks, message.edits, message.via) == (
        "Stopping demo-1",
        [],
        1,
        "chat.postMessage",
    )

    threaded = await client.chat_postMessage(channel=OPS, text="details", thread_ts=ts)
    assert slack.channel_messages(OPS)[-1].thread_ts == ts
    assert float(threaded["ts"]) > float(ts)

    ephemeral = await client.chat_postEphemeral(channel=OPS, user=ALICE, text="only you")
    assert ephemeral["message_ts"]
    assert [m.text for m in slack.channel_messages(OPS, visible_to=ALICE)][-1] == "only you"
    assert "only you" not in [m.text for m in slack.channel_messages(OPS, visible_to=BOB)]
    last = slack.messages[-1]
    assert (last.kind, last.ephemeral_to, last.via) == ("ephemeral", ALICE, "chat.postEphemeral")

    # Ephemerals cannot be edited through chat.update on real Slack either.
    with pytest.raises(SlackApiError) as excinfo:
        await client.chat_update(channel=OPS, ts=ephemeral["message_ts"], text="x")
    assert excinfo.value.response["error"] == "message_not_found"

    await client.chat_delete(channel=OPS, ts=threaded["ts"])
    assert threaded["ts"] not in [m.ts for m in slack.messages]

    methods = [c.method for c in slack.calls]
    assert methods == [
        "chat.postMessage",
        "chat.update",
        "chat.postMessage",
        "chat.postEphemeral",
        "chat.update",
        "chat.delete",
    ]
    assert all("token" not in c.params for c in slack.calls)
    assert slack.calls[0].params["channel"] == OPS


@pytest.mark.filterwarnings("ignore:The top-level `text` argument is missing")
async def test_web_api_errors(slack: LocalSlack, client: AsyncWebClient) -> None:
    cases: list[tuple[Callable[[], Awaitable[Any]], str]] = [
        (lambda: client.chat_postMessage(channel="C0NOPE", text="x"), "channel_not_found"),
        (lambda: client.chat_postMessage(channel=OPS), "no_text"),
        (lambda: client.chat_update(channel=OPS, ts="1.000001", text="x"), "message_not_found"),
        (lambda: client.users_info(user="U0NOBODY"), "user_not_found"),
        (lambda: client.conversations_info(channel="C0NOPE"), "channel_not_found"),
        (
            lambda: client.chat_postMessage(
                channel=OPS, text="x", blocks=[{"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}]
            ),
            "invalid_blocks",
        ),
    ]
    for call, error in cases:
        with pytest.raises(SlackApiError) as excinfo:
            await call()
        assert excinfo.value.response["error"] == error
    assert slack.messages == []


async def test_invalid_token_is_rejected(slack: LocalSlack) -> None:
    bad = AsyncWebClient(token="xoxb-wrong", base_url=slack.api_url)
    with pytest.raises(SlackApiError) as excinfo:
        await bad.chat_postMessage(channel=OPS, text="hi")
    assert excinfo.value.response["error"] == "invalid_auth"
    assert slack.messages == []
    assert slack.calls[-1].method == "chat.postMessage"


async def test_token_param_and_unknown_method(slack: LocalSlack) -> None:
    async with httpx.AsyncClient() as http:
        ok = await http.post(f"{slack.api_url}auth.test", data={"token": TOKEN})
        assert ok.json()["ok"] is True
        unknown = await http.post(f"{slack.api_url}chat.frobnicate", headers={"Authorization": f"Bearer {TOKEN}"})
    assert unknown.status_code == 404
    assert unknown.json() == {"ok": False, "error": "unknown_method"}


async def test_users_and_conversations_info(slack: LocalSlack, client: AsyncWebClient) -> None:
    user = (await client.users_info(user=ALICE))["user"]
    assert user["id"] == ALICE
    assert user["real_name"] == "Alice Smith"
    assert user["profile"]["display_name"] == "Alice Smith"
    assert user["tz"]
    # users.info is sent as GET with a query string.
    assert slack.calls[-1] == ApiCall("users.info", {"user": ALICE})

    channel = (await client.conversations_info(channel=OPS))["channel"]
    assert (channel["id"], channel["name"], channel["is_channel"], channel["is_private"]) == (OPS, "ops", True, False)


async def test_views_publish_stores_home(slack: LocalSlack, client: AsyncWebClient) -> None:
    view = {"type": "home", "blocks": [{"type": "header", "text": {"type": "plain_text", "text": "Pitcrew"}}]}
    response = await client.views_publish(user_id=ALICE, view=view)
    assert response["view"]["type"] == "home"
    assert response["view"]["id"]
    assert slack.home_views[ALICE]["blocks"] == view["blocks"]
    assert BOB not in slack.home_views


async def test_files_upload_v2_end_to_end(slack: LocalSlack, client: AsyncWebClient) -> None:
    posted = await client.chat_postMessage(channel=OPS, text="report")
    response = await client.files_upload_v2(
        channel=OPS,
        file=PNG,
        filename="usage.png",
        title="GPU usage",
        initial_comment="Weekly usage",
        thread_ts=posted["ts"],
    )
    file_info = response["file"]
    assert file_info["title"] == "GPU usage"
    assert file_info["name"] == "usage.png"

    message = slack.messages[-1]
    assert (message.via, message.kind, message.text, message.thread_ts) == (
        "files",
        "message",
        "Weekly usage",
        posted["ts"],
    )
    assert message.files == [
        {"id": file_info["id"], "title": "GPU usage", "filename": "usage.png", "url": file_info["url_private"]}
    ]
    async with httpx.AsyncClient() as http:
        served = await http.get(message.files[0]["url"])
    assert served.status_code == 200
    assert served.headers["content-type"] == "image/png"
    assert served.content == PNG
    assert [c.method for c in slack.calls][-2:] == ["files.getUploadURLExternal", "files.completeUploadExternal"]


async def test_rate_limit_honoured_by_retry_handler(slack: LocalSlack, client: AsyncWebClient) -> None:
    client.retry_handlers.append(AsyncRateLimitErrorRetryHandler(max_retry_count=1))
    slack.fail_next("chat.postMessage", retry_after=1)
    started = time.monotonic()
    response = await client.chat_postMessage(channel=OPS, text="after a pause")
    assert response["ok"] is True
    assert time.monotonic() - started >= 1.0
    assert [c.method for c in slack.calls] == ["chat.postMessage", "chat.postMessage"]
    assert [m.text for m in slack.messages] == ["after a pause"]


async def test_rate_limit_without_retry_handler(slack: LocalSlack) -> None:
    slack.fail_next("chat.update", retry_after=7, count=2)
    async with httpx.AsyncClient() as http:
        answers = [
            await http.post(f"{slack.api_url}chat.update", headers={"Authorization": f"Bearer {TOKEN}"})
            for _ in range(3)
        ]
    assert [a.status_code for a in answers] == [429, 429, 200]
    assert answers[0].headers["retry-after"] == "7"
    assert answers[0].json() == {"ok": False, "error": "ratelimited"}
    assert answers[2].json()["error"] == "channel_not_found"


# ---------------------------------------------------------------------- slash commands


async def test_send_command_is_signed_like_slack(slack: LocalSlack, receiver: Receiver) -> None:
    response = await slack.send_command(user_id=ALICE, channel_id=OPS, command="/cluster", text="list all")
    assert response.status_code == 200
    [request] = receiver.requests
    assert request["valid"] is True
    assert request["headers"]["content-type"] == "application/x-www-form-urlencoded"
    form = request["form"]
    assert {k: form[k] for k in ("command", "text", "user_id", "channel_id", "channel_name", "team_id")} == {
        "command": "/cluster",
        "text": "list all",
        "user_id": ALICE,
        "channel_id": OPS,
        "channel_name": "ops",
        "team_id": "T0PITCREW",
    }
    assert form["response_url"].startswith(f"{slack.base_url}/response/")
    assert form["trigger_id"] and form["api_app_id"] and form["token"]
    assert form["is_enterprise_install"] == "false"

    [command] = slack.messages
    assert (command.kind, command.user, command.text) == ("command", ALICE, "/cluster list all")
    assert slack.channel_messages(OPS, visible_to=BOB) == []


async def test_forged_or_stale_commands_fail_verification(slack: LocalSlack, receiver: Receiver) -> None:
    forged = await slack.send_command(
        user_id=ALICE, channel_id=OPS, command="/cluster", text="list", signing_secret="not-the-secret"
    )
    stale = await slack.send_command(
        user_id=ALICE, channel_id=OPS, command="/cluster", text="list", timestamp=int(time.time()) - 600
    )
    assert (forged.status_code, stale.status_code) == (401, 401)
    assert [r["valid"] for r in receiver.requests] == [False, False]
    assert all(m.kind == "command" for m in slack.messages)


async def test_ack_body_is_shown_like_slack(slack: LocalSlack, receiver: Receiver) -> None:
    async def plain(_form: dict[str, str]) -> Response:
        return PlainTextResponse("Working on it")

    receiver.reply = plain
    await slack.send_command(user_id=ALICE, channel_id=OPS, command="/cluster", text="list")
    ack = slack.messages[-1]
    assert (ack.kind, ack.ephemeral_to, ack.text, ack.via) == ("ephemeral", ALICE, "Working on it", "ack")

    async def in_channel(_form: dict[str, str]) -> Response:
        return JSONResponse({"response_type": "in_channel", "text": "Everyone sees this", "blocks": BUTTONS})

    receiver.reply = in_channel
    await slack.send_command(user_id=ALICE, channel_id=OPS, command="/cluster", text="list")
    public = slack.messages[-1]
    assert (public.kind, public.ephemeral_to, public.blocks) == ("message", None, BUTTONS)
    assert public in slack.channel_messages(OPS, visible_to=BOB)

    async def empty(_form: dict[str, str]) -> Response:
        return Response(status_code=200)

    receiver.reply = empty
    before = len(slack.messages)
    await slack.send_command(user_id=ALICE, channel_id=OPS, command="/cluster", text="list")
    assert len(slack.messages) == before + 1  # just the typed command


async def test_response_url_ephemeral_in_channel_and_use_limit(slack: LocalSlack, receiver: Receiver) -> None:
    await slack.send_command(user_id=BOB, channel_id=GENERAL, command="/cluster", text="list")
    webhook = AsyncWebhookClient(receiver.requests[-1]["form"]["response_url"])

    first = await webhook.send(text="just for Bob")
    assert (first.status_code, first.body) == (200, "ok")
    assert (slack.messages[-1].kind, slack.messages[-1].ephemeral_to) == ("ephemeral", BOB)
    assert slack.messages[-1].via == "response_url"

    await webhook.send(text="for everyone", response_type="in_channel")
    assert (slack.messages[-1].kind, slack.messages[-1].channel) == ("message", GENERAL)
    assert slack.channel_messages(GENERAL, visible_to=ALICE)[-1].text == "for everyone"
    assert "just for Bob" not in [m.text for m in slack.channel_messages(GENERAL, visible_to=ALICE)]

    # replace_original is ignored on a command's response_url: Slack posts a new message.
    await webhook.send(text="third", replace_original=True)
    assert slack.messages[-1].text == "third"
    for n in (4, 5):
        assert (await webhook.send(text=f"use {n}")).status_code == 200
    slack.fail_next("response_url", status=500)
    failed = await webhook.send(text="lost")
    assert failed.status_code == 500
    sixth = await webhook.send(text="too many")
    assert (sixth.status_code, sixth.body) == (404, "used_url")
    assert not {"lost", "too many"} & {m.text for m in slack.messages}
    assert [c.method for c in slack.calls].count("response_url") == 7


# ---------------------------------------------------------------------- clicks


async def test_click_payload_and_replace_original(
    slack: LocalSlack, receiver: Receiver, client: AsyncWebClient
) -> None:
    posted = await client.chat_postMessage(channel=OPS, text="Cluster demo-1 is idle", blocks=BUTTONS)
    message = await slack.wait_for(lambda m: m.ts == posted["ts"])

    response = await slack.click(user_id=BOB, message=message, action_id="stop_cluster")
    assert response.status_code == 200
    assert receiver.requests[-1]["valid"] is True
    payload = receiver.payload()
    assert payload["type"] == "block_actions"
    assert payload["user"]["id"] == BOB
    assert payload["team"]["id"] == "T0PITCREW"
    assert payload["container"] == {
        "type": "message",
        "message_ts": message.ts,
        "channel_id": OPS,
        "is_ephemeral": False,
    }
    assert payload["channel"] == {"id": OPS, "name": "ops"}
    assert payload["message"]["ts"] == message.ts
    assert payload["message"]["blocks"] == BUTTONS
    action = payload["actions"][0]
    assert (action["action_id"], action["block_id"], action["value"], action["type"]) == (
        "stop_cluster",
        "cluster_actions",
        "demo-1",
        "button",
    )
    assert action["text"]["text"] == "Stop"

    await slack.click(user_id=ALICE, message=message, action_id="keep_cluster", value="override")
    assert receiver.payload()["actions"][0]["value"] == "override"
    with pytest.raises(ValueError, match="no element"):
        await slack.click(user_id=ALICE, message=message, action_id="missing")

    # The first click's response_url still points at the clicked message.
    webhook = AsyncWebhookClient(payload["response_url"])
    await webhook.send(text="Stopping demo-1 (requested by Bob)", replace_original=True)
    assert (message.text, message.blocks, message.edits) == ("Stopping demo-1 (requested by Bob)", [], 1)


async def test_click_on_ephemeral_and_delete_original(
    slack: LocalSlack, receiver: Receiver, client: AsyncWebClient
) -> None:
    await client.chat_postEphemeral(channel=OPS, user=ALICE, text="Confirm?", blocks=BUTTONS)
    message = slack.messages[-1]
    await slack.click(user_id=ALICE, message=message, action_id="keep_cluster")
    payload = receiver.payload()
    assert payload["container"]["is_ephemeral"] is True
    assert "message" not in payload  # as on real Slack
    await AsyncWebhookClient(payload["response_url"]).send_dict({"delete_original": True})
    assert message not in slack.messages


# ---------------------------------------------------------------------- Bolt end to end


async def test_bolt_app_round_trip(slack: LocalSlack, client: AsyncWebClient) -> None:
    bolt = AsyncApp(client=client, signing_secret=SECRET)

    @bolt.command("/cluster")
    async def cluster(ack: Any, respond: Any, say: Any, command: dict[str, Any]) -> None:
        await ack("Looking up clusters...")
        await respond(text=f"You asked for: {command['text']}")
        await say(text="Clusters", blocks=BUTTONS)

    @bolt.action("stop_cluster")
    async def stop(ack: Any, respond: Any, body: dict[str, Any]) -> None:
        await ack()
        await respond(text=f"Stopped {body['actions'][0]['value']}", replace_original=True)

    handler = AsyncSlackRequestHandler(bolt)

    async def events(request: Request) -> Response:
        return await handler.handle(request)

    async with serve_asgi(Starlette(routes=[Route("/slack/events", events, methods=["POST"])])) as url:
        slack.events_url = f"{url}/slack/events"
        response = await slack.send_command(user_id=ALICE, channel_id=OPS, command="/cluster", text="list")
        assert response.status_code == 200
        ack = await slack.wait_for(lambda m: m.via == "ack")
        assert (ack.kind, ack.text) == ("ephemeral", "Looking up clusters...")
        reply = await slack.wait_for(lambda m: m.via == "response_url")
        assert (reply.kind, reply.ephemeral_to, reply.text) == ("ephemeral", ALICE, "You asked for: list")
        posted = await slack.wait_for(lambda m: m.via == "chat.postMessage" and bool(m.blocks))

        clicked = await slack.click(user_id=BOB, message=posted, action_id="stop_cluster")
        assert clicked.status_code == 200
        edited = await slack.wait_for(lambda m: m.ts == posted.ts and m.edits == 1)
        assert edited.text == "Stopped demo-1"

        bad = await slack.send_command(
            user_id=ALICE, channel_id=OPS, command="/cluster", text="list", signing_secret="forged"
        )
        assert bad.status_code == 401


# ---------------------------------------------------------------------- modals


def trigger_for(slack: LocalSlack, user_id: str = ALICE) -> str:
    """A fresh trigger_id, as a slash command by `user_id` would carry."""
    return slack.slash_command_form(user_id=user_id, channel_id=OPS, command="/cluster", text="launch")["trigger_id"]


async def test_views_open_returns_the_view_like_slack(slack: LocalSlack, client: AsyncWebClient) -> None:
    response = await client.views_open(trigger_id=trigger_for(slack), view=MODAL)
    view = response["view"]
    assert view["id"].startswith("V")
    assert (view["type"], view["callback_id"], view["private_metadata"]) == (
        "modal",
        "launch_cluster",
        '{"org": "kumo-labs"}',
    )
    assert view["title"] == MODAL["title"]
    assert view["submit"] == MODAL["submit"]
    assert view["state"] == {"values": {}}
    assert view["hash"] and view["root_view_id"] == view["id"] and view["previous_view_id"] is None
    assert view["notify_on_close"] is False
    # Slack gives every block a block_id; the ones the app chose are kept.
    assert [b["block_id"] for b in view["blocks"][1:]] == ["name", "count", "notes"]
    assert view["blocks"][0]["block_id"]
    assert not {"user_id", "errors", "response_error"} & set(view)

    stored = slack.open_views[view["id"]]
    assert stored["user_id"] == ALICE
    assert slack.user_views(ALICE) == [stored]
    assert slack.user_views(BOB) == []
    assert slack.calls[-1].method == "views.open"
    assert slack.calls[-1].params["trigger_id"]


async def test_views_open_trigger_id_rules(slack: LocalSlack, receiver: Receiver, client: AsyncWebClient) -> None:
    async def fails(trigger_id: str) -> str:
        with pytest.raises(SlackApiError) as excinfo:
            await client.views_open(trigger_id=trigger_id, view=MODAL)
        error: str = excinfo.value.response["error"]
        return error

    used = trigger_for(slack)
    await client.views_open(trigger_id=used, view=MODAL)
    assert await fails(used) == "exchanged_trigger_id"
    assert await fails("12345.98765.abcd2358fdea") == "invalid_trigger_id"

    now = time.time()
    slack.clock = lambda: now
    stale = trigger_for(slack)
    slack.clock = lambda: now + 3.5
    assert await fails(stale) == "expired_trigger_id"
    fresh = trigger_for(slack)
    slack.clock = lambda: now + 6.0  # 2.5 s after it was issued: still good
    await client.views_open(trigger_id=fresh, view=MODAL)
    slack.clock = time.time

    # A click's trigger opens the modal for whoever clicked.
    posted = await client.chat_postMessage(channel=OPS, text="buttons", blocks=BUTTONS)
    await slack.click(
        user_id=BOB, message=await slack.wait_for(lambda m: m.ts == posted["ts"]), action_id="stop_cluster"
    )
    opened = await client.views_open(trigger_id=receiver.payload()["trigger_id"], view=MODAL)
    assert slack.open_views[opened["view"]["id"]]["user_id"] == BOB
    assert [len(slack.user_views(u)) for u in (ALICE, BOB)] == [2, 1]


async def test_views_open_rejects_bad_views(slack: LocalSlack, client: AsyncWebClient) -> None:
    no_title = {k: v for k, v in MODAL.items() if k != "title"}
    long_title = {**MODAL, "title": {"type": "plain_text", "text": "Launch a training cluster now"}}
    cases: list[tuple[dict[str, Any], str]] = [
        (no_title, "[ERROR] missing required field: title [json-pointer:/view]"),
        (long_title, "[ERROR] must be 1-24 characters [json-pointer:/view/title/text]"),
        ({**MODAL, "submit": {"type": "mrkdwn", "text": "Go"}}, "[json-pointer:/view/submit]"),
        ({**MODAL, "private_metadata": "x" * 3001}, "[json-pointer:/view/private_metadata]"),
        ({**MODAL, "callback_id": "c" * 256}, "[json-pointer:/view/callback_id]"),
        ({**MODAL, "blocks": [MODAL["blocks"][0]] * 101}, "no more than 100 items allowed [json-pointer:/view/blocks]"),
        ({**MODAL, "blocks": [{**MODAL["blocks"][1], "label": None}]}, "[json-pointer:/view/blocks/0/label/text]"),
        ({k: v for k, v in MODAL.items() if k != "submit"}, "must provide submit"),
        ({**MODAL, "type": "home"}, "[json-pointer:/view/type]"),
    ]
    for view, message in cases:
        trigger_id = trigger_for(slack)
        with pytest.raises(SlackApiError) as excinfo:
            await client.views_open(trigger_id=trigger_id, view=view)
        assert excinfo.value.response["error"] == "invalid_arguments"
        messages = excinfo.value.response["response_metadata"]["messages"]
        assert any(message in m for m in messages), (message, messages)
        # A rejected view does not spend the trigger.
        await client.views_open(trigger_id=trigger_id, view=MODAL)
    assert len(slack.open_views) == len(cases)


async def test_views_update_by_id_hash_and_external_id(slack: LocalSlack, client: AsyncWebClient) -> None:
    opened = (await client.views_open(trigger_id=trigger_for(slack), view={**MODAL, "external_id": "launch-1"}))["view"]
    changed = {**MODAL, "title": {"type": "plain_text", "text": "Launching..."}, "blocks": MODAL["blocks"][:1]}
    updated = (await client.views_update(view_id=opened["id"], hash=opened["hash"], view=changed))["view"]
    assert updated["id"] == opened["id"]
    assert updated["hash"] != opened["hash"]
    assert updated["title"]["text"] == "Launching..."
    assert slack.open_views[opened["id"]]["blocks"] == updated["blocks"]

    with pytest.raises(SlackApiError) as excinfo:
        await client.views_update(view_id=opened["id"], hash=opened["hash"], view=changed)
    assert excinfo.value.response["error"] == "hash_conflict"
    await client.views_update(external_id="launch-1", view={**MODAL, "external_id": "launch-1"})
    assert len(slack.open_views[opened["id"]]["blocks"]) == 4
    with pytest.raises(SlackApiError) as excinfo:
        await client.views_update(view_id="V0NOPE", view=MODAL)
    assert excinfo.value.response["error"] == "not_found"
    with pytest.raises(SlackApiError) as excinfo:
        await client.views_open(trigger_id=trigger_for(slack), view={**MODAL, "external_id": "launch-1"})
    assert excinfo.value.response["error"] == "duplicate_external_id"


async def test_submit_view_payload_is_signed_and_shaped_like_slack(
    slack: LocalSlack, receiver: Receiver, client: AsyncWebClient
) -> None:
    view = (await client.views_open(trigger_id=trigger_for(slack), view=MODAL))["view"]
    response = await slack.submit_view(user_id=ALICE, view_id=view["id"], values={"name": {"name_input": "demo-2"}})
    assert response.status_code == 200
    request = receiver.requests[-1]
    assert request["valid"] is True
    assert request["headers"]["content-type"] == "application/x-www-form-urlencoded"
    payload = receiver.payload()
    assert payload["type"] == "view_submission"
    assert payload["user"] == {"id": ALICE, "username": "alice.smith", "name": "alice.smith", "team_id": "T0PITCREW"}
    assert payload["team"] == {"id": "T0PITCREW", "domain": "pitcrew-local"}
    assert payload["api_app_id"] and payload["token"] and payload["trigger_id"]
    assert (payload["response_urls"], payload["is_enterprise_install"], payload["enterprise"]) == ([], False, None)
    submitted = payload["view"]
    assert (submitted["id"], submitted["callback_id"], submitted["private_metadata"], submitted["hash"]) == (
        view["id"],
        "launch_cluster",
        '{"org": "kumo-labs"}',
        view["hash"],
    )
    # Every input is present; untouched ones carry their initial value or null.
    assert submitted["state"]["values"] == {
        "name": {"name_input": {"type": "plain_text_input", "value": "demo-2"}},
        "count": {"count_input": {"type": "number_text_input", "value": "2"}},
        "notes": {"notes_input": {"type": "plain_text_input", "value": None}},
    }
    # The submission's trigger can open another modal (e.g. a follow-up view).
    await client.views_open(trigger_id=payload["trigger_id"], view=MODAL)
    # An empty 200 closed the submitted view.
    assert view["id"] not in slack.open_views


async def test_submit_view_refuses_what_slack_would_not_send(
    slack: LocalSlack, receiver: Receiver, client: AsyncWebClient
) -> None:
    view_id = (await client.views_open(trigger_id=trigger_for(slack), view=MODAL))["view"]["id"]
    bad: list[tuple[str, dict[str, dict[str, str]], str]] = [
        (BOB, {"name": {"name_input": "x"}}, "not open for U0BOB"),
        (ALICE, {"nope": {"name_input": "x"}}, "no input element nope/name_input"),
        (ALICE, {"name": {"other": "x"}}, "no input element name/other"),
        (ALICE, {"notes": {"notes_input": "hi"}}, "input name is required"),
        (ALICE, {"name": {"name_input": ""}}, "input name is required"),
    ]
    for user_id, values, message in bad:
        with pytest.raises(ValueError, match=message):
            await slack.submit_view(user_id=user_id, view_id=view_id, values=values)
    assert receiver.requests == []
    assert view_id in slack.open_views


async def test_errors_response_keeps_the_view_open(
    slack: LocalSlack, receiver: Receiver, client: AsyncWebClient
) -> None:
    view_id = (await client.views_open(trigger_id=trigger_for(slack), view=MODAL))["view"]["id"]

    async def name_taken(_form: dict[str, str]) -> Response:
        return JSONResponse({"response_action": "errors", "errors": {"name": "demo-1 already exists"}})

    receiver.reply = name_taken
    await slack.submit_view(user_id=ALICE, view_id=view_id, values={"name": {"name_input": "demo-1"}})
    stored = slack.open_views[view_id]
    assert stored["errors"] == {"name": "demo-1 already exists"}
    # What the user typed stays in the modal.
    assert stored["state"]["values"]["name"]["name_input"]["value"] == "demo-1"

    async def unknown_block(_form: dict[str, str]) -> Response:
        return JSONResponse({"response_action": "errors", "errors": {"name_input": "wrong key"}})

    receiver.reply = unknown_block  # Slack only accepts input block_ids here
    await slack.submit_view(user_id=ALICE, view_id=view_id, values={"name": {"name_input": "demo-1"}})
    assert "errors must map input block_ids" in stored["response_error"]
    assert view_id in slack.open_views

    receiver.reply = None  # an empty ack
    await slack.submit_view(user_id=ALICE, view_id=view_id, values={"name": {"name_input": "demo-2"}})
    assert view_id not in slack.open_views
    assert slack.user_views(ALICE) == []


async def test_update_push_and_clear_responses(slack: LocalSlack, receiver: Receiver, client: AsyncWebClient) -> None:
    view_id = (await client.views_open(trigger_id=trigger_for(slack), view=MODAL))["view"]["id"]
    done = {
        "type": "modal",
        "title": {"type": "plain_text", "text": "Launching"},
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "Started *demo-2*"}}],
    }
    answers = iter(
        [
            {"response_action": "update", "view": done},
            {"response_action": "push", "view": {**MODAL, "callback_id": "confirm"}},
            {"response_action": "clear"},
        ]
    )

    async def next_answer(_form: dict[str, str]) -> Response:
        return JSONResponse(next(answers))

    receiver.reply = next_answer
    await slack.submit_view(user_id=ALICE, view_id=view_id, values={"name": {"name_input": "demo-2"}})
    [updated] = slack.user_views(ALICE)
    assert (updated["id"], updated["title"]["text"], updated["state"]) == (view_id, "Launching", {"values": {}})

    await client.views_update(view_id=view_id, view=MODAL)
    await slack.submit_view(user_id=ALICE, view_id=view_id, values={"name": {"name_input": "demo-2"}})
    root, pushed = slack.user_views(ALICE)
    assert root["id"] == view_id
    assert (pushed["callback_id"], pushed["previous_view_id"], pushed["root_view_id"]) == ("confirm", view_id, view_id)
    assert (await slack.wait_for_view(user_id=ALICE))["id"] == pushed["id"]

    await slack.submit_view(user_id=ALICE, view_id=pushed["id"], values={"name": {"name_input": "demo-2"}})
    assert slack.user_views(ALICE) == []


async def test_close_view_notifies_only_when_asked(
    slack: LocalSlack, receiver: Receiver, client: AsyncWebClient
) -> None:
    quiet = (await client.views_open(trigger_id=trigger_for(slack), view=MODAL))["view"]["id"]
    assert await slack.close_view(user_id=ALICE, view_id=quiet) is None
    assert receiver.requests == []
    assert quiet not in slack.open_views

    loud = (await client.views_open(trigger_id=trigger_for(slack), view={**MODAL, "notify_on_close": True}))["view"]
    response = await slack.close_view(user_id=ALICE, view_id=loud["id"])
    assert response is not None and response.status_code == 200
    assert receiver.requests[-1]["valid"] is True
    payload = receiver.payload()
    assert (payload["type"], payload["is_cleared"], payload["user"]["id"]) == ("view_closed", False, ALICE)
    assert (payload["view"]["id"], payload["view"]["callback_id"]) == (loud["id"], "launch_cluster")
    with pytest.raises(ValueError, match="not open"):
        await slack.close_view(user_id=ALICE, view_id=loud["id"])


async def test_bolt_modal_round_trip(slack: LocalSlack, client: AsyncWebClient) -> None:
    bolt = AsyncApp(client=client, signing_secret=SECRET)
    launched: list[tuple[str, str, str]] = []

    @bolt.command("/cluster")
    async def open_launcher(ack: Any, body: dict[str, Any], client: AsyncWebClient) -> None:
        await ack()
        await client.views_open(trigger_id=body["trigger_id"], view=MODAL)

    @bolt.view("launch_cluster")
    async def launch(ack: Any, body: dict[str, Any], view: dict[str, Any]) -> None:
        name = view["state"]["values"]["name"]["name_input"]["value"]
        if name == "demo-1":
            await ack(response_action="errors", errors={"name": "demo-1 already exists"})
            return
        launched.append((body["user"]["id"], name, view["private_metadata"]))
        await ack()

    handler = AsyncSlackRequestHandler(bolt)

    async def events(request: Request) -> Response:
        return await handler.handle(request)

    async with serve_asgi(Starlette(routes=[Route("/slack/events", events, methods=["POST"])])) as url:
        slack.events_url = f"{url}/slack/events"
        await slack.send_command(user_id=ALICE, channel_id=OPS, command="/cluster", text="launch")
        modal = await slack.wait_for_view(user_id=ALICE, callback_id="launch_cluster")

        await slack.submit_view(user_id=ALICE, view_id=modal["id"], values={"name": {"name_input": "demo-1"}})
        assert modal["errors"] == {"name": "demo-1 already exists"}
        await slack.submit_view(user_id=ALICE, view_id=modal["id"], values={"name": {"name_input": "demo-2"}})
        assert launched == [(ALICE, "demo-2", '{"org": "kumo-labs"}')]
        assert slack.user_views(ALICE) == []

    with pytest.raises(TimeoutError, match="no modal"):
        await slack.wait_for_view(user_id=ALICE, timeout=0.1)


# ---------------------------------------------------------------------- waiting, clock


async def test_wait_for_future_message_and_timeout(slack: LocalSlack, client: AsyncWebClient) -> None:
    async def later() -> None:
        await asyncio.sleep(0.1)
        await client.chat_postMessage(channel=OPS, text="eventually")

    task = asyncio.create_task(later())
    found = await slack.wait_for(lambda m: m.text == "eventually", timeout=5)
    await task
    assert found.channel == OPS

    with pytest.raises(TimeoutError, match="eventually"):
        await slack.wait_for(lambda m: m.text == "never", timeout=0.2)


def test_ts_unique_and_increasing_with_frozen_clock() -> None:
    local = LocalSlack(signing_secret=SECRET, bot_token=TOKEN, users={}, channels={}, clock=lambda: 1764441234.0)
    stamps = [local._next_ts() for _ in range(3)]
    assert stamps == ["1764441234.000000", "1764441234.000001", "1764441234.000002"]


# ---------------------------------------------------------------------- console


@pytest.mark.usefixtures("receiver")
async def test_console_state_hides_other_users_private_entries(slack: LocalSlack, client: AsyncWebClient) -> None:
    await client.chat_postMessage(channel=OPS, text="public")
    await client.chat_postEphemeral(channel=OPS, user=ALICE, text="alice only")
    await slack.send_command(user_id=ALICE, channel_id=OPS, command="/cluster", text="list")
    await client.views_publish(user_id=BOB, view={"type": "home", "blocks": []})
    async with httpx.AsyncClient(base_url=slack.base_url) as http:
        bob = (await http.get("/console/state", params={"user": BOB})).json()
        alice = (await http.get("/console/state", params={"user": ALICE})).json()
    assert [m["text"] for m in bob["messages"]] == ["public"]
    assert [m["text"] for m in alice["messages"]] == ["public", "alice only", "/cluster list"]
    assert bob["home"]["type"] == "home"
    assert alice["home"] is None
    assert {"id": OPS, "name": "ops"} in bob["channels"]
    assert {
        "id": ALICE,
        "name": "Alice Smith",
        "team_id": "T0PITCREW",
        "team_name": "Pitcrew (local)",
        "external": False,
    } in bob["users"]


async def test_console_page_command_and_action(slack: LocalSlack, receiver: Receiver, client: AsyncWebClient) -> None:
    posted = await client.chat_postMessage(channel=OPS, text="buttons", blocks=BUTTONS)
    async with httpx.AsyncClient(base_url=slack.base_url) as http:
        page = await http.get("/")
        command = await http.post(
            "/console/command", json={"user_id": ALICE, "channel_id": OPS, "text": "/cluster list all"}
        )
        not_a_command = await http.post("/console/command", json={"user_id": ALICE, "channel_id": OPS, "text": "hi"})
        action = await http.post(
            "/console/action",
            json={"user_id": BOB, "channel": OPS, "ts": posted["ts"], "action_id": "stop_cluster", "value": None},
        )
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert 'id="command"' in page.text
    assert command.json()["status"] == 200
    assert receiver.requests[0]["form"]["command"] == "/cluster"
    assert receiver.requests[0]["form"]["text"] == "list all"
    assert not_a_command.status_code == 400
    assert action.json()["status"] == 200
    assert receiver.payload()["actions"][0]["value"] == "demo-1"


async def test_console_shows_and_drives_modals(slack: LocalSlack, receiver: Receiver, client: AsyncWebClient) -> None:
    view_id = (await client.views_open(trigger_id=trigger_for(slack), view=MODAL))["view"]["id"]

    async def name_taken(_form: dict[str, str]) -> Response:
        return JSONResponse({"response_action": "errors", "errors": {"name": "demo-1 already exists"}})

    receiver.reply = name_taken
    async with httpx.AsyncClient(base_url=slack.base_url) as http:
        page = await http.get("/")
        bob = (await http.get("/console/state", params={"user": BOB})).json()
        submit = await http.post(
            "/console/view-submit",
            json={"user_id": ALICE, "view_id": view_id, "values": {"name": {"name_input": "demo-1"}}},
        )
        alice = (await http.get("/console/state", params={"user": ALICE})).json()
        missing = await http.post(
            "/console/view-submit", json={"user_id": ALICE, "view_id": view_id, "values": {"name": {"name_input": ""}}}
        )
        wrong_user = await http.post("/console/view-close", json={"user_id": BOB, "view_id": view_id})
        close = await http.post("/console/view-close", json={"user_id": ALICE, "view_id": view_id})
        after = (await http.get("/console/state", params={"user": ALICE})).json()
    assert 'id="modal-root"' in page.text
    assert bob["modals"] == []
    assert submit.json()["status"] == 200
    assert receiver.payload()["view"]["state"]["values"]["name"]["name_input"]["value"] == "demo-1"
    [modal] = alice["modals"]
    assert (modal["id"], modal["title"]["text"], modal["errors"]) == (
        view_id,
        "Launch a cluster",
        {"name": "demo-1 already exists"},
    )
    assert missing.status_code == 400 and "required" in missing.json()["error"]
    assert wrong_user.status_code == 400
    assert close.json() == {"status": 200, "body": ""}
    assert after["modals"] == []


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium to run the console page in")
async def test_the_console_page_closes_a_modal_after_a_successful_submit(
    slack: LocalSlack, receiver: Receiver, client: AsyncWebClient
) -> None:
    """In a browser: the page's own JavaScript. A submission the bot accepts (an empty 200) closes the view in
    the workspace, and the page must stop drawing it, or every later button names a view that is not open."""
    view_id = (await client.views_open(trigger_id=trigger_for(slack), view=MODAL))["view"]["id"]
    async with browser_page(f"{slack.base_url}/?user={ALICE}&channel={OPS}") as page:
        drawn = await page.wait_until("document.querySelector('#modal')?.dataset.view")
        assert drawn == view_id
        await page.evaluate(
            "(() => { const f = document.querySelector('.field[data-block=\"name\"]'); f.value = 'demo-1';"
            " document.getElementById('modal').requestSubmit(); })()"
        )
        said = await page.wait_until(
            "document.getElementById('status').textContent.startsWith('Modal') && "
            "document.getElementById('status').textContent"
        )
        assert "delivered" in said, said
        assert receiver.payload()["view"]["state"]["values"]["name"]["name_input"]["value"] == "demo-1"
        assert not slack.user_views(ALICE), "the workspace closed the view"
        await page.wait_until("document.getElementById('modal-root').innerHTML === ''", timeout=5)
