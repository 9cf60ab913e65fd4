"""`pitcrew demo`: the whole of Pitcrew on one machine, with no AWS or Slack account."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import webbrowser

from bot.config import MonitorConfig, ProgramConfig, load_program
from bot.sandbox.moto_support import set_hyperpod_progress, start_moto_server
from bot.sandbox.seed import seed_program
from bot.sandbox.world import EXAMPLE_PROGRAM, Sandbox, aws_environment, run_sandbox
from bot.slack import blocks

log = logging.getLogger("pitcrew.demo")
SWEEP_SECONDS = 15


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
        f"• as *{sandbox.slack.users[operator]}* in #{first.id}: `/cluster templates`, then "
        f"`/cluster launch hyperpod-p5 {first.id.split('-')[0]}-new --count 2 "
        f"--param execution_role_arn=arn:aws:iam::{first.aws.account_id}:role/SageMakerHyperPodExecutionRole "
        f"--param lifecycle_s3_uri=s3://sagemaker-{first.id}-lifecycle/base-config/` and press Confirm",
        f"• as *{sandbox.slack.users[operator]}* in #{first.id}: `/cluster scale kumo-p5-train worker-group-1 34`, "
        "`/cluster replace kumo-p5-train NODE` (a node id from `/cluster nodes`), `/cluster delete kumo-p5-dev`",
        "• *Fail a node* (left, under Sandbox): the node monitor posts an alert in the org's channel and a line "
        f"here within {SWEEP_SECONDS} s; press Acknowledge, Replace node or Silence on it",
        "• as *guest (no org)*: any command, to see a refusal",
        "• `/cluster help` shows what the chosen user may run.",
    ]
    return blocks.Reply(
        text=f"Pitcrew sandbox: {program.name}",
        blocks=[blocks.header("Welcome to the Pitcrew sandbox"), *blocks.sections(lines)],
    )


def _quick_sweeps(program: ProgramConfig) -> ProgramConfig:
    """Sweep every 15 s in the sandbox, so a failed node is alerted while the newcomer watches."""
    return program.model_copy(update={"monitor": MonitorConfig(node_sweep_seconds=SWEEP_SECONDS)})


async def _serve(host: str, port: int, open_browser: bool) -> None:
    async with run_sandbox(host=host, port=port, monitor=True, program_transform=_quick_sweeps) as sandbox:
        await sandbox.pitcrew.ready.wait()
        await sandbox.pitcrew.services.poster.post(channel=sandbox.program.coordination_channel, reply=welcome(sandbox))
        print(f"\n  Pitcrew sandbox: open {sandbox.world_url}  (the bot listens on {sandbox.bot_url})")  # noqa: T201
        print("  Ctrl-C stops it.\n")  # noqa: T201
        if open_browser:
            webbrowser.open(sandbox.world_url)
        await asyncio.Event().wait()  # until interrupted


def run_demo(*, host: str = "127.0.0.1", port: int = 3000, open_browser: bool = False) -> None:
    started = time.perf_counter()
    server, endpoint = start_moto_server()
    try:
        with aws_environment(endpoint):
            report = seed_program(load_program(EXAMPLE_PROGRAM), endpoint_url=endpoint)
            # Seeded clusters start InService; what is launched from now on takes a little while, as on AWS
            # (minutes there, seconds here), so the progress message has something to show.
            set_hyperpod_progress(3.0, create_seconds=8.0)
            log.info(
                "embedded AWS at %s ready in %.1f s\n%s", endpoint, time.perf_counter() - started, report.summary()
            )
            with contextlib.suppress(KeyboardInterrupt):
                asyncio.run(_serve(host, port, open_browser))
    finally:
        server.stop()
