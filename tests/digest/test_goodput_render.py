"""Goodput as people read it: the line of DESIGN.md's contract ("Goodput NN %" then every part by name, adding up
to the held accelerator-hours) in an org's section, the program summary (every org's) with its chart, /track show
(week by week) and the Home (this week so far, against last week)."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import timedelta

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
