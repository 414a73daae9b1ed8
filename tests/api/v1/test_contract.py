"""The document and the code agree (issue 27): what the schema accepts is accepted, what it refuses is refused,
and what no schema can state is declared (414, a cursor's shape, the Idempotency-Key's characters)."""

from typing import Any

import pytest

from jobconsole_api.v1.openapi import document
from jobconsole_api.v1.routing import MAX_TARGET_BYTES
from tests.api.v1.conftest import Api, problem

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


def _operation(path: str, method: str) -> dict[str, Any]:
    operation: dict[str, Any] = document()["paths"][path][method]
    return operation


def _param_schema(path: str, name: str) -> dict[str, Any]:
    [found] = [p for p in _operation(path, "get")["parameters"] if p["name"] == name]
    schema: dict[str, Any] = found["schema"]
    return schema


@pytest.mark.parametrize(
    ("path", "name"),
    [("/jobs", "task"), ("/jobs", "text"), ("/jobs", "limit"), ("/series", "task"), ("/stats", "queue"),
     ("/dead-letters", "q"), ("/scheduled", "cursor")],
)  # fmt: skip
def test_an_empty_query_value_is_refused_naming_it(operator: Api, path: str, name: str) -> None:
    body = problem(operator.get(path, **{name: ""}), 400)
    assert body["errors"][0]["field"] == name, body
    schema = _param_schema(path, name)
    assert schema.get("minLength", 0) >= 1 or "pattern" in schema or "enum" in schema or schema["type"] == "integer"


def test_an_integer_parameter_takes_an_integer_written_as_a_number(operator: Api) -> None:
    for n in range(3):
        assert operator.post("/jobs", {"task": "apitest.add", "params": {"a": n}}).status_code == 201
    assert operator.get("/scheduled", limit="2.0").status_code == 200
    assert operator.get("/jobs", limit="1e1").status_code == 200
    assert problem(operator.get("/jobs", limit="2.5"), 400)["errors"][0]["field"] == "limit"
    assert problem(operator.get("/jobs", limit="1_0"), 400)["errors"][0]["field"] == "limit"


def test_before_not_after_after_finds_nothing(operator: Api) -> None:
    response = operator.get("/jobs", after="2026-01-02T00:00:00Z", before="2026-01-01T00:00:00Z")
    assert response.status_code == 200, response.content
    assert response.json()["items"] == []


@pytest.mark.parametrize(
    ("path", "made_up", "ill_shaped"),
    [("/jobs", "1764000000000000~01JCZ4Y1V6Q2J8M3N4P5R6S7T8", "MTc2NA=="),
     ("/dead-letters", "1764000000000000~42", "0" * 40),
     ("/scheduled", "1764000000000~apitest~01JCZ4Y1V6Q2J8M3N4P5R6S7T8", "000")],
)  # fmt: skip
def test_a_cursor_is_a_position_its_pattern_states(operator: Api, path: str, made_up: str, ill_shaped: str) -> None:
    """Any cursor of the documented shape is a position to page on from; another shape is a 400 naming it."""
    assert operator.get(path, cursor=made_up).status_code == 200
    assert problem(operator.get(path, cursor=ill_shaped), 400)["errors"][0]["field"] == "cursor"
    assert "pattern" in _param_schema(path, "cursor")


def test_cursors_given_out_page_on(operator: Api) -> None:
    for n in range(3):
        operator.post("/jobs", {"task": "apitest.add", "params": {"a": n}, "delay": 600 + n})
    first = operator.get("/scheduled", limit=2).json()
    rest = operator.get("/scheduled", limit=2, cursor=first["next_cursor"]).json()
    assert len(first["items"]) == 2 and len(rest["items"]) == 1
    assert {i["job"]["id"] for i in first["items"]}.isdisjoint(i["job"]["id"] for i in rest["items"])


def test_the_idempotency_key_rule_is_in_the_schema(operator: Api) -> None:
    [header] = [p for p in _operation("/jobs", "post")["parameters"] if p["name"] == "Idempotency-Key"]
    assert header["schema"]["pattern"] and header["schema"]["maxLength"] == 255
    job = {"task": "apitest.add", "params": {"a": 1}}
    body = problem(operator.post("/jobs", job, **{"Idempotency-Key": "caf\u00e9"}), 400)
    assert body["errors"][0]["field"] == "Idempotency-Key"
    assert operator.post("/jobs", job, **{"Idempotency-Key": "order 7 retry"}).status_code == 201


def test_a_long_request_target_is_a_documented_json_414(operator: Api) -> None:
    response = operator.get("/jobs", text="a" * MAX_TARGET_BYTES)
    assert "8,000" in problem(response, 414)["detail"]
    assert "414" in _operation("/jobs", "get")["responses"]


