"""The Home tab of a running Pitcrew: its facts read from storage (and reserved capacity, when the capacity
service is there), published with views.publish when someone opens it, and published again, debounced, for
the people who opened it after anything it shows changes (`changed(org_id)`, called where alerts open and
close, operations finish and records are added).

Who opened Home is kept in memory by the replica that received app_home_opened: another replica's changes
refresh those views only when that replica hears of them too (the next opening always shows the truth)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol
from zoneinfo import ZoneInfo

from bot.access import AccessPolicy
from bot.alerts.kinds import capacity as capacity_kind
from bot.approvals.rules import may_approve
from bot.capacity.model import Reservation
from bot.capacity.notices import read_details
from bot.clusters.fleet import describe_error
from bot.clusters.model import Cluster
from bot.clusters.requests import operation_summary
from bot.config import ProgramConfig
from bot.digest.gather import gather_goodput
from bot.digest.goodput import goodput
from bot.digest.weeks import previous_week, week_of
from bot.home.facts import (
    AlertLine,
    ApprovalLine,
    ClusterLine,
    HomeFacts,
    IdleLine,
    OrgHome,
    Viewer,
    ending_soon,
    idle_line,
    quota_lines,
)
from bot.publishing import Publisher
from storage import approvals as approvals_store
from storage import crud, tracking
from storage.db import Database
from storage.models import DigestRun, DigestRunStatus, utcnow

log = logging.getLogger(__name__)
DEBOUNCE_SECONDS = 5.0  # changes within this are one refresh
CAPACITY_SECONDS = 10.0  # reserved capacity is left out ("could not be read") past this
IDLE_KIND = "idle"


class ReservationSource(Protocol):
    """bot.capacity.service.CapacityService, or anything with its `reservations(org_id)`."""

    async def reservations(self, org_id: str) -> list[Reservation]: ...


class HomeView(Protocol):
    """The Home view of one person's facts (bot.home.render.home_view)."""

    def __call__(self, facts: HomeFacts, *, tz: ZoneInfo) -> dict[str, Any]: ...


