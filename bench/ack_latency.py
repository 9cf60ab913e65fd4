"""Benchmark (not a test): how fast `pitcrew serve` acks `/cluster list all`, next to a bare Bolt app.

Processes, as in production: the sandbox's AWS (moto, seeded with the 12-org example program, plus the
ParallelCluster API emulator) in one process; `pitcrew serve` in another; the peer, a Bolt app on the
same server stack that only acks (bench/bare_bolt.py), in a third. This process plays Slack: a local
Slack workspace sends signed slash commands and receives the replies on its response URLs.

For each concurrency level, N signed commands go to each app, interleaved in rounds so that machine
noise hits both alike. Printed: p50/p99 ack latency for both, their ratio, and, at concurrency 1, the
p50/p99 time until Pitcrew's reply reaches the local Slack.

    .venv/bin/python bench/ack_latency.py [--n 500] [--levels 1,5,20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.config import load_program  # noqa: E402
from bot.sandbox.asgi_server import serve_asgi  # noqa: E402
from bot.sandbox.slack_workspace import LocalSlack  # noqa: E402
from bot.sandbox.world import BOT_TOKEN, SANDBOX_AWS_ENV, SIGNING_SECRET, workspace_people  # noqa: E402

ADMIN, CHANNEL = "U0ADMIN01", "C0PROGRAM"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


async def wait_healthy(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient() as client:
        while time.monotonic() < deadline:
            try:
                if (await client.get(url)).status_code < 500:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.2)
    raise TimeoutError(f"{url} did not come up")


def start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(args, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, cwd=ROOT)


async def run_level(send: Callable[[], Awaitable[float]], n: int, concurrency: int) -> list[float]:
    limit = asyncio.Semaphore(concurrency)
    latencies: list[float] = []

    async def one() -> None:
        async with limit:
            latencies.append(await send())

    await asyncio.gather(*(one() for _ in range(n)))
    return latencies


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=500, help="commands per app per concurrency level")
    parser.add_argument("--levels", default="1,5,20")
    parser.add_argument("--replies", type=int, default=50, help="commands timed until their reply, at concurrency 1")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--cache-seconds", type=float, help="PITCREW_CACHE_SECONDS for the bot (default: its own)")
    args = parser.parse_args()
    levels = [int(level) for level in args.levels.split(",")]
    python = sys.executable

    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="pitcrew-bench-")))
        aws_port, bot_port, bare_port = free_port(), free_port(), free_port()
        program_file = work / "program.yml"
        env = {**os.environ, **SANDBOX_AWS_ENV}
        aws = start(
            [python, "bench/sandbox_aws.py", "--port", str(aws_port), "--program-out", str(program_file)],
            env,
            work / "aws.log",
        )
        stack.callback(aws.terminate)
        await wait_healthy(f"http://127.0.0.1:{aws_port}/ready", timeout=120)
        endpoint = (work / "aws.log").read_text().split("MOTO_ENDPOINT=")[1].split()[0]

        async with AsyncExitStack() as astack:
            users, channels = workspace_people(load_program(program_file))
            # One local Slack per app, so each app's replies and calls are counted apart.
            slacks = {}
            for target in ("pitcrew", "bare"):
                slack = LocalSlack(signing_secret=SIGNING_SECRET, bot_token=BOT_TOKEN, users=users, channels=channels)
                slack.base_url = await astack.enter_async_context(serve_asgi(slack.app))
                slacks[target] = slack
            bot_env = {
                **env,
                "AWS_ENDPOINT_URL": endpoint,
                "SLACK_API_URL": slacks["pitcrew"].api_url,
                "SLACK_SIGNING_SECRET": SIGNING_SECRET,
                "SLACK_BOT_TOKEN": BOT_TOKEN,
                "DATABASE_URL": f"sqlite+aiosqlite:///{work}/pitcrew.db",
                **({"PITCREW_CACHE_SECONDS": str(args.cache_seconds)} if args.cache_seconds is not None else {}),
                "PITCREW_CONFIG": str(program_file),
            }
            bot = start([python, "-m", "bot", "serve", "--port", str(bot_port)], bot_env, work / "bot.log")
            stack.callback(bot.terminate)
            bare = start(
                [
                    python,
                    "bench/bare_bolt.py",
                    "--port",
                    str(bare_port),
                    "--signing-secret",
                    SIGNING_SECRET,
                    "--slack-api-url",
                    slacks["bare"].api_url,
                    "--token",
                    BOT_TOKEN,
                ],
                env,
                work / "bare.log",
            )
            stack.callback(bare.terminate)
            await wait_healthy(f"http://127.0.0.1:{bot_port}/healthz")
            await wait_healthy(f"http://127.0.0.1:{bare_port}/healthz")
            slacks["pitcrew"].events_url = f"http://127.0.0.1:{bot_port}/slack/events"
            slacks["bare"].events_url = f"http://127.0.0.1:{bare_port}/slack/events"

            async def send(target: str) -> float:
                started = time.perf_counter()
                response = await slacks[target].send_command(
                    user_id=ADMIN, channel_id=CHANNEL, command="/cluster", text="list all"
                )
                elapsed = time.perf_counter() - started
                if response.status_code != 200:
                    raise RuntimeError(f"{target} answered {response.status_code}")
                return elapsed

            # Rounds of 50 alternate between the apps, so machine noise hits both alike.
            for target in ("bare", "pitcrew"):  # warm-up: imports, auth.test, first AWS sessions
                await run_level(lambda t=target: send(t), 10, 1)
            await _drain(slacks["pitcrew"])

            figures: dict[str, dict[str, float]] = {}
            for level in levels:
                acks: dict[str, list[float]] = {"bare": [], "pitcrew": []}
                done = 0
                while done < args.n:
                    chunk = min(50, args.n - done)
                    for target in ("bare", "pitcrew"):
                        acks[target] += await run_level(lambda t=target: send(t), chunk, level)
                    done += chunk
                await _drain(slacks["pitcrew"])
                row = {}
                for target, values in acks.items():
                    row[f"{target}_p50_ms"] = statistics.median(values) * 1000
                    row[f"{target}_p99_ms"] = percentile(values, 99) * 1000
                row["ratio_p50"] = row["pitcrew_p50_ms"] / row["bare_p50_ms"]
                row["ratio_p99"] = row["pitcrew_p99_ms"] / row["bare_p99_ms"]
                figures[f"c{level}"] = row
                print(
                    f"concurrency {level:>2}: ack p50 pitcrew {row['pitcrew_p50_ms']:7.1f} ms vs bare "
                    f"{row['bare_p50_ms']:7.1f} ms (x{row['ratio_p50']:.2f}); p99 {row['pitcrew_p99_ms']:7.1f} "
                    f"vs {row['bare_p99_ms']:7.1f} ms (x{row['ratio_p99']:.2f})",
                    flush=True,
                )

            reply_times = []
            slack = slacks["pitcrew"]
            for _ in range(args.replies):
                before = len(slack.messages)
                started = time.perf_counter()
                await slack.send_command(user_id=ADMIN, channel_id=CHANNEL, command="/cluster", text="list all")
                await slack.wait_for(
                    lambda m, b=before: m.via == "response_url" and slack.messages.index(m) >= b, timeout=30
                )
                reply_times.append(time.perf_counter() - started)
            figures["reply"] = {
                "p50_ms": statistics.median(reply_times) * 1000,
                "p99_ms": percentile(reply_times, 99) * 1000,
            }
            print(
                f"/cluster list all, time until the reply reaches the local Slack (concurrency 1, "
                f"{args.replies} runs): p50 {figures['reply']['p50_ms']:.0f} ms, "
                f"p99 {figures['reply']['p99_ms']:.0f} ms"
            )
            figures["cache_seconds"] = args.cache_seconds  # type: ignore[assignment]
            figures["machine"] = {
                "cpus": os.cpu_count() or 0,
                "python": platform.python_version(),
                "platform": platform.platform(),
            }  # type: ignore[dict-item]
            if args.json:
                args.json.write_text(json.dumps(figures, indent=2))


async def _drain(slack: LocalSlack, settle: float = 0.5) -> None:
    """Wait until replies stop arriving, so one level's tail does not load the next."""
    while True:
        count = len(slack.messages)
        await asyncio.sleep(settle)
        if len(slack.messages) == count:
            return


if __name__ == "__main__":
    asyncio.run(main())
