"""Training throughput end to end: samples posted to the bot's ingest API over HTTP with an org token,
the throughput monitor's check (as the scheduler runs it), the alert with its chart in the local Slack,
recovery, and `/cluster throughput`."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from bot.digest.weeks import week_of
from bot.ingest.tokens import create_token
from sandbox.slack import Message
from sandbox.world import Sandbox
from tests.scenarios.conftest import COORDINATION, ask, body

ALICE, HANA = "U0ALICE01", "U0HANA001"
KUMO = "C0KUMOLAB"
CLUSTER, JOB = "kumo-p5-train", "llama-70b-pretrain"
RATE = 480_000.0


@pytest.fixture
async def world(sandbox_factory: Callable[..., Any]) -> AsyncIterator[Sandbox]:
    async with sandbox_factory() as sandbox:
        await sandbox.pitcrew.ready.wait()
        yield sandbox


def history(
    end: datetime, *, hours: float = 3, tail: list[tuple[datetime, float]] | None = None
) -> list[dict[str, Any]]:
    """A healthy job's samples every 30 s up to `end`, after a start event, then `tail`."""
    start = end - timedelta(hours=hours)
    base = {"org": "kumo-labs", "cluster": CLUSTER, "job": JOB}
    rows: list[dict[str, Any]] = [{**base, "ts": start.isoformat(), "event": "start"}]
    ts = start
    step = 0
    while ts < end:
        ts += timedelta(seconds=30)
        step += 1
        wiggle = 1 + (0.03 if step % 2 else -0.03)
        rows.append({**base, "ts": ts.isoformat(), "tokens_per_second": RATE * wiggle, "step": step})
    rows += [{**base, "ts": t.isoformat(), "tokens_per_second": v} for t, v in tail or []]
    return rows


async def post(world: Sandbox, token: str, samples: list[dict[str, Any]]) -> httpx.Response:
    async with httpx.AsyncClient(timeout=30) as client:
        response = None
        for start in range(0, len(samples), 1000):
            response = await client.post(
                f"{world.bot_url}/api/v1/throughput",
                json={"samples": samples[start : start + 1000]},
                headers={"Authorization": f"Bearer {token}"},
            )
            assert response.status_code == 202, response.text
        assert response is not None
        return response


def alerts_in(world: Sandbox, channel: str, text: str) -> list[Message]:
    return [m for m in world.slack.channel_messages(channel) if text in m.text and m.thread_ts is None]


async def check(world: Sandbox) -> None:
    await world.pitcrew.services.throughput.check()
    await world.pitcrew.services.drain()


async def test_a_hang_is_alerted_with_a_chart_and_closes_when_throughput_is_back(world: Sandbox) -> None:
    services = world.pitcrew.services
    token = await create_token(services.db, org_id="kumo-labs", created_by="test")
    now = datetime.now(UTC)
    await post(world, token, history(now - timedelta(minutes=15)))  # silent for the last 15 minutes
    await check(world)
    (alert,) = alerts_in(world, KUMO, "Training stalled")
    text = body(alert)
    assert JOB in text and CLUSTER in text and "baseline" in text and "No node of this cluster failed" in text
    assert {"alert_ack", "alert_silence_1"} <= {
        e["action_id"] for b in alert.blocks if b["type"] == "actions" for e in b["elements"]
    }
    charts = [m for m in world.slack.messages if m.thread_ts == alert.ts and m.files]
    assert charts, "the chart is in the alert's thread"
    stored = world.slack.files[charts[0].files[0]["id"]]
    assert stored.content is not None and stored.content.startswith(b"\x89PNG")
    assert alerts_in(world, COORDINATION, JOB)
    await services.monitor.sweep()  # the node monitor shares the episodes table: it must leave jobs alone
    await check(world)
    assert len(alerts_in(world, KUMO, "Training stalled")) == 1, "a lasting stall is one alert"
    assert not any("Recovered" in m.text for m in world.slack.messages if m.thread_ts == alert.ts)

    await post(world, token, [{"org": "kumo-labs", "cluster": CLUSTER, "job": JOB, "tokens_per_second": RATE}])
    await check(world)
    recovered = next(m for m in world.slack.messages if m.ts == alert.ts)
    assert "Throughput back" in recovered.text
    assert any("Recovered" in m.text for m in world.slack.messages if m.thread_ts == alert.ts)


