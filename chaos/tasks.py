"""Chaos tasks (registered through JOBCONSOLE_TASK_MODULES=...,chaos.tasks). Each one writes its execution
to the ledger before doing anything else, so a process killed mid-task still leaves a trace."""

import os
import signal
import sys
import time
from typing import Any

from chaos.ledger import Ledger
from jobconsole.core import JobContext, task
from jobconsole.core.backoff import Backoff
from jobconsole.core.execution import RunningJob

QUEUE = "chaos"
LEASE_S = 1.0  # visibility_timeout of every chaos task: faults are sized in multiples of it
# chaos.work's lease, 1 s unless CHAOS_LEASE_S says otherwise (the harness and its workers read the same
# environment): with a 300 s lease, only the workers' process heartbeat brings a dead worker's jobs back soon.
JOB_LEASE_S = float(os.environ.get("CHAOS_LEASE_S") or LEASE_S)
# chaos.spin's lease. Three workers of eight CPU-bound threads on two vCPUs (plus the host's steal) leave a
# whole process without CPU for close to a second at times; a 1 s lease would then lapse because the OS did not
# run the process at all, which no heartbeat design inside it can help. Twice that is still far below the
# 30 s default and short enough that a task spinning 1.5x its lease depends on the heartbeat thread.
SPIN_LEASE_S = 2.0
# chaos.flaky's retry policy (exponential with equal jitter); the checker verifies that every retry waited at
# least half the exponential delay.
FLAKY_RETRIES = 4
FLAKY_DELAY_S = 0.1
FLAKY_DELAY_CAP_S = 0.8

_ledger: Ledger | None = None


def ledger() -> Ledger:
    global _ledger
    if _ledger is None:
        _ledger = Ledger.from_env()
    return _ledger


def began(context: JobContext) -> int:
    """Book this run in the ledger: with the lease token the worker will report it with, and with the moment
    the worker let it begin (run_sync's gate, where it checks that the lease is fresh), not the moment this
    line runs. A process frozen between the two (SIGSTOP) resumes here after its lease is gone: judged by
    this line's clock, a run that began under a valid lease would look like one the worker started late."""
    token, ago = "?:?", 0.0
    # The context exposes neither; the harness reads them from the engine's frame that called the task
    # (run_sync's `job`): exact, and no extra round trip.
    frame = sys._getframe(1)
    while frame is not None:
        job = frame.f_locals.get("job")
        if isinstance(job, RunningJob):
            token = job.token
            ago = time.monotonic() - job.started  # job.started: monotonic, set at the gate
            break
        frame = frame.f_back  # type: ignore[assignment]
    return ledger().began(context.job_id, context.attempt, token, ago)


def _run(context: JobContext, key: str, seconds: float, heartbeat: bool, die_after_effect: bool) -> dict[str, Any]:
    book = ledger()
    execution = began(context)
    try:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            time.sleep(min(0.1, left))
            if heartbeat:
                context.heartbeat()  # LeaseLost once another worker may own the job: stop here
        book.side_effect(key, context.job_id)
        if die_after_effect and context.attempt == 1:
            # The handler succeeded and its effect is done; the worker dies before it can ack.
            book.ended(execution, "killed_before_ack")
            os.kill(os.getpid(), signal.SIGKILL)
    except BaseException as exc:
        book.ended(execution, type(exc).__name__)
        raise
    book.ended(execution, "ok")
    return {"pid": os.getpid()}


@task(name="chaos.work", queue=QUEUE, visibility_timeout=JOB_LEASE_S, max_retries=25, retry_delay=0.1)
def work(
    context: JobContext, key: str, seconds: float = 0.0, heartbeat: bool = True, die_after_effect: bool = False,
    pad: str = "",
) -> dict[str, Any]:  # fmt: skip
    """Sleeps `seconds` (calling heartbeat() unless told not to), then applies its side effect `key` once.
    `pad` is ballast: memory the job takes in Redis (redis_full fills Redis with it)."""
    return _run(context, key, seconds, heartbeat, die_after_effect)


GROUP = "chaos.ext"  # the concurrency group of chaos.grouped (group_slots defines its limit)


@task(name="chaos.grouped", queue=QUEUE, visibility_timeout=LEASE_S, max_retries=25, retry_delay=0.1, group=GROUP)
def grouped(context: JobContext, key: str, seconds: float = 0.0) -> dict[str, Any]:
    """chaos.work in a concurrency group: group_slots checks its runs at once never pass the group's limit."""
    return _run(context, key, seconds, True, False)


@task(name="chaos.spin", queue=QUEUE, visibility_timeout=SPIN_LEASE_S, max_retries=25, retry_delay=0.1)
def spin(context: JobContext, key: str, seconds: float = 0.0) -> dict[str, Any]:
    """CPU-bound for `seconds` in pure Python (holding the GIL but for the interpreter's switches) and never
    calling heartbeat(): the worker's own heartbeat thread must keep the lease alive meanwhile."""
    book = ledger()
    execution = began(context)
    deadline = time.monotonic() + seconds
    total = 0
    while time.monotonic() < deadline:
        total += sum(i * i for i in range(2_000))
    book.side_effect(key, context.job_id)
    book.ended(execution, "ok")
    return {"pid": os.getpid()}


@task(name="chaos.requeue", queue=QUEUE, visibility_timeout=LEASE_S, max_retries=25, on_shutdown="requeue")
def requeue(context: JobContext, key: str, seconds: float = 0.0) -> dict[str, Any]:
    """chaos.work for long jobs that a SIGTERM interrupts and puts back without using an attempt."""
    return _run(context, key, seconds, True, False)


@task(name="chaos.poison", queue=QUEUE, visibility_timeout=LEASE_S, max_retries=2)
def poison(context: JobContext, key: str) -> None:
    """Crashes its worker process on every attempt (like a segfault): it must end in the dead-letter set."""
    began(context)
    os._exit(70)


class FlakyError(Exception):
    """What chaos.flaky raises on its planned failing attempts: a handler's error, not a crash."""


@task(
    name="chaos.flaky", queue=QUEUE, visibility_timeout=LEASE_S, max_retries=FLAKY_RETRIES,
    retry_delay=FLAKY_DELAY_S, backoff_strategy=Backoff.EXPONENTIAL_JITTER, max_retry_delay=FLAKY_DELAY_CAP_S,
)  # fmt: skip
def flaky(context: JobContext, key: str, seconds: float = 0.0, fail_first: int = 0) -> dict[str, Any]:
    """Raises FlakyError on attempts 1..fail_first (after `seconds` of work), then behaves as chaos.work.
    With fail_first above FLAKY_RETRIES it ends in the dead-letter set until an operator resubmits it."""
    if context.attempt > fail_first:
        return _run(context, key, seconds, True, False)
    book = ledger()
    execution = began(context)
    time.sleep(seconds)
    book.ended(execution, FlakyError.__name__)
    raise FlakyError(f"planned failure {context.attempt} of {fail_first}")
