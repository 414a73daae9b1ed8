"""Chart figures: a measured point with no measured neighbour is drawn as a marker (a line through one point
draws nothing, so a fresh system's latency charts looked empty)."""

from datetime import UTC, datetime, timedelta

from dashboards.charts import time_series

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _minutes(*values: float | None) -> list[tuple[datetime, float | None]]:
    return [(T0 + timedelta(minutes=n), v) for n, v in enumerate(values)]


def test_a_lone_point_gets_a_marker_and_points_on_a_line_do_not() -> None:
    figure = time_series({"p50": _minutes(None, 0.2, None, 0.3, 0.4, None, 0.5)}, y_title="s")
    assert figure is not None
    [trace] = figure["data"]
    assert trace["mode"] == "lines+markers"
    assert trace["marker"]["size"] == [0, 6, 0, 0, 0, 0, 6]


def test_a_continuous_line_has_no_markers() -> None:
    figure = time_series({"completed": _minutes(0, 3, 5)}, y_title="jobs")
    assert figure is not None
    [trace] = figure["data"]
    assert trace["mode"] == "lines" and "marker" not in trace


def test_the_time_axis_spans_the_chosen_range_even_with_one_sample() -> None:
    figure = time_series({"q": _minutes(7)}, y_title="jobs", x_range=(T0 - timedelta(hours=1), T0))
    assert figure is not None
    # One point alone made plotly zoom in to milliseconds around it; the range keeps the hour in view.
    start, end = figure["layout"]["xaxis"]["range"]
    assert datetime.fromisoformat(end) - datetime.fromisoformat(start) == timedelta(hours=1)


def test_operator_markers_close_together_do_not_overlap_and_stay_inside_the_chart() -> None:
    from jobconsole.models import AuditLog

    def action(name: str, minutes_before: float) -> AuditLog:
        return AuditLog(at=T0 - timedelta(minutes=minutes_before), action=name, queue="emails", actor="ana", count=1)

    # A pause and its resume a minute apart, and a pause two minutes before the end of the hour shown.
    marks = [action("pause", 30), action("resume", 29), action("pause", 2)]
    figure = time_series({"q": _minutes(1, 2)}, y_title="jobs", markers=marks, x_range=(T0 - timedelta(hours=1), T0))
    assert figure is not None
    paused, resumed, late = figure["layout"]["annotations"]
    assert [n["text"] for n in (paused, resumed, late)] == ["pause emails", "resume emails", "pause emails"]
    assert paused["y"] != resumed["y"], "two labels a minute apart share a row: they overlap"
    # Inside the plot (above it the chart's top margin cut them off), and a late one ends at its line.
    assert all(n["yanchor"] == "top" and 0 < n["y"] <= 1 for n in (paused, resumed, late))
    assert (paused["xanchor"], late["xanchor"]) == ("left", "right")
    lines = figure["layout"]["shapes"]
    assert [line["x0"] for line in lines] == [n["x"] for n in (paused, resumed, late)]
