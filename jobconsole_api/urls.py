"""The API's routes: the native JSON API under v1/ and /metrics beside it, so one include gives an adopting
project both (`path("api/", include("jobconsole_api.urls"))`: /api/v1/ and /api/metrics). The seed interfaces
are jobconsole_api.seeds.urls, mounted apart at their own paths."""

from django.urls import URLPattern, URLResolver, include, path

from jobconsole_api.metrics import metrics

urlpatterns: list[URLPattern | URLResolver] = [
    path("v1/", include("jobconsole_api.v1.urls")),
    path("metrics", metrics, name="metrics"),
]
