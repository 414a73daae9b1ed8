"""Least privilege on every API route (issue 27, jobconsole_api/access.py): a submit token sees and changes only
its own jobs on the seed routes as on /api/v1; a read token reads and changes nothing; a token limited to queues
and tasks reaches nothing outside them; cross-site requests are refused before anything is read; anonymous seed
access answers only on loopback. Real Redis, real database, real requests through the URL configuration."""

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client as WebClient

from jobconsole.core import PermanentError, Worker, default_registry, task
from jobconsole.engine import get_client
from jobconsole.models import AuditLog
from jobconsole_api.models import ApiToken, SubmittedJob
from tests.mirror_fixtures import *  # noqa: F403  (engine_settings, mirror)

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]
BILLING, OTHER = "acc.billing", "acc.other"


@task(name="acc.charge", queue=BILLING, max_retries=0)
def charge(payload: str = "") -> str:
    return payload


@task(name="acc.refund", queue=BILLING, max_retries=0)
def refund(payload: str = "") -> str:
    return payload


@task(name="acc.report", queue=OTHER, max_retries=0)
def report(payload: str = "") -> str:
    return payload


@task(name="acc.doomed", queue=OTHER, max_retries=0)
def doomed(payload: str = "") -> None:
    raise PermanentError(f"no: {payload}")


@pytest.fixture
def seeds(engine_settings: Any) -> Iterator[Any]:
    engine_settings.JOBCONSOLE = {**engine_settings.JOBCONSOLE, "API": {"ANONYMOUS_SEEDS": True}}
    yield engine_settings


def bearer(plain: str, **extra: Any) -> WebClient:
    return WebClient(headers={"Authorization": f"Bearer {plain}"}, **extra)


def token(name: str, scope: str, **limits: list[str]) -> WebClient:
    return bearer(ApiToken.objects.issue(name, scope, **limits)[1])


def send(web: WebClient, method: str, path: str, body: Any = None, content_type: str = "application/json",
         **headers: str) -> Any:  # fmt: skip
    data = "" if body is None else json.dumps(body)
    return getattr(web, method.lower())(path, data, content_type=content_type, headers=headers)


def waiting(queue: str) -> int:
    counts = get_client().queries.queues.counts(queue)
    return counts.queued + counts.scheduled


def walrus_job(web: WebClient, payload: str) -> str:
    response = send(web, "POST", "/schedule/", {"job_type": "acc.charge", "payload": payload, "run_after_secs": 600})
    assert response.status_code == 200, response.content
    job_id: str = response.json()["job_id"]
    return job_id


# --- a submit token: its own jobs only, on the seed routes as on /api/v1 ------------------------------------


def test_walrus_changes_and_deletes_only_the_callers_own_jobs_and_audits_them(seeds: Any) -> None:
    owner, stranger = token("billing", "submit"), token("intruder", "submit")
    job_id = walrus_job(owner, "original")
    assert SubmittedJob.objects.get(job_id=job_id).token.name == "billing"  # a seed submission records its owner

    for response in (send(stranger, "PUT", f"/schedule/{job_id}", {"payload": "hijacked", "run_after_secs": 0}),
                     send(stranger, "DELETE", f"/schedule/{job_id}")):  # fmt: skip
        assert response.status_code == 404, response.content
        assert response.content.decode() == f"job {job_id} not found\n"  # exactly as for an unknown id
    job = get_client().get(job_id)
    assert job.params == {"payload": "original"} and job.state.value == "scheduled"
    assert not AuditLog.objects.exists()

    response = send(owner, "PUT", f"/schedule/{job_id}", {"payload": "changed"})
    assert response.status_code == 200 and get_client().get(job_id).params == {"payload": "changed"}
    edit = AuditLog.objects.get(action="edit_job")
    assert edit.actor == "api:billing" and edit.job_ids == [job_id] and edit.detail["changes"] == {"payload": "changed"}
    assert send(owner, "DELETE", f"/schedule/{job_id}").status_code == 200
    assert get_client().queries.jobs.by_id([(BILLING, job_id)]) == [None]
    deleted = AuditLog.objects.get(action="delete")
    assert deleted.actor == "api:billing" and deleted.job_ids == [job_id]


def test_the_anonymous_dev_caller_keeps_its_power_and_is_audited(seeds: Any) -> None:
    owner = token("billing", "submit")
    job_id = walrus_job(owner, "x")
    assert send(WebClient(), "DELETE", f"/schedule/{job_id}").status_code == 200  # `make run`'s operator
    assert AuditLog.objects.get(action="delete").actor == "api:anonymous"


