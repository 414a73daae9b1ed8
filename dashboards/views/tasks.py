"""Tasks: per task over a chosen range, how many ran, how often they succeeded, retried and died, and how long
they took (percentiles and a histogram of run times), from the per-minute counters (no job is read)."""

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse

from dashboards import charts, task_options
from dashboards.permissions import view_required
from dashboards.rendering import page
from dashboards.views.overview import RANGES, chosen_range
from jobconsole.engine import get_client
from jobconsole.metrics import series
from jobconsole.metrics.series import HistogramBin, TaskSummary


def _label(b: HistogramBin) -> str:
    def short(seconds: float) -> str:
        if seconds < 1:
            return f"{seconds * 1000:g} ms"
        if seconds < 120:
            return f"{seconds:.3g} s"
        return f"{seconds / 60:.3g} min"

    return f"≥ {short(b.low)}" if b.high is None else f"{short(b.low)} to {short(b.high)}"


@view_required
def task_list(request: HttpRequest) -> HttpResponse:
    span, problem = chosen_range(request)
    summaries = series.Series(span).tasks()
    registered = get_client().queries.tasks.options()
    seen = {s.task for s in summaries}
    idle = sorted(name for name in registered if name not in seen)
    context = {"tasks": summaries, "idle": idle, "options": registered, "range": span, "ranges": RANGES,
               "problem": problem}  # fmt: skip
    return page(request, "dashboards/tasks.html", "tasks", context)


@view_required
def task_detail(request: HttpRequest, name: str) -> HttpResponse:
    span, problem = chosen_range(request)
    registered = get_client().queries.tasks.options()
    data = series.Series(span, task=name)
    found = [s for s in data.tasks() if s.task == name]
    if not found and name not in registered:
        raise Http404(f"No task named {name!r} has run or been registered.")
    summary: TaskSummary | None = found[0] if found else None
    counts = data.counts()
    latency = data.latency()
    figures: dict[str, Any] = {
        "histogram": charts.histogram(
            [_label(b) for b in summary.runtime_histogram], [b.count for b in summary.runtime_histogram],
            x_title="run time", y_title="attempts",
        ) if summary else None,
        "outcomes": charts.time_series(
            {name: counts.points(name, per_minute=True) for name in ("completed", "failed", "dead")},
            y_title="per minute", colors={"completed": "#1f8a4c", "failed": "#a86400", "dead": "#c4302b"},
        ),
        "run": charts.time_series(
            {q: latency.points("run", q) for q in ("p50", "p95", "p99")}, y_title="seconds running",
            colors={"p50": "#2f6fde", "p95": "#a86400", "p99": "#c4302b"},
        ),
    }  # fmt: skip
    context = {"name": name, "summary": summary, "options": task_options.describe(registered.get(name, {})),
               "known_queues": get_client().queries.queues.names(), "figures": figures, "range": span,
               "ranges": RANGES, "problem": problem}  # fmt: skip
    return page(request, "dashboards/task.html", "tasks", context)
