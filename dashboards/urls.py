from django.urls import path

from dashboards.views import health, overview, queues

app_name = "dashboards"
urlpatterns = [
    path("", overview.overview, name="overview"),
    path("queues/", queues.queue_list, name="queues"),
    path("queues/<str:name>/", queues.queue_detail, name="queue"),
    path("queues/<str:name>/pause", queues.queue_pause, name="queue_pause"),
    path("healthz", health.healthz, name="healthz"),
]
