"""SAQ peer adapter: RedisQueue, worker = the saq CLI.

Run with var/bench/venv-b/bin/python; see _common.py for the CLI and method.
"""

from __future__ import annotations

import sys
import time
from importlib.metadata import version
from typing import Any

if __name__ == "__main__":  # delegate so the worker and we share one module name
    from _common import main

    sys.exit(main("saq_bench"))

from _common import PAYLOAD, AsyncRunner, Peer, record_job_async, redis_url, venv_bin
from saq import Queue

CONCURRENCY = 10  # SAQ's default per worker process
# Fire-and-forget: delete the job record on completion (default keeps it 600 s).
JOB_TTL = -1

queue = Queue.from_url(redis_url(), name="bench")


async def noop(ctx: dict[str, Any], *, t_enq: float | None = None, **params: Any) -> None:
    # The worker's own queue connection does the bookkeeping INCR.
    await record_job_async(ctx["worker"].queue.redis, t_enq)


settings: dict[str, Any] = {
    "queue": queue,
    "functions": [noop],
    "concurrency": CONCURRENCY,
}


class _Client:
    """Adapter-side queue connection on a private event loop, made on first use."""

    def __init__(self) -> None:
        self.runner = AsyncRunner()
        self.runner.run(queue.connect())

    async def enqueue_n(self, n: int) -> None:
        for _ in range(n):
            await queue.enqueue("noop", ttl=JOB_TTL, **PAYLOAD)

    async def enqueue_stamped(self) -> None:
        await queue.enqueue("noop", ttl=JOB_TTL, t_enq=time.time(), **PAYLOAD)


_client: _Client | None = None


def client() -> _Client:
    global _client
    if _client is None:
        _client = _Client()
    return _client


def enqueue_single(n: int) -> None:
    c = client()
    c.runner.run(c.enqueue_n(n))


def enqueue_probe() -> None:
    c = client()
    c.runner.run(c.enqueue_stamped())


def _worker_args(workers: int) -> list[str]:
    return ["saq_bench.settings", "--workers", str(workers)]


def worker_commands(workers: int) -> list[list[str]]:
    # SAQ's own --workers option forks the extra worker processes.
    return [[venv_bin("saq"), *_worker_args(workers)]]


def config(workers: int) -> dict[str, Any]:
    return {
        "worker_cmd": "saq " + " ".join(_worker_args(workers)),
        "concurrency": CONCURRENCY,
        "dequeue": "BLMOVE (blocking, default dequeue_timeout=0)",
        "job_ttl": JOB_TTL,
        "log_level": "WARNING (CLI default without -v)",
    }


PEER = Peer(
    name="saq",
    version=version("saq"),
    enqueue_single=enqueue_single,
    enqueue_probe=enqueue_probe,
    enqueue_bulk=None,
    bulk_api=(
        "no enqueue-only bulk API: Queue.map() enqueues via asyncio.gather and then blocks until every job has finished"
    ),
    worker_commands=worker_commands,
    config=config,
)
