"""Goodput as people read it: the line of DESIGN.md's contract ("Goodput NN %" then every part by name, adding up
to the held accelerator-hours) in an org's section, the program summary (every org's) with its chart, /track show
(week by week) and the Home (this week so far, against last week)."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from matplotlib.patches import Rectangle

from bot.digest import render
from bot.digest.goodput import PARTS, Goodput, combined
from bot.home.facts import HomeFacts, OrgHome, Viewer
from bot.home.render import home_view
from bot.slack import charts
from tests.digest.test_render import WEEK, busy_section, digest, everything, quiet_section, show, shown
from tests.home.test_render import text_of

LINE = re.compile(r"Goodput (\d{1,3}(?:\.\d)?) %")
NUMBER = r"(\d+(?:\.\d)?)"


def value(training: float = 311.3, *, held: float = 512.0, until_end: bool = True) -> Goodput:
    rest = held - training
    return Goodput(
        since=WEEK.start,
        until=WEEK.end if until_end else WEEK.start + timedelta(days=2),
        held=held,
        training=training,
        node_failures=rest * 0.1,
        stalls=rest * 0.2,
        slowdowns=rest * 0.1,
        restarts=rest * 0.1,
        idle=rest * 0.5,
    )


def read_line(text: str) -> tuple[float, float, dict[str, float]]:
    """(goodput %, held, parts) as a reader (or a script) reads them off the line."""
    match = LINE.search(text)
    assert match, text
    line = text[match.start() :].splitlines()[0]
    held = float(re.search(rf"of {NUMBER} accelerator-hours held", line)[1])  # type: ignore[index]
    parts = {name: float(re.search(rf"{name} {NUMBER}", line)[1]) for name in PARTS}  # type: ignore[index]
    return float(match[1]), held, parts


def test_an_org_section_has_one_goodput_line_with_every_part_adding_up_to_held() -> None:
    section = busy_section(goodput=value(), goodput_last_week=value(400.0))
    text = everything(render.org_digest(section, week=WEEK, program_name="FM Accelerator"))
    assert len(LINE.findall(text)) == 1
    percent, held, parts = read_line(text)
    assert percent == 60.8 and held == 512.0
    assert round(sum(parts.values()), 1) == held and parts["training"] == 311.3
    assert "(last week 78.1 %)" in text and "so far" not in text


def test_a_running_week_says_so_far_and_nothing_held_says_so() -> None:
    running = render.goodput_text(value(until_end=False), running=True)
    assert running.startswith("*Goodput 60.8 %* so far")
    empty = render.goodput_text(Goodput(WEEK.start, WEEK.end, 0.0))
    assert "Goodput n/a" in empty and "no accelerator-hours held" in empty


def test_the_summary_lists_every_orgs_goodput_and_the_program_figure() -> None:
    kumo = busy_section(goodput=value(), goodput_last_week=value(256.0))
    sora = busy_section("sora-ai", "Sora AI", goodput=value(500.0))
    hikari = quiet_section()
    totals = digest([kumo, sora, hikari]).totals
    program = digest(
        [kumo, sora, hikari],
        totals=replace(totals, goodput=combined([v for v in (kumo.goodput, sora.goodput) if v], WEEK.start, WEEK.end)),
    )
    text = everything(render.digest_summary(program))
    assert "*Kumo Labs*: Goodput 60.8 % (last week 50.0 %) · node failures 3.9 %" in text
    assert "*Sora AI*: Goodput 97.7 %" in text
    assert "Program goodput 79.2 %" in text
    png = render.goodput_chart(program)
    assert png.startswith(b"\x89PNG")


def test_the_goodput_chart_stacks_each_orgs_parts_to_100() -> None:
    shares = [dict.fromkeys(PARTS, 0.0) | {"training": 60.0, "idle": 40.0}, dict.fromkeys(PARTS, 0.0)]
    figure = charts.goodput_figure(title="t", orgs=["Kumo Labs 60.0 %", "Hikari n/a"], shares=shares)
    (ax,) = figure.axes
    widths = [patch.get_width() for patch in ax.patches if isinstance(patch, Rectangle)]
    assert sum(widths) == 100.0 and len(widths) == 2 * len(PARTS)
    assert [text.get_text() for text in ax.texts] == ["60.0 %", "nothing held"]


def test_track_show_lists_each_week_newest_first_against_the_one_before() -> None:
    before = replace(WEEK, label="2026-W47", start=WEEK.start - timedelta(days=7), end=WEEK.start)
    reply = show([], goodput=[(before, value(400.0)), (WEEK, value(until_end=False))])
    text = shown(reply)
    lines = [line for line in text.splitlines() if "Goodput" in line and line.startswith("•")]
    assert lines[0].startswith("• 2026-W48: Goodput 60.8 % so far (last week 78.1 %) · of 512.0")
    assert lines[1].startswith("• 2026-W47: Goodput 78.1 % · of 512.0")


def test_the_home_shows_this_weeks_goodput_against_last_weeks() -> None:
    org = OrgHome(org_id="kumo-labs", name="Kumo Labs", goodput=value(until_end=False), goodput_last_week=value(400.0))
    facts = HomeFacts(
        viewer=Viewer.MEMBER, user_id="U0ALICE01", now=WEEK.start, orgs=(org,), roles={"kumo-labs": "viewer"}
    )
    text = text_of(home_view(facts, tz=WEEK.tz))
    percent, held, parts = read_line(text)
    assert percent == 60.8 and "(last week 78.1 %)" in text and round(sum(parts.values()), 1) == held
    quiet = replace(org, goodput=Goodput(WEEK.start, WEEK.end, 0.0), goodput_last_week=None)
    assert "Goodput" not in text_of(home_view(replace(facts, orgs=(quiet,)), tz=WEEK.tz))


def silent(held: float = 512.0, *, failures: float = 0.0, until_end: bool = True) -> Goodput:
    """An org that held accelerators but none of whose jobs reported throughput: all idle, by the arithmetic."""
    return replace(
        value(0.0, held=held, until_end=until_end),
        node_failures=failures,
        stalls=0.0,
        slowdowns=0.0,
        restarts=0.0,
        idle=held - failures,
        reported=False,
    )


def test_an_org_without_reports_reads_n_a_with_its_held_hours_not_0_percent() -> None:
    section = busy_section(goodput=silent(failures=16.0), goodput_last_week=value(400.0))
    text = everything(render.org_digest(section, week=WEEK, program_name="FM Accelerator"))
    assert (
        "*Goodput n/a*: no job reported throughput this week (last week 78.1 %) · 512.0 accelerator-hours held · "
        "node failures 16.0"
    ) in text
    assert not LINE.search(text) and "idle 496.0" not in text, "no guessed idle part"
    # Against a last week without reports: no comparison to make.
    running = render.goodput_text(silent(until_end=False), last=silent(), running=True, bold=False)
    assert running == "Goodput n/a: no job reported throughput this week so far · 512.0 accelerator-hours held"
    # Nothing held says so, as before.
    assert render.goodput_text(replace(silent(0.0), held=0.0)) == "*Goodput n/a* · no accelerator-hours held"


def test_the_summary_leaves_orgs_without_reports_out_of_the_program_figure_and_the_chart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kumo = busy_section(goodput=value(), goodput_last_week=value(256.0))
    sora = busy_section("sora-ai", "Sora AI", goodput=silent(), goodput_last_week=silent())
    hikari = quiet_section()
    program = digest([kumo, sora, hikari])
    program = replace(program, totals=replace(program.totals, goodput=combined([value()], WEEK.start, WEEK.end)))
    text = everything(render.digest_summary(program))
    assert (
        "*Sora AI*: Goodput n/a: no job reported throughput this week · 512.0 accelerator-hours held · not in the chart"
    ) in text
    assert "Program goodput 60.8 %* · of 512.0 accelerator-hours held" in text
    assert "· 1 org left out: no job of theirs reported throughput" in text
    assert render.charted(program)
    seen: dict[str, Any] = {}
    monkeypatch.setattr(charts, "goodput_chart", lambda **drawn: seen.update(drawn) or b"")
    render.goodput_chart(program)
    assert seen["orgs"] == ["Kumo Labs 60.8 %"], "Sora has no bar"
    assert seen["title"].endswith("\n1 org left out: no job of theirs reported throughput")


def test_a_program_none_of_whose_orgs_reported_has_no_figure_to_chart() -> None:
    sora = busy_section("sora-ai", "Sora AI", goodput=silent())
    program = digest([sora])
    program = replace(program, totals=replace(program.totals, goodput=combined([silent()], WEEK.start, WEEK.end)))
    text = everything(render.digest_summary(program))
    assert "*Program goodput n/a*: no job reported throughput this week · 512.0 accelerator-hours held" in text
    assert "left out" not in text and "not in the chart" not in text
    assert not render.charted(program)


def test_track_show_and_the_home_say_n_a_for_a_week_without_reports() -> None:
    before = replace(WEEK, label="2026-W47", start=WEEK.start - timedelta(days=7), end=WEEK.start)
    text = shown(show([], goodput=[(before, value(400.0)), (WEEK, silent(until_end=False))]))
    assert (
        "• 2026-W48: Goodput n/a: no job reported throughput this week so far (last week 78.1 %) · "
        "512.0 accelerator-hours held"
    ) in text
    org = OrgHome(org_id="kumo-labs", name="Kumo Labs", goodput=silent(until_end=False), goodput_last_week=value())
    facts = HomeFacts(
        viewer=Viewer.MEMBER, user_id="U0ALICE01", now=WEEK.start, orgs=(org,), roles={"kumo-labs": "viewer"}
    )
    home = text_of(home_view(facts, tz=WEEK.tz))
    assert "This week: Goodput n/a: no job reported throughput this week so far (last week 60.8 %)" in home
    assert "0.0 %" not in home
