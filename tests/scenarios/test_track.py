"""`/track` end to end: records written by operators, refused for viewers and strangers, bad input told how
to do it right, the "Add a record" modal, the living document, and the usage ledger's quota notices."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlmodel import select

from bot.clusters.model import Backend, Cluster, Health, Node
from bot.config import ProgramConfig
from bot.digest.ledger import UsageLedger
from bot.monitor.idle import UsageObservers
from sandbox.world import Sandbox
from storage import tracking
from storage.models import AuditEntry, ClusterState, QuotaNotice, TrackRecord
from tests.scenarios.conftest import ADMIN, COORDINATION, ask, body

ALICE, BOB, HANA, GUEST = "U0ALICE01", "U0BOB0001", "U0HANA001", "U0GUEST01"
KUMO = "C0KUMOLAB"


async def records(world: Sandbox) -> list[TrackRecord]:
    async with world.pitcrew.services.db.session() as session:
        return list((await session.exec(select(TrackRecord).order_by(TrackRecord.id))).all())


async def audit(world: Sandbox) -> list[tuple[str, str]]:
    await world.pitcrew.services.audit.flush()
    async with world.pitcrew.services.db.session() as session:
        rows = (await session.exec(select(AuditEntry).order_by(AuditEntry.id))).all()
    return [(row.command, row.outcome) for row in rows]


async def track(world: Sandbox, user: str, text: str, channel: str = KUMO) -> Any:
    return await ask(world, user=user, channel=channel, text=text, command="/track")


async def test_an_operator_records_a_note_in_the_org_channel_for_all_to_see(sandbox: Sandbox) -> None:
    reply = await track(sandbox, ALICE, "note Checkpoint every 500 steps; didn't lose a step -- nice")
    assert reply.ephemeral_to is None, "recorded in the org's own channel: the team sees it"
    assert "Checkpoint every 500 steps; didn't lose a step -- nice" in body(reply)
    (stored,) = await records(sandbox)
    assert (stored.org_id, stored.kind, stored.created_by) == ("kumo-labs", "note", ALICE)
    assert f"#{stored.id}" in body(reply)
    assert ("/track", "done") in await audit(sandbox)


async def test_an_admin_records_for_any_org_privately_from_the_coordination_channel(sandbox: Sandbox) -> None:
    reply = await track(sandbox, ADMIN, "milestone Sakura AI passed JGLUE eval --org sakura-ai", channel=COORDINATION)
    assert reply.ephemeral_to == ADMIN, "one org's records are not shown to the coordination channel"
    (stored,) = await records(sandbox)
    assert (stored.org_id, stored.kind, stored.text) == ("sakura-ai", "milestone", "Sakura AI passed JGLUE eval")


@pytest.mark.parametrize(
    ("user", "text", "says"),
    [
        (BOB, "note viewers read only", "viewer"),
        (GUEST, "note who am I", "not a member"),
        (ALICE, "note for another org --org sakura-ai", "no access to org `sakura-ai`"),
        (HANA, "incident wrong org --org kumo-labs", "no access to org `kumo-labs`"),
    ],
)
async def test_writes_by_the_wrong_role_are_refused_and_change_nothing(
    sandbox: Sandbox, user: str, text: str, says: str
) -> None:
    reply = await track(sandbox, user, text)
    assert reply.ephemeral_to == user and says in body(reply)
    assert await records(sandbox) == []
    assert ("/track", "refused") in await audit(sandbox)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("note", "Say what to record"),
        ("nonsense here", "not a /track subcommand"),
        ("note hello --org", "`--org` needs"),
        ("require model_size", "KEY=VALUE"),
        ("resolve #abc", "#abc"),
        ("show --weeks 99", "--weeks"),
        ("note " + "x" * 1600, "1,500"),
    ],
)
async def test_bad_input_gets_one_message_with_usage_and_changes_nothing(
    sandbox: Sandbox, text: str, says: str
) -> None:
    reply = await track(sandbox, ALICE, text)
    assert reply.ephemeral_to == ALICE
    assert says in body(reply) and "Usage:" in body(reply)
    assert await records(sandbox) == []
    assert ("/track", "invalid") in await audit(sandbox)


async def test_incidents_are_resolved_once_and_only_by_who_may(sandbox: Sandbox) -> None:
    await track(sandbox, ALICE, "incident FSx for Lustre throughput dropped during checkpoint writes")
    (incident,) = await records(sandbox)
    refused = await track(sandbox, BOB, f"resolve {incident.id}")
    assert "viewer" in body(refused)
    hidden = await track(sandbox, HANA, f"resolve {incident.id}", channel="C0SAKURA1")
    assert f"no record #{incident.id} in the orgs you can see" in body(hidden), "another org's record is not revealed"
    done = await track(sandbox, ALICE, f"resolve #{incident.id}")
    assert "resolved" in body(done) and done.ephemeral_to is None
    again = await track(sandbox, ALICE, f"resolve {incident.id}")
    assert "already resolved" in body(again) and again.ephemeral_to == ALICE
    (stored,) = await records(sandbox)
    assert stored.resolved_by == ALICE
    await track(sandbox, ALICE, "note not an incident")
    note = (await records(sandbox))[-1]
    assert "only incidents are resolved" in body(await track(sandbox, ALICE, f"resolve {note.id}"))


async def test_requirements_are_set_changed_and_kept_in_the_history(sandbox: Sandbox) -> None:
    first = await track(sandbox, ALICE, 'require model_size=70B framework="NeMo 2.0" instance_count=32')
    assert "NeMo 2.0" in body(first)
    second = await track(sandbox, ALICE, "require model_size=175B framework='NeMo 2.0'")
    assert "70B" in body(second) and "175B" in body(second) and "framework" in body(second)
    kinds = [(r.kind, r.text) for r in await records(sandbox)]
    assert ("requirement", "model_size = 175B (was 70B)") in kinds
    assert len([k for k in kinds if k[1].startswith("framework")]) == 1, "an unchanged value is not recorded again"
    doc = await track(sandbox, BOB, "doc kumo-labs")
    assert "175B" in body(doc) and "NeMo 2.0" in body(doc)


async def test_show_and_doc_are_readable_by_viewers_and_list_the_records(sandbox: Sandbox) -> None:
    await track(sandbox, ALICE, "lesson Pre-stage the dataset to FSx before scaling to 32 nodes")
    await track(sandbox, ALICE, "incident NCCL timeouts on two nodes")
    shown = await track(sandbox, BOB, "show --weeks 2")
    assert shown.ephemeral_to == BOB
    assert "Pre-stage the dataset" in body(shown) and "NCCL timeouts" in body(shown)
    doc = await track(sandbox, BOB, "doc")
    assert "tracking document" in body(doc) and "NCCL timeouts" in body(doc)
    refused = await track(sandbox, BOB, "doc sakura-ai")
    assert "no access" in body(refused)


async def test_the_add_a_record_modal_checks_its_input_and_records_once(sandbox: Sandbox) -> None:
    home = await track(sandbox, ALICE, "")
    assert "Add a record" in str(home.blocks)
    await sandbox.slack.click(user_id=ALICE, message=home, action_id="track_add")
    view = await sandbox.slack.wait_for_view(user_id=ALICE, callback_id="track_add_record")
    view_id = view["id"]
    await sandbox.slack.submit_view(
        user_id=ALICE,
        view_id=view_id,
        values={"kind": {"kind": "lesson"}, "org": {"org": "kumo-labs"}, "text": {"text": "   "}},
    )
    assert "Say what to record" in sandbox.slack.open_views[view_id]["errors"]["text"]
    assert await records(sandbox) == []
    await sandbox.slack.submit_view(
        user_id=ALICE,
        view_id=view_id,
        values={
            "kind": {"kind": "lesson"},
            "org": {"org": "kumo-labs"},
            "text": {"text": "EFA needs the security group self-rule"},
        },
    )
    assert not sandbox.slack.open_views
    confirmation = await sandbox.slack.wait_for(
        lambda m: "EFA needs the security group" in m.text and m.channel == KUMO
    )
    assert "lesson" in confirmation.text.lower()
    (stored,) = await records(sandbox)
    assert (stored.kind, stored.org_id, stored.request_key) == ("lesson", "kumo-labs", view_id)


# C0 controls, DEL, C1 controls: what `/track note` refuses, the form must refuse in the same words.
CONTROL_CHARACTERS = ("\x7f", "\x00", "\x07", "\x1b", "\x85", "\x9f")


async def test_a_control_character_is_refused_alike_by_the_command_and_the_form(sandbox: Sandbox) -> None:
    home = await track(sandbox, ALICE, "")
    await sandbox.slack.click(user_id=ALICE, message=home, action_id="track_add")
    view = await sandbox.slack.wait_for_view(user_id=ALICE, callback_id="track_add_record")
    for char in CONTROL_CHARACTERS:
        text = f"loss went{char} to nan"
        reply = await track(sandbox, ALICE, f"note {text}")
        await sandbox.slack.submit_view(
            user_id=ALICE,
            view_id=view["id"],
            values={"kind": {"kind": "note"}, "org": {"org": "kumo-labs"}, "text": {"text": text}},
        )
        refused = sandbox.slack.open_views[view["id"]]["errors"]["text"]
        assert f"U+{ord(char):04X}" in refused, (char, refused)
        assert refused in body(reply), (char, refused, body(reply))
    assert await records(sandbox) == []
    assert ("/track", "done") not in await audit(sandbox)


async def test_a_viewer_is_not_offered_add_a_record_and_a_stale_button_is_refused_before_any_form(
    sandbox: Sandbox,
) -> None:
    home = await track(sandbox, BOB, "")
    assert "track_add" not in str(home.blocks) and "Add a record" not in body(home)
    assert "read tracking records" in body(home) and "Kumo Labs" in body(home)
    elsewhere = await track(sandbox, BOB, "", channel=COORDINATION)
    assert "track_add" not in str(elsewhere.blocks)
    assert "track_add" in str((await track(sandbox, ALICE, "", channel=COORDINATION)).blocks)
    # An "Add a record" button Bob might still press (one shown to an operator): refused, no form.
    operators = await track(sandbox, ALICE, "")
    await sandbox.slack.click(user_id=BOB, message=operators, action_id="track_add")
    refusal = await sandbox.slack.wait_for(lambda m: m.ephemeral_to == BOB and "not write" in m.text)
    assert refusal and not sandbox.slack.user_views(BOB)


@pytest.fixture
async def tight_quota(sandbox_factory: Callable[..., Any]) -> AsyncIterator[Sandbox]:
    """Kumo Labs' p5 quota set to what its clusters hold, so the first sweep crosses 100%."""

    def tighten(program: ProgramConfig) -> ProgramConfig:
        orgs = [o.model_copy(update={"quota": {"p5.48xlarge": 10}}) if o.id == "kumo-labs" else o for o in program.orgs]
        return program.model_copy(update={"orgs": orgs})

    async with sandbox_factory(program_transform=tighten) as world:
        await world.pitcrew.ready.wait()
        await world.pitcrew.services.drain()
        yield world


