"""Idle accelerators: the pure parts (which types are accelerators, who is watched, since when a cluster is
idle, what to do, what it costs), then the check as the node sweep drives it (its listings handed over) on
SQLite and Postgres with the local Slack over HTTP and an injected clock: one notice after the org's hours,
edited as it grows, closed when a job reports; none for an org that cannot report jobs or opted out; one
with two replicas."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from slack_sdk.web.async_client import AsyncWebClient

from bot.alerts.desk import AlertDesk
from bot.alerts.kinds import idle as idle_kind
from bot.clusters.model import Backend, Cluster, Health, Node
from bot.clusters.templates import load_templates
from bot.config import ProgramConfig, load_program
from bot.ingest.tokens import create_token
from bot.monitor.idle import IdleLook, IdleMonitor, cost_text, decide, is_accelerator, look, threshold
from bot.resources import shipped_templates
from bot.slack.alerts import SlackAlerts
from bot.slack.poster import Poster
from sandbox.asgi_server import serve_asgi
from sandbox.slack import LocalSlack, Message
from sandbox.world import EXAMPLE_PROGRAM
from storage import crud
from storage.db import Database
from storage.models import Episode, ThroughputRollup, ThroughputSample

T0 = datetime(2026, 11, 30, 0, 0, tzinfo=UTC)
TOKEN = "xoxb-test-token"
KUMO, SAKURA = "kumo-labs", "sakura-ai"  # kumo-labs has a CloudWatch `throughput` source; sakura-ai none
PRICES = load_templates(shipped_templates()).prices


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def node(node_id: str, instance_type: str = "p5.48xlarge", *, status: str = "running", at: datetime = T0) -> Node:
    return Node(
        node_id=node_id,
        group="compute-gpu" if instance_type.startswith("p") else "HeadNode",
        instance_type=instance_type,
        status=status,
        health=Health.HEALTHY,
        launch_time=at,
    )


def dev_cluster(org: str = KUMO, count: int = 4, name: str = "kumo-p5-dev") -> Cluster:
    """A ParallelCluster cluster: a head node and `count` P5 compute nodes, up since T0."""
    nodes = (node("i-0head", "m5.8xlarge"), *(node(f"i-0gpu{i:02d}") for i in range(count)))
    return Cluster(org=org, name=name, backend=Backend.PCLUSTER, status="CREATE_COMPLETE", nodes=nodes, created=T0)


# ------------------------------------------------------------------ pure


@pytest.mark.parametrize(
    ("instance_type", "expected"),
    [
        ("p5.48xlarge", True),
        ("ml.p5.48xlarge", True),
        ("trn1.32xlarge", True),
        ("ml.trn1n.32xlarge", True),
        ("g5.48xlarge", True),
        ("inf2.48xlarge", True),
        ("p4d.24xlarge", True),
        ("m5.8xlarge", False),
        ("ml.m5.12xlarge", False),
        ("c5n.18xlarge", False),
        ("gr6.4xlarge", False),  # a memory-optimized family whose name begins with g
    ],
)
def test_accelerator_types_are_the_gpu_and_trainium_families(instance_type: str, expected: bool) -> None:
    assert is_accelerator(instance_type) is expected


def test_an_org_that_cannot_report_jobs_is_not_watched_unless_it_opts_in() -> None:
    program = load_program(EXAMPLE_PROGRAM)
    org = program.orgs[0]
    assert threshold(org, reports_jobs=True) == timedelta(hours=2), "the default"
    assert threshold(org, reports_jobs=False) is None, "unset, and no way to report jobs: no notices"
    opted_in = org.model_validate({**org.model_dump(exclude_unset=True), "idle_after_hours": 6})
    assert threshold(opted_in, reports_jobs=False) == timedelta(hours=6)
    for off in (0, None):
        opted_out = org.model_validate({**org.model_dump(exclude_unset=True), "idle_after_hours": off})
        assert threshold(opted_out, reports_jobs=True) is None


def test_idleness_begins_at_the_last_sample_or_the_nodes_launch_and_never_before_the_look_back() -> None:
    floor = T0 - timedelta(days=28)
    cluster = dev_cluster()
    assert look(cluster, last_activity=None, job_active=False, floor=floor).since == T0
    later = T0 + timedelta(hours=3)
    seen = look(cluster, last_activity=later, job_active=False, floor=floor)
    assert seen.since == later and [n.node_id for n in seen.nodes] == [f"i-0gpu{i:02d}" for i in range(4)]
    old = Cluster(
        org=KUMO,
        name="old",
        backend=Backend.PCLUSTER,
        status="RUNNING",
        nodes=(node("i-1", at=floor - timedelta(days=9)),),
    )
    assert look(old, last_activity=None, job_active=False, floor=floor).since == floor, "idle at least since then"
    stopped = Cluster(
        org=KUMO, name="s", backend=Backend.PCLUSTER, status="RUNNING", nodes=(node("i-2", status="stopped"),)
    )
    assert look(stopped, last_activity=None, job_active=False, floor=floor).nodes == ()
    creating = Cluster(
        org=KUMO, name="c", backend=Backend.HYPERPOD, status="Creating", nodes=(node("i-3", "ml.p5.48xlarge"),)
    )
    assert not look(creating, last_activity=None, job_active=False, floor=floor).known


@given(
    idle_minutes=st.integers(min_value=0, max_value=10_000),
    after_minutes=st.integers(min_value=1, max_value=5_000),
    job_active=st.booleans(),
    has_nodes=st.booleans(),
    reported_since_open=st.one_of(st.none(), st.booleans()),
    stopped=st.booleans(),
)
def test_decide_opens_after_the_threshold_and_closes_only_when_a_job_reports_or_the_nodes_go(
    idle_minutes: int,
    after_minutes: int,
    job_active: bool,
    has_nodes: bool,
    reported_since_open: bool | None,
    stopped: bool,
) -> None:
    now = T0 + timedelta(days=10)
    since = now - timedelta(minutes=idle_minutes)
    nodes = (node("i-1"),) if has_nodes else ()
    after = timedelta(minutes=after_minutes)
    if reported_since_open is None:  # no notice open
        seen = IdleLook(nodes=nodes, since=since, job_active=job_active, last_activity=since)
        decision = decide(seen, open_since=None, after=after, now=now)
        opens = has_nodes and not job_active and idle_minutes >= after_minutes
        assert decision.action == ("open" if opens else "nothing")
        return
    opened = since - timedelta(minutes=5)
    last = since if reported_since_open else opened - timedelta(minutes=1)
    seen = IdleLook(nodes=nodes, since=since, job_active=job_active, last_activity=last, stopped=stopped)
    decision = decide(seen, open_since=opened, after=after, now=now)
    if job_active or reported_since_open:
        assert (decision.action, decision.status) == ("close", idle_kind.BUSY), "only a job is put to work"
    elif not has_nodes:  # said as it happened: stopped, or gone
        assert (decision.action, decision.status) == ("close", idle_kind.STOPPED if stopped else idle_kind.GONE)
    else:
        assert decision.action == "update", "a notice stays open however the threshold compares"


def test_the_cost_is_a_day_at_the_price_table_and_says_what_it_cannot_price() -> None:
    assert cost_text([("p5.48xlarge", 12)], PRICES) == "about $15,852 a day at the price table"
    assert "not confirmed" in cost_text([("ml.p5.48xlarge", 2)], PRICES), "HyperPod's P5 rate is unconfirmed"
    assert cost_text([("p5.48xlarge", 1), ("g6.48xlarge", 2)], PRICES).endswith("g6.48xlarge not priced")
    assert cost_text([("g6.48xlarge", 2)], PRICES) == "no price for g6.48xlarge in the price table"


# ------------------------------------------------------------------ the check, as the sweep drives it


@pytest.fixture(scope="module")
def program() -> ProgramConfig:
    return load_program(EXAMPLE_PROGRAM)


@pytest.fixture
async def slack(program: ProgramConfig) -> AsyncIterator[LocalSlack]:
    channels = {program.coordination_channel: "coordination", **{o.channel: o.id for o in program.orgs}}
    local = LocalSlack(signing_secret="s", bot_token=TOKEN, users={}, channels=channels)
    async with serve_asgi(local.app) as base_url:
        local.base_url = base_url
        yield local


@pytest.fixture
async def pair(db: Database, slack: LocalSlack, program: ProgramConfig) -> AsyncIterator[list[IdleMonitor]]:
    """Two replicas' idle checks on one database and one clock."""
    clock = Clock()
    posters, monitors = [], []
    for _ in range(2):
        poster = Poster(client=AsyncWebClient(token=TOKEN, base_url=slack.api_url), post_interval=0.0)
        desk = AlertDesk(db=db, poster=poster, program=program, presenter=SlackAlerts(), clock=clock)
        posters.append(poster)
        monitors.append(IdleMonitor(desk=desk, prices=PRICES))
    yield monitors
    for poster in posters:
        await poster.aclose()


