"""Idle accelerators: after each node sweep (it hands this monitor every org's complete listing, as it does
the usage ledger), a cluster whose GPU/Trainium nodes have run no job for the org's `idle_after_hours` gets
one `idle` notice in the org's channel saying what they cost ("12 x p5.48xlarge idle for 6 h, about $X a day
at the price table"); it is edited as the idle time grows (hourly: a notice is no ticker) or its idle nodes
change, and closed saying what happened: a job of that cluster reported again (busy), its compute fleet or
its accelerator nodes stopped, or they are gone.

"No job" is: no throughput sample from any job of the cluster (raw samples, events included, and the
one-minute rollups that outlive them) and no open job alert on it (a hung job is a job; its own alert says
so). Idleness begins at the cluster's last sample, or, if none came since, when its accelerator nodes were
launched (the earliest of those running now; the cluster's creation where AWS gives no launch times).

Which orgs are watched (`threshold`): an org that sets `idle_after_hours` gets it (0 or null: never). An
org that leaves it unset gets the default 2 h only if it can report jobs at all (a `throughput` source or an
ingest token); one that cannot would see every cluster it has called idle, so it gets no notices until it
opts in.

State is the episode table (kind "idle", keyed "cluster"): a restarted bot or a new leader finds the open
ones there, and the desk's unique key lets only one of two replicas post a new one; closing is one
conditional UPDATE. Nothing opens or closes for a cluster in transition (creating, updating, deleting) or
for an org whose listing failed (the sweep does not hand that one over).
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.alerts.desk import AlertDesk
from bot.alerts.kind import Tone
from bot.alerts.kinds import idle as idle_kind
from bot.alerts.kinds import job as job_kind
from bot.clusters.model import Cluster, FleetPhase, Node, Phase
from bot.clusters.templates import PriceTable
from bot.config import OrgConfig, normalize_instance_type
from bot.monitor.nodes import UsageObserver
from bot.mrkdwn import escape, when
from storage import crud
from storage.models import Episode

log = logging.getLogger(__name__)

# GPU (p, g), Trainium/Inferentia (trn, inf) and Gaudi (dl) families: the instance types that carry
# accelerators, with or without SageMaker's `ml.` prefix (p5.48xlarge: 8 H100; trn1.32xlarge: 16 Trainium).
ACCELERATOR_FAMILY = re.compile(r"^(p|g|trn|inf|dl)\d")
NOT_RUNNING = frozenset({"stopped", "stopping"})  # EC2 states of an instance that is not billed as running
UPDATE_EVERY = timedelta(hours=1)  # the notice's idle time and cost are edited at most this often
# How far back a cluster's last sample is looked for: past the raw retention, in the rollups. A cluster idle
# longer than this is said to be idle since then ("at least").
LOOK_BACK = timedelta(days=28)
JOB = job_kind.KIND.name
TIMES = "\u00d7"  # the multiplication sign of "12 x p5.48xlarge"


def is_accelerator(instance_type: str) -> bool:
    """Whether an instance type carries GPUs or AWS's own accelerators (`ml.` prefix or not)."""
    return bool(ACCELERATOR_FAMILY.match(normalize_instance_type(instance_type)))


def threshold(org: OrgConfig, *, reports_jobs: bool) -> timedelta | None:
    """How long an org's accelerators may run no job before the notice; None: the org is not watched."""
    explicit = "idle_after_hours" in org.model_fields_set
    if not explicit and not reports_jobs:
        return None
    hours = org.idle_after_hours
    return timedelta(hours=hours) if hours else None


@dataclass(frozen=True)
class IdleLook:
    """One cluster's accelerators as the sweep saw them, against its jobs: the nodes that would be idle,
    since when they have run no job (None: not known), and whether a job is active on it now."""

    nodes: tuple[Node, ...]
    since: datetime | None
    job_active: bool
    last_activity: datetime | None
    known: bool = True  # False for a cluster in transition: nothing opens or closes
    stopped: bool = False  # its compute fleet, or some of its accelerator nodes, are stopped (not gone)

    @property
    def counts(self) -> list[tuple[str, int]]:
        """Idle nodes per instance type, most first (then by name)."""
        counted = Counter(node.instance_type for node in self.nodes)
        return sorted(counted.items(), key=lambda item: (-item[1], item[0]))

    @property
    def main_type(self) -> str:
        return self.counts[0][0] if self.nodes else ""


