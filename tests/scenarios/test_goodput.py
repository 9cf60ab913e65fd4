"""Goodput end to end (issue 23): a week of Kumo Labs with known idle time, a node failure, a stall, a slowdown and
two (re)starts, seeded in storage as the node sweep, the alert desk and the ingest API store them; then read
through the HTTP app, the local Slack and moto: `/digest preview` (the org's section and the program summary),
the posted digest's chart, the Home and `/track show`. Every figure below is worked out by hand.

The time is fixed (Monday 2026-11-23 09:00 JST, when 2026-W47's digest is due) on every clock that reads it.

kumo-p5-train holds 4 x p5.48xlarge (32 GPUs) and a head node (no GPU) from before 2026-W46; in hours from the
start of 2026-W47 (Mon 16 Nov 00:00 JST):

| when | what | GPU-hours |
| --- | --- | --- |
| 0-24 | no job | idle 768 |
| 24:00 | `start`; first sample 24:30; ready 20 min later (4 of its 5-minute intervals) | restarts 26.7 |
| 48-50 | a node failed (its successor running at 50) | node failures 16, training 48 |
| 72-73 | a stall (last good sample 72:00, samples again at 73:00, then 20 min warm-up) | stalls 32, restarts 10.7 |
| 96-100 | a slowdown to 60 % of its rate | slowdowns 51.2, training 76.8 |
| 144-168 | the job ended (`end` at 144) | idle 768 |
| the rest | training | training 3,703.5 in all |

Held 32 x 168 = 5,376; goodput 3,703.47 / 5,376 = 68.9 %. In 2026-W46 the job ran its first 84 hours and the
nodes idled the rest: 50.0 %. In 2026-W48 so far (9 h) no job reported: goodput n/a (not 0.0 %), 288 held.

Sakura AI holds 2 x trn1.32xlarge (32 chips) all along and no job of it reports: n/a, 5,376 held, left out of the
program's figure (Kumo's alone, 68.9 %) and of the chart."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from bot.digest.weeks import due_at, parse_week, previous_week
from sandbox.world import Sandbox
from storage import crud, tracking
from storage.models import Episode, ThroughputSample
from tests.scenarios.conftest import ask, body
from tests.scenarios.test_digest import digest_command, replies_in, summaries
from tests.scenarios.test_home import open_home, text_of

TOKYO = ZoneInfo("Asia/Tokyo")
WEEK = parse_week("2026-W47", TOKYO)
BEFORE = previous_week(WEEK)
NOW = due_at(WEEK, "mon 09:00")  # 9 h into 2026-W48
ORG, CLUSTER, JOB = "kumo-labs", "kumo-p5-train", "llama-70b"
SILENT, SILENT_CLUSTER = "sakura-ai", "sakura-trn1-pretrain"
ALICE, KUMO = "U0ALICE01", "C0KUMOLAB"
RATE = 100_000.0

LINE_W47 = (
    "Goodput 68.9 %* (last week 50.0 %) · of 5376.0 accelerator-hours held: training 3703.5 · node failures 16.0 · "
    "stalls 32.0 · slowdowns 51.2 · restarts and warm-up 37.3 · idle 1536.0"
)


def at(hours: float) -> datetime:
    return WEEK.start + timedelta(hours=hours)


def every_5_minutes(start: float, end: float, rate: float = RATE) -> list[ThroughputSample]:
    """Samples at start, start + 5 min, ... before end (hours from the week's start)."""
    count = round((end - start) * 12)
    return [
        ThroughputSample(
            org_id=ORG,
            cluster=CLUSTER,
            job=JOB,
            ts=at(start) + timedelta(minutes=5 * n),
            tokens_per_second=rate,
            received_at=at(start) + timedelta(minutes=5 * n),
        )
        for n in range(count)
    ]


def event(hours: float, kind: str) -> ThroughputSample:
    return ThroughputSample(org_id=ORG, cluster=CLUSTER, job=JOB, ts=at(hours), event=kind, received_at=at(hours))


def episode(kind: str, key: str, status: str, begun: float, told: float, closed: float, generation: int = 0) -> Episode:
    job = kind == "job"
    return Episode(
        org_id=ORG,
        backend="throughput" if job else "hyperpod",
        cluster_name=CLUSTER,
        node_key=key,
        generation=generation,
        kind=kind,
        state="closed",
        status=status,
        instance_type="" if job else "p5.48xlarge",
        opened_at=at(told),
        failing_since=at(begun),
        updated_at=at(closed),
        closed_at=at(closed),
        node_hours_lost=0.0 if job else closed - begun,
    )


async def seed(world: Sandbox) -> None:
    services = world.pitcrew.services
    services.digest.clock = services.records.clock = lambda: NOW
    assert services.home is not None
    services.home.clock = lambda: NOW
    held = {("hyperpod", CLUSTER, "p5.48xlarge"): 4, ("hyperpod", CLUSTER, "m5.xlarge"): 1}
    last_week = BEFORE.start - WEEK.start  # negative: hours are counted from 2026-W47's start
    w46 = last_week.total_seconds() / 3600
    async with services.db.session() as session:
        await tracking.record_cluster_states(session, org_id=ORG, held=held, at=at(w46 - 24))
        silent = {("hyperpod", SILENT_CLUSTER, "trn1.32xlarge"): 2}
        await tracking.record_cluster_states(session, org_id=SILENT, held=silent, at=at(w46 - 24))
        await crud.store_samples(
            session,
            samples=[
                *every_5_minutes(w46 - 1, w46 + 84),  # 2026-W46: the job's first 84 hours
                event(w46 + 84, "end"),
                event(24, "start"),
                *every_5_minutes(24.5, 72 + 1 / 12),  # up to its last good sample at 72:00
                *every_5_minutes(73, 96),
                *every_5_minutes(96, 100, RATE * 0.6),
                *every_5_minutes(100, 144),
                event(144, "end"),
            ],
        )
        session.add_all(
            [
                episode("node", "i-0fa11ed0000000001", "Failure", 48, 48.1, 50),
                episode("job", JOB, "stall", 72, 72 + 1 / 6, 73),
                episode("job", JOB, "slowdown", 96, 96.1, 100, generation=1),
            ]
        )
        await session.commit()


async def test_a_week_of_known_failures_stalls_and_idle_time_reads_the_same_goodput_everywhere(
    sandbox: Sandbox,
) -> None:
    await seed(sandbox)

    # The org's section of the digest, previewed by its operator: one line, every part, against last week.
    section = body(await digest_command(sandbox, f"preview {ORG} --week {WEEK.label}", user=ALICE, channel=KUMO))
    assert section.count("Goodput ") == 1, section
    assert LINE_W47 in section, section

    # The program summary lists every org's goodput, and where the rest went.
    summary = body(await digest_command(sandbox, f"preview --week {WEEK.label}"))
    assert (
        "*Kumo Labs*: Goodput 68.9 % (last week 50.0 %) · node failures 0.3 % · stalls 0.6 % · slowdowns 1.0 % · "
        "restarts and warm-up 0.7 % · idle 28.6 %" in summary
    ), summary
    # An org that held accelerators but none of whose jobs reported: unknown, not 0.0 %, and not in the figure.
    assert (
        "*Sakura AI*: Goodput n/a: no job reported throughput this week · 5376.0 accelerator-hours held · "
        "not in the chart" in summary
    ), summary
    assert (
        "*Program goodput 68.9 %* · of 5376.0 accelerator-hours held" in summary
        and "· 1 org left out: no job of theirs reported throughput" in summary
    ), summary
    assert "Goodput n/a · no accelerator-hours held" in summary, "orgs that held nothing say so, as before"

    # The running week so far, previewed: 9 hours held, no job reported.
    this_week = f"preview {ORG} --week {parse_week('2026-W48', TOKYO).label}"
    running = body(await digest_command(sandbox, this_week, user=ALICE, channel=KUMO))
    assert (
        "*Goodput n/a*: no job reported throughput this week so far (last week 68.9 %) · 288.0 accelerator-hours held"
        in running
    ), running
    assert "Goodput 0.0 %" not in running and "idle 288.0" not in running, running

    # The Home: this week so far against last week.
    home = text_of(await open_home(sandbox, ALICE))
    assert (
        "This week: Goodput n/a: no job reported throughput this week so far (last week 68.9 %) · "
        "288.0 accelerator-hours held"
    ) in home, home

    # /track show over two weeks: each week of the window, newest first, each against the one before.
    shown = body(await ask(sandbox, user=ALICE, channel=KUMO, text="show --weeks 2", command="/track"))
    assert (
        "• 2026-W48: Goodput n/a: no job reported throughput this week so far (last week 68.9 %) · "
        "288.0 accelerator-hours held" in shown
    ), shown
    assert "• 2026-W47: " + LINE_W47.replace("%*", "%") in shown, shown
    assert "• 2026-W46: Goodput 50.0 % · of 5376.0 accelerator-hours held: training 2688.0" in shown, shown

    # The posted digest: the goodput chart in the summary's thread.
    await digest_command(sandbox, "send")
    (posted,) = [m for m in summaries(sandbox) if m.ephemeral_to is None]
    assert "Program goodput 68.9 %" in body(posted) and "1 org left out" in body(posted)
    files = [f for m in replies_in(sandbox, posted) for f in m.files]
    assert any(f.get("filename") == f"goodput-{WEEK.label}.png" for f in files), files
