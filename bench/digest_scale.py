"""Benchmark (not a test): building the weekly digest for a large program, this build next to today's.

The digest reads one week of every org (records, incidents, failures, stalls, idle accelerators, cluster
changes, the usage ledger's steps) plus each training job's median throughput this week and the week before.
The build measured is `gather_week` (a handful of queries for all orgs at once) + `compute.build_digest` +
rendering (`render.digest_summary` and `render.org_digest` for every org).

Two builds side by side, in the same run, on the same databases:

- **today's build** (`--previous`, default PREVIOUS: the commit before job_week_medians), extracted from git
  with `git archive` into a temporary folder and run from there (`--tree`): job medians taken from every
  job-hour of both weeks in the hourly rollups (200 k rows at 100 orgs);
- **this build**: a finished week's medians stored in `job_week_medians` (bot.digest.medians) and read back
  (600 rows a week), after one indexed sum of the week's hourly counts says they still hold. Timed apart: a
  week's first digest, with the table emptied first, which computes and stores both weeks' medians (the first
  digest after the upgrade; afterwards the leader's catch-up stores each week minutes after it ends).

Each side runs in `--rounds` fresh processes, the two in turns (which goes first alternates), each with a
warm-up then `--repeat` timed builds; the figures are the median (min, max) of every timed build of a side.
Every build's medians are compared with today's build's, exactly (`==` on the floats).

Workloads, generated with `sandbox.history.generate_history` (seeded): 12 orgs x 26 weeks and 100 orgs x
52 weeks. Each org has 3 clusters (HyperPod p5.48xlarge, ParallelCluster p5.48xlarge, HyperPod
trn1.32xlarge, each with its head or controller node) and 2 jobs per cluster: 600 jobs at 100 orgs. The digest
week is the last full week before the posting time (Monday 09:00, Asia/Tokyo).

Throughput density: rollups every 10 minutes for the two weeks the digest reads (the digest week and the
week before it) and hourly before that. Pitcrew writes one rollup per job-minute; a year of per-minute
rollups for 600 jobs is about 300 M rows, which this 2-core machine cannot generate and load in minutes. The
two weeks read are at a tenth of the real density (1.2 M rows instead of 12 M at 100 orgs); the older weeks
are there so that a query which is not bounded by its window shows it.

Storage: a fresh SQLite file, and with `--postgres URL` a database `pitcrew_bench` created (dropped first) on
that server; both are loaded at once. Tables other than the rollups are written with `store_history`
(SQLAlchemy core inserts); the rollups, most of the rows, with sqlite3 `executemany` / asyncpg `COPY` in the
exact form SQLAlchemy stores them, with the time index dropped during the load and created again after it,
then `VACUUM ANALYZE` on Postgres (as autovacuum does after inserts, since Postgres 13: its visibility map lets
an index-only scan skip the table; SQLite is never analyzed by Pitcrew, so not here either).
`--keep DIR` keeps the loaded databases (the SQLite file in DIR, `pitcrew_bench`) and uses them again on the
next run with the same DIR (loading 100 orgs takes 3 minutes); they are migrated to head before measuring.

Memory: the process's peak RSS (VmHWM: imports, setup and every build; `ru_maxrss` would report the data
generator's peak, which a child started with vfork+exec inherits), and one more build under tracemalloc (peak
of Python allocations), left out when a build takes over `--trace-max` seconds. With `--naive`, also a naive
build (every raw rollup of both weeks through `storage.crud.rollups`, medians in Python; a minute a build at
100 orgs, on Postgres only up to `--naive-postgres-orgs` orgs); with `--charts`, every chart (SQLite only).

    .venv/bin/python bench/digest_scale.py [--sizes 12x26,100x52] [--rounds 3] [--repeat 3] [--postgres URL]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import json
import os
import platform
import random
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

# This checkout's tree, or with `--tree DIR` (a measuring process of the previous build) that build's files.
sys.path.insert(
    0, sys.argv[sys.argv.index("--tree") + 1] if "--tree" in sys.argv else str(Path(__file__).resolve().parents[1])
)

from sqlalchemy.engine import make_url

from bot.config import ProgramConfig
from bot.digest import render
from bot.digest.compute import build_digest
from bot.digest.facts import JobRate, ProgramDigest, Week
from bot.digest.gather import gather, gather_week
from bot.digest.render import org_chart, program_chart
from bot.digest.weeks import digest_week, previous_week
from sandbox.history import ClusterPlan, History, OrgPlan, generate_history, store_history
from storage import crud
from storage.db import Database

ROOT = Path(__file__).resolve().parents[1]
TZ = ZoneInfo("Asia/Tokyo")
POSTED_AT = datetime(2026, 11, 30, 9, 0, tzinfo=TZ)  # Monday 09:00: the digest of 2026-W48 is due
DENSE_MINUTES = 10
SPARSE_MINUTES = 60
BATCH_ORGS = 4  # orgs generated and stored at a time, so the generator's rows never all sit in memory
BENCH_DATABASE = "pitcrew_bench"
MINUTE_INDEX = "ix_throughput_rollups_minute"
ROLLUP_COLUMNS = ("org_id", "cluster", "job", "minute", "count", "total", "min", "max")
MB = 1024 * 1024
# Today's build before job_week_medians (the 2.4 s Postgres, 3.0 s SQLite): the previous side.
PREVIOUS = "f6c13af"


# ------------------------------------------------------------------------------------------------ workload


def program_for(orgs: int) -> ProgramConfig:
    return ProgramConfig.model_validate(
        {
            "name": f"Bench program ({orgs} orgs)",
            "timezone": str(TZ),
            "coordination_channel": "C0PROGRAM",
            "admins": ["U0ADMIN01"],
            "orgs": [
                {
                    "id": f"org-{i:03d}",
                    "name": f"Org {i:03d}",
                    "channel": f"C0ORG{i:03d}",
                    "members": {f"U0M{i:03d}A": "operator", f"U0M{i:03d}B": "viewer"},
                    "aws": {"account_id": f"{100000000000 + i}", "region": "us-east-1"},
                    "quota": {"p5.48xlarge": 64, "trn1.32xlarge": 32},
                }
                for i in range(orgs)
            ],
        }
    )


def plans_for(program: ProgramConfig) -> list[OrgPlan]:
    rng = random.Random(len(program.orgs))
    plans = []
    for org in program.orgs:
        short = org.id
        clusters = (
            ClusterPlan("hyperpod", f"{short}-p5-train", {"ml.p5.48xlarge": rng.randint(16, 48), "ml.m5.12xlarge": 1}),
            ClusterPlan("pcluster", f"{short}-p5-dev", {"p5.48xlarge": rng.randint(2, 12), "m5.8xlarge": 1}),
            ClusterPlan("hyperpod", f"{short}-trn1", {"ml.trn1.32xlarge": rng.randint(8, 28), "ml.m5.12xlarge": 1}),
        )
        for cluster in clusters:
            cluster.jobs = (f"{cluster.name}-main", f"{cluster.name}-ablation")
        plans.append(OrgPlan(org.id, tuple(org.members), clusters))
    return plans


def digest_of_bench() -> Week:
    return digest_week(POSTED_AT, TZ)


# ------------------------------------------------------------------------------------------------ loading


def _sqlite_path(url: str) -> str:
    return url.split("///", 1)[1]


def _asyncpg_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@functools.cache
def _sqlite_time(moment: datetime) -> str:
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M:%S.%f}"  # SQLAlchemy's SQLite DATETIME storage format


def _row(r: dict[str, Any], sqlite: bool) -> tuple[Any, ...]:
    minute = _sqlite_time(r["minute"]) if sqlite else r["minute"]
    return (r["org_id"], r["cluster"], r["job"], minute, r["count"], r["total"], r["min"], r["max"])


_HOURLY = (  # the same statement as migration 0006's backfill
    "INSERT INTO throughput_hourly (org_id, cluster, job, hour, count, total) "
    "SELECT org_id, cluster, job, {hour}, sum(count), sum(total) FROM throughput_rollups "
    "GROUP BY org_id, cluster, job, {hour}"
)


class RollupLoader:
    """Writes rollups as SQLAlchemy stores them (naive UTC text on SQLite, timestamptz on Postgres), on one
    connection kept for the whole load: sqlite3 `executemany` (synchronous=OFF and a large page cache, as a
    bulk load would) or asyncpg `COPY`."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._sqlite: sqlite3.Connection | None = None
        self._postgres: Any = None

    async def open(self) -> None:
        if self.url.startswith("sqlite"):
            self._sqlite = sqlite3.connect(_sqlite_path(self.url), check_same_thread=False)
            self._sqlite.execute("PRAGMA synchronous = OFF")
            self._sqlite.execute("PRAGMA cache_size = -1000000")  # 1 GB: the indexes stay in memory while loading
            self._sqlite.execute(f"DROP INDEX {MINUTE_INDEX}")
        else:
            import asyncpg

            self._postgres = await asyncpg.connect(_asyncpg_dsn(self.url))
            await self._postgres.execute(f"DROP INDEX {MINUTE_INDEX}")

    async def write(self, rows: list[dict[str, Any]]) -> None:
        if self._sqlite is not None:
            values = [_row(r, True) for r in rows]
            columns = ", ".join(ROLLUP_COLUMNS)
            connection = self._sqlite

            def insert() -> None:
                with connection:
                    connection.executemany(
                        f"INSERT INTO throughput_rollups ({columns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", values
                    )

            await asyncio.to_thread(insert)  # while Postgres copies, if it is loaded too
        else:
            records = [_row(r, False) for r in rows]
            await self._postgres.copy_records_to_table("throughput_rollups", records=records, columns=ROLLUP_COLUMNS)

    async def close(self) -> None:
        """Put the time index back (built once, in order, rather than row by row), fill the hourly rollups
        from the minutes as ingest (storage.crud.add_samples) would have kept them, and close."""
        create = f"CREATE INDEX {MINUTE_INDEX} ON throughput_rollups (minute)"  # as migration 0004 makes it
        if self._sqlite is not None:
            self._sqlite.execute(create)
            with self._sqlite:
                self._sqlite.execute(_HOURLY.format(hour="substr(minute, 1, 13) || ':00:00.000000'"))
            self._sqlite.close()
        else:
            await self._postgres.execute(create)
            await self._postgres.execute(
                _HOURLY.format(hour="date_trunc('hour', minute AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'")
            )
            await self._postgres.execute("VACUUM ANALYZE")  # what autovacuum does after a bulk load
            await self._postgres.close()


