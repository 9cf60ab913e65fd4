"""The Home tab's refresh, against storage and the local Slack's views.publish: opening Home publishes it;
changes within the debounce period are one refresh, after it, for the people who opened Home and see that
org; a record added shows there. The debounce runs on an injected clock and sleep: nothing waits on time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.access import AccessPolicy
from bot.capacity.model import Reservation
from bot.clusters.model import Backend, Cluster, Health, Node
from bot.config import ProgramConfig, load_program
from bot.digest.facts import RecordKind
from bot.home.render import home_view
from bot.home.tab import HomeTab, SweepWatch
from bot.slack.blocks import Reply
from bot.slack.poster import Poster
from bot.tracking.records import RecordBook
from sandbox.asgi_server import serve_asgi
from sandbox.slack import LocalSlack
from sandbox.world import EXAMPLE_PROGRAM
from storage import tracking
from storage.db import Database
from storage.models import DigestRunStatus
from tests.waiting import wait_for

TOKEN = "xoxb-test-token"
NOW = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)
ADMIN, ALICE, BOB, GUEST = "U0ADMIN01", "U0ALICE01", "U0BOB0001", "U0GUEST01"


class Timer:
    """An injected monotonic clock, and a sleep that returns only when the test moves the clock on."""

    def __init__(self) -> None:
        self.now = 100.0
        self.waits: list[float] = []
        self._wake = asyncio.Event()

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self._wake.clear()
        await self._wake.wait()

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self._wake.set()


class Capacity:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail

    async def reservations(self, org_id: str) -> list[Reservation]:
        if self.fail:
            raise RuntimeError("AWS said no")
        return []


@pytest.fixture(scope="module")
def program() -> ProgramConfig:
    return load_program(EXAMPLE_PROGRAM)


@pytest.fixture
async def slack() -> AsyncIterator[LocalSlack]:
    users = {ADMIN: "Admin", ALICE: "Alice", BOB: "Bob", GUEST: "Guest"}
    local = LocalSlack(
        signing_secret="s",
        bot_token=TOKEN,
        users=users,
        channels={"C0PROGRAM": "coordination", "C0KUMOLAB": "kumo-labs"},
    )
    async with serve_asgi(local.app) as base_url:
        local.base_url = base_url
        yield local


@pytest.fixture
async def poster(slack: LocalSlack) -> AsyncIterator[Poster]:
    made = Poster(client=AsyncWebClient(token=TOKEN, base_url=slack.api_url), post_interval=0.0)
    yield made
    await made.aclose()


def home(db: Database, program: ProgramConfig, poster: Poster, timer: Timer, **kwargs: Any) -> HomeTab:
    return HomeTab(
        db=db,
        program=program,
        access=AccessPolicy(program=program),
        poster=poster,
        render=home_view,
        clock=lambda: NOW,
        monotonic=timer.monotonic,
        sleep=timer.sleep,
        **kwargs,
    )


def text(slack: LocalSlack, user: str) -> str:
    return "\n".join(b["text"]["text"] for b in slack.home_views[user]["blocks"] if isinstance(b.get("text"), dict))


def view_ids(slack: LocalSlack) -> dict[str, str]:
    return {user: view["id"] for user, view in slack.home_views.items()}


async def test_changes_within_the_period_are_one_refresh_for_those_who_see_the_org(
    db: Database, program: ProgramConfig, poster: Poster, slack: LocalSlack
) -> None:
    timer = Timer()
    tab = home(db, program, poster, timer, capacity=Capacity())
    records = RecordBook(db=db, program=program, clock=lambda: NOW - timedelta(minutes=1), on_change=tab.changed)
    for user in (ADMIN, ALICE, BOB, GUEST):
        await tab.opened(user)
    assert set(slack.home_views) == {ADMIN, ALICE, BOB, GUEST}
    assert "0 open incidents" not in text(slack, ALICE) and "No open alerts or incidents." in text(slack, ALICE)
    before = view_ids(slack)

    for number in range(3):  # three changes in a row: one refresh, after the period
        await records.add(
            org_id="kumo-labs",
            kind=RecordKind.INCIDENT,
            text=f"NCCL timeout {number}",
            user_id=ALICE,
            channel_id="",
            request_key=f"r{number}",
        )
    await wait_for(lambda: timer.waits, what="the refresh to wait for its period")
    assert timer.waits == [5.0]
    assert view_ids(slack) == before  # nothing published before the period is over
    timer.advance(5.0)
    await tab.settled()
    after = view_ids(slack)
    changed = {user for user in after if after[user] != before[user]}
    assert changed == {ADMIN, ALICE, BOB}  # who sees kumo-labs; not the guest
    assert "3 open incidents" in text(slack, ALICE) and "3 open incidents" in text(slack, BOB)
    assert tab.published == 4 + 3

    tab.changed("hoshi-vision")  # only the admin sees it
    await wait_for(lambda: len(timer.waits) == 2, what="the second refresh's wait")
    timer.advance(5.0)
    await tab.settled()
    assert {u for u, v in view_ids(slack).items() if v != after[u]} == {ADMIN}


async def test_a_change_for_every_org_refreshes_every_member_and_nobody_watching_means_no_work(
    db: Database, program: ProgramConfig, poster: Poster, slack: LocalSlack
) -> None:
    timer = Timer()
    tab = home(db, program, poster, timer)
    tab.changed(None)  # nobody opened Home yet: nothing to do, no task
    await tab.settled()
    assert timer.waits == [] and slack.home_views == {}
    for user in (ALICE, GUEST):
        await tab.opened(user)
    before = view_ids(slack)
    tab.changed(None)
    await wait_for(lambda: timer.waits, what="the refresh's wait")
    timer.advance(10.0)
    await tab.settled()
    assert {u for u, v in view_ids(slack).items() if v != before[u]} == {ALICE}


async def test_capacity_that_fails_is_said_in_one_line_and_the_rest_of_home_is_shown(
    db: Database, program: ProgramConfig, poster: Poster, slack: LocalSlack
) -> None:
    tab = home(db, program, poster, Timer(), capacity=Capacity(fail=True))
    await tab.opened(ALICE)
    shown = text(slack, ALICE)
    assert shown.count("Reserved capacity could not be read.") == 1
    assert "Pitcrew · Kumo Labs" in "\n".join(
        b["text"]["text"] for b in slack.home_views[ALICE]["blocks"] if isinstance(b.get("text"), dict)
    )


async def test_home_links_the_last_digest_an_admin_to_the_summary_a_member_to_their_orgs_post(
    db: Database, program: ProgramConfig, poster: Poster, slack: LocalSlack
) -> None:
    tab = home(db, program, poster, Timer())
    await tab.opened(ALICE)
    assert "No digest posted yet." in str(slack.home_views[ALICE]["blocks"])
    kumo = program.org("kumo-labs")
    assert kumo is not None
    posted: dict[str, str] = {}
    for week in ("2026-W47", "2026-W48"):
        for channel in (program.coordination_channel, kumo.channel):
            ts = await poster.post(channel=channel, reply=Reply(text=f"digest {week}", blocks=[]))
            async with db.session() as session:
                run = await tracking.claim_digest_run(session, week=week, channel=channel, by="test", at=NOW)
                assert run is not None and run.id is not None
                values = {"status": DigestRunStatus.POSTED.value, "posted_at": NOW, "message_ts": ts}
                await tracking.finish_digest_run(session, run_id=run.id, values=values)
            posted[channel] = (await poster.client.chat_getPermalink(channel=channel, message_ts=ts))["permalink"]
    for user in (ALICE, ADMIN, GUEST):
        await tab.opened(user)
    summary, own = posted[program.coordination_channel], posted[kumo.channel]
    assert f"Last digest: <{own}|2026-W48>" in str(slack.home_views[ALICE]["blocks"])
    assert summary not in str(slack.home_views[ALICE]["blocks"])  # every org's sections: not a member's link
    assert f"Last digest: <{summary}|2026-W48>" in str(slack.home_views[ADMIN]["blocks"])
    assert summary not in str(slack.home_views[GUEST]["blocks"])  # an outsider sees no program link


class Changes:
    def __init__(self) -> None:
        self.orgs: list[str | None] = []

    def changed(self, org_id: str | None) -> None:
        self.orgs.append(org_id)


async def test_a_sweep_refreshes_an_orgs_home_only_when_its_clusters_health_or_size_changed() -> None:
    def cluster(healthy: int, total: int = 4) -> Cluster:
        nodes = tuple(
            Node(
                node_id=f"i-{n}",
                group="gpu",
                instance_type="p5.48xlarge",
                status="Running",
                health=Health.HEALTHY if n < healthy else Health.UNHEALTHY,
            )
            for n in range(total)
        )
        return Cluster(org="kumo-labs", name="dev", backend=Backend.PCLUSTER, status="CREATE_COMPLETE", nodes=nodes)

    home = Changes()
    watch = SweepWatch(home=home)  # type: ignore[arg-type]  # anything with changed(org_id)
    for listing in ([cluster(4)], [cluster(4)], [cluster(3)], [cluster(3)], [cluster(3, 5)], []):
        await watch.observe("kumo-labs", listing)
    assert home.orgs == ["kumo-labs"] * 4  # first seen, a node unhealthy, a node added, the cluster gone
