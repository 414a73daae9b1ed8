"""GET /metrics: the engine's metrics in the Prometheus text format (OpenMetrics when the scraper asks for it).

Access: a valid API token of any scope (`Authorization: Bearer <token>`; "submit" is the smallest scope and
"operate" includes it), or, when METRICS.ANONYMOUS_LOOPBACK is on, a request from the loopback address that
sends no Authorization header and that no proxy forwarded. Redis or the database unreachable: 503 with
Retry-After, never a partial page.
"""

import ipaddress
import logging

from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from prometheus_client.exposition import choose_encoder

from jobconsole.conf import api_config, metrics_config
from jobconsole_api import prometheus
from jobconsole_api.auth import authenticate
from jobconsole_api.problems import Problem, api_view

log = logging.getLogger(__name__)

# A proxy that forwards a request says so in one of these; such a request came from elsewhere.
FORWARDING_HEADERS = ("HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED", "HTTP_X_REAL_IP")


def is_local_scrape(request: HttpRequest) -> bool:
    """A request from 127.0.0.0/8 or ::1 without an Authorization header, that no proxy says it forwarded."""
    if request.META.get("HTTP_AUTHORIZATION") or any(request.META.get(h) for h in FORWARDING_HEADERS):
        return False
    try:
        return ipaddress.ip_address(request.META.get("REMOTE_ADDR", "")).is_loopback
    except ValueError:
        return False


@api_view(methods=["GET"])
def metrics(request: HttpRequest) -> HttpResponse:
    try:
        if not (metrics_config()["ANONYMOUS_LOOPBACK"] and is_local_scrape(request)):
            authenticate(request, "submit")  # the token is looked up in the database
        encoder, content_type = choose_encoder(request.META.get("HTTP_ACCEPT", ""))
        body = encoder(prometheus.registry())  # the day's totals up to the rollup's cursor are in the database
    except DatabaseError as exc:
        log.warning("/metrics: the database is unreachable: %s", exc)
        seconds = api_config()["RETRY_AFTER"]
        raise Problem(
            503, f"The database is unreachable ({exc}); try again in {seconds} seconds.",
            headers={"Retry-After": str(seconds)},
        ) from None  # fmt: skip
    return HttpResponse(body, content_type=content_type, headers={"Cache-Control": "no-store"})
