"""The dead-letter selection an operator builds on the dead-letters page, from its query string.

The same parameters select what a bulk resubmit or purge applies to, so a link from the page to the bulk
preview carries the operator's filter as it is: queue, task, version, fingerprint, since, until (died between),
status (open, resubmitted or all; default open) and q (text in the error class or message)."""

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, Max, Min, Q, QuerySet
from django.http import QueryDict

from dashboards.filters import Filters
from jobconsole.core import JobState
from jobconsole.core.states import STATES
from jobconsole.models import DeadLetter, Job

STATUSES = ["open", "resubmitted", "all"]
FILTER_KEYS = ["queue", "task", "version", "fingerprint", "since", "until", "status", "q"]
GROUPS = 25


def select(query: QueryDict, *, text_window: int | None = None) -> tuple[QuerySet[DeadLetter], Filters]:
    """The dead letters the query's filters match. `text_window`: error text (a LIKE, which no index serves)
    is looked for only in that many of the newest dead letters the other filters match, and a note says so
    when there are more (the page bounds its search; an export or a bulk operation searches them all)."""
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
        if text_window is not None:
            # The time of the window's oldest, if there are more: then a range of the index holds the window.
            edge = list(rows.order_by("-died_at", "-pk").values_list("died_at", flat=True)[text_window - 1 :][:2])
            if len(edge) == 2:
                rows = rows.filter(died_at__gte=edge[0])
                filters.notes.append(
                    f"Error text is looked for in the newest {text_window:,} dead letters the other filters match; "
                    "narrow them (queue, task, dates) to search further back. Exports and bulk operations "
                    "search them all."
                )
        # One condition, so the database walks the other filters' index newest first and stops at a page.
        rows = rows.filter(Q(message__icontains=text) | Q(error_class__icontains=text))
    return rows, filters


def groups(rows: QuerySet[DeadLetter], limit: int = GROUPS) -> list[dict[str, Any]]:
    """Failures grouped by fingerprint (exception class + top frame without its line number): count, first and
    last seen, biggest first, each named by the class and frame of its latest dead letter the filters match (one
    index look-up each).

    Grouped by the fingerprint alone, so the aggregate reads only (fingerprint, died_at), which for open dead
    letters (the default), alone or within a queue or a task, one index holds (jc_dl_open_cause and the like):
    never the table. Grouped by class and frame too, it read every row of 100,000 dead letters, about a second,
    and split a cause in two when a line number in its top frame changed."""
    found = [
        dict(group)
        for group in rows.order_by()
        .values("fingerprint")
        .annotate(count=Count("*"), first=Min("died_at"), last=Max("died_at"))
        .order_by("-count", "-last", "fingerprint")[:limit]
    ]
    for group in found:
        latest = (
            rows.filter(fingerprint=group["fingerprint"]).order_by("-died_at", "-pk")
            .values("job_id", "error_class", "top_frame").first()
        )  # fmt: skip
        group.update(latest or {"job_id": None, "error_class": "", "top_frame": ""})
    return found


def filter_query(filters: Filters) -> QueryDict:
    """The filters as a query string of their own (for links that keep them: bulk preview, export)."""
    query = QueryDict(mutable=True)
    for key in FILTER_KEYS:
        if key in filters.values:
            query[key] = filters.values[key]
    return query


@dataclass(frozen=True, slots=True)
class Rerun:
    """What became of a resubmitted dead letter's new run, in words and a badge's tone (the state table's)."""

    text: str  # "succeeded", "failed again", "running", ...
    tone: str  # ok, bad, warn, info, or "" (idle)
    at: datetime | None = None  # when it ended, if it did


def reruns(letters: Sequence[DeadLetter]) -> dict[int, Rerun]:
    """Per resubmitted dead letter on a page (by pk), the outcome of the run its resubmit started: failed again
    if the job died again after it (a later dead letter of the same job), else its job's state now (the mirror's
    row). Two queries for the page, whatever its size."""
    resubmitted = [d for d in letters if d.resubmitted_at is not None]
    if not resubmitted:
        return {}
    job_ids = {d.job_id for d in resubmitted}
    deaths: dict[str, list[datetime]] = defaultdict(list)
    for job_id, died_at in DeadLetter.objects.filter(job_id__in=job_ids).values_list("job_id", "died_at"):
        deaths[job_id].append(died_at)
    jobs = {
        job_id: (state, finished_at)
        for job_id, state, finished_at in Job.objects.filter(id__in=job_ids).values_list("id", "state", "finished_at")
    }
    out: dict[int, Rerun] = {}
    for letter in resubmitted:
        assert letter.resubmitted_at is not None
        later = [at for at in deaths[letter.job_id] if at > letter.died_at and at >= letter.resubmitted_at]
        if later:
            out[letter.pk] = Rerun("failed again", "bad", min(later))
        elif letter.job_id not in jobs:
            out[letter.pk] = Rerun("job deleted", "")
        else:
            out[letter.pk] = _by_state(*jobs[letter.job_id])
    return out


def _by_state(state: str, finished_at: datetime | None) -> Rerun:
    try:
        current = JobState(state)
    except ValueError:  # a state written by other hands
        return Rerun(state, "")
    if current is JobState.COMPLETED:
        return Rerun("succeeded", "ok", finished_at)
    if current is JobState.DEAD:  # the mirror has not seen the resubmit yet (no later death was recorded)
        return Rerun("about to run", "info")
    if current is JobState.FAILED:  # a task that discards its dead: no dead letter for the second death
        return Rerun("failed again", "bad", finished_at)
    if current is JobState.RUNNING:
        return Rerun("still running", "info")
    if current is JobState.RETRYING:
        return Rerun("failed, will retry", "warn")
    info = STATES[current]
    return Rerun(info.label if info.terminal else f"{info.label}, not run yet", info.tone if info.terminal else "info")
