"""A training job's throughput anomaly (status "stall" or "slowdown"), keyed by the job's name; its chart
goes in the thread (bot.monitor.jobs).

When per-node metrics name a culprit on a HyperPod cluster, the monitor puts that node in Episode.node_ids
(the node the alert's buttons act on; empty otherwise), and the alert offers Replace node and Reboot node
for it: the same plan and Confirm as a failed node's alert."""

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
        node = (Action.REPLACE, Action.REBOOT) if len(rows) == 1 and rows[0].node_ids else ()
        return (Action.ACKNOWLEDGE, *node, Action.SILENCE)


KIND = JobKind()
