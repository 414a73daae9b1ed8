"""Rendering a console page: the navigation, the user's abilities, and htmx partials."""

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import NoReverseMatch, reverse

from dashboards.permissions import abilities

# (section, label, URL name) in the order of the sidebar; a page a deployment does not route is left out.
NAVIGATION = [
    ("overview", "Overview", "dashboards:overview"),
    ("alarms", "Alarms", "dashboards:alarms"),
    ("queues", "Queues", "dashboards:queues"),
    ("jobs", "Jobs", "dashboards:jobs"),
    ("workflows", "Workflows", "dashboards:workflows"),
    ("running", "Running", "dashboards:running"),
    ("scheduled", "Scheduled", "dashboards:scheduled"),
    ("schedules", "Schedules", "dashboards:schedules"),
    ("dead", "Dead letters", "dashboards:dead_letters"),
    ("workers", "Workers", "dashboards:workers"),
    ("flow", "Flow control", "dashboards:flow"),
    ("tasks", "Tasks", "dashboards:tasks"),
    ("bulk", "Bulk operations", "dashboards:bulk_list"),
    ("audit", "Audit log", "dashboards:audit"),
]


def navigation(current: str) -> list[dict[str, Any]]:
    out = []
    for section, label, name in NAVIGATION:
        try:
            url = reverse(name)
        except NoReverseMatch:
            continue
        out.append({"section": section, "label": label, "url": url, "current": section == current})
    return out


def htmx_asked(request: HttpRequest) -> bool:
    """Whether htmx made the request (a live part's poll), from its header: django-htmx's middleware, which would
    say the same as `request.htmx`, is not in an adopting project's settings (the README lists none)."""
    return request.headers.get("HX-Request") == "true"


def page(
    request: HttpRequest,
    template: str,
    section: str,
    context: dict[str, Any] | None = None,
    *,
    partial: str | None = None,
    status: int = 200,
) -> HttpResponse:
    """The whole page, or only `partial` (a {% partialdef %} of the template) when htmx asks for it."""
    name = f"{template}#{partial}" if partial and htmx_asked(request) else template
    full = {"nav": navigation(section), "section": section, "can": abilities(request.user), **(context or {})}
    return render(request, name, full, status=status)
