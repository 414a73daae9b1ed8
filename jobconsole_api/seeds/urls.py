"""The seed systems' routes, mounted at the site's root beside the console (project/urls.py, before it, so that
`/jobs` without a slash reaches the seeds while `/jobs/` stays the console's page)."""

from django.urls import include, path, re_path

from jobconsole_api.seeds import goscheduler, jobber, jobbers, jobs_route, runqueue, walrus
from jobconsole_api.seeds.common import (
    FASTAPI_NOT_FOUND,
    GO_NOT_FOUND,
    as_problem,
    fastapi_detail,
    not_found,
    plain_text,
)

jobbers_patterns = [
    path("", jobbers.root, name="jobbers_root"),
    path("submit-task", jobbers.submit_task, name="jobbers_submit_task"),
    path("task-status/<str:task_id>", jobbers.task_status, name="jobbers_task_status"),
    path("task/<str:task_id>/cancel", jobbers.cancel_task, name="jobbers_cancel_task"),
    path("tasks/cancel", jobbers.cancel_tasks, name="jobbers_cancel_tasks"),
    path("task-list", jobbers.task_list, name="jobbers_task_list"),
    path("queues", jobbers.all_queues, name="jobbers_queues"),
    path("queues/<str:role>", jobbers.role_queues, name="jobbers_role_queues"),
    path("roles", jobbers.roles, name="jobbers_roles"),
    path("dead-letter-queue", jobbers.dead_letter_queue, name="jobbers_dead_letter_queue"),
    path("dead-letter-queue/resubmit", jobbers.dead_letter_resubmit, name="jobbers_dead_letter_resubmit"),
    path("dead-letter-queue/<str:task_id>/history", jobbers.dead_letter_history, name="jobbers_dead_letter_history"),
    path("scheduled-tasks", jobbers.scheduled_tasks, name="jobbers_scheduled_tasks"),
    # Any other path (a task id with a slash, `..%2F` decoded to `../`...): FastAPI's own 404, not the site's page.
    re_path(r"^(?P<rest>.*)$", not_found(fastapi_detail, FASTAPI_NOT_FOUND)),
]

app_name = "seeds"
urlpatterns = [
    path("jobber/queue", jobber.queue, name="jobber_queue"),
    path("jobs", jobs_route.jobs, name="jobs"),
    path("health", goscheduler.health, name="health"),
    path("schedule/", walrus.schedule, name="walrus_schedule"),
    path("schedule/<str:job_id>", walrus.scheduled_job, name="walrus_job"),
    path("runqueue/jobs", runqueue.add_job, name="runqueue_add_job"),
    path("runqueue/health", runqueue.health_check, name="runqueue_health"),
    path("jobbers/", include(jobbers_patterns)),
    # Other paths under a seed's own prefix answer in that seed's format (the Go seeds' mux: text/plain).
    re_path(r"^jobber/(?P<rest>.*)$", not_found(plain_text, GO_NOT_FOUND)),
    re_path(r"^schedule/(?P<rest>.+)$", not_found(plain_text, GO_NOT_FOUND)),
    re_path(
        r"^runqueue/(?P<rest>.*)$",
        not_found(as_problem, "No Runqueue route here: POST /runqueue/jobs, GET /runqueue/health."),
    ),
]
