"""Which ending notices are due, and what a notice says it takes away. Pure."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.capacity.model import Reservation

# Most urgent first: a reservation first seen 90 minutes before its end gets the 2 h notice only.
LEVELS: tuple[tuple[str, timedelta], ...] = (("2h", timedelta(hours=2)), ("24h", timedelta(hours=24)))
MAX_MESSAGE = 1000  # Episode.message


@dataclass(frozen=True)
class Notice:
    reservation: Reservation
    level: str  # "24h" or "2h"

    @property
    def node_key(self) -> str:
        end = self.reservation.end
        assert end is not None
        return f"{self.level}@{int(end.timestamp())}"


def due(reservations: Iterable[Reservation], now: datetime) -> list[Notice]:
    """The notice each reservation is due now: the most urgent level whose lead time it is within, and none
    for one with no end, or that has ended."""
    notices = []
    for reservation in reservations:
        end = reservation.end
        if end is None or now >= end:
            continue
        left = end - now
        level = next((label for label, lead in LEVELS if left <= lead), None)
        if level is not None:
            notices.append(Notice(reservation, level))
    return notices


def describe(reservation: Reservation) -> str:
    """What a notice stores of the reservation (Episode.message): its size and who uses it, as JSON."""
    details: dict[str, Any] = {
        "name": reservation.name,
        "total": reservation.total,
        "zone": reservation.zone,
        "clusters": [list(entry) for entry in reservation.clusters],
    }
    text = json.dumps(details, separators=(",", ":"))
    while len(text) > MAX_MESSAGE and details["clusters"]:
        details["clusters"].pop()
        details["more"] = details.get("more", 0) + 1
        text = json.dumps(details, separators=(",", ":"))
    return text


@dataclass(frozen=True)
class Details:
    name: str
    total: int
    zone: str
    clusters: tuple[tuple[str, str, int], ...]
    more: int = 0

    @property
    def nodes(self) -> int:
        return sum(count for _, _, count in self.clusters)


def read_details(message: str, *, fallback_name: str) -> Details:
    """Episode.message back as Details; an unreadable one reads as a reservation nobody was seen to use."""
    try:
        data = json.loads(message)
        clusters: Sequence[Any] = data.get("clusters", [])
        return Details(
            name=str(data.get("name", fallback_name)),
            total=int(data.get("total", 0)),
            zone=str(data.get("zone", "")),
            clusters=tuple((str(c), str(g), int(n)) for c, g, n in clusters),
            more=int(data.get("more", 0)),
        )
    except (ValueError, TypeError, AttributeError):
        return Details(name=fallback_name, total=0, zone="", clusters=())
