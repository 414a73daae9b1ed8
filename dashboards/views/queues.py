"""Queues: the list, one queue's figures, charts (the overview's, of this queue) and jobs by state with each
state's count on its tab, pause and resume."""

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils import timezone
from django.views.decorators.http import require_POST

from dashboards.permissions import operate_required, view_required
from dashboards.queue_status import QueueStatus, live_workers, queue_statuses, retrying_counts
from dashboards.rendering import htmx_asked, page
from dashboards.views.overview import RANGES, chosen_range, figures
from jobconsole import audit
from jobconsole.core import InvalidJob, JobState
from jobconsole.core.states import CONSOLE_ORDER, STATES
from jobconsole.engine import get_client
from jobconsole.models import Queue

PAGE = 50
# The states a queue's page lists, in the order an operator reads them (the state table's `place`).
TABS = CONSOLE_ORDER


def _known(name: str) -> None:
    if name not in get_client().queries.queues.names():
        raise Http404(f"No queue named {name!r}.")


@view_required
def queue_list(request: HttpRequest) -> HttpResponse:
    return page(request, "dashboards/queues.html", "queues", {"queues": queue_statuses()}, partial="live")


@view_required
def queue_detail(request: HttpRequest, name: str) -> HttpResponse:
    _known(name)
    raw_state = request.GET.get("state", JobState.QUEUED.value)
    try:
        state = JobState(raw_state)
    except ValueError:
        messages.error(request, f"Unknown state {raw_state!r}; showing queued jobs.")
        state = JobState.QUEUED
    polled = request.GET.get("part") if htmx_asked(request) else None  # a poll reads only its part's figures
    span, problem = chosen_range(request)
    context: dict[str, Any] = {"name": name, "state": state.value, "range": span, "ranges": RANGES,
                               "problem": problem, "waiting_label": STATES[JobState.WAITING].label}  # fmt: skip
    if polled == "charts":
        context["figures"] = figures(span, queue=name)
        return page(request, "dashboards/queue.html", "queues", context, partial="charts")
    [context["queue"]] = queue_statuses([name], workers=live_workers())
    if polled == "tiles":
        return page(request, "dashboards/queue.html", "queues", context, partial="tiles")
    cursor = request.GET.get("cursor") or None
    try:
        jobs = get_client().queries.jobs.page(name, state, cursor=cursor, limit=PAGE)
    except InvalidJob:
        messages.error(request, "That page link is no longer valid; showing the first page.")
        jobs = get_client().queries.jobs.page(name, state, limit=PAGE)
    counted = tabs(context["queue"])
    context.update(page=jobs, tabs=counted, in_state=next(n for s, _, n in counted if s == state.value))
    if polled == "live":
        return page(request, "dashboards/queue.html", "queues", context, partial="live")
    context["figures"] = figures(span, queue=name)
    return page(request, "dashboards/queue.html", "queues", context)


def tabs(status: QueueStatus) -> list[tuple[str, str, int]]:
    """(state, label, jobs) per tab. Redis counts a set, not a state: the retrying jobs share the scheduled set
    with the delayed ones, so they are counted from the mirror (as the overview does) and the rest are scheduled."""
    retrying = retrying_counts([status.name])[status.name]
    by_state = {s: status.counts.sets.get(STATES[s].zset, 0) for s in TABS}
    by_state[JobState.RETRYING] = min(retrying, by_state[JobState.SCHEDULED])
    by_state[JobState.SCHEDULED] -= by_state[JobState.RETRYING]
    return [(s.value, STATES[s].label, by_state[s]) for s in TABS]


@require_POST
@operate_required("queue")
def queue_pause(request: HttpRequest, name: str) -> HttpResponse:
    _known(name)
    pause = request.POST.get("action") != "resume"
    client = get_client()
    changed = client.pause(name) if pause else client.resume(name)
    Queue.objects.update_or_create(name=name, defaults={"paused": pause, "changed_at": timezone.now()})
    verb = "pause" if pause else "resume"
    audit.record(request.user, verb, queue=name, filter={"queues": [name]}, count=int(changed),
                 reason=request.POST.get("reason", "")[:1000])  # fmt: skip
    if changed:
        messages.success(request, f"Queue {name} {'paused: workers take nothing from it' if pause else 'resumed'}.")
    else:
        messages.info(request, f"Queue {name} was already {'paused' if pause else 'running'}.")
    return redirect("dashboards:queue", name=name)
