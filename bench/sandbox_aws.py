"""The sandbox's AWS as a process of its own, for benchmarks: moto seeded with the example program,
plus the ParallelCluster API emulator. Writes the program file (with its API URLs) for `pitcrew serve`.

    .venv/bin/python bench/sandbox_aws.py --port 4100 --program-out /tmp/program.yml
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.config import load_program
from sandbox.asgi_server import serve_asgi
from sandbox.moto_support import start_moto_server
from sandbox.pcluster_api import ParallelClusterApi
from sandbox.seed import seed_program
from sandbox.world import EXAMPLE_PROGRAM, aws_environment, sandbox_program


async def serve(port: int, program_out: Path, endpoint: str) -> None:
    written = asyncio.Event()

    async def ready(_: Request) -> Response:
        return Response("ready") if written.is_set() else Response("starting", status_code=503)

    app: Any = Starlette(routes=[Route("/ready", ready), Mount("/", app=ParallelClusterApi())])
    async with serve_asgi(app, "127.0.0.1", port) as url:
        program = sandbox_program(url)
        program_out.write_text(yaml.safe_dump(program.model_dump(mode="json", exclude_none=True), sort_keys=False))
        print(f"MOTO_ENDPOINT={endpoint} PCLUSTER_API={url}", flush=True)
        written.set()
        await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--program-out", type=Path, required=True)
    args = parser.parse_args()
    _server, endpoint = start_moto_server()  # a daemon thread; it ends with the process
    with aws_environment(endpoint):
        report = seed_program(load_program(EXAMPLE_PROGRAM), endpoint_url=endpoint)
        print(report.summary(), flush=True)
        asyncio.run(serve(args.port, args.program_out, endpoint))


if __name__ == "__main__":
    main()
