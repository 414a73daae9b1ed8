"""The console. For now: an overview of the queues and a health probe; the full console is its own issue."""

import time

import redis
from django.contrib.auth.decorators import login_required
from django.db import DatabaseError, connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from jobconsole.engine import get_client


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    client = get_client()
    queues = [client.counts(q) for q in client.queues()]
    workers = client.queries.worker_count()
    template = "dashboards/overview.html#queues" if getattr(request, "htmx", False) else "dashboards/overview.html"
    return render(request, template, {"queues": queues, "workers": workers})


def healthz(request: HttpRequest) -> JsonResponse:
    """200 when Redis and the database both answer; 503 naming each one that did not, and why."""
    timings: dict[str, float] = {}
    failed: dict[str, str] = {}
    try:
        timings["redis_ms"] = round(get_client().queries.ping() * 1000, 2)
    except redis.RedisError as exc:
        failed["redis"] = str(exc) or type(exc).__name__
    started = time.monotonic()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
        timings["database_ms"] = round((time.monotonic() - started) * 1000, 2)
    except DatabaseError as exc:
        failed["database"] = str(exc) or type(exc).__name__
    if failed:
        body = {"status": "unavailable", "failed": sorted(failed), **failed, **timings}
        return JsonResponse(body, status=503, headers={"Retry-After": "5"})
    return JsonResponse({"status": "healthy", **timings})
