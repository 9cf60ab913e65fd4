from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from bot.digest.compute import (
    NO_STATES_NOTE,
    accelerators,
    build_digest,
    daily_hours,
    format_duration,
    history,
    holdings_at,
    instance_hours,
    org_section,
    quota_bar,
    quota_levels,
    summarize_failures,
    tracking_doc,
    usage_lines,
)
from bot.digest.facts import (
    Change,
    ClusterAtEnd,
    ClusterNow,
    Failure,
    JobRate,
    OrgFacts,
    Record,
    RecordKind,
    Requirement,
    Stall,
    StateChange,
    UsageLine,
)
from bot.digest.weeks import parse_week

TOKYO = ZoneInfo("Asia/Tokyo")
WEEK = parse_week("2026-W48", TOKYO)  # Monday 2026-11-23 00:00 JST = 2026-11-22 15:00 UTC, 168 h
START, END = WEEK.start, WEEK.end
ORG = "kumo-labs"


def h(hours: float) -> datetime:
    """An instant `hours` after the start of WEEK."""
    return START + timedelta(hours=hours)


def state(cluster: str, instance_type: str, count: int, at: datetime, backend: str = "hyperpod") -> StateChange:
    return StateChange(ORG, backend, cluster, instance_type, count, at)


def record(number: int, kind: RecordKind, at: datetime, text: str = "", org: str = ORG) -> Record:
    return Record(number, org, kind, text or f"{kind.value} {number}", created_by="U1", created_at=at)


def failure(
    cluster: str, instance_type: str, opened: datetime, closed: datetime | None, lost: float, kind: str = "node"
) -> Failure:
    return Failure(ORG, "hyperpod", cluster, kind, instance_type, opened, closed, lost)


def stall(job: str, opened: datetime, closed: datetime | None, status: str = "stall") -> Stall:
    return Stall(ORG, "cluster-b", job, status, opened, closed)


def facts(**kwargs: object) -> OrgFacts:
    base: dict[str, object] = {
        "org_id": ORG,
        "name": "Kumo Labs",
        "channel": "C123",
        "quota": {},
        "since": START,
        "until": END,
    }
    base.update(kwargs)
    return OrgFacts(**base)  # type: ignore[arg-type]


# cluster-a: p5 4 before the week, 6 from +24 h, deleted at +48 h; a head node all along.
# cluster-b: 2 trn1 from +100 h. Changes before the window that were superseded, and one after it, count nothing.
CHANGES = (
    state("cluster-a", "p5.48xlarge", 2, h(-120)),
    state("cluster-a", "p5.48xlarge", 4, h(-48)),
    state("cluster-a", "m5.xlarge", 1, h(-48)),
    state("cluster-a", "p5.48xlarge", 6, h(24)),
    state("cluster-a", "p5.48xlarge", 0, h(48)),
    state("cluster-b", "trn1.32xlarge", 2, h(100)),
    state("cluster-b", "trn1.32xlarge", 10, h(170)),
)


# -------------------------------------------------------------------------------------------------- basics


def test_accelerators() -> None:
    assert accelerators("p5.48xlarge") == 8
    assert accelerators("ml.p5.48xlarge") == 8
    assert accelerators("trn1.32xlarge") == 16
    assert accelerators("inf2.48xlarge") == 12
    assert accelerators("ml.m5.xlarge") == 0
    assert accelerators("") == 0


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (timedelta(0), "0 min"),
        (timedelta(minutes=45), "45 min"),
        (timedelta(minutes=59, seconds=40), "1 h"),
        (timedelta(hours=1, minutes=20), "1 h 20 min"),
        (timedelta(hours=23, minutes=59), "23 h 59 min"),
        (timedelta(days=2, hours=3, minutes=10), "2 d 3 h"),
        (timedelta(days=1), "1 d"),
        (timedelta(minutes=-5), "0 min"),
    ],
)
def test_format_duration(delta: timedelta, text: str) -> None:
    assert format_duration(delta) == text


# --------------------------------------------------------------------------------------------- instance-hours


def test_instance_hours() -> None:
    assert instance_hours(CHANGES, START, END) == {
        "m5.xlarge": 168.0,
        "p5.48xlarge": 4 * 24 + 6 * 24,
        "trn1.32xlarge": 2 * 68,
    }
    # A window that ends before cluster-b exists and starts after the deletion.
    assert instance_hours(CHANGES, h(48), h(100)) == {"m5.xlarge": 52.0}
    assert instance_hours((), START, END) == {}


