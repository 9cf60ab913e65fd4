"""LocalSlack's Events API side: mentions and DMs delivered as Slack delivers them (signed JSON envelopes,
retries), and Slack Connect members of another workspace as Slack shows them to the app."""

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

import httpx
import pytest
from slack_bolt.adapter.starlette.async_handler import AsyncSlackRequestHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bot.config import load_program
from sandbox.asgi_server import serve_asgi
from sandbox.demo import welcome
from sandbox.faults import Controls
from sandbox.slack import LocalSlack
from sandbox.slack.console import slack_text
from sandbox.world import EXAMPLE_PROGRAM, Sandbox, workspace_people, workspace_teams

SECRET = "test-signing-secret"
TOKEN = "xoxb-test-token"
HOST, KUMO = "T0PITCREW", "T0KUMOLAB"
ALICE, TARO = "U0ALICE", "U0TARO"
OPS = "C0OPS"


@dataclass
class EventReceiver:
    """A stand-in for the bot's /slack/events that checks signatures like Bolt and keeps the JSON bodies."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    # How the bot answers each delivery, in order ((seconds to wait, status)); then at once with 200.
    answers: list[tuple[float, int]] = field(default_factory=list)

    async def endpoint(self, request: Request) -> Response:
        raw = (await request.body()).decode()
        headers = dict(request.headers)
        valid = SignatureVerifier(SECRET).is_valid_request(raw, headers)
        self.requests.append({"valid": valid, "headers": headers, "raw": raw, "body": json.loads(raw) if raw else {}})
        if not valid:
            return JSONResponse({"error": "invalid request"}, status_code=401)
        delay, status = self.answers.pop(0) if self.answers else (0.0, 200)
        await asyncio.sleep(delay)
        return Response(status_code=status)


@pytest.fixture
async def slack() -> AsyncIterator[LocalSlack]:
    local = LocalSlack(
        signing_secret=SECRET,
        bot_token=TOKEN,
        users={ALICE: "Alice Smith", TARO: "taro (Kumo Labs' own Slack)"},
        channels={OPS: "ops"},
        user_teams={TARO: KUMO},
        teams={KUMO: "Kumo Labs' own Slack"},
    )
    async with serve_asgi(local.app) as base_url:
        local.base_url = base_url
        yield local


@pytest.fixture
async def receiver(slack: LocalSlack) -> AsyncIterator[EventReceiver]:
    bot = EventReceiver()
    app = Starlette(routes=[Route("/slack/events", bot.endpoint, methods=["POST"])])
    async with serve_asgi(app) as base_url:
        slack.events_url = f"{base_url}/slack/events"
        yield bot


@pytest.fixture
def client(slack: LocalSlack) -> AsyncWebClient:
    return AsyncWebClient(token=TOKEN, base_url=slack.api_url)


def test_teams_of_users(slack: LocalSlack) -> None:
    assert (slack.team_of(ALICE), slack.team_of(TARO), slack.team_of(slack.bot_user_id)) == (HOST, KUMO, HOST)
    assert (slack.is_external(ALICE), slack.is_external(TARO)) == (False, True)
    assert slack.teams == {HOST: "Pitcrew (local)", KUMO: "Kumo Labs' own Slack"}
    assert slack.bot_mention == "<@U0PITCREW>"


async def test_mention_envelope_from_an_external_member(slack: LocalSlack, receiver: EventReceiver) -> None:
    text = f"{slack.bot_mention} cluster list <#C0OPS|ops> <https://example.com|docs> &lt;x&gt;"
    delivery = await slack.send_mention(user_id=TARO, channel_id=OPS, text=text)
    assert delivery.response.status_code == 200
    [request] = receiver.requests
    assert request["valid"] is True
    assert request["headers"]["content-type"] == "application/json"
    assert "x-slack-retry-num" not in request["headers"]
    assert request["raw"] == delivery.body
    envelope = request["body"]
    assert {k: envelope[k] for k in ("team_id", "api_app_id", "type", "event_id", "is_ext_shared_channel")} == {
        "team_id": HOST,
        "api_app_id": "A0PITCREW",
        "type": "event_callback",
        "event_id": delivery.event_id,
        "is_ext_shared_channel": True,
    }
    assert envelope["token"] and envelope["event_context"].startswith("4-")
    assert abs(envelope["event_time"] - time.time()) < 60
    assert envelope["authorizations"] == [{"team_id": HOST, "user_id": "U0PITCREW", "is_bot": True}]
    event = envelope["event"]
    assert {k: event[k] for k in ("type", "user", "text", "channel", "team", "user_team", "source_team")} == {
        "type": "app_mention",
        "user": TARO,
        "text": text,
        "channel": OPS,
        "team": KUMO,
        "user_team": KUMO,
        "source_team": KUMO,
    }
    assert event["ts"] == event["event_ts"] == delivery.ts
    assert "thread_ts" not in event
    [block] = event["blocks"]
    assert block["type"] == "rich_text"
    assert block["elements"][0]["elements"] == [
        {"type": "user", "user_id": "U0PITCREW"},
        {"type": "text", "text": " cluster list "},
        {"type": "channel", "channel_id": "C0OPS"},
        {"type": "text", "text": " "},
        {"type": "link", "url": "https://example.com", "text": "docs"},
        {"type": "text", "text": " <x>"},
    ]

    # The person's message is in the channel for everyone, as typed.
    [message] = slack.channel_messages(OPS, visible_to=ALICE)
    assert (message.ts, message.user, message.text, message.kind, message.via) == (
        delivery.ts,
        TARO,
        text,
        "message",
        "mention",
    )


async def test_mention_by_host_member_in_thread(slack: LocalSlack, receiver: EventReceiver) -> None:
    first = await slack.send_mention(user_id=ALICE, channel_id=OPS, text=f"{slack.bot_mention} help")
    second = await slack.send_mention(
        user_id=ALICE, channel_id=OPS, text=f"{slack.bot_mention} cluster list", thread_ts=first.ts, event_id="Ev1"
    )
    envelope = receiver.requests[-1]["body"]
    assert (envelope["event_id"], envelope["is_ext_shared_channel"]) == ("Ev1", False)
    assert second.event_id == "Ev1"
    event = envelope["event"]
    assert (event["thread_ts"], event["user_team"], event["team"]) == (first.ts, HOST, HOST)
    assert slack.channel_messages(OPS)[-1].thread_ts == first.ts


async def test_shared_envelope_variant(slack: LocalSlack, receiver: EventReceiver) -> None:
    await slack.send_mention(
        user_id=TARO, channel_id=OPS, text=f"{slack.bot_mention} cluster list", shared_envelope=True
    )
    envelope = receiver.requests[-1]["body"]
    assert envelope["team_id"] == KUMO
    assert envelope["event"]["team"] == KUMO
    assert "user_team" not in envelope["event"] and "source_team" not in envelope["event"]
    assert envelope["authorizations"][0]["team_id"] == HOST
    assert receiver.requests[-1]["valid"] is True


async def test_dm_is_a_message_im_event(slack: LocalSlack, receiver: EventReceiver, client: AsyncWebClient) -> None:
    delivery = await slack.send_dm(user_id=TARO, text="cluster status kumo-p5-train")
    event = receiver.requests[-1]["body"]["event"]
    dm = slack._dm_id(TARO)
    assert {k: event[k] for k in ("type", "user", "text", "channel", "channel_type", "team", "user_team")} == {
        "type": "message",
        "user": TARO,
        "text": "cluster status kumo-p5-train",
        "channel": dm,
        "channel_type": "im",
        "team": KUMO,
        "user_team": KUMO,
    }
    assert event["ts"] == event["event_ts"] == delivery.ts
    assert event["blocks"][0]["type"] == "rich_text"
    assert receiver.requests[-1]["valid"] is True

    # The bot answers in the DM (by its id or by the user's id), in the DM's thread if it likes.
    await client.chat_postMessage(channel=dm, text="kumo-p5-train: InService")
    await client.chat_postMessage(channel=TARO, text="in thread", thread_ts=delivery.ts)
    assert [(m.user, m.text, m.thread_ts) for m in slack.channel_messages(dm)] == [
        (TARO, "cluster status kumo-p5-train", None),
        ("U0PITCREW", "kumo-p5-train: InService", None),
        ("U0PITCREW", "in thread", delivery.ts),
    ]
    assert slack.channel_messages(dm, visible_to=ALICE) == []
    assert (await client.conversations_info(channel=dm))["channel"]["is_im"] is True


async def test_send_event_and_redeliver(slack: LocalSlack, receiver: EventReceiver) -> None:
    edited = {
        "type": "message",
        "subtype": "message_changed",
        "channel": OPS,
        "ts": "1700000000.000200",
        "event_ts": "1700000000.000200",
        "message": {"type": "message", "user": ALICE, "text": f"{slack.bot_mention} cluster list", "ts": "1.1"},
    }
    delivery = await slack.send_event(edited, team_id=KUMO)
    assert delivery.ts == "1700000000.000200"
    first = receiver.requests[-1]
    assert first["body"]["event"] == edited
    assert first["body"]["team_id"] == KUMO
    assert slack.messages == []  # send_event adds nothing to the channel

    retried = await slack.redeliver(delivery, retry_num=2, reason="http_error")
    assert retried.status_code == 200
    again = receiver.requests[-1]
    assert again["valid"] is True
    assert again["raw"] == delivery.body  # the same event_id and body
    assert (again["headers"]["x-slack-retry-num"], again["headers"]["x-slack-retry-reason"]) == ("2", "http_error")
    assert "x-slack-retry-num" not in first["headers"]

    default = await slack.redeliver(delivery)
    assert default.status_code == 200
    assert receiver.requests[-1]["headers"]["x-slack-retry-num"] == "1"
    assert receiver.requests[-1]["headers"]["x-slack-retry-reason"] == "http_timeout"


async def test_forged_event_is_refused(slack: LocalSlack, receiver: EventReceiver) -> None:
    slack.signing_secret = "not-the-secret"
    delivery = await slack.send_mention(user_id=ALICE, channel_id=OPS, text=f"{slack.bot_mention} help")
    assert delivery.response.status_code == 401
    assert receiver.requests[-1]["valid"] is False


async def test_external_members_team_in_clicks_views_and_users_info(
    slack: LocalSlack, receiver: EventReceiver, client: AsyncWebClient
) -> None:
    buttons = [
        {
            "type": "actions",
            "block_id": "b",
            "elements": [{"type": "button", "action_id": "go", "text": {"type": "plain_text", "text": "Go"}}],
        }
    ]
    posted = await client.chat_postMessage(channel=OPS, text="plan", blocks=buttons)
    message = slack.channel_messages(OPS)[-1]
    click = slack.click_payload(user_id=TARO, message=message, action_id="go")
    assert click["user"]["team_id"] == KUMO
    assert click["team"]["id"] == HOST  # the installation's team, as Slack sends it
    assert slack.click_payload(user_id=ALICE, message=message, action_id="go")["user"]["team_id"] == HOST
    assert posted["message"]["team"] == HOST

    modal = {
        "type": "modal",
        "callback_id": "c",
        "title": {"type": "plain_text", "text": "t"},
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "x"}}],
    }
    trigger = slack.click_payload(user_id=TARO, message=message, action_id="go")["trigger_id"]
    view = (await client.views_open(trigger_id=trigger, view=modal))["view"]
    submission = slack.submission_payload(user_id=TARO, view_id=view["id"], values={})
    assert submission["user"]["team_id"] == KUMO
    assert submission["view"]["app_installed_team_id"] == HOST

    assert (await client.users_info(user=TARO))["user"]["team_id"] == KUMO
    assert (await client.users_info(user=ALICE))["user"]["team_id"] == HOST
    assert (await client.auth_test())["team"] == "Pitcrew (local)"


async def test_ephemeral_in_a_mention_thread(
    slack: LocalSlack, receiver: EventReceiver, client: AsyncWebClient
) -> None:
    mention = await slack.send_mention(user_id=TARO, channel_id=OPS, text=f"{slack.bot_mention} cluster list")
    await client.chat_postEphemeral(channel=OPS, user=TARO, text="only taro", thread_ts=mention.ts)
    reply = await client.chat_postMessage(channel=OPS, text="plan", thread_ts=mention.ts)
    ephemeral = slack.channel_messages(OPS)[-2]
    assert (ephemeral.kind, ephemeral.ephemeral_to, ephemeral.thread_ts) == ("ephemeral", TARO, mention.ts)
    assert reply["message"]["thread_ts"] == mention.ts
    assert [m.text for m in slack.channel_messages(OPS, visible_to=ALICE)] == [
        f"{slack.bot_mention} cluster list",
        "plan",
    ]


async def test_bolt_reads_the_actor_from_both_envelopes(slack: LocalSlack, client: AsyncWebClient) -> None:
    bolt = AsyncApp(client=client, signing_secret=SECRET)
    seen: list[tuple[str | None, str | None, str | None]] = []

    @bolt.event("app_mention")
    async def mention(context: Any, event: dict[str, Any], say: Any) -> None:
        seen.append((context.actor_team_id, context.actor_user_id, event.get("thread_ts")))
        await say(text="on it", thread_ts=event["ts"])

    @bolt.event("message")
    async def dm(context: Any, event: dict[str, Any], say: Any) -> None:
        seen.append((context.actor_team_id, context.actor_user_id, event.get("channel_type")))
        await say(text="in the DM")

    handler = AsyncSlackRequestHandler(bolt)

    async def events(request: Request) -> Response:
        return await handler.handle(request)

    async with serve_asgi(Starlette(routes=[Route("/slack/events", events, methods=["POST"])])) as url:
        slack.events_url = f"{url}/slack/events"
        first = await slack.send_mention(user_id=TARO, channel_id=OPS, text=f"{slack.bot_mention} cluster list")
        assert first.response.status_code == 200
        await slack.wait_for(lambda m: m.text == "on it")
        second = await slack.send_mention(
            user_id=TARO, channel_id=OPS, text=f"{slack.bot_mention} help", shared_envelope=True
        )
        assert second.response.status_code == 200
        await slack.wait_for(lambda m: m.text == "on it" and m.thread_ts == second.ts)
        third = await slack.send_dm(user_id=TARO, text="cluster list")
        assert third.response.status_code == 200
        answer = await slack.wait_for(lambda m: m.text == "in the DM")
    assert answer.channel == slack._dm_id(TARO)
    assert seen == [(KUMO, TARO, None), (KUMO, TARO, None), (KUMO, TARO, "im")]
    threaded = [m for m in slack.channel_messages(OPS) if m.text == "on it"]
    assert [m.thread_ts for m in threaded] == [first.ts, second.ts]


def test_sandbox_has_kumo_labs_own_workspace() -> None:
    program = load_program(EXAMPLE_PROGRAM)
    users, _channels = workspace_people(program)
    user_teams, teams = workspace_teams(program)
    assert user_teams == {"U0KOJI001": KUMO, "U0MIO0001": KUMO}
    assert teams == {KUMO: "Kumo Labs' own Slack"}
    assert [o.slack_teams for o in program.orgs if o.id == "kumo-labs"] == [[KUMO]]
    assert users["U0KOJI001"] == "koji (kumo-labs operator, Kumo Labs' own Slack)"
    assert users["U0ALICE01"] == "alice (kumo-labs operator)"

    slack = LocalSlack(
        signing_secret=SECRET, bot_token=TOKEN, users=users, channels={}, user_teams=user_teams, teams=teams
    )
    world = cast(Sandbox, SimpleNamespace(program=program, slack=slack, controls=Controls()))
    text = "\n".join(block["text"]["text"] for block in welcome(world).blocks if block.get("type") == "section")
    assert "as *koji (kumo-labs operator, Kumo Labs' own Slack)* in #kumo-labs" in text
    assert "`@Pitcrew cluster list`" in text


# ---------------------------------------------------------------------- console


def test_slack_text_is_what_slacks_client_sends() -> None:
    def typed(text: str) -> tuple[str, bool]:
        return slack_text(text, bot_name="pitcrew", bot_user_id="U0PITCREW")

    assert typed("@Pitcrew cluster list all") == ("<@U0PITCREW> cluster list all", True)
    assert typed("hey @PITCREW, track note a<b & c>d") == ("hey <@U0PITCREW>, track note a&lt;b &amp; c&gt;d", True)
    assert typed("see https://example.com/x?a=1 @pitcrewish") == ("see <https://example.com/x?a=1> @pitcrewish", False)
    assert typed("cluster list") == ("cluster list", False)


async def test_console_marks_external_people(slack: LocalSlack, receiver: EventReceiver) -> None:
    await slack.send_mention(user_id=TARO, channel_id=OPS, text=f"{slack.bot_mention} help")
    async with httpx.AsyncClient(base_url=slack.base_url) as http:
        state = (await http.get("/console/state", params={"user": ALICE})).json()
        page = await http.get("/")
    assert state["team"] == {"id": HOST, "domain": "pitcrew-local", "name": "Pitcrew (local)"}
    users = {u["id"]: u for u in state["users"]}
    assert users[TARO] == {
        "id": TARO,
        "name": "taro (Kumo Labs' own Slack)",
        "team_id": KUMO,
        "team_name": "Kumo Labs' own Slack",
        "external": True,
    }
    assert (users[ALICE]["external"], users[ALICE]["team_id"]) == (False, HOST)
    [message] = state["messages"]
    assert (message["user_name"], message["external_team"]) == ("taro (Kumo Labs' own Slack)", "Kumo Labs' own Slack")
    assert 'id="thread-bar"' in page.text and "Direct message with" in page.text and "external" in page.text


async def test_console_slash_box_refuses_external_members_as_slack_does(
    slack: LocalSlack, receiver: EventReceiver
) -> None:
    async with httpx.AsyncClient(base_url=slack.base_url) as http:
        refused = await http.post(
            "/console/command", json={"user_id": TARO, "channel_id": OPS, "text": "/cluster list all"}
        )
    said = (
        "/cluster is not a valid command. In Slack, external members of a shared channel can only use their own "
        "workspace's slash commands. Mention @Pitcrew instead: @Pitcrew cluster list all"
    )
    assert refused.status_code == 400 and refused.json()["error"] == said
    assert receiver.requests == []  # nothing sent to the app
    [notice] = slack.channel_messages(OPS, visible_to=TARO)
    assert (notice.user, notice.kind, notice.text, notice.via) == ("USLACKBOT", "ephemeral", said, "slackbot")
    assert slack.channel_messages(OPS, visible_to=ALICE) == []
    async with httpx.AsyncClient(base_url=slack.base_url) as http:
        state = (await http.get("/console/state", params={"user": TARO})).json()
    assert state["messages"][0]["user_name"] == "Slackbot"


async def test_console_message_box_sends_mentions_dms_and_plain_messages(
    slack: LocalSlack, receiver: EventReceiver
) -> None:
    async with httpx.AsyncClient(base_url=slack.base_url) as http:
        mention = (
            await http.post(
                "/console/message", json={"user_id": TARO, "channel_id": OPS, "text": "@Pitcrew cluster list <all>"}
            )
        ).json()
        plain = (await http.post("/console/message", json={"user_id": TARO, "channel_id": OPS, "text": "hello"})).json()
        in_thread = await http.post(
            "/console/message",
            json={"user_id": TARO, "channel_id": OPS, "text": "@pitcrew help", "thread_ts": mention["ts"]},
        )
        dm = (
            await http.post(
                "/console/message", json={"user_id": TARO, "channel_id": slack._dm_id(TARO), "text": "cluster list"}
            )
        ).json()
        others_dm = await http.post(
            "/console/message", json={"user_id": TARO, "channel_id": slack._dm_id(ALICE), "text": "hi"}
        )
        no_thread = await http.post(
            "/console/message", json={"user_id": TARO, "channel_id": OPS, "text": "@pitcrew x", "thread_ts": "1.2"}
        )
        empty = await http.post("/console/message", json={"user_id": TARO, "channel_id": OPS, "text": "  "})
    assert (mention["status"], mention["kind"]) == (200, "mention")
    assert mention["delivery"]["delivered"] is True and len(mention["delivery"]["attempts"]) == 1
    assert (plain["kind"], plain["delivery"]) == ("message", None)
    assert (dm["status"], dm["kind"]) == (200, "dm")
    assert in_thread.json()["delivery"]["delivered"] is True
    assert (others_dm.status_code, no_thread.status_code, empty.status_code) == (404, 404, 400)

    events = [r["body"]["event"] for r in receiver.requests]
    assert [(e["type"], e["text"], e.get("thread_ts"), e.get("channel_type")) for e in events] == [
        ("app_mention", "<@U0PITCREW> cluster list &lt;all&gt;", None, None),
        ("app_mention", "<@U0PITCREW> help", mention["ts"], None),
        ("message", "cluster list", None, "im"),
    ]
    assert all(e["user_team"] == KUMO for e in events)
    assert (
        events[0]["ts"] == mention["ts"] and mention["delivery"]["event_id"] == receiver.requests[0]["body"]["event_id"]
    )
    assert [m.text for m in slack.channel_messages(OPS)] == [
        "<@U0PITCREW> cluster list &lt;all&gt;",
        "hello",
        "<@U0PITCREW> help",
    ]


async def wait_until_done(slack: LocalSlack, event_id: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=slack.base_url) as http:
        for _ in range(200):
            state = (await http.get("/console/state", params={"user": TARO})).json()
            [trace] = [d for d in state["deliveries"] if d["event_id"] == event_id]
            if trace["delivered"] or trace["gave_up"]:
                return dict(trace)
            await asyncio.sleep(0.05)
    raise AssertionError(f"event {event_id} neither delivered nor given up")


async def test_console_retries_a_slow_bot_as_slack_does(slack: LocalSlack, receiver: EventReceiver) -> None:
    slack.ack_deadline = 0.3  # Slack's 3 s, shortened so the test is quick
    slack.retry_delays = (0.05, 0.05, 0.05)
    receiver.answers = [(1.0, 200), (0.0, 500)]  # too slow, then an error, then answered
    async with httpx.AsyncClient(base_url=slack.base_url) as http:
        first = (
            await http.post("/console/message", json={"user_id": TARO, "channel_id": OPS, "text": "@Pitcrew help"})
        ).json()
    assert first["status"] == 0
    assert first["delivery"]["attempts"][0]["reason"] == "http_timeout"
    assert first["delivery"]["next_retry_in"] is None or first["delivery"]["next_retry_in"] == 0.05
    trace = await wait_until_done(slack, first["delivery"]["event_id"])
    assert trace["delivered"] is True
    assert [(a["retry_num"], a["status"], a["reason"]) for a in trace["attempts"]] == [
        (0, None, "http_timeout"),
        (1, 500, "http_error"),
        (2, 200, None),
    ]
    await asyncio.sleep(0.3)  # the slow first answer has come back meanwhile
    sent = receiver.requests
    assert len(sent) == 3 and all(r["valid"] for r in sent)
    assert len({r["raw"] for r in sent}) == 1  # the same event (same event_id) every time
    assert [(r["headers"].get("x-slack-retry-num"), r["headers"].get("x-slack-retry-reason")) for r in sent] == [
        (None, None),
        ("1", "http_timeout"),
        ("2", "http_error"),
    ]
    # One message in the channel however many deliveries.
    assert len(slack.channel_messages(OPS)) == 1


async def test_console_gives_up_after_three_retries(slack: LocalSlack, receiver: EventReceiver) -> None:
    slack.retry_delays = (0.01, 0.01, 0.01)
    receiver.answers = [(0.0, 503)] * 4
    async with httpx.AsyncClient(base_url=slack.base_url) as http:
        first = (
            await http.post(
                "/console/message", json={"user_id": TARO, "channel_id": slack._dm_id(TARO), "text": "cluster list"}
            )
        ).json()
    trace = await wait_until_done(slack, first["delivery"]["event_id"])
    assert trace["gave_up"] is True and trace["delivered"] is False
    assert [a["retry_num"] for a in trace["attempts"]] == [0, 1, 2, 3]
    assert [r["headers"].get("x-slack-retry-num") for r in receiver.requests] == [None, "1", "2", "3"]


def test_sandbox_retry_schedule_is_short() -> None:
    # Slack's own is at once / 1 min / 5 min; the sandbox's is short so a person sees it (driver.py).
    assert LocalSlack.retry_delays == (3.0, 10.0, 30.0)
    assert LocalSlack.ack_deadline == 3.0
