"""The job alert's one cause line (bot.monitor.jobs, pure): which node failures may be why a job's trouble
began, and how they sit beside the per-node metrics' verdict."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.monitor.jobs import CAUSE_WINDOW, SEEN_LATE, cause_line, under_way_at
from storage.models import Episode

START = datetime(2026, 12, 1, 0, 50, tzinfo=UTC)  # when the job's anomaly began


def failure(began: datetime, ended: datetime | None = None) -> Episode:
    return Episode(
        org_id="kumo-labs",
        backend="hyperpod",
        cluster_name="kumo-p5-train",
        node_key="i-0abc",
        kind="node",
        state="open" if ended is None else "closed",
        node_ids=["i-0abc"],
        opened_at=began,
        failing_since=began,
        updated_at=ended or began,
        closed_at=ended,
    )


@pytest.mark.parametrize(
    ("began", "ended", "why"),
    [
        (START - timedelta(minutes=2), None, "failing as it began"),
        (START + SEEN_LATE, None, "seen a little after: a failure is seen late"),
        (START - CAUSE_WINDOW, START + timedelta(minutes=3), "failed shortly before, over after the start"),
    ],
)
def test_a_failure_under_way_as_the_anomaly_began_may_be_its_cause(
    began: datetime, ended: datetime | None, why: str
) -> None:
    assert under_way_at(failure(began, ended), START), why


@pytest.mark.parametrize(
    ("began", "ended", "why"),
    [
        (START - timedelta(minutes=35), START - timedelta(minutes=10), "failed and replaced before it began"),
        (START - timedelta(hours=3), None, "failed for hours: the job ran without it"),
        (START + SEEN_LATE + timedelta(seconds=1), None, "failed after it began"),
    ],
)
def test_a_failure_not_under_way_as_it_began_is_not_offered(began: datetime, ended: datetime | None, why: str) -> None:
    assert not under_way_at(failure(began, ended), START), why


def test_the_verdict_comes_first_and_a_failure_is_offered_after_it() -> None:
    verdict = "Likely culprit: `i-0abc`, GPU 3 at 1,210 MHz (thermal)."
    line = cause_line(verdict, names_cause=True, failed=["`i-0def` (failed at 00:51)"])
    assert line == f"{verdict} A node also failed as it began: `i-0def` (failed at 00:51)."
    assert line.count("Likely") == 1
    assert cause_line(verdict, names_cause=True, failed=[]) == verdict


def test_without_a_verdict_naming_a_cause_the_failure_is_the_likely_cause() -> None:
    unnamed = "Per-node metrics name no single node."
    line = cause_line(unnamed, names_cause=False, failed=["`i-0def` (failed at 00:51)"])
    assert line == f"Likely cause: a node failed as it began: `i-0def` (failed at 00:51). {unnamed}"
    assert cause_line("", names_cause=False, failed=[]) == "No node of this cluster failed as it began."
    assert cause_line(unnamed, names_cause=False, failed=[]).count("Likely") == 0