def test_instance_hours_sums_clusters_and_ignores_order() -> None:
    changes = (
        state("c2", "p5.48xlarge", 3, h(10)),
        state("c1", "p5.48xlarge", 1, h(0)),
        state("c1", "p5.48xlarge", 0, h(5)),
        state("c2", "p5.48xlarge", 3, h(-1), backend="parallelcluster"),  # another backend: its own step function
    )
    assert instance_hours(changes, START, h(20)) == {"p5.48xlarge": 5 + 30 + 60}


def test_daily_hours_sum_to_the_week() -> None:
    days = daily_hours(CHANGES, WEEK)
    assert [d for d, _ in days] == [date(2026, 11, 23) + timedelta(days=n) for n in range(7)]
    assert days[0][1] == {"m5.xlarge": 24.0, "p5.48xlarge": 96.0}
    assert days[1][1] == {"m5.xlarge": 24.0, "p5.48xlarge": 144.0}
    assert days[2][1] == {"m5.xlarge": 24.0}
    assert days[4][1] == {"m5.xlarge": 24.0, "trn1.32xlarge": 40.0}  # from Friday 04:00 JST
    total: dict[str, float] = {}
    for _, hours in days:
        for instance_type, value in hours.items():
            total[instance_type] = total.get(instance_type, 0) + value
    assert total == instance_hours(CHANGES, START, END)


def test_daily_hours_on_a_dst_week() -> None:
    new_york = ZoneInfo("America/New_York")
    week = parse_week("2026-W10", new_york)
    changes = (StateChange(ORG, "hyperpod", "c", "p5.48xlarge", 1, week.start - timedelta(days=1)),)
    days = daily_hours(changes, week)
    assert [hours["p5.48xlarge"] for _, hours in days] == [24, 24, 24, 24, 24, 24, 23]
    assert days[-1][0] == date(2026, 3, 8)
    assert instance_hours(changes, week.start, week.end) == {"p5.48xlarge": 167.0}


def test_holdings_at() -> None:
    assert holdings_at(CHANGES, h(30)) == (ClusterAtEnd("hyperpod", "cluster-a", {"m5.xlarge": 1, "p5.48xlarge": 6}),)
    # At the change itself the new count holds; a deleted type is dropped.
    assert holdings_at(CHANGES, h(100)) == (
        ClusterAtEnd("hyperpod", "cluster-a", {"m5.xlarge": 1}),
        ClusterAtEnd("hyperpod", "cluster-b", {"trn1.32xlarge": 2}),
    )
    deleted = (*CHANGES, state("cluster-a", "m5.xlarge", 0, h(120)))
    assert holdings_at(deleted, h(130)) == (ClusterAtEnd("hyperpod", "cluster-b", {"trn1.32xlarge": 2}),)
    assert holdings_at(CHANGES, h(-200)) == ()


# ------------------------------------------------------------------------------------------------- quota


def test_usage_lines() -> None:
    hours = {"p5.48xlarge": 240.0, "trn1.32xlarge": 136.0, "m5.xlarge": 168.0}
    quota = {"ml.p5.48xlarge": 8, "trn1.32xlarge": 0, "p4d.24xlarge": 2}
    assert usage_lines(hours, quota=quota, window_hours=168) == (
        UsageLine("p4d.24xlarge", 0.0, 2, 336.0, 0.0),
        UsageLine("p5.48xlarge", 240.0, 8, 1344.0, pytest.approx(240 / 1344)),  # type: ignore[arg-type]
        UsageLine("trn1.32xlarge", 136.0, 0, 0.0, None),
        UsageLine("m5.xlarge", 168.0, None, None, None),
    )
    assert usage_lines({}, quota={}, window_hours=168) == ()


def test_the_quota_bar_sets_only_types_under_quota_against_their_quota_hours() -> None:
    """Issue 21: head and controller node hours set against P5-only quota-hours drew an org at 97 % over."""
    usage = (
        UsageLine("p5.48xlarge", 0.97 * 1344, 8, 1344.0, 0.97),
        UsageLine("trn1.32xlarge", 0.0, 0, 0.0, None),  # a quota of 0: no hours to set against
        UsageLine("m5.12xlarge", 168.0, None, None, None),  # the controller
        UsageLine("m5.xlarge", 336.0, None, None, None),  # head and login nodes
    )
    bar = quota_bar(usage)
    assert bar.types == ("p5.48xlarge",) and bar.quota == 8
    assert bar.instance_hours == pytest.approx(0.97 * 1344) and bar.quota_hours == 1344.0
    assert bar.instance_hours <= bar.quota_hours, "not over quota"
    unlimited = quota_bar((UsageLine("m5.xlarge", 10.0, None, None, None),))
    assert (unlimited.types, unlimited.instance_hours, unlimited.quota_hours) == (("m5.xlarge",), 10.0, None)


