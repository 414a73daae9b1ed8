"""RQ peer adapter: worker = `rq worker` (the normal forking Worker).

Run with var/bench/venv-a/bin/python; see _common.py for the CLI and method.
"""

from __future__ import annotations

import sys
import time
from importlib.metadata import version
from typing import Any

if __name__ == "__main__":  # delegate so the worker and we share one module name
    from _common import main

    sys.exit(main("rq_bench"))

import redis
from _common import PAYLOAD, Peer, in_batches, record_job, redis_url, venv_bin
from rq import Queue, get_current_job

QUEUE = "bench"
# Fire-and-forget: drop the finished job at once, as the other peers keep no
# result for a task returning None.
RESULT_TTL = 0

queue = Queue(QUEUE, connection=redis.Redis.from_url(redis_url()))


def noop(t_enq: float | None = None, **params: Any) -> None:
    # The work horse already holds a connection; a second one per fork would
    # charge rq for the harness's bookkeeping.
    job = get_current_job()
    assert job is not None
    record_job(job.connection, t_enq)


def enqueue_single(n: int) -> None:
    for _ in range(n):
        queue.enqueue(noop, kwargs=PAYLOAD, result_ttl=RESULT_TTL)


def enqueue_probe() -> None:
    queue.enqueue(noop, kwargs={"t_enq": time.time(), **PAYLOAD}, result_ttl=RESULT_TTL)


def enqueue_bulk(n: int) -> None:
    for size in in_batches(n):
        queue.enqueue_many([Queue.prepare_data(noop, kwargs=PAYLOAD, result_ttl=RESULT_TTL) for _ in range(size)])


def _worker_args(index: int | str) -> list[str]:
    # `-c rq_bench` (rq's settings-module option) imports this module in the
    # worker parent, so each forked work horse starts with the task preloaded
    # instead of importing it again per job.
    return [
        "worker",
        QUEUE,
        "--url",
        redis_url(),
        "--name",
        f"bench-w{index}",
        "-c",
        "rq_bench",
        "--logging_level",
        "WARNING",
    ]


def worker_commands(workers: int) -> list[list[str]]:
    return [[venv_bin("rq"), *_worker_args(i)] for i in range(workers)]


def config(workers: int) -> dict[str, Any]:
    return {
        "worker_cmd": f"{workers} x rq " + " ".join(_worker_args("<i>")).replace(redis_url(), "URL"),
        "worker_class": "rq.Worker (default: forks a work horse per job)",
        "result_ttl": RESULT_TTL,
        "log_level": "WARNING",
    }


PEER = Peer(
    name="rq",
    version=version("rq"),
    enqueue_single=enqueue_single,
    enqueue_probe=enqueue_probe,
    enqueue_bulk=enqueue_bulk,
    bulk_api="Queue.enqueue_many() per 1000 jobs; one pipeline per call",
    worker_commands=worker_commands,
    config=config,
)