def test_integer_body_fields_take_integral_numbers(operator: Api) -> None:
    response = operator.put("/queues/apitest/limit", {"limit": 3.0})
    assert response.status_code == 200, response.content
    assert response.json()["queue_limits"] == [{"queue": "apitest", "limit": 3, "running": 0}]


def test_a_group_rate_limit_has_its_shape_in_the_schema(operator: Api) -> None:
    assert operator.put("/groups/mail", {"requests": [10, "second"]}).status_code == 200
    assert operator.put("/groups/mail", {"requests": [100, 1, "minutes"]}).status_code == 200
    assert operator.put("/groups/mail", {"requests": [100.0, 2.0, "minutes"]}).json()["groups"][0]["requests"] == 100
    assert problem(operator.put("/groups/mail", {"requests": ["second", 10]}), 422)["errors"]
    for nothing in ({}, {"connections": 0}):
        message = problem(operator.put("/groups/mail", nothing), 422)["errors"][0]["message"]
        assert message == "give connections (at least 1), requests or both"


def test_rules_across_fields_are_in_the_schema(operator: Api) -> None:
    """A body the schema refuses is refused by the schema's check (422 with `errors`), and the document says so."""
    assert "anyOf" in _operation("/jobs/{job_id}", "patch")["requestBody"]["content"]["application/json"]["schema"]
    edit = operator.patch("/jobs/01JCZ4Y1V6Q2J8M3N4P5R6S7T8", {"expected_state": "queued", "expected_attempts": 0})
    assert problem(edit, 422)["errors"][0]["message"].startswith("nothing to change")
    purge = _operation("/dead-letters/purge", "post")["requestBody"]["content"]["application/json"]["schema"]
    assert "oneOf" in purge
    bodies: list[dict[str, Any]] = [{}, {"ids": ["01JCZ4Y1V6Q2J8M3N4P5R6S7T8"], "filter": {}}, {"ids": []}]
    for body in bodies:
        assert problem(operator.post("/dead-letters/purge", body), 422)["errors"], body


def test_dead_letter_times_are_dates_or_zoned_date_times(operator: Api) -> None:
    assert operator.get("/dead-letters", since="2026-11-25").status_code == 200
    assert operator.get("/dead-letters", since="2026-11-25T14:00:00Z").status_code == 200
    assert problem(operator.get("/dead-letters", since="2026-11-25T14:00"), 400)["errors"][0]["field"] == "since"


@pytest.mark.parametrize("extra", [{}, {"delay": 600}, {"unique_key": "k"}, {"group": "g"}])
def test_recover_on_a_just_submitted_waiting_job_is_a_conflict(operator: Api, extra: dict[str, Any]) -> None:
    """Redis holds a job that waits, whichever way it was submitted: recovering it is a 409 naming its state."""
    operator.put("/groups/g", {"connections": 1})
    job = operator.post("/jobs", {"task": "apitest.add", "params": {"a": 1}, **extra}).json()
    detail = problem(operator.post(f"/jobs/{job['id']}/recover"), 409)["detail"]
    assert job["state"] in detail, detail


@pytest.mark.parametrize("body", ["\x0b", "\x0c", " \x1c "])
def test_a_body_that_is_not_json_is_refused_even_where_the_body_is_optional(operator: Api, body: str) -> None:
    """Only an empty body is no body: whitespace JSON does not know (which str.strip drops) is a malformed body."""
    assert operator.post("/jobs", {"task": "apitest.add", "params": {"a": 1}}).status_code == 201
    response = operator.web.post("/api/v1/queues/apitest/pause", body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert not operator.get("/queues").json()["items"][0]["paused"]
    assert operator.post("/queues/apitest/pause").json()["paused"]  # an empty body: no body, as before


@pytest.mark.parametrize(
    ("name", "value", "why"),
    [("unique_key", "a\x00b", "NUL"), ("text", "\x00", "NUL"), ("task", "apitest.add\x00", "must match")],
)
def test_a_nul_in_a_filter_is_refused_naming_it(operator: Api, name: str, value: str, why: str) -> None:
    """PostgreSQL cannot hold NUL, so a filter with one is a 400 that names it (it was a 500 there), on every
    database alike; the document states it as a pattern."""
    assert operator.post("/jobs", {"task": "apitest.add", "params": {"a": 1}}).status_code == 201
    response = operator.get("/jobs", **{name: value})
    detail = problem(response, 400)["detail"]
    assert name in detail and why in detail, detail
    assert _param_schema("/jobs", "unique_key")["pattern"] == "^[^\\u0000]*$"
