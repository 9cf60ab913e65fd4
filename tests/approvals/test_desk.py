"""The approval desk against the real database (SQLite and Postgres), without Slack or AWS: Hypothesis over approval
clicks in any order, by any user, repeated, on a fixed clock. Whatever the clicks, the requester and non-approvers
never count, an approval counts once per person, a decided request never changes, and the change runs at most
once: exactly when `count` distinct approvers approved before any reject and before the expiry."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, cast
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.access import AccessPolicy
from bot.approvals.desk import ApprovalDesk, Approved, Counted, Refused, Repeated
from bot.approvals.rules import Needed
from bot.approvals.state import Verdict
from bot.audit import AuditLog
from bot.clusters.model import Backend
from bot.clusters.progress import Kind
from bot.config import ApprovalsConfig, ProgramConfig
from bot.operations import NeedsApproval, Operations
from bot.publishing import Reply
from bot.slack.approvals import SlackApprovals
from bot.slack.operations import SlackProgress
from storage import approvals as store
from storage.db import Database

T0 = datetime(2026, 12, 7, 1, 0, tzinfo=UTC)
REQUESTER, OPERATOR, VIEWER = "U0ALICE01", "U0KOJI001", "U0BOB0001"
ADMINS = ("U0ADMIN01", "U0ADMIN02", "U0ADMIN03")
TZ = ZoneInfo("Asia/Tokyo")


def program(approvers: str, count: int) -> ProgramConfig:
    return ProgramConfig.model_validate(
        {
            "name": "test",
            "coordination_channel": "C0PROGRAM",
            "admins": list(ADMINS),
            "orgs": [
                {
                    "id": "kumo-labs",
                    "name": "Kumo Labs",
                    "channel": "C0KUMOLAB",
                    "members": {REQUESTER: "operator", OPERATOR: "operator", VIEWER: "viewer"},
                    "aws": {"account_id": "111111111111", "region": "us-east-1"},
                }
            ],
            "approvals": {"delete": True, "approvers": approvers, "count": count, "ttl_minutes": 60},
        }
    )


class Poster:
    """Slack as far as the desk and Operations need it: posts get a ts, edits are kept."""

    def __init__(self) -> None:
        self.posted = 0

    async def post(self, *, channel: str, reply: Reply, thread_ts: str | None = None) -> str:
        self.posted += 1
        return f"1.{self.posted:06d}"

    async def update(self, *, channel: str, ts: str, reply: Reply) -> None:
        return None

    async def open_dm(self, user_id: str) -> str:
        return "D0" + user_id


class Fleet:
    """AWS as far as a delete needs it: each delete is counted, and the cluster is gone at once."""

    def __init__(self) -> None:
        self.deleted = 0

    async def delete(self, org_id: str, backend: Backend, name: str) -> str:
        self.deleted += 1
        return "rid"

    async def get(self, org_id: str, backend: Backend, name: str) -> None:
        return None


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


clicks = st.lists(
    st.tuples(
        st.sampled_from((REQUESTER, OPERATOR, VIEWER, "U0NOBODY1", *ADMINS)),
        st.sampled_from(tuple(Verdict)),
        st.integers(min_value=0, max_value=75),  # minutes after the request; time moves forward only
    ),
    max_size=12,
)


async def play(url: str, approvers: str, count: int, played: list[tuple[str, Verdict, int]]) -> None:
    db, clock, fleet = Database(url=url), Clock(), Fleet()
    config = program(approvers, count)
    access = AccessPolicy(program=config)
    rules = cast(ApprovalsConfig, config.approvals)
    operations = Operations(
        db=db,
        fleet=cast(Any, fleet),
        poster=cast(Any, Poster()),
        audit=AuditLog(db=db),
        access=access,
        tz=TZ,
        presenter=SlackProgress(),
        clock=clock,
        approvals=rules,
        first_poll=0.0,
    )
    desk = ApprovalDesk(
        db=db,
        operations=operations,
        access=access,
        audit=operations.audit,
        poster=cast(Any, Poster()),
        presenter=SlackApprovals(tz=TZ),
        clock=clock,
    )
    # A cluster of its own per example: Hypothesis runs every example on the one database, and a delete an
    # earlier example started may still be running there when its watch was stopped (the cluster then busy,
    # and this example's approved delete rightly not started: a flaky failure on Postgres).
    cluster = f"kumo-p5-{uuid.uuid4().hex[:8]}"
    try:
        operation = await operations.propose(
            kind=Kind.DELETE,
            org_id="kumo-labs",
            backend=Backend.HYPERPOD,
            cluster_name=cluster,
            request={"name": cluster},
            user_id=REQUESTER,
            channel_id="C0KUMOLAB",
        )
        asked = await desk.request(
            NeedsApproval(operation, Needed("delete", "every cluster delete needs approval")),
            user_id=REQUESTER,
            thread_ts=None,
        )
        approval = getattr(asked, "approval")  # noqa: B009
        allowed = set(ADMINS) | ({OPERATOR} if approvers == "operators" else set())
        counted: list[str] = []  # the distinct approvals, as the rules say they count
        decided = False
        runs = 0
        minutes = 0
        for user, verdict, at in played:
            minutes = max(minutes, at)
            clock.now = T0 + timedelta(minutes=minutes)
            vote = await desk.vote(str(approval.id), user_id=user, verdict=verdict, reason="not now")
            expired = minutes >= 60
            if user == REQUESTER or user not in allowed:
                if not decided and not expired:
                    assert isinstance(vote, Refused), (user, vote)
                continue
            if decided or expired:
                assert not isinstance(vote, Approved | Counted), vote
                decided = True
                continue
            if verdict is Verdict.REJECT:
                decided = True
                continue
            if user in counted:
                assert isinstance(vote, Repeated)
                continue
            counted.append(user)
            if len(counted) == count:
                assert isinstance(vote, Approved) and vote.approved_by == tuple(counted)
                runs += 1
                decided = True
            else:
                assert isinstance(vote, Counted)
        await asyncio.sleep(0)  # the watch of a started delete
        assert fleet.deleted == runs <= 1, "the change runs once, and only when approved"
        async with db.session() as session:
            votes = await store.votes(session, approval_id=approval.id)
            final = await store.get_approval(session, approval_id=approval.id)
        assert final is not None
        voters = [v.user_id for v in votes]
        assert REQUESTER not in voters and set(voters) <= allowed and len(voters) == len(set(voters))
        assert (final.status == "approved") == (runs == 1)
    finally:
        await operations.close()
        await operations.audit.flush()
        await db.dispose()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(played=clicks, approvers=st.sampled_from(("admins", "operators")), count=st.integers(1, 2))
def test_any_clicks_in_any_order_run_the_change_at_most_once(
    migrated_database_url: str, played: list[tuple[str, Verdict, int]], approvers: str, count: int
) -> None:
    asyncio.run(play(migrated_database_url, approvers, count, played))
