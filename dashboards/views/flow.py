"""Flow control: every concurrency group (slots held of its limit, starts in its rate window, jobs waiting for
a slot, by queue) and every queue limit (running of the limit), live from Redis."""

from django.http import HttpRequest, HttpResponse

from dashboards.permissions import view_required
from dashboards.rendering import page
from jobconsole.core.groups import PERIODS_MS
from jobconsole.engine import get_client

PERIODS = {ms: unit for unit, ms in PERIODS_MS.items()}  # the units a group's rate is given in


def rate_text(requests: int, period_ms: int) -> str:
    """'10 a second', '100 per 5 minutes'."""
    if not requests:
        return ""
    unit = PERIODS.get(period_ms)
    if unit:
        return f"{requests} a {unit}"
    for ms, name in sorted(PERIODS.items(), reverse=True):
        if period_ms % ms == 0:
            return f"{requests} per {period_ms // ms} {name}s"
    return f"{requests} per {period_ms} ms"


@view_required
def flow_control(request: HttpRequest) -> HttpResponse:
    flow = get_client().queries.queues.flow_control()
    groups = [
        {
            "state": g,
            "rate": rate_text(g.requests, g.period_ms),
            "full": bool(g.connections) and g.in_use >= g.connections,
        }
        for g in flow.groups
    ]
    limits = [
        {"queue": q, "limit": limit, "running": flow.running.get(q, 0), "full": flow.running.get(q, 0) >= limit}
        for q, limit in sorted(flow.queue_limits.items())
    ]
    context = {"groups": groups, "limits": limits, "waiting": sum(g.waiting for g in flow.groups)}
    return page(request, "dashboards/flow.html", "flow", context, partial="live")
