"""/healthz: the load balancer's probe."""

import time

import redis
from django.db import DatabaseError, connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache

from jobconsole.engine import get_client


@never_cache  # a probe must see the state of now, never a cache's copy
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
