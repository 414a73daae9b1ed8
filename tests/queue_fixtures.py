"""A registry with one task, `t.ok` on queue `q`, and a client for it (engine tests import these fixtures)."""

import pytest
import redis

from jobconsole.core import Client, TaskRegistry

__all__ = ["client", "registry"]


@pytest.fixture
def registry() -> TaskRegistry:
    reg = TaskRegistry()

    @reg.task(name="t.ok", queue="q")
    def ok(x: int = 0) -> int:
        return x

    return reg


@pytest.fixture
def client(r: "redis.Redis", registry: TaskRegistry) -> Client:
    return Client(r, registry)
