"""A cluster-level failure (the cluster itself failed, not one of its nodes), keyed "cluster"."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.alerts.kind import Action, Bucket
from storage.models import Episode, EpisodeKind


@dataclass(frozen=True)
class ClusterKind:
    name: str = EpisodeKind.CLUSTER.value
    bucket: Bucket | None = Bucket.FAILURE
    source: str | None = None
    reads_cluster: bool = True

    def actions(self, rows: Sequence[Episode]) -> tuple[Action, ...]:
        return (Action.ACKNOWLEDGE, Action.SILENCE)


KIND = ClusterKind()
