"""Every seed route against bodies and values of every wrong kind: a 4xx saying something, never a 500, and
nothing enqueued."""

import json
from typing import Any

import pytest
import redis
from django.test import Client

pytestmark = pytest.mark.django_db

ROUTES = [
    ("post", "/jobber/queue", "type"),
    ("post", "/jobs", "type"),
    ("post", "/jobs", "jobType"),
    ("post", "/schedule/", "job_type"),
    ("post", "/jobbers/submit-task", "name"),
    ("post", "/jobbers/tasks/cancel", "task_ids"),
    ("post", "/jobbers/dead-letter-queue/resubmit", "task_ids"),
    ("post", "/jobbers/queues/role", None),
    ("post", "/runqueue/jobs", "topic"),
]
VALUES: list[Any] = [None, "", " ", 0, -1, 1.5, 10**30, True, [], {}, [1, "x"], {"a": {"b": [None]}}, "x" * 5000,
                     "a:{b}*\r\nc", "\u202e\u200b😀", "<script>", "01ARZ3NDEKTSV4RRFFQ69G5FAV"]  # fmt: skip
RAW_BODIES = ["", "null", "[]", '"text"', "1", "{", '{"a": NaN}', '{"a": 1} trailing', "\xff\xfe", "[" * 5000]


@pytest.mark.parametrize(("method", "path", "field"), ROUTES)
def test_no_value_of_a_main_field_is_a_500(http: Client, r: "redis.Redis", method: str, path: str, field: Any) -> None:
    for value in VALUES:
        body: Any = [value] if field is None else {field: value, "payload": value, "json": value, "run_at": value}
        response = http.post(path, data=json.dumps(body), content_type="application/json")
        assert response.status_code < 500, (path, value, response.content)
        assert response.content.strip(), (path, value)
    assert not r.keys("jc:{q:*:job:*")  # nothing valid was sent, so nothing was enqueued


@pytest.mark.parametrize(("method", "path", "field"), ROUTES)
def test_no_raw_body_is_a_500(http: Client, r: "redis.Redis", method: str, path: str, field: Any) -> None:
    for raw in RAW_BODIES:
        if field is None and raw == "[]":
            continue  # an empty list of queues is valid there (it removes the role)
        response = http.post(path, data=raw.encode("latin-1"), content_type="application/json")
        assert 400 <= response.status_code < 500, (path, raw[:20], response.content)
    response = http.post(path, data=b"x", content_type="multipart/form-data; boundary=x")
    assert response.status_code in (400, 415), response.content
    assert not r.keys("jc:{q:*:job:*")


@pytest.mark.parametrize(
    "path",
    [
        "/jobbers/task-list?queue=q&limit=abc", "/jobbers/task-list?queue=a%20b", "/jobbers/task-list?queue=q&start=x",
        "/jobbers/task-list?queue=q&task_version=-1", "/jobbers/dead-letter-queue?limit=1e3",
        "/jobbers/dead-letter-queue?queue=%00", "/jobbers/scheduled-tasks?queue=q&limit=0",
        "/jobbers/task-status/%F0%9F%98%80", "/jobbers/dead-letter-queue/x/history", "/jobbers/queues/a%20b",
    ],
)  # fmt: skip
def test_bad_query_values_are_422(http: Client, path: str) -> None:
    response = http.get(path)
    assert response.status_code == 422, (path, response.content)
    assert response.json()["detail"][0]["msg"]


@pytest.mark.parametrize(
    ("method", "path", "content_type", "body"),
    [
        ("get", "/jobbers/task-status/..%2F..%2Fetc%2Fpasswd", "application/json", {"detail": "Not Found"}),
        ("get", "/jobbers/task-status/a/b", "application/json", {"detail": "Not Found"}),
        ("post", "/jobbers/no-such-route", "application/json", {"detail": "Not Found"}),
        ("get", "/jobber/queue/x", "text/plain; charset=utf-8", "404 page not found\n"),
        ("delete", "/schedule/a/b", "text/plain; charset=utf-8", "404 page not found\n"),
        ("get", "/runqueue/nothing", "application/problem+json", None),
    ],
)  # fmt: skip
def test_an_unknown_path_under_a_seed_answers_in_its_format(
    http: Client, method: str, path: str, content_type: str, body: Any
) -> None:
    """Every answer in a seed's URL space is its own format, never the site's HTML 404 page (`..%2F` decodes to
    `../`, which no route's segment takes)."""
    response = getattr(http, method)(path)
    assert response.status_code == 404, (path, response.content[:200])
    assert response["Content-Type"] == content_type
    if isinstance(body, dict):
        assert response.json() == body
    elif body is not None:
        assert response.content.decode() == body


@pytest.mark.parametrize("value", [1001, 10**12, -1, 2.5])
def test_go_scheduler_max_retries_past_the_engines_limit_is_refused_naming_it(
    http: Client, r: "redis.Redis", value: Any
) -> None:
    response = http.post("/jobs", data=json.dumps({"type": "send_email", "max_retries": value}),
                         content_type="application/json")  # fmt: skip
    assert response.status_code == 400, response.content
    assert "max_retries must be an integer from 0 to 1000" in response.content.decode()
    assert not r.keys("jc:{q:*:job:*")


def test_runqueue_run_at_too_far_names_the_limit(http: Client) -> None:
    body = {"topic": "seedtests.typed", "json": {"count": 1}, "run_at": [10**6, "days"]}
    response = http.post("/runqueue/jobs", data=json.dumps(body), content_type="application/json")
    assert response.status_code == 422, response.content
    assert "at most 157,680,000 seconds" in response.json()["detail"]
