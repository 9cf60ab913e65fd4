"""The faulty-node check: at each throughput check (bot.monitor.jobs runs it after the jobs, on the same
reads), every cluster Pitcrew knows of an org with per-node metrics has its nodes compared with their peers
over the last FAULT_WINDOW (bot.node_metrics.culprit.assess_nodes). A node that diverges persistently (XIDs,
a throttled GPU, a degraded EFA link) opens a `faulty_node` alert in the org's channel (bot.alerts.kinds.faulty),
even when no job has slowed yet; it is closed when the node is plainly back in line with its peers, or when
the node is no longer in the metrics while its peers are (it left the cluster: replaced or removed).

State is the episode table: an alert is keyed by its node, so a restarted bot, a new leader or a second
replica finds the open ones there, and the desk's unique key lets only one of two replicas post a new one.
Nothing opens or closes while a cluster's metrics cannot be read, or while none of its nodes report at all
(an exporter or Prometheus outage is not every node leaving).

Duplicates: a node that an open job alert of the same cluster already names as its culprit (its suspects)
gets no faulty_node alert of its own. The job alert says it already (the same peer comparison, its evidence,
and the Replace/Reboot buttons for it), so a second message about the same node would only split the
conversation. If the node still diverges once that job alert has closed, its faulty_node alert opens then.
A faulty_node alert already open when a job alert later names the node stays open, and the job alert's
thread links to it (bot.monitor.jobs), so the two conversations find each other.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.alerts.desk import AlertDesk
from bot.alerts.kind import Tone
from bot.alerts.kinds import faulty as faulty_kind
from bot.alerts.kinds import job as job_kind
from bot.clusters.model import Backend
from bot.monitor.metrics_reads import MetricsReads, ReadFailed
from bot.mrkdwn import escape
from bot.node_metrics.culprit import FAULT_WINDOW, SETTLING_CAUSES, assess_nodes
from bot.node_metrics.series import NodeAssessment, NodeFault, PeerChart
from storage import crud
from storage.models import Episode

log = logging.getLogger(__name__)

# Read a little before the window: Prometheus's rate() of a counter needs its first minutes to be filled.
READ_MARGIN = timedelta(minutes=2)
UNWATCHED = "unwatched"  # Episode.status of one closed because its cluster is no longer watched


@dataclass(frozen=True)
class Watched:
    """A cluster whose nodes are watched: of an org with per-node metrics, as the node sweep last saw it."""

    org_id: str
    backend: str
    name: str


async def upload_peer_chart(desk: AlertDesk, row: Episode, chart: PeerChart, *, thread_ts: str) -> None:
    """The suspect's signal against its peers' median, in an alert's thread; a chart that cannot be drawn
    is logged, and the alert stands without it."""
    try:
        content = await asyncio.to_thread(desk.presenter.peer_chart, chart, tz=desk.tz)
    except Exception:
        log.exception("drawing the peer chart of %s for episode %s failed", chart.node, row.id)
        return
    await desk.upload(
        row.channel_id,
        filename=f"{row.cluster_name}-{chart.node}-peers.png".replace("/", "-"),
        content=content,
        title=f"{chart.node}: {chart.title} against its peers' median",
        thread_ts=thread_ts,
    )


class FaultyNodeMonitor:
    def __init__(self, *, desk: AlertDesk, window: timedelta = FAULT_WINDOW) -> None:
        self._desk = desk
        self._window = window

    def read_start(self, now: datetime) -> datetime:
        """Where its read of a cluster begins, for a check at `now`: two windows (an alert of a settling cause
        closes once its node was clear over the window before the last as well)."""
        return now - 2 * self._window - READ_MARGIN

    async def watched(self, org_ids: Iterable[str]) -> list[Watched]:
        """The clusters Pitcrew knows (the node sweep's table) of these orgs (those with per-node metrics).
        A name under both backends is watched once, as HyperPod's (Prometheus's cluster label cannot tell
        them apart, and only HyperPod's nodes have the buttons)."""
        orgs = set(org_ids)
        async with self._desk.db.session() as session:
            seen = await crud.clusters_seen(session)
        found: dict[tuple[str, str], Watched] = {}
        for row in seen:
            if row.org_id not in orgs:
                continue
            key = (row.org_id, row.name)
            if key not in found or row.backend == Backend.HYPERPOD.value:
                found[key] = Watched(org_id=row.org_id, backend=row.backend, name=row.name)
        return sorted(found.values(), key=lambda w: (w.org_id, w.name))

    async def check(self, watched: Sequence[Watched], reads: MetricsReads, *, now: datetime) -> int:
        """Open and close faulty_node alerts for `watched` (`reads` wanted them from read_start); how many
        opened, changed or closed."""
        async with self._desk.db.session() as session:
            open_rows = list(await crud.open_episodes(session))
        mine = [r for r in open_rows if r.kind == faulty_kind.KIND.name]
        await self._desk.retry_unposted(mine)  # Slack failed the first time: post them now
        named: dict[tuple[str, str], set[str]] = defaultdict(set)
        for row in open_rows:
            if row.kind == job_kind.KIND.name:
                named[(row.org_id, row.cluster_name)].update(row.suspects)
        by_cluster: dict[tuple[str, str], dict[str, Episode]] = defaultdict(dict)
        for row in mine:
            by_cluster[(row.org_id, row.cluster_name)][row.node_key] = row
        changed = 0
        for cluster in watched:
            key = (cluster.org_id, cluster.name)
            rows = by_cluster.pop(key, {})
            try:
                changed += await self._check_cluster(cluster, rows, named.get(key, set()), reads, now)
            except Exception:
                log.exception("faulty-node check of %s/%s failed", cluster.org_id, cluster.name)
        for rows in by_cluster.values():  # its cluster is gone, or its org's metrics are no longer configured
            for row in rows.values():
                node = escape(row.node_key)
                note = f"`{node}`: its cluster is no longer watched (gone, or its metrics no longer read)."
                changed += await self._close(row, now, status=UNWATCHED, note=note, tone=Tone.NEWS)
        return changed

    async def _check_cluster(
        self,
        cluster: Watched,
        rows: Mapping[str, Episode],
        named: set[str],
        reads: MetricsReads,
        now: datetime,
    ) -> int:
        metrics = await reads.get(cluster.org_id, cluster.name, start=self.read_start(now))
        if metrics is None or isinstance(metrics, ReadFailed) or not metrics.series:
            return 0  # nothing known: nothing opens, and nothing closes
        assessed: list[NodeAssessment] = await asyncio.to_thread(assess_nodes, metrics, at=now, window=self._window)
        present = {a.node: a for a in assessed}
        # A throttle may come back after a quiet stretch longer than the window: its alert closes only when its
        # node was clear over the window before too (culprit.SETTLING_CAUSES), so it is one alert, not several.
        settling = {n for n, row in rows.items() if row.cause in SETTLING_CAUSES and n in present and present[n].clear}
        earlier: dict[str, NodeAssessment] = {}
        if settling:
            before = await asyncio.to_thread(assess_nodes, metrics, at=now - self._window, window=self._window)
            earlier = {a.node: a for a in before}
        changed = 0
        for node, row in rows.items():
            now_seen = present.get(node)
            shown = escape(node)  # a label's value, from the org's exporters: it mentions nobody
            if now_seen is None:
                note = f"`{shown}` left the cluster (replaced or removed): this alert is closed."
                changed += await self._close(row, now, status=faulty_kind.LEFT, note=note, tone=Tone.NEWS)
            elif now_seen.clear and (node not in settling or (node in earlier and earlier[node].clear)):
                note = f"`{shown}` is back in line with its peers."
                changed += await self._close(row, now, status=faulty_kind.CLEARED, note=note, tone=Tone.RECOVERED)
            elif now_seen.fault is not None and now_seen.fault.cause.value != row.cause:
                changed += await self._worse(row, now_seen.fault, now)
        for one in assessed:
            if one.fault is not None and one.node not in rows and one.node not in named:
                changed += await self._open(cluster, one.fault, now)
        return changed

    async def _open(self, cluster: Watched, fault: NodeFault, now: datetime) -> int:
        row = await self._desk.open(
            Episode(
                org_id=cluster.org_id,
                backend=cluster.backend,
                cluster_name=cluster.name,
                node_key=fault.node,
                kind=faulty_kind.KIND.name,
                state="open",
                node_ids=[fault.node],
                status=fault.cause.value,
                message=fault.evidence[:1000],
                opened_at=now,
                failing_since=fault.since,
                updated_at=now,
                cause=fault.cause.value,
                suspects=[fault.node],
            )
        )
        if row is None or not row.channel_id:
            return 0  # another replica opened it, and posts it
        await self._desk.announce(
            [row], silence=await self._desk.silence_for(row.org_id, row.backend, row.cluster_name)
        )
        if row.message_ts and not row.silenced and fault.chart is not None:
            await upload_peer_chart(self._desk, row, fault.chart, thread_ts=row.message_ts)
        return 1

    async def _worse(self, row: Episode, fault: NodeFault, now: datetime) -> int:
        """The node diverges in another way now (a throttled GPU that threw an XID): the same alert, edited."""
        values = {"cause": fault.cause.value, "status": fault.cause.value, "message": fault.evidence[:1000]}
        await self._desk.update(row, {**values, "updated_at": now})
        if not row.silenced:
            silence = await self._desk.silence_for(row.org_id, row.backend, row.cluster_name)
            note = f"`{escape(row.node_key)}` now shows {fault.cause.value}: {escape(fault.evidence)}"
            await self._desk.note(row, note, cluster=None, silence=silence, tone=Tone.WORSE)
        return 1

    async def _close(self, row: Episode, now: datetime, *, status: str, note: str, tone: Tone) -> int:
        if not await self._desk.close(row, {"closed_at": now, "updated_at": now, "status": status}):
            return 0  # another replica closed it
        if not row.silenced:
            silence = await self._desk.silence_for(row.org_id, row.backend, row.cluster_name)
            await self._desk.note(row, note, cluster=None, silence=silence, tone=tone)
        return 1
