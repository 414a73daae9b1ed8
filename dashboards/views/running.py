"""Running and stalled: every running job of every queue, earliest lease deadline first (so jobs whose lease
ran out come first), with its worker, runtime, progress, heartbeat age and, when stalled, the evidence."""

from django.contrib import messages
from django.http import HttpRequest, HttpResponse

from dashboards.permissions import view_required
from dashboards.rendering import htmx_asked, page
from dashboards.stalled import running_jobs
from jobconsole.core import InvalidJob
from jobconsole.engine import get_client

PAGE = 50


def complain(request: HttpRequest, text: str) -> None:
    """A message about the page's address, on the page itself only: the live part's polls of the same address
    would otherwise pile the same message up for the next page."""
    if not htmx_asked(request):
        messages.error(request, text)


def chosen_queue(request: HttpRequest, queues: list[str]) -> str:
    """The `queue` filter of the running and scheduled pages: '' for every queue (and for a name no job has
    used, with a message)."""
    queue = request.GET.get("queue", "")
    if queue and queue not in queues:
        complain(request, f"Unknown queue {queue[:100]!r}; showing every queue.")
        return ""
    return queue


@view_required
def running(request: HttpRequest) -> HttpResponse:
    queries = get_client().queries
    queues = queries.queues.names()
    queue = chosen_queue(request, queues)
    names = [queue] if queue else queues
    cursor = request.GET.get("cursor") or None
    try:
        found = queries.jobs.timed("running", names, cursor=cursor, limit=PAGE)
    except InvalidJob:
        complain(request, "That page link is no longer valid; showing the first page.")
        cursor = None
        found = queries.jobs.timed("running", names, limit=PAGE)
    workers = queries.workers.all()
    jobs = running_jobs(found.jobs, queries.now(), workers, queries.tasks.options())
    context = {
        "jobs": jobs, "next_cursor": found.next_cursor, "paged": bool(cursor), "queues": queues, "queue": queue,
        "stalled": sum(1 for j in jobs if j.stalled), "orphaned": sum(1 for j in jobs if j.orphaned),
        "running_total": sum(c.running for c in queries.queues.counts_many(names)),
        "workers_alive": sum(1 for w in workers if w.state != "gone"),
        "workers_gone": sum(1 for w in workers if w.state == "gone"),
    }  # fmt: skip
    return page(request, "dashboards/running.html", "running", context, partial="live")
