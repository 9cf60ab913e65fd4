"""Issue 21, "One held figure": what an org holds is one number in the launch plan's quota check, the Home,
`/track doc` and the digest, whatever its clusters are doing.

kumo-labs holds 32 HyperPod P5 nodes (kumo-p5-train) and 4 ParallelCluster ones (kumo-p5-dev, with its API);
its quota is 40. Stopping kumo-p5-dev's compute fleet gives its 4 nodes back, and scaling the stopped queue to 2
sets a count that comes back only when the fleet starts: the org holds 32, and every view says so."""

from __future__ import annotations

from datetime import timedelta

from bot.alerts.desk import AlertDesk
from bot.capacity.monitor import CapacityMonitor
from bot.digest.weeks import week_of
from bot.slack.alerts import SlackAlerts
from sandbox.world import Sandbox
from tests.conftest import SeededAws
from tests.scenarios import test_cluster_changes as changes
from tests.scenarios.conftest import ADMIN, COORDINATION, ask, body
from tests.scenarios.test_cluster_changes import ALICE, DEV, GPU_QUEUE, KUMO, confirm_and_wait
from tests.scenarios.test_digest import digest_command
from tests.scenarios.test_home import open_home, text_of
from tests.scenarios.test_launch_plans import HYPERPOD_PARAMS

# The change scenarios' fixtures (`world` with fast progress, and moto reseeded after): this test scales too.
globals().update(reseed=changes.reseed, world=changes.world)


async def test_a_stopped_fleet_scaled_to_2_is_held_the_same_in_the_plan_the_home_and_the_doc(world: Sandbox) -> None:
    refused = await ask(world, user=ALICE, channel=KUMO, text=f"scale {DEV} {GPU_QUEUE} 2")
    assert "Stop compute fleet" in str(refused.blocks)
    stopped = await confirm_and_wait(world, refused, f"Stopping the compute fleet of kumo-labs/{DEV}")
    assert "Done:" in stopped.text
    planned = await ask(world, user=ALICE, channel=KUMO, text=f"scale {DEV} {GPU_QUEUE} 2")
    done = await confirm_and_wait(world, planned, f"Scaling kumo-labs/{DEV}")
    assert "Done:" in done.text and "compute fleet is stopped" in done.text

    launch = await ask(
        world, user=ALICE, channel=KUMO, text=f"launch hyperpod-p5 kumo-new --dry-run --count 4 {HYPERPOD_PARAMS}"
    )
    assert "p5.48xlarge: held 32 + 4 → 36 of 40 allowed" in body(launch), body(launch)

    services = world.pitcrew.services
    await services.monitor.sweep()  # the usage ledger: what the Home, the doc and the digest read
    await services.drain()
    home = text_of(await open_home(world, ALICE))
    assert "p5.48xlarge 32/40" in home, home
    doc = body(await ask(world, user=ALICE, channel=KUMO, text="doc kumo-labs", command="/track"))
    assert "*p5.48xlarge*: 32 held now of 40 allowed" in doc, doc
    shown = body(await ask(world, user=ALICE, channel=KUMO, text="show", command="/track"))
    assert "*p5.48xlarge*: 32 held now of 40 allowed" in shown, shown
    usage = body(await ask(world, user=ADMIN, channel=COORDINATION, text="show all", command="/track"))
    assert "p5.48xlarge: 32/40 held now" in usage, usage
    listed = body(await ask(world, user=ALICE, channel=KUMO, text="list"))
    assert "held: 32 x p5.48xlarge, 1 x m5.12xlarge, 1 x m5.8xlarge" in listed, listed
    # The digest of the running week (what a `/digest send` at its end would post for the org) says so too.
    week = week_of(services.clock(), services.tz).label
    digest = body(await digest_command(world, f"preview kumo-labs --week {week}", user=ALICE, channel=KUMO))
    assert "*Nodes:* 34 (32 x p5.48xlarge, 1 x m5.12xlarge, 1 x m5.8xlarge)" in digest, digest


async def test_the_capacity_notice_follows_a_fleet_stop_that_gives_its_nodes_back(
    world: Sandbox, seeded_aws: SeededAws
) -> None:
    """Issue 21: the capacity notice still counted a stopped fleet's nodes as taken by the ending block."""
    block = next(r for r in seeded_aws.report.reserved if r.source == "capacity_block")
    at = block.end - timedelta(hours=23)
    services = world.pitcrew.services
    desk = AlertDesk(
        db=services.db, poster=services.poster, program=services.program, presenter=SlackAlerts(), clock=lambda: at
    )
    assert services.capacity is not None
    monitor = CapacityMonitor(desk=desk, capacity=services.capacity, clock=lambda: at)
    assert (await monitor.check()).posted == 1
    notice = await world.slack.wait_for(lambda m: block.id in m.text and m.channel == KUMO and m.thread_ts is None)
    assert "`kumo-labs/kumo-p5-dev` · compute-gpu: 4 nodes" in body(notice)

    refused = await ask(world, user=ALICE, channel=KUMO, text=f"scale {DEV} {GPU_QUEUE} 2")
    await confirm_and_wait(world, refused, f"Stopping the compute fleet of kumo-labs/{DEV}")
    services.capacity.forget("kumo-labs")  # read again now, not after the cache's minute
    report = await monitor.check()
    assert (report.posted, report.closed) == (0, 0), "the same notice, not another"
    edited = await world.slack.wait_for(lambda m: m.ts == notice.ts and "4 nodes" not in body(m))
    assert "no nodes of a known cluster" in body(edited) and "compute-gpu" not in body(edited)
