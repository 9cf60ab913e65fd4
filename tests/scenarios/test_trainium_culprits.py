"""Trainium culprits and faulty nodes end to end (issue 22): a Trn1 cluster's simulated Neuron monitor and EFA
series in a real Prometheus (`prometheus_with`), read by Pitcrew's reader, the job's samples through the ingest
API, the throughput check as the scheduler runs it, the alerts in sakura-ai's channel of the local Slack.

Each Trainium fault names its node and cause in the job's alert, in words of NeuronCores and Trainium devices;
a node that diverges before any job slows opens a `faulty_node` alert, which closes when it is back in line or
has left the cluster."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.ingest.tokens import create_token
from bot.node_metrics.series import Cause
from sandbox.culprits import running_gpu_workers
from sandbox.node_metrics import TRN1, TRN1_EFA, Injected, NodeMetricsSimulator, Replacement
from sandbox.slack import Message
from sandbox.world import Sandbox
from storage import crud
from storage.models import Episode
from tests.conftest import SeededAws
from tests.monitor.test_jobs_culprit import with_metrics
from tests.scenarios.conftest import body, sandbox_factory  # noqa: F401  (the scenario fixture)
from tests.scenarios.test_throughput import RATE, post

ORG, CLUSTER, JOB, SAKURA = "sakura-ai", "sakura-trn1-pretrain", "mixtral-8x7b", "C0SAKURA1"
NEW_NODE = "i-0feedface0000trn1"


def trn1_nodes(seeded_aws: SeededAws) -> list[str]:
    org = seeded_aws.program.org(ORG)
    assert org is not None
    return running_gpu_workers(org, CLUSTER)[0][:8]


def simulator(nodes: list[str], seed: int, **options: Any) -> NodeMetricsSimulator:
    return NodeMetricsSimulator(
        cluster=CLUSTER, nodes=nodes, gpus_per_node=32, efa_devices=TRN1_EFA, hardware=TRN1, seed=seed, **options
    )


def samples(end: datetime, *, since: datetime) -> list[dict[str, Any]]:
    """A healthy job's samples every 30 s over the 3 hours to `since` (after a start event), then at 40 %."""
    start = end - timedelta(hours=3)
    base = {"org": ORG, "cluster": CLUSTER, "job": JOB}
    rows: list[dict[str, Any]] = [{**base, "ts": start.isoformat(), "event": "start"}]
    ts, step = start, 0
    while ts < end:
        ts += timedelta(seconds=30)
        step += 1
        level = 1.0 if ts <= since else 0.4
        rows.append({**base, "ts": ts.isoformat(), "tokens_per_second": RATE * level * (1 + 0.03 * (-1) ** step)})
    return rows


def alerts_in(world: Sandbox, text: str) -> list[Message]:
    return [m for m in world.slack.channel_messages(SAKURA) if m.thread_ts is None and text in m.text]


TRAINIUM_FAULTS = [
    ("stuck_core", Cause.GPU, "NeuronCore 9 (Trainium device 4) stuck at 0 % utilization"),
    ("device_missing", Cause.GPU, "15 of 16 Trainium devices reported (trn1.32xlarge)"),
    ("hardware_errors", Cause.GPU, "hardware execution errors on its Trainium devices"),
    ("ecc_uncorrected", Cause.GPU_MEMORY, "uncorrected SRAM ECC errors on Trainium device 4"),
    ("ecc_corrected", Cause.GPU_MEMORY, "corrected SRAM ECC errors on Trainium device 4 at"),
    ("network", Cause.NETWORK, "EFA "),
]


@pytest.mark.parametrize(("shape", "cause", "evidence"), TRAINIUM_FAULTS, ids=[f[0] for f in TRAINIUM_FAULTS])
async def test_a_trn1_jobs_slowdown_names_the_node_and_the_cause_of_each_trainium_fault(
    shape: str,
    cause: Cause,
    evidence: str,
    sandbox_factory: Callable[..., Any],  # noqa: F811
    prometheus_with: Callable[..., str],
    seeded_aws: SeededAws,
) -> None:
    nodes = trn1_nodes(seeded_aws)
    culprit = nodes[3]
    now = datetime.now(UTC).replace(microsecond=0)
    since = now - timedelta(minutes=12)
    sim = simulator(nodes, seed=len(shape))
    unit = 9 if shape == "stuck_core" else 4
    neuron = None if cause is Cause.NETWORK else shape
    sim.inject(
        Injected(
            cause=cause,
            node=culprit,
            start=since.timestamp(),
            end=None,
            gpu=unit,
            severity=0.6,
            neuron=neuron,
            sram=True,
        )
    )
    url = prometheus_with(sim.series(start=(now - timedelta(hours=2)).timestamp(), end=now.timestamp()))

    async with sandbox_factory(program_transform=with_metrics(url, ORG)) as world:
        await world.pitcrew.ready.wait()
        services = world.pitcrew.services
        await services.monitor.sweep()  # the clusters Pitcrew knows, as the node sweep records them
        await services.drain()
        token = await create_token(services.db, org_id=ORG, created_by="test")
        await post(world, token, samples(now, since=since))
        await services.throughput.check()
        await services.drain()

        (alert,) = alerts_in(world, "Training slowed down")
        text = body(alert)
        assert f"Likely culprit: `{culprit}`" in text and f"({cause.value})" in text, text
        said = text.split("Likely culprit", 1)[1]
        assert evidence in said and "GPU" not in said, said
        async with services.db.session() as session:
            (row,) = [r for r in await crud.open_episodes(session, org_id=ORG) if r.kind == "job"]
        assert (row.cause, row.suspects[0]) == (cause.value, culprit)
        assert not alerts_in(world, "aulty node"), "the job's alert names the node: one alert about it"


