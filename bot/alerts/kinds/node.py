"""A failed node (and the nodes that replaced it while they keep failing), keyed by the instance that
opened it; a storm (many nodes of one cluster at once) is one message for its members."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.alerts.kind import Action, Bucket
from bot.alerts.severity import ordered, severity
from bot.clusters.model import Backend
from bot.clusters.progress import CHECKING
from bot.monitor.episodes import GONE, LEAVING
from storage.models import Episode, EpisodeKind


@dataclass(frozen=True)
class NodeKind:
    name: str = EpisodeKind.NODE.value
    bucket: Bucket | None = Bucket.FAILURE
    source: str | None = None
    reads_cluster: bool = True

    def actions(self, rows: Sequence[Episode]) -> tuple[Action, ...]:
        # Replace and reboot act on one node of HyperPod; a storm's message offers neither, nor does an alert
        # whose node is leaving or gone (its status follows the node): there is nothing left to act on.
        one_hyperpod_node = len(rows) == 1 and rows[0].storm_id is None and rows[0].backend == Backend.HYPERPOD.value
        left = bool(rows) and rows[0].status in LEAVING | {GONE}
        node: tuple[Action, ...] = (Action.REPLACE, Action.REBOOT) if one_hyperpod_node and not left else ()
        if node and rows[0].status != CHECKING:  # one in a check already: its result comes, no second one
            node = (*node, Action.CHECK)
        actions = (Action.ACKNOWLEDGE, *node, Action.SILENCE)
        if len(rows) != 1:
            return actions
        row = rows[0]
        return ordered(actions, severity([row.status, row.message, row.failed_message, row.diagnosis]))


KIND = NodeKind()
