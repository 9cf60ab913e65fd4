"""Simulated training jobs for the sandbox: each posts its throughput to Pitcrew's ingest API, as a
training script's rank 0 would (`POST /api/v1/throughput` with its org's token), so the throughput
monitor can be watched at work without a GPU.

On start each job backfills a few hours of history (a `start` event, warm-up, noise, checkpoint pauses),
so its baseline exists; then it posts live every few seconds. The console's buttons make a job hang
(it stops posting), slow down (to 40% of its rate) or recover.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx

from bot.ingest.tokens import create_token
from storage.db import Database
from storage.models import utcnow

log = logging.getLogger(__name__)

MODES = ("healthy", "hang", "slow")
HISTORY = timedelta(hours=3)
HISTORY_STEP = timedelta(seconds=30)
CHECKPOINT_EVERY = timedelta(minutes=30)
CHECKPOINT_PAUSE = timedelta(minutes=2)
SLOW_FACTOR = 0.4


@dataclass
class SimulatedJob:
    org: str
    cluster: str
    job: str
    rate: float  # healthy tokens/s
    mode: str = "healthy"

    def value(self, rng: random.Random) -> float:
        noise = 1 + rng.uniform(-0.05, 0.05)
        factor = SLOW_FACTOR if self.mode == "slow" else 1.0
        return round(self.rate * factor * noise, 1)


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
    ) -> None:
        self._url = api_url.rstrip("/") + "/api/v1/throughput"
        self.jobs = jobs
        self._period = period
        self._clock = clock
        self._rng = random.Random(seed)
        self._tokens: dict[str, str] = {}

    async def prepare(self, db: Database) -> None:
        """One API token per org with a simulated job, made as `pitcrew token create` makes them."""
        for org in sorted({job.org for job in self.jobs}):
            self._tokens[org] = await create_token(db, org_id=org, created_by="sandbox")

    def set_mode(self, mode: str, *, job: str | None = None) -> list[str]:
        """Make one job (or the first healthy one; "healthy": all) hang, slow down or recover."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}")
        targets = [j for j in self.jobs if job in (None, j.job)]
        if mode != "healthy" and job is None:
            targets = [j for j in targets if j.mode == "healthy"][:1]
        for target in targets:
            target.mode = mode
        return [target.job for target in targets]

    async def _post(self, client: httpx.AsyncClient, org: str, samples: list[dict[str, Any]]) -> None:
        for start in range(0, len(samples), 1000):
            response = await client.post(
                self._url,
                json={"samples": samples[start : start + 1000]},
                headers={"Authorization": f"Bearer {self._tokens[org]}"},
            )
            if response.status_code != 202:
                log.warning("simulated job's samples refused (%s): %s", response.status_code, response.text[:300])

    async def backfill(self, client: httpx.AsyncClient) -> None:
        now = self._clock()
        for job in self.jobs:
            base = {"org": job.org, "cluster": job.cluster, "job": job.job}
            ts = now - HISTORY
            samples: list[dict[str, Any]] = [{**base, "ts": _iso(ts), "event": "start"}]
            while ts < now - HISTORY_STEP:
                ts += HISTORY_STEP
                into = (ts - (now - HISTORY)) % CHECKPOINT_EVERY
                if into < CHECKPOINT_PAUSE and ts - (now - HISTORY) > CHECKPOINT_EVERY / 2:
                    continue  # a checkpoint: no samples for two minutes
                warm = min(1.0, (ts - (now - HISTORY)) / timedelta(minutes=10))
                value = job.rate * (0.3 + 0.7 * warm) * (1 + self._rng.uniform(-0.05, 0.05))
                samples.append({**base, "ts": _iso(ts), "tokens_per_second": round(value, 1)})
            await self._post(client, job.org, samples)

    async def run(self, stop: asyncio.Event) -> None:
        async with httpx.AsyncClient(timeout=10) as client:
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
                        "tokens_per_second": job.value(self._rng),
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
