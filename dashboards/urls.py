from django.urls import path, re_path

from dashboards.operator_time import each_in_operator_zone
from dashboards.views import (
    assets,
    audit,
    bulk,
    dead_letters,
    flow,
    health,
    job,
    jobs,
    overview,
    queues,
    running,
    scheduled,
    schedules,
    tasks,
    workers,
)

app_name = "dashboards"
urlpatterns = [
    path("", overview.overview, name="overview"),
    path("queues/", queues.queue_list, name="queues"),
    path("queues/<str:name>/", queues.queue_detail, name="queue"),
    path("queues/<str:name>/pause", queues.queue_pause, name="queue_pause"),
    path("jobs/", jobs.job_list, name="jobs"),
    path("jobs/<str:job_id>/", job.job_detail, name="job"),
    path("jobs/<str:job_id>/retry", job.job_retry, name="job_retry"),
    path("jobs/<str:job_id>/cancel", job.job_cancel, name="job_cancel"),
    path("jobs/<str:job_id>/recover", job.job_recover, name="job_recover"),
    path("jobs/<str:job_id>/delete", job.job_delete, name="job_delete"),
    path("jobs/<str:job_id>/edit", job.job_edit, name="job_edit"),
    path("running/", running.running, name="running"),
    path("scheduled/", scheduled.scheduled, name="scheduled"),
    path("schedules/", schedules.schedule_list, name="schedules"),
    path("schedules/<str:name>/action", schedules.schedule_action, name="schedule_action"),
    path("dead/", dead_letters.dead_letter_list, name="dead_letters"),
    re_path(r"^dead/export\.(?P<fmt>csv|json)$", dead_letters.dead_letter_export, name="dead_letters_export"),
    path("workers/", workers.worker_list, name="workers"),
    path("flow/", flow.flow_control, name="flow"),
    path("tasks/", tasks.task_list, name="tasks"),
    path("tasks/<str:name>/", tasks.task_detail, name="task"),
    path("audit/", audit.audit_log, name="audit"),
    path("bulk/", bulk.bulk_list, name="bulk_list"),
    path("bulk/new", bulk.bulk_preview, name="bulk_preview"),
    path("bulk/confirm", bulk.bulk_confirm, name="bulk_confirm"),
    path("bulk/<int:pk>/", bulk.bulk_detail, name="bulk_detail"),
    path("bulk/<int:pk>/progress.json", bulk.bulk_progress_json, name="bulk_progress"),
    path("bulk/<int:pk>/cancel", bulk.bulk_cancel, name="bulk_cancel"),
    path("bulk/<int:pk>/resume", bulk.bulk_resume, name="bulk_resume"),
    path("healthz", health.healthz, name="healthz"),
    path("assets/plotly-basic-<str:version>.min.js", assets.plotly_js, name="plotly"),
]
# Every page renders in the operator's time zone (the jc_tz cookie): no middleware to list in settings.
urlpatterns = each_in_operator_zone(urlpatterns)
