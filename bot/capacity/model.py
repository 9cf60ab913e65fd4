"""What Pitcrew knows of a reservation, the same for training plans and EC2 capacity reservations. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from bot.config import normalize_instance_type

Source = Literal["training_plan", "capacity_block", "capacity_reservation"]
SOURCE_LABELS: dict[str, str] = {
    "training_plan": "SageMaker training plan",
    "capacity_block": "EC2 Capacity Block for ML",
    "capacity_reservation": "EC2 On-Demand Capacity Reservation",
}
# Statuses (both APIs' words) of a reservation that holds or will hold capacity; the others (Expired, Failed,
# cancelled, payment-failed, ...) are left out of listings and notices.
LIVE_STATUSES = frozenset(
    {"Active", "Scheduled", "Pending", "active", "scheduled", "pending", "payment-pending", "assessing", "delayed"}
)
ACTIVE_STATUSES = frozenset({"Active", "active"})


@dataclass(frozen=True)
class Reservation:
    org_id: str
    source: Source
    id: str  # the training plan's ARN, or the capacity reservation's id (cr-...)
    name: str  # the training plan's name, or the capacity reservation's id
    instance_type: str  # as AWS names it (ml.p5.48xlarge for a training plan)
    total: int
    available: int | None  # None where AWS does not say
    start: datetime | None
    end: datetime | None  # None: no end (an open-ended On-Demand Capacity Reservation)
    status: str  # as AWS says it
    clusters: tuple[tuple[str, str, int], ...] = ()  # (cluster name, instance group or queue, nodes it holds)
    zone: str = ""  # availability zone, where AWS says

    @property
    def label(self) -> str:
        return SOURCE_LABELS[self.source]

    @property
    def active(self) -> bool:
        return self.status in ACTIVE_STATUSES

    @property
    def key(self) -> str:
        """Short and unique in its org: the plan's name, or the reservation's id."""
        return self.name if self.source == "training_plan" else self.id

    @property
    def nodes_used(self) -> int:
        return sum(count for _, _, count in self.clusters)

    def fits(self, instance_type: str) -> bool:
        return normalize_instance_type(self.instance_type) == normalize_instance_type(instance_type)
