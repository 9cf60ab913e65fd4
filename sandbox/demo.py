"""`pitcrew demo`: the whole of Pitcrew on one machine, with no AWS or Slack account."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
import webbrowser

from bot.config import (
    ApprovalsConfig,
    MonitorConfig,
    OrgConfig,
    ProgramConfig,
    StallConfig,
    load_program,
    normalize_instance_type,
)
from bot.slack import blocks
from sandbox.culprits import SandboxNodeMetrics
from sandbox.history import seed_sandbox_history
from sandbox.moto_support import set_hyperpod_progress, start_moto_server
from sandbox.seed import plan_program, seed_program
from sandbox.training import TrainingSimulator, sandbox_jobs
from sandbox.world import EXAMPLE_PROGRAM, Sandbox, aws_environment, run_sandbox

log = logging.getLogger("pitcrew.demo")
SWEEP_SECONDS = 15
THROUGHPUT_CHECK_SECONDS = 10
IDLE_ORG, IDLE_CLUSTER = "kumo-labs", "kumo-p5-dev"  # its jobs report, and its dev cluster runs none
IDLE_AFTER_HOURS = 0.05  # 3 minutes of no job before the idle notice (2 h outside the sandbox)
# The example file's (commented-out) approvals: block, on in the demo: any delete, a launch over $5,000 a day,
# one admin other than the requester, within an hour.
DEMO_APPROVALS = ApprovalsConfig(delete=True, launch_over_usd_per_day=5000, approvers="admins", count=1, ttl_minutes=60)
ESCALATE_AFTER_MINUTES = 4  # an unacknowledged alert is escalated after 4 minutes (30 outside the sandbox)


def _launch_line(sandbox: Sandbox, count: int = 16) -> str:
    """The one-line launch to try: in the first org with room for `count` P5 nodes (its launch defaults give
    the rest), by one of its operators."""
    program = sandbox.program
    held: dict[str, int] = {}
    for planned in plan_program(program):
        if normalize_instance_type(planned.instance_type) == "p5.48xlarge":
            held[planned.org_id] = held.get(planned.org_id, 0) + planned.count

    def room(org: OrgConfig) -> bool:
        allowed = org.quota_for("p5.48xlarge")
        return bool(org.launch) and (allowed is None or allowed - held.get(org.id, 0) >= count)

    org = next((org for org in program.orgs if room(org)), program.orgs[0])
    operator = next((user for user, role in org.members.items() if role == "operator"), program.admins[0])
    return (
        f"• as *{sandbox.slack.users[operator]}* in #{org.id}: `/cluster templates`, then "
        f"`/cluster launch hyperpod-p5 {org.id.split('-')[0]}-p5 --count {count}` (the org's launch defaults in "
        "the program file give the rest) and press Confirm; `/cluster launch` alone opens the launch form"
    )


def welcome(sandbox: Sandbox) -> blocks.Reply:
    program = sandbox.program
    admin = program.admins[0]
    first = program.orgs[0]
    operator = next(user for user, role in first.members.items() if role == "operator")
    lines = [
        f"*{program.name}* is running in the sandbox: {len(program.orgs)} orgs, each in its own (simulated) AWS "
        "account, with SageMaker HyperPod and AWS ParallelCluster clusters of P5 and Trn1 nodes.",
        "Pick a user at the top, a channel on the left, and type a command below. Try:",
        f"• as *{sandbox.slack.users[admin]}*: `/cluster list all`",
        f"• as *{sandbox.slack.users[operator]}* in #{first.id}: `/cluster list`, then `/cluster nodes NAME --failed`",
        _launch_line(sandbox),
        f"• as *{sandbox.slack.users[operator]}* in #{first.id}: `/cluster scale kumo-p5-train worker-group-1 34`, "
        "`/cluster replace kumo-p5-train NODE` (a node id from `/cluster nodes`), `/cluster delete kumo-p5-dev`",
        "• *Approvals*: a delete, or a launch over $5,000 a day (`/cluster launch hyperpod-p5 NAME --count 16`), "
        f"shows *Request approval*; press it, then approve as *{sandbox.slack.users[admin]}* (the requester cannot); "
        "Reject asks why. `/cluster approvals` lists what waits, and admins see it on their Home",
        *_external_lines(sandbox),
        "• *Fail a node* (left, under Sandbox): the node monitor posts an alert in the org's channel and a line "
        f"here within {SWEEP_SECONDS} s; press Acknowledge, Replace node or Silence on it",
        "• *Hang a job* / *Slow a job* (under Sandbox): a simulated training job stops or slows; within about "
        "a minute the throughput alert with its chart appears; *Recover jobs* closes it. "
        "`/cluster throughput kumo-p5-train` shows the rates and a chart",
        _culprit_line(sandbox),
        f"• *Deep health checks*: on the seeded failed node's alert in #{first.id}, press *Run deep health check*, "
        "then Confirm: the node goes `DeepHealthCheckInProgress` and fails it (XID 79), the alert says so and puts "
        "Replace node first; `/cluster check kumo-p5-train NODE [--stress] [--connectivity]` checks any node "
        "(a healthy one passes and is Running again)",
        "• *Provisioning failed*: `mori-finance/mori-p5-finetune` (continuous provisioning) could not add nodes for "
        "lack of capacity (InsufficientInstanceCapacity): its alert is in #mori-finance after the first sweep",
        f"• *Idle accelerators*: `{IDLE_ORG}/{IDLE_CLUSTER}` runs no job; {IDLE_AFTER_HOURS * 60:g} minutes after the "
        f"start its notice in #{IDLE_ORG} says what its P5 nodes cost a day (and here in one line), edited as the "
        "idle time grows",
        f"• *Escalation*: an alert nobody acknowledges within {ESCALATE_AFTER_MINUTES} minutes (the seeded failed "
        "nodes' alerts, for one) is posted again here, mentioning its org's operators, with a link to it; "
        "Acknowledge first and it never is",
        f"• as *{sandbox.slack.users[operator]}* in #{first.id}: `/track show`, `/track doc {first.id}` and "
        f"`/digest preview {first.id}`: three weeks of records, usage and failures are already stored",
        f"• as *{sandbox.slack.users[admin]}*: `/digest preview` (every org), then `/digest send` to post the last "
        "week's digest to the coordination and org channels",
        "• `/track` with no text opens the *Add a record* button (a note, milestone, incident or lesson)",
        "• as *guest (no org)*: any command, to see a refusal",
        "• `/cluster help` shows what the chosen user may run.",
    ]
    return blocks.Reply(
        text=f"Pitcrew sandbox: {program.name}",
        blocks=[blocks.header("Welcome to the Pitcrew sandbox"), *blocks.sections(lines)],
    )


def _external_lines(sandbox: Sandbox) -> list[str]:
    """What to try as an org engineer in their own workspace (Slack Connect), if the program has one."""
    slack = sandbox.slack
    for org in sandbox.program.orgs:
        external = [user for user, role in org.members.items() if role == "operator" and slack.is_external(user)]
        if external:
            name, team = slack.users[external[0]], slack.team_name(slack.team_of(external[0]))
            return [
                f"• as *{name}* in #{org.id} (in {team}, joined through Slack Connect): `/cluster` is not a command "
                "there, as in Slack; write `@Pitcrew cluster list`, `@Pitcrew cluster scale kumo-p5-train "
                "worker-group-1 34` and press Confirm in the thread, or open *Direct message with Pitcrew* and "
                "write `cluster status kumo-p5-train`"
            ]
    return []


def _culprit_line(sandbox: Sandbox) -> str:
    metrics = sandbox.controls.node_metrics
    if metrics is None or sandbox.prometheus_url is None:
        buttons = (
            "*Throttle a GPU* / *Degrade a node's EFA* / *Slow the data loader* / *Stick a NeuronCore* / "
            "*ECC errors on a Trainium device*"
        )
        return f"• {buttons} need the sandbox's Prometheus: {sandbox.controls.no_metrics}"
    clusters = ", ".join(f"`{c.org.id}/{c.name}`" for c in metrics.clusters)
    return (
        "• *Throttle a GPU*, *Degrade a node's EFA*, *Slow the data loader*, *Stick a NeuronCore*, *ECC errors on "
        f"a Trainium device* (under Sandbox): a node of {clusters} limps (the last two on Trainium; or every node "
        "waits for data) and its job slows down; within a few minutes the "
        "throughput alert names the node and the cause, with Replace node on it (for the data loader, the cause "
        "alone); the button says when. "
        f"The node metrics are in a real Prometheus at {sandbox.prometheus_url}"
    )


def _quick_sandbox(program: ProgramConfig) -> ProgramConfig:
    """Sweep every 15 s, and call a training job stalled after one silent minute (slowed down after one slow
    minute), so what the newcomer breaks is alerted while they watch; the idle cluster told after 3 minutes
    and unacknowledged alerts escalated after 4."""

    def quick(org: OrgConfig) -> OrgConfig:
        update: dict[str, float] = {"escalate_after_minutes": ESCALATE_AFTER_MINUTES}
        if org.id == IDLE_ORG:
            update["idle_after_hours"] = IDLE_AFTER_HOURS
        return org.model_copy(update=update)

    return program.model_copy(
        update={
            # Two-person approval in the demo only: the example file's block is commented out, as the scenario
            # tests confirm launches and deletes with one click.
            "approvals": program.approvals or DEMO_APPROVALS,
            "monitor": MonitorConfig(node_sweep_seconds=SWEEP_SECONDS),
            "stall": StallConfig(stall_after_minutes=1, drop_ratio=0.6, sustain_minutes=1),
            "orgs": [quick(org) for org in program.orgs],
        }
    )


async def _serve(host: str, port: int, open_browser: bool) -> None:
    # SIGTERM (kill, a service manager, a container's stop) ends the sandbox as Ctrl-C does: by unwinding what
    # it started, so its Prometheus is stopped and its temporary folders removed. Its default action kills the
    # process at once, leaving them behind (Ctrl-C also reaches Prometheus itself, in the same process group).
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stopping.set)
    try:
        await _run(host, port, open_browser, stopping)
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


async def _run(host: str, port: int, open_browser: bool, stopping: asyncio.Event) -> None:
    quick = {"pitcrew_throughput_check_seconds": THROUGHPUT_CHECK_SECONDS}
    jobs = sandbox_jobs()
    # The jobs' nodes, read from the embedded AWS; the same job objects are slowed by the culprit buttons.
    node_metrics = SandboxNodeMetrics(program=load_program(EXAMPLE_PROGRAM), jobs=jobs)
    async with run_sandbox(
        host=host,
        port=port,
        monitor=True,
        program_transform=_quick_sandbox,
        settings_overrides=quick,
        node_metrics=node_metrics,
    ) as sandbox:
        await sandbox.pitcrew.ready.wait()
        try:  # three weeks of records, usage and episodes for /digest and /track to show
            services = sandbox.pitcrew.services
            log.info("%s", await seed_sandbox_history(services, now=services.clock()))
        except Exception:
            log.exception("could not seed the sandbox's history; /digest and /track start empty")
        simulator = TrainingSimulator(api_url=sandbox.bot_url, jobs=jobs, started=node_metrics.started)
        # Every org onboarded as a program would be (`/cluster doctor` shows them all OK): each has a token.
        await simulator.prepare(sandbox.pitcrew.services.db, onboarded=[org.id for org in sandbox.program.orgs])
        sandbox.controls.simulator = simulator
        stop = asyncio.Event()
        training = asyncio.get_running_loop().create_task(simulator.run(stop))
        await sandbox.pitcrew.services.poster.post(channel=sandbox.program.coordination_channel, reply=welcome(sandbox))
        print(f"\n  Pitcrew sandbox: open {sandbox.world_url}  (the bot listens on {sandbox.bot_url})")  # noqa: T201
        print("  Ctrl-C stops it.\n")  # noqa: T201
        if open_browser:
            webbrowser.open(sandbox.world_url)
        try:
            await stopping.wait()  # until SIGTERM, or interrupted (Ctrl-C cancels this task)
        finally:
            stop.set()
            await training


def run_demo(*, host: str = "127.0.0.1", port: int = 3000, open_browser: bool = False) -> None:
    started = time.perf_counter()
    # While AWS is seeded (before the event loop takes SIGTERM over in _serve): stop as Ctrl-C stops it.
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    server, endpoint = start_moto_server()
    try:
        with aws_environment(endpoint):
            report = seed_program(load_program(EXAMPLE_PROGRAM), endpoint_url=endpoint, provisioning_failure=True)
            # Seeded clusters start InService; what is launched from now on takes a little while, as on AWS
            # (minutes there, seconds here), so the progress message has something to show.
            set_hyperpod_progress(3.0, create_seconds=8.0)
            log.info(
                "embedded AWS at %s ready in %.1f s\n%s", endpoint, time.perf_counter() - started, report.summary()
            )
            with contextlib.suppress(KeyboardInterrupt):
                asyncio.run(_serve(host, port, open_browser))
    except KeyboardInterrupt:  # SIGTERM or Ctrl-C while seeding: the embedded AWS is stopped all the same
        pass
    finally:
        server.stop()
        signal.signal(signal.SIGTERM, previous)
