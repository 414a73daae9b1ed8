"""What an operator selected for a bulk operation: explicit job ids, or a filter over a mirror table.

Filters are the query-string parameters of the console's lists (bookmarkable; the same names and meanings as
the dead-letters page, dashboards/dead_letters.py, and the jobs page, dashboards/job_search.py), checked strictly
here: where a list page ignores a filter it
cannot read, a bulk operation must not widen to everything, so an unknown parameter or a value that cannot be
what it names (a state that does not exist, a malformed date or id) is a `SelectionError` whose message the page
shows as it is. Parameters of the lists that are not filters (paging, sorting, the page's view switches) are
ignored; see IGNORED.

Dead letters (`target="deadletter"`, the DeadLetter table):
    queue, task, fingerprint, error_class   exact, repeatable (queue=a&queue=b)
    version                                 task version, a whole number, repeatable
    status                                  open (default, as on the page) | resubmitted | all
    since, until                            died from / until: ISO date or date-time in the operator's time zone;
                                            `until` includes the whole of a day given as a date
    q                                       text in the error class or message
Jobs (`target="job"`, the Job table):
    state, queue, task                      exact, repeatable
    unique_key                              exact
    text                                    text inside the parameters (any case)
    after, before                           enqueued at or after / before (ISO date or date-time)
    workflow                                the jobs of one workflow (its id)
Both: `id` (repeatable) or `ids` (comma- or space-separated) job ids: when present they are the selection and the
filter is ignored. `selection=ticked` says the ids come from a page's checkboxes, so none ticked is an error
rather than "everything".
"""

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, time
from typing import Any
from urllib.parse import urlencode

from django.db.models import Q, QuerySet
from django.http import HttpRequest, QueryDict
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from jobconsole.bulk.kinds import Target
from jobconsole.core.errors import InvalidJob
from jobconsole.core.ids import check_job_id
from jobconsole.core.states import JobState
from jobconsole.models import DeadLetter, Job
from jobconsole.moments import to_utc

MAX_IDS = 10_000  # explicit selections come from a page's checkboxes; anything larger is a filter's job
IGNORED = frozenset({
    "kind", "id", "ids", "selection", "cursor", "newer", "page", "p", "o", "order", "sort", "per_page", "group",
    "group_by", "view", "format", "range", "tab", "csrfmiddlewaretoken", "_",
})  # fmt: skip
_FINGERPRINT = re.compile(r"^[0-9a-f]{16}$")
NAME_PATTERN = re.compile(r"^[A-Za-z0-9_.\-]{1,100}$")  # queue and task names, as the engine accepts them
_SPLIT = re.compile(r"[\s,]+")


class SelectionError(ValueError):
    """The selection cannot be understood; the message says why, for the operator."""


def _name(what: str) -> Any:
    def check(value: str) -> str:
        if not NAME_PATTERN.match(value):
            raise SelectionError(f"{value!r} is not a valid {what} name (letters, digits, '_.-', at most 100).")
        return value

    return check


def _state(value: str) -> str:
    if value not in JobState._value2member_map_:
        known = ", ".join(s.value for s in JobState)
        raise SelectionError(f"Unknown job state {value!r}; it is one of {known}.")
    return value


def _version(value: str) -> str:
    if not value.isdigit() or int(value) < 1:
        raise SelectionError(f"Task version {value!r} is not a positive whole number.")
    return str(int(value))


def _fingerprint(value: str) -> str:
    if not _FINGERPRINT.match(value):
        raise SelectionError(f"{value!r} is not an error fingerprint (16 hexadecimal digits).")
    return value


def _status(value: str) -> str:
    if value not in ("open", "resubmitted", "all"):
        raise SelectionError(f"Unknown dead-letter status {value!r}; it is open, resubmitted or all.")
    return value


def _text(limit: int) -> Any:
    def check(value: str) -> str:
        if len(value) > limit:
            raise SelectionError(f"A search text of {len(value)} characters is too long (at most {limit}).")
        return value

    return check


def _workflow(value: str) -> str:
    try:
        return check_job_id(value)  # a workflow id is a ULID, as a job id is
    except InvalidJob:
        raise SelectionError(f"{value[:40]!r} is not a workflow id (a 26-character ULID).") from None


