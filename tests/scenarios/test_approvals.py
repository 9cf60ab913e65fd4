"""Two-person approval (issue 24), through the sandbox's signed Slack requests, with two Pitcrew replicas on one
database (SQLite and Postgres): a delete and a large launch need approval; the requester cannot approve their own
change; a non-approver's click counts for nothing; two approvals when two are required, a repeated click counted
once; a reject (with its reason, from the modal) ends it; a request expires at a click and by the sweep on a fixed
clock; the change runs exactly once after the last approval, even when both replicas receive the last click and
Slack retries it; every step is audited."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.config import ApprovalsConfig, ProgramConfig
from sandbox.moto_support import hyperpod_progress, reset_moto_server
from sandbox.slack import Message
from sandbox.world import Sandbox
from storage import approvals as store
from storage import crud
from tests.conftest import SeededAws
from tests.scenarios.conftest import ADMIN, ask, body

ALICE, BOB, KOJI, HANA = "U0ALICE01", "U0BOB0001", "U0KOJI001", "U0HANA001"  # operator, viewer, operator; sakura
ADMIN2 = "U0ADMIN02"
KUMO = "C0KUMOLAB"
TRAIN = "kumo-p5-train"
LAUNCH = (
    "launch hyperpod-p5 {name} --count 2 "
    "--param execution_role_arn=arn:aws:iam::111111111111:role/SageMakerHyperPodExecutionRole "
    "--param lifecycle_s3_uri=s3://sagemaker-kumo-labs-lifecycle/base-config/"
)
RULES = ApprovalsConfig(delete=True, launch_over_usd_per_day=2000, approvers="admins", count=2, ttl_minutes=60)
T0 = datetime(2026, 12, 7, 1, 0, tzinfo=UTC)  # the fixed clock of the expiry test


def with_approvals(program: ProgramConfig) -> ProgramConfig:
    return program.model_copy(update={"approvals": RULES})


@dataclass
class Replicas:
    first: Sandbox
    second: Sandbox

    def to(self, replica: Sandbox) -> None:
        """Slack's next deliveries go to this replica."""
        self.first.slack.events_url = f"{replica.bot_url}/slack/events"

    async def drain(self) -> None:
        await self.first.pitcrew.services.drain()
        await self.second.pitcrew.services.drain()


@pytest.fixture
def reseed(moto_endpoint: str) -> Iterator[None]:
    """The next test gets the seeded clusters back (a delete here removes one)."""
    with hyperpod_progress(0.3, create_seconds=0.3, delete_seconds=0.3):
        yield
    reset_moto_server(moto_endpoint)


@pytest.fixture
async def replicas(sandbox_factory: Callable[..., Any], database_url: str, reseed: None) -> AsyncIterator[Replicas]:
    async with sandbox_factory(database_url=database_url, program_transform=with_approvals) as first:
        await first.pitcrew.ready.wait()
        async with sandbox_factory(
            database_url=database_url, program_transform=with_approvals, slack=first.slack
        ) as second:
            await second.pitcrew.ready.wait()
            for world in (first, second):
                await world.pitcrew.services.drain()
                world.pitcrew.services.operations.first_poll = 0.2  # seconds here, where AWS takes minutes
                world.pitcrew.services.operations.max_poll = 0.5
            both = Replicas(first, second)
            both.to(first)
            yield both


def request_message(world: Sandbox, summary: str) -> Message:
    (message,) = [m for m in world.slack.channel_messages(KUMO) if m.text.startswith(f"Approval needed: {summary}")]
    return message


async def told(world: Sandbox, user: str, words: str, *, after: int) -> Message:
    """The ephemeral message `user` alone got after the first `after` messages, saying `words`."""
    return await world.slack.wait_for(
        lambda m: m.ephemeral_to == user and words in m.text and m in world.slack.messages[after:], timeout=15
    )


async def audit(world: Sandbox, *commands: str) -> list[tuple[str, str, str, str]]:
    """(command, user, outcome, detail) of the org's entries with these commands, oldest first."""
    async with world.pitcrew.services.db.session() as session:
        entries = await crud.audit_entries(session, org_id="kumo-labs", limit=200)
    return [(e.command, e.user_id, e.outcome, e.detail) for e in reversed(entries) if e.command in commands]


