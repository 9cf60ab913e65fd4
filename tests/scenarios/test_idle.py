"""Idle accelerators end to end: the seeded program's clusters in moto, the node monitor's sweep (as the
scheduler runs it) handing its listings to the idle check, the monitor's clock injected hours ahead, a
job's sample posted to the ingest API over HTTP, and the notice in the local Slack from opening to close.

In the seeded program only kumo-labs can report jobs (a CloudWatch `throughput` source), so only its
clusters are watched by default; the other orgs have neither a source nor an ingest token."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from bot.ingest.tokens import create_token
from sandbox.slack import Message
from sandbox.world import Sandbox
from tests.scenarios.conftest import COORDINATION, ask, body

ALICE = "U0ALICE01"
KUMO, SAKURA = "C0KUMOLAB", "C0SAKURAA"
DEV = "kumo-p5-dev"  # ParallelCluster, 4 x p5.48xlarge and no job: the seeded program's idle cluster


@pytest.fixture
async def world(sandbox_factory: Callable[..., Any]) -> AsyncIterator[Sandbox]:
    async with sandbox_factory() as sandbox:
        await sandbox.pitcrew.ready.wait()
        await sandbox.pitcrew.services.drain()
        await sandbox.pitcrew.services.monitor.sweep()  # the seeded failures: opened now, at the real time
        yield sandbox


def idle_notices(world: Sandbox, channel: str, cluster: str = DEV) -> list[Message]:
    return [
        m
        for m in world.slack.channel_messages(channel)
        if m.thread_ts is None and cluster in m.text and ("idle" in m.text or "Busy again" in m.text)
    ]


def after_the_last_launch(cluster: str = DEV) -> datetime:
    """Now, or the newest launch of the cluster's instances if later: the test's hours count from a time after
    the world was last changed (moto's world is the session's, and another test may have relaunched this
    fleet; under `pytest --clock-at` each test starts at the same instant, so that could seem to come later)."""
    from moto.ec2.models import ec2_backends

    now = datetime.now(UTC)
    for regions in list(ec2_backends.values()):
        for backend in list(regions.values()):
            for instance in backend.all_instances():
                if {t["key"]: t["value"] for t in instance.get_tags()}.get("parallelcluster:cluster-name") == cluster:
                    now = max(now, instance.launch_time.replace(tzinfo=UTC) + timedelta(seconds=1))
    return now


async def sweep_at(world: Sandbox, moment: datetime) -> None:
    world.pitcrew.services.alerts.clock = lambda: moment  # the desk's clock: the node monitor's and the idle check's
    await world.pitcrew.services.monitor.sweep()
    await world.pitcrew.services.drain()


async def test_an_idle_cluster_gets_one_notice_with_its_cost_and_it_closes_when_a_job_reports(world: Sandbox) -> None:
    services = world.pitcrew.services
    now = after_the_last_launch()
    await sweep_at(world, now + timedelta(hours=1))
    assert not idle_notices(world, KUMO), "under the default 2 h: nothing yet"

    await sweep_at(world, now + timedelta(hours=3))
    await sweep_at(world, now + timedelta(hours=3, minutes=5))
    (notice,) = idle_notices(world, KUMO)
    assert re.search(r"4 \u00d7 p5\.48xlarge idle for 3\.\d h, about \$5,284 a day at the price table", notice.text)
    text = body(notice)
    assert "Kumo Labs" in text and "ParallelCluster" in text and "alert_ack" in str(notice.blocks)
    assert "cloudformation/home?region=us-east-1#/stacks?filteringText=kumo-p5-dev" in text, "its console page"
    (line,) = idle_notices(world, COORDINATION)
    assert "<#C0KUMOLAB>" in body(line)
    assert idle_notices(world, KUMO, "kumo-p5-train"), "the training cluster has no job in this world either"
    assert not [m for m in world.slack.channel_messages(SAKURA) if "idle" in m.text], "no way to report: no notice"

    token = await create_token(services.db, org_id="kumo-labs", created_by="test")
    sample = {"org": "kumo-labs", "cluster": DEV, "job": "sft-7b", "ts": now.isoformat(), "tokens_per_second": 9e4}
    async with httpx.AsyncClient(timeout=30) as client:
        response = await client.post(
            f"{world.bot_url}/api/v1/throughput",
            json={"samples": [sample]},
            headers={"Authorization": f"Bearer {token}"},
        )
    assert response.status_code == 202, response.text
    await sweep_at(world, now + timedelta(hours=3, minutes=10))
    (closed,) = idle_notices(world, KUMO)
    assert closed.ts == notice.ts and closed.text.startswith("Busy again after")
    assert "alert_ack" not in str(closed.blocks), "a closed notice has no buttons"
    assert any("A job reported" in m.text for m in world.slack.messages if m.thread_ts == notice.ts)
    assert "busy again" in idle_notices(world, COORDINATION)[0].text
    # The job sent that one sample, 3 h 10 min before the monitor's now: the next sweep finds the nodes idle
    # again since it, a new spell and so a new notice, counted from the sample.
    await sweep_at(world, now + timedelta(hours=4))
    first, again = idle_notices(world, KUMO)
    assert first.ts == notice.ts and re.search(r"idle for 4\.0 h", again.text), again.text


async def test_cluster_status_links_to_the_console(world: Sandbox) -> None:
    reply = await ask(world, user=ALICE, channel=KUMO, text="status kumo-p5-train")
    text = body(reply)
    assert (
        "https://us-east-1.console.aws.amazon.com/sagemaker/home?region=us-east-1#/cluster-management/kumo-p5-train"
        in text
    )
    dev = await ask(world, user=ALICE, channel=KUMO, text=f"status {DEV}")
    assert "cloudformation/home?region=us-east-1#/stacks?filteringText=kumo-p5-dev" in body(dev)