def _when(value: str) -> str:
    parse_moment(value)
    return value


def parse_moment(value: str, *, end_of_day: bool = False) -> datetime:
    """An ISO date or date-time; without a zone it is the operator's (the current time zone). A date alone is
    its first moment, or with `end_of_day` its last."""
    moment: datetime | None
    try:
        moment = parse_datetime(value)
        if moment is None and (day := parse_date(value)) is not None:
            moment = datetime.combine(day, time.max if end_of_day else time.min)
    except ValueError:
        moment = None
    if moment is None:
        raise SelectionError(f"{value!r} is not a date or time (ISO 8601, such as 2025-01-31 or 2025-01-31T14:00).")
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment, timezone.get_current_timezone())
    try:
        return to_utc(moment)
    except ValueError:
        raise SelectionError(f"{value!r} is out of the range of times that can be stored.") from None


# Filter name -> (checker of one value, more than one value allowed)
FILTERS: dict[Target, dict[str, tuple[Any, bool]]] = {
    "deadletter": {
        "queue": (_name("queue"), True),
        "task": (_name("task"), True),
        "version": (_version, True),
        "fingerprint": (_fingerprint, True),
        "error_class": (_text(200), True),
        "status": (_status, False),
        "since": (_when, False),
        "until": (_when, False),
        "q": (_text(200), False),
    },
    "job": {
        "state": (_state, True),
        "queue": (_name("queue"), True),
        "task": (_name("task"), True),
        "unique_key": (_text(200), False),
        "text": (_text(200), False),
        "after": (_when, False),
        "before": (_when, False),
        "workflow": (_workflow, False),
    },
}


@dataclass(frozen=True)
class Selection:
    """Explicit job ids, or a filter (name -> values, checked); as given, for the record and the URLs."""

    target: Target
    ids: tuple[str, ...] = ()
    filter: dict[str, list[str]] = field(default_factory=dict)

    @property
    def explicit(self) -> bool:
        return bool(self.ids)

    def as_dict(self) -> dict[str, Any]:
        if self.ids:
            return {"target": self.target, "ids": list(self.ids)}
        return {"target": self.target, "filter": self.filter}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Selection":
        target = data.get("target")
        if target not in FILTERS:
            raise SelectionError(f"Unknown selection target {target!r}.")
        if data.get("ids"):
            return parse_selection(target, {"ids": list(data["ids"])})
        return parse_selection(target, dict(data.get("filter") or {}))

    def query(self) -> list[tuple[str, str]]:
        """As query-string pairs (the filter, or the ids), for a link to the preview."""
        if self.ids:
            return [("id", job_id) for job_id in self.ids]
        return [(name, value) for name, values in self.filter.items() for value in values]

    def query_string(self) -> str:
        return urlencode(self.query())

    def describe(self) -> str:
        if self.ids:
            return f"{len(self.ids):,} selected job{'s' if len(self.ids) != 1 else ''}"
        if not self.filter:
            return "every job" if self.target == "job" else "every dead letter not resubmitted"
        return ", ".join(f"{name} = {' or '.join(values)}" for name, values in self.filter.items())


def _values(data: Mapping[str, Any] | QueryDict, name: str) -> list[str]:
    if isinstance(data, QueryDict):
        raw: Iterable[Any] = data.getlist(name)
    else:
        value = data.get(name)
        raw = value if isinstance(value, list | tuple) else [] if value is None else [value]
    return [str(v).strip() for v in raw if str(v).strip()]


def parse_ids(raw: Sequence[str]) -> tuple[str, ...]:
    """Job ids from form values (each may hold several, comma- or space-separated), checked and deduplicated."""
    ids: dict[str, None] = {}
    for value in raw:
        for part in _SPLIT.split(value):
            if not part:
                continue
            try:
                ids[check_job_id(part)] = None
            except InvalidJob:
                shown = part if len(part) <= 40 else part[:40] + "..."
                raise SelectionError(f"{shown!r} is not a job id (a 26-character ULID).") from None
            if len(ids) > MAX_IDS:
                raise SelectionError(f"More than {MAX_IDS:,} ids selected; select by a filter instead.")
    return tuple(ids)


