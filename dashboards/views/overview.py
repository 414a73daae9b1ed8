"""The overview: is everything flowing? Health with its reasons, every queue's figures, and charts of depth,
throughput and latency over the last hour, day or week, with operator actions marked on them."""

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from dashboards import charts
from dashboards.permissions import view_required
from dashboards.queue_status import live_workers, queue_statuses, retrying_counts
from dashboards.rendering import htmx_asked, page
from jobconsole import health, service_health
from jobconsole.core import JobState
from jobconsole.core.states import STATES
from jobconsole.metrics import series
from jobconsole.metrics.windows import parse_span

RANGES = {"hour": "Last hour", "day": "Last day", "week": "Last week"}
QUEUE_LINES = 8  # queues drawn one by one on the depth chart; the rest are summed as "other queues"


def chosen_range(request: HttpRequest) -> tuple[str, str | None]:
    """The range asked for, and a message when the asked one is unknown (the hour is shown then)."""
    asked = request.GET.get("range", "hour")
    if asked in RANGES:
        return asked, None
    return "hour", f"Unknown range {asked[:40]!r}: showing the last hour (choose hour, day or week)."


@view_required
def overview(request: HttpRequest) -> HttpResponse:
    span, problem = chosen_range(request)
    if htmx_asked(request) and request.GET.get("part") != "live":  # the charts' poll: only what they draw
        charts = {"range": span, "figures": figures(span)}
        return page(request, "dashboards/overview.html", "overview", charts, partial="charts")
    workers = live_workers()
    queues = queue_statuses(workers=workers)
    state = health.check()
    service = service_health.check(queues=state.queues)
    by_queue = {q.queue: q for q in state.queues}
    flow = {r.queue: r for r in series.rates()}
    retrying = retrying_counts([q.name for q in queues])
    for q in queues:
        q.extra["health"] = by_queue.get(q.name)
        q.extra["rate"] = flow.get(q.name)
        q.extra["retrying"] = retrying[q.name]
    totals = {
        "queued": sum(q.counts.queued for q in queues),
        "waiting": sum(q.counts.sets.get("waiting", 0) for q in queues),  # the state: on their dependencies
        "scheduled": sum(q.counts.scheduled for q in queues),
        "retrying": sum(retrying.values()),
        "running": sum(q.counts.running for q in queues),
        "dead": sum(q.counts.dead for q in queues),
        "workers": len(workers),
        "threads": sum(w.concurrency for w in workers),
        "busy": sum(len(w.current) for w in workers),
        "throughput": sum(r.throughput for r in flow.values()),
    }
    context: dict[str, Any] = {
        "queues": queues, "totals": totals, "health": state, "service": service, "range": span, "ranges": RANGES,
        "problem": problem, "silenced": [*state.silenced, *service.silenced],
        "waiting_label": STATES[JobState.WAITING].label,
    }  # fmt: skip
    if htmx_asked(request):  # the live part's poll
        return page(request, "dashboards/overview.html", "overview", context, partial="live")
    context["figures"] = figures(span)
    return page(request, "dashboards/overview.html", "overview", context)


def figures(span: str, queue: str | None = None) -> dict[str, dict[str, Any] | None]:
    """The four charts of the range: depth, jobs per minute, time in queue, run time; of every queue (depth drawn
    per queue) or of one (its queued, scheduled and running jobs), with the operator actions on it marked."""
    now = timezone.now()
    since = now - parse_span(span)
    markers = charts.operator_markers(since, queue=queue)
    counts_and_latency = series.Series(span, queue=queue)
    counts = counts_and_latency.counts()
    latency = counts_and_latency.latency()
    depth = series.depth(span, queue=queue)
    lines: dict[str, list[charts.Point]]
    if queue is not None:
        lines = {name: d.points(name) for d in depth for name in ("queued", "scheduled", "running")}
    else:
        # Queues that had jobs waiting in the range, biggest first; when none had, one line for them all at zero.
        busy = sorted((d for d in depth if max(d.queued, default=0) > 0), key=lambda d: -max(d.queued))
        lines = {d.queue: d.points("queued") for d in busy[:QUEUE_LINES]}
        if len(busy) > QUEUE_LINES:
            lines["other queues"] = _summed([d.points("queued") for d in busy[QUEUE_LINES:]])
        if not lines and depth:
            lines["every queue"] = _summed([d.points("queued") for d in depth])
    throughput = {
        "completed": counts.points("completed", per_minute=True),
        "failed": counts.points("failed", per_minute=True),
        "dead": counts.points("dead", per_minute=True),
    }
    colors = {"completed": "#1f8a4c", "failed": "#a86400", "dead": "#c4302b", "p50": "#2f6fde", "p95": "#a86400",
              "p99": "#c4302b", "queued": "#2f6fde", "scheduled": "#a86400", "running": "#5a48c8"}  # fmt: skip
    return {
        "depth": charts.time_series(
            lines,
            y_title="jobs" if queue else "queued jobs",
            markers=markers,
            x_range=(since, now),
            colors=colors if queue else None,  # the overview's lines are queues: the palette's colours in turn
        ),
        "throughput": charts.time_series(
            throughput, y_title="jobs per minute", markers=markers, colors=colors, x_range=(since, now)
        ),
        "wait": charts.time_series(
            {q: latency.points("wait", q) for q in ("p50", "p95", "p99")},
            y_title="seconds in queue",
            markers=markers,
            colors=colors,
            x_range=(since, now),
        ),
        "run": charts.time_series(
            {q: latency.points("run", q) for q in ("p50", "p95", "p99")},
            y_title="seconds running",
            markers=markers,
            colors=colors,
            x_range=(since, now),
        ),
    }


def _summed(groups: list[list[charts.Point]]) -> list[charts.Point]:
    """Points of several queues added up by time (the samples of one pass share their time)."""
    totals: dict[Any, float] = {}
    for points in groups:
        for at, value in points:
            totals[at] = totals.get(at, 0) + (value or 0)
    return sorted(totals.items())
