"""The Runqueue seed over HTTP (it had AddJob in-process only, and its health check behind Blueprint's
lib/r_health routes): `POST /runqueue/jobs` is AddJob (jobconsole/core/runqueue.py does the work, also callable
from Python), `GET /runqueue/health` its health check, computed by jobconsole/health.py. Runqueue had no HTTP
error format of its own, so errors are problem+json."""

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse

from jobconsole import health, service_health
from jobconsole.core import runqueue
from jobconsole.core.errors import DuplicateJob, InvalidJob
from jobconsole_api.problems import Problem
from jobconsole_api.seeds.common import as_problem, caller, client, iso, read_object, seed_view

FIELDS = {"topic", "json", "priority", "run_at", "unique_key"}


@seed_view(["POST"], scope="submit", style=as_problem)
def add_job(request: HttpRequest) -> HttpResponse:
    """POST /runqueue/jobs {topic, json?, priority?, run_at?, unique_key?} -> 201 {id, topic, queue, state,
    priority, run_at, unique_key}; 409 (with the holder's `job_id`) when the unique key is held by a live job."""
    body = read_object(request, "The body must be a JSON object")
    unknown = sorted(set(body) - FIELDS)
    if unknown:
        raise Problem(422, f"unknown field(s) {', '.join(unknown)}; AddJob takes {', '.join(sorted(FIELDS))}")
    topic = body.get("topic")
    if not isinstance(topic, str) or not topic:
        raise Problem(422, "topic must be the name of a registered task")
    unique_key = body.get("unique_key")
    if unique_key is not None and not isinstance(unique_key, str):
        raise Problem(422, "unique_key must be a string")
    who = caller(request)
    who.check_submit(topic)
    c = client()
    try:
        result = runqueue.add_job(
            c, topic, body.get("json"), priority=body.get("priority"), run_at=body.get("run_at"), unique_key=unique_key
        )
    except DuplicateJob as exc:
        raise Problem(409, str(exc), job_id=exc.job_id, unique_key=exc.unique_key) from None
    except InvalidJob as exc:
        raise Problem(422, str(exc)) from None
    if result.created:
        who.remember([result.id])
    job = c.get(result.id, result.queue, history=False)
    return JsonResponse(_job(job), status=201)


def _job(job: Any) -> dict[str, Any]:
    return {
        "id": job.id, "topic": job.task, "queue": job.queue, "state": str(job.state),
        "priority": job.priority + runqueue.PRIORITY_OFFSET, "run_at": iso(job.run_at),
        "unique_key": job.unique_key or None, "json": job.params_json,
    }  # fmt: skip


@seed_view(["GET"], scope="any", style=as_problem)
def health_check(request: HttpRequest) -> HttpResponse:
    """GET /runqueue/health: {status: g|y|r, details: {delays, retries, failures, failure_rates}, reasons,
    findings, at}. The status is the worse of the queues' rules (health.py; thresholds: the HEALTH settings, per
    queue HEALTH.QUEUES, per task HEALTH.TASKS) and the service's findings (service_health.py: degraded is y, a
    down database r); the service's reasons come first."""
    queues = health.check(queries=client().queries)
    service = service_health.check(client=client(), queues=queues.queues)
    level = max(queues.level, service.severity.level)
    return JsonResponse({
        "status": level.code,
        "details": queues.details(),
        "reasons": [f.reason for f in service.problems] + [r.message for r in queues.reasons],
        "findings": [f.as_json() for f in service.findings],
        "at": iso(queues.at),
    })  # fmt: skip
