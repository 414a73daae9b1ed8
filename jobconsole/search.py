"""Searching jobs in the database mirror by keyset cursor on (enqueued_at, id), newest first: what the console's
jobs page and the HTTP API's job search both read.

No COUNT over the table and no OFFSET: each page is an indexed range read of at most limit + 1 rows (the
indexes on state, queue+state and task end in enqueued_at; a queue alone is read state by state and merged),
and a cursor stays valid while rows arrive (new jobs come in above it). Parameter text is a plain LIKE that
Django escapes (% and _ match themselves), so it scans the rows the other filters leave: combine it with a
queue, task or time range on big tables.

Filters (a dict; each present key narrows): state, queue, task, id, unique_key (exact), text (inside the
parameters, any case), after / before (aware datetimes: enqueued at or after / before), and `among`, a queryset
of job ids the rows must be in (the API's submit-only tokens see their own jobs).
"""

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import QuerySet
from django.db.models.functions import Substr

from jobconsole.core import JobState
from jobconsole.models import Job

PAGE = 50
PREVIEW = 160  # characters of the parameters a row carries as `params_preview`
STATES = [s.value for s in JobState]


class BadCursor(ValueError):
    pass


def encode_cursor(enqueued_at: datetime, job_id: str) -> str:
    return base64.urlsafe_b64encode(f"{enqueued_at.isoformat()}|{job_id}".encode()).decode()


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        moment, _, job_id = base64.urlsafe_b64decode(cursor.encode()).decode().partition("|")
        at = datetime.fromisoformat(moment)
    except (ValueError, UnicodeDecodeError):
        raise BadCursor(cursor) from None
    if at.tzinfo is None or not job_id:
        raise BadCursor(cursor)
    return at, job_id


@dataclass(frozen=True, slots=True)
class JobRows:
    rows: Sequence[Job]  # each with `params_preview`, the start of its parameters
    next_cursor: str | None


def matching(filters: dict[str, Any]) -> QuerySet[Job]:
    rows = Job.objects.filter(enqueued_at__isnull=False)  # every mirrored job has one; the cursor needs it
    for name in ("state", "queue", "task", "id", "unique_key"):
        if filters.get(name):
            rows = rows.filter(**{name: filters[name]})
    if filters.get("text"):
        rows = rows.filter(params__icontains=filters["text"])  # Django escapes % and _
    if filters.get("after"):
        rows = rows.filter(enqueued_at__gte=filters["after"])
    if filters.get("before"):
        rows = rows.filter(enqueued_at__lt=filters["before"])
    if filters.get("among") is not None:
        rows = rows.filter(id__in=filters["among"])
    return rows


def page(filters: dict[str, Any], cursor: str | None, limit: int = PAGE) -> JobRows:
    """Up to `limit` matching rows, newest first, after the cursor. Raises BadCursor."""
    after = decode_cursor(cursor) if cursor else None
    if filters.get("queue") and not any(filters.get(k) for k in ("state", "id", "unique_key")):
        # No index orders one queue's rows by time across states: read each state's newest rows by the
        # (queue, state, enqueued_at) index and merge them, instead of sorting the whole queue.
        found: list[Job] = []
        for state in STATES:
            found += _newest({**filters, "state": state}, after, limit + 1)
        found.sort(key=lambda job: (job.enqueued_at, job.id), reverse=True)
    else:
        found = _newest(filters, after, limit + 1)
    if len(found) <= limit:
        return JobRows(found, None)
    last = found[limit - 1]
    assert last.enqueued_at is not None
    return JobRows(found[:limit], encode_cursor(last.enqueued_at, last.id))


def _newest(filters: dict[str, Any], after: tuple[datetime, str] | None, count: int) -> list[Job]:
    rows = matching(filters)
    if after:
        at, job_id = after
        # (enqueued_at, id) < (at, job_id), written as a range the time indexes can serve, minus the ties.
        rows = rows.filter(enqueued_at__lte=at).exclude(enqueued_at=at, id__gte=job_id)
    return list(
        rows.order_by("-enqueued_at", "-id")
        .defer("params", "result", "checkpoint", "last_error", "reason")
        .annotate(params_preview=Substr("params", 1, PREVIEW))[:count]
    )
