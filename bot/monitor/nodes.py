"""The node monitor: looks at clusters (every org on a schedule, or one cluster when EventBridge says
something happened) and turns what it sees into episodes with bot.monitor.episodes; the alert desk
(bot.alerts.desk) stores and posts them.

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

from bot.alerts.desk import AlertDesk
from bot.alerts.kind import Tone
from bot.clusters import requests
from bot.clusters.fleet import Fleet
from bot.clusters.model import Backend, Cluster
from bot.clusters.requests import Kind
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
from storage import crud
from storage.models import Episode, EpisodeKind, Operation, Silence

if TYPE_CHECKING:
    from bot.metrics import Metrics

log = logging.getLogger(__name__)
EVENTS_REMEMBERED = timedelta(days=1)  # far longer than SQS's redelivery and SageMaker's repeats
WATCHED = frozenset({EpisodeKind.NODE.value, EpisodeKind.CLUSTER.value})  # the kinds this monitor opens


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
        key=row.node_key,
    )


def _replacement(operation: Operation) -> Replacement | None:
    """A confirmed replace as the episodes need it: the ids AWS accepted, the group before, when."""
    if operation.started_at is None:
        return None
    try:
        request = requests.from_json(Kind(operation.kind), Backend(operation.backend), operation.request)
    except (requests.BadRequest, ValueError):  # a row no plan wrote: not a replacement to follow
        return None
    if not isinstance(request, requests.NodeRequest):
        return None
    return Replacement(
        node_ids=frozenset(request.successful or ()),
        before_ids=frozenset(request.before_ids),
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
        self._locks: dict[tuple[str, str, str], asyncio.Lock] = defaultdict(asyncio.Lock)

    def _clock(self) -> datetime:
        return self._desk.clock()  # the desk's, one clock for the looks and the alerts' grace periods

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
            await self._desk.retry_unposted(rows)
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
        return [row for row in rows if row.kind in WATCHED]

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
        silence = await self._desk.silence_for(org_id, backend, name)
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
                await self._desk.note(row, change.note, cluster=cluster, silence=silence)
        for closing in verdict.closed:
            row = by_id[closing.episode_id]
            lost = row.node_hours_lost + (
                hours_lost(row.failing_since or row.opened_at, now) if row.kind == EpisodeKind.NODE.value else 0
            )
            values = {
                "state": "closed",
                "closed_at": now,
                "updated_at": now,
                "node_hours_lost": lost,
                "outcome": closing.note[:500],  # what it is now: the recovered alert says it
            }
            if not await self._desk.close(row, values):
                continue  # closed already (another replica, or the event path)
            touched.add(row.group_name)
            told.add(row.id or 0)
            await self._desk.note(row, closing.note, cluster=cluster, silence=silence, tone=Tone.RECOVERED)
        new_rows: list[Episode] = []
        for opening in verdict.opened:
            touched.add(opening.group)
            if opening.reopens is not None and opening.reopens in by_id:
                reopening: dict[str, object] = {
                    "status": opening.status,
                    "message": opening.message[:1000],
                    "failed_status": opening.status,
                    "failed_message": opening.message[:1000],
                    "outcome": "",
                    "failing_since": now,
                    "updated_at": now,
                    "group_nodes": sorted(opening.group_nodes),
                    "group_target": opening.group_target,
                }
                await self._desk.reopen(by_id[opening.reopens], reopening, cluster=cluster, silence=silence)
                told.add(opening.reopens)
                continue
            added = await self._open(org_id, backend, name, opening, now)
            if added is not None:  # None: another replica opened it first, and posts it
                new_rows.append(added)
        if new_rows:
            await self._desk.announce(new_rows, silence=silence, cluster=cluster, storm=verdict.storm)
        if cluster is not None:
            await self._refresh_groups(rows, touched, told, cluster, silence)

    async def _refresh_groups(
        self, rows: Sequence[Episode], groups: set[str], told: set[int], cluster: Cluster, silence: Silence | None
    ) -> None:
        """Re-render the open alerts of groups whose health just changed ("Group health now" stays true)."""
        seen: set[str] = set()
        for row in rows:
            if (
                row.state != "open"
                or row.kind != EpisodeKind.NODE.value
                or row.group_name not in groups
                or (row.id or 0) in told
                or row.silenced
                or not row.message_ts
                or row.message_ts in seen
            ):
                continue
            seen.add(row.message_ts)
            await self._desk.edit(row.channel_id, row.message_ts, await self._desk.render(row, cluster, silence))

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
                failed_status=opening.status,  # kept while `status` follows the node, or its replacement
                failed_message=opening.message[:1000],
                opened_at=now,
                failing_since=now,
                updated_at=now,
                group_nodes=sorted(opening.group_nodes) if opening.kind == "node" else None,
                group_target=opening.group_target,
            )
        )

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
