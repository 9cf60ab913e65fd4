"""The digest's charts: instance-hours per day stacked by type, and used against available per org."""

from __future__ import annotations

import io
import math
import struct
from datetime import date, timedelta
from typing import Any

import pytest
from matplotlib.figure import Figure

from bot.slack import charts

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
DAYS = [date(2026, 11, 23) + timedelta(days=n) for n in range(7)]  # Mon 23 to Sun 29


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from the IHDR chunk, which the PNG format puts first."""
    assert data[:8] == PNG_SIGNATURE
    length, kind = struct.unpack(">I4s", data[8:16])
    assert (length, kind) == (13, b"IHDR")
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def decoded(data: bytes) -> Any:
    from matplotlib import image

    return image.imread(io.BytesIO(data), format="png")


def texts(fig: Figure) -> list[str]:
    fig.canvas.draw()
    return [t.get_text() for t in fig.findobj(lambda artist: hasattr(artist, "get_text"))]  # type: ignore[attr-defined]


def legend_labels(fig: Figure) -> list[str]:
    return [t.get_text() for legend in fig.legends for t in legend.get_texts()]


def daily(**overrides: Any) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "title": "Kumo Labs · instance-hours per day · 2026-W48",
        "days": DAYS,
        "hours_by_type": {"p5.48xlarge": [384.0, 384, 400, 410, 384, 300, 200], "m5.xlarge": [24.0] * 7},
        "quota_hours_per_day": 384.0,
    }
    kwargs.update(overrides)
    return kwargs


def test_daily_usage_chart_is_a_png_1000_px_wide() -> None:
    data = charts.daily_usage_chart(**daily())
    assert data.startswith(PNG_SIGNATURE)
    assert png_size(data) == (1000, charts.HEIGHT_PX)
    assert decoded(data).shape[:2] == (charts.HEIGHT_PX, 1000)


def test_daily_usage_stacks_one_bar_per_day_and_type_with_the_quota_dashed() -> None:
    fig = charts.daily_usage_figure(**daily())
    ax = fig.axes[0]
    assert len(ax.patches) == 7 * 2
    # m5 sits on top of p5: its bars start where p5's end.
    p5 = ax.patches[:7]
    m5 = ax.patches[7:]
    assert [bar.get_y() for bar in m5] == pytest.approx([bar.get_height() for bar in p5])  # type: ignore[attr-defined]
    assert [t.get_text() for t in ax.get_xticklabels()] == [
        "Mon 23",
        "Tue 24",
        "Wed 25",
        "Thu 26",
        "Fri 27",
        "Sat 28",
        "Sun 29",
    ]
    quota = next(line for line in ax.get_lines() if str(line.get_label()).startswith("quota"))
    assert quota.get_linestyle() == "--"
    assert set(legend_labels(fig)) == {"p5.48xlarge", "m5.xlarge", "quota 384 instance-hours/day"}
    assert ax.get_ylabel() == "instance-hours"
    assert ax.get_ylim()[0] == 0
    shown = texts(fig)
    assert "434" in shown  # Thursday's total written over its bar
    assert charts.NO_DATA not in shown


def test_daily_usage_without_a_quota() -> None:
    fig = charts.daily_usage_figure(**daily(quota_hours_per_day=None))
    assert not fig.axes[0].get_lines()
    assert png_size(charts.daily_usage_chart(**daily(quota_hours_per_day=None)))[0] == 1000


@pytest.mark.parametrize(
    "overrides",
    [{"days": [], "hours_by_type": {}}, {"hours_by_type": {}}, {"hours_by_type": {"p5.48xlarge": [0.0] * 7}}],
    ids=["no-days", "no-types", "all-zero"],
)
def test_daily_usage_without_data_says_so(overrides: dict[str, Any]) -> None:
    fig = charts.daily_usage_figure(**daily(quota_hours_per_day=None, **overrides))
    assert charts.NO_DATA in texts(fig)
    data = charts.daily_usage_chart(**daily(quota_hours_per_day=None, **overrides))
    assert png_size(data) == (1000, charts.HEIGHT_PX)
    decoded(data)


@pytest.mark.parametrize(
    "overrides",
    [
        {"hours_by_type": {"p5.48xlarge": [1.0] * 6}},
        {"hours_by_type": {"p5.48xlarge": [math.nan] * 7}},
        {"hours_by_type": {"p5.48xlarge": [-1.0] * 7}},
        {"quota_hours_per_day": math.inf},
    ],
    ids=["short", "nan", "negative", "infinite-quota"],
)
def test_daily_usage_refuses_bad_input(overrides: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        charts.daily_usage_figure(**daily(**overrides))


def orgs(**overrides: Any) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "title": "Instance-hours · 2026-W48",
        "orgs": ["Kumo Labs", "Sora AI", "Hikari"],
        "used": [2150.0, 3000.0, 40.5],
        "available": [2688.0, 2688.0, None],
    }
    kwargs.update(overrides)
    return kwargs


def test_org_usage_chart_is_a_png_1000_px_wide() -> None:
    data = charts.org_usage_chart(**orgs())
    width, height = png_size(data)
    assert width == 1000 and height >= charts.BAR_MIN_HEIGHT_PX
    decoded(data)


def test_org_usage_bars_labels_and_order() -> None:
    fig = charts.org_usage_figure(**orgs())
    ax = fig.axes[0]
    assert len(ax.patches) == 2 + 3  # an available bar for the two orgs with a quota, a used bar for each
    assert [t.get_text() for t in ax.get_yticklabels()] == ["Kumo Labs", "Sora AI", "Hikari"]
    assert ax.get_ylim()[0] > ax.get_ylim()[1]  # first org on top
    shown = texts(fig)
    assert {"2,150 / 2,688 h", "3,000 / 2,688 h", "40.5 h"} <= set(shown)
    assert legend_labels(fig) == ["quota-hours available", "instance-hours used"]
    assert ax.get_xlim()[0] == 0


def test_org_usage_without_orgs_says_no_data() -> None:
    fig = charts.org_usage_figure(**orgs(orgs=[], used=[], available=[]))
    assert charts.NO_DATA in texts(fig)
    assert png_size(charts.org_usage_chart(**orgs(orgs=[], used=[], available=[])))[0] == 1000


def test_org_usage_grows_with_the_number_of_orgs() -> None:
    names = [f"org-{n:02d}" for n in range(30)]
    data = charts.org_usage_chart(**orgs(orgs=names, used=[float(n) for n in range(30)], available=[None] * 30))
    assert png_size(data) == (1000, charts.BAR_FRAME_PX + charts.BAR_HEIGHT_PX * 30)


@pytest.mark.parametrize(
    "overrides",
    [
        {"used": [1.0, 2.0]},
        {"available": [None]},
        {"used": [math.nan, 1.0, 2.0]},
        {"available": [math.inf, None, None]},
    ],
    ids=["short-used", "short-available", "nan-used", "infinite-available"],
)
def test_org_usage_refuses_bad_input(overrides: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        charts.org_usage_figure(**orgs(**overrides))