async def test_the_sweep_records_usage_and_posts_a_quota_notice_once(tight_quota: Sandbox) -> None:
    services = tight_quota.pitcrew.services
    await services.monitor.sweep()
    await services.monitor.sweep()
    async with services.db.session() as session:
        held = await tracking.held_now(session, org_id="kumo-labs")
        states = (await session.exec(select(ClusterState))).all()
        notices = (await session.exec(select(QuotaNotice).where(QuotaNotice.org_id == "kumo-labs"))).all()
    assert held.get("p5.48xlarge", 0) >= 10
    assert len({(s.org_id, s.backend, s.cluster_name, s.instance_type) for s in states}) == len(states), (
        "a second sweep that sees the same clusters writes nothing"
    )
    assert {n.level for n in notices} == {80, 100}
    posted = [m for m in tight_quota.slack.channel_messages(KUMO) if "quota" in m.text.lower()]
    assert len(posted) == 1, "one notice, at the highest level crossed"
    assert "p5.48xlarge" in posted[0].text


async def test_an_admin_resolving_from_another_channel_does_not_show_the_incident_there(sandbox: Sandbox) -> None:
    await track(sandbox, ALICE, "incident Kumo's private trouble")
    (incident,) = await records(sandbox)
    reply = await track(sandbox, ADMIN, f"resolve {incident.id}", channel=COORDINATION)
    assert "resolved" in body(reply) and reply.ephemeral_to == ADMIN, "one org's incident is not posted to all orgs"


