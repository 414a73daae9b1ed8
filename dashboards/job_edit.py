"""The edit-and-retry form of the job page: parameters and priority, with the job's state and attempt count as
the operator saw them (hidden), which the engine compares before it changes anything."""

import json
from typing import Any

from django import forms

from dashboards.job_detail import JobDetail
from jobconsole.actions import Edit
from jobconsole.core import JobState
from jobconsole.core.states import RESUBMITTABLE_STATES, WAITING_STATES

EDITABLE_STATES = WAITING_STATES | RESUBMITTABLE_STATES


def editable(job: JobDetail) -> bool:
    return job.live and job.job_state in EDITABLE_STATES


def pretty(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text  # not JSON (written by other hands): shown as it is, for the operator to fix


class JobEditForm(forms.Form):
    params = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 10, "spellcheck": "false"}), max_length=1_000_000,
        help_text="A JSON object; checked against the task's parameters.",
    )  # fmt: skip
    priority = forms.IntegerField(min_value=-1_000_000, max_value=1_000_000, help_text="Lower runs first.")
    reset_attempts = forms.BooleanField(required=False, initial=True, label="Start counting attempts again")
    reason = forms.CharField(required=False, max_length=1000, label="Reason (kept in the audit log)")
    expected_state = forms.ChoiceField(choices=[(s.value, s.value) for s in EDITABLE_STATES], widget=forms.HiddenInput)
    expected_attempts = forms.IntegerField(min_value=0, widget=forms.HiddenInput)

    @classmethod
    def for_job(cls, job: JobDetail) -> "JobEditForm":
        return cls(initial={"params": pretty(job.params), "priority": job.priority, "expected_state": job.state,
                            "expected_attempts": job.attempts, "reset_attempts": True})  # fmt: skip

    def clean_params(self) -> dict[str, Any]:
        try:
            value = json.loads(self.cleaned_data["params"])
        except ValueError as exc:
            raise forms.ValidationError(f"Not valid JSON: {exc}.") from None
        if not isinstance(value, dict):
            raise forms.ValidationError('The parameters must be a JSON object, like {"to": "a@example.com"}.')
        return value

    def edit(self, job: JobDetail) -> Edit:
        """The change to send: only what differs from the job as it is now (a waiting job's edit sends nothing
        that is unchanged; a resubmission goes ahead even unchanged, which is a plain retry with a check)."""
        data = self.cleaned_data
        try:
            stored: Any = json.loads(job.params)
        except ValueError:
            stored = None  # undecodable stored text: any valid object is a change
        return Edit(
            expected_state=JobState(data["expected_state"]), expected_attempts=data["expected_attempts"],
            params=None if data["params"] == stored else data["params"],
            priority=None if data["priority"] == job.priority else data["priority"],
            reset_attempts=data["reset_attempts"], reason=data["reason"],
        )  # fmt: skip
