"""A quota gap is no blank cheque (issue 24 item 3): an accelerator type an org's quota does not list has quota 0,
so a launch or scale of it is refused with the numbers and who to ask, on SQLite and Postgres; head, controller
and login types stay unlimited."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from bot.config import ProgramConfig
from sandbox.world import Sandbox
from storage import crud
from storage.models import Outcome
from tests.conftest import SeededAws
from tests.scenarios.conftest import ask, body

ALICE, HANA = "U0ALICE01", "U0HANA001"
KUMO, SAKURA = "C0KUMOLAB", "C0SAKURA1"
TRAIN, WORKERS = "kumo-p5-train", "worker-group-1"


def kumo_lists_only_trainium(program: ProgramConfig) -> ProgramConfig:
    """kumo-labs' quota names Trainium only: its P5 clusters hold an accelerator its quota does not list."""
    orgs = [o.model_copy(update={"quota": {"trn1.32xlarge": 8}}) if o.id == "kumo-labs" else o for o in program.orgs]
    return program.model_copy(update={"orgs": orgs})


@pytest.fixture
async def world(sandbox_factory: Callable[..., Any], database_url: str) -> AsyncIterator[Sandbox]:
    async with sandbox_factory(database_url=database_url, program_transform=kumo_lists_only_trainium) as world:
        await world.pitcrew.ready.wait()
        await world.pitcrew.services.drain()
        yield world


async def test_a_launch_of_an_unlisted_accelerator_is_refused_with_the_numbers(
    world: Sandbox, seeded_aws: SeededAws
) -> None:
    before = seeded_aws.state()
    # sakura-ai's quota lists only Trainium: 16 P5 nodes ($43k a day) were launched unopposed before.
    reply = await ask(world, user=HANA, channel=SAKURA, text="launch hyperpod-p5 sakura-p5 --count 16")
    text = body(reply)
    assert "Over quota: p5.48xlarge: held 0, requested 16, allowed 0 (not in the org's quota)" in text
    assert "ask a program admin to raise the quota" in text
    assert "Plan:" not in text and "Confirm" not in str(reply.blocks)
    assert seeded_aws.state() == before
    async with world.pitcrew.services.db.session() as session:
        (row,) = [e for e in await crud.audit_entries(session, limit=10) if e.text.startswith("launch")]
    assert row.outcome == Outcome.REFUSED and row.user_id == HANA


async def test_a_listed_accelerator_still_launches_and_head_nodes_stay_unlimited(world: Sandbox) -> None:
    reply = await ask(world, user=ALICE, channel=KUMO, text="launch hyperpod-trn1 kumo-trn --dry-run --count 4")
    text = body(reply)
    assert "trn1.32xlarge: held 0 + 4 → 4 of 8 allowed" in text
    assert "m5.12xlarge: held 1 + 1 → 2 (not limited)" in text  # the controller: not an accelerator


async def test_a_scale_of_an_unlisted_accelerator_is_refused_and_shrinking_is_not(
    world: Sandbox, seeded_aws: SeededAws
) -> None:
    before = seeded_aws.state()
    grow = await ask(world, user=ALICE, channel=KUMO, text=f"scale {TRAIN} {WORKERS} 33")
    said = body(grow)
    assert "Over quota: p5.48xlarge: held 36, requested 1 more, allowed 0 (not in the org's quota)" in said
    assert "Confirm" not in str(grow.blocks)
    assert seeded_aws.state() == before
    shrink = await ask(world, user=ALICE, channel=KUMO, text=f"scale {TRAIN} {WORKERS} 30")
    assert "Confirm scale" in str(shrink.blocks), "shrinking never needs quota"
