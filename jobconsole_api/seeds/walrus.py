"""The Walrus scheduler seed: `POST /schedule/ {"payload", "job_type", "run_after_secs"}` -> 200 {"job_id"}, and
`PUT /schedule/{id}` (new payload and/or run_after_secs) and `DELETE /schedule/{id}` for a job still waiting
(their stubs in the seed answered 200 and did nothing): a submit token changes only the jobs it submitted
(another's is a 404, as an unknown id), and every change is in the audit log under the caller's name.

A job type is the name of a registered task; the payload string becomes its one parameter `payload`."""

from datetime import timedelta
from typing import Any

from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse

from jobconsole import audit
from jobconsole.core.editing import edit_job
from jobconsole.core.job import Job
from jobconsole.core.timing import MAX_DELAY_SECONDS
from jobconsole_api.auth import actor
from jobconsole_api.seeds.common import (
    SeedError,
    client,
    find_visible_job,
    plain_text,
    read_object,
    seed_view,
    submit,
)

BAD_BODY = "Request body is not in the right format"


def _run_after(body: dict[str, Any]) -> int | None:
    """run_after_secs, or RunAfterSecs: the seed's malformed struct tag made Go read the field's own name."""
    value = body.get("run_after_secs", body.get("RunAfterSecs"))
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_DELAY_SECONDS:
        raise SeedError(
            400, f"{BAD_BODY}\nrun_after_secs must be a whole number of seconds from 0 to {MAX_DELAY_SECONDS}"
        )
    return value


def _payload(body: dict[str, Any]) -> str | None:
    value = body.get("payload")
    if value is not None and not isinstance(value, str):
        raise SeedError(400, f"{BAD_BODY}\npayload must be a string")
    return value


@seed_view(["POST"], scope="submit", style=plain_text)
def schedule(request: HttpRequest) -> HttpResponse:
    """POST /schedule/: the job runs after run_after_secs seconds (counted on Redis's clock)."""
    body = read_object(request, BAD_BODY)
    job_type = body.get("job_type")
    if not isinstance(job_type, str) or not job_type.strip():
        raise SeedError(400, "JobType cannot be empty")  # the seed's words
    payload = _payload(body) or ""
    delay = _run_after(body)
    job_id = submit(request, job_type.strip(), {"payload": payload}, delay=delay or None)
    return JsonResponse({"job_id": job_id})


@seed_view(["PUT", "DELETE"], scope="submit", style=plain_text)
def scheduled_job(request: HttpRequest, job_id: str) -> HttpResponse:
    """PUT changes a waiting job's payload and/or run time; DELETE removes a waiting job. 404 for an unknown id
    (and for a job the caller may not see), 409 once the job has started (or finished)."""
    job = find_visible_job(request, job_id)
    if job is None:
        raise SeedError(404, f"job {job_id} not found")
    if not job.state.is_waiting:
        raise SeedError(409, f"job {job_id} is {job.state}; only a job that has not started can be changed")
    if request.method == "DELETE":
        return _delete(request, job)
    return _update(request, job, read_object(request, BAD_BODY))


def _update(request: HttpRequest, job: Job, body: dict[str, Any]) -> HttpResponse:
    payload = _payload(body)
    delay = _run_after(body)
    if payload is None and delay is None:
        raise SeedError(400, f"{BAD_BODY}\ngive payload, run_after_secs or both")
    c = client()
    run_at = None if delay is None else c.queries.now() + timedelta(seconds=delay)
    params = None if payload is None else {**job.params, "payload": payload}
    # Compare-and-set on the state and attempt count we read: a job that started meanwhile is not changed.
    result = edit_job(c, job.id, expected_state=job.state, expected_attempts=job.attempts, queue=job.queue,
                      params=params, run_at=run_at)  # fmt: skip
    changes: dict[str, Any] = {}
    if payload is not None:
        changes["payload"] = payload
    if run_at is not None:
        changes["run_at"] = run_at.isoformat()
    with transaction.atomic():
        audit.record(actor(request), "edit_job", job_ids=[job.id], queue=job.queue, reason="Walrus API",
                     detail={"changes": changes, "state": str(result.state)})  # fmt: skip
    return JsonResponse({"job_id": job.id})


def _delete(request: HttpRequest, job: Job) -> HttpResponse:
    # Only while it is still in the state we read: a job that started meanwhile is not deleted (409).
    client().delete(job.id, job.queue, expected_state=job.state)
    audit.record(actor(request), "delete", job_ids=[job.id], queue=job.queue, reason="Walrus API",
                 detail={"in_redis": True})  # fmt: skip
    return JsonResponse({"job_id": job.id})