def test_quota_levels() -> None:
    quota = {
        "ml.p5.48xlarge": 10,
        "trn1.32xlarge": 5,
        "p4d.24xlarge": 4,
        "trn2.48xlarge": 100,
        "p4de.24xlarge": 3,
        "g5.48xlarge": 0,
    }
    held = {"p5.48xlarge": 8, "ml.trn1.32xlarge": 5, "p4d.24xlarge": 5, "trn2.48xlarge": 79}
    assert quota_levels(held, quota) == {
        "p4d.24xlarge": 100,  # over
        "p4de.24xlarge": 0,  # not held
        "p5.48xlarge": 80,  # exactly 80%
        "trn1.32xlarge": 100,  # exactly 100%
        "trn2.48xlarge": 0,  # 79%
    }


# ----------------------------------------------------------------------------------------------- failures

FAILURES = (
    failure("cluster-a", "p5.48xlarge", h(10), h(10) + timedelta(minutes=80), 1.5),
    failure("cluster-a", "p5.48xlarge", h(50), h(52), 2.0),
    failure("cluster-b", "trn1.32xlarge", h(60), None, 3.0),  # still open
    failure("cluster-b", "trn1.32xlarge", h(-5), h(1), 6.0),  # opened last week, recovered in this one
    failure("cluster-a", "", h(-10), None, 10.0, kind="cluster"),  # open all week: not counted, still open
    failure("cluster-a", "p5.48xlarge", h(169), None, 1.0),  # next week
)


def test_summarize_failures() -> None:
    summary = summarize_failures(FAILURES, since=START, until=END)
    assert summary.count == 3
    assert summary.recovered == 3
    assert summary.mean_time_to_recovery == timedelta(minutes=(80 + 120 + 360) / 3)
    assert summary.node_hours_lost == 12.5
    assert summary.gpu_hours_lost == 1.5 * 8 + 2.0 * 8 + 3.0 * 16 + 6.0 * 16  # 172
    assert summary.still_open == 2
    assert summary.repeated == ("cluster-a",)


def test_summarize_no_failures() -> None:
    summary = summarize_failures((), since=START, until=END)
    assert (summary.count, summary.recovered, summary.mean_time_to_recovery) == (0, 0, None)
    assert (summary.node_hours_lost, summary.gpu_hours_lost, summary.still_open, summary.repeated) == (0, 0, 0, ())


def test_failure_closed_at_the_end_is_still_open() -> None:
    summary = summarize_failures((failure("c", "p5.48xlarge", h(100), END, 1.0),), since=START, until=END)
    assert (summary.count, summary.recovered, summary.still_open) == (1, 0, 1)


# ------------------------------------------------------------------------------------------------ sections


def busy_facts() -> OrgFacts:
    return facts(
        quota={"ml.p5.48xlarge": 1, "trn1.32xlarge": 4},  # p5 quota lowered below what was held
        changes=CHANGES,
        records=(
            record(3, RecordKind.LESSON, h(30)),
            record(1, RecordKind.MILESTONE, h(5)),
            record(2, RecordKind.INCIDENT, h(20)),
            record(4, RecordKind.NOTE, h(40)),
            record(5, RecordKind.REQUIREMENT, h(41), "model_size = 175B (was 70B)"),
        ),
        open_incidents=(record(2, RecordKind.INCIDENT, h(20)), record(9, RecordKind.INCIDENT, h(-100))),
        failures=FAILURES,
        stalls=(
            stall("j1", h(70), h(70.5)),
            stall("j0", h(-3), h(2), status="slowdown"),  # open at the start
            stall("old", h(-10), h(-9)),  # over before the week
            stall("next", h(170), None),
        ),
        rates=(
            JobRate(ORG, "cluster-b", "j2", 90.0, 100.0),
            JobRate(ORG, "cluster-a", "j1", 50.0, None),
            JobRate(ORG, "cluster-a", "j0", 10.0, 0.0),
        ),
        operations=(Change(ORG, "delete", "cluster-a", "done", h(48), "U2", "delete kumo-labs/cluster-a"),),
    )