async def fresh_postgres(base_url: str) -> str:
    """Drop and create BENCH_DATABASE on the server of `base_url`; its URL."""
    import asyncpg

    connection = await asyncpg.connect(_asyncpg_dsn(base_url))
    try:
        await connection.execute(f'DROP DATABASE IF EXISTS "{BENCH_DATABASE}" WITH (FORCE)')
        await connection.execute(f'CREATE DATABASE "{BENCH_DATABASE}"')
    finally:
        await connection.close()
    return make_url(base_url).set(database=BENCH_DATABASE).render_as_string(hide_password=False)


@dataclasses.dataclass
class Loaded:
    rows: dict[str, int]
    generate_seconds: float
    store_seconds: float  # every database at once


async def load(urls: Sequence[str], program: ProgramConfig, weeks: int) -> Loaded:
    week = digest_of_bench()
    until = POSTED_AT.astimezone(week.start.tzinfo)
    since = week.end - timedelta(weeks=weeks)
    dense_from = previous_week(week).start
    plans = plans_for(program)
    databases = [Database(url=url) for url in urls]
    loaders = [RollupLoader(url) for url in urls]
    for db, loader in zip(databases, loaders, strict=True):
        await db.upgrade()
        await loader.open()
    rows: dict[str, int] = defaultdict(int)
    generating = 0.0
    storing = 0.0
    for batch, start in enumerate(range(0, len(plans), BATCH_ORGS)):
        started = time.perf_counter()
        history = generate_history(
            orgs=plans[start : start + BATCH_ORGS],
            since=since,
            until=until,
            seed=1000 + batch,
            rollup_minutes=DENSE_MINUTES,
            sparse_before=dense_from,
            sparse_minutes=SPARSE_MINUTES,
        )
        generating += time.perf_counter() - started
        for model, table_rows in history.tables():
            rows[model.__name__] += len(table_rows)
        rest = dataclasses.replace(history, rollups=[])

        async def store(db: Database, loader: RollupLoader, history: History = history, rest: History = rest) -> None:
            await store_history(db, rest)
            await loader.write(history.rollups)

        started = time.perf_counter()
        await asyncio.gather(*(store(db, loader) for db, loader in zip(databases, loaders, strict=True)))
        storing += time.perf_counter() - started
        del history, rest
    started = time.perf_counter()
    for db, loader in zip(databases, loaders, strict=True):
        await loader.close()
        await db.dispose()
    return Loaded(dict(rows), generating, storing + time.perf_counter() - started)


