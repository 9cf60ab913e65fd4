"""The throughput monitor: every minute (on the leader), each active training job's recent samples go
through its detector (bot.monitor.throughput, pure), and what it says is handed to the alert desk
(bot.alerts.desk) as a job episode: opened once, posted (with a chart in its thread here), closed when
throughput is back.

The detector is rebuilt from the stored samples at each check, so a restarted bot, or a new leader, knows
exactly what the old one knew.

The culprit: for an org with per-node metrics (`orgs[].metrics`), each open episode's cluster is compared
node by node with its peers (bot.node_metrics.culprit.find_culprit) over [failing_since - HEALTHY_BEFORE,
now], when it opens and at each later check. The episode stores the verdict's `cause` and `suspects`, its
message says it in one line with the evidence, and when the verdict changes the alert is edited and its
thread told; the first time a node is named, a chart of its signal against its peers' median goes in the
thread, and on HyperPod the alert's Replace/Reboot buttons act on it (Episode.node_ids). Metrics that cannot
be read are said in one line instead. Each cluster is read once per check (bot.monitor.metrics_reads),
shared by its job episodes and the faulty-node check (bot.monitor.faulty), which runs after the jobs.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from bot.alerts.desk import AlertDesk
from bot.alerts.kind import Tone
from bot.alerts.kinds import degradation as degradation_kind
from bot.alerts.kinds import faulty as faulty_kind
from bot.alerts.kinds import job as job_kind
from bot.clusters.model import Backend
from bot.config import ProgramConfig
from bot.monitor.faulty import FaultyNodeMonitor, upload_peer_chart
from bot.monitor.metrics_reads import MetricsReader, MetricsReads, ReadFailed
from bot.monitor.throughput import DEGRADATION, NEAR_ZERO_RATIO, Anomaly, JobDetector, Sample, Thresholds
from bot.mrkdwn import escape, when
from bot.node_metrics.culprit import HEALTHY_BEFORE, find_culprit
from bot.node_metrics.series import Cause, ClusterMetrics, Verdict
from bot.plots import Band, Series, ThroughputChart, zoom_for
from storage import crud
from storage.models import Episode, EpisodeKind, ThroughputSample

log = logging.getLogger(__name__)

WINDOW = timedelta(hours=3)  # samples replayed through the detector at each check
CHART_WINDOW = timedelta(hours=6)
CAUSE_WINDOW = timedelta(minutes=30)  # a node failure this close before the anomaly is its likely cause
SEEN_LATE = timedelta(minutes=5)  # a node failure is seen this long after it happened (the sweep, AWS's checks)
PRUNE_EVERY = timedelta(hours=1)
BASELINE_BEFORE = timedelta(hours=1)  # replayed before an open anomaly, so its baseline does not age out
LONGEST_REPLAY = timedelta(hours=48)  # how far back a detector is rebuilt when the monitor holds no state for it
SETTLED = timedelta(minutes=5)  # rows this old are taken as final: the detector's state after them is kept
# An episode's culprit is re-assessed while it is younger than this: each check reads its whole window and
# the healthy hour before it, so a two-day hang would read two days a minute. An older one keeps its verdict.
CULPRIT_FOR = timedelta(hours=3)


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
    return Sample(ts=row.ts, value=value, event=row.event, nodes=row.nodes)


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


@dataclass(frozen=True)
class Resume:
    """A job's detector after every stored row up to `through`, kept from one check to the next so a check feeds
    only the new rows and the baseline stays anchored to the run's `start`, however long ago (the window of
    samples a check reads would otherwise let a decline slower than it drag the baseline down)."""

    thresholds: Thresholds
    detector: JobDetector
    through: datetime


def resume_detector(
    rows: Sequence[ThroughputSample],
    thresholds: Thresholds,
    now: datetime,
    *,
    resume: Resume | None,
    ended: list[Anomaly] | None = None,
) -> tuple[JobDetector, Resume | None]:
    """`run_detector` from `resume` on (the rows it has seen are skipped), and what to keep for the next check:
    the state after the rows older than `now` - SETTLED (a row delivered later than that is not seen)."""
    if resume is not None and resume.thresholds != thresholds:
        resume = None  # the org's thresholds changed: rebuild
    detector = resume.detector.snapshot() if resume is not None else JobDetector(thresholds)
    fresh = [r for r in rows if resume is None or r.ts > resume.through]
    settled = bisect.bisect_right([r.ts for r in fresh], now - SETTLED)
    gone: list[Anomaly] = []
    for row in fresh[:settled]:
        gone += _advance(detector, row.ts)
        gone += detector.observe(sample_of(row))
    keep = (
        Resume(thresholds=thresholds, detector=detector.snapshot(), through=fresh[settled - 1].ts)
        if settled
        else resume
    )
    for row in fresh[settled:]:
        gone += _advance(detector, row.ts)
        gone += detector.observe(sample_of(row))
    gone += _advance(detector, now)
    if ended is not None:
        ended.extend(a for a in gone if a.end is not None)
    return detector, keep


def failed_node_text(episode: Episode, *, since: datetime, tz: ZoneInfo) -> str:
    """The node that failed, named as it was when it failed: the one that opened the episode, at its opening
    (a later replacement did not exist then), or, for a failure again since `since`, the node of that."""
    failing_since = episode.failing_since or episode.opened_at
    if episode.reopened and failing_since >= since and episode.node_ids:
        return f"`{episode.node_ids[-1]}` (failed again at {when(failing_since, tz)})"
    first = episode.node_ids[0] if episode.node_ids else episode.node_key
    later = f", replaced by `{episode.node_ids[-1]}`" if len(episode.node_ids) > 1 else ""
    return f"`{first}` (failed at {when(episode.opened_at, tz)}{later})"


def under_way_at(failure: Episode, start: datetime) -> bool:
    """Pure: whether a node failure was under way when a job's anomaly began, so it may be why: it began (or
    began again) at most CAUSE_WINDOW before the start, or was seen at most SEEN_LATE after it, and had not
    ended by then. A node that failed and was replaced before the job slowed is not why it slowed, nor one
    failed for hours that the job ran without."""
    began = failure.failing_since or failure.opened_at
    ended = failure.closed_at is not None and failure.closed_at < start
    return start - CAUSE_WINDOW <= began <= start + SEEN_LATE and not ended


def cause_line(verdict: str, *, names_cause: bool, failed: Sequence[str]) -> str:
    """Pure: the alert's one line on the cause. The per-node metrics' verdict comes first: they compare the
    nodes over the anomaly itself. A node failure under way when it began is offered after it; without a
    verdict naming a cause, that failure is the likely cause. `verdict`: what the metrics said ("" when
    nothing); `names_cause`: whether it names a node or a cause; `failed`: the failures, as the alert names
    them."""
    listed = ", ".join(failed)
    if names_cause:
        return f"{verdict} A node also failed as it began: {listed}." if failed else verdict
    if failed:
        return f"Likely cause: a node failed as it began: {listed}." + (f" {verdict}" if verdict else "")
    return "No node of this cluster failed as it began." + (f" {verdict}" if verdict else "")


def culprit_text(verdict: Verdict) -> str:
    """The verdict of the per-node metrics in one line, as the job alert says it."""
    evidence = verdict.evidence
    if verdict.suspects:
        named = f"Likely culprit: `{verdict.suspects[0]}`" + (f", {evidence}" if evidence else "")
        then = ", ".join(f"`{node}`" for node in verdict.suspects[1:4])
        return f"{named} ({verdict.cause.value})" + (f"; then {then}" if then else "") + "."
    if verdict.cause is Cause.INPUT:
        waits = f" ({evidence})" if evidence else ""
        return f"Likely cause: input: every node waits alike{waits}: data loading or storage."
    if verdict.cause is Cause.UNKNOWN:
        return "Per-node metrics name no single node."
    return f"Likely cause: {verdict.cause.value}" + (f" ({evidence})" if evidence else "") + ", on no single node."


def named_text(cause: str, suspects: Sequence[str]) -> str:
    """What the per-node metrics said, from the episode's columns alone (the evidence is not stored): for
    the alert once it is closed, or when the metrics cannot be read now."""
    if not cause:
        return ""
    if suspects:
        return f"Per-node metrics named `{suspects[0]}` ({cause})."
    if cause == Cause.INPUT.value:
        return "Per-node metrics: every node waited alike (input: data loading or storage)."
    return "Per-node metrics named no single node."


def unreadable_text(failed: ReadFailed) -> str:
    return f"Per-node metrics could not be read: {failed.reason}"


def degradation_text(anomaly: Anomaly, unit: str, now: datetime) -> str:
    """Pure: a degradation notice's figures, in whole percent and whole hours (so its edits are few): how far
    below its level the job runs and for how long."""
    below = 100 * (1 - anomaly.current / anomaly.baseline) if anomaly.baseline > 0 else 0.0
    hours = int((now - anomaly.start) / timedelta(hours=1))
    return (
        f"Down {below:.0f} % for {hours} h or more: about {anomaly.current:,.0f} {unit} against "
        f"{anomaly.baseline:,.0f} {unit} in the 2 hours before. Low urgency: a lasting loss, not a failure."
    )


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


@dataclass(frozen=True)
class Judged:
    """A job as its detector sees it at this check, before anything is done about it."""

    org_id: str
    cluster: str
    job: str
    row: Episode | None  # its open episode
    rows: Sequence[ThroughputSample]
    detector: JobDetector
    ended: Sequence[Anomaly]
    notice: Episode | None = None  # its open degradation notice

    @property
    def since(self) -> datetime | None:
        """When its anomaly began (the episode's, if open); None when it has none now."""
        current = self.detector.current
        if current is None:
            return None
        row = self.notice if current.kind == DEGRADATION else self.row
        return (row.failing_since or row.opened_at) if row is not None else current.start


Assessed = Verdict | ReadFailed | None  # the culprit; why it is not known; None when the org has no metrics


class ThroughputMonitor:
    def __init__(
        self,
        *,
        desk: AlertDesk,
        keep_raw: timedelta = timedelta(days=14),
        readers: Mapping[str, MetricsReader] | None = None,
        faulty: FaultyNodeMonitor | None = None,
    ) -> None:
        """`readers`: the per-node metrics of each org that has them (org id -> reader); `faulty`: the
        faulty-node check, run after the jobs at each check, on the same reads."""
        self._desk = desk
        self._keep_raw = keep_raw
        self._readers: Mapping[str, MetricsReader] = readers or {}
        self._faulty = faulty
        self._pruned_at: datetime | None = None
        self._resume: dict[tuple[str, str, str], Resume] = {}  # each job's detector as of its last settled row
        self.last_reads: MetricsReads | None = None  # the last check's reads (tests bound them)

    async def aclose(self) -> None:
        for reader in self._readers.values():
            await reader.aclose()

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
            opened = await crud.open_episodes(session)
        open_rows = [r for r in opened if r.kind == job_kind.KIND.name]
        notices = [r for r in opened if r.kind == degradation_kind.NAME]
        by_job = {(r.org_id, r.cluster_name, r.node_key): r for r in open_rows}
        by_notice = {(r.org_id, r.cluster_name, r.node_key): r for r in notices}
        await self._desk.retry_unposted([*open_rows, *notices])  # Slack failed the first time: post them now
        judged: list[Judged] = []
        checked = jobs | set(by_job) | set(by_notice)
        self._resume = {key: kept for key, kept in self._resume.items() if key in checked}  # jobs gone quiet
        for org_id, cluster, job in sorted(checked):
            try:
                key = (org_id, cluster, job)
                found = await self._judge(org_id, cluster, job, by_job.get(key), now, notice=by_notice.get(key))
            except Exception:
                log.exception("throughput check of %s/%s %s failed", org_id, cluster, job)
                continue
            if found is not None:
                judged.append(found)
        # Every cluster's per-node metrics are read once for this check, over what all of its users need.
        reads = self.last_reads = MetricsReads(readers=self._readers, end=now)
        for one in judged:
            if one.since is not None and now - one.since <= CULPRIT_FOR:
                reads.want(one.org_id, one.cluster, start=one.since - HEALTHY_BEFORE)
        faulty = self._faulty
        watched = await faulty.watched(self._readers.keys()) if faulty is not None and self._readers else []
        if faulty is not None:
            for seen in watched:
                reads.want(seen.org_id, seen.name, start=faulty.read_start(now))
        await reads.read_wanted()
        changed = 0
        for one in judged:
            try:
                changed += await self._act(one, reads, now)
            except Exception:
                log.exception("throughput check of %s/%s %s failed", one.org_id, one.cluster, one.job)
        if faulty is not None:  # with nothing watched, it only closes what is left open (metrics unconfigured)
            try:
                changed += await faulty.check(watched, reads, now=now)
            except Exception:
                log.exception("faulty-node check failed")
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

    async def _judge(
        self, org_id: str, cluster: str, job: str, row: Episode | None, now: datetime, *, notice: Episode | None = None
    ) -> Judged | None:
        since = now - WINDOW
        if row is not None:  # an open anomaly is judged against the healthy hour before it, however long it lasts
            since = max(min(since, (row.failing_since or row.opened_at) - BASELINE_BEFORE), now - LONGEST_REPLAY)
        rows = await self.samples(org_id, cluster, job, since=since, until=now + timedelta(minutes=5))
        if not rows:
            return None  # silent for longer than the window: an open stall stays open until throughput is back
        key = (org_id, cluster, job)
        resume = self._resume.get(key)
        until = now + timedelta(minutes=5)
        if resume is None or resume.through < now - LONGEST_REPLAY:  # a new leader, or a job back after long
            resume = None
            history = await self.samples(org_id, cluster, job, since=now - LONGEST_REPLAY, until=until)
        elif resume.through < since:
            history = await self.samples(org_id, cluster, job, since=resume.through, until=until)
        else:
            history = rows
        ended: list[Anomaly] = []
        thresholds = thresholds_for(self._desk.program, org_id)
        detector, kept = resume_detector(history, thresholds, now, resume=resume, ended=ended)
        if kept is not None:
            self._resume[key] = kept
        return Judged(org_id, cluster, job, row, rows, detector, ended, notice)

    async def _act(self, judged: Judged, reads: MetricsReads, now: datetime) -> int:
        row, detector, rows = judged.row, judged.detector, judged.rows
        current = detector.current
        degraded = current if current is not None and current.kind == DEGRADATION else None
        # A degradation is a low-urgency notice of its own, not a job alert; one a slowdown took over is closed
        # (saying so) before the slowdown's alert opens.
        changed = await self._notice(judged, degraded, reads, now)
        if degraded is not None:
            current = None
        if current is None:
            if row is not None and detector.baseline is not None:  # no baseline: no verdict, nothing closes
                await self._close(row, detector, rows, now, note="throughput is back", ended=judged.ended[-1:])
                return changed + 1
            return changed
        verdict = await self._assess(judged, reads, now)
        if row is None:
            await self._open(judged.org_id, judged.cluster, judged.job, current, detector, rows, now, verdict)
            return changed + 1
        new_kind = row.status != current.kind
        # A new verdict is a new cause or a new first suspect; the order of the others may shift from one
        # minute to the next, and is not worth an edit and a note each time.
        new_verdict = isinstance(verdict, Verdict) and (verdict.cause.value, list(verdict.suspects[:1])) != (
            row.cause,
            list(row.suspects[:1]),
        )
        if not new_kind and not new_verdict:
            return 0
        first_named = isinstance(verdict, Verdict) and bool(verdict.suspects) and not row.suspects
        new_first = isinstance(verdict, Verdict) and verdict.suspects[:1] != tuple(row.suspects[:1])
        values: dict[str, object] = {"updated_at": now}
        if new_kind:
            values["status"] = current.kind
        if isinstance(verdict, Verdict) and new_verdict:
            values.update(await self._verdict_values(row.org_id, row.cluster_name, verdict))
        culprit = self._culprit_line(verdict, row)
        cause = await self._cause(row.org_id, row.cluster_name, current.start, now, verdict=verdict, row=row)
        # A slowdown that became a hang (or back) is the same episode, not a recovery.
        now_a = f" Now a {current.kind}." if new_kind else ""
        message = f"{self._figures(detector, current, unit_of(rows))}{now_a}\n{cause}".strip()
        values["message"] = message[:1000]
        await self._desk.update(row, values)
        if row.silenced and new_kind:
            # Held back by a silence, and now worse (a slowdown that hung, or back): while the silence lasts,
            # one more line in its thread; once it has ended, the alert it now is, as a new episode's would be,
            # posted under the same claim as a release, so an Unsilence pressed meanwhile does not post it too.
            silence = await self._desk.silence_for(row.org_id, row.backend, row.cluster_name)
            if silence is not None:
                await self._desk.announce([row], silence=silence)
                return 1
            if await self._desk.claim_held(row):
                await self._desk.announce([row], silence=None)
                if row.message_ts:
                    await self._chart(row, now, thread_ts=row.message_ts, anomaly=current)
                return 1
            row = await self._desk.reread(row)  # released a moment ago by someone else: its alert is edited below
        if not row.silenced:  # the edit keeps saying the cluster is silenced, and its button
            silence = await self._desk.silence_for(row.org_id, row.backend, row.cluster_name)
            if new_kind:
                note, tone = f"It is now a {current.kind}: {message}", Tone.WORSE
            else:
                said = culprit if culprit.startswith("Per-node metrics") else f"Per-node metrics now say: {culprit}"
                note, tone = said, Tone.NEWS
            # Node ids and evidence come from the org's exporters' labels: escaped, so they can mention nobody.
            # The coordination line says what the alert is (a slowdown, a stall): edited when that changes.
            await self._desk.note(row, escape(note), cluster=None, silence=silence, tone=tone, coordination=new_kind)
            if first_named and isinstance(verdict, Verdict) and verdict.chart is not None and row.message_ts:
                await upload_peer_chart(self._desk, row, verdict.chart, thread_ts=row.message_ts)
            if new_first:
                await self._link_faulty(row)
        return 1

    # -- degradation notices (issue 23) ------------------------------------------------------------------

    async def _notice(self, judged: Judged, degraded: Anomaly | None, reads: MetricsReads, now: datetime) -> int:
        """The job's degradation notice: opened once (in the org's channel only, with the culprit where the org
        has per-node metrics and the chart in its thread), edited while it lasts as its figures or the culprit
        change, closed when the job is back or a slowdown (or a hang) took over: that one has its own alert.
        How many notices opened or closed."""
        row, detector, rows = judged.notice, judged.detector, judged.rows
        unit = unit_of(rows)
        if degraded is None:
            took_over = detector.current
            if row is None or (took_over is None and detector.active and detector.baseline is None):
                return 0  # none open, or a rebuilt detector still warming up: it cannot say the job is back
            if took_over is not None:
                note = f"It deepened into a {took_over.kind}, told in its own alert"
            else:
                note = "Throughput is back at its level"
            said = named_text(row.cause, row.suspects)
            message = f"{note}. {self._figures(detector, None, unit)}\n{said}".strip()
            if not await self._desk.close(row, {"closed_at": now, "updated_at": now, "message": message[:1000]}):
                return 0
            if not row.silenced:
                silence = await self._desk.silence_for(row.org_id, row.backend, row.cluster_name)
                tone = Tone.NEWS if took_over is not None else Tone.RECOVERED
                await self._desk.note(row, f"{note}.", cluster=None, silence=silence, tone=tone, coordination=False)
            return 1
        verdict = await self._assess(judged, reads, now)
        if row is None:
            cause = await self._cause(judged.org_id, judged.cluster, degraded.start, now, verdict=verdict, row=None)
            columns: dict[str, Any] = {}
            if isinstance(verdict, Verdict):
                columns = await self._verdict_values(judged.org_id, judged.cluster, verdict)
            columns["node_ids"] = []  # a notice offers no node buttons: nothing is down
            opened = await self._desk.open(
                Episode(
                    org_id=judged.org_id,
                    backend=job_kind.SOURCE,
                    cluster_name=judged.cluster,
                    node_key=judged.job,
                    kind=degradation_kind.NAME,
                    state="open",
                    status=degradation_kind.STATUS,
                    message=f"{degradation_text(degraded, unit, now)}\n{cause}".strip()[:1000],
                    opened_at=now,
                    failing_since=degraded.start,
                    updated_at=now,
                    **columns,
                )
            )
            if opened is None or not opened.channel_id:
                return 0  # another replica opened it, and posts it
            silence = await self._desk.silence_for(judged.org_id, opened.backend, judged.cluster)
            await self._desk.announce([opened], silence=silence)
            if opened.message_ts and not opened.silenced:
                await self._chart(opened, now, thread_ts=opened.message_ts, anomaly=degraded)
                if isinstance(verdict, Verdict) and verdict.suspects and verdict.chart is not None:
                    await upload_peer_chart(self._desk, opened, verdict.chart, thread_ts=opened.message_ts)
            return 1
        # Open: edited as its figures (whole percent, whole hours) or the culprit change.
        new_verdict = isinstance(verdict, Verdict) and (verdict.cause.value, list(verdict.suspects[:1])) != (
            row.cause,
            list(row.suspects[:1]),
        )
        cause = await self._cause(row.org_id, row.cluster_name, degraded.start, now, verdict=verdict, row=row)
        message = f"{degradation_text(degraded, unit, now)}\n{cause}".strip()[:1000]
        if message == row.message and not new_verdict:
            return 0
        values: dict[str, Any] = {"updated_at": now, "message": message}
        if isinstance(verdict, Verdict) and new_verdict:
            values.update(await self._verdict_values(row.org_id, row.cluster_name, verdict))
            values["node_ids"] = []
        first_named = isinstance(verdict, Verdict) and bool(verdict.suspects) and not row.suspects
        await self._desk.update(row, values)
        if row.silenced or not row.message_ts:
            return 0
        silence = await self._desk.silence_for(row.org_id, row.backend, row.cluster_name)
        if new_verdict:
            line = self._culprit_line(verdict, row)
            note = line if line.startswith("Per-node metrics") else f"Per-node metrics now say: {line}"
            await self._desk.note(row, escape(note), cluster=None, silence=silence, coordination=False)
            if first_named and isinstance(verdict, Verdict) and verdict.chart is not None:
                await upload_peer_chart(self._desk, row, verdict.chart, thread_ts=row.message_ts)
        else:
            await self._desk.edit(row.channel_id, row.message_ts, await self._desk.render(row, None, silence))
        return 0

    async def _link_faulty(self, row: Episode) -> None:
        """The node this job alert now names already has a faulty_node alert open (it diverged before the job
        slowed): a line in this thread links to it, so the two conversations find each other."""
        if not row.suspects or not row.message_ts:
            return
        async with self._desk.db.session() as session:
            opened = await crud.open_episodes(session, org_id=row.org_id)
        faulty = next(
            (
                e
                for e in opened
                if e.kind == faulty_kind.KIND.name
                and e.cluster_name == row.cluster_name
                and e.node_key == row.suspects[0]
            ),
            None,
        )
        if faulty is None or not faulty.message_ts or faulty.silenced:
            return
        link = await self._desk.permalink(faulty.channel_id, faulty.message_ts)
        where = f"<{link}|its faulty-node alert>" if link else f"its faulty-node alert (episode #{faulty.id})"
        since = when(faulty.failing_since or faulty.opened_at, self._desk.tz)
        note = f"`{escape(faulty.node_key)}` has diverged from its peers since {since}: see {where}."
        await self._desk.post(row.channel_id, self._desk.presenter.note(note), thread_ts=row.message_ts)

    async def _assess(self, judged: Judged, reads: MetricsReads, now: datetime) -> Assessed:
        """The culprit of the job's anomaly: its cluster's nodes against their peers over the anomaly and the
        healthy hour before it."""
        since = judged.since
        if since is None or now - since > CULPRIT_FOR:
            return None  # an old episode keeps the verdict it has (its columns, _culprit_line)
        healthy_start = since - HEALTHY_BEFORE
        metrics = await reads.get(judged.org_id, judged.cluster, start=healthy_start)
        if metrics is None or isinstance(metrics, ReadFailed):
            return metrics
        if not metrics.series:
            return ReadFailed(f"Prometheus has no series of cluster `{judged.cluster}` for this window")
        return await self._culprit(metrics, healthy_start=healthy_start, since=since, now=now)

    async def _culprit(
        self, metrics: ClusterMetrics, *, healthy_start: datetime, since: datetime, now: datetime
    ) -> Verdict | None:
        try:  # a few hundred milliseconds of arithmetic for a big cluster: off the event loop
            return await asyncio.to_thread(
                find_culprit, metrics, healthy_start=healthy_start, episode_start=since, episode_end=now
            )
        except Exception:  # a fault in the analysis is logged whole; the alert goes on without a culprit
            log.exception("finding the culprit of %s failed", metrics.cluster)
            return None

    async def _verdict_values(self, org_id: str, cluster: str, verdict: Verdict) -> dict[str, Any]:
        """The episode's columns for a verdict: its cause and suspects, and, on HyperPod, the first suspect as
        the node its Replace/Reboot buttons act on."""
        act_on = []
        if verdict.suspects and await self._desk.backend_of(org_id, cluster) is Backend.HYPERPOD:
            act_on = [verdict.suspects[0]]
        return {"cause": verdict.cause.value, "suspects": list(verdict.suspects), "node_ids": act_on}

    @staticmethod
    def _culprit_line(verdict: Assessed, row: Episode | None) -> str:
        if isinstance(verdict, Verdict):
            return culprit_text(verdict)
        said = named_text(row.cause, row.suspects) if row is not None else ""
        if isinstance(verdict, ReadFailed):  # what was said before stands; else why nothing can be said
            return said or unreadable_text(verdict)
        return said  # not assessed now (no metrics, or an old episode): what was said stands

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

    async def _cause(
        self, org_id: str, cluster: str, start: datetime, now: datetime, *, verdict: Assessed, row: Episode | None
    ) -> str:
        """The alert's one cause line: the metrics' verdict (or what they said before), then the node
        failures of the cluster under way when the anomaly began, the usual cause of a hang or straggler."""
        async with self._desk.db.session() as session:
            episodes = await crud.episodes_between(session, org_id=org_id, since=start - CAUSE_WINDOW, until=now)
            current = await crud.open_episodes(session, org_id=org_id)
        seen = {e.id: e for e in [*episodes, *current]}.values()
        nodes = [
            e for e in seen if e.cluster_name == cluster and e.kind == EpisodeKind.NODE.value and under_way_at(e, start)
        ]
        failed = [failed_node_text(e, since=start - CAUSE_WINDOW, tz=self._desk.tz) for e in nodes[:5]]
        if isinstance(verdict, Verdict):
            names = bool(verdict.suspects) or verdict.cause is not Cause.UNKNOWN
        else:  # what was said before stands (named_text)
            names = row is not None and row.cause not in ("", Cause.UNKNOWN.value)
        return cause_line(self._culprit_line(verdict, row), names_cause=names, failed=failed)

    async def _open(
        self,
        org_id: str,
        cluster: str,
        job: str,
        anomaly: Anomaly,
        detector: JobDetector,
        rows: Sequence[ThroughputSample],
        now: datetime,
        verdict: Assessed = None,
    ) -> None:
        unit = unit_of(rows)
        cause = await self._cause(org_id, cluster, anomaly.start, now, verdict=verdict, row=None)
        message = f"{self._figures(detector, anomaly, unit)}\n{cause}".strip()
        columns: dict[str, Any] = {"node_ids": []}
        if isinstance(verdict, Verdict):
            columns = await self._verdict_values(org_id, cluster, verdict)
        row = await self._desk.open(
            Episode(
                org_id=org_id,
                backend=job_kind.SOURCE,
                cluster_name=cluster,
                node_key=job,
                kind=job_kind.KIND.name,
                state="open",
                status=anomaly.kind,
                message=message[:1000],
                opened_at=now,
                failing_since=anomaly.start,
                updated_at=now,
                **columns,
            )
        )
        if row is None or not row.channel_id:
            return  # another replica opened it, and posts it
        await self._desk.announce([row], silence=await self._desk.silence_for(org_id, row.backend, cluster))
        if row.message_ts and not row.silenced:
            await self._chart(row, now, thread_ts=row.message_ts, anomaly=anomaly)
            if isinstance(verdict, Verdict) and verdict.suspects and verdict.chart is not None:
                await upload_peer_chart(self._desk, row, verdict.chart, thread_ts=row.message_ts)
            await self._link_faulty(row)

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
        if row.status == "stall":  # begun at the last good sample (or a slowdown's first): only what was near zero
            floor = NEAR_ZERO_RATIO * (detector.baseline or 0.0)
            during = [v for v in during if v < floor]
        worst = min(during) if during else 0.0  # a hang has no samples at all: nothing went through
        text = ", ".join(parts) + "." if parts else ""
        text += f" At its worst {worst:,.0f} {unit}."
        cause = await self._cause(row.org_id, row.cluster_name, since, now, verdict=None, row=row)
        return f"{text}\n{cause}".strip()

    async def chart(
        self, org_id: str, cluster: str, job: str | None, *, hours: float, now: datetime, anomaly: Anomaly | None = None
    ) -> bytes:
        """The last `hours` of a cluster's jobs (or one job): throughput, and for one job its baseline,
        threshold and anomaly."""
        since = now - timedelta(hours=hours)
        zoom = None
        if job is not None and anomaly is not None:
            zoom = zoom_for(Band(anomaly.start, anomaly.end, anomaly.kind), since=since, until=now)
        rows = await self.samples(org_id, cluster, job, since=min(since, zoom.since) if zoom else since, until=now)
        by_job: dict[str, list[ThroughputSample]] = {}
        for row in rows:
            by_job.setdefault(row.job, []).append(row)
        series = [
            Series(label=name, points=[(r.ts, sample_of(r).value) for r in job_rows if r.event is None])
            for name, job_rows in sorted(by_job.items())
        ]
        baseline = threshold = None
        bands = []
        if job is not None and job in by_job:
            detector = run_detector(by_job[job], thresholds_for(self._desk.program, org_id), now)
            baseline, threshold = detector.baseline, detector.threshold
            shown = anomaly or detector.current
            if shown is not None:
                bands.append(Band(start=shown.start, end=shown.end, label=shown.kind))
        title = f"{org_id}/{cluster}" + (f" · {job}" if job else "") + f" · last {hours:g} h"
        chart = ThroughputChart(
            title=title,
            series=series,
            baseline=baseline,
            threshold=threshold,
            bands=bands,
            since=since,
            until=now,
            unit=unit_of(rows),
            zoom=zoom,
        )
        # Rendering takes a tenth of a second (more for the first chart of a process): off the event loop.
        return await asyncio.to_thread(self._desk.presenter.throughput_chart, chart, tz=self._desk.tz)

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
