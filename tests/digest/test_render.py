"""The digest and /track replies keep Slack's limits by splitting, never drop a line silently, escape what people
typed, and never show one org's details in another org's section."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bot.digest import render
from bot.digest.facts import Change as ClusterChange
from bot.digest.facts import (
    ClusterAtEnd,
    ClusterNow,
    FailureSummary,
    HistoryEntry,
    JobTrend,
    OrgSection,
    ProgramDigest,
    ProgramTotals,
    Record,
    RecordKind,
    Requirement,
    Stall,
    TrackingDoc,
    UsageLine,
    Week,
)
from bot.slack.blocks import Reply

TZ = ZoneInfo("Asia/Tokyo")
MONDAY = date.fromisocalendar(2026, 48, 1)  # Mon 23 Nov 2026
START = datetime.combine(MONDAY, time(0), tzinfo=TZ).astimezone(UTC)
WEEK = Week(label="2026-W48", start=START, end=START + timedelta(days=7), tz=TZ)
AT = START + timedelta(days=2, hours=12)  # Wed 25 Nov 12:00 JST
DATES = "Mon 23 Nov \N{EN DASH} Sun 29 Nov 2026"


# ------------------------------------------------------------------------------------------------ factories


def record(
    id: int,
    kind: RecordKind = RecordKind.NOTE,
    text: str = "switched to bf16",
    *,
    org: str = "kumo-labs",
    by: str = "U0ALICE01",
    at: datetime = AT,
    resolved: datetime | None = None,
) -> Record:
    return Record(
        id=id,
        org_id=org,
        kind=kind,
        text=text,
        created_by=by,
        created_at=at,
        resolved_at=resolved,
        resolved_by="U0BOB0002" if resolved else None,
    )


def no_failures() -> FailureSummary:
    return FailureSummary(
        count=0,
        recovered=0,
        mean_time_to_recovery=None,
        node_hours_lost=0.0,
        gpu_hours_lost=0.0,
        still_open=0,
        repeated=(),
    )


def quiet_section(org_id: str = "hikari", name: str = "Hikari Research") -> OrgSection:
    return OrgSection(
        org_id=org_id,
        name=name,
        channel="C0HIKARI1",
        clusters=(),
        nodes_by_type={},
        usage=(),
        daily_hours=(),
        failures=no_failures(),
        jobs=(),
        stalls=(),
        milestones=(),
        incidents_opened=(),
        incidents_resolved=(),
        incidents_open=(),
        notes=(),
        lessons=(),
        requirement_changes=(),
        changes=(),
        attention=(),
    )


def busy_section(org_id: str = "kumo-labs", name: str = "Kumo Labs", **overrides: Any) -> OrgSection:
    opened = record(12, RecordKind.INCIDENT, "NCCL timeouts on rack 3", org=org_id)
    old = record(7, RecordKind.INCIDENT, "FSx throughput low", org=org_id, at=AT - timedelta(days=9))
    fixed = record(9, RecordKind.INCIDENT, "EFA driver mismatch", org=org_id, at=AT - timedelta(days=3), resolved=AT)
    fields: dict[str, Any] = {
        "org_id": org_id,
        "name": name,
        "channel": "C0KUMO001",
        "clusters": (
            ClusterAtEnd(backend="hyperpod", cluster_name="p5-train", instances={"p5.48xlarge": 16, "m5.xlarge": 1}),
        ),
        "nodes_by_type": {"p5.48xlarge": 16, "m5.xlarge": 1},
        "usage": (
            UsageLine("p5.48xlarge", 2150.4, quota=16, quota_hours=2688.0, share=0.8),
            UsageLine("m5.xlarge", 168.0, quota=None, quota_hours=None, share=None),
        ),
        "daily_hours": tuple((day, {"p5.48xlarge": 307.2}) for day in WEEK.days),
        "failures": FailureSummary(
            count=3,
            recovered=2,
            mean_time_to_recovery=timedelta(hours=1, minutes=20),
            node_hours_lost=5.0,
            gpu_hours_lost=40.0,
            still_open=1,
            repeated=("p5-train",),
        ),
        "jobs": (
            JobTrend("p5-train", "llama-70b", this_week=189_000.0, last_week=180_000.0, ratio=1.05),
            JobTrend("p5-train", "mixtral", this_week=70_000.0, last_week=100_000.0, ratio=0.7),
            JobTrend("p5-train", "fresh-run", this_week=5_000.0, last_week=None, ratio=None),
            JobTrend("p5-train", "idle-run", this_week=None, last_week=9_000.0, ratio=None),
        ),
        "stalls": (
            Stall(org_id, "p5-train", "llama-70b", "stall", AT, AT + timedelta(minutes=45)),
            Stall(org_id, "p5-train", "mixtral", "slowdown", AT, None),
        ),
        "milestones": (record(20, RecordKind.MILESTONE, "first 1T tokens", org=org_id),),
        "incidents_opened": (opened,),
        "incidents_resolved": (fixed,),
        "incidents_open": (opened, old),
        "notes": (record(21, RecordKind.NOTE, "moved checkpoints to FSx", org=org_id),),
        "lessons": (record(22, RecordKind.LESSON, "pin the EFA installer version", org=org_id),),
        "requirement_changes": (record(23, RecordKind.REQUIREMENT, "model_size = 175B (was 70B)", org=org_id),),
        "changes": (
            ClusterChange(org_id, "scale", "p5-train", "done", AT, "U0ALICE01", f"scale {org_id}/p5-train w 14→16"),
            ClusterChange(org_id, "launch", "p5-eval", "failed", AT, "U0BOB0002", f"launch {org_id}/p5-eval"),
        ),
        "attention": ("2 open incidents", "repeated failures on p5-train"),
    }
    fields.update(overrides)
    return OrgSection(**fields)


def digest(orgs: Sequence[OrgSection], *, lessons: Sequence[Record] = (), **overrides: Any) -> ProgramDigest:
    fields: dict[str, Any] = {
        "program_name": "FM Accelerator",
        "week": WEEK,
        "orgs": tuple(orgs),
        "totals": ProgramTotals(
            clusters=sum(len(o.clusters) for o in orgs),
            nodes_by_type={"p5.48xlarge": 16, "m5.xlarge": 1},
            instance_hours_by_type={"p5.48xlarge": 2150.4, "m5.xlarge": 168.0},
            failures=3,
            gpu_hours_lost=1234.0,
            stalls=2,
            incidents_open=2,
            milestones=1,
        ),
        "attention": tuple((o.org_id, o.attention) for o in orgs if o.attention),
        "lessons": tuple(lessons),
    }
    fields.update(overrides)
    return ProgramDigest(**fields)


def tracking_doc(**overrides: Any) -> TrackingDoc:
    fields: dict[str, Any] = {
        "org_id": "kumo-labs",
        "name": "Kumo Labs",
        "generated_at": AT,
        "requirements": (
            Requirement("model_size", "70B", "U0ALICE01", AT - timedelta(days=30)),
            Requirement("framework", "NeMo 2.0", "U0ALICE01", AT - timedelta(days=30)),
        ),
        "clusters": (
            ClusterNow(
                backend="hyperpod",
                name="p5-train",
                status="InService",
                nodes_total=17,
                nodes_healthy=16,
                instances={"p5.48xlarge": 16, "m5.xlarge": 1},
                last_seen_at=AT,
                nodes_unhealthy=1,
            ),
        ),
        "quota": {"p5.48xlarge": 16},
        "held": {"p5.48xlarge": 16, "m5.xlarge": 1},
        "usage": (UsageLine("p5.48xlarge", 9_000.0, quota=16, quota_hours=10_752.0, share=9_000 / 10_752),),
        "usage_window": (AT - timedelta(days=28), AT),
        "open_incidents": (record(12, RecordKind.INCIDENT, "NCCL timeouts on rack 3"),),
        "history": (
            HistoryEntry(AT, "incident", "NCCL timeouts on rack 3", by="U0ALICE01", ref="#12"),
            HistoryEntry(AT - timedelta(days=1), "change", "scale kumo-labs/p5-train w 14→16", by="U0BOB0002"),
            HistoryEntry(AT - timedelta(days=2), "failure", "node i-0abc failed, 2 h 10 min, 2.2 node-hours"),
        ),
        "notes": ("usage counted since 2026-11-20",),
    }
    fields.update(overrides)
    return TrackingDoc(**fields)


# ------------------------------------------------------------------------------------------------ helpers


def assert_within_limits(reply: Reply) -> None:
    assert reply.text.strip()
    assert len(reply.blocks) <= 50
    for block in reply.blocks:
        if block["type"] == "section" and "text" in block:
            assert len(block["text"]["text"]) <= 3000
        if block["type"] == "header":
            assert len(block["text"]["text"]) <= 150
        if block["type"] == "context":
            assert len(block["elements"]) <= 10
    assert sum(render._chars(block) for block in reply.blocks) <= render.MESSAGE_TEXT_BUDGET


def shown(reply: Reply) -> str:
    """Every piece of text a reader can see in the blocks."""
    parts: list[str] = []
    for block in reply.blocks:
        if isinstance(block.get("text"), dict):
            parts.append(block["text"]["text"])
        parts += [item["text"] for item in block.get("fields", ())]
        parts += [e["text"] for e in block.get("elements", ()) if isinstance(e.get("text"), str)]
    return "\n".join(parts)


def everything(replies: Sequence[Reply]) -> str:
    return json.dumps([r.as_message() for r in replies], ensure_ascii=False)


# ------------------------------------------------------------------------------------------------ digest


def test_summary_has_totals_attention_lessons_and_a_fallback() -> None:
    lesson = record(22, RecordKind.LESSON, "pin the EFA installer version")
    replies = render.digest_summary(digest([busy_section(), quiet_section()], lessons=[lesson]))
    assert len(replies) == 1
    reply = replies[0]
    assert_within_limits(reply)
    assert reply.blocks[0]["text"]["text"] == "Weekly digest: FM Accelerator — 2026-W48"
    assert reply.text.startswith("Weekly digest: FM Accelerator — 2026-W48: 1 cluster, 3 node failures")
    text = shown(reply)
    assert f"{DATES} (Asia/Tokyo)" in text
    assert "16 x p5.48xlarge, 1 x m5.xlarge" in text
    assert "2,150 p5.48xlarge, 168 m5.xlarge" in text
    assert "1,234 GPU-hours lost" in text
    assert "*Needs attention*\n• *Kumo Labs*: 2 open incidents; repeated failures on p5-train" in text
    assert "• *Kumo Labs*: pin the EFA installer version — <@U0ALICE01> · #22" in text
    assert "• *Hikari Research*: quiet" in text
    assert "• *Kumo Labs*: 1 cluster · 2,318 instance-hours · 3 node failures · 2 incidents open" in text
    assert "Each org's section follows in this thread; each org channel gets its own section only." in text


def test_summary_without_attention_or_lessons_and_with_skipped_weeks() -> None:
    replies = render.digest_summary(digest([quiet_section()], skipped_weeks=("2026-W46", "2026-W47")))
    text = shown(replies[0])
    assert "No org needs attention." in text
    assert "No lessons recorded this week." in text
    assert "The digest for 2026-W46 was not posted: Pitcrew was not running when it was due." in text
    assert "The digest for 2026-W47 was not posted" in text


def test_sixty_long_lessons_are_split_over_several_messages_and_none_is_lost() -> None:
    lessons = [
        record(100 + n, RecordKind.LESSON, f"lesson-{n:03d} " + "x" * 389, org="kumo-labs" if n % 2 else "hikari")
        for n in range(60)
    ]
    assert all(len(lesson.text) == 400 for lesson in lessons)
    replies = render.digest_summary(digest([busy_section(), quiet_section()], lessons=lessons))
    assert len(replies) > 1
    for number, reply in enumerate(replies, start=1):
        assert_within_limits(reply)
        if number > 1:
            assert reply.blocks[0]["text"]["text"] == (
                f"Weekly digest: FM Accelerator — 2026-W48 (continued {number}/{len(replies)})"
            )
            assert f"(continued {number}/{len(replies)})" in reply.text
    for lesson in lessons:
        assert sum(shown(reply).count(lesson.text) for reply in replies) == 1
        assert sum(lesson.text in shown(reply) for reply in replies) == 1
    # The closing context comes once, at the very end.
    assert "Each org's section follows" in shown(replies[-1])
    assert all("Each org's section follows" not in shown(r) for r in replies[:-1])


def test_org_section_has_everything_of_its_week() -> None:
    replies = render.org_digest(busy_section(), week=WEEK, program_name="FM Accelerator")
    assert len(replies) == 1
    reply = replies[0]
    assert_within_limits(reply)
    assert not reply.public  # posted by chat.postMessage; a preview stays with whoever asked
    assert reply.blocks[0]["text"]["text"] == "Kumo Labs — 2026-W48"
    assert reply.text == "Kumo Labs — 2026-W48: 1 cluster, 2,318 instance-hours, 3 node failures, 2 incidents open"
    text = shown(reply)
    for expected in [
        f"Weekly digest of FM Accelerator · {DATES}",
        ":warning: *Needs attention:* 2 open incidents; repeated failures on p5-train",
        "• `p5-train` · HyperPod · 16 x p5.48xlarge, 1 x m5.xlarge",
        "*Nodes:* 17 (16 x p5.48xlarge, 1 x m5.xlarge)",
        "• *p5.48xlarge*: 2,150 of 2,688 quota-hours (*80%*) · quota 16 instances",
        "• *m5.xlarge*: 168 instance-hours (not under quota)",
        "*Node failures:* 3 · 2 recovered (mean time to recovery 1 h 20 min) · 40 GPU-hours lost (5 node-hours)"
        " · 1 still open",
        "Failed more than once: `p5-train`",
        "`llama-70b`: 189,000 vs 180,000 ↑ 5%",
        "`mixtral`: 70,000 vs 100,000 ↓ 30%",
        "`fresh-run`: 5,000 · new this week",
        "`idle-run`: no samples this week (last week 9,000)",
        "stall of `llama-70b` on `p5-train`: 2026-11-25 12:00 JST, 45 min",
        "slowdown of `mixtral` on `p5-train`: since 2026-11-25 12:00 JST, still open",
        "*#20* first 1T tokens · <@U0ALICE01>",
        "*Incidents:* 1 opened · 1 resolved · 2 still open (#12, #7)",
        "• opened *#12* NCCL timeouts on rack 3 · <@U0ALICE01>",
        "• resolved *#9* EFA driver mismatch · <@U0ALICE01> · 2026-11-22 12:00 JST · resolved by <@U0BOB0002>",
        "• still open *#7* FSx throughput low",
        "*#21* moved checkpoints to FSx",
        "*#22* pin the EFA installer version",
        "*#23* model_size = 175B (was 70B)",
        "• scale kumo-labs/p5-train w 14→16 · <@U0ALICE01> · 2026-11-25 12:00 JST",
        "• :x: *failed*: launch kumo-labs/p5-eval · <@U0BOB0002>",
    ]:
        assert expected in text, expected
    assert text.count("*#12*") == 1  # opened this week and still open: listed once


def test_an_org_section_never_names_another_org() -> None:
    kumo, sora = busy_section(), busy_section("sora-ai", "Sora AI")
    program = digest([kumo, sora], lessons=[record(1, RecordKind.LESSON, "a lesson of Sora AI", org="sora-ai")])
    assert "Sora AI" in everything(render.digest_summary(program))  # the coordination summary names both
    for own, other in [(kumo, sora), (sora, kumo)]:
        section = program.org(own.org_id)
        assert section is not None
        posted = everything(render.org_digest(section, week=WEEK, program_name=program.program_name))
        assert own.name in posted
        assert other.name not in posted and other.org_id not in posted


def test_quiet_section_is_one_line() -> None:
    replies = render.org_digest(quiet_section(), week=WEEK, program_name="FM Accelerator")
    assert len(replies) == 1
    reply = replies[0]
    assert_within_limits(reply)
    assert [block["type"] for block in reply.blocks] == ["section"]
    assert "nothing happened and nothing was held this week" in shown(reply)
    assert "Hikari Research" in reply.text and "*" not in reply.text


def test_a_long_org_section_is_split_and_every_line_is_kept() -> None:
    notes = tuple(record(1000 + n, RecordKind.NOTE, f"note-{n:03d} " + "y" * 300) for n in range(80))
    section = busy_section(notes=notes)
    replies = render.org_digest(section, week=WEEK, program_name="FM Accelerator")
    assert len(replies) > 1
    for reply in replies:
        assert_within_limits(reply)
        assert "Sora" not in everything([reply])
    for note in notes:
        assert sum(shown(reply).count(note.text) for reply in replies) == 1
    assert replies[1].blocks[0]["text"]["text"] == f"Kumo Labs — 2026-W48 (continued 2/{len(replies)})"


def test_typed_text_is_escaped_everywhere() -> None:
    nasty = "<!channel> deploy <http://evil.example|click> & co"
    section = busy_section(
        notes=(record(30, RecordKind.NOTE, nasty),),
        name="Kumo <Labs>",
        attention=("<!here> look",),
    )
    lesson = record(31, RecordKind.LESSON, nasty)
    replies = [
        *render.digest_summary(digest([section], lessons=[lesson])),
        *render.org_digest(section, week=WEEK, program_name="FM <Accelerator>"),
        render.record_added(record(30, RecordKind.NOTE, nasty), org_name="Kumo Labs", tz=TZ),
        render.track_show(
            org_id="kumo-labs",
            org_name="Kumo Labs",
            weeks=2,
            since=AT - timedelta(days=14),
            records=[record(30, RecordKind.NOTE, nasty)],
            open_incidents=[],
            usage=[],
            tz=TZ,
        ),
        render.tracking_doc_reply(tracking_doc(history=(HistoryEntry(AT, "note", nasty, ref="#30"),)), tz=TZ),
    ]
    for reply in replies:
        # Headers are plain text, which Slack shows as typed and never reads as a mention or link.
        readable = Reply(text=reply.text, blocks=[b for b in reply.blocks if b["type"] != "header"])
        dumped = everything([readable])
        assert "<!channel>" not in dumped and "<!here>" not in dumped and "<http" not in dumped
        assert "Kumo <Labs>" not in dumped
    assert replies[1].blocks[0]["text"] == {"type": "plain_text", "text": "Kumo <Labs> — 2026-W48", "emoji": True}
    assert "&lt;!channel&gt; deploy &lt;http://evil.example|click&gt; &amp; co" in shown(replies[0])
    assert "&lt;!channel&gt;" in replies[2].text  # the notification fallback too


@pytest.mark.parametrize(
    ("span", "expected"),
    [
        (timedelta(seconds=20), "under 1 min"),
        (timedelta(minutes=45), "45 min"),
        (timedelta(hours=1, minutes=20), "1 h 20 min"),
        (timedelta(hours=5), "5 h"),
        (timedelta(days=2, hours=3, minutes=10), "2 d 3 h"),
        (timedelta(days=3), "3 d"),
    ],
)
def test_durations(span: timedelta, expected: str) -> None:
    assert render._duration(span) == expected


# ------------------------------------------------------------------------------------------------ /track


def show(records: Sequence[Record], **overrides: Any) -> Reply:
    kwargs: dict[str, Any] = {
        "org_id": "kumo-labs",
        "org_name": "Kumo Labs",
        "weeks": 2,
        "since": AT - timedelta(days=14),
        "records": records,
        "open_incidents": [record(12, RecordKind.INCIDENT, "NCCL timeouts on rack 3")],
        "usage": [UsageLine("p5.48xlarge", 4300.0, quota=16, quota_hours=5376.0, share=0.8)],
        "tz": TZ,
    }
    kwargs.update(overrides)
    return render.track_show(**kwargs)


def test_track_show_lists_usage_incidents_and_records_newest_first() -> None:
    records = [record(n, RecordKind.NOTE, f"note {n}", at=AT + timedelta(hours=n)) for n in range(1, 4)]
    reply = show(records)
    assert_within_limits(reply)
    assert not reply.public
    text = shown(reply)
    assert "• *p5.48xlarge*: 4,300 of 5,376 quota-hours (*80%*)" in text
    assert "*Open incidents* (1)\n• *#12* NCCL timeouts on rack 3" in text
    assert text.index("note 3") < text.index("note 2") < text.index("note 1")
    assert ":memo: *Note* *#3* note 3 · <@U0ALICE01> · 2026-11-25 15:00 JST" in text
    assert "older record" not in text
    assert reply.text == "Tracking · Kumo Labs · last 2 weeks: 3 records, 1 open incident"


def test_track_show_says_what_the_org_holds_now_as_the_doc_and_the_home_do() -> None:
    text = shown(show([], held={"p5.48xlarge": 14, "m5.xlarge": 1}))
    assert "*Held now*\n• *p5.48xlarge*: 14 held now of 16 allowed\n• *m5.xlarge*: 1 held now (not under quota)" in text
    assert "No quota and nothing held." in shown(show([], usage=[]))


def test_track_show_says_how_many_records_it_could_not_fit() -> None:
    records = [
        record(n, RecordKind.NOTE, f"rec-{n:04d} " + "z" * 200, at=AT + timedelta(minutes=n)) for n in range(300)
    ]
    reply = show(records)
    assert_within_limits(reply)
    text = shown(reply)
    listed = [r for r in records if f"{r.text} ·" in text]
    overflow = reply.blocks[-1]["elements"][0]["text"]
    hidden = 300 - len(listed)
    assert 0 < len(listed) < 300
    assert overflow == (
        f"… and {hidden} older records: `/track doc kumo-labs` or "
        "`pitcrew track export kumo-labs --format md` has them all."
    )
    # The newest are the ones shown.
    assert {r.id for r in listed} == set(range(300 - len(listed), 300))


def test_track_show_with_hundreds_of_open_incidents_still_fits() -> None:
    incidents = [record(n, RecordKind.INCIDENT, f"inc-{n:03d} " + "q" * 250) for n in range(200)]
    reply = show([record(999, RecordKind.NOTE, "a note")], open_incidents=incidents)
    assert_within_limits(reply)
    assert reply.blocks[-1]["elements"][0]["text"].endswith("more blocks not shown")


def test_track_show_with_nothing() -> None:
    reply = show([], open_incidents=[], usage=[])
    assert_within_limits(reply)
    text = shown(reply)
    assert "No instance-hours recorded in this window." in text
    assert "No records in this window." in text


def test_tracking_doc_reply_has_every_part() -> None:
    reply = render.tracking_doc_reply(tracking_doc(), tz=TZ)
    assert_within_limits(reply)
    assert reply.blocks[0]["text"]["text"] == "Kumo Labs — tracking document"
    text = shown(reply)
    for expected in [
        "generated 2026-11-25 12:00 JST",
        "• *model_size*: 70B · set by <@U0ALICE01>",
        "• *framework*: NeMo 2.0",
        ":red_circle: `p5-train` · HyperPod · `InService` · 16/17 nodes healthy, 1 unhealthy · 16 x p5.48xlarge, "
        "1 x m5.xlarge",
        "• *p5.48xlarge*: 16 held now of 16 allowed",
        "• *m5.xlarge*: 1 held now (not under quota)",
        "• *p5.48xlarge*: 9,000 of 10,752 quota-hours (*84%*)",
        "*Open incidents* (1)\n• *#12* NCCL timeouts on rack 3",
        "2026-11-25 12:00 JST :rotating_light: Incident *#12*: NCCL timeouts on rack 3 · <@U0ALICE01>",
        ":gear: Change: scale kumo-labs/p5-train w 14→16 · <@U0BOB0002>",
        "usage counted since 2026-11-20",
    ]:
        assert expected in text, expected
    assert text.index("Incident *#12*:") < text.index("Change:") < text.index("Failure:")  # newest first


def test_tracking_doc_reply_without_requirements_and_with_a_long_history() -> None:
    history = tuple(
        HistoryEntry(AT - timedelta(hours=n), "note", f"hist-{n:04d} " + "w" * 150, by="U0ALICE01", ref=f"#{n}")
        for n in range(500)
    )
    reply = render.tracking_doc_reply(tracking_doc(requirements=(), history=history), tz=TZ)
    assert_within_limits(reply)
    text = shown(reply)
    assert "No requirements recorded: `/track require model_size=70B framework=NeMo ...`" in text
    listed = sum(f"hist-{n:04d}" in text for n in range(500))
    assert 0 < listed < 500
    assert f"… and {500 - listed} older history entries: `pitcrew track export kumo-labs --format md`" in text
    assert reply.blocks[-1]["elements"][0]["text"] == "usage counted since 2026-11-20"  # the notes stay last


def test_record_added_and_resolved() -> None:
    incident = record(12, RecordKind.INCIDENT, "NCCL timeouts\non rack 3")
    added = render.record_added(incident, org_name="Kumo Labs", tz=TZ)
    assert_within_limits(added)
    assert added.public
    assert ">NCCL timeouts\n>on rack 3" in shown(added)
    assert "`/track resolve 12`" in shown(added)
    assert added.text == "Incident #12 recorded for Kumo Labs: NCCL timeouts\non rack 3"

    done = replace(incident, resolved_at=AT + timedelta(hours=2, minutes=5), resolved_by="U0BOB0002")
    resolved = render.record_resolved(done, org_name="Kumo Labs", tz=TZ, already=False)
    assert_within_limits(resolved)
    assert "resolved by <@U0BOB0002>" in shown(resolved)
    assert "open for 2 h 5 min" in shown(resolved)

    again = render.record_resolved(done, org_name="Kumo Labs", tz=TZ, already=True)
    assert not again.public
    assert again.text == "#12 was already resolved by <@U0BOB0002> at 2026-11-25 14:05 JST, nothing changed."


def test_requirements_set() -> None:
    reply = render.requirements_set(
        org_name="Kumo Labs",
        changed=[("model_size", "70B", "175B"), ("storage", None, "FSx <1.2 PB>")],
        unchanged=["framework"],
    )
    assert_within_limits(reply)
    text = shown(reply)
    assert "• *model_size*: 70B → *175B*" in text
    assert "• *storage*: *FSx &lt;1.2 PB&gt;* (new)" in text
    assert "Unchanged (same value as before): `framework`" in text
    nothing = render.requirements_set(org_name="Kumo Labs", changed=[], unchanged=["framework"])
    assert "unchanged" in nothing.text


def test_track_home_has_the_add_button_and_the_subcommands() -> None:
    reply = render.track_home(
        org_name="Kumo Labs",
        org_id="kumo-labs",
        open_incidents=2,
        records_this_week=5,
        usage_hint="p5.48xlarge: 80% of quota-hours this week",
    )
    assert_within_limits(reply)
    actions = next(block for block in reply.blocks if block["type"] == "actions")
    assert actions["elements"][0]["action_id"] == render.TRACK_ADD_ACTION == "track_add"
    assert actions["elements"][0]["value"] == "kumo-labs"
    assert "`/track resolve ID`" in shown(reply)
    assert "2 open incidents · 5 records this week" in shown(reply)
    elsewhere = render.track_home(org_name=None, open_incidents=0, records_this_week=0, usage_hint="")
    assert next(b for b in elsewhere.blocks if b["type"] == "actions")["elements"][0]["value"] == ""


def test_track_home_of_a_reader_offers_no_form_and_says_why() -> None:
    reply = render.track_home(
        org_name="Kumo Labs", org_id="kumo-labs", open_incidents=0, records_this_week=1, usage_hint="", may_add=False
    )
    assert_within_limits(reply)
    assert not [b for b in reply.blocks if b["type"] == "actions"]
    assert "read tracking records" in shown(reply) and "0 open incidents · 1 record this week" in shown(reply)


def test_track_modal_structure() -> None:
    orgs = [("kumo-labs", "Kumo Labs"), ("sora-ai", "Sora AI " + "very long name " * 10)]
    view = render.track_modal(orgs=orgs, default_org="sora-ai", private_metadata='{"channel": "C1"}')
    assert view["type"] == "modal"
    assert view["callback_id"] == render.TRACK_VIEW == "track_add_record"
    assert view["private_metadata"] == '{"channel": "C1"}'
    assert len(view["title"]["text"]) <= 24
    assert (view["submit"]["text"], view["close"]["text"]) == ("Record", "Cancel")
    inputs = {block["block_id"]: block["element"] for block in view["blocks"] if block["type"] == "input"}
    assert list(inputs) == ["kind", "org", "text"]
    kind, org, text = inputs["kind"], inputs["org"], inputs["text"]
    assert (kind["type"], kind["action_id"]) == ("static_select", "kind")
    assert [o["value"] for o in kind["options"]] == ["note", "milestone", "incident", "lesson"]
    assert kind["initial_option"]["value"] == "note"
    assert (org["type"], org["action_id"]) == ("static_select", "org")
    assert [o["value"] for o in org["options"]] == ["kumo-labs", "sora-ai"]
    assert org["initial_option"] in org["options"]  # Slack wants the very same option object
    assert all(len(o["text"]["text"]) <= 75 for o in org["options"])
    assert (text["type"], text["action_id"], text["multiline"], text["max_length"]) == (
        "plain_text_input",
        "text",
        True,
        1500,
    )
    no_default = render.track_modal(orgs=orgs, default_org=None, private_metadata="")
    assert "initial_option" not in no_default["blocks"][1]["element"]


def test_track_modal_with_more_orgs_than_slack_lists() -> None:
    orgs = [(f"org-{n:03d}", f"Org {n}") for n in range(130)]
    view = render.track_modal(orgs=orgs, default_org="org-120", private_metadata="")
    org = view["blocks"][1]["element"]
    assert len(org["options"]) == 100
    assert org["initial_option"]["value"] == "org-120" and org["initial_option"] in org["options"]
    assert "Only 100 of 130 orgs" in view["blocks"][-1]["elements"][0]["text"]
    with pytest.raises(ValueError):
        render.track_modal(orgs=[], default_org=None, private_metadata="")


@pytest.mark.parametrize("level", [80, 100])
def test_quota_notice(level: int) -> None:
    held = 13 if level == 80 else 16
    reply = render.quota_notice(org_name="Kumo Labs", instance_type="p5.48xlarge", held=held, quota=16, level=level)
    assert_within_limits(reply)
    assert reply.public
    text = shown(reply)
    assert f"holds {held} of its 16 `p5.48xlarge` instances" in text
    assert "program admin" in text
    if level == 100:
        assert "refused until something is released" in text


def test_digest_sent_and_already_sent() -> None:
    sent = render.digest_sent(week="2026-W48", channels=4, skipped=["C0SORA001"])
    assert_within_limits(sent)
    assert sent.text == "Digest for 2026-W48 posted to 4 channels. Skipped: C0SORA001"
    already = render.digest_already_sent(week="2026-W48", at=AT, by="U0ALICE01", tz=TZ)
    assert_within_limits(already)
    assert "already posted at 2026-11-25 12:00 JST by <@U0ALICE01>" in already.text
    assert "`--force`" in already.text or "--force" in already.text
    scheduled = render.digest_already_sent(week="2026-W48", at=AT, by=None, tz=TZ)
    assert "by the schedule" in scheduled.text


def test_idle_accelerator_hours_are_in_the_org_section_its_overview_and_the_summary() -> None:
    idle = busy_section(idle_hours={"trn1.32xlarge": 12.5, "p5.48xlarge": 72.0})
    (reply,) = render.org_digest(idle, week=WEEK, program_name="FM Accelerator")
    assert_within_limits(reply)
    line = "*Idle accelerators:* 84.5 instance-hours with no job running (72 p5.48xlarge, 12.5 trn1.32xlarge)"
    assert line in shown(reply)
    totals = replace(digest([idle]).totals, idle_instance_hours=84.5)
    (summary,) = render.digest_summary(digest([idle, quiet_section()], totals=totals))
    text = shown(summary)
    assert "*Idle accelerators:* 84.5 instance-hours with no job running" in text
    assert "• *Kumo Labs*: 1 cluster · 2,318 instance-hours · 3 node failures · 2 incidents open · 84.5 idle" in text
    # Without idle hours, nothing is said about them.
    (plain,) = render.org_digest(busy_section(), week=WEEK, program_name="FM Accelerator")
    assert "Idle" not in shown(plain) and "idle instance-hours" not in shown(
        render.digest_summary(digest([busy_section()]))[0]
    )


def test_the_charts_set_only_types_under_quota_against_the_quota(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 21: head and controller node hours against P5-only quota-hours drew orgs at 96-100 % as over."""
    drawn: dict[str, dict[str, Any]] = {}
    monkeypatch.setattr(render.charts, "org_usage_chart", lambda **kwargs: drawn.setdefault("program", kwargs) and b"")
    monkeypatch.setattr(render.charts, "daily_usage_chart", lambda **kwargs: drawn.setdefault("org", kwargs) and b"")
    near = busy_section(
        usage=(
            UsageLine("p5.48xlarge", 0.97 * 2688.0, quota=16, quota_hours=2688.0, share=0.97),
            UsageLine("m5.12xlarge", 168.0, quota=None, quota_hours=None, share=None),  # the controller
            UsageLine("m5.xlarge", 336.0, quota=None, quota_hours=None, share=None),  # head and login
        ),
        daily_hours=tuple((day, {"p5.48xlarge": 372.5, "m5.12xlarge": 24.0, "m5.xlarge": 48.0}) for day in WEEK.days),
    )
    unlimited = quiet_section()
    render.program_chart(digest([near, unlimited]))
    (used, _), (available, none) = drawn["program"]["used"], drawn["program"]["available"]
    assert used == pytest.approx(0.97 * 2688.0) and available == 2688.0 and used <= available, "not over quota"
    assert none is None, "an org with no quota has nothing to be over"
    render.org_chart(near, WEEK)
    assert set(drawn["org"]["hours_by_type"]) == {"p5.48xlarge"} and drawn["org"]["quota_hours_per_day"] == 16 * 24.0