class HomeTab:
    def __init__(
        self,
        *,
        db: Database,
        program: ProgramConfig,
        access: AccessPolicy,
        poster: Publisher,
        render: HomeView,
        capacity: ReservationSource | None = None,
        clock: Callable[[], datetime] = utcnow,
        delay: float = DEBOUNCE_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        capacity_timeout: float = CAPACITY_SECONDS,
    ) -> None:
        self._db = db
        self._program = program
        self._access = access
        self._poster = poster
        self._render = render
        self._capacity = capacity
        self.clock = clock  # public, as the digest's and the record book's: a scenario fixes the time
        self.delay = delay  # seconds; a test may set 0
        self._monotonic = monotonic
        self._sleep = sleep
        self._capacity_timeout = capacity_timeout
        self._tz = ZoneInfo(program.timezone)
        self._watching: set[str] = set()  # users who opened Home on this replica
        self._pending: set[str] = set()
        self._pending_all = False
        self._due: float | None = None
        self._task: asyncio.Task[None] | None = None
        self._links: dict[tuple[str, str], str] = {}
        self.published = 0  # views.publish calls made (tests and metrics read it)

    # ------------------------------------------------------------------ refresh

    def changed(self, org_id: str | None) -> None:
        """Something this org's Home shows changed (None: any org's): publish again, once, after the delay,
        for the people who opened Home and see that org. Never raises; without a running loop it does nothing."""
        if not self._watching:
            return
        if org_id is None:
            self._pending_all = True
        else:
            self._pending.add(org_id)
        if self._due is None:
            self._due = self._monotonic() + self.delay
        if self._task is None or self._task.done():
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return
            self._task = loop.create_task(self._run())

    async def _run(self) -> None:
        while self._due is not None:
            wait = self._due - self._monotonic()
            if wait > 0:
                await self._sleep(wait)
                continue
            everyone, orgs = self._pending_all, set(self._pending)
            self._pending_all, self._pending, self._due = False, set(), None
            try:
                await self._refresh(everyone=everyone, orgs=orgs)
            except Exception:  # a refresh that failed is the next one's to do; the loop keeps going
                log.exception("refreshing Home views failed")

    async def settled(self) -> None:
        """Wait until no refresh is due or running (tests, shutdown)."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)

    async def aclose(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _refresh(self, *, everyone: bool, orgs: set[str]) -> None:
        users = [
            user
            for user in sorted(self._watching)
            if (everyone and self._access.is_known(user)) or orgs.intersection(self._access.visible_orgs(user))
        ]
        if not users:
            return
        wanted = sorted({org for user in users for org in self._access.visible_orgs(user)})
        facts = await self.org_facts(wanted)
        digests = await self._digest_links()
        for user in users:
            await self._publish(user, facts, digests)

    # ------------------------------------------------------------------ publish

    async def opened(self, user_id: str) -> None:
        """app_home_opened: publish this person's Home now, and keep it fresh from here on."""
        self._watching.add(user_id)
        orgs = self._access.visible_orgs(user_id)
        facts = await self.org_facts(orgs)
        await self._publish(user_id, facts, await self._digest_links())

    async def _publish(self, user_id: str, orgs: dict[str, OrgHome], digests: Mapping[str, tuple[str, str]]) -> None:
        view = self._render(self.facts_for(user_id, orgs, digests=digests), tz=self._tz)
        try:
            await self._poster.client.views_publish(user_id=user_id, view=view)
            self.published += 1
        except Exception as error:
            log.warning("views.publish for %s failed: %s", user_id, describe_error(error))

    def facts_for(
        self, user_id: str, orgs: dict[str, OrgHome], *, digests: Mapping[str, tuple[str, str]] | None = None
    ) -> HomeFacts:
        """One person's Home; `digests` is each channel's last posted digest (link, week)."""
        digests = digests or {}
        access = self._access
        visible = [orgs[o] for o in access.visible_orgs(user_id) if o in orgs]
        if access.is_admin(user_id):
            viewer = Viewer.ADMIN
        elif access.member_orgs(user_id):
            viewer = Viewer.MEMBER
        else:
            viewer, visible = Viewer.OUTSIDER, []
        roles = {}
        for org in visible:
            role = access.role(user_id=user_id, org_id=org.org_id)
            roles[org.org_id] = role.value if role else "viewer"
        link, week = digests.get(self._program.coordination_channel, (None, None))
        admin = access.is_admin(user_id)
        to_approve = tuple(
            line
            for org in visible
            for line in org.approvals
            if line.requested_by != user_id
            and may_approve(approvers=line.approvers, admin=admin, role=roles.get(org.org_id))
        )
        return HomeFacts(
            viewer=viewer,
            user_id=user_id,
            now=self.clock(),
            orgs=tuple(visible),
            roles=roles,
            digest_link=link if viewer is Viewer.ADMIN else None,
            digest_week=week if viewer is Viewer.ADMIN else None,
            org_digests={o.org_id: digests[o.channel] for o in visible if o.channel in digests},
            program=self._program.name,
            admins=tuple(self._program.admins),
            to_approve=to_approve,
        )

    # ------------------------------------------------------------------ facts

    async def org_facts(self, org_ids: Sequence[str]) -> dict[str, OrgHome]:
        """Each org's Home section as stored now (and its reserved capacity ending within 48 h)."""
        now = self.clock()
        wanted = [org for org in (self._program.org(o) for o in org_ids) if org is not None]
        ids = [org.id for org in wanted]
        if not ids:
            return {}
        clusters: dict[str, list[ClusterLine]] = defaultdict(list)
        alerts: dict[str, Counter[str]] = defaultdict(Counter)
        idle: dict[str, list[IdleLine]] = defaultdict(list)
        held: dict[str, dict[str, int]] = {}
        async with self._db.session() as session:
            for seen in await crud.clusters_seen(session):
                if seen.org_id in set(ids):
                    instances = tuple(sorted((t, n) for t, n in (seen.instances or {}).items() if n))
                    clusters[seen.org_id].append(
                        ClusterLine(
                            seen.backend,
                            seen.name,
                            seen.status,
                            seen.nodes_healthy,
                            seen.nodes_total,
                            instances,
                            unhealthy=seen.nodes_unhealthy,
                            compute_fleet=seen.compute_fleet,
                        )
                    )
            for episode in await crud.open_episodes(session):
                alerts[episode.org_id][episode.kind] += 1
                if episode.kind == IDLE_KIND:
                    idle[episode.org_id].append(
                        idle_line(
                            cluster_name=episode.cluster_name,
                            instance_type=episode.instance_type,
                            node_ids=episode.node_ids or [],
                            since=episode.failing_since or episode.opened_at,
                        )
                    )
            incidents = Counter(r.org_id for r in await tracking.open_incidents(session, org_ids=ids, at=now))
            approvals: dict[str, list[ApprovalLine]] = defaultdict(list)
            for approval in await approvals_store.pending_approvals(session, now=now, org_ids=ids):
                operation = await crud.get_operation(session, operation_id=approval.operation_id)
                approvals[approval.org_id].append(
                    ApprovalLine(
                        summary=operation_summary(operation) if operation else approval.operation_id,
                        requested_by=approval.requested_by,
                        why=approval.why,
                        approvers=approval.approvers,
                        needed=approval.needed,
                        expires_at=approval.expires_at,
                    )
                )
            # What each org holds now: the newest state of each of its clusters' types (an empty window after
            # them), one query for every org.
            doctor = {r.org_id: r for r in await crud.doctor_results(session, org_ids=ids) if not r.ok}
            quota_ids = [org.id for org in wanted if org.quota]
            states = await tracking.state_changes(session, org_ids=quota_ids, since=now, until=now) if quota_ids else []
            for state in states:
                if state.count:
                    mine = held.setdefault(state.org_id, {})
                    mine[state.instance_type] = mine.get(state.instance_type, 0) + state.count
        reserved = await self._reserved(ids, now)
        # Goodput of this week so far and of last week, from one gathering of both.
        week = week_of(now, self._tz)
        last = previous_week(week)
        gathered = await gather_goodput(
            self._db, program=self._program, since=last.start, until=now, org_ids=ids, now=now
        )
        return {
            org.id: OrgHome(
                org_id=org.id,
                name=org.name,
                channel=org.channel,
                clusters=tuple(sorted(clusters[org.id], key=lambda c: (c.name, c.backend))),
                alerts=dict(alerts[org.id]),
                incidents=incidents[org.id],
                quota=quota_lines(held.get(org.id, {}), org.quota),
                ending=reserved.get(org.id, ((), None))[0],
                capacity_error=reserved.get(org.id, ((), None))[1],
                idle=tuple(sorted(idle[org.id], key=lambda i: i.cluster_name)),
                doctor_failed_at=doctor[org.id].ran_at if org.id in doctor else None,
                doctor_problems=tuple(doctor[org.id].problems.splitlines()) if org.id in doctor else (),
                goodput=goodput(gathered[org.id], week.start, week.end),
                goodput_last_week=goodput(gathered[org.id], last.start, last.end),
                approvals=tuple(approvals[org.id]),
            )
            for org in wanted
        }

    async def _reserved(
        self, org_ids: Iterable[str], now: datetime
    ) -> dict[str, tuple[tuple[Reservation, ...], str | None]]:
        capacity = self._capacity
        if capacity is None:
            return {}

        async def one(org_id: str) -> tuple[str, tuple[tuple[Reservation, ...], str | None]]:
            try:
                found = await asyncio.wait_for(capacity.reservations(org_id), self._capacity_timeout)
            except Exception as error:  # AWS down, slow or refusing: the Home says so in one line
                log.warning("Home: reserved capacity of %s: %s", org_id, describe_error(error))
                return org_id, ((), describe_error(error) or "unreadable")
            return org_id, (ending_soon(found, now=now), None)

        return dict(await asyncio.gather(*(one(o) for o in org_ids)))

    async def _digest_links(self) -> dict[str, tuple[str, str]]:
        """Each channel's last posted digest (the coordination channel's summary, an org channel's own section):
        channel -> (link, week); a channel with none, or whose link Slack did not give, is left out."""
        try:
            async with self._db.session() as session:
                runs = await tracking.digest_runs(session)
        except Exception:
            log.exception("Home: reading the digest runs failed")
            return {}
        last: dict[str, DigestRun] = {}
        for run in runs:
            if run.status != DigestRunStatus.POSTED.value or not run.message_ts:
                continue
            seen = last.get(run.channel)
            if seen is None or (run.posted_at or run.claimed_at, run.id or 0) > (
                seen.posted_at or seen.claimed_at,
                seen.id or 0,
            ):
                last[run.channel] = run
        links: dict[str, tuple[str, str]] = {}
        for channel, run in last.items():
            key = (channel, run.message_ts or "")
            if key not in self._links:
                try:
                    answer = await self._poster.client.chat_getPermalink(channel=key[0], message_ts=key[1])
                    if answer.get("permalink"):
                        self._links[key] = str(answer["permalink"])
                except Exception as error:
                    log.warning(
                        "Home: no permalink for the digest %s in %s: %s", run.week, channel, describe_error(error)
                    )
            if key in self._links:
                links[channel] = (self._links[key], run.week)
        return links

    async def open_alerts(self, org_id: str) -> list[AlertLine]:
        """The org's open alerts, oldest first, each with a link to its message where Slack gives one."""
        async with self._db.session() as session:
            rows = await crud.open_episodes(session, org_id=org_id)
        lines = []
        for row in rows[:100]:
            link = None
            if row.channel_id and row.message_ts:
                key = (row.channel_id, row.message_ts)
                if key not in self._links:
                    try:
                        answer = await self._poster.client.chat_getPermalink(channel=key[0], message_ts=key[1])
                        if answer.get("permalink"):
                            self._links[key] = str(answer["permalink"])
                    except Exception as error:
                        log.warning("Home: no permalink for alert %s: %s", row.id, describe_error(error))
                link = self._links.get(key)
            if row.kind == capacity_kind.NAME:
                # A notice's key ("24h@<end>") and level are bookkeeping, and its failing_since is the end to
                # come: the modal names the reservation, when the notice came and when the capacity ends.
                line = AlertLine(
                    id=row.id or 0,
                    kind=row.kind,
                    cluster_name=read_details(row.message, fallback_name=row.cluster_name).name,
                    node_key="",
                    status="",
                    since=row.opened_at,
                    acknowledged=row.acked_by is not None,
                    link=link,
                    ends=row.failing_since,
                )
            else:
                line = AlertLine(
                    id=row.id or 0,
                    kind=row.kind,
                    cluster_name=row.cluster_name,
                    node_key=row.node_key,
                    status=row.status,
                    since=row.failing_since or row.opened_at,
                    acknowledged=row.acked_by is not None,
                    link=link,
                )
            lines.append(line)
        return lines

    @property
    def tz(self) -> ZoneInfo:
        return self._tz


class SweepWatch:
    """Told each sweep's listings (bot.monitor.idle.UsageObservers, after the usage ledger wrote them): an org
    whose clusters' health or sizes differ from the last sweep's changed its Home."""

    def __init__(self, *, home: HomeTab) -> None:
        self._home = home
        self._last: dict[str, frozenset[tuple[str, str, str, int, int]]] = {}

    async def observe(self, org_id: str, clusters: Sequence[Cluster]) -> int:
        shape = frozenset((c.backend.value, c.name, c.status, c.healthy, len(c.nodes)) for c in clusters)
        if self._last.get(org_id) != shape:  # the first sweep too: the clusters table may have been empty
            self._last[org_id] = shape
            self._home.changed(org_id)
        return 0
