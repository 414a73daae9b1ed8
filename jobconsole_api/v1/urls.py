"""/api/v1/: every declared operation (one URL per path), the OpenAPI document and its docs page."""

from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path, re_path

import jobconsole_api.v1.catalogue  # noqa: F401  (declares the operations)
from jobconsole_api.access import check_same_site
from jobconsole_api.auth import authenticate
from jobconsole_api.problems import Problem, api_view
from jobconsole_api.v1.routing import urlpatterns as operation_urls
from jobconsole_api.v1.views import docs, openapi_json

app_name = "api_v1"


@api_view(methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
def unknown(request: HttpRequest, rest: str) -> HttpResponse:
    """Any other path under /api/v1/: a problem+json 404 like the rest of the API, not the site's HTML page (to a
    caller with a token: the API tells nobody else anything)."""
    check_same_site(request)
    authenticate(request, "any")
    raise Problem(404, f"No API route {request.path}; the routes are listed at /api/v1/docs.")


urlpatterns: list[URLPattern] = [
    path("openapi.json", openapi_json, name="openapi"),
    path("docs", docs, name="docs"),
    *operation_urls(),
    re_path(r"^(?P<rest>.*)$", unknown),
]
