"""Benchmark (not a test): how fast `pitcrew serve` acks a command by @mention, next to the same command as a
slash command, in one run against one bot.

Processes as in bench/ack_latency.py: the sandbox's AWS (moto, seeded with the 12-org example program), one local
Slack workspace process taking the bot's Web API calls and replies, and `pitcrew serve`. This process only
builds, signs, sends and times. Slack needs every request answered within 3 s: a slash command is acked empty
before its answer is worked out, an Events API delivery (`app_mention`) as soon as Bolt has it, and Pitcrew's
mention adapter then claims the event id in the database before answering (one answer per event, across
replicas): that claim is after the ack, so it must not show here.

For each concurrency level, N commands of each kind go to the bot in alternating rounds of 50, so machine noise
hits both alike. Printed: ack p50/p99 for each kind and their ratio.

    .venv/bin/python bench/mention_ack.py [--n 300] [--levels 1,5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from ack_latency import free_port, machine, run_level, side_by_side, start, wait_healthy  # noqa: E402

from sandbox.slack import signed_headers  # noqa: E402
from sandbox.world import BOT_TOKEN, SANDBOX_AWS_ENV, SIGNING_SECRET  # noqa: E402

ADMIN, CHANNEL, TEAM, BOT_USER = "U0ADMIN01", "C0PROGRAM", "T0PITCREW", "U0PITCREW"
TEXT = "cluster list all"


class Sender:
    def __init__(self, *, events_url: str, slack_url: str, http: httpx.AsyncClient) -> None:
        self.events_url, self.slack_url, self._http = events_url, slack_url, http
        self._forms: list[dict[str, str]] = []

    async def prepare_slash(self, count: int) -> None:
        answer = await self._http.post(
            f"{self.slack_url}/console/command-forms",
            json={"user_id": ADMIN, "channel_id": CHANNEL, "command": "/cluster", "text": TEXT, "count": count},
        )
        self._forms = answer.json()["forms"]

    async def _post(self, body: str, content_type: str | None = None) -> float:
        headers = signed_headers(body, secret=SIGNING_SECRET, timestamp=int(time.time()))
        if content_type:
            headers["Content-Type"] = content_type
        started = time.perf_counter()
        response = await self._http.post(self.events_url, content=body, headers=headers)
        elapsed = time.perf_counter() - started
        if response.status_code != 200:
            raise RuntimeError(f"answered {response.status_code}: {response.text[:200]}")
        return elapsed

    async def slash(self) -> float:
        return await self._post(urlencode(self._forms.pop()))

    async def mention(self) -> float:
        """An app_mention envelope as Slack sends it, with a fresh event id (each one is answered)."""
        ts = f"{time.time():.6f}"
        event = {
            "type": "app_mention",
            "user": ADMIN,
            "text": f"<@{BOT_USER}> {TEXT}",
            "ts": ts,
            "channel": CHANNEL,
            "event_ts": ts,
            "team": TEAM,
            "user_team": TEAM,
        }
        envelope = {
            "token": "bench",
            "team_id": TEAM,
            "api_app_id": "A0PITCREW",
            "event": event,
            "type": "event_callback",
            "event_id": f"Ev{uuid.uuid4().hex[:12].upper()}",
            "event_time": int(time.time()),
            "authorizations": [{"team_id": TEAM, "user_id": BOT_USER, "is_bot": True}],
        }
        return await self._post(json.dumps(envelope), "application/json")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=300, help="commands of each kind per concurrency level")
    parser.add_argument("--levels", default="1,5")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    levels = [int(level) for level in args.levels.split(",")]
    python = sys.executable

    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="pitcrew-bench-")))
        ports = {name: free_port() for name in ("aws", "bot", "slack")}
        program_file = work / "program.yml"
        env = {**os.environ, **SANDBOX_AWS_ENV}

        def spawn(name: str, argv: list[str], extra_env: dict[str, str] | None = None) -> None:
            process = start([python, *argv], {**env, **(extra_env or {})}, work / f"{name}.log")
            stack.callback(process.terminate)

        spawn("aws", ["bench/sandbox_aws.py", "--port", str(ports["aws"]), "--program-out", str(program_file)])
        await wait_healthy(f"http://127.0.0.1:{ports['aws']}/ready", timeout=120)
        endpoint = (work / "aws.log").read_text().split("MOTO_ENDPOINT=")[1].split()[0]
        slack_url = f"http://127.0.0.1:{ports['slack']}"
        spawn("slack", ["bench/slack_process.py", "--port", str(ports["slack"]), "--program", str(program_file)])
        await wait_healthy(f"{slack_url}/console/state")
        spawn(
            "bot",
            ["-m", "bot", "serve", "--port", str(ports["bot"])],
            {
                "AWS_ENDPOINT_URL": endpoint,
                "SLACK_API_URL": f"{slack_url}/api/",
                "SLACK_SIGNING_SECRET": SIGNING_SECRET,
                "SLACK_BOT_TOKEN": BOT_TOKEN,
                "DATABASE_URL": f"sqlite+aiosqlite:///{work}/pitcrew.db",
                "PITCREW_CONFIG": str(program_file),
            },
        )
        await wait_healthy(f"http://127.0.0.1:{ports['bot']}/healthz")

        limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)
        async with httpx.AsyncClient(timeout=30, limits=limits) as http:
            sender = Sender(events_url=f"http://127.0.0.1:{ports['bot']}/slack/events", slack_url=slack_url, http=http)
            await sender.prepare_slash(10)  # warm-up: imports, auth.test, first AWS sessions, both paths
            await run_level(sender.slash, 10, 1)
            await run_level(sender.mention, 10, 1)
            await asyncio.sleep(2)

            figures: dict[str, Any] = {"n": args.n}
            for level in levels:
                acks: dict[str, list[float]] = {"slash": [], "mention": []}
                done = 0
                while done < args.n:
                    chunk = min(50, args.n - done)
                    await sender.prepare_slash(chunk)
                    acks["slash"] += await run_level(sender.slash, chunk, level)
                    acks["mention"] += await run_level(sender.mention, chunk, level)
                    done += chunk
                    await asyncio.sleep(1)  # let the replies of this round go out before the next
                row = side_by_side(acks, "mention", "slash")
                figures[f"c{level}"] = row
                print(
                    f"concurrency {level:>2}: ack p50 mention {row['mention_p50_ms']:6.1f} ms vs slash "
                    f"{row['slash_p50_ms']:6.1f} ms (x{row['ratio_p50']:.2f}); p99 {row['mention_p99_ms']:6.1f} "
                    f"vs {row['slash_p99_ms']:6.1f} ms (x{row['ratio_p99']:.2f})",
                    flush=True,
                )
            figures["machine"] = machine()
            if args.json:
                args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
