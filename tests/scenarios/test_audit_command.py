"""/cluster audit: operators see their org's log, admins any org's, viewers and strangers are refused; one
readable line per entry; a NUL in a command neither stops the log nor comes back raw in the reply."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any

import pytest

from sandbox.world import Sandbox
from storage import crud
from storage.models import AuditEntry, Outcome
from tests.scenarios.conftest import ADMIN, COORDINATION, ask, body

ALICE, BOB, HANA = "U0ALICE01", "U0BOB0001", "U0HANA001"
KUMO = "C0KUMOLAB"
TRAIN, WORKERS = "kumo-p5-train", "worker-group-1"
OPERATION_ID = re.compile(r"\b[0-9a-f]{32}\b")


async def entries(world: Sandbox) -> list[AuditEntry]:
    await world.pitcrew.services.drain()
    async with world.pitcrew.services.db.session() as session:
        return list(reversed(await crud.audit_entries(session, limit=1000)))  # oldest first


def lines(text: str) -> list[str]:
    """The reply's entry lines (each starts with the outcome's icon)."""
    return [line for line in text.splitlines() if line.startswith(":")]


@pytest.fixture
async def on_any_database(sandbox_factory: Callable[..., Any], database_url: str) -> AsyncIterator[Sandbox]:
    """The sandbox on SQLite, and on Postgres when PITCREW_TEST_POSTGRES_URL is set (ids sqlite/postgres)."""
    async with sandbox_factory(database_url=database_url) as world:
        await world.pitcrew.ready.wait()
        await world.pitcrew.services.drain()
        yield world


async def test_a_nul_command_and_ten_more_are_all_audited(on_any_database: Sandbox) -> None:
    world = on_any_database
    nul = await ask(world, user=ALICE, channel=KUMO, text="status \x00")
    assert "\x00" not in body(nul)  # never echoed raw: shown as a symbol (␀ or �)
    assert "\u2400" in body(nul) or "\ufffd" in body(nul)
    assert "Usage: /cluster status" in nul.text
    ordinary = ["list", "templates", "help", f"status {TRAIN}", f"nodes {TRAIN}", "frobnicate", "list kumo-labs"]
    ordinary += ["audit", "audit --days 1", f"throughput {TRAIN}"]
    for text in ordinary:
        reply = await ask(world, user=ALICE, channel=KUMO, text=text)
        assert "internal error" not in body(reply)
    rows = await entries(world)
    assert [row.text for row in rows] == ["status \u2400", *ordinary]  # eleven rows, in order
    # Bad input is audited under the org it was typed for, so that org's operators see it, and admins too.
    assert {row.org_id for row in rows} == {"kumo-labs"}
    for user, channel in ((ALICE, KUMO), (ADMIN, COORDINATION)):
        log = body(await ask(world, user=user, channel=channel, text="audit kumo-labs"))
        assert "\x00" not in log and "`/cluster status \u2400`" in log


async def test_operator_sees_their_orgs_audit(sandbox: Sandbox) -> None:
    await ask(sandbox, user=ALICE, channel=KUMO, text="list")
    await ask(sandbox, user=BOB, channel=KUMO, text=f"scale {TRAIN} {WORKERS} 30")
    await ask(sandbox, user=HANA, channel="C0SAKURA1", text="list")
    reply = await ask(sandbox, user=ALICE, channel=KUMO, text="audit --days 1")
    text = body(reply)
    assert "Audit · Kumo Labs (kumo-labs) · last 1 day" in text
    assert "<@U0ALICE01> ran `/cluster list` · *ok*" in text
    refused = f"<@U0BOB0001> ran `/cluster scale {TRAIN} {WORKERS} 30` · *refused*: Your role in 'kumo-labs' is viewer"
    assert refused in text
    assert "U0HANA001" not in text  # another org's entries stay in that org
    assert reply.blocks[0]["type"] == "header" and "`" not in reply.blocks[0]["text"]["text"]


async def test_admin_sees_every_org_and_others_are_refused(sandbox: Sandbox) -> None:
    await ask(sandbox, user=HANA, channel="C0SAKURA1", text="list")
    everything = await ask(sandbox, user=ADMIN, channel=COORDINATION, text="audit")
    assert "every org" in body(everything) and "U0HANA001" in body(everything)
    viewer = await ask(sandbox, user=BOB, channel=KUMO, text="audit")
    assert "this needs operator" in body(viewer)
    stranger = await ask(sandbox, user=HANA, channel=KUMO, text="audit kumo-labs")
    assert "no access to org `kumo-labs`" in body(stranger)
    bad = await ask(sandbox, user=ALICE, channel=KUMO, text="audit --days 1000")
    assert "Usage: /cluster audit" in bad.text


async def test_an_org_that_does_not_exist_is_named_not_an_empty_log(sandbox: Sandbox) -> None:
    missing = body(await ask(sandbox, user=ADMIN, channel=COORDINATION, text="audit nosuch-org"))
    assert "There is no org `nosuch-org`" in missing and "`kumo-labs`" in missing
    assert "Nothing recorded" not in missing
    typo = body(await ask(sandbox, user=ADMIN, channel=COORDINATION, text="audit kumo-lab"))
    assert "Did you mean `kumo-labs`?" in typo


async def test_changes_read_as_words_without_internal_ids(sandbox: Sandbox) -> None:
    """A real plan and Cancel click, and the entries an operation and an alert write, as lines."""
    services = sandbox.pitcrew.services
    planned = await ask(sandbox, user=ALICE, channel=KUMO, text=f"scale {TRAIN} {WORKERS} 30")
    response = await sandbox.slack.click(user_id=ALICE, message=planned, action_id="operation_cancel")
    assert response.status_code == 200
    await sandbox.slack.wait_for(lambda m: "cancelled" in m.text, timeout=15)
    operation = next(row for row in await entries(sandbox) if row.command == "operation_cancel")
    summary = operation.text  # "scale kumo-labs/kumo-p5-train worker-group-1 32→30", as Operations records it
    now = services.clock()
    at = {"channel_id": KUMO, "org_id": "kumo-labs"}
    services.audit.record(at=now, user_id=ADMIN, command="operation_confirm", text=summary,
                          outcome=Outcome.ALLOWED, detail="confirmed", **at)  # fmt: skip
    services.audit.record(at=now, user_id=ADMIN, command="scale", text=summary, outcome=Outcome.DONE,
                          detail="the group has 3 nodes (request 1b2c-77)", **at)  # fmt: skip
    until = (now + timedelta(hours=1)).strftime("%Y-%m-%d %H:%M")
    services.audit.record(at=now, user_id=ALICE, command="alert_silence", text=f"episode 7 kumo-labs/{TRAIN} i-0abc",
                          outcome=Outcome.DONE, detail=f"1 h, until {until} UTC", **at)  # fmt: skip

    text = body(await ask(sandbox, user=ALICE, channel=KUMO, text="audit"))
    shown = lines(text)
    target = f"`kumo-labs/{TRAIN} {WORKERS} "
    assert any(f"<@{ALICE}> ran `/cluster scale {TRAIN} {WORKERS} 30` · *ok*: proposed" in line for line in shown)
    assert any(f"<@{ALICE}> cancelled a scale of {target}" in line and "*done*" in line for line in shown)
    assert any(f"<@{ADMIN}> confirmed a scale of {target}" in line for line in shown)
    assert any(f"<@{ADMIN}>'s scale of {target}" in line and "ended · *done*" in line for line in shown)
    assert any(f"<@{ALICE}> silenced alerts of `kumo-labs/{TRAIN}` (node `i-0abc`)" in line for line in shown)
    for raw in ("operation_confirm", "operation_cancel", "alert_silence", "scale scale", "UTC", "episode 7"):
        assert raw not in text
    assert not OPERATION_ID.search(text) and "request 1b2c" not in text
    assert "JST (Asia/Tokyo)" in text  # one zone, named once

    with_ids = body(await ask(sandbox, user=ALICE, channel=KUMO, text="audit --ids"))
    assert OPERATION_ID.search(with_ids) and "(episode 7)" in with_ids


async def test_text_cannot_break_a_line_and_is_cut_at_a_word(sandbox: Sandbox) -> None:
    nasty = 'status "`*bold* _it_ ~no~ <!channel> &` ' + "word " * 40 + '"'
    await ask(sandbox, user=ALICE, channel=KUMO, text=nasty)
    # Bad input names no org, so it is in the program-wide log an admin reads.
    text = body(await ask(sandbox, user=ADMIN, channel=COORDINATION, text="audit --action status"))
    (line,) = lines(text)
    assert line.count("`") % 2 == 0  # the typed backticks did not end the code span early
    typed = re.search(r"ran `([^`]*)`", line)
    assert typed is not None and "*bold* _it_ ~no~ &lt;!channel&gt; &amp;" in typed[1]
    assert "<!channel>" not in text
    assert typed[1].endswith("word…")  # cut after a whole word
    detail = line.split("*bad input*: ", 1)[1]
    assert "is not a cluster name" in detail and "&amp;lt;" not in detail  # escaped once, not twice
    assert "*" not in detail and "~" not in detail and "`" not in detail  # nothing in it can format


async def test_filters_by_user_and_action(sandbox: Sandbox) -> None:
    await ask(sandbox, user=ALICE, channel=KUMO, text="list")
    await ask(sandbox, user=ALICE, channel=KUMO, text=f"status {TRAIN}")
    await ask(sandbox, user=ADMIN, channel=KUMO, text="list kumo-labs")
    for who in (f"<@{ALICE}|alice>", f"<@{ALICE}>", f"@{ALICE}", ALICE):
        mine = lines(body(await ask(sandbox, user=ALICE, channel=KUMO, text=f"audit --user {who}")))
        assert mine and all(f"<@{ALICE}>" in line for line in mine), who
    listed = lines(body(await ask(sandbox, user=ALICE, channel=KUMO, text="audit --action list")))
    assert len(listed) == 2 and all("`/cluster list" in line for line in listed)
    both = lines(body(await ask(sandbox, user=ALICE, channel=KUMO, text=f"audit --action LIST --user {ADMIN}")))
    assert len(both) == 1 and f"<@{ADMIN}>" in both[0]

    bad = await ask(sandbox, user=ALICE, channel=KUMO, text="audit --action frobnicate")
    assert "`frobnicate` is not one" in bad.text and "`scale`" in bad.text and "Usage: /cluster audit" in bad.text
    nobody = await ask(sandbox, user=ALICE, channel=KUMO, text="audit --user @alice")
    assert "member id" in nobody.text and "Usage: /cluster audit" in nobody.text
    none = body(await ask(sandbox, user=ALICE, channel=KUMO, text="audit --action delete"))
    assert "Nothing recorded in that time that matches" in none


async def test_every_click_reaches_the_log_once(sandbox: Sandbox) -> None:
    """A click that decides something is recorded by its listener; one that decides nothing (a plan that is
    not known) gets an entry of its own; neither is recorded twice."""
    planned = await ask(sandbox, user=ALICE, channel=KUMO, text=f"scale {TRAIN} {WORKERS} 30")
    before = len(await entries(sandbox))
    unknown = "0" * 32
    response = await sandbox.slack.click(user_id=ALICE, message=planned, action_id="operation_confirm", value=unknown)
    assert response.status_code == 200
    await sandbox.slack.wait_for(lambda m: "not known" in m.text, timeout=15)
    response = await sandbox.slack.click(user_id=ALICE, message=planned, action_id="operation_cancel")
    assert response.status_code == 200
    await sandbox.slack.wait_for(lambda m: "cancelled" in m.text, timeout=15)
    rows = (await entries(sandbox))[before:]
    assert [(row.command, row.outcome) for row in rows] == [("click", "allowed"), ("operation_cancel", "done")]
    assert rows[0].text == f"operation_confirm {unknown}" and rows[0].user_id == ALICE

    text = body(await ask(sandbox, user=ADMIN, channel=COORDINATION, text="audit --action confirm"))
    (line,) = lines(text)
    assert f"<@{ALICE}> pressed \u201cConfirm\u201d · *ok*: answered; nothing changed" in line
