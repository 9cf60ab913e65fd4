"""Org engineers in their own workspaces: every command by @mention and DM, one identity across Slack Connect.

Driven as Slack drives Pitcrew: signed Events API deliveries (app_mention, message.im) from the local Slack, with
Kumo Labs' engineers in their own workspace (T0KUMOLAB, the sandbox's second team) as Slack Connect members of
#kumo-labs, clicks carrying `user.team_id`, and Slack's retries of the same event_id."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from sandbox.slack import Message
from sandbox.slack.driver import EventDelivery
from sandbox.world import KUMO_TEAM, Sandbox
from storage import crud
from storage.models import AuditEntry
from tests.conftest import SeededAws
from tests.scenarios import test_cluster_changes as changes
from tests.scenarios.conftest import ADMIN, body
from tests.scenarios.test_cluster_changes import group_counts

KOJI, MIO = "U0KOJI001", "U0MIO0001"  # Kumo Labs' operator and viewer, in their own workspace (T0KUMOLAB)
ALICE, HANA = "U0ALICE01", "U0HANA001"  # Kumo Labs' operator in the program's workspace; Sakura AI's operator
KUMO, SAKURA = "C0KUMOLAB", "C0SAKURA1"
TRAIN, WORKERS = "kumo-p5-train", "worker-group-1"
HOME_TEAM = "T0PITCREW"
# The change scenarios' fixtures (`world` with fast progress, and moto reseeded after): these tests scale too.
globals().update(reseed=changes.reseed, world=changes.world)


def bot_messages(world: Sandbox, after: int) -> list[Message]:
    """Pitcrew's messages since `after`, but charts (files, which some replies send to the asker's DM)."""
    return [m for m in world.slack.messages[after:] if m.user == world.slack.bot_user_id and m.via != "files"]


async def mention(
    world: Sandbox, *, user: str, text: str, channel: str = KUMO, **kwargs: Any
) -> tuple[EventDelivery, Message]:
    """Mention Pitcrew as `user`; return the delivery and Pitcrew's one reply (checking there is only one)."""
    before = len(world.slack.messages)
    delivery = await world.slack.send_mention(
        user_id=user, channel_id=channel, text=f"{world.slack.bot_mention} {text}", **kwargs
    )
    assert delivery.response.status_code == 200, delivery.response.text
    reply = await world.slack.wait_for(lambda m: m in bot_messages(world, before), timeout=15)
    await world.pitcrew.services.drain()
    assert bot_messages(world, before) == [reply], "one mention, one reply"
    return delivery, reply


async def dm(world: Sandbox, *, user: str, text: str) -> Message:
    before = len(world.slack.messages)
    delivery = await world.slack.send_dm(user_id=user, text=text)
    assert delivery.response.status_code == 200, delivery.response.text
    reply = await world.slack.wait_for(lambda m: m in bot_messages(world, before), timeout=15)
    await world.pitcrew.services.drain()
    assert bot_messages(world, before) == [reply], "one DM, one reply"
    return reply


async def audit_rows(world: Sandbox) -> list[AuditEntry]:
    await world.pitcrew.services.drain()
    async with world.pitcrew.services.db.session() as session:
        return list(reversed(await crud.audit_entries(session, limit=200)))


