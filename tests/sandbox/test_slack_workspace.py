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

from bot.sandbox.asgi_server import serve_asgi
from bot.sandbox.slack_workspace import ApiCall, LocalSlack

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
    assert {"id": ALICE, "name": "Alice Smith"} in bob["users"]


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
