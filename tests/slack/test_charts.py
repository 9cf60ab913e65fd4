"""Charts render valid PNGs of the specified size, in the program's time zone, whatever the data looks like."""

from __future__ import annotations

import io
import math
import random
import struct
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import pytest
from matplotlib import dates as mdates
from matplotlib.figure import Figure

from bot import plots
from bot.plots import Band, Series
from bot.slack import charts

TZ = ZoneInfo("Asia/Tokyo")
UNTIL = datetime(2026, 11, 29, 6, 0, tzinfo=UTC)  # 15:00 in Tokyo
SINCE = UNTIL - timedelta(hours=6)
STEP = timedelta(seconds=30)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from the IHDR chunk, which the PNG format puts first."""
    assert data[:8] == PNG_SIGNATURE
    length, kind = struct.unpack(">I4s", data[8:16])
    assert (length, kind) == (13, b"IHDR")
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def decoded(data: bytes) -> Any:
    """The pixels, decoded by matplotlib (proves the whole file is a readable PNG, not just its header)."""
    from matplotlib import image

    return image.imread(io.BytesIO(data), format="png")


def trace(
    base: float, *, n: int = 720, start: datetime = SINCE, gaps: Sequence[range] = (), seed: int = 1
) -> list[tuple[datetime, float | None]]:
    rng = random.Random(seed)
    return [
        (start + i * STEP, None if any(i in gap for gap in gaps) else base * (1 + rng.gauss(0, 0.03))) for i in range(n)
    ]


def chart_kwargs(**overrides: Any) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "title": "kumo-labs/p5-train · llama-70b · last 6 h",
        "series": [Series("llama-70b", trace(180_000))],
        "baseline": 181_000.0,
        "threshold": 108_600.0,
        "bands": [Band(start=UNTIL - timedelta(hours=1), end=None, label="slowdown")],
        "since": SINCE,
        "until": UNTIL,
        "tz": TZ,
    }
    kwargs.update(overrides)
    return kwargs


def texts(fig: Figure) -> list[str]:
    fig.canvas.draw()  # tick labels exist only once the figure is laid out
    return [t.get_text() for t in fig.findobj(lambda artist: hasattr(artist, "get_text"))]  # type: ignore[attr-defined]


def legend_labels(fig: Figure) -> list[str]:
    return [t.get_text() for legend in fig.legends for t in legend.get_texts()]


def test_throughput_chart_is_a_png_of_the_specified_size() -> None:
    data = charts.throughput_chart(**chart_kwargs())
    assert data.startswith(PNG_SIGNATURE)
    assert png_size(data) == (charts.WIDTH_PX, charts.HEIGHT_PX) == (1000, 420)
    assert decoded(data).shape[:2] == (420, 1000)


def test_times_are_shown_in_the_program_time_zone_and_values_from_zero_with_separators() -> None:
    fig = charts.throughput_figure(**chart_kwargs())
    ax = fig.axes[0]
    shown = texts(fig)
    x_ticks = [t.get_text() for t in ax.get_xticklabels()]
    # 00:00-06:00 UTC is 09:00-15:00 in Tokyo.
    assert "09:00" in x_ticks and "15:00" in x_ticks
    assert "00:00" not in x_ticks
    assert "time (Asia/Tokyo)" in shown
    assert any(f"Nov 29 09:00{charts.DASH}15:00 JST" in text for text in shown)
    assert ax.get_ylim()[0] == 0
    y_ticks = [t.get_text() for t in ax.get_yticklabels()]
    assert "0" in y_ticks
    assert any(label.endswith(",000") for label in y_ticks), y_ticks
    assert ax.get_title(loc="left") == "kumo-labs/p5-train · llama-70b · last 6 h"


def test_baseline_dashed_threshold_dotted_and_labelled_in_the_legend() -> None:
    fig = charts.throughput_figure(**chart_kwargs())
    ax = fig.axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert lines["baseline 181,000 tokens/s"].get_linestyle() == "--"
    assert lines["alert threshold 108,600 tokens/s"].get_linestyle() == ":"
    assert legend_labels(fig) == [
        "llama-70b",
        "baseline 181,000 tokens/s",
        "alert threshold 108,600 tokens/s",
        "slowdown",
    ]


def test_gaps_are_drawn_as_gaps() -> None:
    # Explicit gaps (None), and a silence with no points at all (minutes 100-130 missing), both break the line.
    points = trace(90_000, gaps=[range(300, 310)])
    points = points[:200] + points[260:]
    series = Series("job", points)
    fig = charts.throughput_figure(**chart_kwargs(series=[series], bands=()))
    line = next(line for line in fig.axes[0].get_lines() if line.get_label() == "job")
    y = np.asarray(line.get_ydata(), dtype=float).tolist()
    assert sum(math.isnan(v) for v in y) == 10 + 1  # the ten Nones plus one break in the silence
    data = charts.throughput_chart(**chart_kwargs(series=[series]))
    assert png_size(data) == (1000, 420)


def test_a_lone_point_between_gaps_is_still_visible() -> None:
    points: list[tuple[datetime, float | None]] = [(SINCE + i * STEP, None) for i in range(20)]
    points[10] = (points[10][0], 5_000.0)
    fig = charts.throughput_figure(**chart_kwargs(series=[Series("job", points)], bands=()))
    markers = [line for line in fig.axes[0].get_lines() if line.get_marker() == "o"]
    assert len(markers) == 1
    assert list(markers[0].get_ydata()) == [5_000.0]  # type: ignore[arg-type]


def test_open_and_closed_bands_are_shaded_and_labelled() -> None:
    bands = [
        Band(start=SINCE + timedelta(hours=1), end=SINCE + timedelta(hours=1, minutes=20), label="stall"),
        Band(start=SINCE + timedelta(hours=3), end=SINCE + timedelta(hours=3, minutes=10), label="stall"),
        Band(start=UNTIL - timedelta(minutes=40), end=None, label="slowdown"),
        Band(start=SINCE - timedelta(hours=3), end=SINCE - timedelta(hours=2), label="earlier"),  # outside
        Band(start=SINCE - timedelta(hours=1), end=SINCE + timedelta(minutes=5), label="clipped"),
    ]
    fig = charts.throughput_figure(**chart_kwargs(bands=bands))
    ax = fig.axes[0]
    assert len(ax.patches) == 4  # the band wholly before the window is not drawn
    shown = texts(fig)
    assert shown.count("stall") >= 2
    assert "slowdown (ongoing) " in shown
    assert " clipped" in shown
    assert "earlier" not in " ".join(shown)
    assert [label for label in legend_labels(fig) if label in ("stall", "slowdown", "clipped")] == [
        "stall",
        "slowdown",
        "clipped",
    ]  # one legend entry per label
    # The open band runs to the right edge, the clipped one starts at the left edge.
    x_min, x_max = ax.get_xlim()
    extents = sorted((patch.get_x(), patch.get_x() + patch.get_width()) for patch in ax.patches)  # type: ignore[attr-defined]
    assert extents[0][0] == pytest.approx(x_min)
    assert extents[-1][1] == pytest.approx(x_max)
    assert png_size(charts.throughput_chart(**chart_kwargs(bands=bands))) == (1000, 420)


def test_no_baseline_or_threshold() -> None:
    fig = charts.throughput_figure(**chart_kwargs(baseline=None, threshold=None, bands=()))
    assert legend_labels(fig) == ["llama-70b"]
    assert png_size(charts.throughput_chart(**chart_kwargs(baseline=None, threshold=None))) == (1000, 420)


@pytest.mark.parametrize(
    "series",
    [
        [],
        [Series("job", [])],
        [Series("job", [(SINCE + i * STEP, None) for i in range(30)])],
    ],
    ids=["no-series", "empty-series", "only-gaps"],
)
def test_no_data_says_so_rather_than_failing(series: list[Series]) -> None:
    fig = charts.throughput_figure(**chart_kwargs(series=series, baseline=None, threshold=None, bands=()))
    assert charts.NO_DATA in texts(fig)
    assert fig.axes[0].get_ylim() == (0, 1)
    data = charts.throughput_chart(**chart_kwargs(series=series))
    assert png_size(data) == (1000, 420)
    decoded(data)


def test_data_present_has_no_no_data_label() -> None:
    assert charts.NO_DATA not in texts(charts.throughput_figure(**chart_kwargs()))


def test_small_values_keep_decimals() -> None:
    series = [Series("job", [(SINCE + i * STEP, 1.5 + (i % 3) * 0.1) for i in range(100)])]
    fig = charts.throughput_figure(**chart_kwargs(series=series, baseline=1.6, threshold=0.96, unit="samples/s"))
    assert "baseline 1.60 samples/s" in legend_labels(fig)
    y_ticks = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert any("." in label for label in y_ticks)


def test_a_window_across_midnight_and_dst() -> None:
    new_york = ZoneInfo("America/New_York")
    until = datetime(2026, 3, 8, 9, 0, tzinfo=UTC)  # 05:00 EDT, three hours after the clocks went forward
    since = until - timedelta(hours=12)  # 16:00 EST the day before
    series = [Series("job", trace(1_000, start=since, n=1440))]
    fig = charts.throughput_figure(**chart_kwargs(series=series, since=since, until=until, tz=new_york, bands=()))
    shown = texts(fig)
    assert f"Mar 7 16:00 EST {charts.DASH} Mar 8 05:00 EDT" in shown
    x_ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert "04:00" in x_ticks and "02:00" not in x_ticks  # 02:00-03:00 did not exist that night


@pytest.mark.parametrize(
    "overrides",
    [
        {"since": SINCE.replace(tzinfo=None)},
        {"until": UNTIL.replace(tzinfo=None)},
        {"series": [Series("job", [(SINCE.replace(tzinfo=None), 1.0)])]},
        {"bands": [Band(start=SINCE.replace(tzinfo=None), end=None, label="stall")]},
        {"bands": [Band(start=SINCE, end=UNTIL.replace(tzinfo=None), label="stall")]},
    ],
    ids=["since", "until", "point", "band-start", "band-end"],
)
def test_naive_datetimes_are_refused(overrides: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="naive"):
        charts.throughput_chart(**chart_kwargs(**overrides))


def test_aware_datetimes_in_any_zone_are_accepted() -> None:
    tokyo_points = [(when.astimezone(TZ), value) for when, value in trace(50_000)]
    data = charts.throughput_chart(
        **chart_kwargs(series=[Series("job", tokyo_points)], since=SINCE.astimezone(TZ), until=UNTIL.astimezone(TZ))
    )
    assert png_size(data) == (1000, 420)


def test_an_empty_window_is_refused() -> None:
    with pytest.raises(ValueError, match="after"):
        charts.throughput_chart(**chart_kwargs(since=UNTIL, until=UNTIL))


def test_renders_six_hours_of_three_jobs_well_under_a_second() -> None:
    series = [Series(f"job-{n}", trace(60_000 * (n + 1), seed=n, gaps=[range(400, 405)])) for n in range(3)]
    assert all(len(s.points) == 720 for s in series)
    charts.throughput_chart(**chart_kwargs(series=series))  # the first chart in a process loads fonts
    timings = []
    for _ in range(3):
        started = time.perf_counter()
        data = charts.throughput_chart(**chart_kwargs(series=series))
        timings.append(time.perf_counter() - started)
    assert png_size(data) == (1000, 420)
    assert min(timings) < 1.0, timings


def test_importing_the_module_does_not_load_matplotlib_state() -> None:
    # Charts use Figure + the Agg canvas, never pyplot (no global figure registry, no GUI backend).
    charts.throughput_chart(**chart_kwargs())
    charts.bar_chart(title="t", labels=["a"], values=[1.0], unit="h")
    assert "matplotlib.pyplot" not in sys.modules


def test_bar_chart() -> None:
    data = charts.bar_chart(
        title="Instance-hours this week",
        labels=["kumo-labs", "sora-ai", "hikari"],
        values=[12_345.5, 800, 43_000],
        unit="h",
    )
    width, height = png_size(data)
    assert width == 1000 and height >= 240
    decoded(data)
    fig = charts.bar_figure(
        title="Instance-hours this week",
        labels=["kumo-labs", "sora-ai", "hikari"],
        values=[12_345.5, 800, 43_000],
        unit="h",
    )
    shown = texts(fig)
    assert {"12,346 h", "800 h", "43,000 h"} <= set(shown)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["kumo-labs", "sora-ai", "hikari"]
    assert ax.get_ylim()[0] > ax.get_ylim()[1]  # first label on top
    assert ax.get_xlim()[0] == 0


def test_bar_chart_grows_with_the_number_of_bars() -> None:
    labels = [f"org-{n:02d}" for n in range(30)]
    data = charts.bar_chart(title="Usage", labels=labels, values=[float(n) for n in range(30)], unit="h")
    assert png_size(data) == (1000, charts.BAR_FRAME_PX + charts.BAR_HEIGHT_PX * 30)


def test_bar_chart_without_bars_says_no_data() -> None:
    fig = charts.bar_figure(title="Usage", labels=[], values=[], unit="h")
    assert charts.NO_DATA in texts(fig)
    assert png_size(charts.bar_chart(title="Usage", labels=[], values=[], unit="h"))[0] == 1000


def test_bar_chart_refuses_mismatched_or_non_finite_values() -> None:
    with pytest.raises(ValueError):
        charts.bar_chart(title="Usage", labels=["a", "b"], values=[1.0], unit="h")
    with pytest.raises(ValueError):
        charts.bar_chart(title="Usage", labels=["a"], values=[math.nan], unit="h")


def test_a_short_anomaly_in_a_long_chart_gets_a_zoomed_panel_of_it_and_30_minutes_either_side() -> None:
    """Issue 11: a 3-minute stall in the 6-hour chart is 7 px wide, invisible; the zoom shows it readably."""
    start = UNTIL - timedelta(hours=2)
    stall = Band(start=start, end=start + timedelta(minutes=3), label="stall")
    assert plots.px_per_minute(SINCE, UNTIL) * 3 < 10, "too thin to see in the long panel"
    zoom = plots.zoom_for(stall, since=SINCE, until=UNTIL)
    assert zoom is not None
    assert zoom.since <= stall.start - timedelta(minutes=30) and zoom.until >= start + timedelta(minutes=33)
    assert zoom.until - zoom.since <= timedelta(minutes=70), "no wider than it needs to be"
    assert zoom.px_per_minute * 3 >= 30, "the stall is some 40 px wide"
    assert zoom.px_per_minute * STEP.total_seconds() / 60 >= 5, "30-second samples drawn apart"

    fig = charts.throughput_figure(**chart_kwargs(bands=[stall], zoom=zoom))
    long_panel, zoomed = fig.axes
    assert long_panel.get_xlim() == pytest.approx(tuple(mdates.date2num([SINCE, UNTIL])))
    assert zoomed.get_xlim() == pytest.approx(tuple(mdates.date2num([zoom.since, zoom.until])))
    assert "zoomed in on the anomaly" in texts(fig)
    assert png_size(charts.throughput_chart(**chart_kwargs(bands=[stall], zoom=zoom))) == (1000, 720)


def test_an_anomaly_wide_enough_to_see_or_ongoing_at_the_edge_is_zoomed_only_when_short() -> None:
    long_slowdown = Band(start=UNTIL - timedelta(hours=1), end=None, label="slowdown")
    assert plots.zoom_for(long_slowdown, since=SINCE, until=UNTIL) is None, "an hour of 6 is plain to see"
    fresh = Band(start=UNTIL - timedelta(minutes=12), end=None, label="stall")
    zoom = plots.zoom_for(fresh, since=SINCE, until=UNTIL)
    assert zoom is not None and zoom.since == fresh.start - timedelta(minutes=30)
    assert zoom.until == UNTIL, "nothing is known after the chart's end"