def look(cluster: Cluster, *, last_activity: datetime | None, job_active: bool, floor: datetime) -> IdleLook:
    """Pure: the cluster's accelerator nodes and since when they have run no job. `floor`: the earliest time
    activity was looked for (nothing is claimed before it)."""
    nodes = tuple(
        node
        for node in cluster.nodes
        if is_accelerator(node.instance_type) and not node.leaving and node.status not in NOT_RUNNING
    )
    known = cluster.phase is Phase.READY and cluster.nodes_known
    launched = [node.launch_time for node in nodes if node.launch_time is not None]
    start = min(launched) if launched else cluster.created
    since = None
    if start is not None:
        since = max(start, last_activity or floor)
    # A stopped ParallelCluster fleet terminates its compute nodes: they are stopped, not gone for good.
    stopped = cluster.fleet in (FleetPhase.STOPPING, FleetPhase.STOPPED) or any(
        is_accelerator(node.instance_type) and node.status in NOT_RUNNING for node in cluster.nodes
    )
    return IdleLook(
        nodes=nodes, since=since, job_active=job_active, last_activity=last_activity, known=known, stopped=stopped
    )


@dataclass(frozen=True)
class Decision:
    """What to do with a cluster's idle notice: "open", "update", "close" (with the closing status) or
    "nothing"."""

    action: str
    status: str = ""


NOTHING = Decision("nothing")


def decide(seen: IdleLook, *, open_since: datetime | None, after: timedelta, now: datetime) -> Decision:
    """Pure. `open_since`: the open notice's failing_since (None when there is none)."""
    if not seen.known:
        return NOTHING
    if open_since is not None:
        reported = seen.last_activity is not None and seen.last_activity > open_since
        if seen.job_active or reported:
            return Decision("close", idle_kind.BUSY)
        if not seen.nodes:
            return Decision("close", idle_kind.STOPPED if seen.stopped else idle_kind.GONE)
        return Decision("update")
    if seen.job_active or not seen.nodes or seen.since is None:
        return NOTHING
    return Decision("open") if now - seen.since >= after else NOTHING


def seen_ids(seen: IdleLook) -> list[str]:
    return [node.node_id for node in seen.nodes]


def counts_text(counts: Sequence[tuple[str, int]]) -> str:
    """ "12 x p5.48xlarge" with a multiplication sign (and " + 2 x g5.48xlarge" for more types)."""
    return " + ".join(f"{count} {TIMES} {instance_type}" for instance_type, count in counts)


def cost_text(counts: Sequence[tuple[str, int]], prices: PriceTable) -> str:
    """What the idle nodes cost a day at the price table's on-demand rates; the types it lacks are named."""
    daily = 0.0
    missing, unconfirmed = [], False
    for instance_type, count in counts:
        entry = prices.entry(instance_type)
        if entry is None:
            missing.append(instance_type)
            continue
        daily += entry.hourly * 24 * count
        unconfirmed = unconfirmed or not entry.confirmed
    if len(missing) == len(counts):
        return f"no price for {', '.join(missing)} in the price table"
    text = f"about ${daily:,.0f} a day at the price table"
    if unconfirmed:
        text += " (a price not confirmed against AWS's list)"
    if missing:
        text += f", {', '.join(missing)} not priced"
    return text


