"""arq peer adapter: worker = the arq CLI with a 10 ms poll delay.

Run with var/bench/venv-b/bin/python; see _common.py for the CLI and method.
"""

from __future__ import annotations

import sys
import time
from importlib.metadata import version
from typing import Any

if __name__ == "__main__":  # delegate so the worker and we share one module name
    from _common import main

    sys.exit(main("arq_bench"))

from _common import PAYLOAD, AsyncRunner, Peer, record_job_async, redis_url, venv_bin
from arq import ArqRedis, create_pool
from arq.connections import RedisSettings

POLL_DELAY_S = 0.01  # arq polls its sorted-set queue; the default is 0.5 s

# arq's own log config is INFO; this is the same shape at WARNING.
LOG_CONFIG: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"arq": {"level": "WARNING", "class": "logging.StreamHandler"}},
    "loggers": {"arq": {"handlers": ["arq"], "level": "WARNING"}},
}


async def noop(ctx: dict[str, Any], t_enq: float | None = None, **params: Any) -> None:
    # The worker's own connection pool does the bookkeeping INCR.
    await record_job_async(ctx["redis"], t_enq)


class WorkerSettings:
    functions = [noop]
    redis_settings = RedisSettings.from_dsn(redis_url())
    poll_delay = POLL_DELAY_S
    keep_result = 0  # fire-and-forget: the task returns nothing worth keeping
    # max_jobs stays at its default of 10 concurrent jobs per process.


class _Client:
    """Adapter-side arq pool on a private event loop, created on first use."""

    def __init__(self) -> None:
        self.runner = AsyncRunner()
        self.pool: ArqRedis = self.runner.run(create_pool(WorkerSettings.redis_settings))

    async def enqueue_n(self, n: int) -> None:
        for _ in range(n):
            await self.pool.enqueue_job("noop", **PAYLOAD)

    async def enqueue_stamped(self) -> None:
        await self.pool.enqueue_job("noop", t_enq=time.time(), **PAYLOAD)


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


_WORKER_ARGS = ["arq_bench.WorkerSettings", "--custom-log-dict", "arq_bench.LOG_CONFIG"]


def worker_commands(workers: int) -> list[list[str]]:
    # arq has no multi-process option: one CLI process per worker.
    return [[venv_bin("arq"), *_WORKER_ARGS] for _ in range(workers)]


def config(workers: int) -> dict[str, Any]:
    return {
        "worker_cmd": f"{workers} x arq " + " ".join(_WORKER_ARGS),
        "poll_delay_s": POLL_DELAY_S,
        "max_jobs": 10,
        "keep_result": 0,
        "log_level": "WARNING (custom log dict)",
    }


PEER = Peer(
    name="arq",
    version=version("arq"),
    enqueue_single=enqueue_single,
    enqueue_probe=enqueue_probe,
    enqueue_bulk=None,
    bulk_api="no bulk API: arq only has ArqRedis.enqueue_job(), one WATCH/MULTI transaction per job",
    worker_commands=worker_commands,
    config=config,
)
