"""Plain-SVG geometry for the hit-rate chart: the server computes the coordinates, the template draws them."""
from __future__ import annotations

import dataclasses

from xlacs_server.dashboard import models

WIDTH, HEIGHT = 720, 220
LEFT, RIGHT, TOP, BOTTOM = 44, 12, 10, 26  # margins for the axis labels
COLORS = ("#2563eb", "#d97706", "#059669", "#db2777", "#7c3aed", "#0891b2")


@dataclasses.dataclass(frozen=True)
class Series:
    tier: str
    color: str
    lines: list[str]  # polyline `points`, one per run of intervals that had lookups
    dots: list[tuple[float, float]]


@dataclasses.dataclass(frozen=True)
class Chart:
    width: int
    height: int
    plot_left: int  # the plot area's x range; axis labels sit outside it
    plot_right: int
    series: list[Series]
    x_labels: list[tuple[float, str, str]]  # x, text, text-anchor
    y_labels: list[tuple[float, str]]


def hit_rate_chart(history: list[models.TierHistory], interval_s: float) -> Chart:
    times = [p.time_unix for h in history for p in h.points]
    end = max(times, default=0.0)
    span = max(end - min(times, default=end), interval_s)

    def x(t: float) -> float:
        return round(LEFT + (WIDTH - LEFT - RIGHT) * (1 - (end - t) / span), 1)

    def y(rate: float) -> float:
        return round(TOP + (HEIGHT - TOP - BOTTOM) * (1 - rate), 1)

    series = []
    for index, h in enumerate(history):
        runs: list[list[tuple[float, float]]] = [[]]
        for p in h.points:
            if p.hit_rate is not None:
                runs[-1].append((x(p.time_unix), y(p.hit_rate)))
            elif runs[-1]:  # no lookups in that interval: a gap in the line, not a zero
                runs.append([])
        runs = [r for r in runs if r]
        series.append(Series(h.tier, COLORS[index % len(COLORS)],
                             [" ".join(f"{px},{py}" for px, py in r) for r in runs], [pt for r in runs for pt in r]))
    x_labels = [(x(end - span), f"-{span:.0f} s", "start"), (x(end - span / 2), f"-{span / 2:.0f} s", "middle"),
                (x(end), "latest sample", "end")]
    y_labels = [(y(r), f"{r:.0%}") for r in (0, 0.5, 1)]
    return Chart(WIDTH, HEIGHT, LEFT, WIDTH - RIGHT, series, x_labels, y_labels)
