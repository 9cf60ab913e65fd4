"""Goodput arithmetic (bot.digest.goodput): examples worked by hand, and properties for any facts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.digest.compute import accelerators, build_digest, instance_hours
from bot.digest.facts import OrgFacts, StateChange
from bot.digest.goodput import (
    PARTS,
    Goodput,
    GoodputFacts,
    Loss,
    Outage,
    Run,
    combined,
    goodput,
    percent_text,
    shares,
    shown,
    weekly,
)
from bot.digest.weeks import parse_week

T0 = datetime(2026, 11, 16, tzinfo=UTC)


def at(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


def state(count: int, hours: float = -24.0, *, cluster: str = "c", instance_type: str = "p5.48xlarge") -> StateChange:
    return StateChange("org", "hyperpod", cluster, instance_type, count, at(hours))


def run(start: float, end: float, *, ready: float | None = None, job: str = "j", nodes: int | None = None) -> Run:
    return Run("c", job, at(start), at(start if ready is None else ready), at(end), nodes)


def facts(*, hours: float = 10.0, **kwargs: object) -> GoodputFacts:
    return GoodputFacts(org_id="org", since=T0, until=at(hours), **kwargs)  # type: ignore[arg-type]


def parts(value: Goodput) -> dict[str, float]:
    return {name: round(hours, 6) for name, hours in value.parts()}


def test_a_day_worked_by_hand() -> None:
    """4 x p5 (32 GPUs) for 10 h: a job from 0 h (warm-up 10 min) to 8 h; one node failed 2-3 h (the job ran on
    what was left); a stall 5-6 h; a slowdown to half 6-7 h; nothing 8-10 h."""
    value = goodput(
        facts(
            changes=(state(4), state(1, cluster="c", instance_type="m5.xlarge")),  # the head node holds no GPU
            runs=(run(0, 8, ready=1 / 6),),
            outages=(Outage("c", at(2), at(3), 1, "p5.48xlarge"),),
            losses=(Loss("c", "j", "stall", at(5), at(6)), Loss("c", "j", "slowdown", at(6), at(7), 0.5)),
        )
    )
    assert value.held == pytest.approx(320)
    assert parts(value) == {
        "training": round(32 * 11 / 6 + 24 + 64 + 16 + 32, 6),  # 194.666667
        "node failures": 8.0,
        "stalls": 32.0,
        "slowdowns": 16.0,
        "restarts and warm-up": round(32 / 6, 6),
        "idle": 64.0,
    }
    assert percent_text(value) == "60.8 %"
    held, rounded = shown(value)
    assert held == 320.0 and sum(h for _, h in rounded) == pytest.approx(320.0)
    assert dict(rounded) == {
        "training": 194.7,
        "node failures": 8.0,
        "stalls": 32.0,
        "slowdowns": 16.0,
        "restarts and warm-up": 5.3,
        "idle": 64.0,
    }


def test_a_job_with_nodes_leaves_the_rest_idle_and_two_without_share_the_cluster() -> None:
    half = goodput(facts(hours=1, changes=(state(4),), runs=(run(0, 1, nodes=2),)))
    assert parts(half)["training"] == 16.0 and parts(half)["idle"] == 16.0
    shared = goodput(facts(hours=1, changes=(state(4),), runs=(run(0, 1), run(0, 1, job="k")), losses=()))
    assert parts(shared)["training"] == 32.0 and parts(shared)["idle"] == 0.0
    one_hung = goodput(
        facts(
            hours=1,
            changes=(state(4),),
            runs=(run(0, 1), run(0, 1, job="k")),
            losses=(Loss("c", "k", "stall", at(0), None),),
        )
    )
    assert parts(one_hung)["training"] == 16.0 and parts(one_hung)["stalls"] == 16.0
    # Asking more nodes than are held: the jobs share what there is, pro rata.
    crowded = goodput(facts(hours=1, changes=(state(4),), runs=(run(0, 1, nodes=4), run(0, 1, job="k", nodes=4))))
    assert parts(crowded)["training"] == 32.0 and parts(crowded)["idle"] == 0.0


def test_a_cluster_failure_takes_it_all_and_open_episodes_count_to_the_end_of_the_facts() -> None:
    value = goodput(facts(hours=4, changes=(state(2),), runs=(run(0, 4),), outages=(Outage("c", at(1), at(2), None),)))
    assert parts(value)["node failures"] == 16.0 and parts(value)["training"] == 48.0
    still = goodput(
        facts(hours=4, changes=(state(2),), runs=(run(0, 1),), losses=(Loss("c", "j", "stall", at(1), None),))
    )
    assert parts(still)["stalls"] == 48.0 and parts(still)["training"] == 16.0
    # A hung job keeps the nodes its last run had.
    hung = goodput(
        facts(hours=2, changes=(state(4),), runs=(run(0, 1, nodes=1),), losses=(Loss("c", "j", "stall", at(1), None),))
    )
    assert parts(hung)["stalls"] == 8.0 and parts(hung)["idle"] == 48.0


def test_held_follows_the_states_and_trainium_counts_its_chips() -> None:
    changes = (
        state(2, cluster="t", instance_type="trn1.32xlarge"),
        state(0, 5, cluster="t", instance_type="trn1.32xlarge"),
    )
    value = goodput(facts(hours=10, changes=changes))
    assert value.held == pytest.approx(2 * 16 * 5) and parts(value)["idle"] == 160.0
    assert goodput(facts(hours=10)).percent is None and percent_text(goodput(facts())) == "n/a"
    # A sub-window, and weeks.
    assert goodput(facts(hours=10, changes=changes), at(4), at(8)).held == pytest.approx(32)
    week = parse_week("2026-W47", ZoneInfo("UTC"))
    (only,) = weekly(facts(hours=10, changes=changes), [week])
    assert only[1].held == pytest.approx(160) and only[1].until == at(10), "a running week counts so far"


def test_shares_are_percent_of_held() -> None:
    value = goodput(facts(hours=1, changes=(state(4),), runs=(run(0, 1, nodes=3),)))
    assert shares(value) == {**dict.fromkeys(PARTS, 0.0), "training": 75.0, "idle": 25.0}


def test_an_org_no_job_of_which_reported_has_no_goodput_but_its_held_hours_and_parts() -> None:
    """No run and no throughput episode in the window: training cannot be told from idle, so goodput is
    unknown (not 0 %); held and the parts (all idle but node failures) are still counted and add up."""
    silent = goodput(facts(hours=10, changes=(state(4),), outages=(Outage("c", at(2), at(3), 1, "p5.48xlarge"),)))
    assert not silent.reported and silent.percent is None and percent_text(silent) == "n/a"
    assert silent.held == pytest.approx(320) and parts(silent)["node failures"] == 8.0 and parts(silent)["idle"] == 312
    # A run that ended before the window, or begins after it, is not this window's report.
    before = facts(hours=10, changes=(state(4),), runs=(run(0, 2),))
    assert goodput(before).reported and not goodput(before, at(2), at(10)).reported
    assert not goodput(before, at(-5), at(0)).reported
    # One reporting job is enough: its org's clusters without a job are idle, as always (0.0 % is a figure).
    other = (state(4), state(4, cluster="d"))
    some = goodput(facts(hours=10, changes=other, runs=(run(8, 10),)))
    assert some.reported and percent_text(some) == "10.0 %" and parts(some)["idle"] == 576.0
    assert percent_text(goodput(facts(hours=10, changes=(state(4),), runs=(run(0, 10, nodes=0),)))) == "0.0 %"
    # A job hung all window reported nothing in it, yet Pitcrew knows it is stalled.
    hung = goodput(
        facts(hours=4, changes=(state(1),), runs=(run(-2, -1),), losses=(Loss("c", "j", "stall", at(-1), None),))
    )
    assert hung.reported and percent_text(hung) == "0.0 %" and parts(hung)["stalls"] == 32.0
    # Orgs together: reported if any was; none was, none is.
    assert combined([silent, some], T0, at(10)).reported and not combined([silent], T0, at(10)).reported


def test_the_program_figure_is_that_of_the_orgs_that_reported() -> None:
    """Nine silent orgs' held hours would read as the program's idle; they are left out of its figure."""
    week = parse_week("2026-W47", ZoneInfo("UTC"))

    def org(org_id: str, *runs: Run) -> OrgFacts:
        gathered = GoodputFacts(org_id, week.start, week.end, (state(4, hours=-200),), runs=runs)
        return OrgFacts(org_id, org_id.title(), "C1", {}, week.start, week.end, goodput=gathered)

    training = Run("c", "j", week.start, week.start, week.end)
    built = build_digest(program_name="P", week=week, facts=[org("kumo", training), org("sora"), org("hikari")])
    assert [percent_text(o.goodput) for o in built.orgs if o.goodput] == ["100.0 %", "n/a", "n/a"]
    assert built.totals.goodput is not None and built.totals.goodput.held == pytest.approx(32 * 168)
    assert percent_text(built.totals.goodput) == "100.0 %"
    none = build_digest(program_name="P", week=week, facts=[org("sora"), org("hikari")])
    assert none.totals.goodput is not None and not none.totals.goodput.reported
    assert none.totals.goodput.held == pytest.approx(2 * 32 * 168)


# ------------------------------------------------------------------------------------------------ properties

hours = st.floats(min_value=-5, max_value=30, allow_nan=False).map(lambda h: round(h, 2))
span = st.tuples(hours, hours).map(sorted)
clusters = st.sampled_from(["a", "b"])
jobs = st.sampled_from(["j", "k", "l"])
types = st.sampled_from(["p5.48xlarge", "trn1.32xlarge", "m5.xlarge", "ml.p5.48xlarge"])

changes = st.builds(
    lambda c, t, n, h: StateChange("org", "hyperpod", c, t, n, at(h)), clusters, types, st.integers(0, 40), hours
)
outages = st.builds(
    lambda c, s, open_, n, t: Outage(c, at(s[0]), None if open_ else at(s[1]), n, t),
    clusters,
    span,
    st.booleans(),
    st.one_of(st.none(), st.integers(0, 50)),
    st.sampled_from(["", "p5.48xlarge", "trn1.32xlarge"]),
)
runs = st.builds(
    lambda c, j, s, w, n: Run(c, j, at(s[0]), at(min(s[0] + w, s[1])), at(s[1]), n),
    clusters,
    jobs,
    span,
    st.floats(0, 2),
    st.one_of(st.none(), st.integers(0, 60)),
)
losses = st.builds(
    lambda c, j, k, s, open_, f: Loss(c, j, k, at(s[0]), None if open_ else at(s[1]), f),
    clusters,
    jobs,
    st.sampled_from(["stall", "slowdown", "degradation"]),
    span,
    st.booleans(),
    st.floats(0, 1),
)


@settings(max_examples=300, deadline=None)
@given(
    changes=st.lists(changes, max_size=8),
    outages=st.lists(outages, max_size=4),
    runs=st.lists(runs, max_size=5),
    losses=st.lists(losses, max_size=4),
    window=span,
)
def test_the_parts_always_add_up_to_held_none_negative_goodput_in_0_to_100(
    changes: list[StateChange], outages: list[Outage], runs: list[Run], losses: list[Loss], window: list[float]
) -> None:
    gathered = GoodputFacts("org", at(0), at(24), tuple(changes), tuple(outages), tuple(runs), tuple(losses))
    value = goodput(gathered, at(window[0]), at(window[1]))
    assert all(hours >= 0 for _, hours in value.parts())
    assert sum(hours for _, hours in value.parts()) == pytest.approx(value.held, rel=1e-9, abs=1e-9)
    assert value.percent is None or 0 <= value.percent <= 100
    held, rounded = shown(value)
    assert all(hours >= 0 for _, hours in rounded)
    assert round(sum(hours for _, hours in rounded), 1) == held
    # Held is what the states integrate to, whatever else happened.
    bare = goodput(GoodputFacts("org", at(0), at(24), tuple(changes)), at(window[0]), at(window[1]))
    assert value.held == pytest.approx(bare.held, rel=1e-12, abs=1e-9) and bare.idle == pytest.approx(bare.held)
    assert not bare.reported and bare.percent is None, "no job reported: goodput unknown, never 0 %"
    # ... the one held figure: the usage ledger's instance-hours times each type's accelerators.
    ledger = instance_hours(changes, at(max(window[0], 0)), at(min(max(window[1], 0), 24)))
    assert value.held == pytest.approx(sum(h * accelerators(t) for t, h in ledger.items()), rel=1e-9, abs=1e-9)