def test_org_section() -> None:
    section = org_section(busy_facts(), WEEK)
    assert section.clusters == (
        ClusterAtEnd("hyperpod", "cluster-a", {"m5.xlarge": 1}),
        ClusterAtEnd("hyperpod", "cluster-b", {"trn1.32xlarge": 2}),
    )
    assert section.nodes_by_type == {"m5.xlarge": 1, "trn1.32xlarge": 2}
    assert [(u.instance_type, u.instance_hours, u.quota) for u in section.usage] == [
        ("p5.48xlarge", 240.0, 1),
        ("trn1.32xlarge", 136.0, 4),
        ("m5.xlarge", 168.0, None),
    ]
    assert section.usage[1].share == 136 / (4 * 168)
    assert len(section.daily_hours) == 7
    assert section.failures.count == 3
    assert [(j.cluster_name, j.job, j.ratio) for j in section.jobs] == [
        ("cluster-a", "j0", None),
        ("cluster-a", "j1", None),
        ("cluster-b", "j2", 0.9),
    ]
    assert [s.job for s in section.stalls] == ["j0", "j1"]
    assert [r.id for r in section.milestones] == [1]
    assert [r.id for r in section.incidents_opened] == [2]
    assert [r.id for r in section.notes] == [4]
    assert [r.id for r in section.lessons] == [3]
    assert [r.id for r in section.requirement_changes] == [5]
    assert [r.id for r in section.incidents_open] == [2, 9]
    assert len(section.changes) == 1
    assert section.attention == (
        "2 open incidents",
        "3 node failures",
        "repeated failures on cluster-a",
        "2 throughput episodes",
        "over quota on p5.48xlarge",
        "2 failures still open",
    )
    assert not section.quiet


def test_org_section_ignores_a_change_at_the_end_of_the_week() -> None:
    section = org_section(facts(changes=(state("c", "p5.48xlarge", 4, END),)), WEEK)
    assert section.clusters == ()
    assert section.usage == ()


def test_attention_singular() -> None:
    section = org_section(
        facts(
            open_incidents=(record(1, RecordKind.INCIDENT, h(1)),),
            failures=(failure("c", "p5.48xlarge", h(1), None, 0.5),),
            stalls=(stall("j", h(2), None),),
        ),
        WEEK,
    )
    assert section.attention == ("1 open incident", "1 throughput episode", "1 failure still open")


def test_empty_week_is_quiet_but_shows_quota() -> None:
    section = org_section(facts(quota={"ml.p5.48xlarge": 8}), WEEK)
    assert section.quiet
    assert section.clusters == ()
    assert section.nodes_by_type == {}
    assert section.usage == (UsageLine("p5.48xlarge", 0.0, 8, 1344.0, 0.0),)
    assert [hours for _, hours in section.daily_hours] == [{}] * 7
    assert section.failures.mean_time_to_recovery is None
    assert section.attention == ()


def test_org_without_clusters() -> None:
    section = org_section(facts(records=(record(1, RecordKind.NOTE, h(3), "waiting for quota"),)), WEEK)
    assert section.clusters == ()
    assert section.usage == ()
    assert section.attention == ()
    assert not section.quiet  # a note was written


def test_build_digest() -> None:
    other = facts(
        org_id="tsuru",
        name="Tsuru",
        channel="C456",
        changes=(StateChange("tsuru", "parallelcluster", "t1", "p5.48xlarge", 2, h(-1)),),
        records=(
            record(11, RecordKind.LESSON, h(10), org="tsuru"),
            record(12, RecordKind.LESSON, h(50), org="tsuru"),
            record(13, RecordKind.MILESTONE, h(60), org="tsuru"),
        ),
        failures=(Failure("tsuru", "parallelcluster", "t1", "node", "p5.48xlarge", h(3), h(4), 1.0),),
    )
    quiet = facts(org_id="quiet", name="Quiet")
    digest = build_digest(program_name="Kumo", week=WEEK, facts=[busy_facts(), quiet, other], skipped_weeks=["W46"])
    assert [o.org_id for o in digest.orgs] == [ORG, "quiet", "tsuru"]
    assert digest.org("quiet") is not None and digest.org("quiet").quiet  # type: ignore[union-attr]
    assert digest.org("nope") is None
    totals = digest.totals
    assert totals.clusters == 3
    assert totals.nodes_by_type == {"m5.xlarge": 1, "p5.48xlarge": 2, "trn1.32xlarge": 2}
    assert totals.instance_hours_by_type == {"m5.xlarge": 168.0, "p5.48xlarge": 240.0 + 336.0, "trn1.32xlarge": 136.0}
    assert totals.failures == 4
    assert totals.gpu_hours_lost == 172.0 + 8.0
    assert totals.stalls == 2
    assert totals.incidents_open == 2
    assert totals.milestones == 2
    assert [org for org, _ in digest.attention] == [ORG]
    assert [r.id for r in digest.lessons] == [11, 3, 12]
    assert digest.skipped_weeks == ("W46",)