def run_dead(r: "redis.Redis") -> None:
    Worker(r, [OTHER], default_registry, concurrency=1, burst=True, maintenance=False).run()


def test_jobbers_reads_show_a_submit_token_only_its_own_jobs(seeds: Any, r: "redis.Redis") -> None:
    owner, stranger, ops = token("billing", "submit"), token("intruder", "submit"), token("ops", "operate")

    def submit(web: WebClient, name: str, payload: str) -> str:
        response = send(web, "POST", "/jobbers/submit-task", {"name": name, "parameters": {"payload": payload}})
        assert response.status_code == 200, response.content
        task_id: str = response.json()["task"]["id"]
        return task_id

    secret = submit(owner, "acc.report", "card 4242")
    dead = submit(owner, "acc.doomed", "card 1111")
    mine = submit(stranger, "acc.report", "mine")
    run_dead(r)  # `secret` completes, `dead` dies
    queued = submit(owner, "acc.report", "card 9999")  # stays queued (no worker runs after this)

    assert send(stranger, "GET", f"/jobbers/task-status/{secret}").json() == {"detail": "Task not found"}
    assert send(stranger, "GET", f"/jobbers/task-status/{secret}").status_code == 404
    assert send(stranger, "GET", f"/jobbers/dead-letter-queue/{dead}/history").status_code == 404
    task_list = stranger.get("/jobbers/task-list", {"queue": OTHER}).json()["tasks"]
    assert [t["id"] for t in task_list] == [] and "card" not in json.dumps(task_list)
    assert stranger.get("/jobbers/dead-letter-queue").json() == {"tasks": []}
    assert send(stranger, "GET", f"/jobbers/task-status/{mine}").status_code == 200  # its own
    again = send(stranger, "POST", "/jobbers/submit-task", {"id": secret, "name": "acc.report"})  # "idempotent"
    assert again.status_code == 409 and "card" not in again.content.decode()

    assert [t["id"] for t in owner.get("/jobbers/task-list", {"queue": OTHER}).json()["tasks"]] == [queued]
    assert [t["id"] for t in owner.get("/jobbers/dead-letter-queue").json()["tasks"]] == [dead]
    assert owner.get(f"/jobbers/dead-letter-queue/{dead}/history").status_code == 200
    assert [t["id"] for t in ops.get("/jobbers/dead-letter-queue").json()["tasks"]] == [dead]  # operate: all
    assert stranger.get(f"/api/v1/dead-letters/{dead}/history").status_code == 404  # the same rule on /api/v1
    assert owner.get(f"/api/v1/dead-letters/{dead}/history").status_code == 200


def test_jobbers_cancel_touches_only_the_callers_own_tasks(seeds: Any) -> None:
    owner, stranger = token("billing", "submit"), token("intruder", "submit")
    job_id = walrus_job(owner, "x")
    other = walrus_job(owner, "y")
    assert send(stranger, "POST", f"/jobbers/task/{job_id}/cancel").status_code == 404
    results = send(stranger, "POST", "/jobbers/tasks/cancel", {"task_ids": [job_id, other]}).json()["results"]
    assert [r["status"] for r in results] == ["not_found", "not_found"]
    assert get_client().get(job_id).state.value == get_client().get(other).state.value == "scheduled"
    assert send(owner, "POST", f"/jobbers/task/{job_id}/cancel").status_code == 200
    assert get_client().get(job_id).state.value == "cancelled"
    assert AuditLog.objects.get(action="cancel").actor == "api:billing"


# --- a read token: reads everything, changes nothing ------------------------------------------------------------


def test_a_read_token_reads_everything_and_changes_nothing(seeds: Any) -> None:
    owner, reader = token("billing", "submit"), token("grafana", "read")
    job_id = walrus_job(owner, "x")
    for path in (f"/api/v1/jobs/{job_id}", "/api/v1/queues", "/api/v1/workers", f"/jobbers/task-status/{job_id}",
                 "/metrics", "/runqueue/health"):  # fmt: skip
        assert reader.get(path).status_code == 200, path
    refused = [
        send(reader, "POST", "/api/v1/jobs", {"task": "acc.charge"}),
        send(reader, "POST", f"/api/v1/jobs/{job_id}/cancel"),
        send(reader, "DELETE", f"/api/v1/jobs/{job_id}"),
        send(reader, "PUT", f"/schedule/{job_id}", {"payload": "changed"}),
        send(reader, "DELETE", f"/schedule/{job_id}"),
        send(reader, "POST", f"/jobbers/task/{job_id}/cancel"),
        send(reader, "POST", "/jobber/queue", {"type": "acc.charge", "payload": "x"}),
        send(reader, "POST", f"/api/v1/queues/{BILLING}/pause"),
    ]
    for response in refused:
        assert response.status_code == 403, response.content
        assert "'read'" in response.json()["detail"]
    job = get_client().get(job_id)
    assert job.state.value == "scheduled" and job.params == {"payload": "x"} and waiting(BILLING) == 1
    assert not get_client().queries.queues.counts(BILLING).paused and not AuditLog.objects.exists()


