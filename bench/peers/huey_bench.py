"""Huey peer adapter: RedisHuey, worker = huey_consumer.

Run with var/bench/venv-a/bin/python; see _common.py for the CLI and method.
"""

from __future__ import annotations

import sys
import time
from importlib.metadata import version
from typing import Any

if __name__ == "__main__":  # delegate so the worker and we share one module name
    from _common import main

    sys.exit(main("huey_bench"))

from _common import PAYLOAD, Peer, in_batches, record_job, redis_url, task_client, venv_bin
from huey import RedisHuey

# Blocking BRPOP dequeue is RedisHuey's default; a None return stores no result.
huey = RedisHuey("bench", url=redis_url())


@huey.task()  # type: ignore[untyped-decorator]
def noop(t_enq: float | None = None, **params: Any) -> None:
    record_job(task_client(), t_enq)


def enqueue_single(n: int) -> None:
    for _ in range(n):
        noop(**PAYLOAD)


def enqueue_probe() -> None:
    noop(t_enq=time.time(), **PAYLOAD)


def enqueue_bulk(n: int) -> None:
    # task.map() takes positional arguments only; this is its loop with keyword arguments.
    for size in in_batches(n):
        for _ in range(size):
            huey.enqueue(noop.s(**PAYLOAD))


def _worker_args(workers: int) -> list[str]:
    # The default thread worker for 1 worker; real processes for 2 (threads
    # would share one GIL and could not use the second core).
    kind = "thread" if workers == 1 else "process"
    return ["huey_bench.huey", "--workers", str(workers), "--worker-type", kind, "--quiet"]


def worker_commands(workers: int) -> list[list[str]]:
    return [[venv_bin("huey_consumer"), *_worker_args(workers)]]


def config(workers: int) -> dict[str, Any]:
    return {
        "worker_cmd": "huey_consumer " + " ".join(_worker_args(workers)),
        "storage": "RedisStorage, blocking BRPOP (default)",
        "log_level": "WARNING (--quiet)",
        "results": "default (None results are not stored)",
    }


PEER = Peer(
    name="huey",
    version=version("huey"),
    enqueue_single=enqueue_single,
    enqueue_probe=enqueue_probe,
    enqueue_bulk=enqueue_bulk,
    bulk_api=(
        "huey.enqueue(task.s(**params)) per job, as task.map() loops (map takes positional args only); "
        "one LPUSH per job (no pipelining)"
    ),
    worker_commands=worker_commands,
    config=config,
)
