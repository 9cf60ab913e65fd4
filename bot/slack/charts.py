"""Charts posted to Slack as PNG files: throughput around an alert, `/cluster throughput`, a suspect node
against its peers (in a culprit's or faulty node's alert thread), and the digest.

Rendering uses matplotlib's object API (`matplotlib.figure.Figure` drawn by the Agg canvas), never
`pyplot`: no global figure registry, no GUI backend, nothing shared between calls, so charts can be
made in worker threads (`asyncio.to_thread`) while the event loop serves Slack. matplotlib itself is
imported on the first chart, not when this module is imported, so importing it costs nothing.

Each chart has two layers: `*_figure(...)` builds a `Figure` (which tests and later charts can inspect
or extend), and `*_chart(...)` returns it as PNG bytes. New charts (per org, program-wide) follow the
same pattern and share the helpers below: `_new_figure`, `_time_axis`, `_value_axis`, `_no_data`, `png`.

All charts are sized for Slack's inline preview: 1000 px wide at 100 dpi, with fonts large enough to read
when Slack shrinks the image to the width of a message.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from bot.plots import Band, Series, Zoom  # what a chart shows (plain data); how it is drawn is this module's

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from bot.node_metrics.series import PeerChart

DPI = 100
WIDTH_PX = 1000
HEIGHT_PX = 420
BAR_HEIGHT_PX = 40  # per bar in bar charts, on top of BAR_FRAME_PX for the title and axis
BAR_FRAME_PX = 120
BAR_MIN_HEIGHT_PX = 240
ZOOM_HEIGHT_PX = 300  # the zoomed panel under the long one, when an anomaly is too short to see in it
GAP_FACTOR = 3.0  # a step longer than this many times a series' usual sample interval is drawn as a gap
NO_DATA = "no data"
DASH = "\N{EN DASH}"  # between the two ends of a time window

# Line colours for series (colour-blind-friendly, and none of them the red/orange of the alert marks).
SERIES_COLORS = ("#1f77b4", "#2ca02c", "#9467bd", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22")
BASELINE_COLOR = "#404040"
THRESHOLD_COLOR = "#d95f02"
BAND_COLOR = "#d62728"
BAR_COLOR = "#1f77b4"
QUOTA_FILL = "#dbe7f3"  # the lighter bar behind an org's usage: the quota-hours it could have used
MUTED = "#666666"
TITLE_SIZE = 15
LABEL_SIZE = 12
TICK_SIZE = 11


# ---------------------------------------------------------------------------------------------- throughput


def throughput_chart(
    *,
    title: str,
    series: Sequence[Series],
    baseline: float | None,
    threshold: float | None,
    bands: Sequence[Band] = (),
    since: datetime,
    until: datetime,
    tz: ZoneInfo,
    unit: str = "tokens/s",
    zoom: Zoom | None = None,
) -> bytes:
    """PNG of throughput over [since, until]: one line per series, the baseline dashed, the alert threshold
    dotted, anomaly bands shaded and labelled; times shown in `tz`. All datetimes must be timezone-aware.
    With `zoom` (see zoom_for), a second panel under it shows that window at a readable scale."""
    return png(
        throughput_figure(
            title=title,
            series=series,
            baseline=baseline,
            threshold=threshold,
            bands=bands,
            since=since,
            until=until,
            tz=tz,
            unit=unit,
            zoom=zoom,
        )
    )


def throughput_figure(
    *,
    title: str,
    series: Sequence[Series],
    baseline: float | None,
    threshold: float | None,
    bands: Sequence[Band] = (),
    since: datetime,
    until: datetime,
    tz: ZoneInfo,
    unit: str = "tokens/s",
    zoom: Zoom | None = None,
) -> Figure:
    """The figure behind `throughput_chart`: fig.axes[0] the whole window, fig.axes[1] the zoom if any."""
    _require_aware(since, "since")
    _require_aware(until, "until")
    if until <= since:
        raise ValueError(f"until ({until.isoformat()}) must be after since ({since.isoformat()})")
    for band in bands:
        _require_aware(band.start, f"band {band.label!r} start")
        if band.end is not None:
            _require_aware(band.end, f"band {band.label!r} end")
    if zoom is not None and zoom.until <= zoom.since:
        raise ValueError("the zoomed window must not be empty")

    if zoom is None:
        fig = _new_figure(WIDTH_PX, HEIGHT_PX)
        ax = fig.add_subplot()
    else:
        fig = _new_figure(WIDTH_PX, HEIGHT_PX + ZOOM_HEIGHT_PX)
        ax, zoomed = fig.subplots(2, 1, height_ratios=[HEIGHT_PX, ZOOM_HEIGHT_PX])
    _throughput_axes(ax, series, baseline, threshold, bands, since, until, tz, unit)
    ax.set_title(title, loc="left", fontsize=TITLE_SIZE, fontweight="bold")
    ax.set_title(_window_text(since, until, tz), loc="right", fontsize=TICK_SIZE, color=MUTED)
    _legend(fig, ax)
    if zoom is not None:
        _throughput_axes(zoomed, series, baseline, threshold, bands, zoom.since, zoom.until, tz, unit)
        zoomed.set_title("zoomed in on the anomaly", loc="left", fontsize=LABEL_SIZE, fontweight="bold")
        zoomed.set_title(_window_text(zoom.since, zoom.until, tz), loc="right", fontsize=TICK_SIZE, color=MUTED)
    return fig


def _throughput_axes(
    ax: Axes,
    series: Sequence[Series],
    baseline: float | None,
    threshold: float | None,
    bands: Sequence[Band],
    since: datetime,
    until: datetime,
    tz: ZoneInfo,
    unit: str,
) -> None:
    """One panel of a throughput chart over [since, until]."""
    import numpy as np
    from matplotlib import dates as mdates
    from matplotlib import transforms

    x_min, x_max = (float(v) for v in mdates.date2num([since, until]))
    peak = 0.0
    any_data = False

    for index, one in enumerate(series):
        x, y = _series_arrays(one)
        if not np.isfinite(y).any():
            continue
        any_data = True
        peak = max(peak, float(np.nanmax(y)))
        color = SERIES_COLORS[index % len(SERIES_COLORS)]
        ax.plot(x, y, color=color, linewidth=1.8, label=one.label, solid_joinstyle="round")
        # A point with gaps on both sides would be invisible as a line; show it as a dot.
        finite = np.isfinite(y)
        before = np.concatenate(([False], finite[:-1]))
        after = np.concatenate((finite[1:], [False]))
        lone = finite & ~before & ~after
        if lone.any():
            ax.plot(x[lone], y[lone], linestyle="none", marker="o", markersize=3.5, color=color)

    if baseline is not None and math.isfinite(baseline):
        peak = max(peak, baseline)
        ax.axhline(
            baseline, color=BASELINE_COLOR, linestyle="--", linewidth=1.4, label=f"baseline {_num(baseline)} {unit}"
        )
    if threshold is not None and math.isfinite(threshold):
        peak = max(peak, threshold)
        ax.axhline(
            threshold,
            color=THRESHOLD_COLOR,
            linestyle=":",
            linewidth=2.0,
            label=f"alert threshold {_num(threshold)} {unit}",
        )

    on_x_data = transforms.blended_transform_factory(ax.transData, ax.transAxes)
    shown_band_labels: set[str] = set()
    for band in bands:
        start = max(band.start, since)
        end = until if band.end is None else min(band.end, until)
        if end <= start:
            continue  # entirely outside the window
        x0, x1 = (float(v) for v in mdates.date2num([start, end]))
        first = band.label not in shown_band_labels
        shown_band_labels.add(band.label)
        ax.axvspan(x0, x1, color=BAND_COLOR, alpha=0.14, linewidth=0, label=band.label if first else None)
        text = band.label if band.end is not None else f"{band.label} (ongoing)"
        # Written inside the band from the edge nearer the middle of the chart, so it is never cut off.
        right_half = (x0 + x1) / 2 > (x_min + x_max) / 2
        ax.text(
            x1 if right_half else x0,
            0.97,
            f"{text} " if right_half else f" {text}",
            transform=on_x_data,
            ha="right" if right_half else "left",
            va="top",
            fontsize=TICK_SIZE,
            color=BAND_COLOR,
            clip_on=True,
        )

    if not any_data:
        _no_data(ax)

    ax.set_xlim(x_min, x_max)
    _time_axis(ax, tz)
    # Head room above the highest mark leaves space for the band labels.
    _value_axis(ax, ax.yaxis, peak=peak * 1.18 if peak > 0 else 1.0)
    ax.set_ylabel(unit, fontsize=LABEL_SIZE)


def _series_arrays(series: Series) -> tuple[Any, Any]:
    """x (matplotlib date numbers) and y (NaN for gaps) of a series, sorted by time, with a NaN inserted
    wherever samples stop for longer than GAP_FACTOR times the usual interval, so a silence is drawn as a
    gap rather than as a straight line across it."""
    import numpy as np
    from matplotlib import dates as mdates

    for when, _ in series.points:
        _require_aware(when, f"a point of series {series.label!r}")
    if not series.points:
        return np.empty(0), np.empty(0)
    x = np.asarray(mdates.date2num([when for when, _ in series.points]), dtype=float)
    y = np.array([math.nan if v is None else float(v) for _, v in series.points], dtype=float)
    y[~np.isfinite(y)] = math.nan
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    if len(x) >= 3:
        steps = np.diff(x)
        usual = float(np.median(steps))
        if usual > 0:
            breaks = np.flatnonzero(steps > GAP_FACTOR * usual) + 1
            if len(breaks):
                x = np.insert(x, breaks, (x[breaks - 1] + x[breaks]) / 2)
                y = np.insert(y, breaks, math.nan)
    return x, y


# ---------------------------------------------------------------------------------------------- peers

SUSPECT_COLOR = "#d62728"  # the suspect in the alert's red; its peers in the neutral grey of a baseline
PEERS_COLOR = BASELINE_COLOR


def peer_chart(chart: PeerChart, *, tz: ZoneInfo) -> bytes:
    """PNG of a suspect node's signal against its peers' median (bot.node_metrics.series.PeerChart), for the
    thread of the alert that names it; times shown in `tz`."""
    return png(peer_figure(chart, tz=tz))


def peer_figure(chart: PeerChart, *, tz: ZoneInfo) -> Figure:
    """The figure behind `peer_chart`: fig.axes[0] holds the suspect's line (first) and the peers' (second)."""
    import numpy as np
    from matplotlib import dates as mdates

    if not (len(chart.times) == len(chart.suspect) == len(chart.peers_median)):
        raise ValueError("a peer chart needs as many values of the suspect and of its peers as times")
    fig = _new_figure(WIDTH_PX, HEIGHT_PX)
    ax = fig.add_subplot()
    when = [datetime.fromtimestamp(t, tz=UTC) for t in chart.times]
    unit = chart.title.rsplit("(", 1)[1].rstrip(")") if chart.title.endswith(")") and "(" in chart.title else ""
    lines = (
        (Series(label=f"{chart.node}", points=list(zip(when, chart.suspect, strict=True))), SUSPECT_COLOR, "-"),
        (Series(label="peers' median", points=list(zip(when, chart.peers_median, strict=True))), PEERS_COLOR, "--"),
    )
    peak, low, any_data = 0.0, 0.0, False
    for one, color, style in lines:
        x, y = _series_arrays(one)
        if np.isfinite(y).any():
            any_data = True
            peak, low = max(peak, float(np.nanmax(y))), min(low, float(np.nanmin(y)))
        ax.plot(x, y, color=color, linestyle=style, linewidth=1.8, label=one.label)
    if not any_data:
        _no_data(ax)
    if when:
        since, until = min(when), max(when)
        if until <= since:
            until = since + timedelta(minutes=1)
        ax.set_xlim(*(float(v) for v in mdates.date2num([since, until])))
        ax.set_title(_window_text(since, until, tz), loc="right", fontsize=TICK_SIZE, color=MUTED)
    _time_axis(ax, tz)
    _value_axis(ax, ax.yaxis, peak=peak * 1.15 if peak > 0 else 1.0, bottom=low * 1.15 if low < 0 else 0.0)
    if unit:
        ax.set_ylabel(unit, fontsize=LABEL_SIZE)
    ax.set_title(f"{chart.node}: {chart.title}", loc="left", fontsize=TITLE_SIZE, fontweight="bold")
    _legend(fig, ax)
    return fig


# ---------------------------------------------------------------------------------------------- bars


def bar_chart(*, title: str, labels: Sequence[str], values: Sequence[float], unit: str) -> bytes:
    """PNG of horizontal bars, one per label (first label on top), each with its value written at its end."""
    return png(bar_figure(title=title, labels=labels, values=values, unit=unit))


def bar_figure(*, title: str, labels: Sequence[str], values: Sequence[float], unit: str) -> Figure:
    """The figure behind `bar_chart`."""
    if len(labels) != len(values):
        raise ValueError(f"{len(labels)} labels but {len(values)} values")
    numbers = [float(v) for v in values]
    if any(not math.isfinite(v) for v in numbers):
        raise ValueError("bar values must be finite numbers")
    height = max(BAR_MIN_HEIGHT_PX, BAR_FRAME_PX + BAR_HEIGHT_PX * len(numbers))
    fig = _new_figure(WIDTH_PX, height)
    ax = fig.add_subplot()
    ax.set_title(title, loc="left", fontsize=TITLE_SIZE, fontweight="bold")
    if not numbers:
        _no_data(ax)
        ax.set_yticks([])
        _value_axis(ax, ax.xaxis, peak=1.0)
        ax.set_xlabel(unit, fontsize=LABEL_SIZE)
        return fig
    positions = list(range(len(numbers)))
    ax.barh(positions, numbers, color=BAR_COLOR, height=0.65)
    ax.set_yticks(positions, [str(label) for label in labels], fontsize=LABEL_SIZE)
    ax.set_ylim(len(numbers) - 0.5, -0.5)  # first label on top, as it is read
    low, high = min(0.0, *numbers), max(0.0, *numbers)
    span = (high - low) or 1.0
    for position, value in zip(positions, numbers, strict=True):
        ax.text(
            value + (0.01 * span if value >= 0 else -0.01 * span),
            position,
            f"{_num(value)} {unit}",
            va="center",
            ha="left" if value >= 0 else "right",
            fontsize=TICK_SIZE,
        )
    # Room to the right (and left, for negatives) for the value labels.
    _value_axis(ax, ax.xaxis, peak=high + 0.22 * span if high > 0 else 1.0, bottom=low - 0.22 * span if low else 0)
    ax.set_xlabel(unit, fontsize=LABEL_SIZE)
    ax.grid(axis="y", visible=False)
    return fig


# ---------------------------------------------------------------------------------------------- digest


def daily_usage_chart(
    *,
    title: str,
    days: Sequence[date],
    hours_by_type: Mapping[str, Sequence[float]],
    quota_hours_per_day: float | None,
) -> bytes:
    """PNG of instance-hours per day, stacked by instance type, with the quota-hours per day dashed."""
    return png(
        daily_usage_figure(title=title, days=days, hours_by_type=hours_by_type, quota_hours_per_day=quota_hours_per_day)
    )


def daily_usage_figure(
    *,
    title: str,
    days: Sequence[date],
    hours_by_type: Mapping[str, Sequence[float]],
    quota_hours_per_day: float | None,
) -> Figure:
    """The figure behind `daily_usage_chart`: one bar per day (labelled "Mon 23"), one colour per instance type
    in the mapping's order, each day's total written above its bar."""
    stacks: dict[str, list[float]] = {}
    for instance_type, values in hours_by_type.items():
        if len(values) != len(days):
            raise ValueError(f"{instance_type}: {len(values)} values but {len(days)} days")
        stacks[instance_type] = _hours_values(values, instance_type)
    quota = None
    if quota_hours_per_day is not None:
        quota = float(quota_hours_per_day)
        if not math.isfinite(quota) or quota < 0:
            raise ValueError("quota_hours_per_day must be a finite number, 0 or more")

    fig = _new_figure(WIDTH_PX, HEIGHT_PX)
    ax = fig.add_subplot()
    ax.set_title(title, loc="left", fontsize=TITLE_SIZE, fontweight="bold")
    ax.set_ylabel("instance-hours", fontsize=LABEL_SIZE)
    positions = list(range(len(days)))
    totals = [0.0] * len(days)
    for index, (instance_type, values) in enumerate(stacks.items()):
        ax.bar(
            positions,
            values,
            bottom=list(totals),
            width=0.7,
            color=SERIES_COLORS[index % len(SERIES_COLORS)],
            label=instance_type,
        )
        totals = [total + value for total, value in zip(totals, values, strict=True)]
    peak = max(totals, default=0.0)
    for position, total in zip(positions, totals, strict=True):
        if total > 0:
            ax.text(position, total, f"{_num(total)}", ha="center", va="bottom", fontsize=TICK_SIZE)
    if quota is not None and days:
        peak = max(peak, quota)
        ax.axhline(
            quota, color=THRESHOLD_COLOR, linestyle="--", linewidth=1.6, label=f"quota {_num(quota)} instance-hours/day"
        )
    if not days or peak <= 0 or not any(totals):
        _no_data(ax)
    ax.set_xticks(positions, [f"{day:%a} {day.day}" for day in days])
    ax.set_xlim(-0.6, max(len(days), 1) - 0.4)
    # Head room above the tallest bar for its total.
    _value_axis(ax, ax.yaxis, peak=peak * 1.15 if peak > 0 else 1.0)
    ax.grid(axis="x", visible=False)
    _legend(fig, ax)
    return fig


def org_usage_chart(
    *, title: str, orgs: Sequence[str], used: Sequence[float], available: Sequence[float | None]
) -> bytes:
    """PNG of instance-hours used per org (first org on top) against the quota-hours each could have used."""
    return png(org_usage_figure(title=title, orgs=orgs, used=used, available=available))


def org_usage_figure(
    *, title: str, orgs: Sequence[str], used: Sequence[float], available: Sequence[float | None]
) -> Figure:
    """The figure behind `org_usage_chart`: a solid bar of the hours used drawn over a lighter, outlined bar of
    the quota-hours available (left out where `available` is None: the org has no quota), each labelled
    "2,150 / 2,688 h". A bar past its quota is drawn in the threshold colour."""
    if not len(orgs) == len(used) == len(available):
        raise ValueError(f"{len(orgs)} orgs but {len(used)} used and {len(available)} available values")
    hours = _hours_values(used, "used")
    quota = [None if value is None else _hours_values([value], "available")[0] for value in available]

    height = max(BAR_MIN_HEIGHT_PX, BAR_FRAME_PX + BAR_HEIGHT_PX * len(hours))
    fig = _new_figure(WIDTH_PX, height)
    ax = fig.add_subplot()
    ax.set_title(title, loc="left", fontsize=TITLE_SIZE, fontweight="bold")
    ax.set_xlabel("instance-hours", fontsize=LABEL_SIZE)
    if not hours:
        _no_data(ax)
        ax.set_yticks([])
        _value_axis(ax, ax.xaxis, peak=1.0)
        return fig
    positions = list(range(len(hours)))
    with_quota = [(p, q) for p, q in zip(positions, quota, strict=True) if q is not None]
    if with_quota:
        ax.barh(
            [p for p, _ in with_quota],
            [q for _, q in with_quota],
            height=0.7,
            color=QUOTA_FILL,
            edgecolor=BAR_COLOR,
            linewidth=1.2,
            label="quota-hours available",
        )
    over = [q is not None and h > q for h, q in zip(hours, quota, strict=True)]
    ax.barh(
        positions,
        hours,
        height=0.45,
        color=[THRESHOLD_COLOR if o else BAR_COLOR for o in over],
        label="instance-hours used",
    )
    ax.set_yticks(positions, [str(org) for org in orgs], fontsize=LABEL_SIZE)
    ax.set_ylim(len(hours) - 0.5, -0.5)  # first org on top, as it is read
    ends = [max(h, q or 0.0) for h, q in zip(hours, quota, strict=True)]
    span = max(ends) or 1.0
    for position, h, q, end in zip(positions, hours, quota, ends, strict=True):
        label = f"{_num(h)} / {_num(q)} h" if q is not None else f"{_num(h)} h"
        ax.text(end + 0.01 * span, position, label, va="center", ha="left", fontsize=TICK_SIZE)
    # Room to the right for the value labels.
    _value_axis(ax, ax.xaxis, peak=span * 1.3)
    ax.grid(axis="y", visible=False)
    _legend(fig, ax)
    return fig


# Goodput's parts, training first: green for what trained, then the causes of the rest (colour-blind-friendly).
GOODPUT_COLORS = ("#2ca02c", "#d62728", "#ff7f0e", "#9467bd", "#17becf", "#bdbdbd")


def goodput_chart(*, title: str, orgs: Sequence[str], shares: Sequence[Mapping[str, float]]) -> bytes:
    """PNG of each org's held accelerator-hours (first org on top) as one bar of 100 %, stacked by part."""
    return png(goodput_figure(title=title, orgs=orgs, shares=shares))


