"""The leader's capacity check: each org's reservations read (bot.capacity.service), the ending notices that
are due opened as "capacity" alerts on the alert desk (one episode per reservation and level: the unique key
makes each posted once, however many replicas check at once), an open notice edited when the nodes it says the
reservation takes change (a fleet stopped, a queue scaled), and the notices of reservations that have ended
closed."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from bot.alerts.desk import AlertDesk
from bot.alerts.kinds import capacity as capacity_kind
from bot.capacity.model import Reservation
from bot.capacity.notices import describe, due
from bot.clusters.fleet import describe_error
from storage import crud
from storage.models import Episode, EpisodeState, utcnow

log = logging.getLogger(__name__)
CHECK_SECONDS = 300.0  # how often the leader checks; a notice is at most this late


class ReservationReader(Protocol):
    async def reservations(self, org_id: str) -> list[Reservation]: ...


@dataclass(frozen=True)
class CapacityReport:
    posted: int = 0
    closed: int = 0
    unreadable: tuple[str, ...] = ()
    updated: int = 0  # open notices edited: the clusters or nodes the reservation takes changed

    def __bool__(self) -> bool:
        return bool(self.posted or self.closed or self.unreadable or self.updated)


class CapacityMonitor:
    def __init__(self, *, desk: AlertDesk, capacity: ReservationReader, clock: Callable[[], datetime] = utcnow) -> None:
        self.desk = desk
        self.capacity = capacity
        self.clock = clock

    async def check(self) -> CapacityReport:
        posted = closed = updated = 0
        unreadable: list[str] = []
        for org in self.desk.program.orgs:
            try:
                reservations = await self.capacity.reservations(org.id)
            except Exception as error:  # nothing opened or closed for it this time
                log.warning("capacity check of %s: %s", org.id, describe_error(error))
                unreadable.append(org.id)
                continue
            o, c, u = await self._org(org.id, reservations)
            posted, closed, updated = posted + o, closed + c, updated + u
        return CapacityReport(posted=posted, closed=closed, unreadable=tuple(unreadable), updated=updated)

    async def _org(self, org_id: str, reservations: list[Reservation]) -> tuple[int, int, int]:
        now = self.clock()
        async with self.desk.db.session() as session:
            rows = [r for r in await crud.open_episodes(session, org_id=org_id) if r.kind == capacity_kind.NAME]
        opened = {(row.cluster_name, row.node_key) for row in rows}
        posted = 0
        for notice in due(reservations, now):
            reservation = notice.reservation
            key = (reservation.key[:63], notice.node_key)
            if key in opened:
                continue
            episode = Episode(
                org_id=org_id,
                backend=capacity_kind.SOURCE,
                cluster_name=key[0],
                node_key=key[1],
                kind=capacity_kind.NAME,
                state=EpisodeState.OPEN.value,
                group_name=reservation.source,
                instance_type=reservation.instance_type[:32],
                status=notice.level,
                message=describe(reservation),
                opened_at=now,
                failing_since=reservation.end,
                updated_at=now,
            )
            row = await self.desk.open(episode)
            if row is None:  # another replica opened it first: it posts it
                continue
            await self.desk.announce([row], silence=None)
            posted += 1
        live = {r.key[:63]: r for r in reservations}
        closed = updated = 0
        for row in rows:
            current = live.get(row.cluster_name)
            ends = row.failing_since
            if current is None or ends is None or now >= ends:
                status = capacity_kind.ENDED  # ended (or gone from AWS's answer: expired, cancelled)
            elif current.end is None or abs((current.end - ends).total_seconds()) > 1:
                status = capacity_kind.EXTENDED  # its end moved: a notice of the new end follows when due
            else:
                told = describe(current)
                if told != row.message:  # who it takes nodes from changed (a fleet stopped, a scale): say so
                    await self.desk.update(row, {"message": told, "updated_at": now})
                    await self.desk.refresh(row)
                    updated += 1
                continue
            if await self.desk.close(row, {"closed_at": now, "updated_at": now, "status": status}):
                await self.desk.refresh(row)
                closed += 1
        return posted, closed, updated
