"""Which ending notice a reservation is due (pure), and what a notice keeps of it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from bot.capacity.model import Reservation
from bot.capacity.notices import MAX_MESSAGE, describe, due, read_details

END = datetime(2026, 12, 3, 4, 0, tzinfo=UTC)


def reservation(end: datetime | None = END, clusters: tuple[tuple[str, str, int], ...] = ()) -> Reservation:
    return Reservation(
        org_id="kumo-labs",
        source="capacity_block",
        id="cr-0123456789abcdef0",
        name="cr-0123456789abcdef0",
        instance_type="p5.48xlarge",
        total=4,
        available=0,
        start=END - timedelta(days=14),
        end=end,
        status="active",
        clusters=clusters,
    )


@given(st.integers(min_value=-3 * 24 * 60, max_value=3 * 24 * 60))
def test_the_most_urgent_level_within_its_lead_time_and_none_after_the_end(minutes_left: int) -> None:
    now = END - timedelta(minutes=minutes_left)
    levels = [notice.level for notice in due([reservation()], now)]
    if minutes_left <= 0:
        assert levels == []  # ended: nothing to warn of
    elif minutes_left <= 120:
        assert levels == ["2h"]
    elif minutes_left <= 24 * 60:
        assert levels == ["24h"]
    else:
        assert levels == []


def test_no_notice_for_a_reservation_with_no_end() -> None:
    assert due([reservation(end=None)], END) == []


def test_each_level_of_one_end_has_its_own_key_and_a_later_end_a_new_one() -> None:
    (day,) = due([reservation()], END - timedelta(hours=20))
    (hours,) = due([reservation()], END - timedelta(hours=1))
    (extended,) = due([reservation(end=END + timedelta(hours=1))], END - timedelta(hours=20))
    assert len({day.node_key, hours.node_key, extended.node_key}) == 3
    assert all(len(n.node_key) <= 128 for n in (day, hours, extended))


@given(
    st.lists(
        st.tuples(
            st.text(alphabet="abcdefghij-0123456789", min_size=1, max_size=63),
            st.text(alphabet="abcdefghij-0123456789/", min_size=1, max_size=63),
            st.integers(0, 10_000),
        ),
        max_size=40,
    )
)
def test_what_a_notice_keeps_fits_the_episode_and_reads_back(clusters: list[tuple[str, str, int]]) -> None:
    message = describe(reservation(clusters=tuple(clusters)))
    assert len(message) <= MAX_MESSAGE
    details = read_details(message, fallback_name="x")
    assert list(details.clusters) == clusters[: len(details.clusters)]
    assert len(details.clusters) + details.more == len(clusters)


def test_an_unreadable_message_reads_as_no_known_cluster() -> None:
    details = read_details("not json", fallback_name="cr-1")
    assert details.name == "cr-1" and details.clusters == ()