# --- limits -----------------------------------------------------------------------------------------------------


def test_a_limited_token_submits_only_inside_its_limits(seeds: Any) -> None:
    billing = token("billing", "submit", queues=[BILLING], tasks=["acc.charge"])
    for response in (
        send(billing, "POST", "/api/v1/jobs", {"task": "acc.report"}),  # another task, another queue
        send(billing, "POST", "/api/v1/jobs", {"task": "acc.refund"}),  # its queue, another task
        send(billing, "POST", "/api/v1/jobs", {"task": "acc.charge", "queue": OTHER}),  # its task, another queue
        send(billing, "POST", "/api/v1/jobs/batch", {"jobs": [{"task": "acc.charge"}, {"task": "acc.report"}]}),
        send(billing, "POST", "/jobber/queue", {"type": "acc.report"}),
        send(billing, "POST", "/runqueue/jobs", {"topic": "acc.report"}),
        send(billing, "POST", "/jobbers/submit-task", {"name": "acc.charge", "queue": OTHER}),
    ):
        assert response.status_code == 403, response.content
        detail = response.json()["detail"]
        assert "outside the token's limits" in detail and BILLING in detail and "acc.charge" in detail, detail
    assert waiting(BILLING) == waiting(OTHER) == 0  # nothing enqueued, not even the batch's good job
    assert send(billing, "POST", "/api/v1/jobs", {"task": "acc.charge"}).status_code == 201
    assert send(billing, "POST", "/jobber/queue", {"type": "acc.charge", "payload": "x"}).status_code == 201
    assert waiting(BILLING) == 2


@pytest.mark.parametrize("mirror", [False], indirect=True)
def test_a_limited_token_sees_only_jobs_inside_its_limits(seeds: Any, mirror: Any) -> None:
    ops = token("ops", "operate")
    limited = token("billing ops", "operate", queues=[BILLING])
    inside = send(ops, "POST", "/api/v1/jobs", {"task": "acc.charge", "delay": 600}).json()["id"]
    outside = send(ops, "POST", "/api/v1/jobs", {"task": "acc.report", "delay": 600}).json()["id"]
    mirror.drain()

    assert limited.get(f"/api/v1/jobs/{inside}").status_code == 200
    for response in (
        limited.get(f"/api/v1/jobs/{outside}"),
        send(limited, "POST", f"/api/v1/jobs/{outside}/cancel"),
        limited.get(f"/jobbers/task-status/{outside}"),
        send(limited, "DELETE", f"/schedule/{outside}"),
    ):
        assert response.status_code == 404, response.content
    assert get_client().get(outside).state.value == "scheduled"
    assert [j["id"] for j in limited.get("/api/v1/jobs").json()["items"]] == [inside]
    assert {j["id"] for j in ops.get("/api/v1/jobs").json()["items"]} == {inside, outside}
    assert [j["job"]["id"] for j in limited.get("/api/v1/scheduled").json()["items"]] == [inside]
    assert [q["name"] for q in limited.get("/api/v1/queues").json()["items"]] == [BILLING]
    assert limited.get("/jobbers/queues").json() == {"queues": [BILLING]}
    for response in (limited.get("/api/v1/jobs", {"queue": OTHER}), limited.get("/jobbers/task-list", {"queue": OTHER}),
                     send(limited, "POST", f"/api/v1/queues/{OTHER}/pause")):  # fmt: skip
        assert response.status_code == 403 and "outside the token's limits" in response.json()["detail"]
    for path in ("/api/v1/workers", "/api/v1/flow", "/api/v1/schedules", "/metrics"):
        response = limited.get(path)
        assert response.status_code == 403 and "every queue" in response.json()["detail"], path
    assert not get_client().queries.queues.counts(OTHER).paused


