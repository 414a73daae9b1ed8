"""The Go scheduler seed (Distributed Job Scheduler): `POST /jobs {"type", "priority", "payload", "max_retries"}`
-> 202 {"job_id"} (routed here by api/seeds/jobs_route.py), and `GET /health` -> 200 {"status": "healthy"}.

A job type is the name of a registered task (this project registers the seed's send_email and export_data as
example tasks); the payload string becomes the task's one parameter `payload`."""

from typing import Any

import redis
from django.http import HttpRequest, HttpResponse, JsonResponse

from jobconsole.engine import get_client
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
    if max_retries is not None and (isinstance(max_retries, bool) or not isinstance(max_retries, int)):
        raise SeedError(400, f"{INVALID_BODY}\nmax_retries must be an integer")
    job_id = submit(request, job_type.strip(), {"payload": payload}, priority=priority, max_retries=max_retries)
    return JsonResponse({"job_id": job_id}, status=202)


@seed_view(["GET"], scope=None, style=plain_text)
def health(request: HttpRequest) -> HttpResponse:
    """200 {"status": "healthy"} while Redis answers; 503 {"status": "unhealthy", "error"} with Retry-After."""
    try:
        get_client().queries.ping()
    except redis.RedisError as exc:
        body = {"status": "unhealthy", "error": f"Redis: {exc or type(exc).__name__}"}
        return JsonResponse(body, status=503, headers={"Retry-After": RETRY_AFTER})
    return JsonResponse({"status": "healthy"})
