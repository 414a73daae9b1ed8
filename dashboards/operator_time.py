"""Times in the operator's time zone on every console page, with no setting in the adopting project.

console.js stores the browser's zone in a cookie; every console view runs under that zone (the URLs wrap each
view, dashboards/urls.py), so neither a middleware nor a context processor needs listing in settings."""

import zoneinfo
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern
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


def in_operator_zone(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """The view, rendering under the operator's zone (console views render before they return)."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        zone = operator_zone(request)
        if zone is None:
            return view(request, *args, **kwargs)
        with timezone.override(zone):
            return view(request, *args, **kwargs)

    return wrapped


def each_in_operator_zone(patterns: list[URLPattern]) -> list[URLPattern]:
    return [URLPattern(p.pattern, in_operator_zone(p.callback), p.default_args, p.name) for p in patterns]
