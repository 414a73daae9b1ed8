"""Celery peer adapter: Redis broker (kombu), worker = `celery worker`.

Run with var/bench/venv-a/bin/python; see _common.py for the CLI and method.
"""

from __future__ import annotations

import sys
import time
from importlib.metadata import version
from typing import Any

if __name__ == "__main__":  # delegate so the worker and we share one module name
    from _common import main

    sys.exit(main("celery_bench"))

from _common import PAYLOAD, Peer, in_batches, record_job, redis_url, task_client, venv_bin
from celery import Celery, group

QUEUE = "bench"

app = Celery("celery_bench", broker=redis_url())
app.conf.update(
    task_default_queue=QUEUE,
    task_ignore_result=True,  # no result backend configured either
    broker_connection_retry_on_startup=True,
)


@app.task(name="bench.noop")
def noop(t_enq: float | None = None, **params: Any) -> None:
    record_job(task_client(), t_enq)


def enqueue_single(n: int) -> None:
    for _ in range(n):
        noop.delay(**PAYLOAD)


def enqueue_probe() -> None:
    noop.delay(t_enq=time.time(), **PAYLOAD)


def enqueue_bulk(n: int) -> None:
    for size in in_batches(n):
        group(noop.s(**PAYLOAD) for _ in range(size)).apply_async()


# Gossip, mingle and heartbeat are cluster chatter a single-queue benchmark
# does not need; disabling them is the usual advice for Redis brokers.
_COMMON = ["--loglevel=WARNING", "--without-gossip", "--without-mingle", "--without-heartbeat", "-Q", QUEUE]


def _worker_args(index: int | str) -> list[str]:
    # The solo pool runs tasks in the consumer process itself: no pool IPC,
    # which is the fastest honest setup for one process per worker.
    return ["-A", "celery_bench", "worker", "-P", "solo", "-n", f"w{index}@%h", *_COMMON]


def worker_commands(workers: int) -> list[list[str]]:
    return [[venv_bin("celery"), *_worker_args(i)] for i in range(workers)]


def config(workers: int) -> dict[str, Any]:
    return {
        "worker_cmd": f"{workers} x celery " + " ".join(_worker_args("<i>")),
        "prefetch_multiplier": 4,
        "results": "ignored (task_ignore_result, no backend)",
        "log_level": "WARNING",
    }


PEER = Peer(
    name="celery",
    version=version("celery"),
    enqueue_single=enqueue_single,
    enqueue_probe=enqueue_probe,
    enqueue_bulk=enqueue_bulk,
    bulk_api="group(...).apply_async() per 1000 jobs; one publish per job over one connection",
    worker_commands=worker_commands,
    config=config,
)
