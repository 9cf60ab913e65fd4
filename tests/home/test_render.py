"""The Home's render and facts, pure: each role's view, Slack's limits (100 blocks, 3000 characters a
section, 150 a header) for any number of orgs, and reserved capacity ending within 48 h."""

from __future__ import annotations

import string
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.capacity.model import Reservation
from bot.home.facts import (
    AlertLine,
    ClusterLine,
    HomeFacts,
    IdleLine,
    OrgHome,
    QuotaLine,
    Viewer,
    ending_soon,
    quota_lines,
)
from bot.home.render import LAUNCH_ACTION, MAX_HOME_BLOCKS, OPEN_ALERTS_ACTION, alerts_modal, home_view

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
TZ = ZoneInfo("Asia/Tokyo")


def reservation(key: str, *, end: datetime | None, status: str = "active", org: str = "kumo") -> Reservation:
    return Reservation(
        org_id=org,
        source="capacity_block",
        id=key,
        name=key,
        instance_type="p5.48xlarge",
        total=4,
        available=0,
        start=NOW - timedelta(days=1),
        end=end,
        status=status,
        clusters=(("kumo-p5-dev", "compute-gpu", 4),),
    )


def text_of(view: dict[str, Any]) -> str:
    parts = []
    for block in view["blocks"]:
        if isinstance(block.get("text"), dict):
            parts.append(block["text"]["text"])
        parts += [e["text"] if isinstance(e["text"], str) else e["text"]["text"] for e in block.get("elements", [])]
    return "\n".join(parts)


def within_slack_limits(view: dict[str, Any]) -> None:
    assert len(view["blocks"]) <= MAX_HOME_BLOCKS
    for block in view["blocks"]:
        if block["type"] == "header":
            assert len(block["text"]["text"]) <= 150
        if block["type"] in ("section", "context"):
            texts = [block["text"]["text"]] if "text" in block else []
            texts += [e["text"] for e in block.get("elements", [])]
            assert all(0 < len(t) <= 3000 for t in texts)


def busy_org(org_id: str, name: str, n: int = 0) -> OrgHome:
    return OrgHome(
        org_id=org_id,
        name=name,
        channel="C0KUMOLAB",
        clusters=tuple(
            ClusterLine("pcluster", f"c{i}", "CREATE_COMPLETE", 3, 4, (("p5.48xlarge", 4),), unhealthy=1)
            for i in range(n)
        ),
        alerts={"node": 2, "idle": 1},
        incidents=1,
        quota=(QuotaLine("p5.48xlarge", 12, 16),),
        ending=(reservation("cr-0123", end=NOW + timedelta(hours=20)),),
        idle=(IdleLine("kumo-p5-dev", "p5.48xlarge", 12, NOW - timedelta(hours=6)),),
    )


def test_an_org_needing_a_look_shows_its_clusters_alerts_quota_ending_capacity_and_idle_nodes() -> None:
    facts = HomeFacts(
        viewer=Viewer.ADMIN, user_id="U0ADMIN01", now=NOW, orgs=(busy_org("kumo", "Kumo", 2),), program="P"
    )
    text = text_of(home_view(facts, tz=TZ))
    assert ":red_circle: `c0` (pcluster) 3/4 nodes healthy, 1 unhealthy · p5.48xlarge x4" in text
    assert "3 open alerts (1 idle, 2 node) · 1 open incident" in text
    assert "Quota held: p5.48xlarge 12/16" in text
    assert "*cr-0123* (EC2 Capacity Block for ML) 4 x p5.48xlarge ends 2026-12-03 17:00 JST" in text
    assert "takes `kumo-p5-dev` compute-gpu: 4 nodes" in text
    assert ":zzz: 12 x p5.48xlarge idle on `kumo-p5-dev` for 6 h" in text


def test_an_operator_gets_launch_add_a_record_and_open_alerts_a_viewer_only_open_alerts() -> None:
    for role, expected in (
        ("operator", [LAUNCH_ACTION, "track_add", OPEN_ALERTS_ACTION]),
        ("viewer", [OPEN_ALERTS_ACTION]),
    ):
        facts = HomeFacts(
            viewer=Viewer.MEMBER, user_id="U1", now=NOW, orgs=(busy_org("kumo", "Kumo"),), roles={"kumo": role}
        )
        view = home_view(facts, tz=TZ)
        buttons = [e for b in view["blocks"] if b["type"] == "actions" for e in b["elements"]]
        assert [b["action_id"] for b in buttons] == expected
        assert {b["value"] for b in buttons} == {"kumo"}
        assert f"your role: {role}" in text_of(view)


def test_an_outsider_is_told_what_pitcrew_is_and_whom_to_ask() -> None:
    facts = HomeFacts(viewer=Viewer.OUTSIDER, user_id="U9", now=NOW, program="GENIAC", admins=("U0A", "U0B"))
    view = home_view(facts, tz=TZ)
    text = text_of(view)
    assert "Pitcrew watches the accelerator clusters" in text
    assert "not a member of any org" in text and "<@U0A>, <@U0B>" in text
    assert not [b for b in view["blocks"] if b["type"] == "actions"]


