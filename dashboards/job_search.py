"""The console's jobs search: the filters (all in the GET query string, so a search is a link), read by a form.
The rows of a page come from jobconsole/search.py, the mirror-level search the HTTP API uses too."""

from typing import Any

from django import forms

from jobconsole.core import InvalidJob
from jobconsole.core.ids import check_job_id
from jobconsole.core.states import CONSOLE_ORDER
from jobconsole.core.states import STATES as STATE_TABLE
from jobconsole.engine import get_client
from jobconsole.models import Job
from jobconsole.search import FAILED_ATTEMPTS, PAGE, STATES, TEXT_SCAN, BadCursor, page

__all__ = ["PAGE", "TEXT_SCAN", "BadCursor", "JobFilterForm", "known_queues", "known_tasks", "page"]

DATETIME_FORMATS = ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d"]


# The state table's labels, in the console's tab order (what the pages show), after "had a failed attempt": the
# jobs an operator means by "what failed" (retrying, dead, discarded or completed after a retry).
STATE_CHOICES = [
    ("", "any state"),
    (FAILED_ATTEMPTS, "had a failed attempt (any state)"),
    *[(s.value, STATE_TABLE[s].label) for s in CONSOLE_ORDER],
]


class JobFilterForm(forms.Form):
    """The filters. Queue and task selects offer what Redis knows (every queue used, every task a worker
    announced); a value only the database still has rows for is accepted too."""

    state = forms.ChoiceField(required=False, choices=STATE_CHOICES, error_messages={"invalid_choice": (
        "Unknown state %(value)s: the states are " + ", ".join(STATES) + f", or {FAILED_ATTEMPTS}."
    )})  # fmt: skip
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
    return get_client().queries.queues.names()


def known_tasks() -> list[str]:
    """Tasks workers announced, and those registered in this process."""
    client = get_client()
    return sorted(set(client.queries.tasks.options()) | {t.name for t in client.registry.all()})
