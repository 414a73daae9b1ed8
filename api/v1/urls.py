"""/api/v1/: every declared operation (one URL per path), the OpenAPI document and its docs page."""

from django.urls import URLPattern, path

import api.v1.catalogue  # noqa: F401  (declares the operations)
from api.v1.routing import urlpatterns as operation_urls
from api.v1.views import docs, openapi_json

app_name = "api_v1"

urlpatterns: list[URLPattern] = [
    path("openapi.json", openapi_json, name="openapi"),
    path("docs", docs, name="docs"),
    *operation_urls(),
]
