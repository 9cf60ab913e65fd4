"""Reserved capacity end to end: `/cluster capacity` typed into the local Slack, read from moto's training plans
and capacity reservations (sandbox.moto_support), and the ending notices the leader's capacity check posts in
the org's channel, once each, with two replicas checking at the same moments of an injected clock.

The seeded program carries the sandbox's reserved capacity (sandbox.reserved): a Capacity Block under
kumo-labs' ParallelCluster cluster kumo-p5-dev (its 4 P5 nodes, matched by instance type and zone) ending
tomorrow, and a training plan under hoshi-vision's HyperPod cluster hoshi-p5-vlm (worker-group-1) ending in 6
days."""

from __future__ import annotations

import asyncio
import copy
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import yaml
from moto.ec2.models import ec2_backends

from bot.alerts.desk import AlertDesk
from bot.capacity.monitor import CapacityMonitor
from bot.capacity.service import CACHE_SECONDS, CapacityService
from bot.slack.alerts import SlackAlerts
from sandbox.moto_support import add_capacity_reservation
from sandbox.reserved import SeededReservation
from sandbox.slack import Message
from sandbox.world import Sandbox
from storage import crud
from storage.db import Database
from tests.conftest import SeededAws
from tests.scenarios.conftest import ADMIN, COORDINATION, ask, body

ALICE, BOB, GUEST = "U0ALICE01", "U0BOB0001", "U0GUEST01"  # kumo-labs operator, kumo-labs viewer, nobody
KUMO, HOSHI = "C0KUMOLAB", "C0HOSHI01"
CACHE_ACCOUNT, CACHE_REGION = "111111111111", "us-east-1"


def seeded(seeded_aws: SeededAws, source: str) -> SeededReservation:
    return next(r for r in seeded_aws.report.reserved if r.source == source)


def shown(moment: datetime) -> str:
    return moment.astimezone(ZoneInfo("Asia/Tokyo")).strftime("%Y-%m-%d %H:%M JST")


async def test_an_admin_lists_every_orgs_reserved_capacity_with_the_clusters_using_it(
    sandbox: Sandbox, seeded_aws: SeededAws
) -> None:
    block, plan = seeded(seeded_aws, "capacity_block"), seeded(seeded_aws, "training_plan")
    reply = await ask(sandbox, user=ADMIN, channel=COORDINATION, text="capacity all")
    text = body(reply)
    assert reply.kind == "ephemeral"
    assert "Reserved capacity · 12 orgs" in text
    for org in sandbox.program.orgs:
        assert f"(`{org.id}`)" in text
    # ParallelCluster: the Capacity Block, and the nodes of kumo-p5-dev it holds (matched by type and zone)
    assert f"*{block.id}* · EC2 Capacity Block for ML · `active`" in text
    assert "`kumo-labs/kumo-p5-dev` compute-gpu: 4 nodes" in text
    assert f"ends {shown(block.end)}" in text  # in the program's time zone
    assert re.search(r"started \d{4}-\d\d-\d\d \d\d:\d\d JST · ends", text), "when it began, too"
    # HyperPod: the training plan, through the worker group's TrainingPlanArn
    assert "*hoshi-vision-p5-plan* · SageMaker training plan · `Active`" in text
    assert "16 x ml.p5.48xlarge, 1 available" in text
    assert "`hoshi-vision/hoshi-p5-vlm` worker-group-1: 15 nodes" in text
    assert f"ends {shown(plan.end)}" in text
    assert "_no training plans or capacity reservations_" in text  # the orgs without any say so
    assert len(reply.blocks) <= 50


async def test_members_see_their_own_orgs_capacity_and_nothing_of_another_org(sandbox: Sandbox) -> None:
    for user in (ALICE, BOB):
        reply = await ask(sandbox, user=user, channel=KUMO, text="capacity")
        text = body(reply)
        assert "Reserved capacity · Kumo Labs" in text and "kumo-p5-dev" in text
        assert "hoshi" not in text
    narrowed = body(await ask(sandbox, user=ALICE, channel=KUMO, text="capacity all"))
    assert "kumo-p5-dev" in narrowed and "hoshi" not in narrowed
    other = await ask(sandbox, user=ALICE, channel=KUMO, text="capacity hoshi-vision")
    missing = await ask(sandbox, user=ALICE, channel=KUMO, text="capacity no-such-org")
    assert "hoshi-p5-vlm" not in body(other)
    assert body(other).replace("hoshi-vision", "X") == body(missing).replace("no-such-org", "X")  # reveals nothing
    outsider = await ask(sandbox, user=GUEST, channel=KUMO, text="capacity kumo-labs")
    assert "kumo-p5-dev" not in body(outsider)


