"""Jobbers under /jobbers/: every route, its bodies, limits and status codes, and the statuses in its words."""

from typing import Any

import pytest
import redis
from django.test import Client

from jobconsole.core.ids import new_job_id
from jobconsole.core.states import JobState
from jobconsole.models import AuditLog
from tests.api.seeds.conftest import job, post, work
from tests.helpers import claim

pytestmark = pytest.mark.django_db


def submit(http: Client, name: str = "seedtests.typed", **body: Any) -> dict[str, Any]:
    response = post(http, "/jobbers/submit-task", {"name": name, "parameters": {"count": 3}, **body})
    assert response.status_code == 200, response.content
    assert response.json()["message"] == "Task submitted successfully"
    task: dict[str, Any] = response.json()["task"]
    return task


def dead(http: Client, r: "redis.Redis", count: int = 1) -> list[str]:
    ids = [submit(http, "seedtests.boom", parameters={"message": f"boom {i}"})["id"] for i in range(count)]
    work(r, "seedtests.boom")
    return ids


def test_root_lists_registered_tasks(http: Client) -> None:
    body = http.get("/jobbers/").json()
    assert body["message"] == "Welcome to Task Manager!"
    assert ["send_email", 1] in body["tasks"] and ["seedtests.typed", 1] in body["tasks"]


def test_submit_returns_the_summary_and_is_idempotent_by_id(http: Client) -> None:
    task_id = new_job_id()
    task = submit(http, id=task_id, version=1)
    assert task["id"] == task_id and task["name"] == "seedtests.typed" and task["parameters"] == {"count": 3}
    assert task["status"] == "submitted" and task["retry_attempt"] == 0 and task["submitted_at"].endswith("Z")
    assert submit(http, id=task_id)["id"] == task_id
    assert http.get(f"/jobbers/task-status/{task_id}").json() == task


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({"name": "nope"}, 400, "Unknown task nope v0"),
        ({"name": "seedtests.typed", "version": 7, "parameters": {"count": 1}}, 400, "Unknown task seedtests.typed v7"),
        ({"name": "seedtests.typed", "parameters": {"count": "x"}}, 400, "Invalid parameters for seedtests.typed v1"),
        ({"name": "seedtests.typed", "parameters": {}}, 400, "missing parameter(s) count"),
        ({"name": "seedtests.typed", "parameters": {"count": 1, "z": 2}}, 400, "unknown parameter(s) z"),
        ({"name": "seedtests.typed", "parameters": {"count": 1}, "queue": "elsewhere"}, 400, "Unknown queue elsewhere"),
        ({"name": "seedtests.typed", "id": "not-a-ulid"}, 422, "ULID"),
        ({"parameters": {}}, 422, "Field required"),
    ],
)
def test_bad_submissions(http: Client, r: "redis.Redis", body: dict[str, Any], status: int, says: str) -> None:
    response = post(http, "/jobbers/submit-task", body)
    assert response.status_code == status and says in response.content.decode(), response.content
    assert not r.keys("jc:{q:*")  # nothing enqueued


def test_task_status_404_and_422(http: Client) -> None:
    response = http.get(f"/jobbers/task-status/{new_job_id()}")
    assert response.status_code == 404 and response.json() == {"detail": "Task not found"}
    response = http.get("/jobbers/task-status/nope")
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == ["path", "task_id"]


def test_cancel_waiting_then_409_once_ended_and_404(http: Client) -> None:
    task_id = submit(http)["id"]
    response = http.post(f"/jobbers/task/{task_id}/cancel")
    assert response.status_code == 200 and response.json()["message"] == "Cancellation request sent"
    assert response.json()["task"]["status"] == "cancelled"
    assert http.post(f"/jobbers/task/{task_id}/cancel").status_code == 409
    assert http.post(f"/jobbers/task/{new_job_id()}/cancel").json() == {"detail": "Task not found"}
    assert AuditLog.objects.filter(action="cancel", job_ids=[task_id], actor="api:anonymous").exists()


def test_bulk_cancel_reports_each(http: Client) -> None:
    waiting, unknown = submit(http)["id"], new_job_id()
    response = post(http, "/jobbers/tasks/cancel", {"task_ids": [waiting, unknown, "bad", waiting]})
    assert response.json() == {"results": [
        {"task_id": waiting, "status": "cancellation_requested"},
        {"task_id": unknown, "status": "not_found"},
        {"task_id": "bad", "status": "error", "detail": "job id must be a 26-character ULID; got 'bad'"},
        {"task_id": waiting, "status": "error", "detail": f"job {waiting} is cancelled; cannot cancel"},
    ]}  # fmt: skip
    assert post(http, "/jobbers/tasks/cancel", {"task_ids": ["x"] * 1001}).status_code == 422