def progress(world: Sandbox, starts: str) -> list[Message]:
    return [m for m in world.slack.messages if m.kind == "message" and m.text.startswith(starts)]


async def test_a_delete_waits_for_two_admins_and_runs_once(replicas: Replicas, seeded_aws: SeededAws) -> None:
    world, slack = replicas.first, replicas.first.slack
    planned = await ask(world, user=ALICE, channel=KUMO, text=f"delete {TRAIN}")
    assert "Request approval…" in str(planned.blocks) and "Needs approval: every cluster delete" in body(planned)
    await slack.click(user_id=ALICE, message=planned, action_id="delete_open")
    modal = await slack.wait_for_view(user_id=ALICE, callback_id="delete_confirm", timeout=15)
    await slack.submit_view(user_id=ALICE, view_id=modal["id"], values={"typed_name": {"name": TRAIN}})
    kept = await slack.wait_for(lambda m: m.ts == planned.ts and "Approval requested by" in body(m), timeout=15)
    assert not [b for b in kept.blocks if b["type"] == "actions"], "the plan's buttons go"
    request = await slack.wait_for(lambda m: m.text.startswith(f"Approval needed: delete kumo-labs/{TRAIN}"))
    shown = body(request)
    assert f"<@{ALICE}>" in shown and "every cluster delete needs approval" in shown and "0 of 2" in shown
    assert "Approve" in str(request.blocks) and "Reject…" in str(request.blocks)
    clusters = {c["ClusterName"] for c in sagemaker(seeded_aws).list_clusters()["ClusterSummaries"]}
    assert TRAIN in clusters, "nothing deleted yet"

    # The requester, twice (a second click says it again), and an operator who is no approver: refused.
    for user, words in ((ALICE, "someone else must approve"), (ALICE, "someone else must approve")):
        after = len(slack.messages)
        await slack.click(user_id=user, message=request, action_id="approval_approve")
        await told(world, user, words, after=after)
    after = len(slack.messages)
    await slack.click(user_id=KOJI, message=request, action_id="approval_approve")
    await told(world, KOJI, "Only a program admin can approve", after=after)

    # The first admin, on the second replica; again: counted once.
    replicas.to(replicas.second)
    after = len(slack.messages)
    await slack.click(user_id=ADMIN, message=request, action_id="approval_approve")
    await told(world, ADMIN, "counted (1 of 2)", after=after)
    await slack.wait_for(lambda m: m.ts == request.ts and "1 of 2" in body(m), timeout=15)
    after = len(slack.messages)
    await slack.click(user_id=ADMIN, message=request, action_id="approval_approve")
    await told(world, ADMIN, "approved this already", after=after)
    assert not progress(world, f"Deleting kumo-labs/{TRAIN}"), "one approval of two runs nothing"

    # The last approval reaches both replicas at once, and Slack retries it: the delete starts once.
    payload = slack.click_payload(user_id=ADMIN2, message=request, action_id="approval_approve")
    deliveries = []
    for replica in (replicas.first, replicas.second, replicas.first):
        replicas.to(replica)
        deliveries.append(slack.click(user_id=ADMIN2, message=request, action_id="approval_approve"))
    answers = await asyncio.gather(*deliveries)
    assert all(a.status_code == 200 for a in answers) and payload["actions"][0]["value"]
    done = await slack.wait_for(
        lambda m: m.text.startswith(f"Deleting kumo-labs/{TRAIN}") and "Done:" in m.text, timeout=30
    )
    assert "Done:" in done.text
    await asyncio.sleep(0.5)
    await replicas.drain()
    assert len(progress(world, f"Deleting kumo-labs/{TRAIN}")) == 1, "one progress message: it ran once"
    ended = await slack.wait_for(lambda m: m.ts == request.ts and "Approved by" in body(m), timeout=15)
    assert f"<@{ADMIN}>, <@{ADMIN2}>" in body(ended) and not [b for b in ended.blocks if b["type"] == "actions"]
    clusters = {c["ClusterName"] for c in sagemaker(seeded_aws).list_clusters()["ClusterSummaries"]}
    assert TRAIN not in clusters

    steps = await audit(world, "approval_request", "approval_approve", "approval_run", "delete", "operation_confirm")
    assert [(c, u, o) for c, u, o, _ in steps] == [
        ("approval_request", ALICE, "allowed"),
        ("approval_approve", ALICE, "refused"),
        ("approval_approve", ALICE, "refused"),
        ("approval_approve", KOJI, "refused"),
        ("approval_approve", ADMIN, "allowed"),
        ("approval_approve", ADMIN2, "allowed"),
        ("approval_run", ALICE, "allowed"),
        ("delete", ADMIN2, "done"),
    ]
    assert "every cluster delete needs approval" in steps[0][3]
    assert steps[-2][3] == f"approved by <@{ADMIN}>, <@{ADMIN2}>; started"


