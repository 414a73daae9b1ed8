"""Schedules: every periodic job (settings and database), when it fired last and its next runs; enable,
disable (database schedules only) and run now, each audited."""

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from dashboards.permissions import operate_required, view_required
from dashboards.rendering import page
from jobconsole import periodic
from jobconsole.core import InvalidJob, RedisFull


@view_required
def schedule_list(request: HttpRequest) -> HttpResponse:
    context = {"schedules": periodic.describe(periodic.all_schedules()), "next_runs": periodic.NEXT_RUNS}
    return page(request, "dashboards/schedules.html", "schedules", context, partial="live")


@require_POST
@operate_required("periodicschedule")
def schedule_action(request: HttpRequest, name: str) -> HttpResponse:
    action = request.POST.get("action", "")
    reason = request.POST.get("reason", "")[:1000]
    try:
        if action in ("enable", "disable"):
            periodic.set_enabled(name, action == "enable", request.user, reason=reason)
            messages.success(request, f"Schedule {name} {action}d.")
        elif action == "run_now":
            result = periodic.run_now(name, request.user, reason=reason)
            messages.success(request, f"Schedule {name}: job {result.id} enqueued on {result.queue}.")
        else:
            messages.error(request, f"Unknown action {action!r}.")
    except periodic.ScheduleNotFound:
        raise Http404(f"No schedule named {name!r}.") from None
    except periodic.ReadOnlySchedule as exc:
        messages.error(request, str(exc))
    except (InvalidJob, RedisFull) as exc:
        messages.error(request, f"Schedule {name}: not enqueued: {exc}")
    return redirect("dashboards:schedules")
