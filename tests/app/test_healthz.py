"""/healthz: 200 when Redis and the database answer, 503 saying which one failed and why."""

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import OperationalError, connection
from django.test import Client

from tests.redis_server import free_port

pytestmark = pytest.mark.django_db


@pytest.fixture
def point_at(settings: Any) -> Iterator[Any]:
    """Point the engine at a Redis URL (a changed JOBCONSOLE makes the engine build its connection afresh)."""

    def point(url: str) -> None:
        settings.JOBCONSOLE = {**settings.JOBCONSOLE, "REDIS_URL": url}

    yield point


def test_healthy_reports_both_round_trips(point_at: Any, redis_url: str) -> None:
    point_at(redis_url)
    response = Client().get("/healthz")
    body = response.json()
    assert response.status_code == 200 and body["status"] == "healthy"
    assert body["redis_ms"] >= 0 and body["database_ms"] >= 0


def test_redis_down(point_at: Any) -> None:
    point_at(f"redis://127.0.0.1:{free_port()}/0")  # nothing listens there
    response = Client().get("/healthz")
    body = response.json()
    assert response.status_code == 503 and response.headers["Retry-After"] == "5"
    assert body["status"] == "unavailable" and body["failed"] == ["redis"]
    assert "refused" in body["redis"], body
    assert body["database_ms"] >= 0


def test_database_down(point_at: Any, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    point_at(redis_url)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise OperationalError("connection to server at 10.0.0.5 failed: Connection refused")

    monkeypatch.setattr(connection, "cursor", refuse)
    response = Client().get("/healthz")
    body = response.json()
    assert response.status_code == 503 and body["failed"] == ["database"]
    assert "Connection refused" in body["database"] and body["redis_ms"] >= 0
