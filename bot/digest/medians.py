"""Each training job's median throughput in a digest week: stored once the week has ended, live while it runs.

A digest compares every job's median of hourly means in its week with the week before. Taking them from the
hourly rollups means reading every job-hour of both weeks (200 k rows at 100 orgs, 2 s of the build); a
finished week's medians are stored instead (`job_week_medians`) and read back as 600 rows: the leader's
digest catch-up stores each week minutes after it ends (`WeeklyDigest.keep_medians`), and a digest stores
any finished week it finds missing (so nothing is backfilled by the migration: a week's bounds are in the
program timezone, which the database does not know, and a digest only ever reads its week and the one before).

A finished week can still change: ingest accepts samples up to `PITCREW_THROUGHPUT_RAW_DAYS` late (a job that
buffered them through an outage). So each stored median keeps the sum of the hourly counts it was computed
from, and a digest compares the stored counts' sum with the week's count now (one number, summed by the
database from an index); only when they differ does it ask for each job's count, and a job whose count
changed, or that is new in the week, is computed again from the hourly rollups and stored again. Counts only
grow (a sample is stored once), so an unchanged count means the same hourly rows, and the stored median is the
one a live computation gives, to the bit.

The week still running is always computed live and never stored.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime

from sqlmodel.ext.asyncio.session import AsyncSession

from bot.digest.facts import Week
from storage import tracking
from storage.tracking import JobKey


def medians_of(rows: Sequence[tuple[str, str, str, float, int]]) -> dict[JobKey, tuple[float, int, int]]:
    """(median of hourly means, hours, samples) per job, from `tracking.hourly_job_rows`."""
    means: dict[JobKey, list[float]] = defaultdict(list)
    samples: dict[JobKey, int] = defaultdict(int)
    for org, cluster, job, mean, count in rows:
        key = (org, cluster, job)
        means[key].append(mean)
        samples[key] += count
    return {key: (statistics.median(values), len(values), samples[key]) for key, values in means.items()}


async def live_medians(session: AsyncSession, *, org_ids: Sequence[str], week: Week) -> dict[JobKey, float]:
    """Computed from the hourly rollups, whatever is stored."""
    rows = await tracking.hourly_job_rows(session, org_ids=org_ids, since=week.start, until=week.end)
    return {key: median for key, (median, _, _) in medians_of(rows).items()}


async def job_medians(
    session: AsyncSession, *, org_ids: Sequence[str], week: Week, now: datetime
) -> dict[JobKey, float]:
    """Each job's median hourly throughput in `week`, for the jobs that reported in it: stored ones where the
    week has ended (`now` at or after its end) and its count is unchanged, the rest computed and stored."""
    if week.end > now:
        return await live_medians(session, org_ids=org_ids, week=week)
    total = await tracking.week_sample_count(session, org_ids=org_ids, since=week.start, until=week.end)
    stored = await tracking.job_week_medians(session, org_ids=org_ids, week_start=week.start, week_end=week.end)
    if sum(row.samples for row in stored) == total:
        # Counts only grow, so the same sum means every stored job's count is unchanged and no job is new.
        return {(row.org_id, row.cluster, row.job): row.median for row in stored}
    medians: dict[JobKey, float] = {}
    stale: Sequence[str] = org_ids
    if stored:  # which jobs changed: the others are kept
        counts = await tracking.job_sample_counts(session, org_ids=org_ids, since=week.start, until=week.end)
        medians = {
            key: row.median
            for row in stored
            for key in [(row.org_id, row.cluster, row.job)]
            if counts.get(key) == row.samples
        }
        stale = sorted({org for org, _, _ in counts.keys() - medians.keys()})
        if not stale:
            return medians
    # Each median is stored with the count of the very rows it was taken from.
    rows = await tracking.hourly_job_rows(session, org_ids=stale, since=week.start, until=week.end)
    fresh = {key: value for key, value in medians_of(rows).items() if key not in medians}
    await tracking.store_job_week_medians(
        session,
        rows=[
            {
                "week_start": week.start,
                "week_end": week.end,
                "org_id": org,
                "cluster": cluster,
                "job": job,
                "median": median,
                "hours": hours,
                "samples": samples,
                "computed_at": now,
            }
            for (org, cluster, job), (median, hours, samples) in sorted(fresh.items())
        ],
    )
    medians.update({key: median for key, (median, _, _) in fresh.items()})
    return medians


async def weeks_medians(
    session: AsyncSession, *, org_ids: Sequence[str], weeks: Sequence[Week], now: datetime
) -> list[dict[JobKey, float]]:
    """`job_medians` of several weeks (a digest's week and the one before), the usual case answered by two
    queries for all of them: the finished weeks' counts, and their stored medians. A week running, or whose
    count changed, goes through `job_medians`."""
    finished = [week for week in weeks if week.end <= now]
    windows = [(week.start, week.end) for week in finished]
    counts = await tracking.window_sample_counts(session, org_ids=org_ids, windows=windows)
    totals = dict(zip(windows, counts, strict=True))
    stored = await tracking.job_week_medians_of(session, org_ids=org_ids, windows=windows) if windows else {}
    answers = []
    for week in weeks:
        rows = stored.get((week.start, week.end))
        if rows is not None and sum(row.samples for row in rows) == totals[(week.start, week.end)]:
            answers.append({(row.org_id, row.cluster, row.job): row.median for row in rows})
        else:
            answers.append(await job_medians(session, org_ids=org_ids, week=week, now=now))
    return answers