def test_task_list_pages_and_filters(http: Client) -> None:
    ids = [submit(http, parameters={"count": i})["id"] for i in range(5)]
    submit(http, "send_email", parameters={})
    body = http.get("/jobbers/task-list", {"queue": "seedtests.typed", "limit": 3}).json()
    assert [t["id"] for t in body["tasks"]] == ids[:3]
    first = body["tasks"][0]
    assert first["queue"] == "seedtests.typed" and first["version"] == 1 and first["errors"] == []
    assert first["status"] == "submitted" and first["completed_at"] is None
    after = http.get("/jobbers/task-list", {"queue": "seedtests.typed", "start": ids[2], "order_by": "task_id"}).json()
    assert [t["id"] for t in after["tasks"]] == ids[3:]
    assert http.get("/jobbers/task-list", {"queue": "seedtests.typed", "task_name": "other"}).json() == {"tasks": []}
    for query in ({}, {"queue": "q", "limit": 101}, {"queue": "q", "limit": 0}, {"queue": "q", "order_by": "x"}):
        assert http.get("/jobbers/task-list", query).status_code == 422, query


def test_roles_and_queues(http: Client) -> None:
    assert http.get("/jobbers/roles").json() == {"roles": []}
    response = post(http, "/jobbers/queues/mailers", ["emails", "digests", "emails"])
    assert response.json() == {"message": "Queues set successfully"}
    assert http.get("/jobbers/queues/mailers").json() == {"queues": ["digests", "emails"]}
    assert http.get("/jobbers/roles").json() == {"roles": ["mailers"]}
    assert {"digests", "emails"} <= set(http.get("/jobbers/queues").json()["queues"])
    assert post(http, "/jobbers/queues/mailers", ["bad name"]).status_code == 422
    assert post(http, "/jobbers/queues/mailers", {"a": 1}).status_code == 422
    assert post(http, "/jobbers/queues/mailers", []).status_code == 200
    assert http.get("/jobbers/roles").json() == {"roles": []}
    submit(http, queue="emails")  # a role's queue is a known queue


def test_setting_queues_needs_operate(http: Client, settings: Any) -> None:
    from jobconsole_api.models import ApiToken

    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "API": {"ANONYMOUS_SEEDS": False}}
    _, submit_token = ApiToken.objects.issue(name="s", scope="submit")
    auth = {"HTTP_AUTHORIZATION": f"Bearer {submit_token}"}
    assert http.get("/jobbers/queues/x", **auth).status_code == 200
    assert post(http, "/jobbers/queues/x", ["a"], **auth).status_code == 403
    assert post(http, "/jobbers/dead-letter-queue/resubmit", {"queue": "a"}, **auth).status_code == 403
    assert http.get("/jobbers/queues/x").status_code == 401


def test_dead_letters_history_with_timestamps_and_resubmit(http: Client, r: "redis.Redis") -> None:
    ids = dead(http, r, 3)
    listed = http.get("/jobbers/dead-letter-queue", {"task_name": "seedtests.boom"}).json()["tasks"]
    assert {t["id"] for t in listed} == set(ids)
    assert all(t["status"] == "failed" and "PermanentError: boom" in t["last_error"] for t in listed)
    assert len(http.get("/jobbers/dead-letter-queue", {"limit": 2}).json()["tasks"]) == 2
    assert http.get("/jobbers/dead-letter-queue", {"limit": 1001}).status_code == 422
    history = http.get(f"/jobbers/dead-letter-queue/{ids[0]}/history").json()
    assert history["task_id"] == ids[0]
    [entry] = history["history"]
    assert (
        entry["attempt"] == 0
        and entry["error"] == "jobconsole.core.errors.PermanentError: boom 0"
        and entry["timestamp"].endswith("Z")
    )
    assert http.get(f"/jobbers/dead-letter-queue/{new_job_id()}/history").status_code == 404

    response = post(http, "/jobbers/dead-letter-queue/resubmit", {})
    assert response.status_code == 400
    assert response.json() == {"detail": "Provide task_ids or at least one of: queue, task_name, task_version."}
    response = post(http, "/jobbers/dead-letter-queue/resubmit", {"task_ids": [ids[0], new_job_id()]})
    assert response.json()["resubmitted"] == 1 and response.json()["tasks"][0]["status"] == "submitted"
    assert job(ids[0]).state is JobState.QUEUED
    response = post(http, "/jobbers/dead-letter-queue/resubmit", {"task_name": "seedtests.boom", "limit": 1})
    assert response.json()["resubmitted"] == 1
    response = post(
        http, "/jobbers/dead-letter-queue/resubmit", {"queue": "seedtests.boom", "reset_retry_count": False}
    )
    assert response.json()["resubmitted"] == 1
    assert job(ids[1]).state is JobState.QUEUED and job(ids[2]).state is JobState.QUEUED
    assert AuditLog.objects.filter(action="resubmit").count() == 3
    assert post(http, "/jobbers/dead-letter-queue/resubmit", {"queue": "a", "limit": 0}).status_code == 422


