"""Benchmark (not a test): building the weekly digest for a large program, next to a naive build.

The digest reads one week of every org (records, incidents, failures, stalls, cluster changes, the usage
ledger's steps) plus each training job's median throughput this week and the week before. Pitcrew's build is
`gather_week` (a handful of queries for all orgs at once; job medians come from the hourly throughput rollups
that ingest keeps beside the minute ones, filled here from the loaded minutes by migration 0006's statement)
+ `compute.build_digest` + rendering (`render.digest_summary` and `render.org_digest` for every org). Its
cost should grow with one week of events, not with the weeks stored.

The peer, measured on the same database in the same run, is a naive build: the same gather without the
throughput query, then for each (org, cluster, job) every raw rollup row of both weeks through
`storage.crud.rollups`, hourly means and medians taken in Python; then the same compute and rendering. It is
given the list of jobs for free (no query to find them). Both must produce the same medians (checked).

Workloads, generated with `sandbox.history.generate_history` (seeded): 12 orgs x 26 weeks and 100 orgs x
52 weeks. Each org has 3 clusters (HyperPod p5.48xlarge, ParallelCluster p5.48xlarge, HyperPod
trn1.32xlarge, each with its head or controller node) and 2 jobs per cluster: 600 jobs at 100 orgs. The digest
week is the last full week before the posting time (Monday 09:00, Asia/Tokyo).

Throughput density: rollups every 10 minutes for the two weeks the digest reads (the digest week and the
week before it) and hourly before that. Pitcrew writes one rollup per job-minute; a year of per-minute
rollups for 600 jobs is about 300 M rows, which this 2-core machine cannot generate and load in minutes. The
two weeks read are at a tenth of the real density (1.2 M rows instead of 12 M at 100 orgs); the older weeks
are there so that a query which is not bounded by its window shows it (on SQLite the planner serves
`hourly_job_means` from the primary key, org by org, so it does read them).

Storage: a fresh SQLite file, and with `--postgres URL` a database `pitcrew_bench` created (dropped first) on
that server; both are loaded at once. Tables other than the rollups are written with `store_history`
(SQLAlchemy core inserts); the rollups, most of the rows, with sqlite3 `executemany` / asyncpg `COPY` in the
exact form SQLAlchemy stores them, with the time index dropped during the load and created again after it,
then `ANALYZE` on Postgres (as autovacuum would; SQLite is never analyzed by Pitcrew, so not here either).

Measured, each side in a fresh Python process: one warm-up build (the naive one on a single org), then up to
`--repeat` timed builds (median, min, max; fewer, but at least 2, once they have taken `--budget` seconds);
then the process's peak RSS (VmHWM: imports, setup and every build; `ru_maxrss` would report the data
generator's peak, which a child started with vfork+exec inherits); then one more build under tracemalloc (peak
of Python allocations), left out when a build takes over `--trace-max` seconds (tracemalloc multiplies it).
Chart rendering is measured the same way, separately: every org's daily-usage chart and the program chart
(`bot.digest.weekly.org_chart` and `program_chart`, the PNGs the digest posts), on SQLite only (the charts
do not read the database). The naive build runs on Postgres only up to `--naive-postgres-orgs` orgs: its cost
is loading ORM rows, the same on both databases, and at 100 orgs it takes a minute per build.

    .venv/bin/python bench/digest_scale.py [--sizes 12x26,100x52] [--repeat 5] [--postgres URL]
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy.engine import make_url

from bot.config import ProgramConfig
from bot.digest import render
from bot.digest.compute import build_digest
from bot.digest.facts import JobRate, ProgramDigest, Week
from bot.digest.gather import gather, gather_week
from bot.digest.weekly import org_chart, program_chart
from bot.digest.weeks import digest_week, previous_week
from sandbox.history import ClusterPlan, History, OrgPlan, generate_history, store_history
from storage import crud
from storage.db import Database

TZ = ZoneInfo("Asia/Tokyo")
POSTED_AT = datetime(2026, 11, 30, 9, 0, tzinfo=TZ)  # Monday 09:00: the digest of 2026-W48 is due
DENSE_MINUTES = 10
SPARSE_MINUTES = 60
BATCH_ORGS = 4  # orgs generated and stored at a time, so the generator's rows never all sit in memory
BENCH_DATABASE = "pitcrew_bench"
MINUTE_INDEX = "ix_throughput_rollups_minute"
ROLLUP_COLUMNS = ("org_id", "cluster", "job", "minute", "count", "total", "min", "max")
MB = 1024 * 1024


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
            await self._postgres.execute("ANALYZE")  # what autovacuum does after a bulk load
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


async def measure(url: str, orgs: int, side: str, repeat: int, budget: float, trace_max: float) -> dict[str, Any]:
    """One side in this (fresh) process: warm-up, timed runs, peak RSS, one run under tracemalloc.

    Timed runs stop early (after at least 2) once they have taken `budget` seconds in all; the tracemalloc run
    is left out when a run takes longer than `trace_max` seconds."""
    program, week = program_for(orgs), digest_of_bench()  # validating quotas loads botocore's models
    db = Database(url=url)
    baseline = peak_rss()
    digest: ProgramDigest | None = None

    async def run() -> Any:
        if side == "ours":
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
    out: dict[str, Any] = {"times": times, "traced_peak": traced, "rss_baseline": baseline, "rss_peak": rss}
    if side == "charts":
        out["png_bytes"] = result
    else:
        digest = result[0]
    assert digest is not None
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


def run_side(url: str, orgs: int, side: str, args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, __file__, "--measure", side, "--url", url, "--orgs", str(orgs)]
    command += ["--repeat", str(args.repeat), "--budget", str(args.budget), "--trace-max", str(args.trace_max)]
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


def report_size(label: str, results: dict[str, dict[str, dict[str, Any]]]) -> None:
    # Pitcrew's SQL returns one row per job-hour: as many as the naive build's hour buckets (the same data).
    hours = next(sides["naive"]["hours"] for sides in results.values() if "naive" in sides)
    print(f"\n| {label} | side | build p50 (min-max) | tracemalloc peak | peak RSS (after setup) | rows read |")
    print("|---|---|---|---|---|---|")
    for database, sides in results.items():
        o, n = sides["ours"], sides.get("naive")
        o["rows_read"] = hours
        for name, r in (("Pitcrew", o), ("naive", n)):
            if r is None:
                print(f"| {database} | naive | not run (`--naive-postgres-orgs`) | | | |")
                continue
            print(
                f"| {database} | {name} | {_times(r)} | {_traced(r)} | {_mb(r['rss_peak'])} "
                f"({_mb(r['rss_baseline'])}) | {r['rows_read']:,} |"
            )
        agree = "" if n is None else f"; naive medians equal Pitcrew's: {n['agree']}"
        walls = ", ".join(f"{side} {r['wall']:.0f} s" for side, r in sides.items())
        print(
            f"  ({database}: {o['sections']} org sections, {o['jobs']} job trends, {o['records']} records, "
            f"{o['instance_hours']:,.0f} instance-hours{agree}; measuring processes took {walls})"
        )
        if n is None:
            continue
        print(
            f"| {database} | naive / Pitcrew | {_ratio(_p50(n), _p50(o))} | "
            f"{_ratio(n['traced_peak'], o['traced_peak'])} | {_ratio(n['rss_peak'], o['rss_peak'], 2)} | "
            f"{_ratio(n['rows_read'], o['rows_read'])} |"
        )
    if "charts" in results.get("SQLite", {}):
        c = results["SQLite"]["charts"]
        print(
            f"| charts | {c['sections']} org charts + program chart | {_times(c)} | {_traced(c)} | "
            f"{_mb(c['rss_peak'])} ({_mb(c['rss_baseline'])}) | {c['png_bytes'] / MB:.1f} MB of PNG |"
        )


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


async def prepare(label: str, orgs: int, weeks: int, folder: Path, postgres: str | None) -> tuple[list[str], Loaded]:
    urls = [f"sqlite+aiosqlite:///{folder / f'digest-{label}.db'}"]
    if postgres:
        urls.append(await fresh_postgres(postgres))
    loaded = await load(urls, program_for(orgs), weeks)
    return urls, loaded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="12x26,100x52", help="ORGSxWEEKS, comma separated")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--budget", type=float, default=60.0, help="seconds of timed runs per side (at least 2 runs)")
    parser.add_argument(
        "--postgres", help="a Postgres URL (postgresql+asyncpg://...); the bench creates its own database"
    )
    parser.add_argument("--trace-max", type=float, default=10.0, help="no tracemalloc run when a run takes longer")
    parser.add_argument(
        "--naive-postgres-orgs", type=int, default=12, help="run the naive build on Postgres up to this many orgs"
    )
    parser.add_argument("--measure", choices=("ours", "naive", "charts"), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--orgs", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        result = measure(args.url, args.orgs, args.measure, args.repeat, args.budget, args.trace_max)
        print(json.dumps(asyncio.run(result)))
        return

    week = digest_of_bench()
    print(f"{machine()}; SQLite {sqlite3.sqlite_version}")
    print(
        f"digest week {week.label} ({week.start:%Y-%m-%d %H:%M} - {week.end:%Y-%m-%d %H:%M} UTC), built at "
        f"{POSTED_AT:%a %Y-%m-%d %H:%M} {TZ}; rollups every {DENSE_MINUTES} min for {previous_week(week).label} and "
        f"{week.label} (the weeks the digest reads) and every {SPARSE_MINUTES} min before; {args.repeat} timed builds "
        "per side after a warm-up, each side in a fresh process"
    )
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pitcrew-digest-bench-") as tmp:
        for size in args.sizes.split(","):
            orgs, weeks = (int(part) for part in size.split("x"))
            label = f"{orgs} orgs x {weeks} weeks"
            urls, loaded = asyncio.run(prepare(size, orgs, weeks, Path(tmp), args.postgres))
            rows = ", ".join(f"{name} {count:,}" for name, count in loaded.rows.items())
            where = " and ".join("SQLite" if u.startswith("sqlite") else "Postgres" for u in urls)
            print(f"\n{label}: {rows}")
            print(f"  generated in {loaded.generate_seconds:.0f} s; stored in {where} in {loaded.store_seconds:.0f} s")
            results: dict[str, dict[str, dict[str, Any]]] = {}
            for url in urls:
                database = "SQLite" if url.startswith("sqlite") else "Postgres"
                sides = ["ours", "naive", "charts"] if database == "SQLite" else ["ours", "naive"]
                if database == "Postgres" and orgs > args.naive_postgres_orgs:
                    sides.remove("naive")
                results[database] = {side: run_side(url, orgs, side, args) for side in sides}
            report_size(label, results)
    print(f"\nwhole bench: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
