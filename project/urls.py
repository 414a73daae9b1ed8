from django.contrib import admin
from django.urls import include, path

from jobconsole_api.metrics import metrics

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("jobconsole_api.urls")),
    path("", include("jobconsole_api.seeds.urls")),  # before the console: /jobs (the seeds) beside /jobs/ (its page)
    path("metrics", metrics, name="metrics"),
    path("", include("dashboards.urls")),
]

handler403 = "dashboards.views.errors.permission_denied"  # the console's refusal page (problem+json under /api/)
