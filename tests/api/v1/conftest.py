"""An API client with a token of either scope, against the test Redis (tests/mirror_fixtures.py)."""

import json
from typing import Any

import pytest
from django.test import Client as WebClient

import tests.api.v1.tasks  # noqa: F401  (registers the API tests' tasks)
from jobconsole_api.models import ApiToken
from tests.mirror_fixtures import *  # noqa: F403  (engine_settings, mirror)

BASE = "/api/v1"


class Api:
    """The Django test client speaking JSON to /api/v1 with a bearer token."""

    def __init__(self, token: str | None, name: str = "") -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.web = WebClient(headers=headers)
        self.name = name

    def get(self, path: str, **query: Any) -> Any:
        return self.web.get(BASE + path, query)

    def post(self, path: str, body: Any = None, **headers: str) -> Any:
        data = "" if body is None else json.dumps(body)
        return self.web.post(BASE + path, data, content_type="application/json", headers=headers)

    def patch(self, path: str, body: Any) -> Any:
        return self.web.patch(BASE + path, json.dumps(body), content_type="application/json")

    def put(self, path: str, body: Any) -> Any:
        return self.web.put(BASE + path, json.dumps(body), content_type="application/json")

    def delete(self, path: str, body: Any = None) -> Any:
        return self.web.delete(BASE + path, "" if body is None else json.dumps(body), content_type="application/json")


@pytest.fixture
def operator(engine_settings: Any) -> Api:
    _, plain = ApiToken.objects.issue("ops", "operate")
    return Api(plain, "ops")


@pytest.fixture
def submitter(engine_settings: Any) -> Api:
    _, plain = ApiToken.objects.issue("producer", "submit")
    return Api(plain, "producer")


def problem(response: Any, status: int) -> dict[str, Any]:
    """The problem+json body of a response that must have this status."""
    assert response.status_code == status, (response.status_code, response.content[:500])
    assert response["Content-Type"] == "application/problem+json", response["Content-Type"]
    body: dict[str, Any] = response.json()
    assert body["status"] == status and body["detail"], body
    return body
