"""Alarms: the health's reasons and the service's degraded mirror and workers findings now (each shouting or
silenced, with who, why and until when), silencing one for a time or until it clears, lifting a silence early;
the recent silences. Silences: jobconsole/alarms.py."""

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from dashboards.permissions import operate_required, view_required
from dashboards.rendering import page
from jobconsole import alarms, health, service_health
from jobconsole.controls import ControlError
from jobconsole.models import AlarmSilence

RECENT = 20


@view_required
def alarm_list(request: HttpRequest) -> HttpResponse:
    return _page(request)


def _page(request: HttpRequest, status: int = 200) -> HttpResponse:
    state = health.check()
    service = service_health.check(queues=state.queues)
    loud = [{"key": alarms.key_of(r), "level": r.level.label, "message": r.message} for r in state.reasons]
    loud += [
        {"key": alarms.finding_key(f), "level": f.severity.level.label, "message": f"{f.label}: {f.reason}"}
        for f in service.problems
        if f.component in service_health.SILENCEABLE and f.severity is service_health.Severity.DEGRADED
    ]
    unsilenceable = [f for f in service.problems if f.component not in service_health.SILENCEABLE or f.severity
                     is not service_health.Severity.DEGRADED]  # fmt: skip
    context = {
        "health": state,
        "loud": loud,
        "silenced": [*state.silenced, *service.silenced],
        "unsilenceable": unsilenceable,
        "durations": alarms.DURATION_LABELS,
        "recent": AlarmSilence.objects.order_by("-created_at")[:RECENT],
    }
    return page(request, "dashboards/alarms.html", "alarms", context, status=status)


@require_POST
@operate_required("queue")
def alarm_silence(request: HttpRequest) -> HttpResponse:
    form = request.POST
    key = form.get("alarm", "")
    try:
        row = alarms.silence(request.user, key, form.get("duration", ""), form.get("reason", ""),
                             label=form.get("label", ""))  # fmt: skip
    except ControlError as exc:
        messages.error(request, f"Nothing changed: {exc}")
        return _page(request, status=exc.status)
    until = "until it clears" if row.until is None else "for " + alarms.DURATION_LABELS[form["duration"]]
    messages.success(request, f"Alarm silenced {until}. It still shows, as silenced.")
    return redirect("dashboards:alarms")


@require_POST
@operate_required("queue")
def alarm_lift(request: HttpRequest) -> HttpResponse:
    try:
        alarms.lift(request.user, request.POST.get("alarm", ""))
    except ControlError as exc:
        messages.error(request, f"Nothing changed: {exc}")
        return _page(request, status=exc.status)
    messages.success(request, "Silence lifted: the alarm counts again.")
    return redirect("dashboards:alarms")
