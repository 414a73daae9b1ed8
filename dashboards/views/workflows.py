"""Workflows: the list (progress by state, filters in the query string, paged by cursor), one workflow's graph and
jobs, and its actions: cancel it, resubmit its dead jobs (a bulk retry of the jobs of the workflow that are dead,
through the bulk operations' preview and confirmation). Everything is read from the mirror (Workflow, Job and
JobLink rows); only the cancel goes to Redis."""

import base64
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from dashboards.filters import Filters
from dashboards.permissions import operate_required, view_required
from dashboards.rendering import page
from dashboards.workflow_graph import Member, layout, segments
from jobconsole import audit
from jobconsole.core.errors import JobNotFound
from jobconsole.core.states import JobState
from jobconsole.engine import get_client
from jobconsole.models import Job, JobLink, Workflow
from jobconsole.moments import to_utc
from jobconsole.step_names import base, natural

PAGE = 50
MEMBERS_PAGE = 50
BAR = 100.0  # the list's bars are drawn in percent
STATES = [s.value for s in Workflow.State]


def encode_cursor(at: datetime, workflow_id: str) -> str:
    return base64.urlsafe_b64encode(f"{at.isoformat()}|{workflow_id}".encode()).decode()


def decode_cursor(cursor: str) -> tuple[datetime, str] | None:
    try:
        at, _, workflow_id = base64.urlsafe_b64decode(cursor.encode()).decode().partition("|")
        return to_utc(datetime.fromisoformat(at)), workflow_id
    except (ValueError, UnicodeDecodeError):
        return None


def _bar(w: Workflow) -> list[Any]:
    return segments({k: int(v) for k, v in (w.counts or {}).items()}, BAR)


@view_required
def workflow_list(request: HttpRequest) -> HttpResponse:
    query = request.GET
    filters = Filters()
    rows = Workflow.objects.all()
    if state := filters.choice(query, "state", "State", STATES):
        rows = rows.filter(state=state)
    if name := filters.text(query, "name", "Name"):
        rows = rows.filter(name__icontains=name)
    if queue := filters.text(query, "queue", "Queue"):
        rows = rows.filter(queue=queue)
    filtered = bool(state or name or queue)
    if filters.errors:
        context = {"workflows": [], "filters": filters, "filtered": True, "states": STATES}
        return page(request, "dashboards/workflows.html", "workflows", context, status=400)
    bad_cursor = False
    if raw := query.get("cursor"):
        after = decode_cursor(raw)
        if after is None:
            bad_cursor = True
        else:
            rows = rows.filter(Q(created_at__lt=after[0]) | Q(created_at=after[0], id__lt=after[1]))
    found = list(rows.order_by("-created_at", "-id")[: PAGE + 1])
    more = len(found) > PAGE
    found = found[:PAGE]
    last = found[-1] if found else None
    next_cursor = encode_cursor(last.created_at, last.id) if more and last and last.created_at else None
    listed = [{"row": w, "bar": _bar(w), "total": sum((w.counts or {}).values())} for w in found]
    context = {
        "workflows": listed, "filters": filters, "filtered": filtered, "states": STATES, "bad_cursor": bad_cursor,
        "next_cursor": next_cursor,
    }  # fmt: skip
    return page(request, "dashboards/workflows.html", "workflows", context, partial="live")


def _workflow(workflow_id: str) -> Workflow:
    try:
        return Workflow.objects.get(id=workflow_id)
    except Workflow.DoesNotExist:
        raise Http404(f"No workflow {workflow_id!r} in the database (the mirror may not have seen it yet).") from None


@view_required
def workflow_detail(request: HttpRequest, workflow_id: str) -> HttpResponse:
    wf = _workflow(workflow_id)
    rows = Job.objects.filter(workflow_id=wf.id).values_list("id", "step", "state", "task", "finished_at")
    members = [Member(i, step, state, task) for i, step, state, task, _ in rows]
    finished = {i: at for i, _, _, _, at in rows}
    links = list(JobLink.objects.filter(workflow_id=wf.id).values_list("parent_id", "child_id"))
    graph = layout(members, links)
    # The jobs listed under the graph: a collapsed node's link (`step`: its name) or a state narrows them.
    step, state = request.GET.get("step", ""), request.GET.get("state", "")
    listed = [m for m in members if (not step or base(m.step) == step or m.step == step)]
    if state in JobState._value2member_map_:
        listed = [m for m in listed if m.state == state]
    listed.sort(key=lambda m: (graph.layer_of.get(m.id, 0), natural(m.step)))  # parents first
    try:
        offset = max(int(request.GET.get("offset", "0")), 0)
    except ValueError:
        offset = 0
    shown = [{"m": m, "finished_at": finished.get(m.id)} for m in listed[offset : offset + MEMBERS_PAGE]]
    dead = (wf.counts or {}).get(JobState.DEAD.value, 0) + (wf.counts or {}).get(JobState.FAILED.value, 0)
    resubmit = reverse("dashboards:bulk_preview") + "?" + urlencode(
        [("kind", "retry"), ("workflow", wf.id), ("state", JobState.DEAD.value), ("state", JobState.FAILED.value)]
    )  # fmt: skip
    context = {
        "wf": wf, "graph": graph, "bar": _bar(wf), "total": sum((wf.counts or {}).values()), "members": shown,
        "listed": len(listed), "offset": offset, "next_offset": offset + MEMBERS_PAGE if offset + MEMBERS_PAGE <
        len(listed) else None, "step": step, "state": state, "dead": dead, "resubmit_url": resubmit,
        "running": wf.state == Workflow.State.RUNNING, "job_states": [s.value for s in JobState],
        "took": (wf.finished_at - wf.created_at).total_seconds() if wf.finished_at and wf.created_at else None,
    }  # fmt: skip
    return page(request, "dashboards/workflow.html", "workflows", context, partial="live")


@require_POST
@operate_required("job")
def workflow_cancel(request: HttpRequest, workflow_id: str) -> HttpResponse:
    wf = _workflow(workflow_id)
    try:
        cancelled, asked = get_client().cancel_workflow(wf.id, wf.queue)
    except JobNotFound:
        messages.error(request, "Redis no longer holds this workflow (its record expired): nothing to cancel.")
        return redirect("dashboards:workflow", workflow_id=wf.id)
    audit.record(
        request.user, "workflow_cancel", queue=wf.queue, filter={"workflow": [wf.id]}, count=cancelled,
        reason=request.POST.get("reason", "")[:1000], detail={"workflow": wf.id, "name": wf.name, "asked": asked},
    )  # fmt: skip
    note = f"; {asked:,} running asked to stop" if asked else ""
    messages.success(request, f"Workflow {wf.name or wf.id} cancelled: {cancelled:,} jobs that had not run{note}.")
    return redirect("dashboards:workflow", workflow_id=wf.id)
