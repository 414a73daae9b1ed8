from django.urls import path, re_path

from dashboards.views import (
    audit,
    dead_letters,
    health,
    job,
    jobs,
    overview,
    queues,
    running,
    scheduled,
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
    path("dead/", dead_letters.dead_letter_list, name="dead_letters"),
    re_path(r"^dead/export\.(?P<fmt>csv|json)$", dead_letters.dead_letter_export, name="dead_letters_export"),
    path("workers/", workers.worker_list, name="workers"),
    path("tasks/", tasks.task_list, name="tasks"),
    path("tasks/<str:name>/", tasks.task_detail, name="task"),
    path("audit/", audit.audit_log, name="audit"),
    path("healthz", health.healthz, name="healthz"),
]
