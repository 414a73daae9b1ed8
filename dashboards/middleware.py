"""Optional: the operator's time zone on every page of the site (the admin's too), not only the console's.

The console needs no middleware (dashboards/operator_time.py); list this one to extend the cookie's zone to the
rest of the site."""

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from dashboards.operator_time import COOKIE, operator_zone

__all__ = ["COOKIE", "OperatorTimezoneMiddleware", "operator_zone"]


class OperatorTimezoneMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        zone = operator_zone(request)
        if zone is None:
            return self.get_response(request)
        with timezone.override(zone):
            return self.get_response(request)
