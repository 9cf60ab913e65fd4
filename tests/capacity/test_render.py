"""The capacity replies within Slack's limits whatever the numbers: the listing of many orgs and reservations,
a notice naming many clusters; text fallbacks always present; AWS text escaped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.capacity.model import Reservation
from bot.capacity.notices import describe
from bot.capacity.service import OrgReservations
from bot.slack.capacity import capacity_alert, capacity_list
from storage.models import Episode

NOW = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)
TOKYO = ZoneInfo("Asia/Tokyo")
names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-<>&*_`", min_size=1, max_size=63)


def reservation(org: str, i: int, clusters: list[tuple[str, str, int]]) -> Reservation:
    return Reservation(
        org_id=org,
        source="capacity_block" if i % 2 else "training_plan",
        id=f"cr-{i:017x}",
        name=f"plan-{i}",
        instance_type="p5.48xlarge",
        total=16,
        available=i % 3,
        start=NOW - timedelta(days=1),
        end=NOW + timedelta(hours=i),
        status="active",
        clusters=tuple(clusters),
    )


def check(blocks: list[dict[str, object]]) -> None:
    assert len(blocks) <= 50
    for block in blocks:
        text = block.get("text")
        if isinstance(text, dict):
            assert len(text["text"]) <= 3000


@settings(max_examples=30, deadline=None)
@given(
    orgs=st.integers(1, 14),
    per_org=st.integers(0, 12),
    clusters=st.lists(st.tuples(names, names, st.integers(0, 999)), max_size=12),
)
def test_the_listing_stays_within_slacks_limits(orgs: int, per_org: int, clusters: list[tuple[str, str, int]]) -> None:
    results = [
        OrgReservations(f"org-{o}", tuple(reservation(f"org-{o}", i, clusters) for i in range(per_org)))
        for o in range(orgs)
    ]
    reply = capacity_list(results, org_names={r.org_id: r.org_id for r in results}, tz=TOKYO, now=NOW)
    check(reply.blocks)
    assert reply.text and len(reply.text) <= 3000


@settings(max_examples=30, deadline=None)
@given(clusters=st.lists(st.tuples(names, names, st.integers(0, 9999)), max_size=60))
def test_a_notice_naming_many_clusters_stays_within_slacks_limits(clusters: list[tuple[str, str, int]]) -> None:
    r = reservation("kumo-labs", 1, clusters)
    episode = Episode(
        id=7,
        org_id="kumo-labs",
        backend="capacity",
        cluster_name=r.key,
        node_key="24h@1",
        kind="capacity",
        state="open",
        group_name=r.source,
        instance_type=r.instance_type,
        status="24h",
        message=describe(r),
        opened_at=NOW,
        failing_since=r.end,
        updated_at=NOW,
    )
    reply = capacity_alert(episode, org_name="Kumo Labs", tz=TOKYO, now=NOW, buttons=None, footer=["Episode #7"])
    check(reply.blocks)
    assert reply.text and "Checkpoint now" in reply.text


def test_aws_and_cluster_names_are_escaped() -> None:
    r = reservation("kumo-labs", 1, [("a<b>&c", "q<@U1>", 3)])
    reply = capacity_list([OrgReservations("kumo-labs", (r,))], org_names={"kumo-labs": "K"}, tz=TOKYO, now=NOW)
    shown = str(reply.blocks)
    assert "a&lt;b&gt;&amp;c" in shown and "a<b>" not in shown and "<@U1>" not in shown


def test_the_listing_says_when_a_reservation_started_or_starts() -> None:
    """Issue 21: `/cluster capacity` showed no start time for a reservation already under way."""
    begun = reservation("kumo-labs", 1, [])  # started a day before NOW
    coming = Reservation(**{**begun.__dict__, "id": "cr-later", "name": "later", "start": NOW + timedelta(days=2)})
    reply = capacity_list([OrgReservations("kumo-labs", (begun, coming))], org_names={}, tz=TOKYO, now=NOW)
    shown = str(reply.blocks)
    assert "started 2026-12-01 12:00 JST · ends 2026-12-02 13:00 JST" in shown
    assert "from 2026-12-04 12:00 JST · ends" in shown