def at(monitor: IdleMonitor, moment: datetime) -> None:
    clock = monitor._desk.clock
    assert isinstance(clock, Clock)
    clock.now = moment


def notices(slack: LocalSlack, channel: str, text: str = "idle") -> list[Message]:
    return [m for m in slack.channel_messages(channel) if text in m.text and m.thread_ts is None]


async def stored(db: Database) -> list[Episode]:
    async with db.session() as session:
        return [
            r
            for r in await crud.episodes_between(
                session, org_id=None, since=T0 - timedelta(days=1), until=T0 + timedelta(days=30)
            )
            if r.kind == "idle"
        ]


async def test_a_notice_after_the_threshold_edited_as_it_grows_and_closed_when_a_job_reports(
    pair: list[IdleMonitor], slack: LocalSlack, db: Database, program: ProgramConfig
) -> None:
    monitor = pair[0]
    channel = program.org(KUMO).channel  # type: ignore[union-attr]
    cluster = dev_cluster()
    at(monitor, T0 + timedelta(hours=1, minutes=59))
    assert await monitor.observe(KUMO, [cluster]) == 0 and not notices(slack, channel)

    at(monitor, T0 + timedelta(hours=2))
    assert await monitor.observe(KUMO, [cluster]) == 1
    [notice] = notices(slack, channel)
    assert "4 \u00d7 p5.48xlarge idle for 2.0 h, about $5,284 a day at the price table" in notice.text
    [line] = notices(slack, program.coordination_channel)
    assert "kumo-labs/kumo-p5-dev" in line.text and "$5,284 a day" in line.text
    [row] = await stored(db)
    assert (row.node_key, row.instance_type, row.failing_since) == ("cluster", "p5.48xlarge", T0)
    assert row.node_ids == [f"i-0gpu{i:02d}" for i in range(4)], "the accelerator nodes, not the head node"

    at(monitor, T0 + timedelta(hours=2, minutes=30))
    assert await monitor.observe(KUMO, [cluster]) == 0, "edited at most hourly"
    at(monitor, T0 + timedelta(hours=6))
    assert await monitor.observe(KUMO, [cluster]) == 1
    [notice] = notices(slack, channel)
    assert "idle for 6.0 h" in notice.text and notice.edits == 1
    assert "idle for 6.0 h" in notices(slack, program.coordination_channel)[0].text

    reported = T0 + timedelta(hours=6, minutes=10)
    sample = ThroughputSample(
        org_id=KUMO, cluster="kumo-p5-dev", job="sft", ts=reported, tokens_per_second=1e5, received_at=reported
    )
    async with db.session() as session:
        await crud.add_samples(session, samples=[sample])
    at(monitor, T0 + timedelta(hours=6, minutes=11))
    assert await monitor.observe(KUMO, [cluster]) == 1
    [notice] = [m for m in slack.channel_messages(channel) if m.ts == row.message_ts]
    assert notice.text.startswith("Busy again after 6.2 h idle: kumo-labs/kumo-p5-dev")
    assert any("A job reported" in m.text for m in slack.channel_messages(channel) if m.thread_ts == row.message_ts)
    [closed] = await stored(db)
    assert (closed.state, closed.status, closed.closed_at) == ("closed", idle_kind.BUSY, reported)
    at(monitor, T0 + timedelta(hours=7))
    assert await monitor.observe(KUMO, [cluster]) == 0, "busy: nothing opens"