async def test_an_external_operator_lists_scales_records_and_gets_help_by_mention(
    world: Sandbox, seeded_aws: SeededAws
) -> None:
    assert world.slack.team_of(KOJI) == KUMO_TEAM and world.slack.is_external(KOJI)

    listing, reply = await mention(world, user=KOJI, text="cluster list")
    assert reply.kind == "ephemeral" and reply.ephemeral_to == KOJI, "a read answers its caller only"
    assert reply.thread_ts == listing.ts, "in the mention's thread"
    assert TRAIN in body(reply) and "sakura" not in body(reply).lower()

    asked, plan = await mention(world, user=KOJI, text=f"/cluster scale {TRAIN} {WORKERS} 34")
    assert plan.kind == "message" and plan.thread_ts == asked.ts, "the plan is posted in the mention's thread"
    assert "Confirm scale" in str(plan.blocks) and "32 → *34*" in body(plan)
    assert group_counts(seeded_aws, TRAIN, WORKERS) == (32, 32), "nothing changes before Confirm"

    after = len(world.slack.messages)
    click = await world.slack.click(user_id=KOJI, message=plan, action_id="operation_confirm")
    assert click.status_code == 200
    done = await world.slack.wait_for(
        lambda m: m in world.slack.messages[after:] and m.text.startswith("Scaling") and "Done:" in m.text, timeout=30
    )
    assert done.thread_ts == asked.ts, "progress follows the plan into the thread"
    assert group_counts(seeded_aws, TRAIN, WORKERS) == (34, 34)
    updates = [c for c in world.slack.calls if c.method == "chat.postMessage" and "Scaling" in str(c.params)]
    assert len(updates) == 1, "one change, one progress message"

    _, record = await mention(world, user=KOJI, text="track note NCCL_ALGO=Ring fixed the <#C0KUMOLAB|kumo-labs> hang")
    assert record.kind == "message", "a record made in the org's channel is shown there"
    assert "NCCL_ALGO=Ring fixed the #kumo-labs hang" in body(record)

    _, helped = await mention(world, user=KOJI, text="help")
    _, alone = await mention(world, user=KOJI, text="")
    for shown in (helped, alone):
        text = body(shown)
        assert "/cluster scale" in text and "/track note" in text and "/digest preview" in text
        assert "/digest send" not in text, "help lists what this person may run"
        assert "operator of `kumo-labs`" in text

    rows = [r for r in await audit_rows(world) if r.user_id == KOJI]
    assert rows and all(r.team_id == KUMO_TEAM for r in rows), "every row names the actor's own workspace"
    commands = [(r.command, r.via, r.outcome) for r in rows if r.command.startswith("/") or r.command == "help"]
    assert commands == [
        ("/cluster", "mention", "allowed"),
        ("/cluster", "mention", "allowed"),
        ("/track", "mention", "done"),
        ("help", "mention", "allowed"),
        ("help", "mention", "allowed"),
    ]
    assert any(r.command == "operation_confirm" and r.outcome == "allowed" for r in rows)

    _, audit = await mention(world, user=ALICE, text="cluster audit kumo-labs")
    shown = body(audit)
    assert f"<@{KOJI}> (external: Kumo Labs' workspace T0KUMOLAB) ran `/cluster scale" in shown
    assert "by mention" in shown and f"<@{ALICE}> (external" not in shown
    assert "T0KUMOLAB) asked for help by mention" in shown


async def test_an_admin_previews_the_digest_by_dm(world: Sandbox) -> None:
    reply = await dm(world, user=ADMIN, text="digest preview kumo-labs")
    assert reply.channel == world.slack._dm_id(ADMIN) and reply.kind == "message", "in the DM"
    assert "Kumo Labs" in body(reply)
    chart = await world.slack.wait_for(lambda m: m.via == "files" and m.channel == reply.channel)
    assert chart.files and chart.files[0]["filename"].startswith("kumo-labs-")
    listing = await dm(world, user=ALICE, text="cluster list")  # the DM's default org: the person's own
    assert TRAIN in body(listing) and "sakura" not in body(listing).lower()
    rows = await audit_rows(world)
    assert [(r.user_id, r.command, r.via, r.team_id) for r in rows if r.command.startswith("/")] == [
        (ADMIN, "/digest", "dm", HOME_TEAM),
        (ALICE, "/cluster", "dm", HOME_TEAM),
    ]


async def test_a_retried_event_gives_one_answer_and_one_change(world: Sandbox) -> None:
    before = len(world.slack.messages)
    delivery = await world.slack.send_mention(
        user_id=KOJI, channel_id=KUMO, text=f"{world.slack.bot_mention} track note one note, delivered thrice"
    )
    retries = await asyncio.gather(
        world.slack.redeliver(delivery, retry_num=1), world.slack.redeliver(delivery, retry_num=2)
    )
    assert all(r.status_code == 200 for r in [delivery.response, *retries])
    await world.slack.wait_for(lambda m: m in bot_messages(world, before), timeout=15)
    await asyncio.sleep(0.5)
    await world.pitcrew.services.drain()
    assert len(bot_messages(world, before)) == 1
    async with world.pitcrew.services.db.session() as session:
        records = await crud.audit_entries(session, org_id="kumo-labs", limit=50)
    assert [r.command for r in records if r.command == "/track"] == ["/track"]


async def test_a_retry_reaching_another_replica_is_not_answered_again(
    world: Sandbox, sandbox_factory: Callable[..., Any]
) -> None:
    """Two replicas on one database: the first delivery reaches one, Slack's retry the other."""
    first_url = world.slack.events_url
    database_url = world.pitcrew.services.settings.database_url
    async with sandbox_factory(database_url=database_url, slack=world.slack) as second:
        await second.pitcrew.ready.wait()
        before = len(world.slack.messages)
        world.slack.events_url = first_url
        delivery = await world.slack.send_mention(
            user_id=KOJI, channel_id=KUMO, text=f"{world.slack.bot_mention} track note across replicas"
        )
        world.slack.events_url = f"{second.bot_url}/slack/events"
        retried = await world.slack.redeliver(delivery)
        assert retried.status_code == 200
        await world.slack.wait_for(lambda m: m in bot_messages(world, before), timeout=15)
        await asyncio.sleep(0.5)
        await second.pitcrew.services.drain()
        await world.pitcrew.services.drain()
        assert len(bot_messages(world, before)) == 1


