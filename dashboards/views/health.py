"""/healthz: the load balancer's probe.

503 only on what makes this process useless: Redis unreachable, the database unreachable. Redis refusing writes
(full, unable to persist, a read-only replica) answers 200 with `"status": "degraded"` and the reason: every web
process sees the same Redis, so taking them all out of the balancer would only hide the console that shows it."""

from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache

from jobconsole import service_health


@never_cache  # a probe must see the state of now, never a cache's copy
def healthz(request: HttpRequest) -> JsonResponse:
    """200 {"status": "healthy"|"degraded", findings, redis_ms, database_ms}; 503 {"status": "unavailable", failed,
    <component>: why, findings} with Retry-After."""
    result = service_health.check(service_health.PROBE)
    findings = [f.as_json() for f in result.findings]
    down = result.down()
    if down:
        failed = {f.component: f.reason for f in down}
        body = {"status": "unavailable", "failed": sorted(failed), **failed, **result.timings, "findings": findings}
        return JsonResponse(body, status=503, headers={"Retry-After": "5"})
    status = "degraded" if result.severity else "healthy"
    return JsonResponse({"status": status, **result.timings, "findings": findings})
