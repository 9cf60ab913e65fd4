"""A training job's throughput anomaly (status "stall" or "slowdown"), keyed by the job's name; its chart
goes in the thread (bot.monitor.jobs)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.alerts.kind import Action, Bucket
from storage.models import Episode, EpisodeKind

SOURCE = "throughput"  # Episode.backend of a job's episode: a job names its cluster, not the cluster's backend


@dataclass(frozen=True)
class JobKind:
    name: str = EpisodeKind.JOB.value
    bucket: Bucket | None = Bucket.STALL
    source: str | None = SOURCE
    reads_cluster: bool = False

    def actions(self, rows: Sequence[Episode]) -> tuple[Action, ...]:
        return (Action.ACKNOWLEDGE, Action.SILENCE)


KIND = JobKind()
