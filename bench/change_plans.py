"""Benchmark (not a test): how long a person waits for the plan of a cluster change, next to a read.

Each change command first reads the cluster (and, on ParallelCluster, fetches its configuration and
sends a dry-run PUT) before it can show its plan. This measures that wait from the signed slash command
to the reply in the local Slack, with the sandbox's AWS (moto seeded with the example program, and the
ParallelCluster API emulator), next to the peer in the same run: `/cluster status` of the same cluster,
the cheapest reply that also reads it from AWS. The cluster cache is off (PITCREW_CACHE_SECONDS=0), so
every command asks AWS, as the first command after 10 quiet seconds does. Commands are interleaved in
rounds so machine noise hits all kinds alike. Printed: p50/p90 per kind and each p50 as a ratio of the
read's. Then the time from Confirm to the first progress edit for a HyperPod scale (AWS asked, message
posted).

Everything runs in this process (moto, emulator, bot, Slack), as in `make run`: the figures are what a
sandbox user sees, and the ratios are what carries over to a real deployment.

    .venv/bin/python bench/change_plans.py [--rounds 30]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.config import load_program
from sandbox.moto_support import start_moto_server
from sandbox.seed import seed_program
from sandbox.slack import Message
from sandbox.world import EXAMPLE_PROGRAM, Sandbox, aws_environment, run_sandbox

ALICE, KUMO = "U0ALICE01", "C0KUMOLAB"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


async def timed_reply(world: Sandbox, text: str) -> tuple[float, Message]:
    before = len(world.slack.messages)
    started = time.perf_counter()
    await world.slack.send_command(user_id=ALICE, channel_id=KUMO, command="/cluster", text=text)

    def is_reply(message: Message) -> bool:
        return message.user == world.slack.bot_user_id

    reply = await world.slack.wait_for(is_reply, since=before, timeout=30)
    return (time.perf_counter() - started) * 1000, reply


async def measure(rounds: int) -> None:
    overrides = {"pitcrew_cache_seconds": 0.0}
    async with run_sandbox(settings_overrides=overrides) as world:
        await world.pitcrew.ready.wait()
        await world.pitcrew.services.drain()
        _, nodes = await timed_reply(world, "nodes kumo-p5-train")
        node = next(word.strip("`") for word in str(nodes.blocks).split() if word.strip("`").startswith("i-"))
        kinds: dict[str, str] = {
            "read: status (HyperPod)": "status kumo-p5-train",
            "plan: scale (HyperPod)": "scale kumo-p5-train worker-group-1 33 --dry-run",
            "plan: replace (HyperPod)": f"replace kumo-p5-train {node} --dry-run",
            "read: status (ParallelCluster)": "status kumo-p5-dev",
            "plan: scale (ParallelCluster, dry-run PUT)": "scale kumo-p5-dev compute-gpu 6 --dry-run",
        }
        for text in kinds.values():  # warm up: sessions, clients, code paths
            await timed_reply(world, text)
        times: dict[str, list[float]] = {kind: [] for kind in kinds}
        for _ in range(rounds):
            for kind, text in kinds.items():
                elapsed, reply = await timed_reply(world, text)
                assert "Dry run" in str(reply.blocks) or kind.startswith("read"), reply.text
                times[kind].append(elapsed)

        def row(kind: str, peer: str) -> str:
            p50 = statistics.median(times[kind])
            ratio = p50 / statistics.median(times[peer])
            return f"{kind:<45} p50 {p50:7.1f} ms   p90 {percentile(times[kind], 90):7.1f} ms   x{ratio:4.2f} of read"

        print(f"\n{rounds} rounds, cache off; peer = /cluster status of the same cluster")
        for kind in kinds:
            peer = "read: status (ParallelCluster)" if "ParallelCluster" in kind else "read: status (HyperPod)"
            print(row(kind, peer))
        await confirm_to_progress(world, rounds=min(rounds, 10))


def scaling(*, done: bool = False) -> Callable[[Message], bool]:
    def matches(m: Message) -> bool:
        return m.kind == "message" and m.text.startswith("Scaling") and (not done or "Done:" in m.text)

    return matches


async def confirm_to_progress(world: Sandbox, *, rounds: int) -> None:
    """Confirm of a HyperPod scale up to the progress message in the channel (AWS asked, message posted)."""
    delays: list[float] = []
    for run in range(rounds):
        count = 33 if run % 2 == 0 else 32  # up and down again: the org's quota (40 p5) leaves room for 4 more
        _, planned = await timed_reply(world, f"scale kumo-p5-train worker-group-1 {count}")
        assert "Confirm scale" in str(planned.blocks), planned.text
        before = len(world.slack.messages)
        started = time.perf_counter()
        await world.slack.click(user_id=ALICE, message=planned, action_id="operation_confirm")
        await world.slack.wait_for(scaling(), since=before, timeout=30)
        delays.append((time.perf_counter() - started) * 1000)
        await world.slack.wait_for(scaling(done=True), since=before, timeout=60)
    print(
        f"confirm -> progress message (HyperPod scale, {rounds} runs): p50 {statistics.median(delays):.1f} ms, "
        f"max {max(delays):.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    print(f"{platform.node()} · {platform.machine()} · {os.cpu_count()} cpus · Python {platform.python_version()}")
    from sandbox.moto_support import set_hyperpod_progress

    server, endpoint = start_moto_server()
    try:
        with aws_environment(endpoint):
            seed_program(load_program(EXAMPLE_PROGRAM), endpoint_url=endpoint)
            set_hyperpod_progress(0.5)
            asyncio.run(measure(args.rounds))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
