"""The alert kinds Pitcrew knows. A new kind is its module here, its presenter (bot.slack.alerts) and its
line below."""

from __future__ import annotations

from collections.abc import Mapping

from bot.alerts.kind import AlertKind, Bucket
from bot.alerts.kinds import capacity, cluster, degradation, faulty, idle, job, node

KINDS: Mapping[str, AlertKind] = {
    kind.name: kind
    for kind in (node.KIND, cluster.KIND, job.KIND, faulty.KIND, capacity.KIND, idle.KIND, degradation.KIND)
}


def in_bucket(bucket: Bucket, kinds: Mapping[str, AlertKind] = KINDS) -> tuple[str, ...]:
    """The names of the kinds the digest counts in `bucket`."""
    return tuple(name for name, kind in kinds.items() if kind.bucket is bucket)
