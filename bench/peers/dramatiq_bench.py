"""Dramatiq peer adapter: RedisBroker, worker = the dramatiq CLI.

Run with var/bench/venv-a/bin/python; see _common.py for the CLI and method.
"""

from __future__ import annotations

import logging
import sys
import time
from importlib.metadata import version
from typing import Any

if __name__ == "__main__":  # delegate so the worker and we share one module name
    from _common import main

    sys.exit(main("dramatiq_bench"))

import dramatiq
from _common import PAYLOAD, Peer, in_batches, record_job, redis_url, task_client, venv_bin
from dramatiq.brokers.redis import RedisBroker

THREADS = 8  # the CLI default

# The CLI only offers INFO or DEBUG; it runs with --skip-logging and the
# worker processes (which import this module) log at WARNING from here.
logging.basicConfig(level=logging.WARNING)

broker = RedisBroker(url=redis_url())
dramatiq.set_broker(broker)


@dramatiq.actor(broker=broker)  # type: ignore[untyped-decorator]
def noop(t_enq: float | None = None, **params: Any) -> None:
    record_job(task_client(), t_enq)


def enqueue_single(n: int) -> None:
    for _ in range(n):
        noop.send(**PAYLOAD)


def enqueue_probe() -> None:
    noop.send(t_enq=time.time(), **PAYLOAD)


def enqueue_bulk(n: int) -> None:
    for size in in_batches(n):
        dramatiq.group(noop.message(**PAYLOAD) for _ in range(size)).run()


def _worker_args(workers: int) -> list[str]:
    return ["dramatiq_bench", "--processes", str(workers), "--threads", str(THREADS), "--skip-logging"]


def worker_commands(workers: int) -> list[list[str]]:
    return [[venv_bin("dramatiq"), *_worker_args(workers)]]


def config(workers: int) -> dict[str, Any]:
    return {
        "worker_cmd": "dramatiq " + " ".join(_worker_args(workers)),
        "broker": "RedisBroker, default middleware, prefetch 2 x threads (default)",
        "idle_poll": "backoff up to dramatiq_worker_timeout=1000 ms (default)",
        "log_level": "WARNING (--skip-logging + basicConfig in the module)",
        "results": "none (no Results middleware)",
    }


PEER = Peer(
    name="dramatiq",
    version=version("dramatiq"),
    enqueue_single=enqueue_single,
    enqueue_probe=enqueue_probe,
    enqueue_bulk=enqueue_bulk,
    bulk_api="group(...).run() per 1000 jobs; loops broker.enqueue(), one Lua call per job",
    worker_commands=worker_commands,
    config=config,
)
