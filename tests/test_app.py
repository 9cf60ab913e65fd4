"""What build_services wires for a replica's role: which lease its scheduler leads under, and what it runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.app import build_services
from bot.config import Settings, load_program
from bot.resources import example_program


@pytest.mark.parametrize(
    ("monitor", "digest", "lease"),
    [(True, True, "monitor"), (True, False, "monitor"), (False, True, "digest"), (False, False, None)],
)
async def test_a_replica_without_the_monitors_never_takes_their_lease(
    tmp_path: Path, monitor: bool, digest: bool, lease: str | None
) -> None:
    """Review finding: with PITCREW_MONITOR=false (a command-only replica) and the digest on, the replica took
    the monitors' lease; had it won, node sweeps and throughput checks would have run nowhere."""
    settings = Settings(
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'pitcrew.db'}",
        pitcrew_monitor=monitor,
        pitcrew_digest=digest,
        slack_bot_token="xoxb-test",
        slack_signing_secret="secret",
    )
    services = build_services(
        settings=settings, program=load_program(example_program()), client=AsyncWebClient(token="xoxb-test")
    )
    try:
        if lease is None:
            assert services.scheduler is None
        else:
            assert services.scheduler is not None and services.scheduler.lease.name == lease
    finally:
        await services.poster.aclose()
        services.fleet.close()