def p5_cluster(count: int) -> Cluster:
    nodes = tuple(
        Node(
            node_id=f"i-{n:017x}",
            group="workers",
            instance_type="ml.p5.48xlarge",
            status="Running",
            health=Health.HEALTHY,
        )
        for n in range(count)
    )
    return Cluster(org="kumo-labs", name="kumo-p5-train", backend=Backend.HYPERPOD, status="InService", nodes=nodes)


async def test_quota_notices_come_once_per_crossing_and_not_at_every_one_node_dip(tight_quota: Sandbox) -> None:
    """Quota 10: at 10 the org is told once; dips to 9 (replacements) and back say nothing more; only after
    dropping below 9 (90%) may 100% be announced again, and below 7 (70%) the 80% notice."""
    services = tight_quota.pitcrew.services
    observers = services.monitor._ledger
    assert isinstance(observers, UsageObservers)
    ledger = next(o for o in observers.observers if isinstance(o, UsageLedger))
    told = [await ledger.observe("kumo-labs", [p5_cluster(n)]) for n in (10, 9, 10, 9, 10, 8, 10, 6, 8)]
    assert told == [1, 0, 0, 0, 0, 0, 1, 0, 1]
    async with services.db.session() as session:
        changes = await tracking.state_changes(
            session,
            org_ids=["kumo-labs"],
            since=datetime(2020, 1, 1, tzinfo=UTC),
            until=datetime(2100, 1, 1, tzinfo=UTC),
        )
    assert [c.count for c in changes if c.cluster_name == "kumo-p5-train"] == [10, 9, 10, 9, 10, 8, 10, 6, 8]


async def test_the_living_document_shows_the_clusters_the_last_sweep_saw(sandbox: Sandbox) -> None:
    await sandbox.pitcrew.services.monitor.sweep()
    doc = await track(sandbox, ALICE, "doc")
    assert "kumo-p5-train" in body(doc) and "p5.48xlarge" in body(doc)


async def test_an_admin_outside_org_channels_is_asked_which_org(sandbox: Sandbox) -> None:
    reply = await track(sandbox, ADMIN, "note a note for whom?", channel=COORDINATION)
    assert "Which org?" in body(reply) and "Usage:" in body(reply) and "--org ORG" in body(reply)
    assert await records(sandbox) == []
