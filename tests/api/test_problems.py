"""jobconsole_api.problems: problem+json bodies, JSON bodies read strictly, and the view decorator's 405/503/Problem
handling."""

import json
from typing import Any

import pytest
import redis
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.test import RequestFactory

from jobconsole_api.problems import Problem, api_view, read_json

factory = RequestFactory()


@api_view(methods=["POST"])
def echo(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"got": read_json(request)})


@api_view(methods=["GET"])
def broken_redis(request: HttpRequest) -> HttpResponse:
    raise redis.ConnectionError("Error 111 connecting to 127.0.0.1:1. Connection refused.")


def post(body: bytes | str, content_type: str = "application/json", **extra: Any) -> HttpResponse:
    return echo(factory.post("/x", data=body, content_type=content_type, **extra))


def problem(response: HttpResponse, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/problem+json"
    body: dict[str, Any] = json.loads(response.content)
    assert body["status"] == status and body["title"] and body["detail"] and body["type"]
    return body


def test_a_json_object_is_read() -> None:
    response = post('{"a": [1, "é"]}', content_type="application/json; charset=utf-8")
    assert response.status_code == 200 and json.loads(response.content) == {"got": {"a": [1, "é"]}}


def test_a_vendor_json_type_is_json() -> None:
    assert post("{}", content_type="application/merge-patch+json").status_code == 200


@pytest.mark.parametrize(
    ("body", "content_type", "status", "says"),
    [
        ("{}", "text/plain", 415, "text/plain"),
        ("{}", "", 415, "none"),
        ("{}", "application/x-www-form-urlencoded", 415, "urlencoded"),
        ("", "application/json", 400, "empty"),
        ("{'a': 1}", "application/json", 400, "line 1, column 2"),
        ('{"a": 1', "application/json", 400, "not valid JSON"),
        ("[1, 2]", "application/json", 400, "not an array"),
        ('"text"', "application/json", 400, "not a string"),
        ("null", "application/json", 400, "not null"),
        ('{"a": NaN}', "application/json", 400, "NaN"),
        (b'{"a": "\xff"}', "application/json", 400, "not UTF-8"),
        ("[" * 100_000 + "]" * 100_000, "application/json", 400, "nested more than"),
        ("[" * 65 + "]" * 65, "application/json", 400, "nested more than"),
        ('{"a": 1, "a": 2}', "application/json", 400, "appears twice"),
        ('{"a": "\\ud800"}', "application/json", 400, "surrogate"),
        ('{"a": ' + "9" * 5000 + "}", "application/json", 400, "not valid JSON"),
        ("{} x", "application/json", 400, "Extra data"),
    ],
)
def test_bad_bodies_are_4xx_saying_what_is_wrong(body: str, content_type: str, status: int, says: str) -> None:
    detail = problem(post(body, content_type=content_type), status)["detail"]
    assert says in detail, detail


def test_a_body_over_the_limit_is_413(settings: Any) -> None:
    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "API": {"MAX_BODY_BYTES": 100}}
    assert post('{"a": "' + "x" * 92 + '"}').status_code == 413  # 101 bytes
    assert post('{"a": "' + "x" * 91 + '"}').status_code == 200  # 100 bytes


def test_djangos_own_body_limit_is_a_413_too(settings: Any) -> None:
    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "API": {"MAX_BODY_BYTES": 10_000}}
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 50  # lower than the API's: Django refuses to read the body first
    assert "larger than" in problem(post('{"a": "' + "x" * 100 + '"}'), 413)["detail"]


def test_a_wrong_method_is_405_with_allow() -> None:
    response = echo(factory.get("/x"))
    assert problem(response, 405)["detail"].startswith("GET is not served")
    assert response["Allow"] == "POST"
    assert broken_redis(factory.delete("/x"))["Allow"] == "GET, HEAD"


def test_redis_unreachable_is_503_with_retry_after(settings: Any) -> None:
    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "API": {"RETRY_AFTER": 7}}
    response = broken_redis(factory.get("/x"))
    body = problem(response, 503)
    assert response["Retry-After"] == "7" and "Redis is unreachable" in body["detail"]


def test_a_problem_carries_its_extra_members_and_headers() -> None:
    @api_view(methods=["GET"])
    def view(request: HttpRequest) -> HttpResponse:
        raise Problem(422, "Two fields are wrong.", errors=[{"field": "a", "message": "bad"}], headers={"X-A": "1"})

    response = view(factory.get("/somewhere"))
    body = problem(response, 422)
    assert body["errors"] == [{"field": "a", "message": "bad"}] and body["instance"] == "/somewhere"
    assert response["X-A"] == "1"


def test_views_are_csrf_exempt() -> None:
    assert getattr(echo, "csrf_exempt", False) is True