def test_scheduled_tasks_lists_delayed_and_retrying(http: Client) -> None:
    from jobconsole.engine import get_client

    delayed = get_client().enqueue("seedtests.typed", {"count": 1}, delay=60).id
    submit(http)  # queued, not scheduled
    body = http.get("/jobbers/scheduled-tasks", {"queue": "seedtests.typed"}).json()
    assert [(t["id"], t["status"]) for t in body["tasks"]] == [(delayed, "scheduled")]
    assert http.get("/jobbers/scheduled-tasks").status_code == 422


def test_running_past_its_lease_reads_stalled(http: Client, r: "redis.Redis") -> None:
    task_id = submit(http)["id"]
    [lease] = claim(r, "seedtests.typed")  # leased to a worker that never runs it
    assert lease.id == task_id
    assert http.get(f"/jobbers/task-status/{task_id}").json()["status"] == "started"
    r.zadd("jc:{q:seedtests.typed}:active", {task_id: 1})  # its lease deadline: long past
    assert http.get(f"/jobbers/task-status/{task_id}").json()["status"] == "stalled"


def test_runworker_serves_a_roles_queues(http: Client) -> None:
    from django.core.management import call_command
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="has no queues"):
        call_command("runworker", "--role", "mailers", "--burst")
    post(http, "/jobbers/queues/mailers", ["seedtests.typed"])
    task_id = submit(http)["id"]
    call_command("runworker", "--role", "mailers", "--burst", "--no-mirror", "--no-maintenance")
    assert job(task_id).state is JobState.COMPLETED
    with pytest.raises(CommandError, match="not both"):
        call_command("runworker", "--role", "mailers", "--queues", "a", "--burst")


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("get", "/jobbers/", None),
        ("post", "/jobbers/submit-task", {"name": "seedtests.typed", "parameters": {"count": 1}}),
        ("get", "/jobbers/task-status/01ARZ3NDEKTSV4RRFFQ69G5FAV", None),
        ("post", "/jobbers/task/01ARZ3NDEKTSV4RRFFQ69G5FAV/cancel", None),
        ("post", "/jobbers/tasks/cancel", {"task_ids": ["01ARZ3NDEKTSV4RRFFQ69G5FAV"]}),
        ("get", "/jobbers/task-list?queue=q", None),
        ("get", "/jobbers/queues", None),
        ("post", "/jobbers/queues/r", ["q"]),
        ("get", "/jobbers/queues/r", None),
        ("get", "/jobbers/roles", None),
        ("get", "/jobbers/dead-letter-queue", None),
        ("get", "/jobbers/dead-letter-queue/01ARZ3NDEKTSV4RRFFQ69G5FAV/history", None),
        ("post", "/jobbers/dead-letter-queue/resubmit", {"queue": "q"}),
        ("get", "/jobbers/scheduled-tasks?queue=q", None),
        ("post", "/runqueue/jobs", {"topic": "seedtests.typed", "json": '{"count": 1}'}),
        ("get", "/runqueue/health", None),
    ],
)
def test_redis_down_is_503_with_retry_after(http: Client, settings: Any, method: str, path: str, body: Any) -> None:
    from tests.redis_server import free_port

    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"}
    response = post(http, path, body) if method == "post" else http.get(path)
    assert response.status_code == 503 and response["Retry-After"], response.content
    assert response["Content-Type"] == "application/problem+json"
