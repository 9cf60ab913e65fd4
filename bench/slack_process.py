"""A local Slack workspace as a process of its own, for benchmarks: it receives an app's Web API calls
and replies, so that the load generator's process does nothing but send and time.

    .venv/bin/python bench/slack_process.py --port 4200 --program /tmp/program.yml
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.config import load_program
from sandbox.slack import LocalSlack
from sandbox.world import BOT_TOKEN, SIGNING_SECRET, workspace_people


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--program", type=Path, required=True)
    args = parser.parse_args()
    users, channels = workspace_people(load_program(args.program))
    slack = LocalSlack(signing_secret=SIGNING_SECRET, bot_token=BOT_TOKEN, users=users, channels=channels)
    slack.base_url = f"http://127.0.0.1:{args.port}"
    uvicorn.run(slack.app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
