"""Simulated training jobs for the sandbox: each posts its throughput to Pitcrew's ingest API, as a
training script's rank 0 would (`POST /api/v1/throughput` with its org's token), so the throughput
monitor can be watched at work without a GPU.

On start each job backfills a few hours of history (a `start` event, warm-up, noise, checkpoint pauses),
so its baseline exists; then it posts live every few seconds. The console's buttons make a job hang
(it stops posting), slow down (to 40% of its rate) or recover; the culprit buttons (sandbox.culprits) slow a
job down from a given moment, as a limping node would, and the backfill keeps that moment if it is past.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx

from bot.ingest.tokens import create_token
from bot.tls import tls_context
from storage.db import Database
from storage.models import utcnow

log = logging.getLogger(__name__)

MODES = ("healthy", "hang", "slow")
HISTORY = timedelta(hours=3)
HISTORY_STEP = timedelta(seconds=30)
CHECKPOINT_EVERY = timedelta(minutes=30)
CHECKPOINT_PAUSE = timedelta(minutes=2)
SLOW_FACTOR = 0.4


@dataclass(frozen=True)
class Slowdown:
    """A job held back from `since` on (a throttled GPU, a degraded link, a starved data loader)."""

    factor: float  # the share of its healthy rate it keeps
    since: datetime


@dataclass
class SimulatedJob:
    org: str
    cluster: str
    job: str
    rate: float  # healthy tokens/s
    mode: str = "healthy"
    slowdown: Slowdown | None = None  # set by the culprit buttons; cleared with the job's recovery
    # Its history's checkpoints as (start, end) when its nodes' metrics set them (sandbox.culprits: the job
    # pauses when its nodes idle); None: every half hour (in_checkpoint).
    pauses: tuple[tuple[datetime, datetime], ...] | None = None

    def paused_at(self, ts: datetime, *, started: datetime) -> bool:
        if self.pauses is None:
            return in_checkpoint(ts, started=started)
        return any(start <= ts <= end for start, end in self.pauses)

    def factor_at(self, ts: datetime) -> float:
        if self.mode == "slow":
            return SLOW_FACTOR
        if self.slowdown is not None and ts >= self.slowdown.since:
            return self.slowdown.factor
        return 1.0

    def value(self, rng: random.Random, ts: datetime) -> float:
        noise = 1 + rng.uniform(-0.05, 0.05)
        return round(self.rate * self.factor_at(ts) * noise, 1)


def in_checkpoint(ts: datetime, *, started: datetime) -> bool:
    """Whether a job started at `started` is writing a checkpoint at `ts` (its history's two-minute pauses,
    every half hour from its first half hour on), unless its node metrics say when (SimulatedJob.pauses)."""
    into = (ts - started) % CHECKPOINT_EVERY
    return into < CHECKPOINT_PAUSE and ts - started > CHECKPOINT_EVERY / 2


def _iso(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class TrainingSimulator:
    def __init__(
        self,
        *,
        api_url: str,
        jobs: list[SimulatedJob],
        period: float = 5.0,
        clock: Callable[[], datetime] = utcnow,
        seed: int = 7,
        started: datetime | None = None,
    ) -> None:
        """`started`: when the jobs' runs began (their history's `start`; default HISTORY before the backfill),
        the same moment as their node metrics' history (sandbox.culprits)."""
        self._url = api_url.rstrip("/") + "/api/v1/throughput"
        self.jobs = jobs
        self._period = period
        self._clock = clock
        self._started = started
        self._rng = random.Random(seed)
        self._tokens: dict[str, str] = {}

    async def prepare(self, db: Database, *, onboarded: Sequence[str] = ()) -> None:
        """One API token per org with a simulated job, made as `pitcrew token create` makes them; and one for each
        of the `onboarded` orgs, whose training scripts would hold one (`pitcrew doctor` checks that each has)."""
        for org in sorted({job.org for job in self.jobs} | set(onboarded)):
            self._tokens[org] = await create_token(db, org_id=org, created_by="sandbox")

    def set_mode(self, mode: str, *, job: str | None = None) -> list[str]:
        """Make one job (or the first healthy one; "healthy": all) hang, slow down or recover."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}")
        targets = [j for j in self.jobs if job in (None, j.job)]
        if mode != "healthy" and job is None:
            targets = [j for j in targets if j.mode == "healthy" and j.slowdown is None][:1]
        for target in targets:
            target.mode = mode
            if mode == "healthy":
                target.slowdown = None
        return [target.job for target in targets]

    async def _post(self, client: httpx.AsyncClient, org: str, samples: list[dict[str, Any]]) -> None:
        for start in range(0, len(samples), 1000):
            # A batch refused for want of an answer (a busy machine: 5xx or a timeout) is posted again, as a
            # training script would; samples carry their ts, so a retry is stored once.
            for attempt in range(3):
                try:
                    response = await client.post(
                        self._url,
                        json={"samples": samples[start : start + 1000]},
                        headers={"Authorization": f"Bearer {self._tokens[org]}"},
                    )
                except httpx.TimeoutException:
                    if attempt == 2:
                        raise
                    continue
                if response.status_code < 500 or attempt == 2:
                    break
            if response.status_code != 202:
                log.warning("simulated job's samples refused (%s): %s", response.status_code, response.text[:300])

    async def backfill(self, client: httpx.AsyncClient) -> None:
        now = self._clock()
        started = self._started or now - HISTORY
        for job in self.jobs:
            base = {"org": job.org, "cluster": job.cluster, "job": job.job}
            ts = started
            samples: list[dict[str, Any]] = [{**base, "ts": _iso(ts), "event": "start"}]
            while ts < now - HISTORY_STEP:
                ts += HISTORY_STEP
                if job.paused_at(ts, started=started):
                    continue  # a checkpoint: no samples for two minutes
                warm = min(1.0, (ts - started) / timedelta(minutes=10))
                value = job.rate * job.factor_at(ts) * (0.3 + 0.7 * warm) * (1 + self._rng.uniform(-0.05, 0.05))
                samples.append({**base, "ts": _iso(ts), "tokens_per_second": round(value, 1)})
            await self._post(client, job.org, samples)

    async def run(self, stop: asyncio.Event) -> None:
        async with httpx.AsyncClient(timeout=10, verify=tls_context()) as client:
            try:
                await self.backfill(client)
            except httpx.HTTPError as error:
                log.warning("could not backfill the simulated jobs: %r", error)
            while not stop.is_set():
                now = self._clock()
                for job in self.jobs:
                    if job.mode == "hang":
                        continue
                    sample = {
                        "org": job.org,
                        "cluster": job.cluster,
                        "job": job.job,
                        "ts": _iso(now),
                        "tokens_per_second": job.value(self._rng, now),
                    }
                    try:
                        await self._post(client, job.org, [sample])
                    except httpx.HTTPError as error:
                        log.warning("simulated job could not post: %r", error)
                with contextlib.suppress(TimeoutError):  # the period passed without a stop
                    await asyncio.wait_for(stop.wait(), timeout=self._period)


def sandbox_jobs() -> list[SimulatedJob]:
    """Two jobs on HyperPod clusters of the example program, at rates of their scale."""
    return [
        SimulatedJob("kumo-labs", "kumo-p5-train", "llama-70b-pretrain", rate=math.floor(32 * 8 * 1900)),
        SimulatedJob("sakura-ai", "sakura-trn1-pretrain", "mixtral-8x7b", rate=math.floor(16 * 16 * 700)),
    ]
