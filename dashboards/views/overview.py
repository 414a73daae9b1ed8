"""The overview: is everything flowing? Totals, every queue's figures, and (with the metrics) health and charts."""

from django.http import HttpRequest, HttpResponse

from dashboards.permissions import view_required
from dashboards.queue_status import live_workers, queue_statuses
from dashboards.rendering import page


@view_required
def overview(request: HttpRequest) -> HttpResponse:
    workers = live_workers()
    queues = queue_statuses(workers=workers)
    totals = {
        "waiting": sum(q.counts.queued for q in queues),
        "scheduled": sum(q.counts.scheduled for q in queues),
        "running": sum(q.counts.running for q in queues),
        "dead": sum(q.counts.dead for q in queues),
        "workers": len(workers),
        "threads": sum(w.concurrency for w in workers),
        "busy": sum(len(w.current) for w in workers),
    }
    context = {"queues": queues, "totals": totals}
    return page(request, "dashboards/overview.html", "overview", context, partial="live")
