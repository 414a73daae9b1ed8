"""Plotly figures as plain dicts (plotly.js draws them; the Python plotly package only ships the script).

Building dicts rather than plotly.graph_objects keeps a page's server time low: no validation of every
attribute on every request. Operator actions from the audit log become markers on time charts."""

from collections.abc import Mapping, Sequence
from datetime import datetime, tzinfo
from functools import lru_cache
from typing import Any

from django.utils import timezone

from jobconsole.models import AuditLog

type Point = tuple[datetime, float | None]
# The actions worth a marker on a chart: they change what the lines do next.
MARKED_ACTIONS = ("pause", "resume", "resubmit", "bulk_resubmit", "purge", "bulk_purge", "retry", "delete")
PALETTE = ["#2f6fde", "#1f8a4c", "#c4302b", "#a86400", "#5a48c8", "#0f8f9e", "#b3407f", "#6b7380"]


def _x(moment: datetime) -> str:
    return _wall_clock(moment, timezone.get_current_timezone())


@lru_cache(maxsize=8192)
def _wall_clock(moment: datetime, zone: tzinfo) -> str:
    """The operator's wall-clock time as plotly reads a date. Cached: a range's bucket times repeat across a
    page's charts and its polls, and converting each one took a fifth of the overview's server time."""
    return moment.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S")


def time_series(
    series: Mapping[str, Sequence[Point]],
    *,
    y_title: str,
    kind: str = "line",
    stacked: bool = False,
    markers: Sequence[AuditLog] = (),
    colors: Mapping[str, str] | None = None,
    x_range: tuple[datetime, datetime] | None = None,
) -> dict[str, Any] | None:
    """Lines (or bars) over time, one trace per name; None when every series is empty. `x_range`: the time axis
    spans the chosen range, not only the points (one sample alone made plotly zoom in to milliseconds)."""
    if not any(points for points in series.values()):
        return None
    data: list[dict[str, Any]] = []
    zone = timezone.get_current_timezone()  # once: per point, it was a tenth of the overview's server time
    for index, (name, points) in enumerate(series.items()):
        color = (colors or {}).get(name, PALETTE[index % len(PALETTE)])
        trace: dict[str, Any] = {
            "name": name,
            "x": [_wall_clock(t, zone) for t, _ in points],
            "y": [v for _, v in points],
            "type": "bar" if kind == "bar" else "scatter",
            "hovertemplate": "%{y:,.4~g}<extra>" + name + "</extra>",
        }
        if kind == "bar":
            trace["marker"] = {"color": color}
        else:
            trace.update(mode="lines", line={"color": color, "width": 2, "shape": "linear"})
            if sizes := _lone_point_sizes([v for _, v in points]):
                trace.update(mode="lines+markers", marker={"color": color, "size": sizes})
            if stacked:
                trace.update(stackgroup="one", line={"color": color, "width": 1})
        data.append(trace)
    layout: dict[str, Any] = {"yaxis": {"title": {"text": y_title}, "rangemode": "tozero"}, "xaxis": {"type": "date"}}
    if x_range is not None:
        layout["xaxis"]["range"] = [_x(x_range[0]), _x(x_range[1])]
    if kind == "bar" and stacked:
        layout["barmode"] = "stack"
    shapes, notes = _markers(markers, x_range)
    if shapes:
        layout["shapes"] = shapes
        layout["annotations"] = notes
    return {"data": data, "layout": layout}


def _lone_point_sizes(values: Sequence[float | None]) -> list[int] | None:
    """Marker sizes that show the points a line cannot (no measured neighbour on either side, such as the one
    minute a fresh system has measured), and hide the others; None when every point is on a line."""
    sizes = [
        6 if value is not None and (i == 0 or values[i - 1] is None) and (i == len(values) - 1 or values[i + 1] is None)
        else 0
        for i, value in enumerate(values)
    ]  # fmt: skip
    return sizes if any(sizes) else None


# A marker's label, as a share of the time axis per character (10 px text on a chart some 500 px wide): labels
# closer than their width go on the next row down, so a pause and its resume a minute apart do not overlap.
LABEL_SHARE_PER_CHAR = 0.012
LABEL_ROWS = 4  # rows of labels from the top of the plot; more close markers reuse the rows (their lines show)


def _markers(
    records: Sequence[AuditLog], x_range: tuple[datetime, datetime] | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A dotted line and a label per operator action. The labels sit inside the plot (above it they were cut off
    by the chart's top margin), horizontal, in rows that keep close ones apart, and end at their line when the
    line is in the right part of the chart (so they stay inside it)."""
    shapes: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    if not records:
        return shapes, notes
    ordered = sorted(records, key=lambda record: record.at)
    start, end = x_range or (ordered[0].at, ordered[-1].at)
    span = max((end - start).total_seconds(), 1.0)
    row_ends = [float("-inf")] * LABEL_ROWS  # per row, where (as a share of the axis) its last label ends
    for record in ordered:
        x = _x(record.at)
        label = f"{record.action.replace('_', ' ')} {record.queue}".strip()  # "bulk resubmit reports"
        at = (record.at - start).total_seconds() / span
        width = len(label) * LABEL_SHARE_PER_CHAR
        right = at > 0.6  # the label ends at its line instead of starting there
        left_edge = at - width if right else at
        row = next(
            (i for i, ends in enumerate(row_ends) if ends < left_edge), min(range(LABEL_ROWS), key=row_ends.__getitem__)
        )
        row_ends[row] = at if right else at + width
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1,
                       "line": {"color": "#a86400", "width": 1, "dash": "dot"}})  # fmt: skip
        anchor = {"xanchor": "right", "xshift": -3} if right else {"xanchor": "left", "xshift": 3}
        notes.append({"x": x, "y": 1 - row * 0.1, "xref": "x", "yref": "paper", "text": label, "showarrow": False,
                      "font": {"size": 10, "color": "#a86400"}, "yanchor": "top", **anchor,
                      "hovertext": f"{record.actor}: {record.action} ({record.count})"})  # fmt: skip
    return shapes, notes


def operator_markers(since: datetime, queue: str | None = None, limit: int = 30) -> list[AuditLog]:
    """The operator actions in a chart's range (newest `limit`), for markers."""
    rows = AuditLog.objects.filter(at__gte=since, action__in=MARKED_ACTIONS)
    if queue:
        rows = rows.filter(queue__in=[queue, ""])
    return list(rows.order_by("-at")[:limit])


def histogram(
    labels: Sequence[str], counts: Sequence[int], *, x_title: str, y_title: str = "jobs"
) -> dict[str, Any] | None:
    """Bars over labelled buckets (due times, run-time buckets)."""
    if not any(counts):
        return None
    return {
        "data": [{"type": "bar", "x": list(labels), "y": list(counts), "marker": {"color": PALETTE[0]},
                  "hovertemplate": "%{x}: %{y:,}<extra></extra>"}],
        "layout": {"xaxis": {"title": {"text": x_title}, "type": "category"}, "yaxis": {"title": {"text": y_title}},
                   "hovermode": "closest", "bargap": 0.1},
    }  # fmt: skip