def goodput_figure(*, title: str, orgs: Sequence[str], shares: Sequence[Mapping[str, float]]) -> Figure:
    """The figure behind `goodput_chart`: one horizontal bar per org, its parts (percent of what it held, in
    the mappings' order, the first being training) stacked left to right, the first part's share written at the
    bar's end; an org that held nothing gets no bar and says so."""
    if len(orgs) != len(shares):
        raise ValueError(f"{len(orgs)} orgs but {len(shares)} bars")
    parts = list(shares[0]) if shares else []
    if any(list(bar) != parts for bar in shares):
        raise ValueError("every bar must have the same parts, in the same order")
    for bar in shares:
        if any(not math.isfinite(v) or v < 0 for v in bar.values()):
            raise ValueError("shares must be finite percentages, 0 or more")
    height = max(BAR_MIN_HEIGHT_PX, BAR_FRAME_PX + 40 + BAR_HEIGHT_PX * len(orgs))
    fig = _new_figure(WIDTH_PX, height)
    ax = fig.add_subplot()
    ax.set_title(title, loc="left", fontsize=TITLE_SIZE, fontweight="bold")
    ax.set_xlabel("% of held accelerator-hours", fontsize=LABEL_SIZE)
    if not orgs:
        _no_data(ax)
        ax.set_yticks([])
        _value_axis(ax, ax.xaxis, peak=100.0)
        return fig
    positions = list(range(len(orgs)))
    left = [0.0] * len(orgs)
    for index, part in enumerate(parts):
        values = [float(bar[part]) for bar in shares]
        ax.barh(
            positions,
            values,
            left=list(left),
            height=0.65,
            color=GOODPUT_COLORS[index % len(GOODPUT_COLORS)],
            label=part,
        )
        left = [a + b for a, b in zip(left, values, strict=True)]
    for position, bar, total in zip(positions, shares, left, strict=True):
        if total <= 0:
            ax.text(1, position, "nothing held", va="center", ha="left", fontsize=TICK_SIZE, color=MUTED)
        elif parts:
            ax.text(total + 1, position, f"{bar[parts[0]]:.1f} %", va="center", ha="left", fontsize=TICK_SIZE)
    ax.set_yticks(positions, [str(org) for org in orgs], fontsize=LABEL_SIZE)
    ax.set_ylim(len(orgs) - 0.5, -0.5)  # first org on top, as it is read
    _value_axis(ax, ax.xaxis, peak=112.0)  # room right of 100 % for the goodput label
    ax.grid(axis="y", visible=False)
    _legend(fig, ax)
    return fig


