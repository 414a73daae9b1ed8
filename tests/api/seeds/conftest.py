"""Fixtures of the seed interface tests: the engine on the test Redis, anonymous seed callers allowed (as under
`make run`), a Django test client, a burst worker, and two tasks of their own."""

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.test import Client

from jobconsole.core import PermanentError, Worker, default_registry, task
from jobconsole.core.job import Job


@task(name="seedtests.boom", max_retries=0)
def boom(message: str = "boom") -> None:
    """Dead at its first attempt."""
    raise PermanentError(message)


@task(name="seedtests.typed", max_retries=0)
def typed(count: int, label: str = "") -> int:
    return count


@pytest.fixture
def seeds(settings: Any, r: "redis.Redis", redis_url: str, db: None) -> Iterator[Any]:
    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "REDIS_URL": redis_url, "API": {"ANONYMOUS_SEEDS": True}}
    yield settings


@pytest.fixture
def http(seeds: Any) -> Client:
    return Client()


def post(http: Client, path: str, body: Any, **extra: Any) -> Any:
    return http.post(path, data=json.dumps(body), content_type="application/json", **extra)


def job(job_id: str) -> Job:
    from jobconsole.engine import get_client

    return get_client().get(job_id)


def work(r: "redis.Redis", *queues: str) -> None:
    Worker(r, list(queues), default_registry, concurrency=2, burst=True, maintenance=False).run()
