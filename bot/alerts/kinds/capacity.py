"""Reserved capacity about to end (a training plan, a Capacity Block, a capacity reservation): one episode per
reservation and notice level ("24h", "2h"), so each notice is posted once across replicas (the episode key).

Its episode (written by bot.capacity.monitor): backend "capacity"; cluster_name the reservation's key (the
plan's name or the reservation's id); node_key "<level>@<end, epoch seconds>" (a reservation extended to a
later end is told again); status the level; instance_type the reserved type; group_name the source
(bot.capacity.model.Source); failing_since when the capacity goes; message what it takes away
(bot.capacity.notices.describe / read_details); closed once the reservation has ended."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.alerts.kind import Action, Bucket
from storage.models import Episode

NAME = "capacity"
SOURCE = "capacity"  # Episode.backend: a reservation is no cluster's backend
ENDED = "ended"  # Episode.status of a closed one: the capacity is gone
EXTENDED = "extended"  # Episode.status of a closed one whose reservation's end moved (a notice of the new end follows)


@dataclass(frozen=True)
class CapacityKind:
    name: str = NAME
    bucket: Bucket | None = None  # a notice ahead of time: nothing failed, nothing for the digest to count
    source: str | None = SOURCE
    reads_cluster: bool = False

    def actions(self, rows: Sequence[Episode]) -> tuple[Action, ...]:
        return (Action.ACKNOWLEDGE,)


KIND = CapacityKind()
