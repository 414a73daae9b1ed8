"""Jobber (POST /jobber/queue, its code's POST /jobs variant) and the Go scheduler (POST /jobs, GET /health): the
seeds' paths, bodies and status codes; their error bodies; /jobs beside the console's /jobs/."""

from typing import Any

import pytest
import redis
from django.test import Client

from jobconsole.core.priority import PRIORITY_NAMES
from jobconsole.core.states import JobState
from tests.api.seeds.conftest import job, post, work
from tests.redis_server import free_port

pytestmark = pytest.mark.django_db


def test_jobber_queue_is_201_with_job_id_and_runs(http: Client, r: "redis.Redis") -> None:
    response = post(http, "/jobber/queue", {"type": "examples.echo", "payload": {"to": ["a", 1], "n": None}})
    assert response.status_code == 201, response.content
    job_id = response.json()["job-id"]
    assert job(job_id).params == {"payload": {"to": ["a", 1], "n": None}}
    work(r, "examples.echo")
    assert job(job_id).state is JobState.COMPLETED and job(job_id).result == {"payload": {"to": ["a", 1], "n": None}}


def test_jobber_code_variant_on_jobs_is_201_with_job_id_camel(http: Client) -> None:
    response = post(http, "/jobs", {"jobType": "send_email", "payload": {"to": "x@example.com"}})
    assert response.status_code == 201 and set(response.json()) == {"jobId"}
    assert job(response.json()["jobId"]).task == "send_email"


@pytest.mark.parametrize("body", ['{"type": "examples.echo"', '{"type": "  "}', '{"payload": 1}', "[]"])
def test_jobber_bad_body_is_its_400(http: Client, r: "redis.Redis", body: str) -> None:
    response = http.post("/jobber/queue", data=body, content_type="application/json")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/plain")
    assert response.content.decode().startswith("Request body is not in the right format\n")
    assert r.dbsize() == 0  # nothing enqueued


def test_unknown_job_type_is_400_and_enqueues_nothing(http: Client, r: "redis.Redis") -> None:
    for path, body in (("/jobber/queue", {"type": "nope"}), ("/jobs", {"type": "nope"}), ("/jobs", {"jobType": "x"})):
        response = post(http, path, body)
        assert response.status_code == 400 and "unknown task" in response.content.decode(), response.content
    assert r.dbsize() == 0


def test_go_scheduler_black_box(http: Client) -> None:
    """What the seed's tests/api_integration_test.go and tests/test_api.sh do."""
    assert http.get("/health").status_code == 200
    assert http.get("/health").json() == {"status": "healthy"}
    body = {"type": "send_email", "priority": "normal", "payload": '{"to": "test@example.com", "subject": "Test"}',
            "max_retries": 1}  # fmt: skip
    response = post(http, "/jobs", body)
    assert response.status_code == 202, response.content
    job_id = response.json()["job_id"]
    assert job_id
    stored = job(job_id)
    assert stored.task == "send_email" and stored.max_retries == 1 and stored.params == {"payload": body["payload"]}


@pytest.mark.parametrize("level", ["high", "normal", "low"])
def test_go_priorities_map_onto_ours(http: Client, level: str) -> None:
    response = post(http, "/jobs", {"type": "send_email", "priority": level, "payload": ""})
    assert job(response.json()["job_id"]).priority == PRIORITY_NAMES[level]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("{oops", "Invalid request body"),
        ('{"type": "send_email", "priority": "urgent"}', "priority must be high, normal or low"),
        ('{"type": "send_email", "payload": {"a": 1}}', "payload must be a string"),
        ('{"type": "send_email", "max_retries": "1"}', "max_retries must be an integer"),
        ('{"type": "send_email", "max_retries": -1}', "max_retries must be an integer from 0"),
        ('{"type": ""}', "type must be a non-empty string"),
    ],
)
def test_go_bad_bodies_are_400_saying_what(http: Client, r: "redis.Redis", body: str, says: str) -> None:
    response = http.post("/jobs", data=body, content_type="application/json")
    assert response.status_code == 400 and says in response.content.decode(), response.content
    assert response.content.decode().startswith("Invalid request body") or "max_retries must be an integer from" in says
    assert r.dbsize() == 0


def test_jobs_get_still_reaches_the_console_and_other_methods_are_405(http: Client) -> None:
    response = http.get("/jobs?state=dead")
    assert response.status_code == 301 and response["Location"] == "/jobs/?state=dead"
    assert http.get("/jobs/").status_code == 302  # the console's page (its login first), not a seed route
    response = http.put("/jobs", data="{}")
    assert response.status_code == 405 and response["Allow"] == "GET, HEAD, POST"
    assert response.content == b"Method not allowed\n"


def test_seed_routes_need_a_token_when_anonymous_seeds_is_off(http: Client, settings: Any, r: "redis.Redis") -> None:
    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "API": {"ANONYMOUS_SEEDS": False}}
    response = post(http, "/jobs", {"type": "send_email"})
    assert response.status_code == 401 and response["Content-Type"] == "application/problem+json"
    assert r.dbsize() == 0
    assert http.get("/health").status_code == 200  # a probe needs no token


def test_a_submit_token_may_submit(http: Client, settings: Any) -> None:
    from jobconsole_api.models import ApiToken

    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "API": {"ANONYMOUS_SEEDS": False}}
    _, plain = ApiToken.objects.issue(name="ci", scope="submit")
    response = post(http, "/jobber/queue", {"type": "send_email"}, HTTP_AUTHORIZATION=f"Bearer {plain}")
    assert response.status_code == 201


ULID = "01ARZ3NDEKTSV4RRFFQ69G5FAV"


def test_redis_down_is_503_with_retry_after_never_2xx(http: Client, settings: Any) -> None:
    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"}
    health = http.get("/health")
    assert health.status_code == 503 and health["Retry-After"] and health.json()["status"] == "unhealthy"
    for path, body in (("/jobs", {"type": "send_email"}), ("/jobber/queue", {"type": "send_email"}),
                       ("/jobs", {"jobType": "send_email"}), ("/schedule/", {"job_type": "send_email"})):  # fmt: skip
        response = post(http, path, body)
        assert response.status_code == 503 and response["Retry-After"], (path, response.content)
    for method in (http.put, http.delete):  # Walrus's changes to a scheduled job
        response = method(f"/schedule/{ULID}", data='{"payload": "x"}', content_type="application/json")
        assert response.status_code == 503 and response["Retry-After"], (method, response.content)