def sagemaker(seeded_aws: SeededAws) -> Any:
    org = seeded_aws.program.org("kumo-labs")
    assert org is not None
    return seeded_aws.accounts.client(org, "sagemaker")


async def wait_home(world: Sandbox, user: str) -> str:
    """The text of `user`'s Home once it is published."""
    await world.slack.open_home(user_id=user)
    for _ in range(150):
        view = world.slack.home_views.get(user)
        if view is not None:
            return str(view["blocks"])
        await asyncio.sleep(0.1)
    raise AssertionError(f"no Home published for {user}")


async def test_a_large_launch_needs_approval_and_a_reject_with_its_reason_ends_it(
    replicas: Replicas, seeded_aws: SeededAws
) -> None:
    world, slack = replicas.first, replicas.first.slack
    planned = await ask(world, user=ALICE, channel=KUMO, text=LAUNCH.format(name="kumo-big"))
    assert "Request approval" in str(planned.blocks) and "Confirm launch" not in str(planned.blocks)
    assert "Needs approval: estimated $5,497/day &gt; $2,000" in body(planned)
    before = seeded_aws.state()
    stale_plan = copy.deepcopy(planned)  # a client still showing its buttons later
    await slack.click(user_id=ALICE, message=planned, action_id="operation_confirm")
    request = await slack.wait_for(lambda m: m.text.startswith("Approval needed: launch kumo-labs/kumo-big"))
    stale_request = copy.deepcopy(request)
    assert "estimated $5,497/day &gt; $2,000" in body(request)

    # Listed for whoever may see it (ephemeral), marked for those who may approve; on the approvers' Home.
    listed = await ask(world, user=ADMIN, channel=KUMO, text="approvals")
    assert listed.kind == "ephemeral" and "launch kumo-labs/kumo-big" in body(listed)
    assert "you may approve" in body(listed)
    own = await ask(world, user=ALICE, channel=KUMO, text="approvals kumo-labs")
    assert "kumo-big" in body(own) and "you may approve" not in body(own)
    elsewhere = await ask(world, user=HANA, channel="C0SAKURA1", text="approvals")
    assert "kumo-big" not in body(elsewhere) and "No change is waiting" in body(elsewhere)
    bad = await ask(world, user=ALICE, channel=KUMO, text="approvals kumo-labs sakura-ai")
    assert "Usage: `/cluster approvals [ORG]`" in body(bad) or "Usage:" in body(bad)
    assert "kumo-big" in await wait_home(world, ADMIN)
    assert "Waiting for your approval" not in await wait_home(world, ALICE), "one's own change is not one's to approve"

    # Forged and stale payloads: one clear message, nothing changes.
    for value in ("999999", "abc", "", "-1", "1" * 40):
        after = len(slack.messages)
        answer = await slack.click(user_id=ADMIN, message=request, action_id="approval_approve", value=value)
        assert answer.status_code == 200
        await told(world, ADMIN, "not known", after=after)

    # Reject… asks why; an empty reason is refused by the form, which stays open.
    await slack.click(user_id=ADMIN, message=request, action_id="approval_reject_open")
    modal = await slack.wait_for_view(user_id=ADMIN, callback_id="approval_reject", timeout=15)
    empty = await slack.submit_view(user_id=ADMIN, view_id=modal["id"], values={"reject_reason": {"reason": "  "}})
    assert empty.status_code == 200 and "Say why" in slack.open_views[modal["id"]]["errors"]["reject_reason"]
    replicas.to(replicas.second)
    await slack.submit_view(
        user_id=ADMIN, view_id=modal["id"], values={"reject_reason": {"reason": "Too big for this week's budget"}}
    )
    ended = await slack.wait_for(lambda m: m.ts == request.ts and "Rejected by" in body(m), timeout=15)
    assert f"<@{ADMIN}>: Too big for this week's budget. Nothing ran." in body(ended)
    assert not [b for b in ended.blocks if b["type"] == "actions"]

    # Late clicks change nothing: the other admin's Approve, and a stale Confirm on the plan.
    after = len(slack.messages)
    await slack.click(user_id=ADMIN2, message=stale_request, action_id="approval_approve")
    await told(world, ADMIN2, "already rejected", after=after)
    after = len(slack.messages)
    await slack.click(user_id=ALICE, message=stale_plan, action_id="operation_confirm")
    await told(world, ALICE, "already cancelled", after=after)
    await replicas.drain()
    assert seeded_aws.state() == before, "nothing launched"
    steps = await audit(world, "approval_request", "approval_reject", "approval_approve", "approval_run", "launch")
    assert [(c, u, o) for c, u, o, _ in steps] == [
        ("approval_request", ALICE, "allowed"),
        ("approval_reject", ADMIN, "done"),
    ]
    assert steps[-1][3] == "rejected: Too big for this week's budget"
    assert "--action approvals" and "rejected a launch of" in body(
        await ask(world, user=ADMIN, channel=KUMO, text="audit kumo-labs --action approvals")
    )


