"""The Go scheduler seed (Distributed Job Scheduler): `POST /jobs {"type", "priority", "payload", "max_retries"}`
-> 202 {"job_id"} (routed here by api/seeds/jobs_route.py), and `GET /health` -> 200 {"status": "healthy"} (or
"degraded" with the reasons; 503 "unhealthy" when Redis or the database does not answer).

A job type is the name of a registered task (this project registers the seed's send_email and export_data as
example tasks); the payload string becomes the task's one parameter `payload`."""

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse

from jobconsole import service_health
from jobconsole.core.client import MAX_RETRIES
from jobconsole_api.seeds.common import SeedError, plain_text, seed_view, submit

INVALID_BODY = "Invalid request body"  # the seed's 400
PRIORITIES = ("high", "normal", "low")
RETRY_AFTER = "5"


def enqueue(request: HttpRequest, body: dict[str, Any]) -> HttpResponse:
    """Submit a Go scheduler body; 202 {"job_id"}."""
    job_type = body.get("type")
    if not isinstance(job_type, str) or not job_type.strip():
        raise SeedError(400, f"{INVALID_BODY}\ntype must be a non-empty string (the job type)")
    priority = body.get("priority") or "normal"  # Go's zero value "" was the seed's default
    if priority not in PRIORITIES:
        raise SeedError(400, f"{INVALID_BODY}\npriority must be high, normal or low; got {priority!r}")
    payload = body.get("payload", "")
    if not isinstance(payload, str):
        raise SeedError(400, f"{INVALID_BODY}\npayload must be a string (e.g. JSON text)")
    max_retries = body.get("max_retries")
    if max_retries is not None and (
        isinstance(max_retries, bool) or not isinstance(max_retries, int) or not 0 <= max_retries <= MAX_RETRIES
    ):
        raise SeedError(400, f"{INVALID_BODY}\nmax_retries must be an integer from 0 to {MAX_RETRIES}")
    job_id = submit(request, job_type.strip(), {"payload": payload}, priority=priority, max_retries=max_retries)
    return JsonResponse({"job_id": job_id}, status=202)


@seed_view(["GET"], scope=None, style=plain_text)
def health(request: HttpRequest) -> HttpResponse:
    """200 {"status": "healthy"} as the seed answered; 200 {"status": "degraded", "reasons", "findings"} while
    this process serves but something needs an operator (Redis refusing writes, the mirror's lag, a queue without
    a worker); 503 {"status": "unhealthy", "error", "findings"} with Retry-After when Redis or the database does
    not answer."""
    result = service_health.check()
    down = result.down()
    if down:
        body = {
            "status": "unhealthy",
            "error": " ".join(f.reason for f in down),
            "findings": [f.as_json() for f in result.findings],
        }
        return JsonResponse(body, status=503, headers={"Retry-After": RETRY_AFTER})
    if result.severity:
        problems = result.problems
        return JsonResponse({
            "status": "degraded",
            "reasons": [f.reason for f in problems],
            "findings": [f.as_json() for f in result.findings],
        })  # fmt: skip
    return JsonResponse({"status": "healthy"})
