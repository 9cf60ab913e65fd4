"""One lifecycle for every kind of alert: an episode is opened once (a unique key across replicas), posted
(its message in the org's channel, a line in the coordination channel) or held back by a silence, posted
again when Slack was down, acknowledged, silenced, updated, closed and reopened. The monitors only detect
and hand the desk episodes; the kinds (bot.alerts.kinds) say what differs, their presenters how it reads.

A failure to reach Slack is logged, never raised: the episode is stored, and its next change posts again."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol
from zoneinfo import ZoneInfo

from bot.alerts.kind import Action, AlertKind, AlertView, Tone
from bot.alerts.kinds import KINDS
from bot.clusters.fleet import describe_error
from bot.clusters.model import Backend, Cluster
from bot.config import OrgConfig, ProgramConfig
from bot.node_metrics.series import PeerChart
from bot.plots import ThroughputChart
from bot.publishing import Publisher, Reply
from storage import crud
from storage.db import Database
from storage.models import Episode, Silence, utcnow

log = logging.getLogger(__name__)
CLUSTER_BACKENDS = frozenset(backend.value for backend in Backend)
# Low-urgency kinds: told in the org's channel only, no line in the coordination channel (a degradation notice).
NOT_COORDINATED = frozenset({"degradation"})
UNPOSTED_GRACE = timedelta(minutes=2)  # longer than any opener takes to post its own alert
WATCH_FOR = timedelta(hours=4)  # Watch reminds whoever pressed it this long after, if the alert is still open


class ClusterReader(Protocol):
    """A cluster as it is now (bot.clusters.fleet.Fleet), for the kinds whose message shows it."""

    async def get(self, org_id: str, backend: Backend, name: str) -> Cluster | None: ...


class AlertPresenter(Protocol):
    """How the alerts read (bot.slack.alerts.SlackAlerts): one presenter per kind, the lines shared, and the
    charts (PNG) the monitors put in an alert's thread."""

    def alert(self, kind: AlertKind, view: AlertView) -> Reply: ...

    def coordination(self, kind: AlertKind, view: AlertView, *, channel: str) -> Reply: ...

    def held_back(self, kind: AlertKind, row: Episode, *, at: datetime, tz: ZoneInfo) -> Reply: ...

    def note(self, text: str, *, tone: Tone = Tone.NEWS) -> Reply: ...

    def acknowledged(self, user_id: str, *, at: datetime, tz: ZoneInfo) -> Reply: ...

    def silence_message(self, silence: Silence, *, tz: ZoneInfo) -> Reply: ...

    def silence_ended(self, silence: Silence, *, user_id: str, at: datetime, tz: ZoneInfo) -> Reply: ...

    def continued(self, row: Episode, *, link: str | None) -> Reply: ...

    def escalation(
        self, kind: AlertKind, view: AlertView, *, link: str | None, operators: Sequence[str], minutes: float
    ) -> Reply: ...

    def throughput_chart(self, chart: ThroughputChart, *, tz: ZoneInfo) -> bytes: ...

    def peer_chart(self, chart: PeerChart, *, tz: ZoneInfo) -> bytes: ...


@dataclass(frozen=True)
class AlreadyAcknowledged:
    by: str
    at: datetime | None


@dataclass(frozen=True)
class AlreadySilenced:
    org_id: str
    cluster_name: str
    until: datetime
    by: str


@dataclass(frozen=True)
class AlreadyEnded:
    """The silence had ended: pressed before (`by` then, at `at`), or run out at its set time (`by` None)."""

    by: str | None
    at: datetime
    early: bool


NothingChanged = AlreadyAcknowledged | AlreadySilenced | AlreadyEnded


def operators(org: OrgConfig | None) -> list[str]:
    """The org's operators, as the program file lists them (an escalation mentions them)."""
    return sorted(user for user, role in org.members.items() if role == "operator") if org else []


