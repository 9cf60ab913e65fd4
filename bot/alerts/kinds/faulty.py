"""A node that diverges from its peers persistently (XIDs, a throttled GPU, a degraded EFA link) while it is
still up: keyed by the node's id, opened by bot.monitor.faulty even when no job has slowed yet.

Its Episode.backend is the cluster's own backend (the monitor reads it from the clusters Pitcrew knows), so
its silences are the cluster's and its Replace/Reboot buttons are those of a failed node's alert."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.alerts.kind import Action, Bucket
from bot.alerts.severity import ordered, severity
from bot.clusters.model import Backend
from storage.models import Episode, EpisodeKind

LEFT = "left"  # Episode.status of a closed one whose node left the cluster (replaced or removed)
CLEARED = "cleared"  # Episode.status of a closed one whose node is back in line with its peers


@dataclass(frozen=True)
class FaultyNodeKind:
    name: str = EpisodeKind.FAULTY_NODE.value
    # In no digest bucket: a faulty node is a warning about a node that still works. No node-hour is lost
    # while it limps (a slowdown it causes is counted as the job's stall episode, a failure that follows as
    # the node's failure); counting it as a FAILURE too would count one bad node twice.
    bucket: Bucket | None = None
    source: str | None = None
    reads_cluster: bool = False

    def actions(self, rows: Sequence[Episode]) -> tuple[Action, ...]:
        # Replace and reboot act on one node of HyperPod, as on a failed node's alert.
        hyperpod = len(rows) == 1 and rows[0].backend == Backend.HYPERPOD.value and bool(rows[0].node_ids)
        node = (Action.REPLACE, Action.REBOOT, Action.CHECK) if hyperpod else ()
        actions = (Action.ACKNOWLEDGE, *node, Action.SILENCE)
        if len(rows) != 1:
            return actions
        row = rows[0]
        return ordered(actions, severity([row.message, row.diagnosis], faulty=True))


KIND = FaultyNodeKind()
