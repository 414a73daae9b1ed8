"""Scheduled: delayed jobs and retries waiting for their time, soonest first, and a histogram of what falls due
when (the next hour by minute, or the next day by hour), counted by the engine without reading a job."""

from datetime import UTC, datetime, timedelta
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from dashboards.charts import time_series
from dashboards.permissions import view_required
from dashboards.rendering import page
from dashboards.views.running import chosen_queue, complain
from jobconsole.core import InvalidJob
from jobconsole.engine import get_client

PAGE = 50
# range name -> (bucket width, buckets, label)
RANGES = {
    "hour": (timedelta(minutes=1), 60, "next hour, by minute"),
    "day": (timedelta(hours=1), 24, "next day, by hour"),
}
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
FAR = datetime(9999, 1, 1, tzinfo=UTC)


def buckets(now: datetime, width: timedelta, count: int) -> list[datetime]:
    """The bounds of `count` buckets of `width` (a minute or an hour) aligned to the operator's clock: the
    first begins at `now` (jobs already due are counted apart) and ends at the next whole minute or hour."""
    local = timezone.localtime(now).replace(second=0, microsecond=0)
    if width >= timedelta(hours=1):
        local = local.replace(minute=0)
    aligned = local.astimezone(UTC)
    return [now, *[aligned + width * i for i in range(1, count + 1)]]


def histogram(queues: list[str], now: datetime, range_name: str) -> dict[str, Any]:
    """Counts of due jobs per bucket, with those overdue (due, not yet moved to the queue) and those later
    than the range, in one round trip."""
    width, count, label = RANGES[range_name]
    starts = buckets(now, width, count)
    counts = get_client().queries.jobs.due_counts([EPOCH, *starts, FAR], queues)
    overdue, in_range, later = counts[0], counts[1:-1], counts[-1]
    fmt = "%H:%M" if width < timedelta(hours=1) else "%a %H:00"
    # Each bucket is labelled by its whole minute or hour; the first is that of `now`, though it starts at `now`.
    local = [timezone.localtime(s) for s in [starts[1] - width, *starts[1:-1]]]
    figure = time_series({"jobs due": list(zip(local, in_range, strict=True))}, y_title="jobs", kind="bar")
    if figure is not None:
        # Each bar spans its minute or hour instead of standing on the start of it.
        figure["data"][0].update(xperiod=int(width.total_seconds() * 1000), xperiodalignment="middle",
                                 hovertemplate="%{y} due from %{x}<extra></extra>")  # fmt: skip
        figure["layout"].update(bargap=0.15, hovermode="closest")
    rows = [(s, s.strftime(fmt), n) for s, n in zip(local, in_range, strict=True) if n]
    return {
        "figure": figure if any(in_range) else None, "rows": rows, "label": label, "overdue": overdue,
        "in_range": sum(in_range), "later": later, "total": overdue + sum(in_range) + later, "range": range_name,
        "zone": timezone.get_current_timezone_name(),
    }  # fmt: skip


@view_required
def scheduled(request: HttpRequest) -> HttpResponse:
    queries = get_client().queries
    queues = queries.queues.names()
    queue = chosen_queue(request, queues)
    names = [queue] if queue else queues
    range_name = request.GET.get("range", "hour")
    if range_name not in RANGES:
        complain(request, f"Unknown range {range_name[:20]!r}: choose the next hour or the next day.")
        range_name = "hour"
    cursor = request.GET.get("cursor") or None
    try:
        found = queries.jobs.timed("scheduled", names, cursor=cursor, limit=PAGE)
    except InvalidJob:
        complain(request, "That page link is no longer valid; showing the first page.")
        cursor = None
        found = queries.jobs.timed("scheduled", names, limit=PAGE)
    context = {
        "jobs": found.jobs, "next_cursor": found.next_cursor, "paged": bool(cursor), "queues": queues,
        "queue": queue, "histogram": histogram(names, queries.now(), range_name), "ranges": list(RANGES),
    }  # fmt: skip
    return page(request, "dashboards/scheduled.html", "scheduled", context, partial="live")