# ------------------------------------------------------------------------------------------------ the builds


def rendered(digest: ProgramDigest, program: ProgramConfig) -> int:
    replies = render.digest_summary(digest)
    for section in digest.orgs:
        replies += render.org_digest(section, week=digest.week, program_name=program.name)
    return len(replies)


async def ours(db: Database, program: ProgramConfig, week: Week) -> tuple[ProgramDigest, int]:
    facts = await gather_week(db, program=program, week=week)
    digest = build_digest(program_name=program.name, week=week, facts=facts)
    return digest, rendered(digest, program)


def _medians(rows: Sequence[Any], since: datetime, until: datetime) -> tuple[float | None, int]:
    """The median of hourly means of rows in [since, until), and how many hours there were."""
    hours: dict[datetime, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for row in rows:
        if since <= row.minute < until and row.count > 0:
            bucket = hours[row.minute.replace(minute=0, second=0, microsecond=0)]
            bucket[0] += row.total
            bucket[1] += row.count
    means = [total / count for total, count in hours.values()]
    return (statistics.median(means) if means else None), len(means)


async def naive(db: Database, program: ProgramConfig, week: Week) -> tuple[ProgramDigest, int, int]:
    """The peer; also returns the raw rows it read and the job-hours they make (what Pitcrew's SQL returns)."""
    before = previous_week(week)
    facts = await gather(db, program=program, since=week.start, until=week.end)
    rates: dict[str, list[JobRate]] = defaultdict(list)
    rows_read = hours = 0
    async with db.session() as session:
        for plan in plans_for(program):
            for cluster in plan.clusters:
                for job in cluster.jobs:
                    rows = await crud.rollups(
                        session, org_id=plan.org_id, cluster=cluster.name, job=job, since=before.start, until=week.end
                    )
                    rows_read += len(rows)
                    (this, n_this), (last, n_last) = (
                        _medians(rows, week.start, week.end),
                        _medians(rows, before.start, before.end),
                    )
                    hours += n_this + n_last
                    if this is not None or last is not None:
                        rates[plan.org_id].append(JobRate(plan.org_id, cluster.name, job, this, last))
    facts = [
        dataclasses.replace(f, rates=tuple(sorted(rates[f.org_id], key=lambda r: (r.cluster_name, r.job))))
        for f in facts
    ]
    digest = build_digest(program_name=program.name, week=week, facts=facts)
    rendered(digest, program)
    return digest, rows_read, hours


def charts(digest: ProgramDigest) -> int:
    made = [org_chart(section, digest.week) for section in digest.orgs]
    made.append(program_chart(digest))
    return sum(len(png) for png in made)


def _rates(digest: ProgramDigest) -> dict[tuple[str, str, str], tuple[float | None, float | None]]:
    return {(s.org_id, j.cluster_name, j.job): (j.this_week, j.last_week) for s in digest.orgs for j in s.jobs}


def _same(a: float | None, b: float | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and abs(a - b) <= 1e-6 * max(abs(a), 1.0))


def peak_rss() -> int:
    """This process's peak resident set (VmHWM), in bytes. Not `ru_maxrss`: on Linux a child started with
    vfork+exec (as subprocess starts it) inherits its parent's peak there, here the data generator's."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _rate_rows(digest: ProgramDigest) -> list[list[Any]]:
    return sorted([*key, this, last] for key, (this, last) in _rates(digest).items())


async def _forget_stored_medians(db: Database) -> None:
    """Empty job_week_medians (this tree's table), so the next build is a week's first digest."""
    from sqlalchemy import delete

    from storage.models import JobWeekMedian

    async with db.session() as session:
        await session.exec(delete(JobWeekMedian))
        await session.commit()


async def measure(url: str, orgs: int, side: str, repeat: int, budget: float, trace_max: float) -> dict[str, Any]:
    """One side in this (fresh) process: warm-up, timed runs, peak RSS, one run under tracemalloc.

    "ours" and "previous" are the same build code (`ours`), of this tree or of the previous build's; for
    "ours", one more build after the warm-up is timed apart, on an emptied job_week_medians: the first digest
    of a week, which computes and stores its medians ("cold"). Timed runs stop early (after at least 2) once
    they have taken `budget` seconds in all; the tracemalloc run is left out when a run takes longer than
    `trace_max` seconds."""
    program, week = program_for(orgs), digest_of_bench()  # validating quotas loads botocore's models
    db = Database(url=url)
    baseline = peak_rss()
    digest: ProgramDigest | None = None
    out: dict[str, Any] = {}

    async def run() -> Any:
        if side in ("ours", "previous"):
            return await ours(db, program, week)
        if side == "naive":
            return await naive(db, program, week)
        assert digest is not None
        return charts(digest)

    if side == "charts":
        digest, _ = await ours(db, program, week)
        org_chart(digest.orgs[0], week)  # warm-up: matplotlib's import and fonts
    elif side == "naive":  # warm-up on one org: its cost is in the rows, not in first-call setup
        await naive(db, program.model_copy(update={"orgs": program.orgs[:1]}), week)
    else:
        await run()  # warm-up
    if side == "ours":
        await _forget_stored_medians(db)
        started = time.perf_counter()
        cold = await run()
        out["cold"] = time.perf_counter() - started
        out["cold_rates"] = _rate_rows(cold[0])
    times: list[float] = []
    while len(times) < repeat and (len(times) < 2 or sum(times) < budget):
        started = time.perf_counter()
        result = await run()
        times.append(time.perf_counter() - started)
    rss = peak_rss()
    traced: int | None = None
    if statistics.median(times) <= trace_max:  # tracemalloc slows allocation-heavy code several times over
        tracemalloc.start()
        await run()
        traced = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    out.update({"times": times, "traced_peak": traced, "rss_baseline": baseline, "rss_peak": rss})
    if side == "charts":
        out["png_bytes"] = result
    else:
        digest = result[0]
    assert digest is not None
    if side in ("ours", "previous"):
        out["rates"] = _rate_rows(digest)
    if side == "naive":  # after the measurements: Pitcrew's build, to compare the medians
        _, out["rows_read"], out["hours"] = result
        ours_rates, naive_rates = _rates((await ours(db, program, week))[0]), _rates(digest)
        out["agree"] = ours_rates.keys() == naive_rates.keys() and all(
            _same(a[0], b[0]) and _same(a[1], b[1]) for k, a in ours_rates.items() for b in [naive_rates[k]]
        )
        out["agree"] = out["agree"] and all(this is not None and last is not None for this, last in ours_rates.values())
    out["sections"] = len(digest.orgs)
    out["jobs"] = sum(len(s.jobs) for s in digest.orgs)
    out["records"] = sum(
        len(s.notes) + len(s.milestones) + len(s.incidents_opened) + len(s.lessons) for s in digest.orgs
    )
    out["instance_hours"] = sum(digest.totals.instance_hours_by_type.values())
    await db.dispose()
    return out


def run_side(url: str, orgs: int, side: str, args: argparse.Namespace, tree: Path | None = None) -> dict[str, Any]:
    """One side measured in a fresh process; `tree`: with the previous build's files instead of this tree's."""
    command = [sys.executable, __file__, "--measure", side, "--url", url, "--orgs", str(orgs)]
    command += ["--repeat", str(args.repeat), "--budget", str(args.budget), "--trace-max", str(args.trace_max)]
    if tree is not None:
        command += ["--tree", str(tree)]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"{side} on {url} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["wall"] = time.perf_counter() - started
    return result


# ------------------------------------------------------------------------------------------------ report


def _p50(result: dict[str, Any]) -> float:
    return statistics.median(result["times"])


def _times(result: dict[str, Any]) -> str:
    times = result["times"]
    return f"{_p50(result):.3f} s ({min(times):.3f}-{max(times):.3f}, {len(times)} runs)"


def _mb(value: float) -> str:
    return f"{value / MB:,.0f} MB"


def _traced(result: dict[str, Any]) -> str:
    return "not traced (run too long)" if result["traced_peak"] is None else _mb(result["traced_peak"])


def _ratio(a: float | None, b: float | None, digits: int = 1) -> str:
    return "-" if a is None or b is None else f"x{a / b:.{digits}f}"


def merged(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One side's interleaved processes as one result: every timed build, the largest peaks."""
    traced = [r["traced_peak"] for r in runs if r["traced_peak"] is not None]
    out = dict(runs[-1])
    out["times"] = [t for r in runs for t in r["times"]]
    out["cold"] = [r["cold"] for r in runs if "cold" in r]
    out["traced_peak"] = max(traced) if len(traced) == len(runs) else None
    out["rss_peak"] = max(r["rss_peak"] for r in runs)
    out["rss_baseline"] = max(r["rss_baseline"] for r in runs)
    out["wall"] = sum(r["wall"] for r in runs)
    return out


def _cold(result: dict[str, Any]) -> str:
    cold = result["cold"]
    return f"{statistics.median(cold):.3f} s ({min(cold):.3f}-{max(cold):.3f}, {len(cold)} runs)"


def report_size(label: str, results: dict[str, dict[str, Any]], previous: str) -> None:
    """previous and ours (merged rounds) per database; then naive and charts where they were run."""
    print(f"\n| {label} | build | p50 (min-max, runs) | tracemalloc peak | peak RSS (after setup) |")
    print("|---|---|---|---|---|")
    for database, sides in results.items():
        p, o = sides["previous"], sides["ours"]
        rows = (
            (f"today's build ({previous})", p, _times(p)),
            ("stored week medians", o, _times(o)),
            ("stored week medians, a week's first digest (computes and stores them)", o, _cold(o)),
        )
        for name, r, figure in rows:
            print(
                f"| {database} | {name} | {figure} | {_traced(r)} | {_mb(r['rss_peak'])} ({_mb(r['rss_baseline'])}) |"
            )
        print(f"| {database} | today's / stored | {_ratio(_p50(p), _p50(o))} | | |")
        print(
            f"  ({database}: {o['sections']} org sections, {o['jobs']} job trends, {o['records']} records, "
            f"{o['instance_hours']:,.0f} instance-hours; every build's medians equal today's build's, to the bit: "
            f"{sides['agree']}; measuring processes took {p['wall']:.0f} s and {o['wall']:.0f} s)"
        )
        n = sides.get("naive")
        if n is not None:
            print(
                f"| {database} | naive ({n['rows_read']:,} rollups read, {n['hours']:,} job-hours) | {_times(n)} | "
                f"{_traced(n)} | {_mb(n['rss_peak'])} ({_mb(n['rss_baseline'])}) |"
            )
            print(f"  (naive medians equal Pitcrew's: {n['agree']})")
        c = sides.get("charts")
        if c is not None:
            print(
                f"| charts | {c['sections']} org charts + program chart, {c['png_bytes'] / MB:.1f} MB of PNG | "
                f"{_times(c)} | {_traced(c)} | {_mb(c['rss_peak'])} ({_mb(c['rss_baseline'])}) |"
            )


def extract(commit: str, folder: Path) -> Path:
    """The tree of `commit`, from git (`git archive`), in a folder of its own: the previous build."""
    target = folder / f"previous-{commit}"
    target.mkdir(parents=True, exist_ok=True)
    try:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    except (OSError, subprocess.CalledProcessError) as error:
        raise SystemExit(f"cannot extract the previous build from git ({commit}): {error}") from None
    return target


def measure_database(
    url: str, orgs: int, args: argparse.Namespace, tree: Path, extras: Sequence[str]
) -> dict[str, Any]:
    """`--rounds` rounds, each a process of the previous build and one of this one, in turns (which goes
    first alternates), so that whatever else the machine does falls on both; then the extras."""
    runs: dict[str, list[dict[str, Any]]] = {"previous": [], "ours": []}
    for index in range(args.rounds):
        for side in ("previous", "ours") if index % 2 == 0 else ("ours", "previous"):
            runs[side].append(run_side(url, orgs, side, args, tree if side == "previous" else None))
    reference = runs["previous"][0]["rates"]
    agree = all(r["rates"] == reference for side in runs.values() for r in side) and all(
        r["cold_rates"] == reference for r in runs["ours"]
    )
    result: dict[str, Any] = {side: merged(side_runs) for side, side_runs in runs.items()}
    result["agree"] = agree and all(this is not None and last is not None for *_, this, last in reference)
    for side in extras:
        result[side] = run_side(url, orgs, side, args)
    return result


def machine() -> str:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in line
        ),
        platform.processor(),
    )
    return f"{os.cpu_count()} x {model}, Linux {platform.release()}, Python {platform.python_version()}"


