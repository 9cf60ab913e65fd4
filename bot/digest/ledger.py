"""The usage ledger: what each org's clusters hold, stored as steps, and a one-time notice in the org's
channel when it holds 80% and 100% of its quota of a type.

Fed by the node sweep (on the leader) with each org's complete listing, which also keeps the clusters table
(the clusters as last seen) current. A state row is written only when a count changes, so a sweep that sees
the same clusters writes nothing; instance-hours are the integral of those steps (compute.instance_hours)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Protocol

from bot.clusters.held import cluster_held
from bot.clusters.model import Backend, Cluster
from bot.config import ProgramConfig, normalize_instance_type
from bot.digest.compute import quota_levels
from bot.publishing import Publisher, Reply
from storage import crud, tracking
from storage.db import Database
from storage.models import ClusterSeen, QuotaNotice, utcnow

log = logging.getLogger(__name__)
LEVELS = (80, 100)
# A level's notice may come again only once the holding drops this far below it: an org running at its quota
# dips by a node at every replacement, and must not be told "100%" again each time.
REARM_BELOW = {80: 0.7, 100: 0.9}


def cluster_seen_rows(clusters: Sequence[Cluster], *, at: datetime) -> list[ClusterSeen]:
    return [
        ClusterSeen(
            org_id=c.org,
            backend=c.backend.value,
            name=c.name,
            status=c.status,
            nodes_total=len(c.nodes),
            nodes_healthy=c.healthy,
            nodes_unhealthy=len(c.unhealthy),
            compute_fleet=c.extra.get("compute_fleet", "") if c.backend is Backend.PCLUSTER else "",
            instances=dict(cluster_held(c)),  # what it holds, as plans count it (bot.clusters.held)
            last_seen_at=at,
        )
        for c in clusters
    ]


class QuotaNotices(Protocol):
    """How a quota notice reads (bot.digest.render.SlackDigest)."""

    def quota_notice(self, *, org_name: str, instance_type: str, held: int, quota: int, level: int) -> Reply: ...


class UsageLedger:
    def __init__(
        self,
        *,
        db: Database,
        poster: Publisher,
        program: ProgramConfig,
        presenter: QuotaNotices,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._db = db
        self._poster = poster
        self._presenter = presenter
        self._program = program
        self.clock = clock

    async def observe(self, org_id: str, clusters: Sequence[Cluster]) -> int:
        """Record an org's complete listing; returns how many quota notices were posted."""
        now = self.clock()
        held: Counter[tuple[str, str, str]] = Counter()
        for cluster in clusters:
            for instance_type, count in cluster_held(cluster).items():
                held[(cluster.backend.value, cluster.name, normalize_instance_type(instance_type))] += count
        async with self._db.session() as session:
            await tracking.record_cluster_states(session, org_id=org_id, held=held, at=now)
            # The clusters as last seen, for the living document's "clusters now" (deleted ones leave it).
            await crud.record_clusters_seen(session, rows=cluster_seen_rows(clusters, at=now))
            await crud.forget_clusters_gone(session, org_id=org_id, seen={(c.backend.value, c.name) for c in clusters})
        by_type: Counter[str] = Counter()
        for (_, _, instance_type), count in held.items():
            by_type[instance_type] += count
        return await self._notices(org_id, by_type, now)

    async def _notices(self, org_id: str, held: Counter[str], now: datetime) -> int:
        org = self._program.org(org_id)
        if org is None:
            return 0
        posted = 0
        for instance_type, level in quota_levels(held, org.quota).items():
            quota = org.quota_for(instance_type) or 0
            kept = max((lvl for lvl in LEVELS if held[instance_type] >= REARM_BELOW[lvl] * quota), default=0)
            async with self._db.session() as session:
                await tracking.clear_quota_notices(session, org_id=org_id, instance_type=instance_type, above=kept)
                # Store every level reached (a jump from 50% to 100% passes 80% too), announce the highest new one.
                new = [
                    lvl
                    for lvl in LEVELS
                    if lvl <= level
                    and await tracking.add_quota_notice(
                        session,
                        notice=QuotaNotice(
                            org_id=org_id,
                            instance_type=instance_type,
                            level=lvl,
                            held=held[instance_type],
                            quota=quota,
                            at=now,
                        ),
                    )
                ]
            if not new:
                continue
            reply = self._presenter.quota_notice(
                org_name=org.name, instance_type=instance_type, held=held[instance_type], quota=quota, level=max(new)
            )
            try:
                await self._poster.post(channel=org.channel, reply=reply)
                posted += 1
            except Exception:  # the notice is stored: a Slack failure loses this one message, not the ledger
                log.exception("quota notice for %s %s not posted", org_id, instance_type)
        return posted
