"""The API's routes: the native JSON API under v1/ (the seed interfaces and /metrics are mounted beside it)."""

from django.urls import URLPattern, URLResolver, include, path

urlpatterns: list[URLPattern | URLResolver] = [
    path("v1/", include("jobconsole_api.v1.urls")),
]
