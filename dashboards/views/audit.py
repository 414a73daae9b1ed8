"""The audit log: every operator action, newest first, filterable, paged by cursor."""

import base64
from datetime import datetime

from django.db.models import Q
from django.http import HttpRequest, HttpResponse

from dashboards.distinct import distinct_values
from dashboards.filters import Filters
from dashboards.permissions import view_required
from dashboards.rendering import page
from jobconsole.models import AuditLog
from jobconsole.moments import to_utc

PAGE = 50


def encode_cursor(at: datetime, pk: int) -> str:
    return base64.urlsafe_b64encode(f"{at.isoformat()}|{pk}".encode()).decode()


def decode_cursor(cursor: str) -> tuple[datetime, int] | None:
    try:
        at, _, pk = base64.urlsafe_b64decode(cursor.encode()).decode().partition("|")
        return to_utc(datetime.fromisoformat(at)), int(pk)
    except (ValueError, UnicodeDecodeError):
        return None


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
    if queue := filters.text(query, "queue", "Queue"):
        rows = rows.filter(queue=queue)
    if since := filters.moment(query, "since", "From"):
        rows = rows.filter(at__gte=since)
    if until := filters.moment(query, "until", "Until", end_of_day=True):
        rows = rows.filter(at__lte=until)
    bad_cursor = False
    if filters.errors:
        context = {"records": [], "actions": actions, "filters": filters, "filtered": True}
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
        "records": found[:PAGE], "next_cursor": next_cursor, "actions": actions, "filters": filters,
        "filtered": bool(filters.values), "bad_cursor": bad_cursor,
    }  # fmt: skip
    return page(request, "dashboards/audit.html", "audit", context)