class IdleMonitor:
    """The check itself (a UsageObserver of the node sweep)."""

    def __init__(
        self,
        *,
        desk: AlertDesk,
        prices: PriceTable,
        update_every: timedelta | None = None,
        look_back: timedelta = LOOK_BACK,
    ) -> None:
        self._desk = desk
        self._prices = prices
        self._update_every = update_every
        self._look_back = look_back

    def _every(self) -> timedelta:
        """How often a growing idle time is edited: hourly, whatever the threshold (the sandbox's 3 minutes
        made it an edit every few sweeps, and a notice is no ticker)."""
        return self._update_every or UPDATE_EVERY

    async def threshold_of(self, org: OrgConfig) -> timedelta | None:
        """The org's threshold, knowing whether it reports jobs (a `throughput` source or an ingest token)."""
        reports = org.throughput is not None
        if not reports and "idle_after_hours" not in org.model_fields_set:
            async with self._desk.db.session() as session:
                tokens = await crud.org_tokens(session, org_id=org.id)
            reports = any(token.revoked_at is None for token in tokens)
        return threshold(org, reports_jobs=reports)

    async def observe(self, org_id: str, clusters: Sequence[Cluster]) -> int:
        """Open, edit and close the idle notices of one org, from its complete listing; how many changed."""
        org = self._desk.program.org(org_id)
        if org is None:
            return 0
        now = self._desk.clock()
        async with self._desk.db.session() as session:
            rows = [r for r in await crud.open_episodes(session, org_id=org_id) if r.kind in (idle_kind.NAME, JOB)]
        mine = {(r.backend, r.cluster_name): r for r in rows if r.kind == idle_kind.NAME}
        await self._desk.retry_unposted(list(mine.values()))
        after = await self.threshold_of(org)
        if after is None:  # not watched (opted out, or unable to report jobs): what is open closes as moot
            changed = 0
            for row in mine.values():
                changed += await self._close(
                    row, now, status=idle_kind.RELEASED, note="Idle notices are off for this org."
                )
            return changed
        busy = {r.cluster_name for r in rows if r.kind == JOB}
        floor = now - self._look_back
        watched = [c for c in clusters if c.name not in busy]
        activity = await self._last_activity(org_id, now - after, floor, watched, mine)
        changed = 0
        for cluster in clusters:
            key = (cluster.backend.value, cluster.name)
            found = mine.pop(key, None)
            seen = look(cluster, last_activity=activity.get(cluster.name), job_active=cluster.name in busy, floor=floor)
            opened_since = (found.failing_since or found.opened_at) if found is not None else None
            decision = decide(seen, open_since=opened_since, after=after, now=now)
            try:
                changed += await self._apply(org_id, cluster, seen, decision, found, now)
            except Exception:
                log.exception("idle check of %s/%s failed", org_id, cluster.name)
        for row in mine.values():  # the cluster is gone from a complete listing
            note = "The cluster is gone: its accelerators with it."
            changed += await self._close(row, now, status=idle_kind.GONE, note=note)
        return changed

    async def _last_activity(
        self,
        org_id: str,
        recent: datetime,
        floor: datetime,
        clusters: Sequence[Cluster],
        open_rows: Mapping[tuple[str, str], Episode],
    ) -> dict[str, datetime]:
        """The newest sample (or rollup minute) per cluster of the org: one read of the org's last `after`
        (a busy cluster reported in it), then, for each accelerator cluster that did not, one read of that
        cluster alone since its open notice began (a job reporting closes it), else since its nodes' launch
        (never before `floor`). So an idle cluster costs a short range at each sweep, not its history."""
        accelerated = [c for c in clusters if any(is_accelerator(n.instance_type) for n in c.nodes)]
        if not accelerated:
            return {}
        found: dict[str, datetime] = {}
        async with self._desk.db.session() as session:
            for (name, _job), ts in (await crud.latest_sample_times(session, org_id=org_id, since=recent)).items():
                found[name] = max(ts, found.get(name, ts))
            for cluster in accelerated:
                if cluster.name in found:
                    continue
                row = open_rows.get((cluster.backend.value, cluster.name))
                launched = [n.launch_time for n in cluster.nodes if n.launch_time is not None]
                start = min(launched) if launched else cluster.created
                if row is not None:
                    since = row.failing_since or row.opened_at
                else:
                    since = max(floor, start) if start is not None else floor
                last = await crud.latest_activity(session, org_id=org_id, cluster=cluster.name, since=since)
                if last is not None:
                    found[cluster.name] = last
        return found

    async def _apply(
        self,
        org_id: str,
        cluster: Cluster,
        seen: IdleLook,
        decision: Decision,
        row: Episode | None,
        now: datetime,
    ) -> int:
        if decision.action == "open":
            return await self._open(org_id, cluster, seen, now)
        if row is None:
            return 0
        if decision.action == "close":
            at = min(now, seen.last_activity) if seen.last_activity and decision.status == idle_kind.BUSY else now
            if decision.status == idle_kind.BUSY:
                reported = when(at, self._desk.tz)
                note = f"A job reported on `{escape(cluster.ref)}` at {reported}: its accelerators are busy again."
            elif decision.status == idle_kind.STOPPED:
                note = f"`{escape(cluster.ref)}`'s accelerator nodes were stopped, not put to work."
            else:
                note = f"`{escape(cluster.ref)}` has no accelerator nodes any more."
            return await self._close(row, at, status=decision.status, note=note, now=now)
        if decision.action == "update":
            return await self._update(row, seen, now)
        return 0

    def _values(self, seen: IdleLook) -> dict[str, object]:
        counts = seen.counts
        return {
            "instance_type": seen.main_type[:32],
            "node_ids": seen_ids(seen),
            "message": idle_kind.message(counts_text(counts), cost_text(counts, self._prices))[:1000],
        }

    async def _open(self, org_id: str, cluster: Cluster, seen: IdleLook, now: datetime) -> int:
        row = await self._desk.open(
            Episode(
                org_id=org_id,
                backend=cluster.backend.value,
                cluster_name=cluster.name,
                node_key=idle_kind.NODE_KEY,
                kind=idle_kind.NAME,
                state="open",
                status=idle_kind.IDLE,
                opened_at=now,
                failing_since=seen.since,
                updated_at=now,
                **self._values(seen),  # type: ignore[arg-type]
            )
        )
        if row is None or not row.channel_id:
            return 0  # another replica opened it, and posts it
        await self._desk.announce(
            [row], silence=await self._desk.silence_for(row.org_id, row.backend, row.cluster_name)
        )
        return 1

    async def _update(self, row: Episode, seen: IdleLook, now: datetime) -> int:
        """The idle time grows (edited at most every update_every), or the idle nodes changed (edited now)."""
        values = self._values(seen)
        nodes_changed = set(seen_ids(seen)) != set(row.node_ids)  # a listing's order is no change
        if not nodes_changed and now - row.updated_at < self._every():
            return 0
        await self._desk.update(row, {**values, "updated_at": now})
        await self._desk.refresh(row, coordination=True)  # the message and its coordination line, as of now
        return 1

    async def _close(self, row: Episode, at: datetime, *, status: str, note: str, now: datetime | None = None) -> int:
        now = now or at
        if not await self._desk.close(row, {"closed_at": at, "updated_at": now, "status": status}):
            return 0  # another replica closed it
        if not row.silenced:
            silence = await self._desk.silence_for(row.org_id, row.backend, row.cluster_name)
            tone = Tone.RECOVERED if status == idle_kind.BUSY else Tone.NEWS
            await self._desk.note(row, note, cluster=None, silence=silence, tone=tone)
        return 1


