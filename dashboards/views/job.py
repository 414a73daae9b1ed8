"""One job: everything known about it, and what an operator can do to it (each a POST: retry, cancel, delete,
requeue a stalled one, edit and retry)."""

from collections.abc import Callable

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from dashboards.job_detail import JobDetail, load
from dashboards.job_edit import JobEditForm, editable
from dashboards.job_links import job_links
from dashboards.permissions import operate_required, purge_required, view_required
from dashboards.rendering import page
from jobconsole import actions as job_actions
from jobconsole.actions import Outcome, User
from jobconsole.core import InvalidJob, JobState
from jobconsole.core.ids import check_job_id
from jobconsole.core.states import CANCELLABLE_STATES, REQUEUEABLE_STATES

RETRYABLE = REQUEUEABLE_STATES
CANCELLABLE = CANCELLABLE_STATES


def _canonical(job_id: str) -> str | None:
    try:
        return check_job_id(job_id)
    except InvalidJob:
        return None


def _missing(request: HttpRequest, job_id: str, malformed: bool) -> HttpResponse:
    context = {"job_id": job_id, "malformed": malformed}
    return page(request, "dashboards/job_missing.html", "jobs", context, status=404)


def _offers(job: JobDetail) -> dict[str, bool]:
    """Which buttons make sense for the job as it is (the engine re-checks every one)."""
    state = job.job_state
    return {
        "retry": job.live and state in RETRYABLE,
        "cancel": job.live and state in CANCELLABLE and not job.cancel_requested,
        "recover": job.live and state is JobState.RUNNING and job.lease_ran_out,
        "delete": not job.live or state is not JobState.RUNNING,
        "edit": editable(job),
    }


def _render(request: HttpRequest, job: JobDetail, form: JobEditForm | None, status: int = 200) -> HttpResponse:
    context = {"job": job, "form": form, "offers": _offers(job),
               "resubmit": job.job_state in job_actions.RESUBMITTABLE, "links": job_links(job.id)}  # fmt: skip
    return page(request, "dashboards/job.html", "jobs", context, status=status)


@view_required
def job_detail(request: HttpRequest, job_id: str) -> HttpResponse:
    canonical = _canonical(job_id)
    if canonical is None:
        return _missing(request, job_id, malformed=True)
    if canonical != job_id:
        return redirect("dashboards:job", job_id=canonical)
    job = load(canonical)
    if job is None:
        return _missing(request, job_id, malformed=False)
    return _render(request, job, JobEditForm.for_job(job) if editable(job) else None)


def _back(request: HttpRequest, job_id: str, gone: bool = False) -> HttpResponse:
    """To the page the button was on (a same-site path in `next`), else the job's page (the list once the
    job is gone)."""
    target = request.POST.get("next", "")
    if target.startswith("/") and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return redirect(target)
    return redirect("dashboards:jobs") if gone else redirect("dashboards:job", job_id=job_id)


type Action = Callable[[User, str, str], Outcome]


def _act(request: HttpRequest, job_id: str, action: Action, gone: bool = False) -> HttpResponse:
    canonical = _canonical(job_id)
    if canonical is None:
        return _missing(request, job_id, malformed=True)
    outcome = action(request.user, canonical, request.POST.get("reason", "")[:1000])
    (messages.success if outcome.ok else messages.warning)(request, outcome.message)
    return _back(request, canonical, gone=gone and outcome.ok)


@require_POST
@operate_required("job")
def job_retry(request: HttpRequest, job_id: str) -> HttpResponse:
    return _act(request, job_id, job_actions.retry)


@require_POST
@operate_required("job")
def job_cancel(request: HttpRequest, job_id: str) -> HttpResponse:
    return _act(request, job_id, job_actions.cancel)


@require_POST
@operate_required("job")
def job_recover(request: HttpRequest, job_id: str) -> HttpResponse:
    return _act(request, job_id, job_actions.recover)


@require_POST
@purge_required("job")
def job_delete(request: HttpRequest, job_id: str) -> HttpResponse:
    return _act(request, job_id, job_actions.delete, gone=True)


@require_POST
@operate_required("job")
def job_edit(request: HttpRequest, job_id: str) -> HttpResponse:
    canonical = _canonical(job_id)
    job = load(canonical) if canonical else None
    if canonical is None or job is None:
        return _missing(request, job_id, malformed=canonical is None)
    form = JobEditForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Nothing was changed: correct the form below.")
        return _render(request, job, form, status=400)
    edit = form.edit(job)
    if (job.state, job.attempts) != (edit.expected_state, edit.expected_attempts):
        # What the engine's compare-and-set would answer; it still guards the moment between this read and
        # the edit itself.
        messages.warning(
            request,
            f"Nothing was changed: the job moved on since this page was loaded (it was {edit.expected_state} after "
            f"{edit.expected_attempts} attempt(s); it is now {job.state} after {job.attempts}). Here it is as it "
            "is now.",
        )
        return redirect("dashboards:job", job_id=canonical)
    outcome = job_actions.edit_and_retry(request.user, canonical, edit)
    (messages.success if outcome.ok else messages.warning)(request, outcome.message)
    return redirect("dashboards:job", job_id=canonical)
