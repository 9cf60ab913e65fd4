"""Benchmark (not a test): how fast `pitcrew serve` acks `/cluster list all`, next to a bare Bolt app.

Processes, as in production: the sandbox's AWS (moto, seeded with the 12-org example program, plus the
ParallelCluster API emulator); `pitcrew serve`; the peer, a Bolt app on the same server stack that only
acks (bench/bare_bolt.py); and one local Slack workspace per app (bench/slack_process.py) that hands out
slash-command forms with live response URLs and takes the replies. This process only signs, sends and
times, so its measurements do not queue behind reply handling.

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
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.config import load_program  # noqa: E402
from sandbox.asgi_server import serve_asgi  # noqa: E402
from sandbox.slack import LocalSlack, signed_headers  # noqa: E402
from sandbox.world import BOT_TOKEN, SANDBOX_AWS_ENV, SIGNING_SECRET, workspace_people  # noqa: E402

ADMIN, CHANNEL = "U0ADMIN01", "C0PROGRAM"


def side_by_side(acks: dict[str, list[float]], ours: str, peer: str) -> dict[str, float]:
    """p50/p99 (ms) of each kind of request and our ratio to the peer's."""
    row: dict[str, float] = {}
    for name, values in acks.items():
        row[f"{name}_p50_ms"] = statistics.median(values) * 1000
        row[f"{name}_p99_ms"] = percentile(values, 99) * 1000
    row["ratio_p50"] = row[f"{ours}_p50_ms"] / row[f"{peer}_p50_ms"]
    row["ratio_p99"] = row[f"{ours}_p99_ms"] / row[f"{peer}_p99_ms"]
    return row


def machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count() or 0, "python": platform.python_version(), "platform": platform.platform()}


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


class App:
    """One app under test, with the local Slack process that takes its replies."""

    def __init__(self, name: str, events_url: str, slack_url: str, http: httpx.AsyncClient) -> None:
        self.name, self.events_url, self.slack_url, self._http = name, events_url, slack_url, http
        self._forms: list[dict[str, str]] = []

    async def prepare(self, count: int) -> None:
        """Forms with live response URLs, fetched before timing starts."""
        answer = await self._http.post(
            f"{self.slack_url}/console/command-forms",
            json={"user_id": ADMIN, "channel_id": CHANNEL, "command": "/cluster", "text": "list all", "count": count},
        )
        self._forms = answer.json()["forms"]

    async def send(self) -> float:
        """Sign and send one command; the time until its ack (HTTP 200) comes back."""
        body = urlencode(self._forms.pop())
        headers = signed_headers(body, secret=SIGNING_SECRET, timestamp=int(time.time()))
        started = time.perf_counter()
        response = await self._http.post(self.events_url, content=body, headers=headers)
        elapsed = time.perf_counter() - started
        if response.status_code != 200:
            raise RuntimeError(f"{self.name} answered {response.status_code}")
        return elapsed