# ------------------------------------------------------------------------------------------ living document


def doc_facts() -> OrgFacts:
    incident = Record(7, ORG, RecordKind.INCIDENT, "EFA errors", "U1", h(1), resolved_at=h(30), resolved_by="U3")
    return facts(
        quota={"p5.48xlarge": 8},
        changes=CHANGES,
        records=(record(1, RecordKind.MILESTONE, h(5), "first checkpoint"), incident),
        resolved=(incident,),
        failures=(
            failure("cluster-a", "p5.48xlarge", h(10), h(10) + timedelta(minutes=80), 2.7),
            failure("cluster-b", "", h(90), None, 0.0, kind="cluster"),
        ),
        stalls=(stall("llama", h(20), h(20) + timedelta(minutes=25)), stall("llama", h(95), None, "slowdown")),
        operations=(
            Change(ORG, "scale", "cluster-a", "done", h(24), "U2", "scale cluster-a workers 4->6"),
            Change(ORG, "reboot", "cluster-a", "failed", h(40), "U2", "reboot cluster-a node i-1"),
        ),
        requirements=(
            Requirement("model_size", "175B", "U1", h(0)),
            Requirement("framework", "NeMo", "U1", h(0)),
        ),
        clusters_now=(
            ClusterNow("hyperpod", "cluster-a", "InService", 1, 1, {"ml.m5.xlarge": 1}, h(160)),
            ClusterNow("hyperpod", "cluster-b", "InService", 3, 3, {"trn1.32xlarge": 2, "ml.m5.xlarge": 1}, h(160)),
        ),
    )


def test_history() -> None:
    entries = history(doc_facts())
    assert [(e.at, e.kind) for e in entries] == [
        (h(95), "stall"),
        (h(90), "failure"),
        (h(40), "change"),
        (h(30), "resolved"),
        (h(24), "change"),
        (h(20), "stall"),
        (h(10), "failure"),
        (h(5), "milestone"),
        (h(1), "incident"),
    ]
    by_kind = {(e.kind, e.at): e for e in entries}
    assert by_kind[("stall", h(95))].text == "slowdown of job llama on cluster-b, still open"
    assert by_kind[("stall", h(20))].text == "stall of job llama on cluster-b, lasted 25 min"
    assert by_kind[("failure", h(90))].text == "cluster failure on cluster-b, still open"
    assert by_kind[("failure", h(10))].text == (
        "node failure on cluster-a (p5.48xlarge), recovered after 1 h 20 min, 2.7 node-hours lost"
    )
    assert by_kind[("change", h(40))].text == "reboot cluster-a node i-1 (failed)"
    assert by_kind[("change", h(40))].by == "U2"
    resolved = by_kind[("resolved", h(30))]
    assert (resolved.text, resolved.by, resolved.ref) == ("resolved #7: EFA errors", "U3", "#7")
    milestone = by_kind[("milestone", h(5))]
    assert (milestone.text, milestone.by, milestone.ref) == ("first checkpoint", "U1", "#1")


def test_tracking_doc() -> None:
    generated = datetime(2026, 11, 30, 1, tzinfo=UTC)
    doc = tracking_doc(doc_facts(), generated_at=generated)
    assert doc.generated_at == generated
    assert [r.key for r in doc.requirements] == ["framework", "model_size"]
    assert [c.name for c in doc.clusters] == ["cluster-a", "cluster-b"]
    assert doc.held == {"m5.xlarge": 2, "trn1.32xlarge": 2}
    assert doc.usage == (
        UsageLine("p5.48xlarge", 240.0, 8, 1344.0, 240 / 1344),
        UsageLine("m5.xlarge", 168.0, None, None, None),
        UsageLine("trn1.32xlarge", 136.0, None, None, None),
    )
    assert doc.usage_window == (START, END)
    assert len(doc.history) == 9
    assert doc.notes == ()


def test_tracking_doc_without_states() -> None:
    doc = tracking_doc(facts(quota={"p5.48xlarge": 8}), generated_at=END)
    assert doc.notes == (NO_STATES_NOTE,)
    assert doc.usage == (UsageLine("p5.48xlarge", 0.0, 8, 1344.0, 0.0),)
    assert doc.held == {}
    assert doc.history == ()
