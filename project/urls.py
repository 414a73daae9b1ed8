from django.contrib import admin
from django.urls import include, path

from jobconsole_api.metrics import metrics

urlpatterns = [
    path("admin/", admin.site.urls),
    # The API's v1 alone here: this site serves /metrics at its root, where Prometheus and KEDA configurations
    # of docs/metrics.md look (jobconsole_api.urls, for an adopting project, has both: <prefix>/v1/, <prefix>/metrics).
    path("api/v1/", include("jobconsole_api.v1.urls")),
    path("", include("jobconsole_api.seeds.urls")),  # before the console: /jobs (the seeds) beside /jobs/ (its page)
    path("metrics", metrics, name="metrics"),
    path("", include("dashboards.urls")),
]

handler403 = "dashboards.views.errors.permission_denied"  # the console's refusal page (problem+json under /api/)