async def faulty_rows(world: Sandbox) -> list[Episode]:
    async with world.pitcrew.services.db.session() as session:
        rows = await crud.episodes_between(
            session, org_id=ORG, since=datetime(2000, 1, 1, tzinfo=UTC), until=datetime(2100, 1, 1, tzinfo=UTC)
        )
    return [r for r in rows if r.kind == "faulty_node"]


def now_of(world: Sandbox, message: Message) -> Message:
    return next(m for m in world.slack.messages if m.ts == message.ts and m.channel == message.channel)


async def test_faulty_trn1_nodes_open_an_alert_and_close_it_when_back_in_line_or_gone(
    sandbox_factory: Callable[..., Any],  # noqa: F811
    prometheus_with: Callable[..., str],
    seeded_aws: SeededAws,
) -> None:
    """No job runs: a NeuronCore stuck over [30, 90) min opens an alert that closes once it works again; a
    Trainium device missing from 120 min opens one at once (a hard fault), closed when the node is replaced at
    150 min; the healthy peers (and the replacement) never get one."""
    nodes = trn1_nodes(seeded_aws)
    stuck, missing = nodes[2], nodes[6]
    t0 = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=4)

    def at(minutes: float) -> float:
        return (t0 + timedelta(minutes=minutes)).timestamp()

    sim = simulator(nodes, seed=21, replacements=[Replacement(old=missing, new=NEW_NODE, at=at(150))])
    sim.inject(Injected(cause=Cause.GPU, node=stuck, start=at(30), end=at(90), gpu=11, neuron="stuck_core"))
    sim.inject(Injected(cause=Cause.GPU, node=missing, start=at(120), end=None, gpu=3, neuron="device_missing"))
    url = prometheus_with(sim.series(start=at(0), end=at(180)))

    async with sandbox_factory(program_transform=with_metrics(url, ORG)) as world:
        await world.pitcrew.ready.wait()
        services = world.pitcrew.services
        await services.monitor.sweep()
        await services.drain()

        async def check(minutes: float) -> None:
            services.alerts.clock = lambda: t0 + timedelta(minutes=minutes)
            await asyncio.gather(services.throughput.check())
            await services.drain()

        await check(20)
        assert not await faulty_rows(world), "a healthy Trn1 cluster has no faulty node"

        await check(45)
        (alert,) = alerts_in(world, stuck)
        text = body(alert)
        assert f"Faulty node: `{stuck}` of `{ORG}/{CLUSTER}` (gpu)" in text, text
        assert "a Trainium device missing, a NeuronCore stuck or hardware execution errors" in text, text
        assert "NeuronCore 11 (Trainium device 5) stuck at 0 %" in text and "GPU" not in text, text

        await check(105)  # its NeuronCore works again since 90 min
        assert now_of(world, alert).text.startswith("Back in line with its peers"), now_of(world, alert).text

        await check(122)  # a device missing since 120 min: one sample is enough
        (second,) = alerts_in(world, missing)
        assert f"`{missing}` of `{ORG}/{CLUSTER}` (gpu)" in body(second)
        assert "15 of 16 Trainium devices reported (trn1.32xlarge)" in body(second)

        await check(170)  # replaced at 150 min: its series ended, its replacement reports
        assert now_of(world, second).text.startswith("Left the cluster"), now_of(world, second).text
        episodes = await faulty_rows(world)
        assert sorted((e.node_key, e.cause, e.state, e.status) for e in episodes) == sorted(
            [(stuck, "gpu", "closed", "cleared"), (missing, "gpu", "closed", "left")]
        ), "no healthy peer, and not the replacement, got an alert; nothing was thermal"
