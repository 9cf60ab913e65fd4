"""The App Home end to end: app_home_opened delivered by the local Slack to Pitcrew over HTTP (signed as Slack
signs it), the Home each role is shown through views.publish, its buttons, and its refresh after a change.

People of the sandbox program: an admin, kumo-labs' operator (Alice) and viewer (Bob), and a guest of no org."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import httpx

from bot.alerts.desk import AlertDesk
from bot.capacity.monitor import CapacityMonitor
from bot.slack.alerts import SlackAlerts
from sandbox.world import Sandbox
from tests.conftest import SeededAws
from tests.scenarios.conftest import ADMIN, COORDINATION, ask, body
from tests.waiting import wait_for

ALICE, BOB, GUEST = "U0ALICE01", "U0BOB0001", "U0GUEST01"
KUMO = "C0KUMOLAB"


def shown(moment: datetime) -> str:
    return moment.astimezone(ZoneInfo("Asia/Tokyo")).strftime("%Y-%m-%d %H:%M JST")


def text_of(view: dict[str, Any]) -> str:
    parts: list[str] = []
    for block in view["blocks"]:
        if isinstance(block.get("text"), dict):
            parts.append(block["text"]["text"])
        for element in block.get("elements", []):
            text = element.get("text", "") if isinstance(element, dict) else ""
            parts.append(text["text"] if isinstance(text, dict) else text)
    return "\n".join(parts)


def actions(view: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (e["action_id"], e.get("value", "")) for b in view["blocks"] if b["type"] == "actions" for e in b["elements"]
    ]


async def open_home(world: Sandbox, user: str) -> dict[str, Any]:
    before = world.slack.home_views.get(user, {}).get("id")
    response = await world.slack.open_home(user_id=user)
    assert response.status_code == 200, response.text

    def published() -> dict[str, Any] | None:
        view = world.slack.home_views.get(user)
        return view if view is not None and view["id"] != before else None

    return await wait_for(published, what=f"the Home of {user}")


async def test_an_admin_sees_every_org_in_one_view_within_100_blocks(sandbox: Sandbox) -> None:
    view = await open_home(sandbox, ADMIN)
    text = text_of(view)
    assert len(view["blocks"]) <= 100
    assert "Admin view, every org" in text
    assert f"*{len(sandbox.program.orgs)} orgs*" in text
    for org in sandbox.program.orgs:
        assert f"`{org.id}`" in text
    assert not any(action_id == "launch_open" for action_id, _ in actions(view))


async def test_an_operator_a_viewer_and_an_outsider_each_see_their_own_home(sandbox: Sandbox) -> None:
    alice, bob, guest = [await open_home(sandbox, user) for user in (ALICE, BOB, GUEST)]
    for view in (alice, bob):
        text = text_of(view)
        assert "Pitcrew · Kumo Labs" in text and "hoshi" not in text and len(view["blocks"]) <= 100
    assert "your role: operator" in text_of(alice) and "your role: viewer" in text_of(bob)
    assert actions(alice) == [
        ("launch_open", "kumo-labs"),
        ("track_add", "kumo-labs"),
        ("home_open_alerts", "kumo-labs"),
    ]
    assert actions(bob) == [("home_open_alerts", "kumo-labs")]  # no form a viewer could not submit
    text = text_of(guest)
    assert "Pitcrew watches the accelerator clusters" in text and "not a member of any org" in text
    assert f"<@{ADMIN}>" in text and "kumo" not in text and not actions(guest)


async def test_home_is_published_again_after_a_sweep_and_a_record_changed_what_it_shows(sandbox: Sandbox) -> None:
    home = sandbox.pitcrew.services.home
    assert home is not None
    home.delay = 0.0  # the debounce itself is tested with an injected clock (tests/home/test_refresh.py)
    first = await open_home(sandbox, ALICE)
    assert "No clusters seen yet." in text_of(first)

    await sandbox.pitcrew.services.monitor.sweep()  # the node sweep: the clusters table and their health
    await home.settled()
    swept = sandbox.slack.home_views[ALICE]
    assert swept["id"] != first["id"]
    assert "`kumo-p5-dev` (pcluster)" in text_of(swept) and "healthy" in text_of(swept)

    await ask(sandbox, user=ALICE, channel=KUMO, text="incident NCCL timeouts on kumo-p5-train", command="/track")
    await home.settled()
    recorded = sandbox.slack.home_views[ALICE]
    assert recorded["id"] != swept["id"] and "1 open incident" in text_of(recorded)


async def test_open_alerts_lists_the_orgs_open_alerts_and_add_a_record_opens_the_form(sandbox: Sandbox) -> None:
    await sandbox.pitcrew.services.monitor.sweep()  # the seeded failures open their alerts
    await sandbox.pitcrew.services.drain()
    await open_home(sandbox, BOB)
    response = await sandbox.slack.click_home(user_id=BOB, action_id="home_open_alerts")
    assert response.status_code == 200, response.text
    modal = await sandbox.slack.wait_for_view(user_id=BOB, callback_id="home_alerts")
    text = text_of(modal)
    assert "Kumo Labs:" in text and "open alert" in text and "hoshi" not in text

    await open_home(sandbox, ALICE)
    response = await sandbox.slack.click_home(user_id=ALICE, action_id="track_add")
    assert response.status_code == 200, response.text
    form = await sandbox.slack.wait_for_view(user_id=ALICE, callback_id="track_add_record")
    assert form["type"] == "modal"
    await sandbox.slack.close_view(user_id=ALICE, view_id=form["id"])

    response = await sandbox.slack.click_home(user_id=ALICE, action_id="launch_open")  # B's launch form
    assert response.status_code == 200, response.text
    launch = await sandbox.slack.wait_for_view(user_id=ALICE, callback_id="launch_form")
    assert "kumo" in str(launch["private_metadata"]) + str(launch["blocks"])


async def test_open_alerts_of_an_org_one_cannot_see_opens_nothing(sandbox: Sandbox) -> None:
    await open_home(sandbox, BOB)
    before = sandbox.slack.home_views[BOB]["id"]
    response = await sandbox.slack.click_home(user_id=BOB, action_id="home_open_alerts", value="hoshi-vision")
    assert response.status_code == 200
    await wait_for(lambda: sandbox.slack.home_views[BOB]["id"] != before, what="Bob's Home published again")
    assert not list(sandbox.slack.user_views(BOB)), "no modal for an org Bob cannot see"
    assert "hoshi" not in text_of(sandbox.slack.home_views[BOB])
    services = sandbox.pitcrew.services
    await services.drain()
    entries = await services.audit_entries(org_id=None, since=datetime.now(UTC) - timedelta(hours=1), user_id=BOB)
    assert [(e.command, e.outcome, e.org_id) for e in entries] == [("home open alerts", "refused", "hoshi-vision")]


async def test_track_show_all_gives_an_admin_every_orgs_usage_against_quota_in_one_reply(sandbox: Sandbox) -> None:
    await sandbox.pitcrew.services.monitor.sweep()  # cluster states: what each org holds from now on
    reply = await ask(sandbox, user=ADMIN, channel=COORDINATION, text="show all", command="/track")
    text = body(reply)
    assert reply.kind == "ephemeral" and len(reply.blocks) <= 50
    assert f"Usage against quota · {len(sandbox.program.orgs)} orgs · last 4 weeks" in text
    for org in sandbox.program.orgs:
        assert f"(`{org.id}`)" in text
    assert "p5.48xlarge" in text and "quota-hours" in text
    weeks = body(await ask(sandbox, user=ADMIN, channel=COORDINATION, text="show all --weeks 1", command="/track"))
    assert "last 1 week" in weeks

    refused = body(await ask(sandbox, user=ALICE, channel=KUMO, text="show all", command="/track"))
    assert "Only program admins see every org's usage" in refused and "hoshi" not in refused
    bad = body(await ask(sandbox, user=ADMIN, channel=COORDINATION, text="show all kumo-labs", command="/track"))
    assert "takes at most one org, or `all`" in bad


async def test_the_console_opens_home_and_clicks_its_buttons_as_slack_would(sandbox: Sandbox) -> None:
    """`make run`'s page: showing the Home tab sends app_home_opened; a Home button is a click from a view."""
    async with httpx.AsyncClient(base_url=sandbox.world_url, timeout=30) as http:
        opened = await http.post("/console/home-opened", json={"user_id": BOB})
        assert opened.json()["status"] == 200, opened.text
        await wait_for(lambda: sandbox.slack.home_views.get(BOB), what="Bob's Home")
        state = (await http.get("/console/state", params={"user": BOB})).json()
        assert "Pitcrew · Kumo Labs" in text_of(state["home"])
        page = await http.get("/")
        assert "/console/home-opened" in page.text
        clicked = await http.post(
            "/console/action",
            json={"user_id": BOB, "channel": "home", "ts": "", "action_id": "home_open_alerts", "value": "kumo-labs"},
        )
        assert clicked.json()["status"] == 200, clicked.text
    await sandbox.slack.wait_for_view(user_id=BOB, callback_id="home_alerts")
    async with httpx.AsyncClient(base_url=sandbox.world_url, timeout=30) as http:
        nobody = await http.post("/console/home-opened", json={"user_id": "U0NOBODY1"})
    assert nobody.status_code == 404


