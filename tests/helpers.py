"""Small helpers shared by the engine tests."""

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import redis

from jobconsole.core import Worker
from jobconsole.core.results import Lease
from jobconsole.core.store import Store, WorkerIdentity
from jobconsole.core.tasks import TaskRegistry


def run_burst(r: "redis.Redis", registry: TaskRegistry, queues: Sequence[str], **options: Any) -> Worker:
    """Run a worker in this process until its queues are empty (retries due within `burst_horizon` wait)."""
    options.setdefault("maintenance", False)
    worker = Worker(r, queues, registry, burst=True, **options)
    worker.run()
    return worker


@contextmanager
def worker_in_thread(
    r: "redis.Redis", registry: TaskRegistry, queues: Sequence[str], **options: Any
) -> Iterator[Worker]:
    """A worker running in a thread of this process for the duration of the block, then stopped."""
    options.setdefault("maintenance", False)
    worker = Worker(r, queues, registry, **options)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        yield worker
    finally:
        worker.request_stop()
        thread.join(10)


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


def claim(r: "redis.Redis", queue: str, count: int = 10, worker: str = "w", pid: int = 1) -> list[Lease]:
    """One claim as a worker makes it, without registering as idle."""
    store = Store(r, events_maxlen=1000)
    return store.run(store.claim_call(queue, WorkerIdentity(worker, "host", pid), count, idle_ms=0)).leases


def complete(r: "redis.Redis", queue: str, job_id: str, token: str, result: str = "null") -> int:
    store = Store(r, events_maxlen=1000)
    [code] = store.run(store.complete_call(queue, [(job_id, token, result, 1)], ttl_ms=0))
    return code


def heartbeat(r: "redis.Redis", queue: str, job_id: str, token: str) -> int:
    store = Store(r, events_maxlen=1000)
    [code] = store.run(store.heartbeat_call(queue, [(job_id, token, "", "")]))
    return code