def parse_selection(target: Target, data: Mapping[str, Any] | QueryDict) -> Selection:
    """Check and normalise a selection given as form or query-string data (see the module's docstring)."""
    if target not in FILTERS:
        raise SelectionError(f"Unknown selection target {target!r}.")
    ids = parse_ids(_values(data, "id") + _values(data, "ids"))
    if ids:
        return Selection(target, ids=ids)
    if _values(data, "selection") == ["ticked"]:
        noun = "dead letters" if target == "deadletter" else "jobs"
        raise SelectionError(f"No {noun} were ticked: tick some, or choose the action for all that match the filter.")
    known = FILTERS[target]
    chosen: dict[str, list[str]] = {}
    for name in data:
        if name in IGNORED:
            continue
        if name not in known:
            names, noun = ", ".join(known), "dead letters" if target == "deadletter" else "jobs"
            raise SelectionError(f"Unknown filter {name!r} for {noun}; the filters are {names}.")
        check, many = known[name]
        values = list(dict.fromkeys(check(v) for v in _values(data, name)))
        if len(values) > 1 and not many:
            raise SelectionError(f"The filter {name!r} takes one value, not {len(values)}.")
        if values:
            chosen[name] = values
    return Selection(target, filter=chosen)


def selection_from_request(request: HttpRequest, target: Target) -> Selection:
    """The selection a list page means: the ids ticked on it (`id`, by GET or POST), else its GET filter.

    For the dead-letters and jobs pages: link to `dashboards:bulk_preview` with `?kind=...&<the page's filter>`,
    or submit the ticked `id`s with `kind` (and `selection=ticked`) to it. Raises SelectionError with a message."""
    if request.method == "POST":
        return parse_selection(target, request.POST)
    return parse_selection(target, request.GET)


# --- the rows a selection matches ---------------------------------------------------------------------------


def matching(selection: Selection) -> "QuerySet[Any]":
    """The DeadLetter or Job rows the selection matches (before the kind's own conditions)."""
    if selection.target == "deadletter":
        letters = DeadLetter.objects.all()
        if selection.ids:
            return letters.filter(job_id__in=selection.ids)
        return _filter_letters(letters, selection.filter)
    jobs = Job.objects.all()
    if selection.ids:
        return jobs.filter(id__in=selection.ids)
    return _filter_jobs(jobs, selection.filter)


def _filter_letters(rows: "QuerySet[DeadLetter]", f: dict[str, list[str]]) -> "QuerySet[DeadLetter]":
    for name, column in (("queue", "queue"), ("task", "task"), ("fingerprint", "fingerprint"),
                         ("error_class", "error_class")):  # fmt: skip
        if name in f:
            rows = rows.filter(**{f"{column}__in": f[name]})
    if "version" in f:
        rows = rows.filter(version__in=[int(v) for v in f["version"]])
    status = (f.get("status") or ["open"])[0]
    if status == "open":
        rows = rows.filter(resubmitted_at__isnull=True)
    elif status == "resubmitted":
        rows = rows.filter(resubmitted_at__isnull=False)
    if "since" in f:
        rows = rows.filter(died_at__gte=parse_moment(f["since"][0]))
    if "until" in f:
        rows = rows.filter(died_at__lte=parse_moment(f["until"][0], end_of_day=True))
    if "q" in f:
        rows = rows.filter(Q(error_class__icontains=f["q"][0]) | Q(message__icontains=f["q"][0]))
    return rows


def _filter_jobs(rows: "QuerySet[Job]", f: dict[str, list[str]]) -> "QuerySet[Job]":
    for name in ("state", "queue", "task"):
        if name in f:
            rows = rows.filter(**{f"{name}__in": f[name]})
    if "unique_key" in f:
        rows = rows.filter(unique_key=f["unique_key"][0])
    if "workflow" in f:
        rows = rows.filter(workflow_id=f["workflow"][0])
    if "text" in f:
        rows = rows.filter(params__icontains=f["text"][0])
    if "after" in f:
        rows = rows.filter(enqueued_at__gte=parse_moment(f["after"][0]))
    if "before" in f:
        rows = rows.filter(enqueued_at__lt=parse_moment(f["before"][0]))
    return rows
