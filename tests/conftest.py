"""Fixtures: one real redis-server per test session (flushed per test), engine clients, task registries."""

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.redis_server import RedisServer
from tests.settings import SECRET_KEY_FOR_TESTS

PROJECT = Path(__file__).resolve().parent.parent
SLOW_MODULE_SECONDS = Path(__file__).with_name("slow_module_seconds.json")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Longest slow modules first: the slow pass hands whole modules to its workers in collection order
    (scripts/pytest_passes.sh, --dist loadscope), and starting the long ones first keeps a long module from
    being the last one left on a single worker. Weights are seconds measured in an earlier run
    (scripts/slow_module_seconds.py refreshes them); a module without one keeps its place after them. Only the
    order changes, and only among the modules named there (the slow and browser ones)."""
    seconds: dict[str, float] = json.loads(SLOW_MODULE_SECONDS.read_text())
    items.sort(key=lambda item: -seconds.get(item.nodeid.split("::", 1)[0], 0.0))


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    return redis_server.url


@pytest.fixture
def r(redis_server: RedisServer) -> Iterator["redis.Redis"]:
    from jobconsole.core.connection import connect

    connection = connect(redis_server.url)
    connection.flushall()
    yield connection
    connection.close()


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of the test's own, for tests that kill or restart it."""
    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.kill()


def manage_env(redis_url: str, tmp_path: Path, **extra: str) -> dict[str, str]:
    """Environment for `manage.py` subprocesses: our Redis, the test tasks, a private var dir."""
    env = {**os.environ, "REDIS_URL": redis_url, "JOBCONSOLE_VAR_DIR": str(tmp_path / "var"),
           "JOBCONSOLE_TASK_MODULES": "jobconsole.examples,tests.tasks", "PYTHONUNBUFFERED": "1",
           "DJANGO_SETTINGS_MODULE": "project.settings", "SECRET_KEY": SECRET_KEY_FOR_TESTS, **extra}  # fmt: skip
    env["PYTHONPATH"] = str(PROJECT)
    return env


PYTHON = sys.executable
