"""What an alert kind is to the desk: its name (Episode.kind), its digest bucket, the buttons it offers, and
where its silences come from. Plain data: a kind's Block Kit is its presenter's (bot.slack.alerts)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol
from zoneinfo import ZoneInfo

from bot.clusters.model import Cluster
from storage.models import Episode, Silence


class Bucket(StrEnum):
    """Where the weekly digest counts a kind's episodes; a kind in none is not counted at all."""

    FAILURE = "failure"  # node and cluster failures (node-hours lost, repeated failures)
    STALL = "stall"  # training jobs' throughput episodes


class Action(StrEnum):
    """A button on an open alert."""

    ACKNOWLEDGE = "acknowledge"
    REPLACE = "replace"
    REBOOT = "reboot"
    SILENCE = "silence"  # Silence 1/4/24 h, or Unsilence while the cluster is silenced
    CHECK = "check"  # Run deep health check (HyperPod): plan, Confirm, StartClusterHealthCheck
    WATCH = "watch"  # acknowledge, with a reminder in the thread if it is still open later (a divergence)


class Tone(StrEnum):
    """What a line in an alert's thread tells: news, worse, or that it is over."""

    NEWS = "news"
    WORSE = "worse"
    RECOVERED = "recovered"


@dataclass(frozen=True)
class AlertView:
    """An alert as its presenter renders it: the episode (or a storm's members, the first one named by the
    buttons), the buttons it offers, and the facts read for it now."""

    rows: tuple[Episode, ...]
    org_name: str
    tz: ZoneInfo
    now: datetime
    silence: Silence | None
    actions: tuple[Action, ...]
    cluster: Cluster | None = None  # read only for kinds that show the cluster's health

    @property
    def first(self) -> Episode:
        return self.rows[0]


class AlertKind(Protocol):
    @property
    def name(self) -> str:
        """Episode.kind of its episodes."""
        ...

    @property
    def bucket(self) -> Bucket | None: ...

    @property
    def source(self) -> str | None:
        """Episode.backend of its episodes when that is not a cluster backend (a job names its cluster only);
        None when it is the cluster's backend. A silence of a cluster holds every source of it."""
        ...

    @property
    def reads_cluster(self) -> bool:
        """Whether its message shows the cluster as it is now (read when the message is edited)."""
        ...

    def actions(self, rows: Sequence[Episode]) -> tuple[Action, ...]:
        """The buttons of an open alert of these episodes (one, or a storm's members)."""
        ...
