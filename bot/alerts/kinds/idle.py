"""Idle accelerators: a cluster whose GPU/Trainium nodes have run no job for the org's `idle_after_hours`
(bot.monitor.idle), one notice per idle spell, keyed "cluster", edited as the idle time grows, closed when a
job reports again (or the nodes are gone).

Its episode (written by bot.monitor.idle; the digest and the Home read it): kind "idle", the cluster's own
backend, node_key "cluster", instance_type the accelerator type with the most idle nodes, node_ids the idle
accelerator nodes, failing_since when idleness began (the cluster's last throughput sample, or its nodes'
launch), opened_at when the notice opened, closed_at when a job reported again or its nodes stopped or went.
Its message holds the counts and the cost, one per line (`message` / `read_message` below), so the presenter
needs no price table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.alerts.kind import Action, Bucket
from storage.models import Episode

NAME = "idle"
NODE_KEY = "cluster"
IDLE = "idle"  # Episode.status while open
# Episode.status once closed, as it happened: only BUSY means the nodes were put to work.
BUSY = "busy"  # a job reported again
STOPPED = "stopped"  # its compute fleet (or its accelerator nodes) stopped
GONE = "gone"  # its accelerator nodes, or the cluster, are gone
RELEASED = "released"  # no longer watched (the org turned idle notices off); older notices closed as either


@dataclass(frozen=True)
class IdleKind:
    name: str = NAME
    # In no bucket: nothing failed. The digest sums its idle instance-hours from the episodes themselves.
    bucket: Bucket | None = None
    source: str | None = None
    reads_cluster: bool = False

    def actions(self, rows: Sequence[Episode]) -> tuple[Action, ...]:
        return (Action.ACKNOWLEDGE, Action.SILENCE)


KIND = IdleKind()


def message(counts: str, cost: str) -> str:
    """The stored message: what is idle ("12 x p5.48xlarge", with a multiplication sign) and what it costs
    ("about $15,852 a day at the price table")."""
    return f"{counts}\n{cost}"


def read_message(text: str) -> tuple[str, str]:
    """(counts, cost) from a stored message; an older or foreign one is all counts."""
    counts, _, cost = text.partition("\n")
    return counts, cost