async def test_bad_capacity_input_says_what_was_wrong_and_how_to_ask(sandbox: Sandbox) -> None:
    for text, said in [
        ("capacity kumo-labs hoshi-vision", "takes at most one org"),
        ("capacity Kumo_Labs!", "is not an org id or `all`"),
        ("capacity --soon", "is not an option of `/cluster capacity`"),
    ]:
        reply = await ask(sandbox, user=ADMIN, channel=COORDINATION, text=text)
        assert said in body(reply), body(reply)
        assert "Usage: `/cluster capacity [ORG|all] [--public]`" in body(reply) or "Usage:" in body(reply)


def notices(world: Sandbox, channel: str) -> list[Message]:
    return [
        m
        for m in world.slack.channel_messages(channel)
        if m.thread_ts is None and m.ephemeral_to is None and "Reserved capacity" in m.text
    ]


async def test_the_24h_and_2h_notices_are_posted_once_each_by_two_replicas(
    sandbox_factory: Callable[..., Any], seeded_aws: SeededAws, database_url: str
) -> None:
    block = seeded(seeded_aws, "capacity_block")
    now = [block.end - timedelta(hours=23)]

    def clock() -> datetime:
        return now[0]

    async with sandbox_factory(database_url=database_url) as world:
        await world.pitcrew.ready.wait()
        services = world.pitcrew.services
        other_db = Database(url=database_url)
        try:
            replicas = []
            for db in (services.db, other_db):  # two replicas: their own engines on one database
                desk = AlertDesk(
                    db=db, poster=services.poster, program=services.program, presenter=SlackAlerts(), clock=clock
                )
                capacity = CapacityService(program=services.program, accounts=seeded_aws.accounts, fleet=services.fleet)
                replicas.append(CapacityMonitor(desk=desk, capacity=capacity, clock=clock))
            first, second = replicas

            async def both() -> int:
                reports = await asyncio.gather(first.check(), second.check(), first.check(), second.check())
                return sum(report.posted for report in reports)

            assert await both() == 1, "the 24 h notice: one post across both replicas"
            (notice,) = notices(world, KUMO)
            text = body(notice)
            assert "Reserved capacity ends in less than 24 hours" in text
            assert block.id in text
            assert "`kumo-labs/kumo-p5-dev` · compute-gpu: 4 nodes" in text
            assert "Checkpoint now" in text
            assert shown(block.end) in text
            assert [b for b in notice.blocks if b["type"] == "actions"], "an Acknowledge button"
            coordination = [m for m in world.slack.channel_messages(COORDINATION) if block.id in m.text]
            assert len(coordination) == 1
            assert not notices(world, HOSHI), "the training plan ends in 6 days: no notice yet"

            now[0] = block.end - timedelta(hours=5)
            assert await both() == 0, "still the 24 h window: told already"

            now[0] = block.end - timedelta(minutes=90)
            assert await both() == 1, "the 2 h notice: once"
            latest = notices(world, KUMO)
            assert len(latest) == 2 and "in less than 2 hours" in body(latest[-1])

            now[0] = block.end + timedelta(minutes=1)
            reports = await asyncio.gather(first.check(), second.check())
            assert sum(r.posted for r in reports) == 0
            assert sum(r.closed for r in reports) == 2, "both notices closed once the block has ended"
            ended = notices(world, KUMO)
            assert len(ended) == 2 and all("Reserved capacity ended" in m.text for m in ended)
            # What happened, in the past tense: not "Takes away" once it took them (issue 21).
            assert all("*Took away*\n4 nodes" in body(m) and "Takes away" not in body(m) for m in ended)
            async with services.db.session() as session:
                rows = [r for r in await crud.open_episodes(session, org_id="kumo-labs") if r.kind == "capacity"]
            assert rows == []
        finally:
            await other_db.dispose()


