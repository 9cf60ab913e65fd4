"""The throughput monitor: every minute (on the leader), each active training job's recent samples go
through its detector (bot.monitor.throughput, pure), and what it says is handed to the alert desk
(bot.alerts.desk) as a job episode: opened once, posted (with a chart in its thread here), closed when
throughput is back.

The detector is rebuilt from the stored samples at each check, so a restarted bot, or a new leader, knows
exactly what the old one knew.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from bot.alerts.desk import AlertDesk
from bot.alerts.kind import Tone
from bot.alerts.kinds import job as job_kind
from bot.config import ProgramConfig
from bot.monitor.throughput import Anomaly, JobDetector, Sample, Thresholds
from bot.slack import charts
from bot.slack.blocks import when
from storage import crud
from storage.models import Episode, EpisodeKind, ThroughputSample

log = logging.getLogger(__name__)

WINDOW = timedelta(hours=3)  # samples replayed through the detector at each check
CHART_WINDOW = timedelta(hours=6)
CAUSE_WINDOW = timedelta(minutes=30)  # a node failure this close before the anomaly is its likely cause
PRUNE_EVERY = timedelta(hours=1)
BASELINE_BEFORE = timedelta(hours=1)  # replayed before an open anomaly, so its baseline does not age out
LONGEST_REPLAY = timedelta(hours=48)


def thresholds_for(program: ProgramConfig, org_id: str) -> Thresholds:
    org = program.org(org_id)
    config = org.stall if org is not None and org.stall is not None else program.stall
    return Thresholds(
        stall_after=timedelta(minutes=config.stall_after_minutes),
        drop_ratio=config.drop_ratio,
        sustain=timedelta(minutes=config.sustain_minutes),
    )


def sample_of(row: ThroughputSample) -> Sample:
    value = row.tokens_per_second if row.tokens_per_second is not None else row.samples_per_second
    return Sample(ts=row.ts, value=value, event=row.event)


def _advance(detector: JobDetector, until: datetime) -> list[Anomaly]:
    """Time passes to `until`, stopping at the detector's own deadlines so a stall is dated when it could
    first be told (last good sample + stall_after), not at the next sample. The anomalies that ended."""
    ended = []
    for _ in range(4):  # a deadline reached opens the stall; the next one, if any, is later
        deadline = detector.next_deadline
        if deadline is None or deadline > until:
            break
        ended += detector.advance(deadline)
    return ended + detector.advance(until)


def run_detector(
    rows: Sequence[ThroughputSample], thresholds: Thresholds, now: datetime, *, ended: list[Anomaly] | None = None
) -> JobDetector:
    """The detector after `rows` and time up to `now`; `ended` collects the anomalies that ended meanwhile."""
    detector = JobDetector(thresholds)
    gone: list[Anomaly] = []
    for row in rows:
        gone += _advance(detector, row.ts)
        gone += detector.observe(sample_of(row))
    gone += _advance(detector, now)
    if ended is not None:
        ended.extend(a for a in gone if a.end is not None)
    return detector


def failed_node_text(episode: Episode, *, since: datetime, tz: ZoneInfo) -> str:
    """The node that failed, named as it was when it failed: the one that opened the episode, at its opening
    (a later replacement did not exist then), or, for a failure again since `since`, the node of that."""
    failing_since = episode.failing_since or episode.opened_at
    if episode.reopened and failing_since >= since and episode.node_ids:
        return f"`{episode.node_ids[-1]}` (failed again at {when(failing_since, tz)})"
    first = episode.node_ids[0] if episode.node_ids else episode.node_key
    later = f", replaced by `{episode.node_ids[-1]}`" if len(episode.node_ids) > 1 else ""
    return f"`{first}` (failed at {when(episode.opened_at, tz)}{later})"


def unit_of(rows: Sequence[ThroughputSample]) -> str:
    return "samples/s" if rows and all(r.tokens_per_second is None for r in rows if r.event is None) else "tokens/s"


@dataclass(frozen=True)
class JobSummary:
    org: str
    job: str
    unit: str
    last: datetime
    current: float | None  # the latest value (None when the job only sent events)
    baseline: float | None
    threshold: float | None
    state: str  # "healthy", "warming up", "ended", "stall" or "slowdown"
    since: datetime | None  # when the anomaly began


class ThroughputMonitor:
    def __init__(self, *, desk: AlertDesk, keep_raw: timedelta = timedelta(days=14)) -> None:
        self._desk = desk
        self._keep_raw = keep_raw
        self._pruned_at: datetime | None = None

    async def check(self) -> int:
        """Every active job (a sample within WINDOW, or an open episode) against its detector; how many
        episodes opened or closed."""
        now = self._desk.clock()
        if self._pruned_at is None or now - self._pruned_at >= PRUNE_EVERY:
            async with self._desk.db.session() as session:  # raw samples age out; minute rollups stay
                await crud.prune_samples(session, before=now - self._keep_raw)
            self._pruned_at = now
        async with self._desk.db.session() as session:
            jobs = set(await crud.active_jobs(session, since=now - WINDOW))
            open_rows = [r for r in await crud.open_episodes(session) if r.kind == job_kind.KIND.name]
        by_job = {(r.org_id, r.cluster_name, r.node_key): r for r in open_rows}
        await self._desk.retry_unposted(open_rows)  # Slack failed the first time: post them now
        changed = 0
        for org_id, cluster, job in sorted(jobs | set(by_job)):
            try:
                changed += await self._check_job(org_id, cluster, job, by_job.get((org_id, cluster, job)), now)
            except Exception:
                log.exception("throughput check of %s/%s %s failed", org_id, cluster, job)
        return changed

    async def summary(self, org_ids: Sequence[str], cluster: str, *, hours: float, now: datetime) -> list[JobSummary]:
        """Each job of `cluster` in those orgs that sent samples in the last `hours`, as its detector sees it."""
        found = []
        for org_id in org_ids:
            rows = await self.samples(org_id, cluster, None, since=now - timedelta(hours=hours), until=now)
            by_job: dict[str, list[ThroughputSample]] = {}
            for row in rows:
                by_job.setdefault(row.job, []).append(row)
            for job, job_rows in sorted(by_job.items()):
                detector = run_detector(job_rows, thresholds_for(self._desk.program, org_id), now)
                values = [sample_of(r).value for r in job_rows if r.event is None]
                anomaly = detector.current
                if anomaly is not None:
                    state = anomaly.kind
                elif not detector.active:
                    state = "ended"
                elif detector.baseline is None:
                    state = "warming up"
                else:
                    state = "healthy"
                found.append(
                    JobSummary(
                        org=org_id,
                        job=job,
                        unit=unit_of(job_rows),
                        last=job_rows[-1].ts,
                        current=values[-1] if values else None,
                        baseline=detector.baseline,
                        threshold=detector.threshold,
                        state=state,
                        since=anomaly.start if anomaly else None,
                    )
                )
        return found

    async def samples(
        self, org_id: str, cluster: str, job: str | None, *, since: datetime, until: datetime
    ) -> list[ThroughputSample]:
        async with self._desk.db.session() as session:
            return list(await crud.samples(session, org_id=org_id, cluster=cluster, job=job, since=since, until=until))

    async def _check_job(self, org_id: str, cluster: str, job: str, row: Episode | None, now: datetime) -> int:
        since = now - WINDOW
        if row is not None:  # an open anomaly is judged against the healthy hour before it, however long it lasts
            since = max(min(since, (row.failing_since or row.opened_at) - BASELINE_BEFORE), now - LONGEST_REPLAY)
        rows = await self.samples(org_id, cluster, job, since=since, until=now + timedelta(minutes=5))
        if not rows:
            return 0  # silent for longer than the window: an open stall stays open until throughput is back
        ended: list[Anomaly] = []
        detector = run_detector(rows, thresholds_for(self._desk.program, org_id), now, ended=ended)
        current = detector.current
        if current is None:
            if row is not None and detector.baseline is not None:  # no baseline: no verdict, nothing closes
                await self._close(row, detector, rows, now, note="throughput is back", ended=ended[-1:])
                return 1
            return 0
        if row is not None and row.status == current.kind:
            return 0
        if row is not None:  # a slowdown became a hang (or back): the same episode, not a recovery
            cause = await self._likely_cause(org_id, cluster, current.start, now)
            message = f"{self._figures(detector, current, unit_of(rows))} Now a {current.kind}. {cause}"
            await self._desk.update(row, {"status": current.kind, "message": message[:1000], "updated_at": now})
            if not row.silenced:  # the edit keeps saying the cluster is silenced, and its button
                silence = await self._desk.silence_for(org_id, row.backend, cluster)
                note = f"It is now a {current.kind}: {message}"
                await self._desk.note(row, note, cluster=None, silence=silence, tone=Tone.WORSE, coordination=False)
            return 1
        await self._open(org_id, cluster, job, current, detector, rows, now)
        return 1

    def _figures(self, detector: JobDetector, anomaly: Anomaly | None, unit: str) -> str:
        baseline = detector.baseline
        parts = []
        if anomaly is not None:
            parts.append(f"Now {anomaly.current:,.0f} {unit}")
        if baseline is not None:
            parts.append(f"baseline {baseline:,.0f} {unit}")
        if detector.threshold is not None:
            lasting = detector.allowance_level
            # Two rules: far below at once (the threshold), or a little below for long (the CUSUM's level).
            also = f", or below {lasting:,.0f} for long" if lasting is not None else ""
            parts.append(f"slowdown threshold {detector.threshold:,.0f}{also}")
        return ", ".join(parts) + "." if parts else ""

    async def _likely_cause(self, org_id: str, cluster: str, since: datetime, now: datetime) -> str:
        """Node failures of the same cluster in the same window: the usual cause of a hang or straggler."""
        async with self._desk.db.session() as session:
            episodes = await crud.episodes_between(session, org_id=org_id, since=since - CAUSE_WINDOW, until=now)
            current = await crud.open_episodes(session, org_id=org_id)
        seen = {e.id: e for e in [*episodes, *current]}.values()
        nodes = [e for e in seen if e.cluster_name == cluster and e.kind == EpisodeKind.NODE.value]
        if not nodes:
            return "No node of this cluster failed in the same window."
        listed = ", ".join(failed_node_text(e, since=since - CAUSE_WINDOW, tz=self._desk.tz) for e in nodes[:5])
        return f"Likely cause: node failure in the same window: {listed}."

    async def _open(
        self,
        org_id: str,
        cluster: str,
        job: str,
        anomaly: Anomaly,
        detector: JobDetector,
        rows: Sequence[ThroughputSample],
        now: datetime,
    ) -> None:
        unit = unit_of(rows)
        message = (
            f"{self._figures(detector, anomaly, unit)} {await self._likely_cause(org_id, cluster, anomaly.start, now)}"
        )
        row = await self._desk.open(
            Episode(
                org_id=org_id,
                backend=job_kind.SOURCE,
                cluster_name=cluster,
                node_key=job,
                kind=job_kind.KIND.name,
                state="open",
                node_ids=[],
                status=anomaly.kind,
                message=message[:1000],
                opened_at=now,
                failing_since=anomaly.start,
                updated_at=now,
            )
        )
        if row is None or not row.channel_id:
            return  # another replica opened it, and posts it
        await self._desk.announce([row], silence=await self._desk.silence_for(org_id, row.backend, cluster))
        if row.message_ts and not row.silenced:
            await self._chart(row, now, thread_ts=row.message_ts, anomaly=anomaly)

    async def _close(
        self,
        row: Episode,
        detector: JobDetector,
        rows: Sequence[ThroughputSample],
        now: datetime,
        *,
        note: str,
        ended: Sequence[Anomaly] = (),
    ) -> None:
        message = await self._recovered(row, detector, rows, now)
        if not await self._desk.close(row, {"closed_at": now, "updated_at": now, "message": message[:1000]}):
            return
        row.message = message[:1000]
        if row.silenced:
            return
        figures = self._figures(detector, None, unit_of(rows))
        silence = await self._desk.silence_for(row.org_id, row.backend, row.cluster_name)
        text = f"{note}. {figures}".strip()
        await self._desk.note(row, text, cluster=None, silence=silence, tone=Tone.RECOVERED)
        if row.message_ts and ended:  # the whole anomaly, start to end, zoomed in when it was short
            await self._chart(row, now, thread_ts=row.message_ts, anomaly=ended[-1])

    async def _recovered(
        self, row: Episode, detector: JobDetector, rows: Sequence[ThroughputSample], now: datetime
    ) -> str:
        """The alert's figures once throughput is back: the rate now, not the rate during the anomaly."""
        unit = unit_of(rows)
        since = row.failing_since or row.opened_at
        values = [(r.ts, v) for r in rows if r.event is None and (v := sample_of(r).value) is not None]
        parts = []
        if values:
            ts, last = values[-1]
            parts.append(f"Back to {last:,.0f} {unit} at {when(ts, self._desk.tz)}")
        if detector.baseline is not None:
            parts.append(f"baseline {detector.baseline:,.0f} {unit}")
        during = [v for t, v in values if since <= t < (values[-1][0] if values else now)]
        worst = min(during) if during else 0.0  # a hang has no samples at all: nothing went through
        text = ", ".join(parts) + "." if parts else ""
        text += f" At its worst {worst:,.0f} {unit}."
        return f"{text} {await self._likely_cause(row.org_id, row.cluster_name, since, now)}".strip()

    async def chart(
        self, org_id: str, cluster: str, job: str | None, *, hours: float, now: datetime, anomaly: Anomaly | None = None
    ) -> bytes:
        """The last `hours` of a cluster's jobs (or one job): throughput, and for one job its baseline,
        threshold and anomaly."""
        since = now - timedelta(hours=hours)
        zoom = None
        if job is not None and anomaly is not None:
            zoom = charts.zoom_for(charts.Band(anomaly.start, anomaly.end, anomaly.kind), since=since, until=now)
        rows = await self.samples(org_id, cluster, job, since=min(since, zoom.since) if zoom else since, until=now)
        by_job: dict[str, list[ThroughputSample]] = {}
        for row in rows:
            by_job.setdefault(row.job, []).append(row)
        series = [
            charts.Series(label=name, points=[(r.ts, sample_of(r).value) for r in job_rows if r.event is None])
            for name, job_rows in sorted(by_job.items())
        ]
        baseline = threshold = None
        bands = []
        if job is not None and job in by_job:
            detector = run_detector(by_job[job], thresholds_for(self._desk.program, org_id), now)
            baseline, threshold = detector.baseline, detector.threshold
            shown = anomaly or detector.current
            if shown is not None:
                bands.append(charts.Band(start=shown.start, end=shown.end, label=shown.kind))
        title = f"{org_id}/{cluster}" + (f" · {job}" if job else "") + f" · last {hours:g} h"
        # Rendering takes a tenth of a second (more for the first chart of a process): off the event loop.
        return await asyncio.to_thread(
            charts.throughput_chart,
            title=title,
            series=series,
            baseline=baseline,
            threshold=threshold,
            bands=bands,
            since=since,
            until=now,
            tz=self._desk.tz,
            unit=unit_of(rows),
            zoom=zoom,
        )

    async def _chart(self, row: Episode, now: datetime, *, thread_ts: str, anomaly: Anomaly) -> None:
        hours = CHART_WINDOW.total_seconds() / 3600
        png = await self.chart(row.org_id, row.cluster_name, row.node_key, hours=hours, now=now, anomaly=anomaly)
        what = "until it recovered" if anomaly.end is not None else "last 6 h"
        await self._desk.upload(
            row.channel_id,
            filename=f"{row.cluster_name}-{row.node_key}-throughput.png".replace("/", "-"),
            content=png,
            title=f"{row.node_key}: throughput, baseline and threshold, {what}",
            thread_ts=thread_ts,
        )
