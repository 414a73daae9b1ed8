"""Tasks used only by the tests (registered in the default registry when imported).

Side effects are appended to files named by the parameters, so tests count executions from outside
the worker process (a process killed with SIGKILL cannot report anything itself).
"""

import os
import time
from pathlib import Path
from typing import Any

from jobconsole.core import JobContext, task


def _append(path: str, line: str) -> None:
    # O_APPEND writes of one short line are atomic between processes.
    with open(path, "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


@task(name="tests.record", max_retries=3, retry_delay=0.1, visibility_timeout=2)
def record(
    context: JobContext, ledger: str, seconds: float = 0.0, tag: str = "", retry_seconds: float | None = None
) -> dict[str, Any]:
    """Appends 'start' and 'end' lines to `ledger` around a sleep that heartbeats (lease 2 s); attempts after the
    first sleep `retry_seconds` instead, when given (a long first run to crash in, a quick one after)."""
    _append(ledger, f"start {context.job_id} {context.attempt} {os.getpid()} {tag}")
    if retry_seconds is not None and context.attempt > 1:
        seconds = retry_seconds
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
        context.heartbeat()
    _append(ledger, f"end {context.job_id} {context.attempt} {os.getpid()} {tag}")
    return {"pid": os.getpid()}


@task(name="tests.slow_requeue", visibility_timeout=2, on_shutdown="requeue", max_retries=1)
def slow_requeue(context: JobContext, ledger: str, seconds: float = 30.0) -> None:
    _slow(context, ledger, seconds)


@task(name="tests.slow_fail", visibility_timeout=2, on_shutdown="fail", max_retries=3)
def slow_fail(context: JobContext, ledger: str, seconds: float = 30.0) -> None:
    _slow(context, ledger, seconds)


@task(name="tests.slow_finish", visibility_timeout=2, on_shutdown="finish", max_retries=1)
def slow_finish(context: JobContext, ledger: str, seconds: float = 2.0) -> None:
    _slow(context, ledger, seconds)


def _slow(context: JobContext, ledger: str, seconds: float) -> None:
    _append(ledger, f"start {context.job_id} {context.attempt} {os.getpid()}")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.05)
    _append(ledger, f"end {context.job_id} {context.attempt} {os.getpid()}")


@task(name="tests.sleep_plain", visibility_timeout=1, max_retries=2)
def sleep_plain(seconds: float = 5.0, ledger: str = "") -> None:
    """Sleeps without calling heartbeat(): the worker's own heartbeat thread keeps its lease."""
    if ledger:
        _append(ledger, f"start {os.getpid()}")
    time.sleep(seconds)
    if ledger:
        _append(ledger, f"end {os.getpid()}")


@task(name="tests.sleep_pid", visibility_timeout=1, max_retries=2)
def sleep_pid(context: JobContext, seconds: float = 5.0, ledger: str = "", retry_gate: str = "") -> dict[str, int]:
    """tests.sleep_plain that returns its pid, so a test can tell whose completion was recorded. A retry
    (attempt 2 on) with a `retry_gate` path also holds the job until that file exists (at most 60 s), so a
    test decides, by event rather than by timing, when the second run may finish."""
    if ledger:
        _append(ledger, f"start {os.getpid()}")
    time.sleep(seconds)
    if retry_gate and context.attempt > 1:
        deadline = time.monotonic() + 60
        while not os.path.exists(retry_gate) and time.monotonic() < deadline:
            time.sleep(0.01)
    if ledger:
        _append(ledger, f"end {os.getpid()}")
    return {"pid": os.getpid()}


@task(name="tests.long_lease", visibility_timeout=300, max_retries=3)
def long_lease(
    context: JobContext, ledger: str, seconds: float = 5.0, retry_seconds: float | None = None
) -> dict[str, int]:
    """A 5-minute lease, so that only the process heartbeat brings it back soon after its worker dies. Appends
    'start'/'end <job> <attempt> <pid> <unix time>' around a sleep in short steps (an interrupt lands at once);
    attempts after the first sleep `retry_seconds` instead, when given."""
    _append(ledger, f"start {context.job_id} {context.attempt} {os.getpid()} {time.time():.3f}")
    if retry_seconds is not None and context.attempt > 1:
        seconds = retry_seconds
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.05)
    _append(ledger, f"end {context.job_id} {context.attempt} {os.getpid()} {time.time():.3f}")
    return {"pid": os.getpid()}


@task(name="tests.db_touch", max_retries=5, retry_delay=0.1, visibility_timeout=5)
def db_touch(seconds: float = 0.0) -> dict[str, Any]:
    """Queries the database before and after a sleep (a connection dropped meanwhile fails this attempt); returns
    the worker's pid and its database session's (PostgreSQL's pg_backend_pid, 0 elsewhere)."""
    from django.db import connection

    from jobconsole.models import Queue

    Queue.objects.count()
    time.sleep(seconds)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()" if connection.vendor == "postgresql" else "SELECT 0")
        (backend,) = cursor.fetchone()
    return {"pid": os.getpid(), "backend": backend}


def read_ledger(path: Path) -> list[list[str]]:
    if not path.exists():
        return []
    return [line.split() for line in path.read_text().splitlines() if line.strip()]
