"""The dead-letter selection an operator builds on the dead-letters page, from its query string.

The same parameters select what a bulk resubmit or purge applies to, so a link from the page to the bulk
preview carries the operator's filter as it is: queue, task, version, fingerprint, since, until (died between),
status (open, resubmitted or all; default open) and q (text in the error class or message)."""

from typing import Any

from django.db.models import Count, Max, Min, QuerySet
from django.http import QueryDict

from dashboards.filters import Filters
from jobconsole.models import DeadLetter

STATUSES = ["open", "resubmitted", "all"]
FILTER_KEYS = ["queue", "task", "version", "fingerprint", "since", "until", "status", "q"]
GROUPS = 25


def select(query: QueryDict) -> tuple[QuerySet[DeadLetter], Filters]:
    filters = Filters()
    rows = DeadLetter.objects.all()
    status = filters.choice(query, "status", "status", STATUSES) or "open"
    if status == "open":
        rows = rows.filter(resubmitted_at__isnull=True)
    elif status == "resubmitted":
        rows = rows.filter(resubmitted_at__isnull=False)
    if queue := filters.text(query, "queue", "Queue"):
        rows = rows.filter(queue=queue)
    if task := filters.text(query, "task", "Task"):
        rows = rows.filter(task=task)
    if version := filters.text(query, "version", "Version"):
        if version.isdigit():
            rows = rows.filter(version=int(version))
        else:
            filters.errors.append(f"Version {version!r} is not a whole number.")
            filters.values.pop("version")
    if fingerprint := filters.text(query, "fingerprint", "Fingerprint"):
        rows = rows.filter(fingerprint=fingerprint)
    if since := filters.moment(query, "since", "From"):
        rows = rows.filter(died_at__gte=since)
    if until := filters.moment(query, "until", "Until", end_of_day=True):
        rows = rows.filter(died_at__lte=until)
    if text := filters.text(query, "q", "Error text"):
        rows = rows.filter(message__icontains=text) | rows.filter(error_class__icontains=text)
    return rows, filters


def groups(rows: QuerySet[DeadLetter], limit: int = GROUPS) -> list[dict[str, Any]]:
    """Failures grouped by fingerprint (exception class + top frame): count, first and last seen, biggest first."""
    found = (
        rows.order_by()
        .values("fingerprint", "error_class", "top_frame")
        .annotate(count=Count("id"), first=Min("died_at"), last=Max("died_at"))
        .order_by("-count", "-last")[:limit]
    )
    return [dict(group) for group in found]


def filter_query(filters: Filters) -> QueryDict:
    """The filters as a query string of their own (for links that keep them: bulk preview, export)."""
    query = QueryDict(mutable=True)
    for key in FILTER_KEYS:
        if key in filters.values:
            query[key] = filters.values[key]
    return query