async def test_a_training_plan_notice_names_the_hyperpod_group_it_takes_nodes_from(
    sandbox: Sandbox, seeded_aws: SeededAws
) -> None:
    plan = seeded(seeded_aws, "training_plan")
    services = sandbox.pitcrew.services
    at = plan.end - timedelta(hours=3)
    desk = AlertDesk(
        db=services.db, poster=services.poster, program=services.program, presenter=SlackAlerts(), clock=lambda: at
    )
    assert services.capacity is not None
    monitor = CapacityMonitor(desk=desk, capacity=services.capacity, clock=lambda: at)
    report = await monitor.check()
    assert report.posted == 1, "the plan's 24 h notice (the block has ended by then: none for it)"
    (notice,) = notices(sandbox, HOSHI)
    text = body(notice)
    assert "SageMaker training plan `hoshi-vision-p5-plan`" in text
    assert "`hoshi-vision/hoshi-p5-vlm` · worker-group-1: 15 nodes" in text
    assert "15 nodes" in notice.text and "Checkpoint now" in notice.text  # the text fallback says it too
    buttons = [e["action_id"] for b in notice.blocks if b["type"] == "actions" for e in b["elements"]]
    assert buttons == ["alert_ack"], "acknowledged only: nothing to replace, reboot or silence"
    hoshi = sandbox.program.org("hoshi-vision")
    assert hoshi is not None
    operator = next(user for user, role in hoshi.members.items() if role == "operator")
    clicked = await sandbox.slack.click(user_id=operator, message=notice, action_id="alert_ack")
    assert clicked.status_code == 200
    await sandbox.slack.wait_for(lambda m: m.thread_ts == notice.ts and "acknowledged" in m.text, timeout=15)
    edited = await sandbox.slack.wait_for(
        lambda m: m.ts == notice.ts and f"acknowledged by <@{operator}>" in body(m), timeout=15
    )
    assert "alert_ack" not in str(edited.blocks)


async def test_plans_say_where_the_nodes_would_come_from(sandbox: Sandbox, seeded_aws: SeededAws) -> None:
    """Growing kumo-p5-dev's queue: its Capacity Block holds the queue, has no node to spare and ends tomorrow,
    inside the 7-day horizon. A HyperPod launch for kumo-labs, which has no training plan: On-Demand."""
    block = seeded(seeded_aws, "capacity_block")
    before = seeded_aws.state()
    scale = body(await ask(sandbox, user=ALICE, channel=KUMO, text="scale kumo-p5-dev compute-gpu 6 --dry-run"))
    assert f"2 x p5.48xlarge: 0 from EC2 Capacity Block for ML `{block.id}`" in scale
    assert "Only 0 available there: 2 would be On-Demand or wait" in scale
    assert "before the 7-day horizon" in scale and shown(block.end) in scale
    role = "arn:aws:iam::111111111111:role/SageMakerHyperPodExecutionRole"
    text = (
        f"launch hyperpod-p5 kumo-new --dry-run --count 2 --param execution_role_arn={role} "
        "--param lifecycle_s3_uri=s3://sagemaker-kumo-labs-lifecycle/base-config/"
    )
    launch = body(await ask(sandbox, user=ALICE, channel=KUMO, text=text))
    assert "2 x p5.48xlarge: On-Demand capacity, no reservation of this type" in launch
    assert seeded_aws.state() == before


async def test_a_parallelcluster_compute_resource_targeting_a_reservation_is_read_from_its_configuration(
    sandbox: Sandbox, seeded_aws: SeededAws
) -> None:
    """The ParallelCluster API (the sandbox's emulator) serves kumo-p5-dev's configuration with a
    CapacityReservationTarget naming an On-Demand Capacity Reservation: its nodes are that reservation's, and
    the Capacity Block of the same type and zone is no longer matched to them."""
    account, region = "111111111111", "us-east-1"
    backend = ec2_backends[account][region]
    saved = copy.deepcopy(backend.__dict__.get("_pitcrew_capacity_reservations"))
    try:
        odcr = add_capacity_reservation(
            account, region, instance_type="p5.48xlarge", count=8, available=4, availability_zone=f"{region}a",
            start=None, end=None, capacity_block=False,
        )  # fmt: skip
        org = sandbox.program.org("kumo-labs")
        assert org is not None
        pcluster = sandbox.pitcrew.services.fleet.backends(org)[1]
        # Blocking HTTP to the emulator, which this test's event loop serves: from a worker thread.
        text = await asyncio.to_thread(pcluster.configuration, "kumo-p5-dev")  # type: ignore[attr-defined]
        config = yaml.safe_load(text)
        for queue in config["Scheduling"]["SlurmQueues"]:
            for resource in queue["ComputeResources"]:
                resource["CapacityReservationTarget"] = {"CapacityReservationId": odcr}
        sandbox.pcluster_api.store_config(account, region, "kumo-p5-dev", yaml.safe_dump(config))
        assert sandbox.pitcrew.services.capacity is not None
        sandbox.pitcrew.services.capacity.forget("kumo-labs")
        text = body(await ask(sandbox, user=ALICE, channel=KUMO, text="capacity"))
        listed = text.split(f"*{odcr}*", 1)[1]
        assert "EC2 On-Demand Capacity Reservation" in listed.splitlines()[0]
        assert "8 x p5.48xlarge, 4 available" in listed and "no end date" in listed
        assert "Used by: `kumo-labs/kumo-p5-dev` compute-gpu: 4 nodes" in listed
        block = seeded(seeded_aws, "capacity_block")
        assert "Used by: no cluster of the org is seen using it" in text.split(f"*{block.id}*", 1)[1]
    finally:
        if saved is None:
            backend.__dict__.pop("_pitcrew_capacity_reservations", None)
        else:
            backend.__dict__["_pitcrew_capacity_reservations"] = saved


