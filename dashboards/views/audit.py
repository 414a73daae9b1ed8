"""The audit log: every operator action, newest first, filterable, paged by cursor; the selection an action
applied to in words ("dead letters · queue mail or billing · died from 2026-11-25"), never as a Python dict."""

from dataclasses import dataclass
from typing import Any

from django.db.models import Q
from django.http import HttpRequest, HttpResponse

from dashboards.distinct import distinct_values
from dashboards.filters import Filters
from dashboards.paging import decode_cursor, encode_cursor
from dashboards.permissions import view_required
from dashboards.rendering import page
from jobconsole.engine import get_client
from jobconsole.models import AuditLog

PAGE = 50
# The names a recorded selection uses (the bulk operations' filters, `cleanjobs`, pause and resume, a workflow's
# actions) in an operator's words; a name not here is shown with its underscores as spaces.
FILTER_WORDS = {
    "queue": "queue", "queues": "queue", "task": "task", "tasks": "task", "state": "state", "states": "state",
    "status": "status", "version": "version", "fingerprint": "cause", "error_class": "error", "q": "error text",
    "text": "parameters contain", "since": "died from", "until": "died until", "after": "enqueued from",
    "before": "enqueued before", "unique_key": "unique key", "workflow": "workflow",
}  # fmt: skip
TARGET_WORDS = {"deadletter": "dead letters", "job": "jobs"}
STATUS_WORDS = {"open": "not resubmitted", "resubmitted": "resubmitted", "all": "any"}


@dataclass(frozen=True, slots=True)
class Phrase:
    """One part of a recorded selection: "queue" and "mail or billing"; a bare `text` for the scope."""

    name: str
    text: str


def _words(value: Any) -> str:
    values = value if isinstance(value, list | tuple) else [value]
    return " or ".join(str(v) for v in values if v not in (None, ""))


def selection_phrases(recorded: dict[str, Any]) -> list[Phrase]:
    """A record's `filter` as phrases: a bulk operation's {"target", "filter" or "ids"}, or plain name -> values."""
    phrases: list[Phrase] = []
    conditions = recorded
    if "target" in recorded:
        target = str(recorded["target"])
        phrases.append(Phrase("", TARGET_WORDS.get(target, target)))
        if ids := recorded.get("ids"):
            phrases.append(Phrase("", f"{len(ids):,} chosen by id"))
        conditions = recorded.get("filter") or {}
        if not conditions and not ids:
            phrases.append(Phrase("", "all not resubmitted" if target == "deadletter" else "all"))
    for name, value in conditions.items():
        if name == "target" or not (text := _words(value)):
            continue
        if name == "status":
            text = _words([STATUS_WORDS.get(v, v) for v in (value if isinstance(value, list) else [value])])
        phrases.append(Phrase(FILTER_WORDS.get(name, name.replace("_", " ")), text))
    return phrases


@view_required
def audit_log(request: HttpRequest) -> HttpResponse:
    query = request.GET
    filters = Filters()
    actions = distinct_values(AuditLog, "action")
    rows = AuditLog.objects.all()
    if action := filters.choice(query, "action", "action", actions):
        rows = rows.filter(action=action)
    if actor := filters.text(query, "actor", "User"):
        rows = rows.filter(actor=actor)
    queues = get_client().queries.queues.names()  # offered in the queue filter (a record may name an older one)
    if queue := filters.text(query, "queue", "Queue"):
        rows = rows.filter(queue=queue)
    if since := filters.moment(query, "since", "From"):
        rows = rows.filter(at__gte=since)
    if until := filters.moment(query, "until", "Until", end_of_day=True):
        rows = rows.filter(at__lte=until)
    bad_cursor = False
    if filters.errors:
        context = {"records": [], "actions": actions, "queues": queues, "filters": filters, "filtered": True}
        return page(request, "dashboards/audit.html", "audit", context, status=400)
    if raw := query.get("cursor"):
        after = decode_cursor(raw)
        if after is None:
            bad_cursor = True
        else:
            rows = rows.filter(Q(at__lt=after[0]) | Q(at=after[0], pk__lt=after[1]))
    found = list(rows.order_by("-at", "-pk")[: PAGE + 1])
    next_cursor = encode_cursor(found[PAGE - 1].at, found[PAGE - 1].pk) if len(found) > PAGE else None
    context = {
        "records": found[:PAGE], "next_cursor": next_cursor, "actions": actions, "queues": queues, "filters": filters,
        "filtered": bool(filters.values), "bad_cursor": bad_cursor,
        "rows": [(r, selection_phrases(r.filter) if isinstance(r.filter, dict) else []) for r in found[:PAGE]],
    }  # fmt: skip
    return page(request, "dashboards/audit.html", "audit", context)
