"""A training job's small, lasting drop (issue 23): 5 % or more below its own level for 2 hours or longer
(bot.monitor.throughput's `degradation`), told as one low-urgency notice in the org's channel: no line in the
coordination channel, never escalated (bot.alerts.desk NOT_COORDINATED, bot.alerts.escalation NOT_ESCALATED).
Edited while it lasts, closed when the job is back or when the drop deepens into a slowdown, which then has
its own job alert: the same episode is never told as both.

Its episode (written by bot.monitor.jobs): kind "degradation", backend "throughput" (a job names its cluster
only, as a job alert does), node_key the job, status "degradation" (its message says whether the job came
back or a slowdown took over); failing_since when the drop began; cause and suspects from the per-node metrics, as a
slowdown's. The digest counts it with the throughput episodes (and goodput its missing fraction)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.alerts.kind import Action, Bucket
from bot.alerts.kinds.job import SOURCE
from storage.models import Episode

NAME = "degradation"
STATUS = "degradation"  # Episode.status, open or closed


@dataclass(frozen=True)
class DegradationKind:
    name: str = NAME
    bucket: Bucket | None = Bucket.STALL  # a throughput episode: the digest lists it, goodput counts what it cost
    source: str | None = SOURCE
    reads_cluster: bool = False

    def actions(self, rows: Sequence[Episode]) -> tuple[Action, ...]:
        return (Action.ACKNOWLEDGE, Action.SILENCE)


KIND = DegradationKind()
