"""The console. For now: an overview of the queues and a health probe; the full console is its own issue."""

import time

import redis
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from jobconsole.engine import get_client, get_redis


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    client = get_client()
    queues = [client.counts(q) for q in client.queues()]
    workers = client.queries.worker_count()
    template = "dashboards/overview.html#queues" if getattr(request, "htmx", False) else "dashboards/overview.html"
    return render(request, template, {"queues": queues, "workers": workers})


def healthz(request: HttpRequest) -> JsonResponse:
    """200 when Redis answers, 503 (with the reason) when it does not."""
    started = time.monotonic()
    try:
        get_redis().ping()
    except redis.RedisError as exc:
        return JsonResponse({"status": "unavailable", "redis": str(exc)}, status=503, headers={"Retry-After": "5"})
    return JsonResponse({"status": "healthy", "redis_ms": round((time.monotonic() - started) * 1000, 2)})