async def test_an_org_is_read_once_per_cache_period(sandbox: Sandbox, seeded_aws: SeededAws) -> None:
    backend = ec2_backends[CACHE_ACCOUNT][CACHE_REGION]
    saved = copy.deepcopy(backend.__dict__.get("_pitcrew_capacity_reservations"))
    now = [0.0]
    services = sandbox.pitcrew.services
    service = CapacityService(
        program=services.program, accounts=seeded_aws.accounts, fleet=services.fleet, clock=lambda: now[0]
    )
    try:
        first = await service.reservations("kumo-labs")
        add_capacity_reservation(
            CACHE_ACCOUNT, CACHE_REGION, instance_type="p5.48xlarge", count=2, availability_zone=f"{CACHE_REGION}b",
            start=None, end=datetime.now(UTC) + timedelta(days=3),
        )  # fmt: skip
        now[0] = CACHE_SECONDS - 1
        assert await service.reservations("kumo-labs") == first, "within the cache period: not read again"
        now[0] = CACHE_SECONDS + 1
        assert len(await service.reservations("kumo-labs")) == len(first) + 1
        service.forget()
        assert len(await service.reservations("kumo-labs")) == len(first) + 1
    finally:
        if saved is None:
            backend.__dict__.pop("_pitcrew_capacity_reservations", None)
        else:
            backend.__dict__["_pitcrew_capacity_reservations"] = saved


async def test_an_org_aws_cannot_answer_for_is_said_and_the_others_listed(
    sandbox: Sandbox, seeded_aws: SeededAws
) -> None:
    services = sandbox.pitcrew.services
    broken = services.program.with_aws(
        lambda org: (
            {"role_arn": "arn:aws:iam::999999999999:role/Nope", "region": "xx-nowhere-1"}
            if org.id == "sakura-ai"
            else {}
        )
    )
    service = CapacityService(program=broken, accounts=seeded_aws.accounts, fleet=services.fleet, timeout=20)
    results = {r.org_id: r for r in await service.many(["kumo-labs", "sakura-ai"])}
    assert results["kumo-labs"].error is None and results["kumo-labs"].reservations
    assert results["sakura-ai"].error and results["sakura-ai"].reservations == ()


async def test_a_reservation_extended_after_its_notice_is_told_again_for_its_new_end(
    sandbox: Sandbox, seeded_aws: SeededAws
) -> None:
    block = seeded(seeded_aws, "capacity_block")
    services = sandbox.pitcrew.services
    assert services.capacity is not None
    now = [block.end - timedelta(hours=20)]
    desk = AlertDesk(
        db=services.db, poster=services.poster, program=services.program, presenter=SlackAlerts(), clock=lambda: now[0]
    )
    monitor = CapacityMonitor(desk=desk, capacity=services.capacity, clock=lambda: now[0])
    held = ec2_backends[block.account_id][block.region].__dict__["_pitcrew_capacity_reservations"][block.id]
    try:
        assert (await monitor.check()).posted == 1
        held["EndDate"] = block.end + timedelta(days=3)  # extended (a Capacity Block extension)
        services.capacity.forget()
        report = await monitor.check()
        assert (report.posted, report.closed) == (0, 1), "the old end's notice closed; the new end is days away"
        (old,) = notices(sandbox, KUMO)
        assert f"Reserved capacity no longer ends {shown(block.end)}" in old.text
        now[0] = block.end + timedelta(days=3) - timedelta(hours=1)
        services.capacity.forget()
        assert (await monitor.check()).posted == 1
        latest = notices(sandbox, KUMO)[-1]
        assert "in less than 2 hours" in latest.text and shown(block.end + timedelta(days=3)) in body(latest)
    finally:
        held["EndDate"] = block.end
        services.capacity.forget()
