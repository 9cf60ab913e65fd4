"""The node monitor: looks at clusters (every org on a schedule, or one cluster when EventBridge says
something happened), turns what it sees into episodes with bot.monitor.episodes, stores them, and posts.

Exactly once: sweeps run on the replica holding the leader lease; an episode is opened by one INSERT under
a unique key (a replica that loses the race posts nothing) and closed by one conditional UPDATE. Within a
process, one cluster is assessed at a time, so a sweep and an event cannot both open the same failure.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from bot.clusters.fleet import Fleet, describe_error
from bot.clusters.model import Backend, Cluster
from bot.monitor.desk import AlertDesk
from bot.monitor.episodes import (
    CLUSTER_KEY,
    RETIRED_WINDOW,
    SUCCESSOR_WINDOW,
    Known,
    Opened,
    Replacement,
    Verdict,
    assess,
    gone,
    hours_lost,
    with_hints,
)
from bot.monitor.events import NodeHint
from bot.slack import alerts
from bot.slack.blocks import Reply, when
from storage import crud
from storage.models import Episode, Operation, Silence

if TYPE_CHECKING:
    from bot.metrics import Metrics

log = logging.getLogger(__name__)
EVENTS_REMEMBERED = timedelta(days=1)  # far longer than SQS's redelivery and SageMaker's repeats
CLUSTER_BACKENDS = frozenset(backend.value for backend in Backend)
THROUGHPUT_BACKEND = "throughput"  # bot.monitor.jobs.BACKEND: a silence set on a job's alert holds these too
UNPOSTED_GRACE = timedelta(minutes=2)  # longer than any opener takes to post its own alert


@dataclass(frozen=True)
class SweepReport:
    orgs: int
    clusters: int
    skipped_orgs: tuple[str, ...]  # could not be read: their episodes are left as they are
    opened: int
    closed: int

    def __bool__(self) -> bool:  # worth a log line
        return bool(self.opened or self.closed or self.skipped_orgs)


def _known(row: Episode) -> Known:
    return Known(
        id=row.id or 0,
        kind=row.kind,
        node_ids=tuple(row.node_ids),
        open=row.state == "open",
        status=row.status,
        message=row.message,
        group=row.group_name,
        opened_at=row.failing_since or row.opened_at,
        closed_at=row.closed_at,
        group_nodes=frozenset(row.group_nodes) if row.group_nodes is not None else None,
        group_target=row.group_target,
    )


def _row_id(value: str) -> int | None:
    """A button's value as the id of an episode or silence (an INTEGER column), or None: ASCII digits only
    ("²".isdigit() is true, and int() refuses it) and in the column's range (Postgres refuses 999999999999)."""
    if not (value.isascii() and value.isdigit()) or len(value) > 10:
        return None
    number = int(value)
    return number if 1 <= number <= 2**31 - 1 else None


def _replacement(operation: Operation) -> Replacement | None:
    """A confirmed replace as the episodes need it: the ids AWS accepted, the group before, when."""
    if operation.started_at is None:
        return None
    request = operation.request
    return Replacement(
        node_ids=frozenset(str(node_id) for node_id in request.get("successful", [])),
        before_ids=frozenset(str(node_id) for node_id in request.get("before_ids", [])),
        started_at=operation.started_at,
        confirmed_by=operation.confirmed_by or "",
    )


class UsageObserver(Protocol):
    """Told each org's complete listing after a sweep (bot.digest.ledger.UsageLedger)."""

    async def observe(self, org_id: str, clusters: Sequence[Cluster]) -> int: ...