def row_id(value: str) -> int | None:
    """A button's value as the id of an episode or silence (an INTEGER column), or None: ASCII digits only
    ("²".isdigit() is true, and int() refuses it) and in the column's range (Postgres refuses 999999999999)."""
    if not (value.isascii() and value.isdigit()) or len(value) > 10:
        return None
    number = int(value)
    return number if 1 <= number <= 2**31 - 1 else None


class AlertDesk:
    def __init__(
        self,
        *,
        db: Database,
        poster: Publisher,
        program: ProgramConfig,
        presenter: AlertPresenter,
        clusters: ClusterReader | None = None,
        kinds: Mapping[str, AlertKind] = KINDS,
        clock: Callable[[], datetime] = utcnow,
        on_change: Callable[[str | None], None] | None = None,
    ) -> None:
        self.on_change = on_change  # told an org's alerts opened or closed (the Home tab refreshes)
        self.db = db
        self.poster = poster
        self.program = program
        self.presenter = presenter
        self.clusters = clusters
        self.kinds = kinds
        self.clock = clock
        self.tz = ZoneInfo(program.timezone)
        # Sources that name a cluster without its backend (a job's "throughput"): silences cross them.
        self._loose_sources = frozenset(k.source for k in kinds.values() if k.source)

    def org_name(self, org_id: str) -> str:
        org = self.program.org(org_id)
        return org.name if org else org_id

    def kind(self, row: Episode) -> AlertKind:
        return self.kinds[row.kind]

    # ------------------------------------------------------------------ storing

    async def open(self, episode: Episode) -> Episode | None:
        """Store a new episode under its key's next generation, with its org's channel. None when another
        replica (or task) opened the same one first: that one posts it, this caller must not."""
        org = self.program.org(episode.org_id)
        episode.channel_id = org.channel if org else ""
        async with self.db.session() as session:
            episode.generation = await crud.next_generation(
                session,
                org_id=episode.org_id,
                kind=episode.kind,
                backend=episode.backend,
                cluster_name=episode.cluster_name,
                node_key=episode.node_key,
            )
            stored = await crud.add_episode(session, episode=episode)
        if stored is not None and self.on_change is not None:
            self.on_change(episode.org_id)
        return stored

    async def close(self, row: Episode, values: dict[str, object]) -> bool:
        """Close an open episode with `values`; True only for the caller that closed it (another replica, or
        the other path of the same monitor, may have already)."""
        async with self.db.session() as session:
            if not await crud.close_episode(session, episode_id=row.id or 0, values=values):
                return False
        if self.on_change is not None:
            self.on_change(row.org_id)
        for key, value in {"state": "closed", **values}.items():
            setattr(row, key, value)
        return True

    async def update(self, row: Episode, values: dict[str, object]) -> None:
        async with self.db.session() as session:
            await crud.update_episode(session, episode_id=row.id or 0, values=values)
        for key, value in values.items():
            setattr(row, key, value)

    async def claim_held(self, row: Episode) -> bool:
        """Take the posting of `row`, held back by a silence that has ended: True for the one caller (of a
        monitor, an Unsilence, other replicas) whose conditional update won; `row` is then no longer silenced."""
        now = self.clock()
        async with self.db.session() as session:
            if not await crud.claim_held(session, episode_id=row.id or 0, at=now):
                return False
        row.silenced, row.message_ts, row.posted_at, row.updated_at = False, None, now, now
        return True

    async def reread(self, row: Episode) -> Episode:
        """`row` as stored now (another task may have posted it since it was read); `row` itself if it is gone."""
        async with self.db.session() as session:
            return await crud.get_episode(session, episode_id=row.id or 0) or row

    async def episode(self, episode_id: str) -> Episode | None:
        """The episode a button names; None for a value that is not one (tampered, or deleted)."""
        number = row_id(episode_id)
        if number is None:
            return None
        async with self.db.session() as session:
            return await crud.get_episode(session, episode_id=number)

    async def backend_of(self, org_id: str, cluster_name: str) -> Backend | None:
        """The backend of a cluster named without one (a job's), from the clusters Pitcrew knows (the node
        sweep's table), else, for a cluster no sweep has seen yet (just after a start), from AWS through the
        fleet; None when it is not known, or when both backends have a cluster of that name."""
        async with self.db.session() as session:
            seen = {r.backend for r in await crud.clusters_seen(session, org_id=org_id) if r.name == cluster_name}
        known = seen & CLUSTER_BACKENDS
        if not known and self.clusters is not None:
            for backend in Backend:
                try:
                    if await self.clusters.get(org_id, backend, cluster_name) is not None:
                        known.add(backend.value)
                except Exception as error:  # AWS cannot say now: no buttons this time, asked again next time
                    problem = describe_error(error)
                    log.warning("looking up %s/%s on %s: %s", org_id, cluster_name, backend.value, problem)
        return Backend(known.pop()) if len(known) == 1 else None

    async def node_target(self, row: Episode) -> tuple[Backend, str] | None:
        """The cluster backend and the node an alert's Replace/Reboot buttons act on (a failed node's, a
        faulty node's, or a job alert's culprit); None when it names no node or its backend is not known."""
        if not row.node_ids:
            return None
        backend = Backend(row.backend) if row.backend in CLUSTER_BACKENDS else None
        if backend is None:
            backend = await self.backend_of(row.org_id, row.cluster_name)
        return (backend, row.node_ids[-1]) if backend is not None else None

    async def members(self, row: Episode) -> list[Episode]:
        """The episodes of its message: a storm's members, or itself."""
        if row.storm_id is None:
            return [row]
        async with self.db.session() as session:
            return list(await crud.storm_episodes(session, storm_id=row.storm_id))

    # ------------------------------------------------------------------ silences

    async def silence_for(self, org_id: str, backend: str, cluster_name: str) -> Silence | None:
        """The silence holding back this cluster's alerts, whichever alert of it it was set from: one of the
        same backend, or from a source naming the cluster only (a job's); a job's, from any of them."""
        if backend in CLUSTER_BACKENDS:
            also = tuple(sorted(self._loose_sources))
        else:
            also = tuple(sorted((CLUSTER_BACKENDS | self._loose_sources) - {backend}))
        async with self.db.session() as session:
            return await crud.active_silence(
                session, org_id=org_id, backend=backend, cluster_name=cluster_name, now=self.clock(), also=also
            )

    async def get_silence(self, silence_id: str) -> Silence | None:
        """The silence an Unsilence button names; None for a value that is not one."""
        number = row_id(silence_id)
        if number is None:
            return None
        async with self.db.session() as session:
            return await crud.get_silence(session, silence_id=number)

    # ------------------------------------------------------------------ posting

    async def render(self, row: Episode, cluster: Cluster | None, silence: Silence | None) -> Reply:
        """The episode's message as it is now (a storm's: all its members)."""
        kind = self.kind(row)
        rows = tuple(await self.members(row))
        return self.presenter.alert(kind, self._view(kind, rows, cluster, silence))

    def _view(
        self, kind: AlertKind, rows: Sequence[Episode], cluster: Cluster | None, silence: Silence | None
    ) -> AlertView:
        return AlertView(
            rows=tuple(rows),
            org_name=self.org_name(rows[0].org_id),
            tz=self.tz,
            now=self.clock(),
            silence=silence,
            actions=kind.actions(rows),
            cluster=cluster,
        )

    async def announce(
        self, rows: Sequence[Episode], *, silence: Silence | None, cluster: Cluster | None = None, storm: bool = False
    ) -> None:
        """Post new episodes of one cluster: each alert (or one for a storm's members) and its coordination
        line; under a silence, no message but one line each in the silenced alert's thread."""
        if not rows or not rows[0].channel_id:
            return
        channel = rows[0].channel_id
        if silence is not None:
            for row in rows:
                await self.update(row, {"silenced": True, "message_ts": silence.thread_ts})
                line = self.presenter.held_back(self.kind(row), row, at=self.clock(), tz=self.tz)
                await self.post(silence.channel_id, line, thread_ts=silence.thread_ts)
            return
        for members in [list(rows)] if storm else [[row] for row in rows]:
            first = members[0]
            if len(members) > 1:
                for row in members:
                    await self.update(row, {"storm_id": first.id})
            kind = self.kind(first)
            ts = await self.post(channel, self.presenter.alert(kind, self._view(kind, members, cluster, None)))
            if ts is None:
                continue  # no alert, so no coordination line either: both come with the retry
            coordination_ts = None
            if kind.name not in NOT_COORDINATED:
                line = self.presenter.coordination(kind, self._view(kind, members, cluster, None), channel=channel)
                coordination_ts = await self.post(self.program.coordination_channel, line)
            for row in members:
                await self.update(row, {"message_ts": ts, "coordination_ts": coordination_ts})

    async def retry_unposted(self, rows: Sequence[Episode]) -> None:
        """Open episodes whose alert never reached Slack (it failed when they opened): post them now rather
        than never. Only after a grace period, so the opener's own post is not raced, and under a claim, so
        of several replicas one posts. A storm's members are posted together, once. Before them, what a
        silence held back and no silence holds any more (`release_held`)."""
        await self.release_held(rows)
        now = self.clock()
        stale = [
            r
            for r in rows
            if r.state == "open"
            and r.message_ts is None
            and not r.silenced
            and r.channel_id
            and now - r.updated_at > UNPOSTED_GRACE
        ]
        groups: dict[int, list[Episode]] = defaultdict(list)
        for row in stale:
            groups[row.storm_id or row.id or 0].append(row)
        for members in groups.values():
            async with self.db.session() as session:
                if not await crud.claim_unposted(session, episode_id=members[0].id or 0):
                    continue
            first = members[0]  # a silence set meanwhile holds it back, as it would have at its opening
            silence = await self.silence_for(first.org_id, first.backend, first.cluster_name)
            await self.announce(members, silence=silence, storm=len(members) > 1)
            if not first.message_ts:  # Slack failed again: let the next look try
                for row in members:
                    await self.update(row, {"message_ts": None})

    async def release_held(self, rows: Sequence[Episode]) -> int:
        """Open episodes a silence held back, once no silence holds their cluster (it was ended, or ran out):
        each posted now as any new alert, escalating counting from now (`posted_at`). Claimed by one
        conditional update, so of several replicas (or a monitor and an Unsilence) one posts it; how many."""
        held = [r for r in rows if r.state == "open" and r.silenced and r.channel_id]
        released = 0
        for key in dict.fromkeys((r.org_id, r.backend, r.cluster_name) for r in held):
            if await self.silence_for(*key) is not None:
                continue
            claimed = []
            for row in (r for r in held if (r.org_id, r.backend, r.cluster_name) == key):
                if await self.claim_held(row):
                    claimed.append(row)
            if claimed:
                await self.announce(claimed, silence=None, cluster=await self._cluster_now(claimed[0]))
                released += len(claimed)
        return released

    async def _cluster_now(self, row: Episode) -> Cluster | None:
        """The episode's cluster as it is now, for the kinds whose message shows it; None when it cannot be
        read (the message then says its group's health is unknown)."""
        if not self.kind(row).reads_cluster or self.clusters is None or row.backend not in CLUSTER_BACKENDS:
            return None
        try:
            return await self.clusters.get(row.org_id, Backend(row.backend), row.cluster_name)
        except Exception as error:
            log.warning("reading the cluster of episode %s: %s", row.id, describe_error(error))
            return None

    async def note(
        self,
        row: Episode,
        text: str,
        *,
        cluster: Cluster | None,
        silence: Silence | None,
        tone: Tone = Tone.NEWS,
        coordination: bool = True,
    ) -> None:
        """A line in the episode's thread, and its message (and, unless told not to, its coordination line)
        edited to match. A silenced episode's line goes to the silenced alert's thread, nothing edited."""
        if not row.message_ts or not row.channel_id:
            return
        if row.silenced:
            thread_channel = silence.channel_id if silence else row.channel_id
            await self.post(thread_channel, self.presenter.note(text, tone=tone), thread_ts=row.message_ts)
            return
        await self.post(row.channel_id, self.presenter.note(text, tone=tone), thread_ts=row.message_ts)
        await self.edit(row.channel_id, row.message_ts, await self.render(row, cluster, silence))
        if coordination and row.coordination_ts:
            kind = self.kind(row)
            view = self._view(kind, await self.members(row), cluster, silence)
            line = self.presenter.coordination(kind, view, channel=row.channel_id)
            await self.edit(self.program.coordination_channel, row.coordination_ts, line)
        if coordination:
            await self.follow_escalation(row)

    async def reopen(
        self, row: Episode, values: dict[str, object], *, cluster: Cluster | None, silence: Silence | None
    ) -> None:
        """It failed again soon after it recovered: the same episode, but a new message (an edit far up the
        channel is seen by nobody), linked to the earlier one, whose thread points at the new one."""
        old_channel, old_ts = row.channel_id, row.message_ts
        was_silenced = row.silenced  # its message then was the silenced alert's thread, not its own
        follows = await self.permalink(old_channel, old_ts) if old_ts and not was_silenced else None
        await self.update(
            row,
            {
                "state": "open",
                "closed_at": None,
                "reopened": row.reopened + 1,
                **values,
                # A new failure: a new message to own; the old acknowledgement was for the old one.
                "message_ts": None,
                "coordination_ts": None,
                "storm_id": None,
                "silenced": False,
                "acked_by": None,
                "acked_at": None,
                "escalated_at": None,  # and so was its escalation: the new one may escalate in its turn
                "escalation_ts": None,
                "remind_at": None,  # and so was a Watch's reminder
                "posted_at": None,
                "follows": follows,
            },
        )
        if self.on_change is not None:
            self.on_change(row.org_id)
        await self.announce([row], silence=silence, cluster=cluster)
        if old_ts and not was_silenced and not row.silenced and row.message_ts and row.message_ts != old_ts:
            link = await self.permalink(row.channel_id, row.message_ts)
            await self.post(old_channel, self.presenter.continued(row, link=link), thread_ts=old_ts)

    async def refresh(self, row: Episode, *, coordination: bool = False) -> None:
        """Edit an episode's message after an acknowledgement or a silence (and, when told, its coordination
        line: an idle notice's growing idle time)."""
        if not row.message_ts or not row.channel_id or row.silenced:
            return
        silence = await self.silence_for(row.org_id, row.backend, row.cluster_name)
        cluster = await self._cluster_now(row)  # None: the message keeps its other facts, group health unknown
        await self.edit(row.channel_id, row.message_ts, await self.render(row, cluster, silence))
        if coordination and row.coordination_ts:
            kind = self.kind(row)
            line = self.presenter.coordination(
                kind, self._view(kind, await self.members(row), cluster, silence), channel=row.channel_id
            )
            await self.edit(self.program.coordination_channel, row.coordination_ts, line)
        await self.follow_escalation(row)

    # ------------------------------------------------------------------ escalations

    async def escalation(self, row: Episode, *, now: datetime | None = None) -> Reply:
        """The escalation of an alert (a storm's, by its first episode) as it stands: while nobody owns it,
        the org's operators and its Acknowledge button; then who acknowledged it, and whether it is over.
        bot.alerts.escalation posts it; the desk edits it with the alert, so it never stays red after."""
        kind = self.kind(row)
        members = tuple(await self.members(row))
        unowned = any(m.state == "open" for m in members) and not row.acked_by
        view = AlertView(
            rows=members,
            org_name=self.org_name(row.org_id),
            tz=self.tz,
            now=now or self.clock(),
            silence=None,
            actions=tuple(a for a in kind.actions(members) if a is Action.ACKNOWLEDGE and unowned),
        )
        org = self.program.org(row.org_id)
        minutes = (org.escalate_after_minutes or 0) if org else 0
        link = await self.permalink(row.channel_id, row.message_ts) if row.message_ts else None
        return self.presenter.escalation(kind, view, link=link, operators=operators(org), minutes=minutes)

    async def follow_escalation(self, row: Episode) -> None:
        """Edit the alert's escalation, if it was escalated, to what the alert is now."""
        if row.escalation_ts:
            reply = await self.escalation(row)
            await self.edit(self.program.coordination_channel, row.escalation_ts, reply)

    # ------------------------------------------------------------------ people acting on alerts

    async def acknowledge(self, row: Episode, *, user_id: str) -> AlreadyAcknowledged | None:
        """Record who owns it; None when done, else why nothing changed."""
        if row.acked_by:
            return AlreadyAcknowledged(by=row.acked_by, at=row.acked_at)
        now = self.clock()
        for member in await self.members(row):
            await self.update(member, {"acked_by": user_id, "acked_at": now})
        row.acked_by, row.acked_at = user_id, now
        if row.message_ts:
            note = self.presenter.acknowledged(user_id, at=now, tz=self.tz)
            await self.post(row.channel_id, note, thread_ts=row.message_ts)
        await self.refresh(row)
        return None

    async def watch(self, row: Episode, *, user_id: str) -> AlreadyAcknowledged | None:
        """Watch: acknowledge it (escalation stops, the alert shows who), and remind them in its thread after
        WATCH_FOR if it is still open then (bot.alerts.escalation posts the reminder); None when done."""
        if row.acked_by:
            return AlreadyAcknowledged(by=row.acked_by, at=row.acked_at)
        now = self.clock()
        remind_at = now + WATCH_FOR
        for member in await self.members(row):
            await self.update(member, {"acked_by": user_id, "acked_at": now, "remind_at": remind_at})
        row.acked_by, row.acked_at, row.remind_at = user_id, now, remind_at
        if row.message_ts:
            hours = WATCH_FOR.total_seconds() / 3600
            note = self.presenter.note(
                f":eyes: <@{user_id}> is watching this (acknowledged at {now.astimezone(self.tz):%H:%M}); a reminder "
                f"comes here in {hours:g} h ({remind_at.astimezone(self.tz):%H:%M}) if it is still open."
            )
            await self.post(row.channel_id, note, thread_ts=row.message_ts)
        await self.refresh(row)
        return None

    async def remind(self) -> int:
        """Post the Watch reminders that are due (claimed once across replicas); how many."""
        now = self.clock()
        async with self.db.session() as session:
            rows = [r for r in await crud.open_episodes(session) if r.remind_at is not None and r.remind_at <= now]
        posted = 0
        for row in rows:
            async with self.db.session() as session:
                if not await crud.claim_reminder(session, episode_id=row.id or 0, due=now):
                    continue
            if not row.message_ts or not row.channel_id:
                continue
            since = row.acked_at or row.opened_at
            hours = max(0.0, (now - since).total_seconds() / 3600)
            who = f"<@{row.acked_by}>" if row.acked_by else "Whoever watches this"
            note = self.presenter.note(
                f":alarm_clock: {who}: still open {hours:.1f} h after Watch was pressed. Look again: run a deep "
                "health check, replace the node, or acknowledge it for good.",
                tone=Tone.WORSE,
            )
            if await self.post(row.channel_id, note, thread_ts=row.message_ts):
                posted += 1
        return posted

    async def silence(self, row: Episode, *, user_id: str, hours: int) -> tuple[datetime, AlreadySilenced | None]:
        """Hold back new alert messages of the cluster (every kind alike); what they would have said goes to
        this alert's thread, one line each. Returns until when, and why nothing changed (None when silenced
        now): a cluster silenced already gets no second silence, or Unsilence of one would leave the other
        holding alerts back."""
        now = self.clock()
        until = now + timedelta(hours=hours)
        async with self.db.session() as session:
            current = await crud.active_silence(
                session,
                org_id=row.org_id,
                backend=row.backend,
                cluster_name=row.cluster_name,
                now=now,
                also=tuple(sorted((CLUSTER_BACKENDS | self._loose_sources) - {row.backend})),
            )
        if current is not None:
            return current.until, AlreadySilenced(
                org_id=row.org_id, cluster_name=row.cluster_name, until=current.until, by=current.set_by
            )
        async with self.db.session() as session:
            silence = await crud.add_silence(
                session,
                silence=Silence(
                    org_id=row.org_id,
                    backend=row.backend,
                    cluster_name=row.cluster_name,
                    until=until,
                    set_by=user_id,
                    channel_id=row.channel_id,
                    thread_ts=row.message_ts or "",
                    created_at=now,
                ),
            )
        if row.message_ts:
            message = self.presenter.silence_message(silence, tz=self.tz)
            ts = await self.post(row.channel_id, message, thread_ts=row.message_ts)
            if ts:
                async with self.db.session() as session:
                    await crud.update_silence(session, silence_id=silence.id or 0, values={"message_ts": ts})
        await self.refresh(row)
        return until, None

    async def unsilence(self, silence: Silence, *, user_id: str) -> AlreadyEnded | None:
        """End a silence now; None when done, else why nothing changed (it had ended already)."""
        now = self.clock()
        async with self.db.session() as session:
            ended = await crud.end_silence(session, silence_id=silence.id or 0, by=user_id, now=now)
            current = await crud.get_silence(session, silence_id=silence.id or 0)
        if not ended:
            if current is not None and current.ended_at is not None:
                return AlreadyEnded(by=current.ended_by, at=current.ended_at, early=True)
            return AlreadyEnded(by=None, at=silence.until, early=False)
        silence = current or silence
        if silence.message_ts:  # first what stays (its message, the alert), then the line in the thread
            await self.edit(silence.channel_id, silence.message_ts, self.presenter.silence_message(silence, tz=self.tz))
        if silence.thread_ts:
            async with self.db.session() as session:
                source = await crud.episode_with_message(
                    session, channel_id=silence.channel_id, message_ts=silence.thread_ts
                )
            if source is not None:
                await self.refresh(source)
            line = self.presenter.silence_ended(silence, user_id=user_id, at=now, tz=self.tz)
            await self.post(silence.channel_id, line, thread_ts=silence.thread_ts)
        # What it held back and is still open is posted now, not left in its thread for good.
        async with self.db.session() as session:
            held = [r for r in await crud.open_episodes(session, org_id=silence.org_id) if r.silenced]
        await self.release_held([r for r in held if r.cluster_name == silence.cluster_name])
        return None

    # ------------------------------------------------------------------ Slack, failures logged

    async def post(self, channel: str, reply: Reply, *, thread_ts: str | None = None) -> str | None:
        try:
            return await self.poster.post(channel=channel, reply=reply, thread_ts=thread_ts)
        except Exception as error:
            log.warning("could not post an alert in %s: %s", channel, describe_error(error))
            return None

    async def permalink(self, channel: str, ts: str) -> str | None:
        """The link to a message (chat.getPermalink, a read through the poster's client); None if Slack fails."""
        try:
            answer = await self.poster.client.chat_getPermalink(channel=channel, message_ts=ts)
        except Exception as error:
            log.warning("no permalink for %s in %s: %s", ts, channel, describe_error(error))
            return None
        link = answer.get("permalink")
        return str(link) if link else None

    async def edit(self, channel: str, ts: str, reply: Reply) -> None:
        try:
            await self.poster.update(channel=channel, ts=ts, reply=reply)
        except Exception as error:
            log.warning("could not edit alert %s in %s: %s", ts, channel, describe_error(error))

    async def upload(self, channel: str, *, filename: str, content: bytes, title: str, thread_ts: str | None) -> None:
        try:
            await self.poster.upload(
                channel=channel, filename=filename, content=content, title=title, thread_ts=thread_ts
            )
        except Exception as error:
            log.warning("could not upload %s to %s: %s", filename, channel, describe_error(error))
