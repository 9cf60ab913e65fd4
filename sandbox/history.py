"""Synthetic program history: weeks of what Pitcrew would have stored about a program, generated in one go.

The sandbox seeds three weeks of it at start (`seed_sandbox_history`), so `/digest preview`, `/track show` and
`/track doc` have something to show the moment `make run` is up; tests and `bench/digest_scale.py` generate
larger programs with it.

`generate_history` is pure and deterministic for a seed: per org and week a few tracking records (notes,
milestones, incidents mostly resolved a day or two later, lessons), requirements, the usage ledger's steps
(`ClusterState`) with the scale operations that moved them, closed node-failure episodes, a few closed
throughput episodes, and one-minute throughput rollups at a chosen density. Every row is a dict ready for
a bulk insert and satisfies the tables' NOT NULL and unique constraints. Times fall in [since, until), and
each cluster's last state is its plan's count, so a live sweep right after finds nothing changed.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import insert
from sqlmodel import SQLModel

from bot.alerts.kinds import job as job_kind
from bot.clusters.held import cluster_held
from bot.config import normalize_instance_type
from storage.crud import hourly_rows
from storage.db import Database
from storage.models import (
    ClusterState,
    Episode,
    Operation,
    OrgRequirement,
    ThroughputHourly,
    ThroughputRollup,
    TrackRecord,
)

if TYPE_CHECKING:
    from bot.services import Services

__all__ = ["ClusterPlan", "History", "OrgPlan", "generate_history", "seed_sandbox_history", "store_history"]

WEEK = timedelta(days=7)
FALLBACK_MEMBER = "USLACKBOT"  # created_by of an org with no members in its plan
ACCELERATOR_FAMILIES = ("p", "g", "trn", "inf")
SLOW_FACTOR = 0.45  # a slowdown episode's rate, as a share of the job's usual one


@dataclass
class ClusterPlan:
    """A cluster as it is now (its instances by type, with or without the `ml.` prefix) and its training jobs.

    `rates`: tokens/s of jobs whose rate is known (the sandbox's simulated jobs); others get a seeded one."""

    backend: str  # "hyperpod" | "pcluster"
    name: str
    instances: dict[str, int]
    jobs: tuple[str, ...] = ()
    rates: dict[str, float] = field(default_factory=dict)


@dataclass
class OrgPlan:
    org_id: str
    members: tuple[str, ...]  # Slack user ids: who writes the records and confirms the changes
    clusters: tuple[ClusterPlan, ...]


@dataclass
class History:
    """Rows by table, as dicts for `insert(Model)`. ClusterState rows are in time order: storage takes a
    key's highest id as its newest state."""

    since: datetime
    until: datetime
    states: list[dict[str, Any]] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    requirements: list[dict[str, Any]] = field(default_factory=list)
    episodes: list[dict[str, Any]] = field(default_factory=list)
    operations: list[dict[str, Any]] = field(default_factory=list)
    rollups: list[dict[str, Any]] = field(default_factory=list)

    def tables(self) -> list[tuple[type[SQLModel], list[dict[str, Any]]]]:
        return [
            (ClusterState, self.states),
            (TrackRecord, self.records),
            (OrgRequirement, self.requirements),
            (Episode, self.episodes),
            (Operation, self.operations),
            (ThroughputRollup, self.rollups),
            (ThroughputHourly, hourly_rows(self.rollups)),  # as ingest keeps them beside the minutes
        ]

    def summary(self) -> str:
        incidents = [r for r in self.records if r["kind"] == "incident"]
        still_open = sum(1 for r in incidents if r["resolved_at"] is None)
        nodes = sum(1 for e in self.episodes if e["kind"] == "node")
        orgs = len({r["org_id"] for r in self.requirements})
        return (
            f"{(self.until - self.since) / WEEK:.1f} weeks of history for {orgs} orgs: {len(self.records)} records "
            f"({len(incidents)} incidents, {still_open} open), {len(self.states)} cluster states, "
            f"{len(self.operations)} scale operations, {nodes} node failures, {len(self.episodes) - nodes} job "
            f"episodes, {len(self.rollups):,} throughput rollups"
        )


# ------------------------------------------------------------------------------------------------ wording

MODEL_SIZES = ("7B", "13B", "34B", "70B", "172B", "8x7B MoE")
GPU_FRAMEWORKS = ("Megatron-LM", "NeMo 2.0", "Megatron-DeepSpeed", "torchtitan")
NEURON_FRAMEWORK = "NeuronX Distributed Training"
STORAGE = ("FSx for Lustre 120 TiB + S3", "FSx for Lustre 240 TiB + S3", "FSx for Lustre 480 TiB (PERSISTENT_2)")

NOTES = (
    "Resumed pretraining of the {size} model from the step {step}k checkpoint after the weekend maintenance.",
    "Checkpoints now go to FSx for Lustre first and to S3 in the background: a save takes {fast} min instead of "
    "{slow}.",
    "nccl-tests all_reduce_perf on {nodes} nodes over EFA: {bw} GB/s bus bandwidth, in line with the reference.",
    "Tokenized another {tokens}B tokens of Japanese web text (CommonCrawl ja, Wikipedia ja) for the next stage.",
    "Upgraded to Neuron SDK 2.{minor} on the Trainium cluster; graphs recompiled, throughput unchanged.",
    "JGLUE on the {step}k checkpoint: JCommonsenseQA {jcqa}%, JNLI {jnli}%, JSQuAD F1 {jsquad}.",
    "Raised the global batch to {gbs} sequences of 4096 tokens; the loss curve is smooth so far.",
    "Set the Lustre stripe count to {stripes} on the dataset directory; the data-loader waits are gone.",
    "Weekly sync with the AWS account team: capacity for the next phase is being reviewed.",
)
MILESTONES = (
    "Passed {tokens}B training tokens on the {size} model.",
    "First complete checkpoint of the {size} model copied to S3 ({tb} TB).",
    "JGLUE average above {jglue}% on the {step}k checkpoint, best so far.",
    "Pretraining running on {nodes} nodes with steady throughput.",
    "Instruction tuning (SFT) started from the {step}k checkpoint.",
    "{size} base model handed to the evaluation team.",
)
INCIDENTS = (
    "Loss spike at step {step}k; rolled back to the previous checkpoint and lowered the learning rate.",
    "NCCL watchdog timeout on {nodes} nodes after an EFA link flap; the job restarted from the last checkpoint.",
    "FSx for Lustre ran out of space during a checkpoint save and the job crashed.",
    "Xid 79 (GPU fell off the bus) on one node stalled training until the node was replaced.",
    "Neuron runtime NRT timeout in a collective on the Trainium cluster; the job hung.",
    "Checkpoint {step}k is incomplete (a missing shard); resuming from {prev}k.",
    "Data loader OOM on the head node after the dataset grew; jobs could not start.",
)
LESSONS = (
    "Keep two checkpoints on FSx for Lustre and copy older ones to S3 asynchronously: saves are 3x faster.",
    "Set TORCH_NCCL_ASYNC_ERROR_HANDLING=1 and a 10 min NCCL timeout, so a hang fails fast instead of idling nodes.",
    "Run all_reduce_perf on new nodes before they join the job: a bad EFA link shows in a minute.",
    "Pin the Neuron SDK version in the lifecycle scripts; an unpinned upgrade invalidated the compile cache.",
    "Preload the FSx data repository association before a large run; lazy loading slowed the first hours.",
    "HyperPod auto-resume restarted the job from the latest checkpoint overnight; turn it on for every run.",
    "Evaluate JGLUE on a fixed schedule (every 5k steps) so regressions are caught the same day.",
)
NODE_FAILURES = (
    "NVIDIA Xid 79: GPU has fallen off the bus",
    "DCGM diagnostics failed: uncorrectable ECC error",
    "EFA device reported link down",
    "Instance status check failed",
    "Node did not respond to the health agent",
)
NEURON_FAILURES = ("Neuron device error: hardware error on NeuronCore", "EFA device reported link down")


NEURON_ONLY = ("Neuron", "Trainium")
GPU_ONLY = ("GPU", "NCCL", "nccl", "Xid")


def _for_hardware(texts: Sequence[str], *, neuron: bool) -> list[str]:
    """The texts that fit an org's accelerators: no Xid errors on Trainium, no Neuron SDK on P5."""
    wrong = GPU_ONLY if neuron else NEURON_ONLY
    return [text for text in texts if not any(word in text for word in wrong)]


def _is_accelerator(instance_type: str) -> bool:
    family = normalize_instance_type(instance_type).split(".")[0]
    return family.startswith(ACCELERATOR_FAMILIES)


def _main_type(cluster: ClusterPlan) -> str | None:
    """The cluster's accelerator type with the most instances (what scales and fails); None without one."""
    accelerated = [(n, t) for t, n in cluster.instances.items() if n > 0 and _is_accelerator(t)]
    return max(accelerated)[1] if accelerated else None


def _between(rng: random.Random, start: datetime, end: datetime) -> datetime:
    """A random time in [start, end), to the microsecond (end must be after start)."""
    span = int((end - start).total_seconds() * 1_000_000)
    return start + timedelta(microseconds=rng.randrange(max(span, 1)))


def _every(start: datetime, end: datetime, minutes: int) -> list[datetime]:
    """Times in [start, end) every `minutes` minutes, on whole minutes (on the hour's multiples of `minutes`
    when it divides an hour)."""
    first = start.replace(second=0, microsecond=0)
    if 60 % minutes == 0:
        first -= timedelta(minutes=first.minute % minutes)
    if first < start:
        first += timedelta(minutes=minutes)
    step, times = timedelta(minutes=minutes), []
    while first < end:
        times.append(first)
        first += step
    return times


# ------------------------------------------------------------------------------------------------ generation


class _Generator:
    def __init__(self, rng: random.Random, since: datetime, until: datetime) -> None:
        self.rng = rng
        self.since = since
        self.until = until
        self.history = History(since=since, until=until)
        self.used_ids: set[str] = set()
        self._times: dict[tuple[int, datetime | None, int], list[datetime]] = {}

    def weeks(self) -> Iterator[tuple[datetime, datetime]]:
        start = self.since
        while start < self.until:
            yield start, min(start + WEEK, self.until)
            start += WEEK

    def member(self, org: OrgPlan) -> str:
        return self.rng.choice(org.members) if org.members else FALLBACK_MEMBER

    # -------------------------------------------------------------- records and requirements

    def org(self, org: OrgPlan) -> None:
        rng = self.rng
        main = next((t for c in org.clusters if (t := _main_type(c))), None)
        neuron = main is not None and normalize_instance_type(main).startswith("trn")
        size = rng.choice(MODEL_SIZES)
        nodes = (
            sum(
                n
                for c in org.clusters
                for t, n in c.instances.items()
                if main and normalize_instance_type(t) == normalize_instance_type(main)
            )
            or 8
        )
        words: dict[str, Any] = {"size": size, "nodes": nodes}
        notes, incidents, lessons = (_for_hardware(texts, neuron=neuron) for texts in (NOTES, INCIDENTS, LESSONS))
        step = rng.randint(5, 40)
        set_at = _between(rng, self.since, min(self.since + timedelta(days=2), self.until))
        wanted = {
            "model_size": size,
            "framework": NEURON_FRAMEWORK if neuron else rng.choice(GPU_FRAMEWORKS),
            "instance_type": normalize_instance_type(main) if main else "p5.48xlarge",
            "instance_count": str(nodes),
            "storage": rng.choice(STORAGE),
            "deadline": (self.until + timedelta(days=rng.randint(45, 150))).date().isoformat(),
        }
        by = self.member(org)
        self.history.requirements += [
            {"org_id": org.org_id, "key": key, "value": value, "set_by": by, "set_at": set_at}
            for key, value in wanted.items()
        ]
        for week_start, week_end in self.weeks():
            step += rng.randint(6, 18)
            words.update(
                step=step,
                prev=max(step - 5, 1),
                tokens=step * 4,
                fast=rng.randint(2, 5),
                slow=rng.randint(12, 25),
                bw=rng.randint(300, 390),
                minor=rng.randint(19, 23),
                jcqa=rng.randint(70, 88),
                jnli=rng.randint(55, 80),
                jsquad=rng.randint(82, 92),
                gbs=rng.choice((1024, 1536, 2048)),
                stripes=rng.choice((8, 16, 32)),
                tb=rng.choice((1.2, 2.6, 4.8)),
                jglue=rng.randint(60, 75),
            )
            plan = [("note", text) for text in rng.sample(notes, rng.randint(0, 2))]
            plan += [("milestone", rng.choice(MILESTONES))] * (rng.random() < 0.5)
            plan += [("incident", rng.choice(incidents))] * (rng.random() < 0.45)
            plan += [("lesson", rng.choice(lessons))] * (rng.random() < 0.35)
            for kind, text in plan:
                self.record(org, kind, text.format(**words), week_start, week_end)

    def record(self, org: OrgPlan, kind: str, text: str, start: datetime, end: datetime) -> None:
        created = _between(self.rng, start, end)
        resolved_at: datetime | None = None
        resolved_by: str | None = None
        if kind == "incident" and self.rng.random() < 0.75:
            resolved = created + timedelta(hours=self.rng.uniform(3, 48))
            if resolved < self.until:
                resolved_at, resolved_by = resolved, self.member(org)
        self.history.records.append(
            {
                "org_id": org.org_id,
                "kind": kind,
                "text": text,
                "created_by": self.member(org),
                "created_at": created,
                "channel_id": "",
                "request_key": None,
                "resolved_at": resolved_at,
                "resolved_by": resolved_by,
            }
        )

    # -------------------------------------------------------------- states and operations

    def states(self, org: OrgPlan, cluster: ClusterPlan) -> list[dict[str, Any]]:
        rng = self.rng
        main = _main_type(cluster)
        target = cluster.instances.get(main, 0) if main else 0
        times: list[datetime] = []
        if main and target >= 2 and rng.random() < 0.6:  # some clusters scale once or twice a week
            for start, end in self.weeks():
                if end - start > timedelta(hours=4):
                    times += [
                        _between(rng, start + timedelta(hours=1), end - timedelta(hours=1))
                        for _ in range(rng.randint(1, 2))
                    ]
        times.sort()
        counts = [target]
        low, high = max(1, target // 2), target + max(1, target // 4)
        for _ in times:  # backwards from the plan's count, each step a real change
            counts.insert(0, rng.choice([n for n in range(low, high + 1) if n != counts[0]]))
        rows = [
            {
                "org_id": org.org_id,
                "backend": cluster.backend,
                "cluster_name": cluster.name,
                "instance_type": normalize_instance_type(instance_type),
                "count": counts[0] if instance_type == main else count,
                "at": self.since,
            }
            for instance_type, count in sorted(cluster.instances.items())
            if count > 0
        ]
        group = "worker-group-1" if cluster.backend == "hyperpod" else "compute-gpu"
        if main and normalize_instance_type(main).startswith("trn") and cluster.backend != "hyperpod":
            group = "compute-trn"
        for at, before, count in zip(times, counts, counts[1:], strict=False):
            rows.append({**rows[0], "instance_type": normalize_instance_type(main or ""), "count": count, "at": at})
            self.operation(org, cluster, group=group, before=before, count=count, at=at)
        return rows

    def new_id(self) -> str:
        while (value := f"{self.rng.getrandbits(128):032x}") in self.used_ids:
            pass
        self.used_ids.add(value)
        return value

    def operation(
        self, org: OrgPlan, cluster: ClusterPlan, *, group: str, before: int, count: int, at: datetime
    ) -> None:
        requested = max(at - timedelta(minutes=self.rng.randint(8, 40)), self.since)
        confirmed = requested + (at - requested) / 10
        self.history.operations.append(
            {
                "id": self.new_id(),
                "kind": "scale",
                "org_id": org.org_id,
                "backend": cluster.backend,
                "cluster_name": cluster.name,
                "template": "",
                "request": {"group": group, "before": before, "count": count},
                "requested_by": self.member(org),
                "requested_at": requested,
                "channel_id": "",
                "status": "done",
                "confirmed_by": self.member(org),
                "confirmed_at": confirmed,
                "message_ts": None,
                "started_at": confirmed,
                "detail": "",
                "updated_at": at,
            }
        )

    # -------------------------------------------------------------- episodes

    def node_failures(self, org: OrgPlan, cluster: ClusterPlan) -> None:
        rng = self.rng
        main = _main_type(cluster)
        if main is None:
            return
        neuron = normalize_instance_type(main).startswith("trn")
        hyperpod = cluster.backend == "hyperpod"
        for start, end in self.weeks():
            for _ in range(rng.choices((0, 1, 2, 3), weights=(4, 4, 2, 1))[0]):
                duration = timedelta(minutes=rng.uniform(20, 360))
                if end - start <= duration:
                    continue
                opened = _between(rng, start, end - duration)
                closed = opened + duration
                while (node := f"i-0{rng.getrandbits(64):016x}") in self.used_ids:
                    pass
                self.used_ids.add(node)
                self.history.episodes.append(
                    self.episode(
                        org,
                        cluster,
                        node_key=node,
                        generation=0,
                        kind="node",
                        opened=opened,
                        closed=closed,
                        node_ids=[node],
                        group_name="worker-group-1" if hyperpod else ("compute-trn" if neuron else "compute-gpu"),
                        instance_type=main,
                        status="Failure" if hyperpod else "impaired",
                        message=rng.choice(NEURON_FAILURES if neuron else NODE_FAILURES),
                        node_recovery="Automatic" if hyperpod else "",
                        node_hours_lost=round(duration.total_seconds() / 3600, 3),
                    )
                )

    def job_episodes(self, org: OrgPlan, cluster: ClusterPlan, job: str) -> list[tuple[datetime, datetime, str]]:
        rng = self.rng
        spans: list[tuple[datetime, datetime, str]] = []
        for start, end in self.weeks():
            if rng.random() >= 0.4:
                continue
            status = rng.choice(("stall", "slowdown"))
            duration = timedelta(minutes=rng.uniform(12, 90) if status == "stall" else rng.uniform(20, 180))
            if end - start <= duration:
                continue
            opened = _between(rng, start, end - duration)
            spans.append((opened, opened + duration, status))
        for generation, (opened, closed, status) in enumerate(spans):
            message = "no throughput samples" if status == "stall" else f"at {SLOW_FACTOR:.0%} of its recent rate"
            self.history.episodes.append(
                self.episode(
                    org,
                    cluster,
                    node_key=job,
                    generation=generation,
                    kind=job_kind.KIND.name,
                    backend=job_kind.SOURCE,
                    opened=opened,
                    closed=closed,
                    status=status,
                    message=f"{job}: {message} for {(closed - opened).total_seconds() / 60:.0f} min",
                )
            )
        return spans

    def episode(
        self,
        org: OrgPlan,
        cluster: ClusterPlan,
        *,
        node_key: str,
        generation: int,
        kind: str,
        opened: datetime,
        closed: datetime,
        backend: str | None = None,
        node_ids: list[str] | None = None,
        group_name: str = "",
        instance_type: str = "",
        status: str = "",
        message: str = "",
        node_recovery: str = "",
        node_hours_lost: float = 0.0,
    ) -> dict[str, Any]:
        return {
            "org_id": org.org_id,
            "backend": backend or cluster.backend,
            "cluster_name": cluster.name,
            "node_key": node_key,
            "generation": generation,
            "kind": kind,
            "state": "closed",
            "node_ids": node_ids or [],
            "group_name": group_name,
            "instance_type": instance_type,
            "status": status,
            "message": message,
            "opened_at": opened,
            "failing_since": opened,
            "updated_at": closed,
            "closed_at": closed,
            "reopened": 0,
            "node_recovery": node_recovery,
            "silenced": False,
            "storm_id": None,
            "channel_id": "",
            "message_ts": None,
            "coordination_ts": None,
            "acked_by": None,
            "acked_at": None,
            "node_hours_lost": node_hours_lost,
        }

    # -------------------------------------------------------------- throughput rollups

    def rollups(
        self,
        org: OrgPlan,
        cluster: ClusterPlan,
        job: str,
        spans: list[tuple[datetime, datetime, str]],
        *,
        minutes: int,
        sparse_before: datetime | None,
        sparse_minutes: int,
    ) -> None:
        rng = self.rng
        base = cluster.rates.get(job) or rng.uniform(90_000, 160_000)
        trend = rng.uniform(-0.03, 0.05)  # per week
        org_id, name = org.org_id, cluster.name
        since, week_seconds = self.since, WEEK.total_seconds()
        uniform = rng.uniform
        out = self.history.rollups
        pending = list(spans)
        for moment in self.rollup_times(minutes, sparse_before, sparse_minutes):
            while pending and pending[0][1] <= moment:
                pending.pop(0)
            factor = 1.0
            if pending and pending[0][0] <= moment:
                if pending[0][2] == "stall":  # a hung job sends nothing
                    continue
                factor = SLOW_FACTOR
            elapsed = (moment - since).total_seconds() / week_seconds
            rate = base * (1 + trend * elapsed) * factor * (1 + uniform(-0.03, 0.03))
            spread = rate * uniform(0.005, 0.04)
            out.append(
                {
                    "org_id": org_id,
                    "cluster": name,
                    "job": job,
                    "minute": moment,
                    "count": 2,
                    "total": 2 * rate,
                    "min": rate - spread,
                    "max": rate + spread,
                }
            )

    def rollup_times(self, minutes: int, sparse_before: datetime | None, sparse_minutes: int) -> list[datetime]:
        """Whole minutes in [since, until): every `sparse_minutes` before `sparse_before`, then every `minutes`."""
        key = (minutes, sparse_before, sparse_minutes)
        if key not in self._times:
            dense_from = self.since if sparse_before is None else max(self.since, min(sparse_before, self.until))
            self._times[key] = [
                *_every(self.since, dense_from, sparse_minutes),
                *_every(dense_from, self.until, minutes),
            ]
        return self._times[key]


def generate_history(
    *,
    orgs: Sequence[OrgPlan],
    since: datetime,
    until: datetime,
    seed: int = 7,
    rollup_minutes: int = 1,
    sparse_before: datetime | None = None,
    sparse_minutes: int = 60,
) -> History:
    """Rows for [since, until) (aware datetimes). Throughput rollups come every `rollup_minutes` minutes;
    before `sparse_before` (when given) only every `sparse_minutes`, so long histories stay small."""
    if since.tzinfo is None or until.tzinfo is None:
        raise ValueError("since and until must be aware datetimes")
    if until <= since:
        raise ValueError("until must be after since")
    generator = _Generator(random.Random(seed), since, until)
    states: list[dict[str, Any]] = []
    for org in orgs:
        generator.org(org)
        for cluster in org.clusters:
            states += generator.states(org, cluster)
            generator.node_failures(org, cluster)
            for job in cluster.jobs:
                spans = generator.job_episodes(org, cluster, job)
                generator.rollups(
                    org,
                    cluster,
                    job,
                    spans,
                    minutes=rollup_minutes,
                    sparse_before=sparse_before,
                    sparse_minutes=sparse_minutes,
                )
    history = generator.history
    # Storage takes a key's highest id as its newest state: insert in time order.
    history.states = sorted(states, key=lambda s: (s["at"], s["org_id"], s["cluster_name"], s["instance_type"]))
    history.records.sort(key=lambda r: (r["created_at"], r["org_id"]))
    history.episodes.sort(key=lambda e: (e["opened_at"], e["org_id"]))
    history.operations.sort(key=lambda o: (o["updated_at"], o["org_id"]))
    return history


# ------------------------------------------------------------------------------------------------ storing


async def store_history(db: Database, history: History, *, chunk: int = 5000) -> None:
    """Bulk-insert every table's rows, `chunk` rows per transaction (SQLite and Postgres alike)."""
    for model, rows in history.tables():
        for start in range(0, len(rows), chunk):
            async with db.engine.begin() as connection:
                await connection.execute(insert(model), rows[start : start + chunk])


async def seed_sandbox_history(services: Services, *, now: datetime, weeks: int = 3) -> str:
    """Store `weeks` weeks of history ending at `now` for the sandbox's live clusters; a one-line summary.

    The simulated jobs (sandbox.training) get their own rates and no rollups in their last few hours,
    which they backfill themselves when they start."""
    from sandbox.training import HISTORY, sandbox_jobs

    program = services.program
    listings = await services.fleet.list_orgs([o.id for o in program.orgs], fresh=True)
    jobs = sandbox_jobs()
    plans = []
    for org, listing in zip(program.orgs, listings, strict=True):
        clusters = []
        for cluster in listing.clusters:
            mine = [j for j in jobs if j.org == org.id and j.cluster == cluster.name]
            clusters.append(
                ClusterPlan(
                    backend=cluster.backend.value,
                    name=cluster.name,
                    instances=dict(cluster_held(cluster)),  # as the usage ledger records it
                    jobs=tuple(j.job for j in mine),
                    rates={j.job: j.rate for j in mine},
                )
            )
        # Only those who may write records and confirm changes: operators (viewers read), else the admins.
        writers = tuple(user for user, role in org.members.items() if role == "operator")
        plans.append(OrgPlan(org_id=org.id, members=writers or tuple(program.admins), clusters=tuple(clusters)))
    history = generate_history(orgs=plans, since=now - weeks * WEEK, until=now, rollup_minutes=5)
    history.rollups = [r for r in history.rollups if r["minute"] < now - HISTORY]
    await store_history(services.db, history)
    return "seeded " + history.summary()