async def test_the_sandboxs_home_shows_the_capacity_block_ending_tomorrow_and_the_idle_cluster(
    sandbox: Sandbox, seeded_aws: SeededAws
) -> None:
    """The seeded world (sandbox.seed, sandbox.reserved): kumo-labs' Capacity Block under kumo-p5-dev ends
    tomorrow, and kumo-p5-dev runs no job; after 2 h without one (the monitors' clock moved on, as in
    tests/scenarios/test_idle.py) its idle notice is open, and both are on the admin's and the operator's Home."""
    block = next(r for r in seeded_aws.report.reserved if r.source == "capacity_block")
    services = sandbox.pitcrew.services
    services.alerts.clock = lambda: datetime.now(UTC) + timedelta(hours=3)  # the node monitor's and idle check's
    await services.monitor.sweep()
    await services.drain()
    for user in (ADMIN, ALICE):
        view = await open_home(sandbox, user)
        text = text_of(view)
        assert len(view["blocks"]) <= 100
        assert f"*{block.id}* (EC2 Capacity Block for ML) 4 x p5.48xlarge ends " in text
        assert "takes `kumo-p5-dev` compute-gpu: 4 nodes" in text
        assert re.search(r":zzz: 4 x p5\.48xlarge idle on `kumo-p5-dev`", text), text
        assert "Quota held: p5.48xlarge 36/40" in text  # kumo-p5-dev's 4 and kumo-p5-train's 32 (ml.p5)
    admin = text_of(sandbox.slack.home_views[ADMIN])
    assert "*Kumo Labs* (`kumo-labs`)" in admin and "1 reservation ending in 48 h" in admin
    assert "hoshi-vision-p5-plan" not in admin  # the training plan ends in 6 days: not within 48 h