async def test_a_slowdown_against_the_jobs_own_baseline_is_alerted(world: Sandbox) -> None:
    services = world.pitcrew.services
    token = await create_token(services.db, org_id="kumo-labs", created_by="test")
    now = datetime.now(UTC)
    slow = [(now - timedelta(minutes=12) + timedelta(seconds=30 * i), RATE * 0.4) for i in range(24)]
    await post(world, token, history(now - timedelta(minutes=12), tail=slow))
    await check(world)
    (alert,) = alerts_in(world, KUMO, "Training slowed down")
    assert "baseline" in body(alert)


async def test_cluster_throughput_shows_rates_and_sends_the_chart(world: Sandbox) -> None:
    services = world.pitcrew.services
    token = await create_token(services.db, org_id="kumo-labs", created_by="test")
    await post(world, token, history(datetime.now(UTC)))
    # Two messages by design: the reply (ephemeral) and the chart in a DM (files cannot be ephemeral).
    await world.slack.send_command(user_id=ALICE, channel_id=KUMO, command="/cluster", text=f"throughput {CLUSTER}")
    reply = await world.slack.wait_for(lambda m: m.ephemeral_to == ALICE and "Throughput" in m.text, timeout=15)
    assert JOB in body(reply) and "healthy" in body(reply) and "direct message" in body(reply)
    dm = await world.slack.wait_for(lambda m: bool(m.files) and m.channel.startswith("D"), timeout=15)
    assert dm.files[0]["filename"] == f"{CLUSTER}-throughput.png"
    other = await ask(world, user=HANA, channel=KUMO, text=f"throughput kumo-labs/{CLUSTER}")
    assert JOB not in body(other), "another org's jobs are not shown"


async def test_a_hang_longer_than_the_replay_window_stays_a_hang(world: Sandbox) -> None:
    """Review finding: once the healthy samples aged out of the 3-hour window, the rebuilt detector had no
    baseline and the open stall was closed as "throughput is back"."""
    services = world.pitcrew.services
    token = await create_token(services.db, org_id="kumo-labs", created_by="test")
    now = datetime.now(UTC)
    await post(world, token, history(now - timedelta(hours=2, minutes=50), hours=2))
    await check(world)
    (alert,) = alerts_in(world, KUMO, "Training stalled")
    later = now + timedelta(hours=2)  # four hours and more after the last sample
    world.pitcrew.services.throughput._desk.clock = lambda: (
        later
    )  # the monitor's clock, injected as in tests of APScheduler
    await check(world)
    assert not any("Recovered" in m.text for m in world.slack.messages if m.thread_ts == alert.ts)


async def test_a_long_job_name_opens_and_closes_its_episode(world: Sandbox) -> None:
    services = world.pitcrew.services
    token = await create_token(services.db, org_id="kumo-labs", created_by="test")
    long_job = "run-2026-11-29/llama-70b-pretrain/" + "x" * 80  # 114 characters: ingest allows 128
    now = datetime.now(UTC)
    rows = [{**row, "job": long_job} for row in history(now - timedelta(minutes=15))]
    await post(world, token, rows)
    await check(world)
    (alert,) = alerts_in(world, KUMO, "Training stalled")
    await post(world, token, [{"org": "kumo-labs", "cluster": CLUSTER, "job": long_job, "tokens_per_second": RATE}])
    await check(world)
    assert "Throughput back" in next(m for m in world.slack.messages if m.ts == alert.ts).text