def test_limits_are_set_by_the_command_and_the_admin() -> None:
    out, err = io.StringIO(), io.StringIO()
    call_command("apitoken", "create", "--name", "billing", "--scope", "read", "--queue", BILLING, "--queue", "acc.x",
                 "--task", "acc.charge", stdout=out, stderr=err)  # fmt: skip
    token = ApiToken.objects.get()
    assert (token.scope, token.queues, token.tasks) == ("read", [BILLING, "acc.x"], ["acc.charge"])
    assert "acc.charge" in err.getvalue()
    listing = io.StringIO()
    call_command("apitoken", "list", stdout=listing)
    assert BILLING in listing.getvalue()

    admin = User.objects.create_superuser("root", "root@example.com", "pw-for-tests")
    browser = WebClient()
    browser.force_login(admin)
    response = browser.post("/admin/jobconsole_api/apitoken/add/",
                            {"name": "grafana", "scope": "read", "queues": f"{BILLING}, acc.y", "tasks": ""},
                            follow=True)  # fmt: skip
    assert response.status_code == 200
    added = ApiToken.objects.get(name="grafana")
    assert (added.scope, added.queues, added.tasks) == ("read", [BILLING, "acc.y"], [])
    response = browser.post("/admin/jobconsole_api/apitoken/add/", {"name": "bad", "scope": "read", "queues": "a/b"})
    assert response.status_code == 200 and not ApiToken.objects.filter(name="bad").exists()  # the form's error


# --- cross-site requests and anonymous access ---------------------------------------------------------------------


def test_a_cross_site_request_is_refused_before_anything_is_enqueued(seeds: Any) -> None:
    anonymous = WebClient()  # API.ANONYMOUS_SEEDS on, from 127.0.0.1: `make run`
    body = json.dumps({"type": "acc.charge", "payload": "x"})
    for headers in ({"Origin": "https://evil.example"}, {"Sec-Fetch-Site": "cross-site"}, {"Origin": "null"},
                    {"Origin": "http://testserver:8080"}, {"Origin": "https://testserver"}):  # fmt: skip
        response = anonymous.post("/jobber/queue", body, content_type="text/plain", headers=headers)
        assert response.status_code == 403, (headers, response.content)
        assert response["Content-Type"] == "application/problem+json" and "cross-site" in response.json()["detail"]
    ops = token("ops", "operate")
    response = send(ops, "POST", "/api/v1/jobs", {"task": "acc.charge"}, Origin="https://evil.example")
    assert response.status_code == 403 and "cross-site" in response.json()["detail"]
    assert waiting(BILLING) == 0
    # curl -d (no Origin) and the site's own pages still work.
    assert anonymous.post("/jobber/queue", body, content_type="application/x-www-form-urlencoded").status_code == 201
    own_site = {"Origin": "http://testserver", "Sec-Fetch-Site": "same-origin"}
    same = anonymous.post("/jobber/queue", body, content_type="text/plain", headers=own_site)
    assert same.status_code == 201 and waiting(BILLING) == 2
    default_port = {"Origin": "http://TestServer:80"}  # the same origin, spelled out
    assert anonymous.post("/jobber/queue", body, content_type="text/plain", headers=default_port).status_code == 201


def test_anonymous_seed_access_answers_only_on_loopback(seeds: Any) -> None:
    body = {"type": "acc.charge", "payload": "x"}
    for web, headers in (
        (WebClient(REMOTE_ADDR="203.0.113.7"), {}),
        (WebClient(), {"X-Forwarded-For": "198.51.100.1"}),  # from loopback, but a proxy forwarded it
        (WebClient(), {"Forwarded": "for=198.51.100.1"}),
        (WebClient(), {"X-Real-IP": "198.51.100.1"}),
    ):
        response = send(web, "POST", "/jobber/queue", body, **headers)
        assert response.status_code == 401, response.content
        assert "only on loopback" in response.json()["detail"]
        assert web.get("/jobbers/task-list", {"queue": BILLING}, headers=headers).status_code == 401
    assert waiting(BILLING) == 0
    assert send(WebClient(REMOTE_ADDR="::1"), "POST", "/jobber/queue", body).status_code == 201
    assert WebClient(REMOTE_ADDR="203.0.113.7").get("/health").status_code == 200  # a probe stays open
    seeds.JOBCONSOLE = {**seeds.JOBCONSOLE, "API": {"ANONYMOUS_SEEDS": False}}
    assert send(WebClient(), "POST", "/jobber/queue", body).status_code == 401  # production: never anonymous
    assert WebClient().get("/api/v1/jobs").status_code == 401
