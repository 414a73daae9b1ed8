"""Running one claimed job: calling the task (sync in a thread, async on the event loop) and turning
what happened into an Outcome the worker reports to Redis."""

import asyncio
import ctypes
import json
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from jobconsole.core.context import JobContext
from jobconsole.core.errors import (
    Cancelled,
    InvalidJob,
    LeaseLost,
    PermanentError,
    Retry,
    TaskTimeout,
    WorkerShutdown,
)
from jobconsole.core.hooks import TaskHooks
from jobconsole.core.replace import Replace, ReplaceArgs, encode_replace
from jobconsole.core.tasks import OnShutdown, Task

MAX_MESSAGE = 2_000
MAX_TRACEBACK = 16_000
ENGINE_DIR = str(Path(__file__).parent)
# One encoder for every result: json.dumps with options builds a new JSONEncoder a call (2.4 µs of a no-op job).
_encode_result = json.JSONEncoder(allow_nan=False, separators=(",", ":")).encode


class Kind(StrEnum):
    """How an outcome is reported."""

    COMPLETE = "complete"
    FAIL = "fail"  # recorded by fail.lua; it decides retry, dead or failed
    RELEASE = "release"  # put back without using an attempt
    REPLACE = "replace"  # run again later with a new state (replace.lua)


@dataclass(slots=True)  # slots: a third less to build, and faster attribute reads, for every job
class RunningJob:
    """A job leased to this worker, from its claim until its outcome is reported."""

    id: str
    queue: str
    token: str
    task: Task
    attempt: int
    max_retries: int
    params: dict[str, Any]
    context: JobContext | None
    lease_s: float
    timeout_s: float | None
    started: float = field(default_factory=time.monotonic)
    next_heartbeat: float = 0.0
    last_task_heartbeat: float = field(default_factory=time.monotonic)
    renewed: float = field(default_factory=time.monotonic)  # last time Redis accepted a heartbeat (or the claim)
    lock: threading.Lock = field(default_factory=threading.Lock)
    thread_id: int | None = None
    async_task: "asyncio.Task[Any] | None" = None
    loop: asyncio.AbstractEventLoop | None = None
    began: bool = False  # the task was called (a prefetched job waits in the pool until then)
    finished: bool = False  # the task returned or raised; its outcome is on the way to Redis
    began_event: threading.Event | None = None  # set when the task begins, for a dispatcher waiting on it
    interrupted: OnShutdown | None = None  # set when shutdown interrupts it
    timed_out: bool = False
    lost: bool = False  # a heartbeat was refused: another worker may own it now
    stalled: bool = False  # the task stopped calling heartbeat() within max_heartbeat_interval
    cancel_requested: bool = False
    slot: tuple[str, str] | None = None  # (concurrency group, slot token) held while it runs
    hooks: TaskHooks | None = None  # run around a sync task on its thread (core/hooks.py)
    # The worker's process heartbeat is recent enough that it cannot have been declared gone (worker/liveness.py)
    process_alive: Callable[[], bool] | None = None

    def lease_fresh(self) -> bool:
        """Safe to start: not lost, renewed within two thirds of the lease (heartbeats come every third), and the
        worker's own process heartbeat as recent (else a recoverer may have taken the job back, whatever its
        lease)."""
        # A prefetched job that waited in a frozen or cut-off process may have been given to another worker.
        return (
            not self.lost
            and time.monotonic() - self.renewed < self.lease_s * 2 / 3
            and (self.process_alive is None or self.process_alive())
        )

    def interrupt(self, exc_type: type[BaseException]) -> bool:
        """Raise `exc_type` inside the running task (thread: at its next Python instruction)."""
        with self.lock:
            if self.async_task is not None and self.loop is not None:
                self.loop.call_soon_threadsafe(self.async_task.cancel, exc_type.__name__)
                return True
            if self.thread_id is None:
                return False
            done = ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(self.thread_id), ctypes.py_object(exc_type)
            )
            return bool(done == 1)


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ (object.__setattr__ per field) is 3x dearer
class Outcome:
    """How a job ended, as the worker reports it (never changed once built)."""

    job: RunningJob
    kind: Kind
    runtime_ms: int
    result_json: str = ""
    status: str = ""  # fail.lua outcome: failed, timeout, cancelled, shutdown
    retry: bool = False
    delay_ms: int = 0
    error: dict[str, str] = field(default_factory=dict)
    replace: ReplaceArgs | None = None


def run_sync(job: RunningJob) -> Outcome:
    """Thread-pool entry point. Never raises: every way out becomes an Outcome."""
    with job.lock:
        if job.interrupted or not job.lease_fresh():  # stopping, or the lease may be gone: do not start it
            return Outcome(job, Kind.RELEASE, 0)
        job.thread_id = threading.get_ident()
        job.began = True
        job.started = time.monotonic()
    if job.began_event is not None:
        job.began_event.set()
    hooks = job.hooks
    try:
        try:
            if hooks is not None and hooks.before is not None:
                hooks.before()
            result = job.task.func(**_kwargs(job))
        finally:
            with job.lock:
                job.thread_id = None
                job.finished = True
            if hooks is not None:
                hooks.run_after()  # never raises
        return success(job, result)
    except BaseException as exc:  # noqa: BLE001 - the boundary: any way the task ends is recorded
        return failure(job, exc)