async def prepare(
    label: str, orgs: int, weeks: int, folder: Path, postgres: str | None, keep: bool = False
) -> tuple[list[str], Loaded]:
    """The databases of one workload, loaded; with `keep`, those a run with the same `--keep` folder loaded
    before are used again (the SQLite file and `pitcrew_bench`, which that run left behind)."""
    urls = [f"sqlite+aiosqlite:///{folder / f'digest-{label}.db'}"]
    marker = folder / f"digest-{label}.json"
    if postgres:
        kept = make_url(postgres).set(database=BENCH_DATABASE).render_as_string(hide_password=False)
        urls.append(kept if keep and marker.exists() else await fresh_postgres(postgres))
    if keep and marker.exists() and json.loads(marker.read_text())["urls"] == urls:
        return urls, Loaded(**json.loads(marker.read_text())["loaded"])
    loaded = await load(urls, program_for(orgs), weeks)
    if keep:
        marker.write_text(json.dumps({"urls": urls, "loaded": dataclasses.asdict(loaded)}))
    return urls, loaded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="12x26,100x52", help="ORGSxWEEKS, comma separated")
    parser.add_argument("--repeat", type=int, default=3, help="timed builds per process")
    parser.add_argument("--rounds", type=int, default=3, help="processes per side, the two sides in turns")
    parser.add_argument("--budget", type=float, default=60.0, help="seconds of timed runs per side (at least 2 runs)")
    parser.add_argument(
        "--postgres", help="a Postgres URL (postgresql+asyncpg://...); the bench creates its own database"
    )
    parser.add_argument("--previous", default=PREVIOUS, help="the commit whose build is measured next to this one")
    parser.add_argument("--naive", action="store_true", help="also the naive build (a minute a build at 100 orgs)")
    parser.add_argument("--charts", action="store_true", help="also every chart, on SQLite")
    parser.add_argument("--trace-max", type=float, default=10.0, help="no tracemalloc run when a run takes longer")
    parser.add_argument(
        "--naive-postgres-orgs", type=int, default=12, help="run the naive build on Postgres up to this many orgs"
    )
    parser.add_argument(
        "--keep", help="a folder to keep the loaded databases in, and to use them again from on the next run"
    )
    parser.add_argument("--measure", choices=("ours", "previous", "naive", "charts"), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--orgs", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--tree", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        result = measure(args.url, args.orgs, args.measure, args.repeat, args.budget, args.trace_max)
        print(json.dumps(asyncio.run(result)))
        return

    week = digest_of_bench()
    print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {machine()}; SQLite {sqlite3.sqlite_version}")
    print(
        f"digest week {week.label} ({week.start:%Y-%m-%d %H:%M} - {week.end:%Y-%m-%d %H:%M} UTC), built at "
        f"{POSTED_AT:%a %Y-%m-%d %H:%M} {TZ}; rollups every {DENSE_MINUTES} min for {previous_week(week).label} and "
        f"{week.label} (the weeks the digest reads) and every {SPARSE_MINUTES} min before; today's build "
        f"({args.previous}, from git) and this one in {args.rounds} rounds of a fresh process each, "
        f"{args.repeat} timed builds per process after a warm-up"
    )
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pitcrew-digest-bench-") as tmp:
        tree = extract(args.previous, Path(tmp))
        folder = Path(args.keep) if args.keep else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for size in args.sizes.split(","):
            orgs, weeks = (int(part) for part in size.split("x"))
            label = f"{orgs} orgs x {weeks} weeks"
            urls, loaded = asyncio.run(prepare(size, orgs, weeks, folder, args.postgres, keep=bool(args.keep)))
            rows = ", ".join(f"{name} {count:,}" for name, count in loaded.rows.items())
            where = " and ".join("SQLite" if u.startswith("sqlite") else "Postgres" for u in urls)
            print(f"\n{label}: {rows}")
            print(f"  generated in {loaded.generate_seconds:.0f} s; stored in {where} in {loaded.store_seconds:.0f} s")
            results: dict[str, dict[str, Any]] = {}
            for url in urls:
                database = "SQLite" if url.startswith("sqlite") else "Postgres"
                asyncio.run(Database(url=url).upgrade())  # a kept database loaded before the last migration
                extras = ["naive"] if args.naive else []
                if database == "Postgres" and orgs > args.naive_postgres_orgs:
                    extras = []
                if database == "SQLite" and args.charts:
                    extras.append("charts")
                results[database] = measure_database(url, orgs, args, tree, extras)
            report_size(label, results, args.previous)
    print(f"\nwhole bench: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
