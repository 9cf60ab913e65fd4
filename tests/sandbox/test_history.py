"""Synthetic program history: deterministic, consistent with the tables' constraints and with a live sweep, and
readable by storage and the digest as if Pitcrew had recorded it."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bot.alerts.kind import Bucket
from bot.alerts.kinds import in_bucket
from bot.clusters.fleet import OrgClusters
from bot.clusters.held import cluster_held
from bot.clusters.model import Backend, Cluster, Health, Node
from bot.config import ProgramConfig, load_program, normalize_instance_type
from bot.resources import example_program
from sandbox.history import ClusterPlan, History, OrgPlan, generate_history, seed_sandbox_history, store_history
from sandbox.seed import CURATED_LAYOUT
from sandbox.training import HISTORY, sandbox_jobs
from storage import tracking
from storage.db import Database

EXAMPLE = example_program()
TOKYO = ZoneInfo("Asia/Tokyo")
UNTIL = datetime(2026, 12, 2, 6, 30, tzinfo=UTC)  # a Wednesday afternoon in Tokyo, 2026-W49
SINCE = UNTIL - timedelta(weeks=3)
HEAD = {"hyperpod": "ml.m5.12xlarge", "pcluster": "m5.8xlarge"}


@pytest.fixture(scope="module")
def program() -> ProgramConfig:
    return load_program(EXAMPLE)


def plans(program: ProgramConfig) -> list[OrgPlan]:
    """The example program's day-one clusters (seed.CURATED_LAYOUT), a head or controller node each, and two
    training jobs on every HyperPod cluster."""
    out = []
    for org in program.orgs:
        clusters = []
        for backend, name, instance_type, count in CURATED_LAYOUT.get(org.id, ()):
            accelerated = f"ml.{instance_type}" if backend == "hyperpod" else instance_type
            jobs = (f"{name}-main", f"{name}-ablation") if backend == "hyperpod" else ()
            clusters.append(ClusterPlan(backend, name, {accelerated: count, HEAD[backend]: 1}, jobs))
        out.append(OrgPlan(org.id, tuple(org.members), tuple(clusters)))
    return out


@pytest.fixture(scope="module")
def history(program: ProgramConfig) -> History:
    return generate_history(orgs=plans(program), since=SINCE, until=UNTIL, rollup_minutes=15)


def _in_window(moment: datetime | None) -> bool:
    return moment is None or SINCE <= moment < UNTIL


def test_same_seed_same_history_other_seed_another(program: ProgramConfig, history: History) -> None:
    again = generate_history(orgs=plans(program), since=SINCE, until=UNTIL, rollup_minutes=15)
    other = generate_history(orgs=plans(program), since=SINCE, until=UNTIL, rollup_minutes=15, seed=8)
    for (model, rows), (_, same), (_, different) in zip(history.tables(), again.tables(), other.tables(), strict=True):
        assert rows == same, model.__name__
        if model.__name__ != "ThroughputRollup":  # other seed, other rates
            assert rows != different or not rows, model.__name__
    assert history.rollups != other.rollups


def test_every_cluster_ends_at_its_plan_counts(program: ProgramConfig, history: History) -> None:
    last: dict[tuple[str, str, str, str], int] = {}
    first: dict[tuple[str, str, str, str], datetime] = {}
    for state in history.states:  # in time order, as storage needs them
        key = (state["org_id"], state["backend"], state["cluster_name"], state["instance_type"])
        last[key] = state["count"]
        first.setdefault(key, state["at"])
    wanted = {
        (org.org_id, cluster.backend, cluster.name, normalize_instance_type(t)): n
        for org in plans(program)
        for cluster in org.clusters
        for t, n in cluster.instances.items()
    }
    assert last == wanted
    assert set(first.values()) == {SINCE}
    assert [s["at"] for s in history.states] == sorted(s["at"] for s in history.states)
    assert not any(s["instance_type"].startswith("ml.") for s in history.states)
    changed = len(history.states) - len(wanted)
    assert changed == len(history.operations) > 0  # one done scale operation per change


def test_scale_operations_match_the_state_changes(history: History) -> None:
    counts: dict[tuple[str, str, str], int] = {}
    by_time = {(o["org_id"], o["cluster_name"], o["updated_at"]): o for o in history.operations}
    for state in history.states:
        key = (state["org_id"], state["cluster_name"], state["instance_type"])
        if state["at"] > SINCE:
            operation = by_time[(state["org_id"], state["cluster_name"], state["at"])]
            assert operation["request"]["before"] == counts[key] != state["count"] == operation["request"]["count"]
            assert operation["kind"] == "scale" and operation["status"] == "done"
            assert operation["requested_at"] <= operation["confirmed_at"] <= operation["updated_at"]
        counts[key] = state["count"]
    ids = [o["id"] for o in history.operations]
    assert len(set(ids)) == len(ids) and all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)


def test_incidents_are_resolved_after_they_open_and_some_stay_open(history: History) -> None:
    incidents = [r for r in history.records if r["kind"] == "incident"]
    resolved = [r for r in incidents if r["resolved_at"] is not None]
    assert resolved and len(resolved) < len(incidents)
    assert all(r["resolved_at"] > r["created_at"] and r["resolved_by"] for r in resolved)
    assert all(r["resolved_by"] is None for r in incidents if r["resolved_at"] is None)
    assert {r["kind"] for r in history.records} == {"note", "milestone", "incident", "lesson"}
    assert all(r["request_key"] is None for r in history.records)
    members = {m for org in plans(load_program(EXAMPLE)) for m in org.members}
    assert {r["created_by"] for r in history.records} <= members


def test_every_row_is_inside_the_window(history: History) -> None:
    assert all(_in_window(s["at"]) for s in history.states)
    assert all(_in_window(r["created_at"]) and _in_window(r["resolved_at"]) for r in history.records)
    assert all(_in_window(r["set_at"]) for r in history.requirements)
    assert all(_in_window(e["opened_at"]) and _in_window(e["closed_at"]) for e in history.episodes)
    assert all(_in_window(o["requested_at"]) and _in_window(o["updated_at"]) for o in history.operations)
    assert all(_in_window(r["minute"]) and r["minute"].second == 0 for r in history.rollups)
    assert {r["key"] for r in history.requirements} == {
        "model_size",
        "framework",
        "instance_type",
        "instance_count",
        "storage",
        "deadline",
    }


def test_episodes_are_closed_and_keyed_uniquely(history: History) -> None:
    keys = [(e["org_id"], e["backend"], e["cluster_name"], e["node_key"], e["generation"]) for e in history.episodes]
    assert len(set(keys)) == len(keys)
    nodes = [e for e in history.episodes if e["kind"] == "node"]
    jobs = [e for e in history.episodes if e["kind"] == "job"]
    assert nodes and jobs
    assert all(e["state"] == "closed" and e["failing_since"] == e["opened_at"] for e in history.episodes)
    for e in nodes:
        hours = (e["closed_at"] - e["opened_at"]).total_seconds() / 3600
        assert 1 / 3 <= hours <= 6 and e["node_hours_lost"] == pytest.approx(hours, abs=1e-3)
        assert e["backend"] in ("hyperpod", "pcluster") and re.fullmatch(r"i-0[0-9a-f]{16}", e["node_key"])
    assert all(e["kind"] == "job" and e["status"] in ("stall", "slowdown") for e in jobs)
    rollup_keys = [(r["org_id"], r["cluster"], r["job"], r["minute"]) for r in history.rollups]
    assert len(set(rollup_keys)) == len(rollup_keys)


def test_rollups_dip_in_slowdowns_and_stop_in_stalls(history: History) -> None:
    by_job: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in history.rollups:
        by_job.setdefault((row["org_id"], row["cluster"], row["job"]), []).append(row)
    for episode in (e for e in history.episodes if e["kind"] == "job"):
        rows = by_job[(episode["org_id"], episode["cluster_name"], episode["node_key"])]
        inside = [r for r in rows if episode["opened_at"] <= r["minute"] < episode["closed_at"]]
        if episode["status"] == "stall":
            assert not inside
        else:
            typical = sorted(r["total"] for r in rows)[len(rows) // 2]
            assert all(r["total"] < 0.6 * typical for r in inside)
    for rows in by_job.values():  # a base rate of 90k-160k tokens/s, a trend of a few percent a week
        median = sorted(r["total"] / r["count"] for r in rows)[len(rows) // 2]
        assert 90_000 * 0.9 < median < 160_000 * 1.2
        assert all(r["min"] < r["total"] / r["count"] < r["max"] for r in rows)


def test_sparse_rollups_before_a_time() -> None:
    plan = [OrgPlan("org-a", ("U0A1",), (ClusterPlan("hyperpod", "c1", {"ml.p5.48xlarge": 8}, ("job",)),))]
    dense_from = UNTIL - timedelta(days=2)
    rows = generate_history(
        orgs=plan, since=SINCE, until=UNTIL, rollup_minutes=10, sparse_before=dense_from, sparse_minutes=60
    ).rollups
    before = [r["minute"] for r in rows if r["minute"] < dense_from]
    after = [r["minute"] for r in rows if r["minute"] >= dense_from]
    assert all(m.minute == 0 for m in before) and {m.minute for m in after} == {0, 10, 20, 30, 40, 50}
    assert len(before) <= (dense_from - SINCE) / timedelta(hours=1) + 1
    assert len(after) <= (UNTIL - dense_from) / timedelta(minutes=10) + 1


async def test_stored_history_reads_back_through_storage(db: Database, history: History) -> None:
    await store_history(db, history, chunk=700)  # several chunks per table
    ids = sorted({r["org_id"] for r in history.requirements})
    incidents_open = [r for r in history.records if r["kind"] == "incident" and r["resolved_at"] is None]
    # Hourly rollups are read by the hour they start in: the hour SINCE falls inside (it is not on the hour)
    # belongs to the window before.
    floors = {(r["org_id"], r["cluster"], r["job"], r["minute"].replace(minute=0)) for r in history.rollups}
    hours = {key for key in floors if key[3] >= SINCE}
    async with db.session() as session:
        states = await tracking.state_changes(session, org_ids=ids, since=SINCE, until=UNTIL)
        records = await tracking.records_between(session, org_ids=ids, since=SINCE, until=UNTIL)
        still_open = await tracking.open_incidents(session, org_ids=ids, at=UNTIL)
        means = await tracking.hourly_job_means(session, org_ids=ids, since=SINCE, until=UNTIL)
        failures = await tracking.episodes_overlapping(
            session, org_ids=ids, kinds=in_bucket(Bucket.FAILURE), since=SINCE, until=UNTIL
        )
        stalls = await tracking.episodes_overlapping(
            session, org_ids=ids, kinds=in_bucket(Bucket.STALL), since=SINCE, until=UNTIL
        )
        operations = await tracking.operations_finished(session, org_ids=ids, since=SINCE, until=UNTIL)
        requirements = await tracking.requirements(session, org_ids=ids)
        held = await tracking.held_now(session, org_id="kumo-labs")
        later = await tracking.state_changes(session, org_ids=ids, since=UNTIL, until=UNTIL + timedelta(days=1))
    assert len(states) == len(history.states)
    assert len(records) == len(history.records)
    assert len(still_open) == len(incidents_open) > 0
    assert len(means) == len(hours)
    assert len(failures) + len(stalls) == len(history.episodes)
    assert len(operations) == len(history.operations)
    assert len(requirements) == len(history.requirements)
    assert held == {"p5.48xlarge": 36, "m5.12xlarge": 1, "m5.8xlarge": 1}
    # The state each cluster is in at the end: every (cluster, type) once, at its last (the plan's) count.
    last = {(s["org_id"], s["cluster_name"], s["instance_type"]): s["count"] for s in history.states}
    assert {(s.org_id, s.cluster_name, s.instance_type): s.count for s in later} == last
    assert len(later) == len(last)
    rate = next(mean for org, _, job, mean in means if org == "kumo-labs" and job == "kumo-p5-train-main")
    assert 50_000 < rate < 200_000


async def test_the_digest_of_a_stored_week_has_something_for_every_org(
    db: Database, program: ProgramConfig, history: History
) -> None:
    from bot.digest.compute import build_digest
    from bot.digest.gather import gather_week
    from bot.digest.weeks import digest_week

    await store_history(db, history)
    week = digest_week(UNTIL, ZoneInfo(program.timezone))
    facts = await gather_week(db, program=program, week=week)
    digest = build_digest(program_name=program.name, week=week, facts=facts)
    with_clusters = {org.org_id for org in plans(program) if org.clusters}
    for section in digest.orgs:
        if section.org_id in with_clusters:
            assert sum(line.instance_hours for line in section.usage) > 0, section.org_id
            assert section.clusters and section.nodes_by_type
    assert sum(len(s.notes) + len(s.milestones) + len(s.incidents_opened) + len(s.lessons) for s in digest.orgs) > 5
    jobs = [job for section in digest.orgs for job in section.jobs]
    assert len(jobs) == 2 * sum(1 for org in plans(program) for c in org.clusters if c.backend == "hyperpod")
    assert all(job.this_week and job.last_week and 0.5 < (job.ratio or 0) < 1.5 for job in jobs)
    assert digest.totals.failures > 0 and digest.totals.instance_hours_by_type["p5.48xlarge"] > 0


# ------------------------------------------------------------------------------------------------ the sandbox


@dataclass
class _Fleet:
    listings: list[OrgClusters]

    async def list_orgs(self, org_ids: list[str], *, fresh: bool = False) -> list[OrgClusters]:
        assert fresh
        return [next(listing for listing in self.listings if listing.org == org_id) for org_id in org_ids]


@dataclass
class _Services:
    db: Database
    program: ProgramConfig
    fleet: _Fleet


def _listing(org_id: str) -> OrgClusters:
    clusters = []
    for backend, name, instance_type, count in CURATED_LAYOUT.get(org_id, ()):
        prefix = "ml." if backend == "hyperpod" else ""
        nodes = [
            Node(f"i-{name}-{n}", "workers", prefix + instance_type, "Running", Health.HEALTHY) for n in range(count)
        ]
        nodes.append(Node(f"i-{name}-head", "head", HEAD[backend], "Running", Health.HEALTHY))
        clusters.append(
            Cluster(org=org_id, name=name, backend=Backend(backend), status="InService", nodes=tuple(nodes))
        )
    return OrgClusters(org=org_id, clusters=clusters)


async def test_sandbox_seeding_matches_the_live_clusters(db: Database, program: ProgramConfig) -> None:
    listings = [_listing(org.id) for org in program.orgs]
    services: Any = _Services(db=db, program=program, fleet=_Fleet(listings))
    summary = await seed_sandbox_history(services, now=UNTIL)
    assert summary.startswith("seeded 3.0 weeks of history for 12 orgs")
    async with db.session() as session:
        # A sweep right after seeding (the usage ledger's write) finds every count as stored.
        for listing in listings:
            held: Counter[tuple[str, str, str]] = Counter()
            for cluster in listing.clusters:
                for instance_type, count in cluster_held(cluster).items():
                    held[(cluster.backend.value, cluster.name, normalize_instance_type(instance_type))] += count
            assert await tracking.record_cluster_states(session, org_id=listing.org, held=held, at=UNTIL) == []
        means = await tracking.hourly_job_means(session, org_ids=[o.id for o in program.orgs], since=SINCE, until=UNTIL)
        shown = await tracking.records_between(session, org_ids=["kumo-labs"], since=SINCE, until=UNTIL, limit=50)
    rates = {job.job: job.rate for job in sandbox_jobs()}
    assert {job for _, _, job, _ in means} == set(rates)
    for _, _, job, mean in means:
        assert 0.3 * rates[job] < mean < 1.3 * rates[job]
    assert shown
    # The simulated jobs backfill their own last hours when they start: the history leaves those out.
    async with db.session() as session:
        recent = await tracking.hourly_job_means(
            session, org_ids=["kumo-labs", "sakura-ai"], since=UNTIL - HISTORY, until=UNTIL
        )
    assert recent == []
