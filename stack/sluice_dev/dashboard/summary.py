"""The dashboard as text: per panel, each series' last value, its range and a
sparkline of the window, and a line for every query that returned no data (a panel
with no data is a bug). Purely computational: it renders what :mod:`.fetch`
returned."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from sluice_dev.dashboard.fetch import Answer, Point

BARS = "▁▂▃▄▅▆▇█"
WIDTH = 40
"""Characters of a sparkline: the window's points resampled to this many."""


def sparkline(points: Sequence[Point], width: int = WIDTH) -> str:
    """The points' values as bars, lowest to highest; a gap (NaN) is a space."""
    values = [v for _t, v in points]
    if not values:
        return ""
    if len(values) > width:
        values = [values[int(i * len(values) / width)] for i in range(width)]
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return " " * len(values)
    low, high = min(finite), max(finite)
    span = high - low
    out = []
    for value in values:
        if not math.isfinite(value):
            out.append(" ")
        elif span == 0:
            out.append(BARS[0])
        else:
            out.append(BARS[min(len(BARS) - 1, int((value - low) / span * len(BARS)))])
    return "".join(out)


def number(value: float) -> str:
    if not math.isfinite(value):
        return "NaN"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def render(answers: Iterable[Answer]) -> str:
    """The answers grouped by panel, in the dashboard's order."""
    lines: list[str] = []
    panel = None
    for answer in answers:
        if answer.query.panel != panel:
            panel = answer.query.panel
            lines += ["", panel]
        if answer.error:
            lines.append(f"  ERROR {answer.promql}: {answer.error}")
            continue
        if not answer.has_data:
            lines.append(f"  NO DATA  {answer.promql}")
            continue
        for series in answer.series:
            finite = [v for _t, v in series.points if math.isfinite(v)]
            last = series.points[-1][1] if series.points else math.nan
            bounds = f"{number(min(finite))}..{number(max(finite))}" if finite else "NaN"
            lines.append(
                f"  {series.name[:44]:<44} last {number(last):>9}  "
                f"range {bounds:<19} {sparkline(series.points)}"
            )
    return "\n".join(lines).lstrip("\n")


def missing(answers: Iterable[Answer]) -> list[Answer]:
    """The queries that returned no data (or failed)."""
    return [a for a in answers if a.error or not a.has_data]