class NodeMonitor:
    def __init__(
        self, *, desk: AlertDesk, fleet: Fleet, ledger: UsageObserver | None = None, metrics: Metrics | None = None
    ) -> None:
        self._desk = desk
        self._metrics = metrics  # sweep duration and nodes seen (GET /metrics)
        self._ledger = ledger
        self._db = desk.db
        self._fleet = fleet
        self._program = desk.program
        self._clock = desk.clock
        self._tz = desk.tz
        self._locks: dict[tuple[str, str, str], asyncio.Lock] = defaultdict(asyncio.Lock)

    # ------------------------------------------------------------------ looking

    async def sweep(self) -> SweepReport:
        """Every org's clusters, fresh from AWS, against the stored episodes."""
        started = time.monotonic()
        org_ids = [org.id for org in self._program.orgs]
        listings = await self._fleet.list_orgs(org_ids, fresh=True)
        opened = closed = clusters = 0
        skipped = []
        for listing in listings:
            if listing.errors:  # a backend that could not be read must not look like recovered nodes
                log.warning("sweep skipped %s: %s", listing.org, "; ".join(listing.errors))
                skipped.append(listing.org)
                continue
            rows = await self._episodes(listing.org)
            await self._post_unposted(rows)
            seen = {(c.backend.value, c.name) for c in listing.clusters}
            for cluster in listing.clusters:
                clusters += 1
                verdict = await self._look(cluster, hints={})
                opened, closed = opened + len(verdict.opened), closed + len(verdict.closed)
            for key in {(r.backend, r.cluster_name) for r in rows if r.state == "open"} - seen:
                mine = [r for r in rows if (r.backend, r.cluster_name) == key]
                verdict = gone([_known(r) for r in mine])
                await self._apply(listing.org, key[0], key[1], None, verdict, mine)
                closed += len(verdict.closed)
            if self._ledger is not None:
                try:
                    await self._ledger.observe(listing.org, listing.clusters)
                except Exception:  # usage is bookkeeping: it must not stop the alerts of the next orgs
                    log.exception("usage ledger for %s not recorded", listing.org)
        async with self._db.session() as session:  # event ids are only needed while SQS may redeliver them
            await crud.forget_events_seen(session, before=self._clock() - EVENTS_REMEMBERED)
        if self._metrics is not None:
            self._metrics.swept(
                seconds=time.monotonic() - started, clusters=[c for lo in listings for c in lo.clusters]
            )
        return SweepReport(len(listings), clusters, tuple(skipped), opened, closed)

    async def _post_unposted(self, rows: Sequence[Episode]) -> None:
        """Open episodes whose alert never reached Slack (it failed when they opened): post them now rather
        than never. Only after a grace period, so the opener's own post is not raced, and under a claim, so
        of several replicas one posts. A storm's members are posted together, once."""
        now = self._clock()
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
            async with self._db.session() as session:
                if not await crud.claim_unposted(session, episode_id=members[0].id or 0):
                    continue
            first = members[0]  # a silence set meanwhile holds it back, as it would have at its opening
            silence = await self._silence(first.org_id, first.backend, first.cluster_name)
            await self._announce(members, None, silence, storm=len(members) > 1)
            if not members[0].message_ts:  # Slack failed again: let the next sweep try
                for row in members:
                    await self._desk.update(row, {"message_ts": None})

    async def check(self, org_id: str, backend: Backend, name: str, *, hints: Mapping[str, tuple[bool, str]]) -> None:
        """One cluster now (an EventBridge event named it), with what the event said of its nodes."""
        cluster = await self._fleet.get(org_id, backend, name)
        rows = [r for r in await self._episodes(org_id) if (r.backend, r.cluster_name) == (backend.value, name)]
        if cluster is None:
            await self._apply(org_id, backend.value, name, None, gone([_known(r) for r in rows]), rows)
            return
        await self._look(cluster, hints=hints)

    async def _episodes(self, org_id: str) -> list[Episode]:
        """The org's open node and cluster episodes, and those closed recently (to be reopened, or to know
        which nodes they replaced). Training
        jobs' episodes (bot.monitor.jobs) share the table but not this monitor: a sweep must not close them."""
        now = self._clock()
        async with self._db.session() as session:
            current = list(await crud.open_episodes(session, org_id=org_id))
            # RETIRED_WINDOW, longer than REOPEN_WINDOW: assess reopens only within the latter, and reads the
            # rest for the nodes already replaced (a terminated instance EC2 still lists is no new failure).
            recent = await crud.episodes_between(session, org_id=org_id, since=now - RETIRED_WINDOW, until=now)
        ids = {row.id for row in current}
        rows = current + [row for row in recent if row.id not in ids and row.state == "closed"]
        return [row for row in rows if row.backend in CLUSTER_BACKENDS]

    async def _look(self, cluster: Cluster, *, hints: Mapping[str, tuple[bool, str]]) -> Verdict:
        key = (cluster.org, cluster.backend.value, cluster.name)
        async with self._locks[key]:
            # Read afresh under the lock: the event path may have changed them since the sweep's snapshot.
            mine = [r for r in await self._episodes(cluster.org) if (r.backend, r.cluster_name) == key[1:]]
            replacements = await self._replacements(cluster) if any(r.state == "open" for r in mine) else []
            verdict = assess(
                with_hints(cluster, hints), [_known(r) for r in mine], now=self._clock(), replacements=replacements
            )
            if verdict:
                await self._apply(cluster.org, cluster.backend.value, cluster.name, cluster, verdict, mine)
            return verdict

    async def _replacements(self, cluster: Cluster) -> list[Replacement]:
        """The replaces of this cluster's nodes Pitcrew confirmed lately (the facts a successor needs)."""
        async with self._db.session() as session:
            operations = await crud.confirmed_replacements(
                session,
                org_id=cluster.org,
                backend=cluster.backend.value,
                cluster_name=cluster.name,
                since=self._clock() - SUCCESSOR_WINDOW,
            )
        return [r for r in map(_replacement, operations) if r is not None]

    async def _silence(self, org_id: str, backend: str, name: str) -> Silence | None:
        """The silence holding back this cluster's alerts: set on one of its node alerts or job alerts."""
        async with self._db.session() as session:
            return await crud.active_silence(
                session,
                org_id=org_id,
                backend=backend,
                cluster_name=name,
                now=self._clock(),
                also=(THROUGHPUT_BACKEND,),
            )

    # ------------------------------------------------------------------ acting

    async def _apply(
        self,
        org_id: str,
        backend: str,
        name: str,
        cluster: Cluster | None,
        verdict: Verdict,
        rows: Sequence[Episode],
    ) -> None:
        now = self._clock()
        by_id = {row.id: row for row in rows}
        silence = await self._silence(org_id, backend, name)
        told: set[int] = set()  # episodes whose message this look edits anyway
        touched: set[str] = set()  # groups where a node failed, recovered or moved: their health changed
        for change in verdict.changed:
            row = by_id[change.episode_id]
            values: dict[str, object] = {"status": change.status, "message": change.message[:1000]}
            if change.node_ids:
                values["node_ids"] = list(change.node_ids)
            if change.group_nodes is not None:
                values["group_nodes"] = sorted(change.group_nodes)
                values["group_target"] = change.group_target
            if change.note or change.node_ids != tuple(row.node_ids) or change.status != row.status:
                values["updated_at"] = now  # a bookkeeping-only change (the group's membership) is no news
            await self._desk.update(row, values)
            if change.note:
                touched.add(row.group_name)
                told.add(row.id or 0)
                await self._note(row, change.note, cluster, silence)
        for closing in verdict.closed:
            row = by_id[closing.episode_id]
            lost = row.node_hours_lost + (
                hours_lost(row.failing_since or row.opened_at, now) if row.kind == "node" else 0
            )
            values = {"state": "closed", "closed_at": now, "updated_at": now, "node_hours_lost": lost}
            if not await self._desk.close(row, values):
                continue  # closed already (another replica, or the event path)
            touched.add(row.group_name)
            told.add(row.id or 0)
            await self._note(row, f":large_green_circle: Recovered: {closing.note}", cluster, silence)
        new_rows: list[Episode] = []
        for opening in verdict.opened:
            touched.add(opening.group)
            if opening.reopens is not None and opening.reopens in by_id:
                await self._reopen(by_id[opening.reopens], opening, cluster, silence, now)
                told.add(opening.reopens)
                continue
            added = await self._open(org_id, backend, name, opening, now)
            if added is not None:  # None: another replica opened it first, and posts it
                new_rows.append(added)
        if new_rows:
            await self._announce(new_rows, cluster, silence, storm=verdict.storm)
        if cluster is not None:
            await self._refresh_groups(rows, touched, told, cluster, silence)

    async def _reopen(
        self, row: Episode, opening: Opened, cluster: Cluster | None, silence: Silence | None, now: datetime
    ) -> None:
        """The node failed again soon after it recovered: the same episode, but a new message (an edit far up
        the channel is seen by nobody), linked to the earlier one, whose thread points at the new one."""
        old_channel, old_ts = row.channel_id, row.message_ts
        was_silenced = row.silenced  # its message then was the silenced alert's thread, not its own
        follows = await self._desk.permalink(old_channel, old_ts) if old_ts and not was_silenced else None
        values: dict[str, object] = {
            "state": "open",
            "closed_at": None,
            "reopened": row.reopened + 1,
            "status": opening.status,
            "message": opening.message[:1000],
            "failing_since": now,
            "updated_at": now,
            "group_nodes": sorted(opening.group_nodes),
            "group_target": opening.group_target,
            # A new failure: a new message to own; the old acknowledgement was for the old one.
            "message_ts": None,
            "coordination_ts": None,
            "storm_id": None,
            "silenced": False,
            "acked_by": None,
            "acked_at": None,
            "follows": follows,
        }
        await self._desk.update(row, values)
        await self._announce([row], cluster, silence, storm=False)
        if old_ts and not was_silenced and not row.silenced and row.message_ts and row.message_ts != old_ts:
            link = await self._desk.permalink(row.channel_id, row.message_ts)
            where = f"<{link}|new alert>" if link else "a new alert in the channel"
            note = f":red_circle: `{row.node_ids[-1]}` failed again: `{opening.status}` {opening.message}".strip()
            await self._desk.post(old_channel, alerts.thread_note(f"{note} · continued in {where}"), thread_ts=old_ts)

    async def _refresh_groups(
        self, rows: Sequence[Episode], groups: set[str], told: set[int], cluster: Cluster, silence: Silence | None
    ) -> None:
        """Re-render the open alerts of groups whose health just changed ("Group health now" stays true)."""
        seen: set[str] = set()
        for row in rows:
            if (
                row.state != "open"
                or row.kind != "node"
                or row.group_name not in groups
                or (row.id or 0) in told
                or row.silenced
                or not row.message_ts
                or row.message_ts in seen
            ):
                continue
            seen.add(row.message_ts)
            await self._desk.edit(row.channel_id, row.message_ts, await self._render(row, cluster, silence))

    async def _open(self, org_id: str, backend: str, name: str, opening: Opened, now: datetime) -> Episode | None:
        return await self._desk.open(
            Episode(
                org_id=org_id,
                backend=backend,
                cluster_name=name,
                node_key=opening.node_id,
                kind=opening.kind,
                state="open",
                node_ids=[] if opening.node_id == CLUSTER_KEY else [opening.node_id],
                group_name=opening.group,
                instance_type=opening.instance_type,
                status=opening.status,
                message=opening.message[:1000],
                opened_at=now,
                failing_since=now,
                updated_at=now,
                group_nodes=sorted(opening.group_nodes) if opening.kind == "node" else None,
                group_target=opening.group_target,
            )
        )

    # ------------------------------------------------------------------ posting

    async def _render(self, row: Episode, cluster: Cluster | None, silence: Silence | None) -> Reply:
        if row.kind == "job":  # a training job's throughput episode (bot.monitor.jobs)
            return alerts.job_alert(
                row, org_name=self._desk.org_name(row.org_id), tz=self._tz, now=self._clock(), silence=silence
            )
        if row.storm_id is not None:
            async with self._db.session() as session:
                members = list(await crud.storm_episodes(session, storm_id=row.storm_id))
            return alerts.storm_alert(
                members, cluster=cluster, org_name=self._desk.org_name(row.org_id), tz=self._tz, silence=silence
            )
        return alerts.node_alert(
            row,
            cluster=cluster,
            org_name=self._desk.org_name(row.org_id),
            tz=self._tz,
            now=self._clock(),
            silence=silence,
        )

    async def _announce(
        self, rows: list[Episode], cluster: Cluster | None, silence: Silence | None, *, storm: bool
    ) -> None:
        channel = rows[0].channel_id
        if not channel:
            return
        if silence is not None:  # stored and listed in the silenced alert's thread, no new message
            for row in rows:
                await self._desk.update(row, {"silenced": True, "message_ts": silence.thread_ts})
                what = f"node `{row.node_ids[-1]}` {row.status}" if row.node_ids else f"the cluster {row.status}"
                line = alerts.held_back_line(what, row.message, at=self._clock(), tz=self._tz)
                await self._desk.post(silence.channel_id, line, thread_ts=silence.thread_ts)
            return
        groups = [rows] if storm else [[row] for row in rows]
        for members in groups:
            first = members[0]
            if len(members) > 1:
                for row in members:
                    await self._desk.update(row, {"storm_id": first.id})
            reply = await self._render(first, cluster, None)
            ts = await self._desk.post(channel, reply)
            if ts is None:
                continue  # no alert, so no coordination line either: both come with the retry
            line = alerts.coordination_line(members, channel=channel, now=self._clock())
            coordination_ts = await self._desk.post(self._program.coordination_channel, line)
            for row in members:
                await self._desk.update(row, {"message_ts": ts, "coordination_ts": coordination_ts})

    async def _note(self, row: Episode, note: str, cluster: Cluster | None, silence: Silence | None) -> None:
        """A line in the episode's thread, and its message edited to match."""
        if not row.message_ts or not row.channel_id:
            return
        if row.silenced:  # the note goes to the silenced alert's thread; no message of its own to edit
            thread_channel = silence.channel_id if silence else row.channel_id
            await self._desk.follow_up(
                row, alerts.thread_note(note), thread_channel=thread_channel, message=None, line=None
            )
            return
        line = None
        if row.coordination_ts:
            line = alerts.coordination_line(await self._members(row), channel=row.channel_id, now=self._clock())
        message = await self._render(row, cluster, silence)
        await self._desk.follow_up(
            row, alerts.thread_note(note), thread_channel=row.channel_id, message=message, line=line
        )

    async def refresh(self, row: Episode) -> None:
        """Edit an episode's message after an acknowledgement or a silence."""
        if not row.message_ts or not row.channel_id or row.silenced:
            return
        silence = await self._silence(row.org_id, row.backend, row.cluster_name)
        try:
            known = row.backend in {b.value for b in Backend}  # a job's episode has no cluster backend to read
            cluster = await self._fleet.get(row.org_id, Backend(row.backend), row.cluster_name) if known else None
        except Exception as error:  # the message keeps its other facts; group health shows as unknown
            log.warning("refreshing episode %s: %s", row.id, describe_error(error))
            cluster = None
        await self._desk.edit(row.channel_id, row.message_ts, await self._render(row, cluster, silence))

    # ------------------------------------------------------------------ people acting on alerts

    async def episode(self, episode_id: str) -> Episode | None:
        """The episode a button names; None for a value that is not one (tampered, or deleted)."""
        row_id = _row_id(episode_id)
        if row_id is None:
            return None
        async with self._db.session() as session:
            return await crud.get_episode(session, episode_id=row_id)

    async def _members(self, row: Episode) -> list[Episode]:
        if row.storm_id is None:
            return [row]
        async with self._db.session() as session:
            return list(await crud.storm_episodes(session, storm_id=row.storm_id))

    async def acknowledge(self, row: Episode, *, user_id: str) -> str | None:
        """Record who owns it; None when done, else why nothing changed."""
        if row.acked_by:
            return f"<@{row.acked_by}> acknowledged this already, at {when(row.acked_at, self._tz)}."
        now = self._clock()
        for member in await self._members(row):
            await self._desk.update(member, {"acked_by": user_id, "acked_at": now})
        row.acked_by, row.acked_at = user_id, now
        if row.message_ts:
            note = f":eyes: <@{user_id}> acknowledged this at {when(now, self._tz)}."
            await self._desk.post(row.channel_id, alerts.thread_note(note), thread_ts=row.message_ts)
        await self.refresh(row)
        return None

    async def silence(self, row: Episode, *, user_id: str, hours: int) -> tuple[datetime, str | None]:
        """Hold back new alert messages for the cluster (node, cluster and throughput alerts alike); what they
        would have said goes to this alert's thread, one line each. Returns until when, and why nothing
        changed (None when silenced now): a cluster silenced already gets no second silence, or Unsilence
        of one would leave the other holding alerts back."""
        now = self._clock()
        until = now + timedelta(hours=hours)
        async with self._db.session() as session:
            current = await crud.active_silence(
                session,
                org_id=row.org_id,
                backend=row.backend,
                cluster_name=row.cluster_name,
                now=now,
                also=tuple(sorted((CLUSTER_BACKENDS | {THROUGHPUT_BACKEND}) - {row.backend})),
            )
        if current is not None:
            return current.until, (
                f"`{row.org_id}/{row.cluster_name}` is already silenced until {when(current.until, self._tz)} "
                f"by <@{current.set_by}>; nothing changed. Unsilence in that alert's thread ends it."
            )
        async with self._db.session() as session:
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
            ts = await self._desk.post(
                row.channel_id, alerts.silence_message(silence, tz=self._tz), thread_ts=row.message_ts
            )
            if ts:
                async with self._db.session() as session:
                    await crud.update_silence(session, silence_id=silence.id or 0, values={"message_ts": ts})
        await self.refresh(row)
        return until, None

    async def get_silence(self, silence_id: str) -> Silence | None:
        """The silence an Unsilence button names; None for a value that is not one."""
        row_id = _row_id(silence_id)
        if row_id is None:
            return None
        async with self._db.session() as session:
            return await crud.get_silence(session, silence_id=row_id)

    async def unsilence(self, silence: Silence, *, user_id: str) -> str | None:
        """End a silence now; None when done, else why nothing changed (it had ended already)."""
        now = self._clock()
        async with self._db.session() as session:
            ended = await crud.end_silence(session, silence_id=silence.id or 0, by=user_id, now=now)
            current = await crud.get_silence(session, silence_id=silence.id or 0)
        if not ended:
            if current is not None and current.ended_at is not None:
                by = f" by <@{current.ended_by}>" if current.ended_by else ""
                return f"This silence already ended{by} at {when(current.ended_at, self._tz)}; nothing changed."
            return f"This silence already ended at {when(silence.until, self._tz)}, its set time; nothing changed."
        silence = current or silence
        if silence.message_ts:  # first what stays (its message, the alert), then the line in the thread
            await self._desk.edit(silence.channel_id, silence.message_ts, alerts.silence_message(silence, tz=self._tz))
        if silence.thread_ts:
            async with self._db.session() as session:
                source = await crud.episode_with_message(
                    session, channel_id=silence.channel_id, message_ts=silence.thread_ts
                )
            if source is not None:
                await self.refresh(source)
            ref = f"{silence.org_id}/{silence.cluster_name}"
            at = when(now, self._tz)
            note = f":loud_sound: <@{user_id}> ended the silence at {at}: new alerts of `{ref}` post again."
            await self._desk.post(silence.channel_id, alerts.thread_note(note), thread_ts=silence.thread_ts)
        return None

    # ------------------------------------------------------------------ EventBridge

    async def handle_event(self, hint: NodeHint) -> str:
        """Act on one event from the queue; what became of it, for the log. Safe to repeat: a duplicate
        (SageMaker sends several per change, SQS may deliver twice) is recognized and skipped."""
        async with self._db.session() as session:
            seen = await crud.event_seen(session, event_id=hint.event_id)
        if seen:
            return "duplicate"
        orgs = [
            org
            for org in self._program.orgs
            if org.aws.account_id == hint.account_id and (not hint.region or org.aws.region == hint.region)
        ]
        if not orgs:
            return f"no org has account {hint.account_id} in {hint.region or 'any region'}"
        hints = {hint.node_id: (bool(hint.healthy), hint.reason)} if hint.node_id and hint.healthy is not None else {}
        for org in orgs:  # several orgs may share an account: the cluster's pitcrew:org tag decides whose it is
            await self.check(org.id, Backend.HYPERPOD, hint.cluster_name, hints=hints)
        async with self._db.session() as session:
            await crud.mark_event_seen(session, event_id=hint.event_id, at=self._clock())
        return "handled"
