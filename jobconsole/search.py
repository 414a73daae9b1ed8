"""Searching jobs in the database mirror by keyset cursor on (enqueued_at, id), newest first: what the console's
jobs page and the HTTP API's job search both read.

No COUNT over the table and no OFFSET (but a text search's window edge, below): each page is an indexed range
read of at most limit + 1 rows (the indexes on state, queue+state and task end in enqueued_at; a queue alone is
read state by state and merged), and a cursor stays valid while rows arrive (new jobs come in above it).

Parameter text is a plain LIKE that Django escapes (% and _ match themselves); no index serves a substring, so
one request searches at most the TEXT_SCAN rows after its cursor (those the other filters leave, or for a queue
alone, which no index orders by time, of every queue), an OFFSET on an index of enqueue time finding the
window's edge (the window also holds every row enqueued at the edge's instant: a batch can share one). When the
window holds fewer matches than a page, the page says how far back it looked (`searched_back_to`) and its
cursor continues from there: each request's work stays bounded (a rare text in a million jobs took a second
per request), and nothing is skipped, the caller pages on into older jobs.

Filters (a dict; each present key narrows): state (or FAILED_ATTEMPTS: any state, a failed attempt), queue, task,
id, unique_key (exact), text (inside the parameters, any case), after / before (aware datetimes: enqueued at or
after / before), `queues` / `tasks` (lists: the row's must be one of them; an API token's limits), and `among`, a
queryset of job ids the rows must be in (the API's submit tokens see their own jobs).
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Exists, OuterRef, QuerySet
from django.db.models.functions import Substr

from jobconsole.core import JobState
from jobconsole.models import Attempt, Job
from jobconsole.moments import from_micros, to_micros

PAGE = 50
PREVIEW = 160  # characters of the parameters a row carries as `params_preview`
TEXT_SCAN = 50_000  # rows one request's parameter text search looks through at most
STATES = [s.value for s in JobState]
# Not a state: jobs with at least one failed attempt, whatever their state now (retrying, dead, failed, even
# completed after a retry). An operator looking for "what failed" means these; the `failed` state is only the
# discarded end of tasks whose dead_letter_policy is "discard".
FAILED_ATTEMPTS = "failed_attempts"
FAILED_OUTCOMES = ("failed", "timeout", "worker_lost")  # an attempt's outcomes that are failures (fail.lua)


class BadCursor(ValueError):
    pass


# A cursor is a position, readable and checkable by a pattern: the enqueue time (microseconds since the epoch) and
# the id of the last row shown ("0" before every id). Any string of this shape is a position to page on from,
# so a client's own is as good as one we gave out; anything else is a BadCursor.
CURSOR_PATTERN = "^[0-9]{1,16}~[0-9A-Z]{1,26}$"


def encode_cursor(enqueued_at: datetime, job_id: str) -> str:
    return f"{to_micros(enqueued_at)}~{job_id}"


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    if not re.fullmatch(CURSOR_PATTERN, cursor):
        raise BadCursor(cursor)
    micros, _, job_id = cursor.partition("~")
    return from_micros(int(micros)), job_id


@dataclass(frozen=True, slots=True)
class JobRows:
    rows: Sequence[Job]  # each with `params_preview`, the start of its parameters
    next_cursor: str | None
    searched_back_to: datetime | None = None  # a text search stopped here (TEXT_SCAN rows); older ones are next


def matching(filters: dict[str, Any]) -> QuerySet[Job]:
    rows = Job.objects.filter(enqueued_at__isnull=False)  # every mirrored job has one; the cursor needs it
    if filters.get("state") == FAILED_ATTEMPTS:
        rows = rows.filter(Exists(Attempt.objects.filter(job=OuterRef("pk"), outcome__in=FAILED_OUTCOMES)))
    elif filters.get("state"):
        rows = rows.filter(state=filters["state"])
    for name in ("queue", "task", "id", "unique_key"):
        if filters.get(name):
            rows = rows.filter(**{name: filters[name]})
    if filters.get("text"):
        rows = rows.filter(params__icontains=filters["text"])  # Django escapes % and _
    if filters.get("after"):
        rows = rows.filter(enqueued_at__gte=filters["after"])
    if filters.get("before"):
        rows = rows.filter(enqueued_at__lt=filters["before"])
    if filters.get("since"):  # a text search's window edge (not a caller's filter)
        rows = rows.filter(enqueued_at__gte=filters["since"])
    if filters.get("workflow"):  # a workflow's jobs (the (workflow_id, state) index)
        rows = rows.filter(workflow_id=filters["workflow"])
    if filters.get("queues"):
        rows = rows.filter(queue__in=filters["queues"])
    if filters.get("tasks"):
        rows = rows.filter(task__in=filters["tasks"])
    if filters.get("among") is not None:
        rows = rows.filter(id__in=filters["among"])
    return rows


def page(filters: dict[str, Any], cursor: str | None, limit: int | None = None) -> JobRows:
    """Up to `limit` (default PAGE) matching rows, newest first, after the cursor. Raises BadCursor."""
    limit = limit or PAGE
    after = decode_cursor(cursor) if cursor else None
    if filters.get("text"):
        return _text_page(filters, after, limit)
    found = _page_rows(filters, after, limit + 1)
    if len(found) <= limit:
        return JobRows(found, None)
    last = found[limit - 1]
    assert last.enqueued_at is not None
    return JobRows(found[:limit], encode_cursor(last.enqueued_at, last.id))


def _text_page(filters: dict[str, Any], after: tuple[datetime, str] | None, limit: int) -> JobRows:
    """A page of a parameter text search among the next TEXT_SCAN rows (by enqueue time) after the cursor.

    The window's far edge comes from an index on enqueue time: the filters' own (state, task) or, for a queue
    alone (no index orders it by time), the whole table's. The page itself is the ordinary indexed read,
    bounded below by the edge; when it holds no more than a page, the next page starts past the edge."""
    unindexed_queue = filters.get("queue") and not any(filters.get(k) for k in ("state", "task", "id", "unique_key"))
    window = _older(matching({} if unindexed_queue else {**filters, "text": ""}), after)
    edge = window.order_by("-enqueued_at").values_list("enqueued_at", flat=True)[TEXT_SCAN - 1 : TEXT_SCAN].first()
    found = _page_rows({**filters, "since": edge}, after, limit + 1)
    if len(found) > limit:
        last = found[limit - 1]
        assert last.enqueued_at is not None
        return JobRows(found[:limit], encode_cursor(last.enqueued_at, last.id))
    if edge is None:  # the window reached the oldest row: the search is complete
        return JobRows(found, None)
    # Every row enqueued at the edge's instant was in the window: "0" sorts before any job id, so the next
    # page starts with the rows enqueued before it.
    return JobRows(found, encode_cursor(edge, "0"), searched_back_to=edge)


def _page_rows(filters: dict[str, Any], after: tuple[datetime, str] | None, count: int) -> list[Job]:
    """The first `count` matching rows after the cursor, newest first, each read by an index on time."""
    if filters.get("queue") and not any(filters.get(k) for k in ("state", "id", "unique_key")):
        # No index orders one queue's rows by time across states: read each state's newest rows by the
        # (queue, state, enqueued_at) index and merge them, instead of sorting the whole queue.
        found: list[Job] = []
        for state in STATES:
            found += _newest({**filters, "state": state}, after, count)
        found.sort(key=lambda job: (job.enqueued_at, job.id), reverse=True)
        return found[:count]
    return _newest(filters, after, count)


def _older(rows: QuerySet[Job], after: tuple[datetime, str] | None) -> QuerySet[Job]:
    """The rows after the cursor (older than it)."""
    if not after:
        return rows
    at, job_id = after
    # (enqueued_at, id) < (at, job_id), written as a range the time indexes can serve, minus the ties.
    return rows.filter(enqueued_at__lte=at).exclude(enqueued_at=at, id__gte=job_id)


def _listed(rows: QuerySet[Job], count: int) -> list[Job]:
    return list(
        rows.defer("params", "result", "checkpoint", "last_error", "reason").annotate(
            params_preview=Substr("params", 1, PREVIEW)
        )[:count]
    )


def _newest(filters: dict[str, Any], after: tuple[datetime, str] | None, count: int) -> list[Job]:
    return _listed(_older(matching(filters), after).order_by("-enqueued_at", "-id"), count)
