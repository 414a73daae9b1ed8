"""Small helpers shared by the engine tests."""

import time
from collections.abc import Callable, Sequence
from typing import Any

import redis

from jobconsole.core import Worker
from jobconsole.core.tasks import TaskRegistry


def run_burst(r: "redis.Redis", registry: TaskRegistry, queues: Sequence[str], **options: Any) -> Worker:
    """Run a worker in this process until its queues are empty (retries due within `burst_horizon` wait)."""
    options.setdefault("maintenance", False)
    worker = Worker(r, queues, registry, burst=True, **options)
    worker.run()
    return worker


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)