async def run_async(job: RunningJob) -> Outcome:
    """Event-loop entry point for `async def` tasks. Never raises."""
    current = asyncio.current_task()
    with job.lock:
        if job.interrupted or not job.lease_fresh():
            return Outcome(job, Kind.RELEASE, 0)
        job.began = True
        job.started = time.monotonic()
        job.async_task = current
        job.loop = asyncio.get_running_loop()
    if job.began_event is not None:
        job.began_event.set()
    try:
        try:
            result = await asyncio.wait_for(job.task.func(**_kwargs(job)), job.timeout_s)
        finally:
            with job.lock:
                job.async_task = None
                job.finished = True
        return success(job, result)
    except asyncio.CancelledError as exc:
        # Our own interrupt() cancels with the exception's name as the message.
        reason = exc.args[0] if exc.args else ""
        if reason == "WorkerShutdown" or job.interrupted:
            return failure(job, WorkerShutdown())
        if reason == "TaskTimeout":
            return failure(job, TaskTimeout(f"task ran past its {job.timeout_s}s timeout"))
        return failure(job, Cancelled("task was cancelled"))
    except TimeoutError:
        return failure(job, TaskTimeout(f"task ran past its {job.timeout_s}s timeout"))
    except BaseException as exc:  # noqa: BLE001
        return failure(job, exc)


def _kwargs(job: RunningJob) -> dict[str, Any]:
    """The task's keyword arguments: its params, and its context if it takes one."""
    if job.task.context_param and job.context is not None:
        return {**job.params, job.task.context_param: job.context}
    return job.params


def _runtime_ms(job: RunningJob) -> int:
    """Milliseconds since the task began."""
    return int((time.monotonic() - job.started) * 1000)


def success(job: RunningJob, result: Any) -> Outcome:
    """The outcome of a task that returned `result` (a failure if it is not JSON)."""
    if result is None:  # most tasks return nothing: skip the encoder
        return Outcome(job, Kind.COMPLETE, _runtime_ms(job), result_json="null")
    replace = result if isinstance(result, Replace) else None
    try:
        encoded = _encode_result(replace.result if replace else result)
        args = encode_replace(replace, job.task) if replace else None
    except InvalidJob as exc:  # a ValueError too: first
        return failure(job, PermanentError(f"Replace refused: {exc}"))
    except (TypeError, ValueError) as exc:
        return failure(job, PermanentError(f"result is not JSON-serialisable: {exc}"))
    if args is not None:
        return Outcome(job, Kind.REPLACE, _runtime_ms(job), result_json=encoded, replace=args)
    return Outcome(job, Kind.COMPLETE, _runtime_ms(job), result_json=encoded)


def failure(job: RunningJob, exc: BaseException) -> Outcome:
    """The outcome of a task that raised `exc` or was stopped: failed, retried, cancelled or given back."""
    runtime = _runtime_ms(job)
    error = describe(exc)
    if isinstance(exc, WorkerShutdown) or job.interrupted:
        if job.interrupted is OnShutdown.FAIL:
            return Outcome(job, Kind.FAIL, runtime, status="shutdown", error=error)
        return Outcome(job, Kind.RELEASE, runtime, error=error)
    if isinstance(exc, Cancelled) or (job.cancel_requested and not isinstance(exc, Retry)):
        return Outcome(job, Kind.FAIL, runtime, status="cancelled", error=error)
    if isinstance(exc, TaskTimeout) or job.timed_out:
        delay = job.task.next_retry_delay(job.attempt)
        return Outcome(job, Kind.FAIL, runtime, status="timeout", retry=True, delay_ms=int(delay * 1000), error=error)
    if isinstance(exc, Retry):
        delay = exc.delay if exc.delay is not None else job.task.next_retry_delay(job.attempt)
        return Outcome(job, Kind.FAIL, runtime, status="failed", retry=True, delay_ms=int(delay * 1000), error=error)
    # A task stopped by LeaseLost did nothing wrong (Redis was unreachable past its lease), so its job is retried
    # like one whose worker died, never dead-lettered by retry_on, and refused as stale if another worker has it.
    retry = isinstance(exc, LeaseLost) or (not isinstance(exc, PermanentError) and job.task.retries(exc))
    delay = job.task.next_retry_delay(job.attempt) if retry else 0.0
    return Outcome(job, Kind.FAIL, runtime, status="failed", retry=retry, delay_ms=int(delay * 1000), error=error)


def describe(exc: BaseException) -> dict[str, str]:
    """Class, message, bounded traceback, and the innermost frame outside the engine (for fingerprints)."""
    cls = type(exc)
    frames = traceback.extract_tb(exc.__traceback__)
    user_frames = [f for f in frames if not f.filename.startswith(ENGINE_DIR)]
    top = user_frames[-1] if user_frames else (frames[-1] if frames else None)
    text = "".join(traceback.format_exception(exc))
    if len(text) > MAX_TRACEBACK:
        text = "...(truncated)\n" + text[-MAX_TRACEBACK:]
    return {
        "error_class": cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}",
        "message": str(exc)[:MAX_MESSAGE],
        "traceback": text,
        "top_frame": f"{top.filename}:{top.lineno} in {top.name}" if top else "",
    }
