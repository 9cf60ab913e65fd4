"""The weekly digest: built from storage, posted once per week and channel, on schedule or on demand.

Exactly once: before posting to a channel, a `digest_runs` row (week, channel, attempt 0) is inserted; the
unique key lets one caller win (the scheduled job, a catch-up after a restart, `/digest send`, or another
replica). `/digest send --force` inserts the next attempt and so posts again.

Where it goes: the coordination channel gets the program summary with each org's section as a thread reply
(and the charts in that thread); each org's channel gets its own section only, never another org's.

When the bot was not running at the scheduled time, the leader's catch-up (at start and every few minutes)
posts the digest if it is within the grace period, else records the week as skipped; the next digest says so.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol
from zoneinfo import ZoneInfo

from apscheduler.triggers.cron import CronTrigger

from bot.config import ProgramConfig
from bot.digest.compute import build_digest
from bot.digest.facts import OrgSection, ProgramDigest, Week
from bot.digest.gather import gather_week
from bot.digest.medians import job_medians
from bot.digest.weeks import digest_week, due_at, previous_week
from bot.publishing import Publisher, Reply
from storage import tracking
from storage.db import Database
from storage.models import DigestRun, DigestRunStatus, utcnow

log = logging.getLogger(__name__)
GRACE = timedelta(hours=12)
SKIPPED_CHANNEL = "*"  # the digest_runs row of a week that was not posted at all
STALE_CLAIM = timedelta(minutes=30)  # a claim this old that posted nothing was left by a replica that died


def digest_trigger(schedule: str, tz: ZoneInfo) -> CronTrigger:
    """`mon 09:00` -> a cron trigger on that weekday and time in the program timezone."""
    weekday, time = schedule.split()
    hour, minute = time.split(":")
    return CronTrigger(day_of_week=weekday, hour=int(hour), minute=int(minute), timezone=tz)


@dataclass(frozen=True)
class PostReport:
    week: str
    posted: tuple[str, ...] = ()  # channels posted to now
    already: tuple[str, ...] = ()  # channels whose digest of the week was posted (or claimed) before
    failed: tuple[str, ...] = ()  # channels Slack refused; their claims were given back unless half-posted
    skipped_reported: tuple[str, ...] = ()  # earlier weeks this digest said were not posted

    def __bool__(self) -> bool:
        return bool(self.posted or self.failed)


class DigestPresenter(Protocol):
    """How the digest reads and looks (bot.digest.render.SlackDigest): its messages and their charts (PNG)."""

    def summary(self, digest: ProgramDigest) -> Sequence[Reply]: ...

    def org_section(self, section: OrgSection, *, week: Week, program_name: str) -> Sequence[Reply]: ...

    def org_chart(self, section: OrgSection, week: Week) -> bytes: ...

    def program_chart(self, digest: ProgramDigest) -> bytes: ...

    def goodput_chart(self, digest: ProgramDigest) -> bytes: ...


class WeeklyDigest:
    def __init__(
        self,
        *,
        db: Database,
        poster: Publisher,
        program: ProgramConfig,
        presenter: DigestPresenter,
        holder: str,
        clock: Callable[[], datetime] = utcnow,
        grace: timedelta = GRACE,
    ) -> None:
        self._db = db
        self._poster = poster
        self._program = program
        self._presenter = presenter
        self._holder = holder
        self.clock = clock
        self.grace = grace
        self.tz = ZoneInfo(program.timezone)
        self.schedule = program.digest.schedule
        self._medians_kept = ""  # the label of the week whose job medians this replica stored

    # ------------------------------------------------------------------ building

    def current_week(self) -> Week:
        """The week a digest posted now covers: the one that just ended."""
        return digest_week(self.clock(), self.tz)

    async def build(self, week: Week, *, org_ids: Sequence[str] | None = None) -> ProgramDigest:
        facts = await gather_week(self._db, program=self._program, week=week, org_ids=org_ids, now=self.clock())
        async with self._db.session() as session:
            skipped = [run.week for run in await tracking.unreported_skips(session, before_week=week.label)]
        return build_digest(program_name=self._program.name, week=week, facts=facts, skipped_weeks=skipped)

    async def last_run(self, week: Week) -> DigestRun | None:
        """The latest posting of a week's digest to the coordination channel."""
        async with self._db.session() as session:
            runs = await tracking.digest_runs(session, week=week.label)
        mine = [run for run in runs if run.channel == self._program.coordination_channel]
        return max(mine, key=lambda run: run.attempt) if mine else None

    # ------------------------------------------------------------------ posting

    async def post(self, week: Week, *, by: str, force: bool = False) -> PostReport:
        """Post the week's digest to every channel not posted yet (force: to every channel again)."""
        digest = await self.build(week)
        charts: dict[str, bytes] = {}  # org id -> PNG: each org's chart is rendered once per posting
        posted: list[str] = []
        already: list[str] = []
        failed: list[str] = []
        coordination = self._program.coordination_channel
        run_id = await self._claim(week, coordination, by=by, force=force)
        summary_ts: str | None = None
        if run_id is None:
            already.append(coordination)
        else:
            summary_ts = await self._post_coordination(digest, run_id, charts)
            (posted if summary_ts else failed).append(coordination)
        for section in digest.orgs:
            if section.channel == coordination:
                continue
            run_id = await self._claim(week, section.channel, by=by, force=force)
            if run_id is None:
                already.append(section.channel)
                continue
            ok = await self._post_org_channel(section, digest.week, run_id, charts)
            (posted if ok else failed).append(section.channel)
        reported: tuple[str, ...] = ()
        if summary_ts:
            reported = digest.skipped_weeks
            await self._mark_skips_reported(week, summary_ts)
        report = PostReport(week.label, tuple(posted), tuple(already), tuple(failed), reported)
        if report:
            log.info("digest %s: %s", week.label, report)
        return report

    async def _claim(self, week: Week, channel: str, *, by: str, force: bool) -> int | None:
        async with self._db.session() as session:
            attempt = await tracking.next_attempt(session, week=week.label, channel=channel) if force else 0
            run = await tracking.claim_digest_run(
                session, week=week.label, channel=channel, by=by, at=self.clock(), attempt=attempt
            )
        return run.id if run is not None else None

    async def _finish(self, run_id: int, *, ts: str | None, error: str | None, anything_posted: bool) -> None:
        async with self._db.session() as session:
            if error is None:
                values = {"status": DigestRunStatus.POSTED.value, "posted_at": self.clock(), "message_ts": ts}
                await tracking.finish_digest_run(session, run_id=run_id, values=values)
            elif anything_posted:  # half posted: trying again would repeat what people have already read
                values = {"status": DigestRunStatus.FAILED.value, "message_ts": ts, "detail": error[:1000]}
                await tracking.finish_digest_run(session, run_id=run_id, values=values)
            else:  # nothing reached Slack: give the claim back so the next catch-up (or /digest send) retries
                await tracking.release_digest_run(session, run_id=run_id)

    async def _post_all(
        self, channel: str, replies: Sequence[Reply], thread_ts: str | None, sent: list[str], run_id: int
    ) -> str:
        """Post replies in order, noting each ts in `sent`; the first one's ts (the thread the rest go in).

        The run's first message is stored on its row at once: from then on a failure or a crash leaves a
        half-posted run, which is never posted again from the start (people have read part of it)."""
        first = ""
        for reply in replies:
            ts = await self._poster.post(channel=channel, reply=reply, thread_ts=thread_ts)
            if not sent:
                async with self._db.session() as session:
                    await tracking.finish_digest_run(session, run_id=run_id, values={"message_ts": ts})
            sent.append(ts)
            first = first or ts
        return first

    async def _upload(self, channel: str, content: bytes, name: str, title: str, thread_ts: str | None) -> None:
        await self._poster.upload(channel=channel, filename=name, content=content, title=title, thread_ts=thread_ts)

    async def _org_chart(self, section: OrgSection, week: Week, charts: dict[str, bytes]) -> bytes:
        """Rendered once per posting (off the event loop), for the coordination thread and the org channel."""
        if section.org_id not in charts:
            charts[section.org_id] = await asyncio.to_thread(self._presenter.org_chart, section, week)
        return charts[section.org_id]

    async def _post_coordination(self, digest: ProgramDigest, run_id: int, charts: dict[str, bytes]) -> str | None:
        channel = self._program.coordination_channel
        sent: list[str] = []
        try:
            ts = await self._post_all(channel, self._presenter.summary(digest), None, sent, run_id)
            chart = await asyncio.to_thread(self._presenter.program_chart, digest)
            await self._upload(channel, chart, f"digest-{digest.week.label}.png", "Instance-hours by org", ts)
            if digest.totals.goodput is not None and digest.totals.goodput.reported:
                chart = await asyncio.to_thread(self._presenter.goodput_chart, digest)
                await self._upload(channel, chart, f"goodput-{digest.week.label}.png", "Goodput by org", ts)
            for section in digest.orgs:
                org_replies = self._presenter.org_section(section, week=digest.week, program_name=digest.program_name)
                await self._post_all(channel, org_replies, ts, sent, run_id)
                chart = await self._org_chart(section, digest.week, charts)
                await self._upload(channel, chart, f"{section.org_id}-{digest.week.label}.png", section.name, ts)
        except Exception as error:
            log.exception("digest %s to the coordination channel failed", digest.week.label)
            await self._finish(run_id, ts=sent[0] if sent else None, error=repr(error), anything_posted=bool(sent))
            return None
        await self._finish(run_id, ts=ts, error=None, anything_posted=True)
        return ts

    async def _post_org_channel(self, section: OrgSection, week: Week, run_id: int, charts: dict[str, bytes]) -> bool:
        sent: list[str] = []
        try:
            replies = self._presenter.org_section(section, week=week, program_name=self._program.name)
            ts = await self._post_all(section.channel, replies, None, sent, run_id)
            chart = await self._org_chart(section, week, charts)
            await self._upload(section.channel, chart, f"{section.org_id}-{week.label}.png", section.name, ts)
        except Exception as error:
            log.exception("digest %s to %s failed", week.label, section.channel)
            await self._finish(run_id, ts=sent[0] if sent else None, error=repr(error), anything_posted=bool(sent))
            return False
        await self._finish(run_id, ts=ts, error=None, anything_posted=True)
        return True

    async def _mark_skips_reported(self, week: Week, summary_ts: str) -> None:
        """Earlier skipped weeks were said in this digest; this week, if it had been recorded as skipped (and an
        admin posted it after all), is no longer missing."""
        async with self._db.session() as session:
            earlier = await tracking.unreported_skips(session, before_week=week.label)
            this = [
                run for run in await tracking.digest_runs(session, week=week.label) if run.channel == SKIPPED_CHANNEL
            ]
            for run in [*earlier, *this]:
                await tracking.finish_digest_run(session, run_id=run.id or 0, values={"message_ts": summary_ts})

    # ------------------------------------------------------------------ schedule

    def due_week(self, now: datetime) -> Week:
        """The week whose digest fell due most recently at `now` (the schedule may fall on any weekday, so
        this is not always the week that just ended)."""
        week = digest_week(now, self.tz)
        while due_at(week, self.schedule) > now:
            week = previous_week(week)
        return week

    async def scheduled(self) -> PostReport:
        """The cron job (on the leader): post the digest that falls due now."""
        return await self.post(self.due_week(self.clock()), by=self._holder)

    async def keep_medians(self) -> bool:
        """Store the job medians of the week that ended last, once (this replica remembers it did): the leader's
        catch-up calls it every few minutes, so the medians are stored minutes after the week ends and the
        digest posted hours later reads them (bot.digest.medians) instead of computing the week. True when it
        stored them now."""
        week = digest_week(self.clock(), self.tz)
        if self._medians_kept == week.label:
            return False
        async with self._db.session() as session:
            await job_medians(session, org_ids=[org.id for org in self._program.orgs], week=week, now=self.clock())
        self._medians_kept = week.label
        return True

    async def catch_up(self) -> str | None:
        """After a restart or a leader change: the digest that fell due while no one posted it (or the channels
        it did not reach) is posted now when within the grace period; past it, a week never posted is recorded
        as skipped. None when there is nothing to do. First, the last week's job medians are stored once."""
        try:
            await self.keep_medians()
        except Exception:  # only a head start for the digest, which computes what is not stored
            log.exception("storing the last week's job medians failed")
        now = self.clock()
        week = self.due_week(now)
        due = due_at(week, self.schedule)
        coordination = self._program.coordination_channel
        async with self._db.session() as session:
            await tracking.release_stale_claims(session, week=week.label, before=now - STALE_CLAIM)
            channels = {run.channel for run in await tracking.digest_runs(session, week=week.label)}
        if SKIPPED_CHANNEL in channels:
            return None
        if now - due <= self.grace:
            expected = {coordination, *(org.channel for org in self._program.orgs)}
            if expected <= channels:
                return None  # every channel posted, being posted, or given up on
            report = await self.post(week, by=self._holder)
            return f"posted the {week.label} digest {now - due} after it was due: {report}" if report else None
        if coordination in channels:
            return None  # posted in time; a channel that missed it is not posted days late
        async with self._db.session() as session:
            if not await tracking.posted_before(session, week=week.label):
                return None  # a new installation: the weeks before it are not "missed"
            run = await tracking.claim_digest_run(
                session, week=week.label, channel=SKIPPED_CHANNEL, by=self._holder, at=now
            )
            if run is None:
                return None
            detail = f"due {due.isoformat()}, Pitcrew was not running until {now.isoformat()} (grace {self.grace})"
            values = {"status": DigestRunStatus.SKIPPED.value, "detail": detail}
            await tracking.finish_digest_run(session, run_id=run.id or 0, values=values)
        log.warning("digest %s skipped: %s", week.label, detail)
        return f"skipped the {week.label} digest: {detail}"
