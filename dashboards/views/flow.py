"""Flow control: every concurrency group (slots held of its limit, starts in its rate window, jobs waiting for
a slot, by queue) and every queue limit (running of the limit), live from Redis, each beside the settings' value;
an operator edits them here (audited; jobconsole/controls.py). An edit holds until changed again or until a
runworker starts and writes the settings' values."""

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from dashboards.permissions import operate_required, view_required
from dashboards.rendering import page
from jobconsole.controls import (
    ControlError,
    configured_groups,
    configured_limits,
    define_group,
    group_spec_from_form,
    set_queue_limit,
    whole,
)
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


def _per_and_unit(period_ms: int) -> tuple[int, str]:
    """A rate's period as the form's 'per' and unit: 60000 -> (1, 'minute'), 300000 -> (5, 'minute')."""
    for ms, name in sorted(PERIODS.items(), reverse=True):
        if period_ms % ms == 0:
            return period_ms // ms, name
    return 1, "second"


@view_required
def flow_control(request: HttpRequest) -> HttpResponse:
    return _page(request)


def _page(request: HttpRequest, status: int = 200, form: dict[str, Any] | None = None) -> HttpResponse:
    client = get_client()
    flow = client.queries.queues.flow_control()
    settings_groups, settings_limits = configured_groups(), configured_limits()
    groups = []
    for g in flow.groups:
        conf = settings_groups.get(g.name)
        per, unit = _per_and_unit(g.period_ms)
        groups.append({
            "state": g,
            "rate": rate_text(g.requests, g.period_ms),
            "full": bool(g.connections) and g.in_use >= g.connections,
            "settings": None if conf is None else {
                "connections": conf.connections, "rate": rate_text(conf.requests, conf.period_ms)},
            "changed": conf is None or (conf.connections, conf.requests, conf.period_ms)
                       != (g.connections, g.requests, g.period_ms),
            "per": per, "unit": unit,
        })  # fmt: skip
    limits = [
        {"queue": q, "limit": limit, "running": flow.running.get(q, 0), "full": flow.running.get(q, 0) >= limit,
         "settings": settings_limits.get(q), "changed": settings_limits.get(q) != limit}
        for q, limit in sorted(flow.queue_limits.items())
    ]  # fmt: skip
    # Queues the settings limit but Redis does not (an operator lifted it): shown, so the difference is seen.
    lifted = [{"queue": q, "settings": n} for q, n in sorted(settings_limits.items()) if q not in flow.queue_limits]
    context = {
        "groups": groups, "limits": limits, "lifted": lifted, "waiting": sum(g.waiting for g in flow.groups),
        "queues": client.queries.queues.names(), "units": list(PERIODS_MS), "form": form or {},
    }  # fmt: skip
    return page(request, "dashboards/flow.html", "flow", context, partial="live", status=status)


def _refused(request: HttpRequest, exc: ControlError, form: dict[str, Any]) -> HttpResponse:
    messages.error(request, f"Nothing changed: {exc}")
    return _page(request, status=exc.status, form=form)


@require_POST
@operate_required("queue")
def flow_queue_limit(request: HttpRequest) -> HttpResponse:
    """Set a queue's limit (blank, or the Lift button: lift it); audited."""
    queue = request.POST.get("queue", "")
    raw = "" if request.POST.get("lift") else request.POST.get("limit", "").strip()
    try:
        limit = None if raw == "" else whole(raw, f"The limit of {queue}", minimum=1)
        set_queue_limit(request.user, queue, limit, reason=request.POST.get("reason", ""))
    except ControlError as exc:
        return _refused(request, exc, {"queue": queue, "limit": raw})
    messages.success(
        request, f"Queue {queue}: at most {limit} running at once." if limit else f"Queue {queue}: limit lifted."
    )
    return redirect("dashboards:flow")


@require_POST
@operate_required("queue")
def flow_group(request: HttpRequest) -> HttpResponse:
    """Set a defined group's connections and rate; audited."""
    name = request.POST.get("group", "")
    try:
        spec = group_spec_from_form(name, request.POST)
        group = define_group(request.user, name, spec, reason=request.POST.get("reason", ""), known=True)
    except ControlError as exc:
        return _refused(
            request,
            exc,
            {"group": name, **{k: request.POST.get(k, "") for k in ("connections", "requests", "per", "unit")}},
        )
    cap = f"at most {group.connections} at once" if group.connections else "no cap on jobs at once"
    rate = rate_text(group.requests, group.period_ms)
    messages.success(request, f"Group {name}: {cap}{', ' + rate if rate else ', no rate limit'}.")
    return redirect("dashboards:flow")
