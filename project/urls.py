from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("api.urls")),
    path("", include("api.seeds.urls")),  # before the console: /jobs (the seeds) beside /jobs/ (its page)
    path("", include("dashboards.urls")),
]