async def test_a_decline_slower_than_the_replay_window_is_told_against_the_runs_own_baseline(world: Sandbox) -> None:
    """A job declining to 50 % over 16 hours loses under 10 % in any 3 hours, the window a check reads: the
    monitor keeps each job's detector from check to check, so the baseline stays the run's healthy rate from
    its start, and the alert comes long before half the job is lost (checks every 20 minutes, data as it
    arrives, the monitor's clock injected)."""
    services = world.pitcrew.services
    token = await create_token(services.db, org_id="kumo-labs", created_by="test")
    end = datetime.now(UTC)
    start = end - timedelta(hours=11)
    decline_from, decline_over = start + timedelta(hours=2), timedelta(hours=16)

    def rate_at(ts: datetime) -> float:
        return RATE * (1 - 0.5 * max(0.0, (ts - decline_from) / decline_over))

    base = {"org": "kumo-labs", "cluster": CLUSTER, "job": JOB}
    rows: list[tuple[datetime, dict[str, Any]]] = [(start, {**base, "ts": start.isoformat(), "event": "start"})]
    for step in range(1, int((end - start) / timedelta(seconds=30))):
        ts = start + timedelta(seconds=30 * step)
        value = rate_at(ts) * (1 + (0.03 if step % 2 else -0.03))
        rows.append((ts, {**base, "ts": ts.isoformat(), "tokens_per_second": value}))
    clock = [start]
    services.throughput._desk.clock = lambda: clock[0]  # the monitor's clock, injected as in tests of APScheduler
    sent = 0
    while clock[0] < end and not alerts_in(world, KUMO, "Training slowed down"):
        clock[0] += timedelta(minutes=20)
        batch = [sample for ts, sample in rows[sent:] if ts <= clock[0]]
        if batch:
            await post(world, token, batch)
            sent += len(batch)
        await check(world)
    (alert,) = alerts_in(world, KUMO, "Training slowed down")
    told_at = clock[0]
    assert 1 - rate_at(told_at) / RATE <= 0.25, f"told at {1 - rate_at(told_at) / RATE:.0%} down"
    baseline = float(re.search(r"baseline ([\d,]+)", body(alert)).group(1).replace(",", ""))  # type: ignore[union-attr]
    # The median of the run's healthy 10-minute blocks since its start: it lags a decline this slow by a few
    # per cent, where the last 3 hours' median would stand at the declined rate (about 20 % down by now).
    assert baseline >= 0.9 * RATE, f"baseline {baseline:,.0f}: the run's healthy rate, not the declined one"


async def test_records_and_the_digest_time_an_episode_from_its_start_as_the_alert_does(world: Sandbox) -> None:
    """Issue 21: `/track doc` and the digest dated a throughput episode at its detection and timed it from
    there ("lasted 2 min" for a hang the alert called "back after 17 min"). They count from its start."""
    services = world.pitcrew.services
    token = await create_token(services.db, org_id="kumo-labs", created_by="test")
    now = datetime.now(UTC)
    clock = [now]
    services.throughput._desk.clock = lambda: clock[0]  # the monitor's clock, injected
    services.digest.clock = services.records.clock = lambda: clock[0]
    hung_at = now - timedelta(minutes=15)  # the last good sample: the hang began there, was told at `now`
    await post(world, token, history(hung_at))
    await check(world)
    (alert,) = alerts_in(world, KUMO, "Training stalled")
    clock[0] = now + timedelta(minutes=2)
    back = {"org": "kumo-labs", "cluster": CLUSTER, "job": JOB, "ts": clock[0].isoformat(), "tokens_per_second": RATE}
    await post(world, token, [back])
    await check(world)
    recovered = next(m for m in world.slack.messages if m.ts == alert.ts)
    assert "Throughput back after 17 min" in recovered.text

    started = hung_at.astimezone(services.throughput._desk.tz).strftime("%Y-%m-%d %H:%M")
    doc = body(await ask(world, user=ALICE, channel=KUMO, text="doc", command="/track"))
    (line,) = [line for line in doc.splitlines() if JOB in line]
    assert line.startswith(started) and "lasted 17 min" in line, line
    week = week_of(now, services.throughput._desk.tz).label
    before = len(world.slack.messages)
    await world.slack.send_command(user_id=ALICE, channel_id=KUMO, command="/digest", text=f"preview --week {week}")
    preview = await world.slack.wait_for(
        lambda m: m.ephemeral_to == ALICE and m.via != "command", since=before, timeout=60
    )
    (line,) = [line for line in body(preview).splitlines() if f"stall of `{JOB}`" in line]
    assert started in line and "17 min" in line, line