async def test_an_org_without_a_way_to_report_jobs_gets_none_until_it_has_a_token(
    pair: list[IdleMonitor], slack: LocalSlack, db: Database, program: ProgramConfig
) -> None:
    monitor = pair[0]
    cluster = dev_cluster(SAKURA, name="sakura-trn1-pretrain")
    at(monitor, T0 + timedelta(days=3))
    assert await monitor.observe(SAKURA, [cluster]) == 0
    await create_token(db, org_id=SAKURA, created_by="test")
    assert await monitor.observe(SAKURA, [cluster]) == 1
    assert notices(slack, program.org(SAKURA).channel)  # type: ignore[union-attr]


async def test_an_open_job_alert_or_an_opt_out_means_no_notice(
    pair: list[IdleMonitor], slack: LocalSlack, db: Database, program: ProgramConfig
) -> None:
    monitor = pair[0]
    hung = Episode(
        org_id=KUMO,
        backend="throughput",
        cluster_name="kumo-p5-dev",
        node_key="sft",
        kind="job",
        state="open",
        status="stall",
        opened_at=T0,
        failing_since=T0,
        updated_at=T0,
    )
    async with db.session() as session:
        await crud.add_episode(session, episode=hung)
    at(monitor, T0 + timedelta(hours=5))
    assert await monitor.observe(KUMO, [dev_cluster()]) == 0, "a hung job is a job: its own alert says so"

    kumo = program.org(KUMO)
    assert kumo is not None
    off = kumo.model_validate({**kumo.model_dump(exclude_unset=True), "idle_after_hours": 0})
    quiet = program.model_copy(update={"orgs": [off if o.id == KUMO else o for o in program.orgs]})
    monitor._desk.program = quiet
    assert await monitor.observe(KUMO, [dev_cluster(name="other")]) == 0
    assert not notices(slack, kumo.channel)