async def test_strangers_and_unlisted_teams_are_refused_without_leaking(world: Sandbox, seeded_aws: SeededAws) -> None:
    before_aws = seeded_aws.state()
    # Koji's user id from a third workspace (not Kumo Labs', not the program's): nobody.
    world.slack.user_teams[KOJI] = "T0ELSEWHR"
    _, refused = await mention(world, user=KOJI, text=f"cluster scale {TRAIN} {WORKERS} 34")
    _, listing = await mention(world, user=KOJI, text="cluster list all")
    world.slack.users["U0NOBODY1"] = "nobody"
    _, stranger = await mention(world, user="U0NOBODY1", text="cluster status kumo-labs/kumo-p5-train")
    for reply in (refused, listing, stranger):
        text = body(reply)
        assert reply.kind == "ephemeral"
        assert "not a member of any organization" in text and "<@U0ADMIN01>" in text
        assert "kumo" not in text.lower() and "sakura" not in text.lower() and "Confirm" not in str(reply.blocks)
    assert seeded_aws.state() == before_aws
    rows = [r for r in await audit_rows(world) if r.user_id in (KOJI, "U0NOBODY1")]
    assert [(r.user_id, r.team_id, r.outcome) for r in rows] == [
        (KOJI, "T0ELSEWHR", "refused"),
        (KOJI, "T0ELSEWHR", "refused"),
        ("U0NOBODY1", HOME_TEAM, "refused"),
    ]


async def test_a_click_by_a_listed_id_from_an_unlisted_team_changes_nothing(
    world: Sandbox, seeded_aws: SeededAws
) -> None:
    _, plan = await mention(world, user=KOJI, text=f"cluster scale {TRAIN} {WORKERS} 33")
    world.slack.user_teams[KOJI] = "T0ELSEWHR"
    after = len(world.slack.messages)
    await world.slack.click(user_id=KOJI, message=plan, action_id="operation_confirm")
    refusal = await world.slack.wait_for(lambda m: m in world.slack.messages[after:] and m.ephemeral_to == KOJI)
    assert "not a member" in refusal.text or "Only" in refusal.text
    await asyncio.sleep(0.3)
    assert group_counts(seeded_aws, TRAIN, WORKERS) == (32, 32)


async def test_edits_bot_messages_and_shared_envelopes(world: Sandbox) -> None:
    before = len(world.slack.messages)
    edited = {
        "type": "message",
        "subtype": "message_changed",
        "channel": world.slack._dm_id(ALICE),
        "channel_type": "im",
        "message": {"type": "message", "user": ALICE, "text": "cluster list", "ts": "1.000001"},
        "ts": "1.000002",
    }
    own = {
        "type": "message",
        "user": world.slack.bot_user_id,
        "bot_id": "B0PITCREW",
        "text": "cluster list",
        "channel": world.slack._dm_id(ALICE),
        "channel_type": "im",
        "ts": "1.000003",
    }
    for event in (edited, own):
        delivery = await world.slack.send_event(event)
        assert delivery.response.status_code == 200
    await asyncio.sleep(0.5)
    await world.pitcrew.services.drain()
    assert bot_messages(world, before) == [], "edits and Pitcrew's own messages run nothing"
    assert [r for r in await audit_rows(world) if r.command.startswith("/")] == []

    # The other shape Slack sends in shared channels: the envelope's team is the actor's, no user_team.
    _, reply = await mention(world, user=KOJI, text="cluster list", shared_envelope=True)
    assert TRAIN in body(reply)
    rows = [r for r in await audit_rows(world) if r.command == "/cluster"]
    assert rows[-1].team_id == KUMO_TEAM


async def test_launch_alone_by_mention_offers_the_form_by_button(world: Sandbox) -> None:
    _, offer = await mention(world, user=KOJI, text="cluster launch")
    assert "Launch form…" in str(offer.blocks) and offer.ephemeral_to == KOJI
    after = len(world.slack.messages)
    await world.slack.click(user_id=KOJI, message=offer, action_id="launch_open")
    view = await world.slack.wait_for_view(user_id=KOJI)
    assert view["type"] == "modal" and len(world.slack.messages) >= after
