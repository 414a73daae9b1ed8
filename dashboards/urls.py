from django.urls import path, re_path

from dashboards.views import audit, dead_letters, health, overview, queues, workers

app_name = "dashboards"
urlpatterns = [
    path("", overview.overview, name="overview"),
    path("queues/", queues.queue_list, name="queues"),
    path("queues/<str:name>/", queues.queue_detail, name="queue"),
    path("queues/<str:name>/pause", queues.queue_pause, name="queue_pause"),
    path("dead/", dead_letters.dead_letter_list, name="dead_letters"),
    re_path(r"^dead/export\.(?P<fmt>csv|json)$", dead_letters.dead_letter_export, name="dead_letters_export"),
    path("workers/", workers.worker_list, name="workers"),
    path("audit/", audit.audit_log, name="audit"),
    path("healthz", health.healthz, name="healthz"),
]
