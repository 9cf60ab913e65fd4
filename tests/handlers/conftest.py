"""Listener tests: each calls one listener callback directly, as Bolt would after routing, with an `ack`
that keeps what it was given, the payload the local Slack builds for the request, and a context holding
the Services of a running sandbox world (real storage, moto, the local Slack's Web API and response URLs).

They sit beside the scenario tests (tests/scenarios/), which send the same requests signed over HTTP."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import pytest

from sandbox.world import Sandbox
from tests.scenarios.conftest import sandbox, sandbox_factory  # noqa: F401  (the scenario fixtures, used here)

LOGGER = logging.getLogger("tests.handlers")


@dataclass
class Ack:
    """What Bolt's `ack` was called with, once per call: an empty dict for a plain ack."""

    calls: list[dict[str, Any]] = field(default_factory=list)

    async def __call__(self, **kwargs: Any) -> None:
        self.calls.append(kwargs)


@pytest.fixture
def ack() -> Ack:
    return Ack()


def context(world: Sandbox) -> dict[str, Any]:
    """The listener's context as the app's middleware leaves it: the running Pitcrew's Services."""
    return {"services": world.pitcrew.services}
