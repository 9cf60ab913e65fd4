"""What an org's Home section shows, as plain values, and the pure rules that derive it (reservations ending
soon, idle accelerators, instances held against quota). Read from storage by bot.home.gather; drawn by
bot.home.render."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from bot.capacity.model import LIVE_STATUSES, Reservation
from bot.clusters.health import ClusterHealth, seen_health
from bot.config import normalize_instance_type
from bot.digest.facts import Goodput

ENDING_WITHIN = timedelta(hours=48)  # reserved capacity ending within this is shown


class Viewer(StrEnum):
    ADMIN = "admin"  # every org
    MEMBER = "member"  # their own orgs (operator or viewer in each)
    OUTSIDER = "outsider"  # no org and not an admin


@dataclass(frozen=True)
class ClusterLine:
    backend: str
    name: str
    status: str
    healthy: int
    total: int
    instances: tuple[tuple[str, int], ...] = ()  # (instance type, count), by type
    unhealthy: int = 0  # the rest of those not healthy are in transition
    compute_fleet: str = ""  # ParallelCluster's computeFleetStatus; "" where there is none

    @property
    def health(self) -> ClusterHealth:
        """Its health and colour by the one rule every view uses (bot.clusters.health)."""
        return seen_health(
            backend=self.backend,
            status=self.status,
            compute_fleet=self.compute_fleet,
            total=self.total,
            healthy=self.healthy,
            unhealthy=self.unhealthy,
        )


@dataclass(frozen=True)
class QuotaLine:
    instance_type: str
    held: int
    quota: int


@dataclass(frozen=True)
class IdleLine:
    cluster_name: str
    instance_type: str
    nodes: int
    since: datetime | None


@dataclass(frozen=True)
class AlertLine:
    """One open alert, for the Open alerts list."""

    id: int
    kind: str
    cluster_name: str
    node_key: str
    status: str
    since: datetime | None  # when it began (a capacity notice: when it was posted)
    acknowledged: bool
    link: str | None = None
    ends: datetime | None = None  # a capacity notice: when the reserved capacity ends


@dataclass(frozen=True)
class ApprovalLine:
    """A change of the org waiting for approval (bot.approvals)."""

    summary: str  # "delete kumo-labs/kumo-p5-train"
    requested_by: str
    why: str
    approvers: str  # "admins" | "operators"
    needed: int
    expires_at: datetime


@dataclass(frozen=True)
class OrgHome:
    org_id: str
    name: str
    channel: str = ""
    clusters: tuple[ClusterLine, ...] = ()
    alerts: Mapping[str, int] = field(default_factory=dict)  # open alerts by kind (idle ones included)
    incidents: int = 0  # open tracking incidents
    quota: tuple[QuotaLine, ...] = ()
    ending: tuple[Reservation, ...] = ()  # reserved capacity ending within ENDING_WITHIN, soonest first
    capacity_error: str | None = None  # reservations could not be read
    idle: tuple[IdleLine, ...] = ()
    doctor_failed_at: datetime | None = None  # the last `pitcrew doctor` run found problems (admins see them)
    doctor_problems: tuple[str, ...] = ()  # its failing lines, "CHECK: what is wrong and the fix"
    goodput: Goodput | None = None  # this week's so far (bot.digest.goodput)
    goodput_last_week: Goodput | None = None
    approvals: tuple[ApprovalLine, ...] = ()  # every change of the org waiting for approval, oldest first

    @property
    def open_alerts(self) -> int:
        return sum(self.alerts.values())

    @property
    def attention(self) -> int:
        """How much in this org asks for a look (the admin view lists those orgs first)."""
        unhealthy = sum(1 for c in self.clusters if c.healthy < c.total)
        unread = 1 if self.capacity_error is not None else 0  # said in its section, so not among the quiet
        setup = 1 if self.doctor_failed_at is not None else 0
        return self.open_alerts + self.incidents + len(self.ending) + len(self.idle) + unhealthy + unread + setup


@dataclass(frozen=True)
class HomeFacts:
    """Everything one person's Home shows."""

    viewer: Viewer
    user_id: str
    now: datetime
    orgs: tuple[OrgHome, ...] = ()
    roles: Mapping[str, str] = field(default_factory=dict)  # org id -> "operator" | "viewer" (members)
    digest_link: str | None = None  # the last digest's summary in the coordination channel (admins)
    digest_week: str | None = None
    # org id -> (link, week) of the last digest posted in that org's channel: a member is linked to their own
    # org's section, not the coordination thread that holds every org's
    org_digests: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    program: str = ""
    admins: tuple[str, ...] = ()  # whom an outsider should ask
    to_approve: tuple[ApprovalLine, ...] = ()  # changes waiting for this person's approval, oldest first


def ending_soon(
    reservations: Iterable[Reservation], *, now: datetime, within: timedelta = ENDING_WITHIN
) -> tuple[Reservation, ...]:
    """Live reservations whose end falls in [now, now + within), soonest first."""
    chosen = [
        r for r in reservations if r.end is not None and r.status in LIVE_STATUSES and now <= r.end < now + within
    ]
    return tuple(sorted(chosen, key=lambda r: (r.end or now, r.key)))


def quota_lines(held: Mapping[str, int], quota: Mapping[str, int]) -> tuple[QuotaLine, ...]:
    """Each type under quota with what is held of it now (ml.p5 and p5 count together), by type."""
    used: dict[str, int] = {}
    for instance_type, count in held.items():
        key = normalize_instance_type(instance_type)
        used[key] = used.get(key, 0) + count
    lines = {normalize_instance_type(t): limit for t, limit in quota.items()}
    return tuple(QuotaLine(t, used.get(t, 0), limit) for t, limit in sorted(lines.items()))


def idle_line(*, cluster_name: str, instance_type: str, node_ids: Sequence[str], since: datetime | None) -> IdleLine:
    return IdleLine(cluster_name=cluster_name, instance_type=instance_type, nodes=len(node_ids), since=since)