def _hours_values(values: Sequence[float], what: str) -> list[float]:
    numbers = [float(v) for v in values]
    if any(not math.isfinite(v) or v < 0 for v in numbers):
        raise ValueError(f"{what}: instance-hours must be finite numbers, 0 or more")
    return numbers


# ---------------------------------------------------------------------------------------------- shared


def png(fig: Figure) -> bytes:
    """Render a figure to PNG bytes at its own size (no tight cropping, so every chart has a known size)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    canvas.print_png(buffer, metadata={"Software": None})
    return buffer.getvalue()


def _new_figure(width_px: int, height_px: int) -> Figure:
    from matplotlib.figure import Figure
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    layout = ConstrainedLayoutEngine(w_pad=0.12, h_pad=0.08)
    return Figure(figsize=(width_px / DPI, height_px / DPI), dpi=DPI, layout=layout, facecolor="white")


def _time_axis(ax: Axes, tz: ZoneInfo) -> None:
    """Date ticks in `tz`, few enough to read at thumbnail size; the date itself goes in the offset label."""
    from matplotlib import dates as mdates

    locator = mdates.AutoDateLocator(tz=tz, minticks=4, maxticks=8)
    formatter = mdates.ConciseDateFormatter(locator, tz=tz, show_offset=True)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(formatter)
    ax.tick_params(axis="x", labelsize=TICK_SIZE)
    ax.set_xlabel(f"time ({tz.key})", fontsize=LABEL_SIZE, color=MUTED)


def _value_axis(ax: Axes, axis: Any, *, peak: float, bottom: float = 0.0) -> None:
    """A value axis from `bottom` (0) to `peak` with thousands separators and light grid lines."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    if axis is ax.yaxis:
        ax.set_ylim(bottom, peak)
        ax.grid(axis="y", color="#dddddd", linewidth=0.8)
    else:
        ax.set_xlim(bottom, peak)
        ax.grid(axis="x", color="#dddddd", linewidth=0.8)
    ax.set_axisbelow(True)
    decimals = 0 if peak - bottom >= 20 else 1 if peak - bottom >= 2 else 2
    axis.set_major_locator(MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10]))
    axis.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value:,.{decimals}f}"))
    ax.tick_params(axis="both", labelsize=TICK_SIZE)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _no_data(ax: Axes) -> None:
    ax.text(
        0.5,
        0.5,
        NO_DATA,
        transform=ax.transAxes,
        ha="center",
        va="center",
        fontsize=TITLE_SIZE + 3,
        color=MUTED,
    )


