"""Runqueue over HTTP: POST /runqueue/jobs (AddJob) and GET /runqueue/health (g|y|r with delays, retries,
failures; thresholds per task from HEALTH.TASKS)."""

from typing import Any

import pytest
import redis
from django.test import Client

from tests.api.seeds.conftest import job, post, work

pytestmark = pytest.mark.django_db


def test_add_job_over_http(http: Client) -> None:
    response = post(http, "/runqueue/jobs", {"topic": "seedtests.typed", "json": '{"count": 2}', "priority": 900,
                                             "run_at": [1, "h"], "unique_key": "k1"})  # fmt: skip
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["topic"] == "seedtests.typed" and body["priority"] == 900 and body["unique_key"] == "k1"
    assert body["state"] == "scheduled" and body["run_at"].endswith("Z")
    assert job(body["id"]).params == {"count": 2}
    again = post(http, "/runqueue/jobs", {"topic": "seedtests.typed", "json": '{"count": 3}', "unique_key": "k1"})
    assert again.status_code == 409 and again.json()["job_id"] == body["id"]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"topic": "nope"}, "unknown task"),
        ({"topic": "seedtests.typed", "json": "[]"}, "JSON object"),
        ({"topic": "seedtests.typed", "json": "{}"}, "missing parameter(s) count"),
        ({"topic": "seedtests.typed", "json": '{"count": 1}', "run_at": [1, "x"]}, "unknown unit"),
        ({"topic": "seedtests.typed", "json": '{"count": 1}', "priority": "high"}, "priority must be an integer"),
        ({"topic": "seedtests.typed", "json": '{"count": 1}', "extra": 1}, "unknown field(s) extra"),
        ({"json": "{}"}, "topic must be"),
    ],
)
def test_bad_add_job_is_422_problem(http: Client, r: "redis.Redis", body: dict[str, Any], says: str) -> None:
    response = post(http, "/runqueue/jobs", body)
    assert response.status_code == 422 and response["Content-Type"] == "application/problem+json"
    assert says in response.json()["detail"], response.json()
    assert not r.keys("jc:{q:*")


def test_health_green_then_red_on_retries_per_task_thresholds(http: Client, r: "redis.Redis", settings: Any) -> None:
    body = http.get("/runqueue/health").json()
    assert body["status"] == "g" and set(body["details"]) >= {"delays", "retries", "failures"}
    per_task = {"seedtests.boom": {"ALARM_FAILURE_RATE": 0.5, "MIN_ATTEMPTS": 1}}
    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "HEALTH": {"TASKS": per_task}}
    post(http, "/jobbers/submit-task", {"name": "seedtests.boom"})
    work(r, "seedtests.boom")
    body = http.get("/runqueue/health").json()
    assert body["status"] == "r", body
    assert any("seedtests.boom" in reason for reason in body["reasons"])
    assert {"topic": "seedtests.boom", "queue": "seedtests.boom", "failures": 0} in body["details"]["failures"]


def test_health_delay_is_yellow(http: Client, settings: Any) -> None:
    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "HEALTH": {"WARN_DELAY": 0.001}}
    post(http, "/runqueue/jobs", {"topic": "seedtests.typed", "json": '{"count": 1}'})
    body = http.get("/runqueue/health").json()
    assert body["status"] == "y" and body["details"]["delays"][0]["queue"] == "seedtests.typed"
