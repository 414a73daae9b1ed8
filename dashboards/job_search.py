"""Searching jobs in the database mirror: the filters (all in the GET query string, so a search is a link) and
a page of matching rows by keyset cursor on (enqueued_at, id), newest first.

No COUNT over the table and no OFFSET (but a text search's window edge, below): each page is an indexed range
read of at most PAGE + 1 rows (the indexes on state, queue+state and task end in enqueued_at; a queue alone is
read state by state and merged), and a cursor stays valid while rows arrive (new jobs come in above it).

Parameter text is a plain LIKE that Django escapes (% and _ match themselves); no index serves a substring, so
one request searches at most the TEXT_SCAN rows after its cursor (those the other filters leave, or for a queue
alone, which no index orders by time, of every queue), an OFFSET on an index of enqueue time finding the
window's edge (the window also holds every row enqueued at the edge's instant: a batch can share one). When the
window holds fewer matches than a page, the page says how far back it looked and its cursor continues from
there: each request's work stays bounded (a rare text in a million jobs took a second per request), and
nothing is skipped, the operator pages on into older jobs.
"""

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django import forms
from django.db.models import QuerySet
from django.db.models.functions import Substr

from jobconsole.core import InvalidJob, JobState
from jobconsole.core.ids import check_job_id
from jobconsole.engine import get_client
from jobconsole.models import Job

PAGE = 50
PREVIEW = 160  # characters of the parameters shown in a row
TEXT_SCAN = 50_000  # rows one request's parameter text search looks through at most
DATETIME_FORMATS = ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d"]
STATES = [s.value for s in JobState]


class BadCursor(ValueError):
    pass


class JobFilterForm(forms.Form):
    """The filters. Queue and task selects offer what Redis knows (every queue used, every task a worker
    announced); a value only the database still has rows for is accepted too."""

    state = forms.ChoiceField(
        required=False, choices=[("", "any state"), *[(s, s) for s in STATES]],
        error_messages={"invalid_choice": "Unknown state %(value)s: the states are " + ", ".join(STATES) + "."},
    )  # fmt: skip
    queue = forms.ChoiceField(
        required=False, error_messages={"invalid_choice": "Unknown queue %(value)s: no job has used it."}
    )
    task = forms.ChoiceField(
        required=False, error_messages={"invalid_choice": "Unknown task %(value)s: no job or worker has named it."}
    )
    id = forms.CharField(required=False, max_length=26, label="Job id",
                         error_messages={"max_length": "A job id is a 26-character ULID."})  # fmt: skip
    unique_key = forms.CharField(required=False, max_length=200, label="Unique key")
    text = forms.CharField(required=False, max_length=200, label="Parameters contain")
    after = forms.DateTimeField(
        required=False, input_formats=DATETIME_FORMATS, label="Enqueued from",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        error_messages={"invalid": "Enter a date and time like 2026-11-25 14:30 (your time zone)."},
    )  # fmt: skip
    before = forms.DateTimeField(
        required=False, input_formats=DATETIME_FORMATS, label="Enqueued before",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        error_messages={"invalid": "Enter a date and time like 2026-11-25 14:30 (your time zone)."},
    )  # fmt: skip

    def __init__(self, data: Any, *, queues: list[str], tasks: list[str]) -> None:
        super().__init__(data)
        queues = _with_rows_for(queues, "queue", data.get("queue"))
        tasks = _with_rows_for(tasks, "task", data.get("task"))
        self.fields["queue"].choices = [("", "any queue"), *[(q, q) for q in queues]]  # type: ignore[attr-defined]
        self.fields["task"].choices = [("", "any task"), *[(t, t) for t in tasks]]  # type: ignore[attr-defined]

    def clean_id(self) -> str:
        value = self.cleaned_data["id"].strip()
        if not value:
            return ""
        try:
            return check_job_id(value)
        except InvalidJob:
            raise forms.ValidationError(f"{value!r} is not a job id: ids are 26-character ULIDs.") from None

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        after, before = data.get("after"), data.get("before")
        if after and before and after >= before:
            self.add_error("before", "The end of the time range must come after its start.")
        return data

    @property
    def active(self) -> bool:
        """Whether any filter is set (a valid form only)."""
        return any(self.cleaned_data.get(name) for name in self.fields)


def _with_rows_for(known: list[str], column: str, value: str | None) -> list[str]:
    """`known`, plus `value` if the mirror still has rows for it (an index look-up, not a scan)."""
    if not value or value in known or len(value) > 200:
        return known
    if Job.objects.filter(**{column: value}).exists():
        return sorted([*known, value])
    return known


def known_queues() -> list[str]:
    return get_client().queries.queues()


def known_tasks() -> list[str]:
    """Tasks workers announced, and those registered in this process."""
    client = get_client()
    return sorted(set(client.queries.task_options()) | {t.name for t in client.registry.all()})


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
    searched_back_to: datetime | None = None  # a text search stopped here (TEXT_SCAN rows); older ones are next


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
    if filters.get("since"):  # a text search's window edge (not a form field)
        rows = rows.filter(enqueued_at__gte=filters["since"])
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