def _legend(fig: Figure, ax: Axes) -> None:
    """The legend under the plot, in rows, so it never covers the data."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        fig.legend(
            handles,
            labels,
            loc="outside lower center",
            ncols=min(len(handles), 4),
            frameon=False,
            fontsize=TICK_SIZE,
        )


def _window_text(since: datetime, until: datetime, tz: ZoneInfo) -> str:
    """'Mar 3 09:00-15:00 JST' in `tz` (with an en dash), with both dates when the window spans days, and
    both zone names when it spans a daylight-saving change ('Mar 7 16:00 EST - Mar 8 05:00 EDT')."""
    start, end = since.astimezone(tz), until.astimezone(tz)
    zone = end.tzname() or tz.key
    start_zone = "" if start.tzname() == end.tzname() else f" {start.tzname()}"
    if end - start >= timedelta(days=2):
        return f"{start:%b} {start.day} {DASH} {end:%b} {end.day} {zone}"
    if start.date() == end.date() and not start_zone:
        return f"{start:%b} {start.day} {start:%H:%M}{DASH}{end:%H:%M} {zone}"
    return f"{start:%b} {start.day} {start:%H:%M}{start_zone} {DASH} {end:%b} {end.day} {end:%H:%M} {zone}"


def _num(value: float) -> str:
    """A value with thousands separators and as many decimals as its size needs."""
    if abs(value) >= 100 or value == int(value):
        return f"{value:,.0f}"
    return f"{value:,.1f}" if abs(value) >= 10 else f"{value:,.2f}"


def _require_aware(when: datetime, what: str) -> None:
    if when.tzinfo is None or when.utcoffset() is None:
        raise ValueError(f"{what} is a naive datetime ({when.isoformat()}); charts need timezone-aware times")
