"""The peer for bench/ack_latency.py: a Bolt AsyncApp that only acks, on Pitcrew's server stack
(uvicorn + Starlette + Bolt's AsyncSlackRequestHandler), so the difference measured is Pitcrew's own work."""

from __future__ import annotations

import argparse

import uvicorn
from slack_bolt.adapter.starlette.async_handler import AsyncSlackRequestHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


def build(*, signing_secret: str, slack_api_url: str, token: str) -> Starlette:
    bolt = AsyncApp(client=AsyncWebClient(token=token, base_url=slack_api_url), signing_secret=signing_secret)

    async def ack_only(ack) -> None:  # type: ignore[no-untyped-def]
        await ack()

    bolt.command("/cluster")(ack_only)
    handler = AsyncSlackRequestHandler(bolt)

    async def events(request: Request) -> Response:
        return await handler.handle(request)

    async def healthz(_: Request) -> Response:
        return Response("ok")

    return Starlette(routes=[Route("/slack/events", events, methods=["POST"]), Route("/healthz", healthz)])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--signing-secret", required=True)
    parser.add_argument("--slack-api-url", required=True)
    parser.add_argument("--token", required=True)
    args = parser.parse_args()
    app = build(signing_secret=args.signing_secret, slack_api_url=args.slack_api_url, token=args.token)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