async def test_two_replicas_post_one_notice_and_a_cluster_gone_closes_it(
    pair: list[IdleMonitor], slack: LocalSlack, db: Database, program: ProgramConfig
) -> None:
    at(pair[0], T0 + timedelta(hours=3))
    results = await asyncio.gather(*(m.observe(KUMO, [dev_cluster()]) for m in pair))
    assert sorted(results) == [0, 1]
    channel = program.org(KUMO).channel  # type: ignore[union-attr]
    assert len(notices(slack, channel)) == 1
    assert await pair[1].observe(KUMO, []) == 1, "a complete listing without it: the cluster is gone"
    [row] = await stored(db)
    assert (row.state, row.status) == ("closed", idle_kind.GONE)


async def test_a_cluster_whose_raw_samples_were_pruned_is_idle_since_its_last_rollup(
    pair: list[IdleMonitor], db: Database
) -> None:
    """The raw samples are kept 14 days, the one-minute rollups longer: the last rollup's minute dates it."""
    last_minute = T0 + timedelta(hours=1)
    async with db.session() as session:
        session.add(
            ThroughputRollup(
                org_id=KUMO, cluster="kumo-p5-dev", job="sft", minute=last_minute, count=2, total=2e5, min=1e5, max=1e5
            )
        )
        await session.commit()
    at(pair[0], T0 + timedelta(hours=2, minutes=30))
    assert await pair[0].observe(KUMO, [dev_cluster()]) == 0, "idle 1 h 29 min since the rollup's end: not yet"
    at(pair[0], T0 + timedelta(hours=3, minutes=1))
    assert await pair[0].observe(KUMO, [dev_cluster()]) == 1
    [row] = await stored(db)
    assert row.failing_since == last_minute + timedelta(minutes=1)
