"""The OpenAPI document is built from the operations the views serve (one declaration each), and the docs page
renders it from our own template and stylesheet: no CDN, no script."""

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import resolve

from jobconsole_api.models import ApiToken
from jobconsole_api.v1.catalogue import OPERATIONS
from jobconsole_api.v1.openapi import document

pytestmark = pytest.mark.django_db


def test_every_operation_is_documented_and_routed() -> None:
    doc = document()
    assert doc["openapi"] == "3.1.0" and doc["servers"] == [{"url": "/api/v1"}]
    documented = {(path, method.upper()) for path, item in doc["paths"].items() for method in item}
    assert documented == {(op.route, op.method) for op in OPERATIONS}
    for op in OPERATIONS:
        concrete = re.sub(r"\{[^}]+\}", "x", op.route)
        names = {other.operation_id for other in OPERATIONS if other.route == op.route}
        assert resolve("/api/v1" + concrete).url_name in names, op.route  # not shadowed by another route
        entry = doc["paths"][op.route][op.method.lower()]
        assert entry["x-scope"] == op.scope and "401" in entry["responses"] and "503" in entry["responses"]
        if op.body is not None:
            assert entry["requestBody"]["content"]["application/json"]["schema"] == op.body


def test_the_documented_limits_follow_the_settings(settings: Any) -> None:
    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "API": {"MAX_BATCH": 7, "MAX_PAGE_SIZE": 9}}
    doc = document()
    batch = doc["paths"]["/jobs/batch"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert batch["properties"]["jobs"]["maxItems"] == 7
    [limit] = [p for p in doc["paths"]["/jobs"]["get"]["parameters"] if p["name"] == "limit"]
    assert limit["schema"]["maximum"] == 9


def test_the_document_is_served_without_a_token() -> None:
    response = Client().get("/api/v1/openapi.json")
    assert response.status_code == 200 and response.json()["info"]["title"] == "Jobconsole API"


def test_the_docs_page_has_no_inline_script_and_no_cdn() -> None:
    response = Client().get("/api/v1/docs")
    html = response.content.decode()
    assert response.status_code == 200 and "POST /api/v1/jobs" in re.sub(r"<[^>]+>", "", html)
    assert "<script" not in html and "https://" not in html and "http://" not in html
    assert "script-src 'self'" in response["Content-Security-Policy"]
    assert re.search(r'<link rel="stylesheet" href="/static/api/docs\.css', html)
    assert Client().get("/static/api/docs.css").status_code in (200, 404)  # served by WhiteNoise after collectstatic


def test_an_unknown_route_is_a_problem_404_to_a_token_and_401_without() -> None:
    anonymous = Client().get("/api/v1/nothing/here")
    assert anonymous.status_code == 401 and anonymous["Content-Type"] == "application/problem+json"
    _, plain = ApiToken.objects.issue("reader", "read")
    response = Client(headers={"Authorization": f"Bearer {plain}"}).get("/api/v1/nothing/here")
    assert response.status_code == 404 and response["Content-Type"] == "application/problem+json"
    assert "/api/v1/docs" in response.json()["detail"]