def test_capacity_that_could_not_be_read_is_one_line() -> None:
    org = OrgHome(org_id="kumo", name="Kumo", capacity_error="AccessDenied")
    facts = HomeFacts(viewer=Viewer.MEMBER, user_id="U1", now=NOW, orgs=(org,), roles={"kumo": "viewer"})
    text = text_of(home_view(facts, tz=TZ))
    assert text.count("Reserved capacity could not be read.") == 1
    assert "AccessDenied" not in text
    admin = HomeFacts(viewer=Viewer.ADMIN, user_id="U0", now=NOW, orgs=(org, OrgHome(org_id="fuji", name="Fuji")))
    text = text_of(home_view(admin, tz=TZ))
    assert text.count("Reserved capacity could not be read.") == 1, "an org it failed for is not among the quiet"
    assert "*Quiet* (1)" in text


ORG_IDS = st.from_regex(r"[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?", fullmatch=True)
NAMES = st.text(alphabet=string.ascii_letters + " *_~<>&`|日本語", min_size=1, max_size=80)


@settings(max_examples=40, deadline=None)
@given(
    orgs=st.lists(
        st.tuples(ORG_IDS, NAMES, st.booleans(), st.integers(0, 40)), min_size=0, max_size=130, unique_by=lambda t: t[0]
    )
)
def test_any_number_of_orgs_fits_in_100_blocks_and_none_is_left_unsaid(orgs: list[tuple[str, str, bool, int]]) -> None:
    homes = tuple(busy_org(o, n, k) if busy else OrgHome(org_id=o, name=n) for o, n, busy, k in orgs)
    facts = HomeFacts(viewer=Viewer.ADMIN, user_id="U0ADMIN01", now=NOW, orgs=homes, program="P")
    view = home_view(facts, tz=TZ)
    within_slack_limits(view)
    text = text_of(view)
    assert f"*{len(homes)} org" in text
    shown_busy = text.count("open alerts (1 idle, 2 node)")
    busy = sum(1 for _, _, b, _ in orgs if b)
    if shown_busy < busy:  # the rest are said to be left out, with how many
        assert f"and {busy - shown_busy} more org" in text


def test_100_busy_orgs_show_as_many_as_fit_and_name_the_rest() -> None:
    homes = tuple(busy_org(f"org-{i:03}", f"Org {i}", 3) for i in range(100))
    view = home_view(HomeFacts(viewer=Viewer.ADMIN, user_id="U0", now=NOW, orgs=homes), tz=TZ)
    within_slack_limits(view)
    text = text_of(view)
    assert "more orgs needing a look" in text
    assert all(f"`org-{i:03}`" in text for i in range(100))


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 12), st.integers(0, 200))
def test_a_member_of_several_busy_orgs_stays_within_100_blocks(orgs: int, clusters: int) -> None:
    homes = tuple(busy_org(f"org-{i}", f"Org {i}", clusters) for i in range(orgs))
    facts = HomeFacts(
        viewer=Viewer.MEMBER, user_id="U1", now=NOW, orgs=homes, roles={h.org_id: "operator" for h in homes}
    )
    within_slack_limits(home_view(facts, tz=TZ))


def test_ending_soon_keeps_live_reservations_ending_in_the_next_48_hours_soonest_first() -> None:
    found = [
        reservation("later", end=NOW + timedelta(hours=47)),
        reservation("soon", end=NOW + timedelta(hours=2)),
        reservation("past", end=NOW - timedelta(minutes=1)),
        reservation("far", end=NOW + timedelta(hours=49)),
        reservation("open-ended", end=None),
        reservation("expired", end=NOW + timedelta(hours=3), status="expired"),
    ]
    assert [r.key for r in ending_soon(found, now=NOW)] == ["soon", "later"]


def test_quota_lines_count_ml_and_ec2_names_of_a_type_together() -> None:
    lines = quota_lines({"ml.p5.48xlarge": 8, "p5.48xlarge": 4, "m5.large": 2}, {"p5.48xlarge": 16})
    assert lines == (QuotaLine("p5.48xlarge", 12, 16),)


def test_the_open_alerts_modal_lists_each_alert_with_its_link() -> None:
    alerts = [
        AlertLine(1, "node", "kumo-p5-dev", "i-0abc", "Unhealthy", NOW, False, "https://x/1"),
        AlertLine(2, "idle", "kumo-p5-dev", "cluster", "", NOW, True, None),
    ]
    view = alerts_modal(org_name="Kumo", alerts=alerts, tz=TZ)
    text = text_of(view)
    assert view["type"] == "modal" and len(view["title"]["text"]) <= 24
    assert "Kumo: 2 open alerts" in text
    assert "node · `kumo-p5-dev` `i-0abc` · Unhealthy · since 2026-12-02 21:00 JST · <https://x/1|open>" in text
    assert "idle · `kumo-p5-dev` · since 2026-12-02 21:00 JST · acknowledged" in text
    assert "No open alerts" in text_of(alerts_modal(org_name="Kumo", alerts=[], tz=TZ))


def test_a_capacity_notice_in_the_open_alerts_modal_says_when_it_ends_not_since() -> None:
    notice = AlertLine(3, "capacity", "cb-kumo", "", "", NOW, False, None, ends=NOW + timedelta(hours=23))
    text = text_of(alerts_modal(org_name="Kumo", alerts=[notice], tz=TZ))
    assert "reserved capacity · `cb-kumo` · ends 2026-12-03 20:00 JST · noticed 2026-12-02 21:00 JST" in text
    assert "since" not in text