async def test_add_a_record_pressed_from_home_by_a_viewer_is_refused_in_their_dm(sandbox: Sandbox) -> None:
    """A click in the Home tab has no response URL: the refusal goes to the viewer's DM with Pitcrew, and no
    form opens. A viewer's Home has no such button; a Home published while Bob was still an operator would
    (here: Alice's view, shown to Bob)."""
    await open_home(sandbox, BOB)
    sandbox.slack.home_views[BOB]["blocks"] = (await open_home(sandbox, ALICE))["blocks"]
    response = await sandbox.slack.click_home(user_id=BOB, action_id="track_add", value="kumo-labs")
    assert response.status_code == 200, response.text
    dm = sandbox.slack._dm_id(BOB)

    def refusal() -> str | None:
        texts = [m.text for m in sandbox.slack.channel_messages(dm, visible_to=BOB)]
        return next((t for t in texts if "read tracking records" in t), None)

    assert "not write them" in await wait_for(refusal, what="the refusal in Bob's DM")
    assert not [v for v in sandbox.slack.open_views.values() if v.get("callback_id") == "track_add_record"]


async def test_open_alerts_names_a_capacity_notice_by_its_reservation_and_its_end(
    sandbox: Sandbox, seeded_aws: SeededAws
) -> None:
    """A capacity notice's key ("24h@<epoch>") and its failing_since (the end to come) are bookkeeping: the modal
    names the reservation, says when it ends and when the notice came, never "since" a time still ahead."""
    block = next(r for r in seeded_aws.report.reserved if r.source == "capacity_block")
    services = sandbox.pitcrew.services
    at = block.end - timedelta(hours=23)
    desk = AlertDesk(
        db=services.db, poster=services.poster, program=services.program, presenter=SlackAlerts(), clock=lambda: at
    )
    assert services.capacity is not None
    assert (await CapacityMonitor(desk=desk, capacity=services.capacity, clock=lambda: at).check()).posted == 1
    await open_home(sandbox, BOB)
    response = await sandbox.slack.click_home(user_id=BOB, action_id="home_open_alerts")
    assert response.status_code == 200, response.text
    text = text_of(await sandbox.slack.wait_for_view(user_id=BOB, callback_id="home_alerts"))
    assert "@" not in text and "24h" not in text, text
    line = next(line for line in text.splitlines() if "reserved capacity" in line)
    assert f"`{block.id}`" in line, line
    assert f"ends {shown(block.end)}" in line and f"noticed {shown(at)}" in line, line
    assert "since" not in line, line


async def test_a_members_last_digest_link_opens_their_own_orgs_post_and_an_admins_the_summary(
    sandbox: Sandbox,
) -> None:
    """The coordination channel's thread holds every org's section: a member's Home links their org's own post
    in its channel; an admin's links the program summary."""
    response = await sandbox.slack.send_command(user_id=ADMIN, channel_id=COORDINATION, command="/digest", text="send")
    assert response.status_code == 200, response.text
    await sandbox.slack.wait_for(lambda m: m.ephemeral_to == ADMIN and "posted" in m.text, timeout=30)
    kumo_post = next(
        m for m in sandbox.slack.channel_messages(KUMO) if m.thread_ts is None and m.user == sandbox.slack.bot_user_id
    )
    summary = next(
        m
        for m in sandbox.slack.channel_messages(COORDINATION)
        if m.thread_ts is None and m.ephemeral_to is None and "Weekly digest" in m.text
    )
    for user in (ALICE, BOB):
        text = text_of(await open_home(sandbox, user))
        assert f"#channel={KUMO}&ts={kumo_post.ts}|" in text, text
        assert f"#channel={COORDINATION}" not in text, text
    admin = text_of(await open_home(sandbox, ADMIN))
    assert f"#channel={COORDINATION}&ts={summary.ts}|" in admin, admin
