"""GET /metrics: the engine's metrics in the Prometheus text format (OpenMetrics when the scraper asks for it).

Access: an API token of the read scope (`Authorization: Bearer <token>`; "operate" includes it) without queue or
task limits (the page shows every queue), or, when METRICS.ANONYMOUS_LOOPBACK is on, a request from the loopback
address that sends no Authorization header and that no proxy forwarded. Redis or the database unreachable: 503 with
Retry-After, never a partial page.
"""

import logging

from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from prometheus_client.exposition import choose_encoder

from jobconsole.conf import api_config, metrics_config
from jobconsole_api import prometheus
from jobconsole_api.access import Caller, from_loopback
from jobconsole_api.auth import authenticate
from jobconsole_api.problems import Problem, api_view

log = logging.getLogger(__name__)


def is_local_scrape(request: HttpRequest) -> bool:
    """A request from 127.0.0.0/8 or ::1 without an Authorization header, that no proxy says it forwarded."""
    return not request.META.get("HTTP_AUTHORIZATION") and from_loopback(request)


@api_view(methods=["GET"])
def metrics(request: HttpRequest) -> HttpResponse:
    try:
        if not (metrics_config()["ANONYMOUS_LOOPBACK"] and is_local_scrape(request)):
            # The token is looked up in the database; the page shows every queue, so no limited token.
            Caller(authenticate(request, "read")).check_unlimited("/metrics shows every queue")
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