async def replies_settled(apps: list[App], http: httpx.AsyncClient, settle: float = 1.0) -> None:
    """Wait until the apps' replies stop arriving, so one level's tail does not load the next."""
    previous = None
    while True:
        counts = [(await http.get(f"{app.slack_url}/console/state", params={"user": ADMIN})).text for app in apps]
        current = [len(text) for text in counts]
        if current == previous:
            return
        previous = current
        await asyncio.sleep(settle)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=500, help="commands per app per concurrency level")
    parser.add_argument("--levels", default="1,5,20")
    parser.add_argument("--replies", type=int, default=50, help="commands timed until their reply, at concurrency 1")
    parser.add_argument("--cache-seconds", type=float, help="PITCREW_CACHE_SECONDS for the bot (default: its own)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    levels = [int(level) for level in args.levels.split(",")]
    python = sys.executable

    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="pitcrew-bench-")))
        ports = {name: free_port() for name in ("aws", "bot", "bare", "slack-bot", "slack-bare")}
        program_file = work / "program.yml"
        env = {**os.environ, **SANDBOX_AWS_ENV}

        def spawn(name: str, argv: list[str], extra_env: dict[str, str] | None = None) -> None:
            process = start([python, *argv], {**env, **(extra_env or {})}, work / f"{name}.log")
            stack.callback(process.terminate)

        spawn("aws", ["bench/sandbox_aws.py", "--port", str(ports["aws"]), "--program-out", str(program_file)])
        await wait_healthy(f"http://127.0.0.1:{ports['aws']}/ready", timeout=120)
        endpoint = (work / "aws.log").read_text().split("MOTO_ENDPOINT=")[1].split()[0]
        slack_urls = {app: f"http://127.0.0.1:{ports['slack-' + app]}" for app in ("bot", "bare")}
        for app, url in slack_urls.items():
            spawn(
                f"slack-{app}",
                ["bench/slack_process.py", "--port", url.rsplit(":", 1)[1], "--program", str(program_file)],
            )
            await wait_healthy(f"{url}/console/state")
        cache = {} if args.cache_seconds is None else {"PITCREW_CACHE_SECONDS": str(args.cache_seconds)}
        spawn(
            "bot",
            ["-m", "bot", "serve", "--port", str(ports["bot"])],
            {
                "AWS_ENDPOINT_URL": endpoint,
                "SLACK_API_URL": f"{slack_urls['bot']}/api/",
                "SLACK_SIGNING_SECRET": SIGNING_SECRET,
                "SLACK_BOT_TOKEN": BOT_TOKEN,
                "DATABASE_URL": f"sqlite+aiosqlite:///{work}/pitcrew.db",
                "PITCREW_CONFIG": str(program_file),
                **cache,
            },
        )
        spawn(
            "bare",
            [
                "bench/bare_bolt.py",
                "--port",
                str(ports["bare"]),
                "--signing-secret",
                SIGNING_SECRET,
                "--slack-api-url",
                f"{slack_urls['bare']}/api/",
                "--token",
                BOT_TOKEN,
            ],
        )
        await wait_healthy(f"http://127.0.0.1:{ports['bot']}/healthz")
        await wait_healthy(f"http://127.0.0.1:{ports['bare']}/healthz")

        limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)
        async with httpx.AsyncClient(timeout=30, limits=limits) as http:
            apps = {
                "bare": App("bare", f"http://127.0.0.1:{ports['bare']}/slack/events", slack_urls["bare"], http),
                "pitcrew": App("pitcrew", f"http://127.0.0.1:{ports['bot']}/slack/events", slack_urls["bot"], http),
            }
            for app in apps.values():  # warm-up: imports, auth.test, first AWS sessions
                await app.prepare(10)
                await run_level(app.send, 10, 1)
            await replies_settled(list(apps.values()), http)

            figures: dict[str, Any] = {"n": args.n, "cache_seconds": args.cache_seconds}
            for level in levels:
                acks: dict[str, list[float]] = {"bare": [], "pitcrew": []}
                done = 0
                while done < args.n:  # rounds of 50 alternate between the apps: noise hits both alike
                    chunk = min(50, args.n - done)
                    for name, app in apps.items():
                        await app.prepare(chunk)
                        acks[name] += await run_level(app.send, chunk, level)
                    done += chunk
                await replies_settled(list(apps.values()), http)
                row = side_by_side(acks, "pitcrew", "bare")
                figures[f"c{level}"] = row
                print(
                    f"concurrency {level:>2}: ack p50 pitcrew {row['pitcrew_p50_ms']:7.1f} ms vs bare "
                    f"{row['bare_p50_ms']:7.1f} ms (x{row['ratio_p50']:.2f}); p99 {row['pitcrew_p99_ms']:7.1f} "
                    f"vs {row['bare_p99_ms']:7.1f} ms (x{row['ratio_p99']:.2f})",
                    flush=True,
                )

            # Time to the reply: a local Slack in this process takes the replies (response URLs are per
            # command), at concurrency 1, so its own work cannot queue behind other commands.
            users, channels = workspace_people(load_program(program_file))
            slack = LocalSlack(signing_secret=SIGNING_SECRET, bot_token=BOT_TOKEN, users=users, channels=channels)
            async with serve_asgi(slack.app) as slack.base_url:
                slack.events_url = apps["pitcrew"].events_url
                reply_times = []
                for _ in range(args.replies):
                    before = len(slack.messages)
                    started = time.perf_counter()
                    await slack.send_command(user_id=ADMIN, channel_id=CHANNEL, command="/cluster", text="list all")
                    await slack.wait_for(lambda m: m.via == "response_url", since=before, timeout=30)
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
            figures["machine"] = machine()
            if args.json:
                args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
