"""The alerts follow a deep health check of their node (bot.operations' on_progress): when it starts, and when it
ends with each node's result. Whether it was asked from an alert's button or with `/cluster check`, every open
alert naming a checked node (a failed node's, a faulty node's, a job's culprit) gets one line in its thread and
its message edited: its diagnosis says the check is running, then its result. A failed check is hard evidence
(bot.alerts.severity): the alert then offers Replace node first.

A failed node's alert also follows the node's status through the sweeps (DeepHealthCheckInProgress, then Running,
which closes it, or Failure); these lines say what the check found, which the status alone does not."""

from __future__ import annotations

import logging
from datetime import timedelta

from bot.alerts.desk import AlertDesk
from bot.alerts.kind import Tone
from bot.clusters.fleet import Fleet, describe_error
from bot.clusters.model import Backend
from bot.clusters.progress import check_results
from bot.clusters.requests import CheckRequest, Kind, stored_request
from storage import crud
from storage.models import Episode, EpisodeKind, Operation, OperationStatus

log = logging.getLogger(__name__)
CHECK_WORD = "Deep health check"
LOOK_AHEAD = timedelta(days=7)  # longer than any check runs: alerts closed after it started and before it ended
FOLLOWED = frozenset({EpisodeKind.NODE.value, EpisodeKind.FAULTY_NODE.value, EpisodeKind.JOB.value})


def with_check(diagnosis: str, line: str) -> str:
    """The alert's diagnosis with its deep health check's line in place of an earlier one (HyperPod's agent
    detection, if any, is kept before it). Pure."""
    kept = [part for part in diagnosis.split(" · ") if part and not part.startswith(CHECK_WORD)]
    return " · ".join([*kept, line])[:300]


class CheckFollower:
    def __init__(self, *, desk: AlertDesk, fleet: Fleet) -> None:
        self._desk = desk
        self._fleet = fleet

    async def __call__(self, operation: Operation, phase: str) -> None:
        if operation.kind != Kind.CHECK.value or operation.backend != Backend.HYPERPOD.value:
            return
        request = stored_request(operation)
        if not isinstance(request, CheckRequest):
            return
        checks = ", ".join(request.checks)
        if phase == "started":
            by = f", confirmed by <@{operation.confirmed_by}>" if operation.confirmed_by else ""
            for row, node_id in await self._alerts_of(operation, request):
                line = f"{CHECK_WORD} running ({checks}){by}"
                await self._tell(row, line, f":stethoscope: {CHECK_WORD} of `{node_id}` started ({checks}){by}.")
            return
        if operation.started_at is None:
            return  # it never started: the one who confirmed was told why
        if operation.status != OperationStatus.DONE.value:
            for row, node_id in await self._alerts_of(operation, request):
                said = f"{CHECK_WORD} of `{node_id}` did not finish: {operation.detail}"
                await self._tell(row, f"{CHECK_WORD} did not finish", said, tone=Tone.WORSE)
            return
        try:
            cluster = await self._fleet.get(operation.org_id, Backend.HYPERPOD, operation.cluster_name)
        except Exception as error:
            log.warning("reading %s after its check: %s", operation.cluster_name, describe_error(error))
            cluster = None
        results = {r.node_id: r for r in check_results(request, cluster)}
        for row, node_id in await self._alerts_of(operation, request):
            result = results.get(node_id)
            if result is None:
                continue
            if result.passed:
                line = f"{CHECK_WORD} passed ({checks})"
                said = f":white_check_mark: {CHECK_WORD} of `{node_id}` passed ({checks}): it is {result.status} again."
                await self._tell(row, line, said)
            else:
                why = f": {result.message}" if result.message else ""
                line = f"{CHECK_WORD} failed: {result.status}{why}"
                said = (
                    f"{CHECK_WORD} of `{node_id}` failed ({checks}): `{result.status}`{why}. "
                    "Replace node gives it new hardware."
                )
                await self._tell(row, line, said, tone=Tone.WORSE)

    async def _alerts_of(self, operation: Operation, request: CheckRequest) -> list[tuple[Episode, str]]:
        """The alerts of the cluster that name a checked node (as their current node), with that node: those open,
        and those closed since the check started (a failed node's alert closes when a sweep sees it Running
        again, which may come before the check's watch calls it over)."""
        checked = set(request.successful or request.node_ids)
        async with self._desk.db.session() as session:
            rows = list(await crud.open_episodes(session, org_id=operation.org_id))
            if operation.started_at is not None:
                recent = await crud.episodes_between(
                    session,
                    org_id=operation.org_id,
                    since=operation.started_at,
                    until=operation.started_at + LOOK_AHEAD,
                )
                seen = {row.id for row in rows}
                rows += [r for r in recent if r.state != "open" and r.id not in seen and r.closed_at is not None]
        found = []
        for row in rows:
            if row.kind not in FOLLOWED or row.cluster_name != operation.cluster_name or not row.node_ids:
                continue
            if row.backend not in (Backend.HYPERPOD.value, "throughput") or row.node_ids[-1] not in checked:
                continue
            found.append((row, row.node_ids[-1]))
        return found

    async def _tell(self, row: Episode, line: str, said: str, *, tone: Tone = Tone.NEWS) -> None:
        desk = self._desk
        await desk.update(row, {"diagnosis": with_check(row.diagnosis, line)})
        silence = await desk.silence_for(row.org_id, row.backend, row.cluster_name)
        await desk.note(row, said, cluster=await desk._cluster_now(row), silence=silence, tone=tone, coordination=False)
