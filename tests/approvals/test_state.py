"""The approval request's state machine (bot/approvals/state.py): the rules people expect hold for clicks in any
order, by any user, repeated (Hypothesis), at fixed instants."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from bot.approvals.state import Request, Result, Status, Verdict, click, sweep

T0 = datetime(2026, 12, 4, 9, 0, tzinfo=UTC)
TTL = timedelta(minutes=60)
REQUESTER, APPROVERS, OTHERS = "U0ALICE01", ("U0ADMIN01", "U0ADMIN02", "U0ADMIN03"), ("U0BOB0001", "U0HANA001")


def fresh(needed: int = 2) -> Request:
    return Request(requested_by=REQUESTER, needed=needed, expires_at=T0 + TTL)


def test_self_approval_is_refused_and_counts_nothing() -> None:
    after, result = click(fresh(), user=REQUESTER, verdict=Verdict.APPROVE, allowed=True, now=T0)
    assert result is Result.SELF and after == fresh()


def test_a_non_approver_is_refused() -> None:
    after, result = click(fresh(), user="U0BOB0001", verdict=Verdict.APPROVE, allowed=False, now=T0)
    assert result is Result.NOT_APPROVER and after == fresh()


def test_two_distinct_approvals_when_two_are_needed_and_a_repeat_counts_once() -> None:
    one, first = click(fresh(), user=APPROVERS[0], verdict=Verdict.APPROVE, allowed=True, now=T0)
    again, repeated = click(one, user=APPROVERS[0], verdict=Verdict.APPROVE, allowed=True, now=T0)
    two, last = click(again, user=APPROVERS[1], verdict=Verdict.APPROVE, allowed=True, now=T0)
    assert (first, repeated, last) == (Result.COUNTED, Result.REPEATED, Result.APPROVED)
    assert two.status is Status.APPROVED and two.approvals == APPROVERS[:2]


def test_a_reject_ends_it_with_its_reason() -> None:
    after, result = click(
        fresh(), user=APPROVERS[0], verdict=Verdict.REJECT, allowed=True, now=T0, reason="too big for now"
    )
    assert result is Result.REJECTED and after.status is Status.REJECTED
    assert (after.rejected_by, after.reason) == (APPROVERS[0], "too big for now")
    closed, late = click(after, user=APPROVERS[1], verdict=Verdict.APPROVE, allowed=True, now=T0)
    assert late is Result.CLOSED and closed == after


def test_expiry_at_click_time_and_by_the_sweep() -> None:
    at_expiry = T0 + TTL
    after, result = click(fresh(1), user=APPROVERS[0], verdict=Verdict.APPROVE, allowed=True, now=at_expiry)
    assert result is Result.EXPIRED and after.status is Status.EXPIRED and after.approvals == ()
    swept, ended = sweep(fresh(), now=at_expiry - timedelta(seconds=1))
    assert not ended and swept.status is Status.PENDING
    swept, ended = sweep(fresh(), now=at_expiry)
    assert ended and swept.status is Status.EXPIRED


clicks = st.lists(
    st.tuples(
        st.sampled_from((REQUESTER, *APPROVERS, *OTHERS)),
        st.sampled_from(tuple(Verdict)),
        st.integers(min_value=0, max_value=90),  # minutes after the request
    ),
    max_size=25,
)


@given(clicks=clicks, needed=st.integers(min_value=1, max_value=3))
def test_any_clicks_in_any_order(clicks: list[tuple[str, Verdict, int]], needed: int) -> None:
    request = fresh(needed)
    approved_results = 0
    minutes_so_far = 0
    for user, verdict, minutes in clicks:
        minutes_so_far = max(minutes_so_far, minutes)  # time moves forward only
        now = T0 + timedelta(minutes=minutes_so_far)
        before = request
        request, result = click(request, user=user, verdict=verdict, allowed=user in APPROVERS, now=now)
        approved_results += result is Result.APPROVED
        if before.status is not Status.PENDING:
            assert result is Result.CLOSED and request == before  # a decided request never changes again
        if result in (Result.SELF, Result.NOT_APPROVER, Result.REPEATED, Result.CLOSED):
            assert request == before  # refused or repeated clicks change nothing
        # Only allowed approvers ever count, never the requester, each once.
        assert REQUESTER not in request.approvals and set(request.approvals) <= set(APPROVERS)
        assert len(request.approvals) == len(set(request.approvals))
        assert request.rejected_by in (None, *APPROVERS)
        if result is Result.APPROVED:  # approved by this click: before its expiry, by `needed` approvers
            assert len(request.approvals) == needed and now < request.expires_at
        if request.status is Status.APPROVED:
            assert len(request.approvals) == needed
        if request.status is Status.PENDING:
            assert len(request.approvals) < needed and now < request.expires_at
    assert approved_results <= 1, "the change is approved (and so runs) at most once"
