"""HyperPod's own diagnosis in the alerts, a sweep observer: after each sweep, the cluster events of every
HyperPod cluster with continuous provisioning (a provisioning or scaling failure opens a `cluster` alert keyed
PROVISIONING, or is a note on the open one; a success closes it) and the health-monitoring agent's detections of
the nodes with an open node alert (the alert says "HyperPod: <fault type> (<reason>)" beside AWS's status).

Once per event: each event id is claimed in storage (crud.mark_event_seen) before it is acted on, so a later
sweep, or another replica, does nothing with it again. A detection is claimed only once it reaches an open alert:
one logged before its node's alert opened is read again at the next sweep (it stays in the look-back window)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta

from bot.alerts.desk import AlertDesk
from bot.alerts.kind import Tone
from bot.clusters.diagnosis import ClusterEvent, Detection, Outcome
from bot.clusters.fleet import Fleet
from bot.clusters.model import Backend, Cluster
from storage import crud
from storage.models import Episode, EpisodeKind

log = logging.getLogger(__name__)
PROVISIONING = "provisioning"  # the node_key of a cluster alert opened by HyperPod's provisioning events
LOOK_BACK = timedelta(hours=2)  # well within how long claimed event ids are remembered (a day)
DETECTION_SLACK = timedelta(minutes=30)  # a detection this long before its node's alert opened is still its cause
PROVISIONING_STATUS = "ProvisioningFailed"


class HyperPodDiagnosis:
    def __init__(self, *, desk: AlertDesk, fleet: Fleet, look_back: timedelta = LOOK_BACK) -> None:
        self._desk = desk
        self._fleet = fleet
        self._look_back = look_back

    async def observe(self, org_id: str, clusters: Sequence[Cluster]) -> int:
        """Look at the org's HyperPod clusters after a sweep; how many alerts it changed."""
        async with self._desk.db.session() as session:
            rows = [r for r in await crud.open_episodes(session, org_id=org_id) if r.backend == Backend.HYPERPOD.value]
        changed = 0
        for cluster in clusters:
            if cluster.backend is not Backend.HYPERPOD:
                continue
            mine = [r for r in rows if r.cluster_name == cluster.name]
            continuous = cluster.extra.get("provisioning") == "Continuous"
            nodes = [r for r in mine if r.kind == EpisodeKind.NODE.value]
            if not continuous and not nodes:
                continue
            try:
                events, detections = await self._fleet.diagnosis(
                    cluster, since=self._desk.clock() - self._look_back, events=continuous, detections=bool(nodes)
                )
            except Exception as error:  # a read refused or failing: the node alerts stand as they are
                log.warning("HyperPod diagnosis of %s/%s not read: %s", org_id, cluster.name, error)
                continue
            provisioning = next(
                (r for r in mine if r.kind == EpisodeKind.CLUSTER.value and r.node_key == PROVISIONING), None
            )
            for event in events:
                if await self._claim(f"hyperpod-event:{event.event_id}"):
                    provisioning = await self._event(cluster, event, provisioning)
                    changed += 1
            for detection in detections:
                changed += await self._detection(cluster, detection, nodes)
        return changed

    async def _claim(self, event_id: str) -> bool:
        async with self._desk.db.session() as session:
            return await crud.mark_event_seen(session, event_id=event_id[:128], at=self._desk.clock())

    async def _event(self, cluster: Cluster, event: ClusterEvent, row: Episode | None) -> Episode | None:
        """Act on one event; the provisioning alert open after it."""
        silence = await self._desk.silence_for(cluster.org, cluster.backend.value, cluster.name)
        now = self._desk.clock()
        if event.outcome is Outcome.FAILED:
            if row is not None:
                await self._desk.update(row, {"message": event.line[:1000], "updated_at": now})
                await self._desk.note(row, event.line, cluster=cluster, silence=silence, tone=Tone.WORSE)
                return row
            opened = await self._desk.open(
                Episode(
                    org_id=cluster.org,
                    backend=cluster.backend.value,
                    cluster_name=cluster.name,
                    node_key=PROVISIONING,
                    kind=EpisodeKind.CLUSTER.value,
                    state="open",
                    node_ids=[],
                    group_name=event.group,
                    status=PROVISIONING_STATUS,
                    message=event.line[:1000],
                    failed_status=PROVISIONING_STATUS,
                    failed_message=event.line[:1000],
                    opened_at=now,
                    failing_since=now,
                    updated_at=now,
                )
            )
            if opened is not None:
                await self._desk.announce([opened], silence=silence, cluster=cluster)
            return opened
        if row is None:
            return None  # good news with nothing open to close, or a warning: nothing to say
        if event.outcome is Outcome.SUCCEEDED:
            values: dict[str, object] = {
                "state": "closed",
                "closed_at": now,
                "updated_at": now,
                "outcome": event.line[:500],
            }
            if await self._desk.close(row, values):
                await self._desk.note(row, event.line, cluster=cluster, silence=silence, tone=Tone.RECOVERED)
            return None
        await self._desk.note(row, event.line, cluster=cluster, silence=silence)
        return row

    async def _detection(self, cluster: Cluster, detection: Detection, nodes: Sequence[Episode]) -> int:
        row = next(
            (r for r in nodes if detection.instance_id in r.node_ids and detection.at >= r.opened_at - DETECTION_SLACK),
            None,
        )
        if row is None or not await self._claim(f"hma:{cluster.org}:{cluster.name}:{detection.event_id}"):
            return 0
        if row.diagnosis == detection.line:
            return 0
        await self._desk.update(row, {"diagnosis": detection.line[:300]})
        silence = await self._desk.silence_for(cluster.org, cluster.backend.value, cluster.name)
        await self._desk.note(row, f"`{detection.instance_id}`: {detection.line}", cluster=cluster, silence=silence)
        return 1
