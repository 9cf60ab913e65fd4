"""Goodput's facts read from storage (bot.digest.gather.gather_goodput, storage.tracking.job_runs), on SQLite and
Postgres: a day of one cluster worked out by hand, and the runs of a job at several cadences."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from bot.config import ProgramConfig
from bot.digest.gather import gather_goodput
from bot.digest.goodput import Reported, goodput, interval, missing_fraction, runs_of
from bot.digest.weeks import parse_week
from storage import crud, tracking
from storage.db import Database
from storage.models import Episode, ThroughputSample

WEEK = parse_week("2026-W48", ZoneInfo("Asia/Tokyo"))
ORG, CLUSTER, JOB = "kumo-labs", "p5-train", "llama"
PROGRAM = ProgramConfig.model_validate(
    {
        "name": "FM Accelerator",
        "timezone": "Asia/Tokyo",
        "coordination_channel": "C0PROGRAM",
        "admins": ["U0ADMIN01"],
        "orgs": [
            {
                "id": ORG,
                "name": "Kumo Labs",
                "channel": "C0KUMO",
                "members": {"U0M1": "operator"},
                "aws": {"account_id": "111111111111", "region": "us-east-1"},
            }
        ],
    }
)


def at(hours: float) -> datetime:
    return WEEK.start + timedelta(hours=hours)


def minutes(start: float, end: float, rate: float, *, every: int = 1, job: str = JOB) -> list[ThroughputSample]:
    """A sample every `every` minutes from `start` to before `end` (hours from the week's start)."""
    samples, moment = [], at(start)
    while moment < at(end):
        samples.append(
            ThroughputSample(
                org_id=ORG, cluster=CLUSTER, job=job, ts=moment, tokens_per_second=rate, received_at=moment
            )
        )
        moment += timedelta(minutes=every)
    return samples


def episode(
    kind: str, key: str, status: str, begun: float, told: float, closed: float | None, generation: int = 0
) -> Episode:
    return Episode(
        org_id=ORG,
        backend="throughput" if kind == "job" else "hyperpod",
        cluster_name=CLUSTER,
        node_key=key,
        generation=generation,
        kind=kind,
        state="open" if closed is None else "closed",
        status=status,
        instance_type="" if kind == "job" else "p5.48xlarge",
        opened_at=at(told),
        failing_since=at(begun),
        updated_at=at(told),
        closed_at=None if closed is None else at(closed),
    )


async def test_a_day_of_one_cluster_read_from_storage(db: Database) -> None:
    """4 x p5 (32 GPUs) from the day before. The job reports every minute from 2 h before the window to 10 h,
    but not 5-6 h (a stall, begun at 5 h, told at 5:10) and at half its rate 7-8 h (a slowdown); a node fails
    2-3 h; the job says `start` at 12 h, reports from 12:30 to 14 h. The window ends at 16 h (now)."""
    async with db.session() as session:
        await tracking.record_cluster_states(
            session, org_id=ORG, held={("hyperpod", CLUSTER, "p5.48xlarge"): 4}, at=at(-24)
        )
        await crud.store_samples(  # as ingest stores them: raw, and folded into their minute and hour rollups
            session,
            samples=[
                *minutes(-2, 5, 1000),
                *minutes(6, 7, 1000),
                *minutes(7, 8, 500),
                *minutes(8, 10, 1000),
                *minutes(12.5, 14, 1000),
                ThroughputSample(org_id=ORG, cluster=CLUSTER, job=JOB, ts=at(12), event="start", received_at=at(12)),
            ],
        )
        session.add_all(
            [
                episode("node", "i-0failed", "Failure", 2, 2, 3),
                episode("job", JOB, "stall", 5, 5 + 1 / 6, 6),
                episode("job", JOB, "slowdown", 7, 7.1, 8, generation=1),
            ]
        )
        await session.commit()
    facts = (await gather_goodput(db, program=PROGRAM, since=at(0), until=WEEK.end, now=at(16)))[ORG]
    assert facts.until == at(16), "nothing after now"
    value = goodput(facts)
    assert value.held == pytest.approx(32 * 16)
    assert {name: round(hours, 3) for name, hours in value.parts()} == {
        # 0-2, 2-3 on 3 nodes, 3-5, 6:10-7, half of 7-8, 8-10, 12:40-14
        "training": round(64 + 24 + 64 + 32 * 50 / 60 + 16 + 64 + 32 * 80 / 60, 3),
        "node failures": 8.0,
        "stalls": 32.0,
        "slowdowns": 16.0,
        "restarts and warm-up": round(32 * 10 / 60 + 32 * 40 / 60, 3),  # 6:00-6:10; 12:00 (start) to 12:40
        "idle": 128.0,  # 10-12, 14-16
    }
    assert value.percent == pytest.approx(100 * (64 + 24 + 64 + 32 * 50 / 60 + 16 + 64 + 32 * 80 / 60) / 512)


async def test_runs_split_in_sql_and_merged_at_each_jobs_cadence(db: Database) -> None:
    async with db.session() as session:
        await crud.store_samples(
            session,
            samples=[
                *minutes(0, 2, 1000, every=1, job="every-minute"),
                *minutes(3, 4, 1000, every=1, job="every-minute"),
                *minutes(0, 4, 1000, every=15, job="quarter-hourly"),
                *minutes(0, 4, 1000, every=5, job="five-minutely"),
                # two samples in a minute, every 5 minutes: one report every 5 minutes
                *minutes(0, 1, 1000, every=5, job="bursty"),
                *[
                    s.model_copy(update={"ts": s.ts + timedelta(seconds=30)})
                    for s in minutes(0, 1, 1000, every=5, job="bursty")
                ],
            ],
        )
        found = await tracking.job_runs(session, org_ids=[ORG], since=at(0), until=at(4))
    by_job: dict[str, list[tracking.SampleRun]] = {}
    for run in found:
        by_job.setdefault(run.job, []).append(run)
    assert [(r.first, r.last, r.samples) for r in by_job["every-minute"]] == [
        (at(0), at(2) - timedelta(minutes=1), 120),
        (at(3), at(4) - timedelta(minutes=1), 60),
    ], "an hour without a sample splits"
    assert [(r.first, r.last, r.samples) for r in by_job["five-minutely"]] == [
        (at(0), at(4) - timedelta(minutes=5), 48)
    ]
    assert [(r.samples, r.spacing) for r in by_job["bursty"]] == [(24, timedelta(minutes=5))]
    stretches = [Reported(r.first, r.last, r.samples, r.spacing) for r in by_job["quarter-hourly"]]
    assert [(r.first, r.last, r.samples, r.spacing) for r in stretches] == [
        (at(0), at(4) - timedelta(minutes=15), 16, timedelta(minutes=15))
    ]
    assert interval(stretches) == timedelta(minutes=15)
    (merged,) = runs_of(
        stretches, [], cluster_name=CLUSTER, job="q", stall_after=timedelta(minutes=10), warmup=timedelta(minutes=10)
    )
    assert (merged.start, merged.ready, merged.end) == (at(0), at(1), at(4)), "warm-up: the detector's 5 samples"


def test_a_start_inside_a_run_splits_it_and_a_slowdowns_fraction_leaves_pauses_out() -> None:
    stretches = [Reported(at(0), at(2), 121)]
    first, second = runs_of(
        stretches, [at(1)], cluster_name=CLUSTER, job=JOB, stall_after=timedelta(minutes=10), warmup=timedelta(0)
    )
    assert (first.start, first.end) == (at(0), at(1)) and (second.start, second.end) == (
        at(1),
        at(2) + timedelta(minutes=1),
    )
    # A job's interval is its measured spacing, not its span over its count (a gap inside would double it).
    assert interval([Reported(at(0), at(2), 13, timedelta(minutes=5))]) == timedelta(minutes=5)
    assert interval([Reported(at(0), at(2), 13)]) == timedelta(minutes=10)
    # A checkpoint pause (zeros) before the slowdown does not lower the rate it is compared with.
    before = [(2, 2000.0)] * 20 + [(2, 0.0)] * 5
    assert missing_fraction(before, [(2, 1400.0)] * 10) == pytest.approx(0.3)
    assert missing_fraction([], [(2, 1400.0)], [(2, 2000.0)]) == pytest.approx(0.3), "no minutes before: after"
    assert missing_fraction([], [(2, 1400.0)]) == 0.0 and missing_fraction(before, []) == 0.0


async def test_a_job_whose_samples_say_its_nodes_holds_those_and_the_rest_is_idle(db: Database) -> None:
    """Issue 23: a job takes every accelerator node of its cluster unless its samples carry `nodes`. 4 x p5 (32
    GPUs); the job reports every minute for 4 hours on 2 nodes, then restarts on all 4 for 2 hours."""
    async with db.session() as session:
        await tracking.record_cluster_states(
            session, org_id=ORG, held={("hyperpod", CLUSTER, "p5.48xlarge"): 4}, at=at(-24)
        )
        on_two = [s.model_copy(update={"nodes": 2}) for s in minutes(0, 4, 1000)]
        on_four = [s.model_copy(update={"nodes": 4}) for s in minutes(4, 6, 2000)]
        start = ThroughputSample(
            org_id=ORG, cluster=CLUSTER, job=JOB, ts=at(4), event="start", received_at=at(4), nodes=4
        )
        await crud.store_samples(session, samples=[*on_two, start, *on_four[1:]])
    facts = (await gather_goodput(db, program=PROGRAM, since=at(0), until=WEEK.end, now=at(6)))[ORG]
    assert [run.nodes for run in sorted(facts.runs, key=lambda r: r.start)] == [2, 4]
    value = goodput(facts)
    parts = {name: round(hours, 3) for name, hours in value.parts()}
    assert value.held == pytest.approx(32 * 6)
    assert parts["idle"] == pytest.approx(16 * 4), "the 2 nodes the job did not say it used, for 4 hours"
    assert parts["restarts and warm-up"] == pytest.approx(round(16 * 10 / 60 + 32 * 10 / 60, 3))
    assert parts["training"] == pytest.approx(round(16 * (4 - 10 / 60) + 32 * (2 - 10 / 60), 3))