def starts_with(title: str) -> Callable[[Message], bool]:
    return lambda message: message.text.startswith(title)


class FixedClock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


async def test_a_request_expires_at_a_click_and_by_the_sweep_and_nothing_runs(
    replicas: Replicas, seeded_aws: SeededAws
) -> None:
    clock = FixedClock(T0)
    for replica in (replicas.first, replicas.second):
        replica.pitcrew.services.operations.clock = clock
        assert replica.pitcrew.services.approvals is not None
        replica.pitcrew.services.approvals.clock = clock
    world, slack = replicas.first, replicas.first.slack
    requests = []
    for name in ("kumo-late", "kumo-later"):
        planned = await ask(world, user=ALICE, channel=KUMO, text=LAUNCH.format(name=name))
        await slack.click(user_id=ALICE, message=planned, action_id="operation_confirm")
        requests.append(await slack.wait_for(starts_with(f"Approval needed: launch kumo-labs/{name}")))
    first, second = requests
    assert "2026-12-07 11:00 JST" in body(first), "the expiry, in the program's zone: 60 min after the request"
    before = seeded_aws.state()
    await slack.click(user_id=ADMIN, message=first, action_id="approval_approve")  # inside the hour: counted
    await told(world, ADMIN, "counted (1 of 2)", after=0)

    clock.now = T0 + timedelta(minutes=60)  # the expiry itself: too late
    after = len(slack.messages)
    await slack.click(user_id=ADMIN2, message=first, action_id="approval_approve")
    await told(world, ADMIN2, "expired", after=after)
    await slack.wait_for(lambda m: m.ts == first.ts and "Expired at" in body(m), timeout=15)

    # The sweep, on both replicas at once, ends the other one once.
    desks = [r.pitcrew.services.approvals for r in (replicas.first, replicas.second)]
    ended = await asyncio.gather(*(desk.sweep() for desk in desks if desk is not None))
    assert sum(ended) == 1
    expired = await slack.wait_for(lambda m: m.ts == second.ts and "Expired at" in body(m), timeout=15)
    assert not [b for b in expired.blocks if b["type"] == "actions"]
    assert sum(await asyncio.gather(*(desk.sweep() for desk in desks if desk is not None))) == 0
    await replicas.drain()
    assert seeded_aws.state() == before, "nothing ran"
    async with world.pitcrew.services.db.session() as session:
        rows = [await store.approval_for_operation(session, operation_id=o.id) for o in await planned_rows(session)]
    assert {r.status for r in rows if r is not None} == {"expired"}
    steps = await audit(world, "approval_expire", "approval_run", "launch")
    assert [(c, u, o) for c, u, o, _ in steps] == [("approval_expire", ALICE, "refused")] * 2


async def planned_rows(session: Any) -> list[Any]:
    return [o for o in await crud.operations_with_status(session, status="cancelled") if o.kind == "launch"]
