"""Show times in the operator's time zone: console.js stores the browser's zone in a cookie, read here."""

import zoneinfo
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils import timezone

COOKIE = "jc_tz"


def operator_zone(request: HttpRequest) -> zoneinfo.ZoneInfo | None:
    name = request.COOKIES.get(COOKIE, "")
    if not name or len(name) > 64:
        return None
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return None  # a made-up or malformed zone: the site's TIME_ZONE


class OperatorTimezoneMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        zone = operator_zone(request)
        if zone is None:
            return self.get_response(request)
        with timezone.override(zone):
            return self.get_response(request)