class UsageObservers:
    """Several observers of the sweep's listings (the usage ledger, the idle check), each told in turn; one
    that fails is logged and the next is still told."""

    def __init__(self, *observers: UsageObserver) -> None:
        self._observers = observers

    @property
    def observers(self) -> tuple[UsageObserver, ...]:
        return self._observers

    async def observe(self, org_id: str, clusters: Sequence[Cluster]) -> int:
        changed = 0
        for observer in self._observers:
            try:
                changed += await observer.observe(org_id, clusters)
            except Exception:
                log.exception("%s did not take the listing of %s", type(observer).__name__, org_id)
        return changed


class SeenBackends:
    """The backend of each cluster as the last sweep listed it, for those that name a cluster without one (a
    job's alert, for its console links): a sweep observer, read synchronously. A name both backends have in
    one org has no single backend, and gets None."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], str | None] = {}

    async def observe(self, org_id: str, clusters: Sequence[Cluster]) -> int:
        found: dict[tuple[str, str], str | None] = {}
        for cluster in clusters:
            key = (org_id, cluster.name)
            found[key] = cluster.backend.value if key not in found else None
        self._seen = {k: v for k, v in self._seen.items() if k[0] != org_id} | found
        return 0

    def __call__(self, org_id: str, cluster_name: str) -> str | None:
        return self._seen.get((org_id, cluster_name))
