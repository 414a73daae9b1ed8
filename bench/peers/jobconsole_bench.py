"""Jobconsole adapter: the project's own engine, worker = `python manage.py runworker`.

Run with the project's .venv python; see _common.py for the CLI and method. Every reliability feature
stays on: leases and heartbeats, attempt history, per-minute stats, and the mirror's event stream. The
database mirror itself runs only when JOBCONSOLE_BENCH_MIRROR=1 (the "jobconsole+mirror" row).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if __name__ == "__main__":  # delegate so the worker and we share one module name
    from _common import main

    sys.exit(main("jobconsole_bench"))

sys.path.insert(0, str(ROOT))

from _common import Peer, in_batches, record_job, redis_url, task_client  # noqa: E402

from jobconsole.core import Client, JobSpec, task  # noqa: E402
from jobconsole.core.client import DEFAULT_SPIN_US  # noqa: E402
from jobconsole.core.connection import connect  # noqa: E402

CONCURRENCY = int(os.environ.get("JOBCONSOLE_BENCH_CONCURRENCY", "10"))
SPIN_US = int(os.environ.get("JOBCONSOLE_CLIENT_SPIN_US", DEFAULT_SPIN_US))  # as the Django setting reads it
WITH_MIRROR = os.environ.get("JOBCONSOLE_BENCH_MIRROR") == "1"

# What the worker processes inherit (worker_env copies os.environ).
os.environ.update(
    REDIS_URL=redis_url(),
    JOBCONSOLE_TASK_MODULES="jobconsole_bench",
    JOBCONSOLE_VAR_DIR=str(ROOT / "var" / "bench" / "jobconsole"),
    JOBCONSOLE_MIRROR_IN_WORKER="1" if WITH_MIRROR else "0",
    LOG_LEVEL=os.environ.get("BENCH_LOG_LEVEL", "WARNING"),
    DJANGO_SETTINGS_MODULE="project.settings",
    SECRET_KEY=os.environ.get("SECRET_KEY") or "bench-only-not-a-secret",
)


@task(name="bench.noop", queue="bench")
def noop(t_enq: float | None = None) -> None:
    record_job(task_client(), t_enq)


_client: Client | None = None


def client() -> Client:
    global _client
    if _client is None:
        _client = Client(connect(redis_url()), spin_us=SPIN_US)
    return _client


def enqueue_single(n: int) -> None:
    c = client()
    for _ in range(n):
        c.enqueue("bench.noop")


def enqueue_probe() -> None:
    client().enqueue("bench.noop", {"t_enq": time.time()})


def enqueue_bulk(n: int) -> None:
    c = client()
    for size in in_batches(n):
        c.enqueue_many([JobSpec(task="bench.noop")] * size, batch_size=size)


def _worker_args() -> list[str]:
    return ["runworker", "--queues", "bench", "--concurrency", str(CONCURRENCY)]


def worker_commands(workers: int) -> list[list[str]]:
    if WITH_MIRROR:  # migrate once, before the workers start writing
        import subprocess

        env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}  # settings import this module
        subprocess.run([sys.executable, str(ROOT / "manage.py"), "migrate", "-v0"], check=True, env=env)
    return [[sys.executable, str(ROOT / "manage.py"), *_worker_args()] for _ in range(workers)]


def config(workers: int) -> dict[str, Any]:
    return {
        "worker_cmd": f"{workers} x manage.py " + " ".join(_worker_args()),
        "log_level": "WARNING",
        "reliability": "leases+heartbeats, attempt history, stats, event stream all on",
        "mirror": "database mirror running in the workers (SQLite)" if WITH_MIRROR else "event stream only",
        "client_spin_us": SPIN_US,
    }


PEER = Peer(
    name="jobconsole+mirror" if WITH_MIRROR else "jobconsole",
    version="main",
    enqueue_single=enqueue_single,
    enqueue_probe=enqueue_probe,
    enqueue_bulk=enqueue_bulk,
    bulk_api="Client.enqueue_many: 1000 jobs per EVALSHA, one round trip per batch",
    worker_commands=worker_commands,
    config=config,
)
