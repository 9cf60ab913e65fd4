"""What a chart shows, as plain data: lines over time (`Series`), shaded stretches such as an alert episode
(`Band`), the zoomed window of an anomaly too short to see in the long panel (`Zoom`, `zoom_for`), and the
throughput chart as a whole (`ThroughputChart`). The monitors build these; bot.slack.charts draws them.

The zoom is decided here, not where the chart is drawn, because it widens what the monitor reads: the zoomed
panel shows ZOOM_MARGIN either side of the anomaly, which may start before the long panel does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

ZOOM_MARGIN = timedelta(minutes=30)  # shown on each side of a short anomaly
MIN_BAND_PX = 60  # an anomaly narrower than this in the long panel gets a zoomed panel
PLOT_WIDTH_PX = 880  # the plot area of a 1000 px chart (the rest is the value axis and margins)


@dataclass(frozen=True)
class Series:
    """One line: (time, value) points in time order; a value of None is a gap (no data there)."""

    label: str
    points: Sequence[tuple[datetime, float | None]]


@dataclass(frozen=True)
class Band:
    """A shaded stretch of time, e.g. an alert episode; `end` None means it is still open (to the right edge)."""

    start: datetime
    end: datetime | None
    label: str


@dataclass(frozen=True)
class Zoom:
    """The window of the zoomed panel: a short anomaly and ZOOM_MARGIN either side of it."""

    since: datetime
    until: datetime

    @property
    def px_per_minute(self) -> float:
        return PLOT_WIDTH_PX / ((self.until - self.since).total_seconds() / 60)


def px_per_minute(since: datetime, until: datetime) -> float:
    """How wide a minute is drawn in a panel of [since, until]."""
    return PLOT_WIDTH_PX / ((until - since).total_seconds() / 60)


def zoom_for(band: Band, *, since: datetime, until: datetime) -> Zoom | None:
    """The zoomed window for an anomaly too short to be seen in the chart of [since, until] (narrower than
    MIN_BAND_PX there: a 3-minute stall in 6 hours is 7 px), else None. It spans the anomaly and ZOOM_MARGIN
    either side, stopping at `until` (nothing is known after it): some 14 px a minute, each 30-second sample
    drawn 7 px from the next, and a 3-minute stall 40 px wide."""
    end = until if band.end is None else min(band.end, until)
    width_px = max(0.0, (end - band.start).total_seconds() / 60) * px_per_minute(since, until)
    if width_px >= MIN_BAND_PX:
        return None
    return Zoom(since=band.start - ZOOM_MARGIN, until=min(end + ZOOM_MARGIN, until))


@dataclass(frozen=True)
class ThroughputChart:
    """Throughput over [since, until]: one line per series, the baseline and the alert threshold, anomaly
    bands, and with `zoom` a second panel under it showing that window at a readable scale."""

    title: str
    series: Sequence[Series]
    baseline: float | None
    threshold: float | None
    bands: Sequence[Band]
    since: datetime
    until: datetime
    unit: str
    zoom: Zoom | None
