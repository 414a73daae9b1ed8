"""Celery's calling convention on Jobconsole tasks, so moving a Celery project over is a change of import:

    from jobconsole.celery import shared_task      # was: from celery import shared_task

    @shared_task
    def add(x: int, y: int) -> int:
        return x + y

    result = add.delay(2, 3)                        # or add.apply_async((2, 3), countdown=10, queue="math")
    result.get(timeout=10)                          # 5

Signatures follow Celery's (the celery-types stubs): `delay(*args, **kwargs)`, `apply_async(args, kwargs, task_id,
..., countdown=, eta=, queue=, priority=)` returning an `AsyncResult` with `id`, `state`/`status`, `get()`,
`ready()`, `successful()`, `failed()`, `result`, `traceback`, `revoke()`. A task is the engine task named
`module.function` (or `name=`), registered when its module is imported (an installed app's tasks.py); its jobs'
params are `{"args": [...], "kwargs": {...}}` (jobconsole/calls.py), JSON only (Celery's json serializer).

The standard Django app module works too (`app = Celery("proj")`, `app.config_from_object("django.conf:settings",
namespace="CELERY")`, `app.autodiscover_tasks()`, `@app.task`, `app.send_task`): the `Celery` class below reads the
CELERY_* settings it can honour and logs once each setting it cannot. Canvas (signatures, chain, group, chord) is
in jobconsole/canvas.py and exported here.

What differs from Celery, on purpose:
- The default queue is `celery` (Celery's `task_default_queue`); a worker serves it like any registered queue.
- Priority 0..9 with Redis's convention, 0 first, is our priority as it is (lower runs first); a job without one
  gets the task's, 0 by default: like Celery on Redis, where an unprioritised message counts as 0.
- Retries: none unless `autoretry_for` names the exception, or the task calls `self.retry()` (`bind=True`), as in
  Celery; `max_retries` (3), `default_retry_delay` (180 s), `retry_backoff`, `retry_backoff_max` (600 s),
  `retry_jitter` and `time_limit` become the engine task's options. Exhausted, the job is a dead letter.
- Inside a database transaction, `delay` and `apply_async` enqueue when it commits and never if it rolls back
  (JOBCONSOLE["IN_TRANSACTION"], default "on_commit"; "now" is Celery's own behaviour, "outbox" the outbox's);
  `delay_on_commit` and `apply_async_on_commit` always wait for the commit, as in Celery.
- Options Jobconsole cannot honour (`rate_limit`, `soft_time_limit`, `acks_late=False`, `expires`, `exchange`,
  `routing_key`, `producer`, `shadow`...) raise TypeError instead of being dropped silently.
"""

import fnmatch
import inspect
import logging
import re
import sys
import time
import traceback as traceback_module
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, tzinfo
from importlib import import_module
from typing import TYPE_CHECKING, Any, Concatenate, Literal, cast, overload
from zoneinfo import ZoneInfo

from ulid import ULID

from jobconsole import transactional
from jobconsole.calls import call_params, register_call_task
from jobconsole.core import JobContext, JobNotFound, JobState, Retry
from jobconsole.core.errors import InvalidJob
from jobconsole.core.ids import new_job_id
from jobconsole.core.job import Job
from jobconsole.core.states import STATES
from jobconsole.core.tasks import Task as EngineTask
from jobconsole.engine import get_client

log = logging.getLogger("jobconsole.celery")

DEFAULT_QUEUE = "celery"
MIN_PRIORITY, MAX_PRIORITY = 0, 9
UNLIMITED_RETRIES = 1000  # Celery's max_retries=None (retry for ever): the engine's ceiling
# apply_async options that only tune Celery's transport: accepted and ignored, since nothing changes here.
_NO_OP_OPTIONS = frozenset(
    {"serializer", "compression", "retry", "retry_policy", "ignore_result", "add_to_parent", "headers", "publisher"}
)

PENDING, STARTED, RETRY, SUCCESS, FAILURE, REVOKED = "PENDING", "STARTED", "RETRY", "SUCCESS", "FAILURE", "REVOKED"
READY_STATES = frozenset({SUCCESS, FAILURE, REVOKED})
STATE_OF_JOB = {state: info.celery for state, info in STATES.items()}  # the state table's `celery`


class TaskError(Exception):
    """A task's exception on the worker, when its class cannot be made again here: the class path, message and
    traceback as recorded."""

    def __init__(self, exception_class: str, message: str, traceback: str = "") -> None:
        super().__init__(f"{exception_class}: {message}" if message else exception_class)
        self.exception_class = exception_class
        self.message = message
        self.traceback = traceback


class TaskRevokedError(Exception):
    """The job was cancelled (Celery's state REVOKED)."""


class ChordError(Exception):
    """A chord's header had a failed member, so its callback did not run (Celery's ChordError)."""


@dataclass(frozen=True, slots=True)
class Request:
    """What a bound task sees of its running job as `self.request` (a subset of Celery's)."""

    id: str
    retries: int  # attempts before this one
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    delivery_info: dict[str, Any] = field(default_factory=dict)
    is_eager: bool = False  # run here by apply() (or task_always_eager), not by a worker


_current_request: ContextVar[Request | None] = ContextVar("jobconsole_celery_request", default=None)


def job_id_of(task_id: str) -> str:
    """The job id of a task id: a ULID as it is; a UUID, Celery's own task ids (`task_id=str(uuid4())`), as the
    ULID of the same 128 bits, so `AsyncResult(that uuid)` finds the job (a uuid7's time is the ULID's too)."""
    if isinstance(task_id, str) and len(task_id) in (32, 36):
        try:
            return str(ULID.from_uuid(uuid.UUID(task_id)))
        except ValueError:
            pass
    return task_id


class AsyncResult[R]:
    """A job by id, read from Redis when asked (Celery's AsyncResult). An unknown id is PENDING, as in Celery.
    `parent` is the result of the step before in a chain (None otherwise); `children` what the canvas started
    from it (a chord's header is the parent of its callback)."""

    def __init__(self, id: str, backend: Any = None, task_name: str | None = None, app: Any = None,
                 parent: "AsyncResult[Any] | None" = None) -> None:  # fmt: skip
        self.id = id  # Celery's name
        self.parent = parent
        self.children: list[AsyncResult[Any]] = []

    @property
    def task_id(self) -> str:
        return self.id

    def _job(self) -> Job | None:
        try:
            return get_client().get(job_id_of(self.id))
        except (JobNotFound, InvalidJob):
            return None

    @property
    def state(self) -> str:
        job = self._job()
        return STATE_OF_JOB[job.state] if job is not None else PENDING

    @property
    def status(self) -> str:
        return self.state

    def ready(self) -> bool:
        return self.state in READY_STATES

    def successful(self) -> bool:
        return self.state == SUCCESS

    def failed(self) -> bool:
        return self.state == FAILURE

    @property
    def result(self) -> R | BaseException | None:
        """The return value once successful, the exception once failed (or revoked), else None."""
        job = self._job()
        if job is None:
            return None
        state = STATE_OF_JOB[job.state]
        if state == SUCCESS:
            return cast(R, job.result)
        if state in READY_STATES:
            return _exception(job)
        return None

    @property
    def info(self) -> R | BaseException | None:
        return self.result

    @property
    def traceback(self) -> str | None:
        """The traceback text of the last failed attempt (Celery gives text too)."""
        job = self._job()
        if job is None:
            return None
        failed = [a for a in job.history if a.traceback]
        return failed[-1].traceback if failed else None

    def get(
        self,
        timeout: float | None = None,
        propagate: bool = True,
        interval: float = 0.5,
        **ignored: Any,  # Celery's no_ack, follow_parents, callback...: nothing here needs them
    ) -> R:
        """Wait until the job has ended and return its value; a failed one raises its exception (propagate) or
        returns it. TimeoutError after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            job = self._job()
            if job is not None and STATE_OF_JOB[job.state] in READY_STATES:
                if STATE_OF_JOB[job.state] == SUCCESS:
                    return cast(R, job.result)
                error = _exception(job)
                if propagate:
                    raise error
                return cast(R, error)
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"job {self.id} did not finish within {timeout} s")
            time.sleep(interval if deadline is None else max(0.0, min(interval, deadline - time.monotonic())))

    def wait(self, timeout: float | None = None, propagate: bool = True, interval: float = 0.5, **ignored: Any) -> R:
        return self.get(timeout, propagate, interval)

    def revoke(
        self, connection: Any = None, terminate: bool = False, signal: str | None = None, **ignored: Any
    ) -> None:
        """Cancel the job: a waiting one at once, a running one is asked to stop (`context.cancel_requested`)."""
        get_client().cancel(self.id)

    def forget(self) -> None:
        """Nothing to do: results expire with their job (RETENTION)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AsyncResult) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {self.id}>"


class EagerResult[R](AsyncResult[R]):
    """The outcome of a task run here, now (`apply()`, or `task_always_eager`): Celery's EagerResult."""

    def __init__(self, id: str, value: Any, state: str, traceback: str | None = None,
                 parent: AsyncResult[Any] | None = None) -> None:  # fmt: skip
        super().__init__(id, parent=parent)
        self._value = value
        self._state = state
        self._traceback = traceback

    @property
    def state(self) -> str:
        return self._state

    @property
    def result(self) -> R | BaseException | None:
        return cast(R | BaseException | None, self._value)

    @property
    def traceback(self) -> str | None:
        return self._traceback

    def get(self, timeout: float | None = None, propagate: bool = True, interval: float = 0.5, **ignored: Any) -> R:
        if self._state == SUCCESS:
            return cast(R, self._value)
        if propagate and isinstance(self._value, BaseException):
            raise self._value
        return cast(R, self._value)

    def revoke(self, *args: Any, **kwargs: Any) -> None:
        """Nothing to cancel: it has run."""


def _exception(job: Job) -> BaseException:
    """The exception a failed job ended with, made again when its class is in a module this process has imported
    already (a class path read from Redis never imports anything) and takes a message."""
    if job.state is JobState.CANCELLED:
        return _cancelled_by_parent(job) or TaskRevokedError(f"job {job.id} was cancelled")
    attempts = [a for a in job.history if a.error_class]
    if not attempts:
        return TaskError("JobFailed", job.reason or f"job ended {job.state}")
    last = attempts[-1]
    module, _, name = last.error_class.rpartition(".")
    try:
        cls = getattr(sys.modules[module or "builtins"], name)
        if isinstance(cls, type) and issubclass(cls, Exception):
            return cls(last.message)
    except Exception:  # noqa: BLE001 - any class we cannot remake: the recorded description instead
        pass
    return TaskError(last.error_class, last.message, last.traceback)


def _cancelled_by_parent(job: Job, depth: int = 0) -> BaseException | None:
    """For a step of a workflow cancelled because a parent failed (a chain's later step, a chord's body): the
    failure that cancelled it, as Celery's get() raises a parent's error; a chord's body's is a ChordError."""
    by, mode = job.raw.get("cancelled_by", ""), job.raw.get("pass", "")  # the engine's workflow fields, as stored
    if not by or depth > 1000:
        return None
    queue, _, parent_id = by.partition("|")
    try:
        parent = get_client().get(parent_id, queue)
    except (JobNotFound, InvalidJob):
        return None
    if parent.state is JobState.CANCELLED:
        error = _cancelled_by_parent(parent, depth + 1) or TaskRevokedError(f"job {parent.id} was cancelled")
    else:
        error = _exception(parent)
    if mode == "list":
        return ChordError(f"Dependency {parent.id} raised {error!r}")
    return error


# --- Task options -------------------------------------------------------------------------------------------

# Decorator options that change nothing here, with why: accepted. Any other option not mapped is a TypeError.
_ACCEPTED_TASK_OPTIONS: dict[str, str] = {
    "ignore_result": "results are kept until the job expires (RETENTION) whatever it says",
    "store_errors_even_if_ignored": "errors are always kept with the job's history",
    "track_started": "a job's running state is always recorded",
    "reject_on_worker_lost": "a job whose worker dies is run again when its lease expires",
    "throws": "only changes Celery's log level for expected errors",
    "shared": "every task is known to every app",
    "trail": "Jobconsole keeps no result trail",
    "resultrepr_maxsize": "only shortens Celery's log lines",
}
# Options Jobconsole cannot honour, with why: a TypeError naming them, rather than a task that behaves otherwise.
_REFUSED_TASK_OPTIONS: dict[str, str] = {
    "rate_limit": "Jobconsole has no per-task rate limit (use a concurrency group: JOBCONSOLE['GROUPS'])",
    "soft_time_limit": "Jobconsole has no soft time limit (time_limit interrupts the job)",
    "expires": "jobs do not expire before they run",
    "base": "custom Task classes are not supported",
    "pydantic": "arguments are JSON as sent",
    "request_stack": "not supported",
}


@dataclass(frozen=True, slots=True)
class TaskOptions:
    """A task's options as given to the decorator; None = the app's configured default."""

    bind: bool = False
    queue: str | None = None
    priority: int | None = None
    max_retries: int | None = 3
    default_retry_delay: float = 180
    autoretry_for: tuple[type[BaseException], ...] = ()
    retry_backoff: bool | int = False
    retry_backoff_max: float = 600
    retry_jitter: bool = True
    time_limit: float | None = None
    typing: bool = True

    @classmethod
    def of(cls, options: dict[str, Any]) -> "TaskOptions":
        """The mapped options; TypeError for an option Jobconsole cannot honour or does not know."""
        options = dict(options)
        if options.pop("acks_late", True) is False:
            raise TypeError("acks_late=False cannot be honoured: Jobconsole acknowledges a job when it ends, so a "
                            "job interrupted by a crash runs again (acks_late=True)")  # fmt: skip
        if options.pop("serializer", None) not in (None, "json"):
            raise TypeError("Jobconsole stores arguments and results as JSON only (serializer='json')")
        refused = sorted(n for n, v in options.items() if n in _REFUSED_TASK_OPTIONS and v is not None)
        if refused:
            raise TypeError("; ".join(f"{n}: {_REFUSED_TASK_OPTIONS[n]}" for n in refused))
        mapped = {n: options.pop(n) for n in list(options) if n in cls.__dataclass_fields__}
        unknown = sorted(n for n in options if n not in _ACCEPTED_TASK_OPTIONS and n not in _REFUSED_TASK_OPTIONS)
        if unknown:
            raise TypeError(f"task options not supported by Jobconsole: {', '.join(unknown)}")
        if "autoretry_for" in mapped:
            mapped["autoretry_for"] = tuple(mapped["autoretry_for"])
        return cls(**mapped)


# --- Tasks --------------------------------------------------------------------------------------------------


class CeleryTask[**P, R]:
    """A registered task with Celery's calling convention; calling it runs the function here, now.

    Its engine task is registered when the app's configuration can be read (at once, unless the decorator runs
    while Django's settings are still being imported, as `@app.task` in proj/celery.py does: then when Django's
    apps are ready or the task is first used), since the configuration gives its default queue and limits."""

    def __init__(self, func: Callable[..., R], *, name: str, options: TaskOptions, app: "Celery | None") -> None:
        self.func = func
        self.name = name
        self.options = options
        self.bind = options.bind
        self._app = app
        self._engine: EngineTask | None = None
        self._queue = ""
        self._priority: int | None = None
        self._signature = inspect.signature(func)
        self.__doc__ = func.__doc__
        self.__name__ = func.__name__
        self.__module__ = func.__module__
        self.__wrapped__ = func

    @property
    def app(self) -> "Celery":
        return self._app or current_app()

    @property
    def engine_task(self) -> EngineTask:
        return self._finalize()

    @property
    def queue(self) -> str:
        self._finalize()
        return self._queue

    @property
    def priority(self) -> int | None:
        self._finalize()
        return self._priority

    @property
    def max_retries(self) -> int | None:
        return self.options.max_retries

    @property
    def default_retry_delay(self) -> float:
        return self.options.default_retry_delay

    def _finalize(self) -> EngineTask:
        """Register the engine task with the app's defaults (task_default_queue, task_routes, ...), once."""
        if self._engine is None:
            conf = self.app.conf
            queue = self.options.queue or self.app._static_route(self.name) or conf.task_default_queue
            priority = self.options.priority if self.options.priority is not None else conf.task_default_priority
            time_limit = self.options.time_limit if self.options.time_limit is not None else conf.task_time_limit
            self._engine = _register_engine(self, replace(self.options, queue=queue, priority=priority,
                                                          time_limit=time_limit))  # fmt: skip
            self._queue, self._priority = queue, priority
            _pending_tasks.pop(self.name, None)
        return self._engine

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.run(*args, **kwargs)

    def run(self, *args: P.args, **kwargs: P.kwargs) -> R:
        if self.bind:
            return self.func(self, *args, **kwargs)
        return self.func(*args, **kwargs)

    def delay(self, *args: P.args, **kwargs: P.kwargs) -> AsyncResult[R]:
        return self.apply_async(args, kwargs)

    def apply_async(
        self,
        args: Sequence[Any] | None = None,
        kwargs: dict[str, Any] | None = None,
        task_id: str | None = None,
        producer: Any = None,
        link: Any = None,
        link_error: Any = None,
        shadow: str | None = None,
        *,
        countdown: float | None = None,
        eta: datetime | None = None,
        queue: str | None = None,
        priority: int | None = None,
        mode: "transactional.Mode | None" = None,
        **options: Any,
    ) -> AsyncResult[R]:
        """Enqueue a job. `countdown` (seconds) or `eta` (a datetime; naive is read in the app's `timezone`, UTC by
        default, as Celery reads it) delay it; `queue` and `priority` (0..9, 0 first) override the task's. With
        `task_always_eager` set, run it here instead (an EagerResult). `link` / `link_error` make it a workflow
        (jobconsole/canvas.py). Raises TypeError for arguments the function does not take or options Jobconsole
        cannot honour, ValueError (InvalidJob) for bad values. Inside a database transaction, as
        JOBCONSOLE["IN_TRANSACTION"] (or `mode`) says: by default, when it commits."""
        if link is not None or link_error is not None:
            return cast(AsyncResult[R], self.signature(args, kwargs, task_id=task_id, countdown=countdown, eta=eta,
                                                       queue=queue, priority=priority, **options)
                        .apply_async(link=link, link_error=link_error))  # fmt: skip
        unsupported = sorted(
            [n for n, v in (("producer", producer), ("shadow", shadow)) if v is not None]
            + [n for n, v in options.items() if n not in _NO_OP_OPTIONS and v is not None]
        )
        if unsupported:
            raise TypeError(f"{self.name}: apply_async options not supported by Jobconsole: {', '.join(unsupported)}")
        args, kwargs = list(args or ()), dict(kwargs or {})
        app = self.app
        if app.conf.task_always_eager:
            return self.apply(args, kwargs, task_id=task_id)
        self._check_arguments(args, kwargs)
        if countdown is not None and eta is not None:
            raise TypeError(f"{self.name}: give countdown or eta, not both")
        queue = queue or app._dynamic_route(self.name, args, kwargs) or self.queue
        job_id = transactional.enqueue(
            self.name, call_params(args, kwargs), mode=mode, id=task_id and job_id_of(task_id), queue=queue,
            priority=celery_priority(priority if priority is not None else self.priority),
            delay=countdown, run_at=app._aware(eta),
        )  # fmt: skip
        return AsyncResult(task_id or job_id)

    def apply(
        self,
        args: Sequence[Any] | None = None,
        kwargs: dict[str, Any] | None = None,
        task_id: str | None = None,
        throw: bool | None = None,
        **options: Any,
    ) -> EagerResult[R]:
        """Run the task here, now, and return an EagerResult (Celery's `apply`): retries (`self.retry()`,
        `autoretry_for`) run again at once, up to max_retries. An exception is kept in the result, or raised
        with `throw=True` (default: the app's task_eager_propagates)."""
        args, kwargs = list(args or ()), dict(kwargs or {})
        self._check_arguments(args, kwargs)
        task_id = task_id or new_job_id()
        if throw is None:
            throw = bool(self.app.conf.task_eager_propagates)
        limit = UNLIMITED_RETRIES if self.options.max_retries is None else self.options.max_retries
        retries = 0
        while True:
            request = Request(id=task_id, retries=retries, args=args, kwargs=kwargs, is_eager=True,
                              delivery_info={"is_eager": True})  # fmt: skip
            token = _current_request.set(request)
            try:
                return EagerResult(task_id, self.run(*args, **kwargs), SUCCESS)
            except Exception as exc:  # noqa: BLE001 - whatever the task raised is its result, as in Celery
                retrying = isinstance(exc, (Retry, *self.options.autoretry_for))
                if retrying and retries < limit:
                    retries += 1
                    continue
                error = exc.__cause__ if isinstance(exc, Retry) and exc.__cause__ is not None else exc
                if throw:
                    raise error from None
                return EagerResult(task_id, error, FAILURE, traceback_module.format_exc())
            finally:
                _current_request.reset(token)

    def delay_on_commit(self, *args: P.args, **kwargs: P.kwargs) -> None:
        """Celery's: enqueue when the current transaction commits, never if it rolls back (at once outside one)."""
        self.apply_async_on_commit(args, kwargs)

    def apply_async_on_commit(
        self, args: Sequence[Any] | None = None, kwargs: dict[str, Any] | None = None, **options: Any
    ) -> None:
        """Celery's: apply_async when the current transaction commits (through the outbox when IN_TRANSACTION is
        "outbox"). Returns None, as Celery's does; the job's arguments are checked now."""
        mode: transactional.Mode = "outbox" if transactional.configured_mode() == "outbox" else "on_commit"
        self.apply_async(args, kwargs, mode=mode, **options)

    # Canvas (jobconsole/canvas.py): imported when used, since it builds on this module.

    def signature(self, args: Sequence[Any] | None = None, kwargs: dict[str, Any] | None = None,
                  **options: Any) -> "Signature":  # fmt: skip
        """Celery's `task.signature(args, kwargs, **options)`: a call to send later, or to compose."""
        from jobconsole.canvas import Signature

        return Signature(self, args, kwargs, options)

    subtask = signature

    def s(self, *args: Any, **kwargs: Any) -> "Signature":
        """A partial call: in a chain the previous step's result is prepended to its arguments."""
        return self.signature(args, kwargs)

    def si(self, *args: Any, **kwargs: Any) -> "Signature":
        """An immutable call: it ignores the previous step's result."""
        from jobconsole.canvas import Signature

        return Signature(self, args, kwargs, immutable=True)

    def map(self, it: Iterable[Any]) -> "xmap":
        """One job calling the task once per item of `it` (Celery's `celery.map`), returning the list."""
        from jobconsole.canvas import xmap

        return xmap(self, it)

    def starmap(self, it: Iterable[Sequence[Any]]) -> "xstarmap":
        """One job calling the task with each item of `it` as its arguments (Celery's `celery.starmap`)."""
        from jobconsole.canvas import xstarmap

        return xstarmap(self, it)

    def chunks(self, it: Iterable[Sequence[Any]], n: int) -> "chunks":
        """`it` split in starmaps of `n` items, run as a group (Celery's `chunks`)."""
        from jobconsole.canvas import chunks

        return chunks(self, it, n)

    def AsyncResult(self, task_id: str) -> AsyncResult[R]:  # noqa: N802 - Celery's name
        return AsyncResult(task_id)

    @property
    def request(self) -> Request:
        """The running job of a bound task (`bind=True`)."""
        request = _current_request.get()
        if request is None:
            raise RuntimeError(f"{self.name}: request is only known while a worker runs the task")
        return request

    def retry(
        self,
        args: Any = None,
        kwargs: Any = None,
        exc: BaseException | None = None,
        throw: bool = True,
        eta: datetime | None = None,
        countdown: float | None = None,
        max_retries: int | None = None,
        **options: Any,
    ) -> Retry:
        """Retry the running job (an attempt used) after `countdown` seconds, or the task's retry delay: raises
        the engine's Retry, or returns it with `throw=False`, so Celery's `raise self.retry(...)` reads the same.
        The job keeps its arguments; once its retries are used up it is a dead letter."""
        if args is not None or kwargs is not None or max_retries is not None or eta is not None:
            raise TypeError(f"{self.name}: retry() with new args, kwargs, eta or max_retries is not supported")
        message = f"retry requested: {exc!r}" if exc is not None else "retry requested"
        retry = Retry(delay=countdown, message=message)
        retry.__cause__ = exc
        if throw:
            raise retry
        return retry

    def _check_arguments(self, args: list[Any], kwargs: dict[str, Any]) -> None:
        """Celery's `typing=True`: arguments the function cannot take are refused before anything is sent."""
        if not self.options.typing:
            return
        try:
            if self.bind:
                self._signature.bind(None, *args, **kwargs)
            else:
                self._signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self.name}: {exc}") from None

    def __repr__(self) -> str:
        return f"<@task: {self.name}>"


def celery_priority(priority: int | None) -> int | None:
    """Celery's 0..9 (0 first, the Redis transport's convention) as ours (lower first): the same number."""
    if priority is None:
        return None
    if isinstance(priority, bool) or not isinstance(priority, int) or not MIN_PRIORITY <= priority <= MAX_PRIORITY:
        raise InvalidJob(f"priority must be an integer from {MIN_PRIORITY} to {MAX_PRIORITY}; got {priority!r}")
    return priority


def _register_engine(task: CeleryTask[Any, Any], options: TaskOptions) -> EngineTask:
    """The engine task running `task` on a worker, with `self.request` set while it runs."""

    def run(context: JobContext, args: list[Any], kwargs: dict[str, Any]) -> Any:
        request = Request(id=context.job_id, retries=context.attempt - 1, args=args, kwargs=kwargs,
                          delivery_info={"routing_key": context.queue})  # fmt: skip
        token = _current_request.set(request)
        try:
            return task.run(*args, **kwargs)
        finally:
            _current_request.reset(token)

    if options.retry_backoff:
        strategy = "exponential_jitter" if options.retry_jitter else "exponential"
        # Celery's retry_backoff=N is the first delay in seconds (True: 1 s); the base delay otherwise.
        delay = 1.0 if options.retry_backoff is True else float(options.retry_backoff)
    else:
        strategy, delay = "constant", float(options.default_retry_delay)
    return register_call_task(
        task.name, run, queue=options.queue, priority=celery_priority(options.priority) or 0,
        max_retries=UNLIMITED_RETRIES if options.max_retries is None else options.max_retries, retry_delay=delay,
        backoff_strategy=strategy, max_retry_delay=float(options.retry_backoff_max),
        retry_on=tuple(options.autoretry_for), timeout=options.time_limit,
    )  # fmt: skip


# Every Celery-style task by name (Celery's app.tasks), and those whose engine task waits for the settings.
_tasks: dict[str, CeleryTask[Any, Any]] = {}
_pending_tasks: dict[str, CeleryTask[Any, Any]] = {}


def _settings_readable() -> bool:
    """Whether Django's settings are loaded: False while they are being imported (proj/__init__.py imports
    proj/celery.py, which declares tasks), when reading them would import the settings module again."""
    from django.conf import settings

    return settings.configured


def _make_task(func: Callable[..., Any], app: "Celery | None", options: dict[str, Any]) -> CeleryTask[Any, Any]:
    parsed = TaskOptions.of({k: v for k, v in options.items() if k != "name"})
    name = options.get("name") or f"{func.__module__}.{func.__name__}"
    task: CeleryTask[Any, Any] = CeleryTask(func, name=name, options=parsed, app=app)
    _tasks[name] = task
    if _settings_readable():
        task._finalize()
    else:
        _pending_tasks[name] = task
    return task


def finalize() -> None:
    """Register the tasks declared before Django's settings could be read, and run pending autodiscovery:
    called when Django's apps are ready (jobconsole/apps.py)."""
    for app in list(_apps):
        app._discover_pending()
    for task in list(_pending_tasks.values()):
        task._finalize()


class _TaskDecorator:
    """`@shared_task` and `@app.task`, bare or with options: typed as Celery's (the celery-types stubs)."""

    def __init__(self, app: "Celery | None") -> None:
        self.app = app

    @overload
    def __call__[**P, R](self, fun: Callable[P, R]) -> CeleryTask[P, R]: ...
    @overload
    def __call__[**P, R](
        self,
        *,
        name: str | None = ...,
        bind: Literal[False] = ...,
        queue: str | None = ...,
        priority: int | None = ...,
        max_retries: int | None = ...,
        default_retry_delay: float = ...,
        autoretry_for: Sequence[type[BaseException]] = ...,
        retry_backoff: bool | int = ...,
        retry_backoff_max: float = ...,
        retry_jitter: bool = ...,
        time_limit: float | None = ...,
        **options: Any,
    ) -> Callable[[Callable[P, R]], CeleryTask[P, R]]: ...
    @overload
    def __call__[**P, R](
        self,
        *,
        name: str | None = ...,
        bind: Literal[True],
        queue: str | None = ...,
        priority: int | None = ...,
        max_retries: int | None = ...,
        default_retry_delay: float = ...,
        autoretry_for: Sequence[type[BaseException]] = ...,
        retry_backoff: bool | int = ...,
        retry_backoff_max: float = ...,
        retry_jitter: bool = ...,
        time_limit: float | None = ...,
        **options: Any,
    ) -> Callable[[Callable[Concatenate[CeleryTask[P, R], P], R]], CeleryTask[P, R]]: ...
    def __call__(self, fun: Callable[..., Any] | None = None, **options: Any) -> Any:
        """Register a function as a task with `delay`, `apply_async` and the canvas. Options: `name`, `bind`,
        `queue`, `priority`, `max_retries` (3), `default_retry_delay` (180 s), `autoretry_for`, `retry_backoff`,
        `retry_backoff_max` (600 s), `retry_jitter`, `time_limit`, `typing`; others as TaskOptions.of says."""
        TaskOptions.of({k: v for k, v in options.items() if k != "name"})  # refused options fail here, early

        def decorate(func: Callable[..., Any]) -> CeleryTask[..., Any]:
            return _make_task(func, self.app, options)

        return decorate(fun) if fun is not None else decorate


shared_task: _TaskDecorator = _TaskDecorator(None)


# --- The app ------------------------------------------------------------------------------------------------

# Celery settings (lower-case, without the namespace) this module honours, and their defaults.
_DEFAULTS: dict[str, Any] = {
    "task_always_eager": False,
    "task_eager_propagates": False,
    "task_default_queue": DEFAULT_QUEUE,
    "task_default_priority": None,
    "task_routes": None,
    "task_time_limit": None,
    "timezone": None,
    "enable_utc": True,
    "imports": (),
    "include": (),
}
# Settings whose values are what Jobconsole does anyway: read without a warning.
_HARMLESS: dict[str, Callable[[Any], bool]] = {
    "task_serializer": lambda v: v == "json",
    "result_serializer": lambda v: v == "json",
    "accept_content": lambda v: list(v) == ["json"],
    "result_accept_content": lambda v: v is None or list(v) == ["json"],
    "task_acks_late": lambda v: v is True,
    "task_track_started": lambda v: True,
    "task_ignore_result": lambda v: True,
    "task_store_errors_even_if_ignored": lambda v: True,
    "task_reject_on_worker_lost": lambda v: True,
    "task_create_missing_queues": lambda v: v is True,
    "result_extended": lambda v: True,
    "broker_connection_retry_on_startup": lambda v: True,
}
# Why the common ones are ignored; any other CELERY_* setting is ignored with a general reason.
_IGNORED_WHY: dict[str, str] = {
    "broker_url": "Jobconsole uses JOBCONSOLE['REDIS_URL']",
    "result_backend": "results are kept with their job in JOBCONSOLE['REDIS_URL']",
    "result_expires": "results expire with their job (JOBCONSOLE['RETENTION'])",
    "beat_schedule": "periodic jobs are JOBCONSOLE['PERIODIC'] (runscheduler)",
    "task_soft_time_limit": "Jobconsole has no soft time limit (task_time_limit interrupts the job)",
    "task_default_rate_limit": "Jobconsole has no per-task rate limit (concurrency groups: JOBCONSOLE['GROUPS'])",
    "task_acks_late": "jobs are always acknowledged when they end (acks_late=True)",
    "worker_concurrency": "use runworker --concurrency",
    "worker_prefetch_multiplier": "workers claim one job per free slot",
}
# Celery's older setting names, as they read after the namespace is taken off.
_OLD_NAMES = {
    "always_eager": "task_always_eager",
    "eager_propagates_exceptions": "task_eager_propagates",
    "default_queue": "task_default_queue",
    "routes": "task_routes",
    "task_eager_propagates_exceptions": "task_eager_propagates",
}


class Settings(dict[str, Any]):
    """`app.conf`: Celery's lower-case settings with attribute access. Values set here (`app.conf.update(...)`,
    `app.conf.task_always_eager = True`) win over the configuration source, which is read when a value is first
    read, not when it is named (`config_from_object` runs while Django's settings are still being imported)."""

    def __init__(self, app: "Celery") -> None:
        super().__init__()
        object.__setattr__(self, "_app", app)
        object.__setattr__(self, "_changes", {})
        object.__setattr__(self, "_loaded", False)

    def _load(self) -> None:
        if not self._loaded:
            object.__setattr__(self, "_loaded", True)
            super().clear()
            super().update(_DEFAULTS)
            super().update(self._app._read_source())
            super().update(self._changes)

    def __getitem__(self, key: str) -> Any:
        self._load()
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self._load()
        return super().get(key, default)

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None

    def __setitem__(self, key: str, value: Any) -> None:
        self._app._warn_ignored(key, value, f"app.conf.{key}")
        self._changes[key] = value
        if self._loaded:
            super().__setitem__(key, value)

    def __setattr__(self, key: str, value: Any) -> None:
        self[key] = value

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def reload(self) -> None:
        object.__setattr__(self, "_loaded", False)

    def __contains__(self, key: object) -> bool:
        self._load()
        return super().__contains__(key)

    def __iter__(self) -> Any:
        self._load()
        return super().__iter__()

    def __len__(self) -> int:
        self._load()
        return super().__len__()

    def __repr__(self) -> str:
        self._load()
        return f"<Settings: {dict(self)!r}>"


_AsyncResult = AsyncResult  # for the Celery class, whose AsyncResult method hides the class
_apps: list["Celery"] = []
_current: list["Celery"] = []


def current_app() -> "Celery":
    """The app made last with set_as_current (Celery's current_app); a default one if none was made."""
    if not _current:
        Celery("default", set_as_current=True)
    return _current[-1]


class Celery:
    """Celery's app object for a project's proj/celery.py: `config_from_object`, `autodiscover_tasks`, `task`,
    `send_task`, `AsyncResult`, `GroupResult`, `signature`, `conf`. Broker and result backend settings are
    Jobconsole's own (JOBCONSOLE['REDIS_URL']); what it cannot honour is logged once."""

    def __init__(
        self,
        main: str | None = None,
        *,
        broker: str | None = None,
        backend: str | None = None,
        include: Sequence[str] | None = None,
        config_source: Any = None,
        namespace: str | None = None,
        set_as_current: bool = True,
        **options: Any,  # Celery's loader, amqp, fixups, task_cls...: nothing here uses them
    ) -> None:
        self.main = main
        self._source: Any = config_source
        self._namespace = namespace
        self._pending_discovery: list[tuple[Any, str]] = []
        self._warned: set[str] = set()
        self.conf = Settings(self)
        if broker is not None:
            self.conf.broker_url = broker
        if backend is not None:
            self.conf.result_backend = backend
        if include:
            self.conf.include = tuple(include)
        self.task = _TaskDecorator(self)
        # Celery's app signals, connected to for beat's add_periodic_task: their receivers are never called.
        self.on_configure = self.on_after_configure = self.on_after_finalize = _Signal(self)
        _apps.append(self)
        if set_as_current:
            _current.append(self)

    # Configuration

    def config_from_object(self, obj: Any, silent: bool = False, force: bool = False,
                           namespace: str | None = None) -> None:  # fmt: skip
        """Read settings from `obj`: a module path ("proj.celeryconfig"), "module:attribute"
        ("django.conf:settings"), a mapping or an object, with `namespace` ("CELERY": CELERY_TASK_ROUTES is
        task_routes). Read when a setting is first needed."""
        self._source, self._namespace = obj, namespace
        self._silent = silent
        self.conf.reload()

    def _read_source(self) -> dict[str, Any]:
        """The source's settings, lower-case, without the namespace; logs once each one not honoured."""
        source = self._source
        if source is None:
            return {}
        if isinstance(source, str):
            module, _, attribute = source.partition(":")
            try:
                source = import_module(module)
            except ImportError:
                if getattr(self, "_silent", False):
                    return {}
                raise
            if attribute:
                source = getattr(source, attribute)
        prefix = f"{self._namespace}_" if self._namespace else ""
        names = list(source) if isinstance(source, Mapping) else [k for k in dir(source) if k.startswith(prefix)]
        items = {k: source[k] if isinstance(source, Mapping) else getattr(source, k) for k in names}
        found: dict[str, Any] = {}
        for key, value in items.items():
            if not key.startswith(prefix) or key.startswith("_"):
                continue
            if not prefix and not key.islower():  # a module of lower-case settings (celeryconfig.py)
                continue
            name = key[len(prefix) :].lower()
            found[_OLD_NAMES.get(name, name)] = value
        for name, value in found.items():
            self._warn_ignored(name, value, f"{prefix}{name.upper()}" if prefix else name)
        return found

    def _warn_ignored(self, name: str, value: Any, shown: str) -> None:
        if name in _DEFAULTS or name in self._warned:
            return
        harmless = _HARMLESS.get(name)
        if harmless is not None and harmless(value):
            return
        self._warned.add(name)
        why = _IGNORED_WHY.get(name, "Jobconsole does not use it")
        log.warning("Celery setting %s is ignored: %s", shown, why)

    @property
    def timezone(self) -> tzinfo:
        name = self.conf.timezone
        return ZoneInfo(name) if name else UTC

    def _aware(self, eta: datetime | None) -> datetime | None:
        """A naive eta in the app's timezone, as Celery reads it."""
        return eta.replace(tzinfo=self.timezone) if eta is not None and eta.tzinfo is None else eta

    def _routes(self) -> list[Any]:
        routes = self.conf.task_routes
        if routes is None:
            return []
        return list(routes) if isinstance(routes, list | tuple) else [routes]

    def _static_route(self, name: str) -> str | None:
        """The queue task_routes gives `name` by pattern (exact, glob, or compiled regex), if any."""
        for route in self._routes():
            if not isinstance(route, Mapping):
                continue
            for pattern, target in route.items():
                matched = (pattern.match(name) is not None if isinstance(pattern, re.Pattern)
                           else fnmatch.fnmatchcase(name, pattern))  # fmt: skip
                if matched:
                    return _queue_of(target)
        return None

    def _dynamic_route(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> str | None:
        """The queue a router function in task_routes gives this call, if any."""
        for route in self._routes():
            if callable(route) and not isinstance(route, Mapping):
                target = route(name, args, kwargs, {}, task=_tasks.get(name))
                if target:
                    return _queue_of(target)
        return None

    # Tasks

    @property
    def tasks(self) -> Mapping[str, CeleryTask[Any, Any]]:
        return _tasks

    def autodiscover_tasks(
        self, packages: Iterable[str] | Callable[[], Iterable[str]] | None = None, related_name: str = "tasks",
        force: bool = False,
    ) -> None:  # fmt: skip
        """Import each installed Django app's `tasks` module (or each of `packages`'), as Celery does with Django:
        at once when Django's apps are ready, else when they become ready."""
        self._pending_discovery.append((packages, related_name))
        from django.apps import apps

        if force or apps.ready:
            self._discover_pending()

    def _discover_pending(self) -> None:
        from django.utils.module_loading import autodiscover_modules

        pending, self._pending_discovery = self._pending_discovery, []
        for module in [*self.conf.imports, *self.conf.include]:
            import_module(module)
        for packages, related_name in pending:
            if packages is None:
                autodiscover_modules(related_name)
                continue
            for package in packages() if callable(packages) else packages:
                _import_related(package, related_name)

    def send_task(
        self,
        name: str,
        args: Sequence[Any] | None = None,
        kwargs: dict[str, Any] | None = None,
        countdown: float | None = None,
        eta: datetime | None = None,
        task_id: str | None = None,
        *,
        queue: str | None = None,
        priority: int | None = None,
        **options: Any,
    ) -> AsyncResult[Any]:
        """Enqueue a job of the task `name`, registered here or not (a producer without the task's code needs
        JOBCONSOLE['STRICT_ENQUEUE'] off). Its queue: `queue`, task_routes, the task's, task_default_queue."""
        unsupported = sorted(n for n, v in options.items() if n not in _NO_OP_OPTIONS and v is not None)
        if unsupported:
            raise TypeError(f"send_task options not supported by Jobconsole: {', '.join(unsupported)}")
        task = _tasks.get(name)
        args, kwargs = list(args or ()), dict(kwargs or {})
        queue = (queue or self._dynamic_route(name, args, kwargs) or self._static_route(name)
                 or (task.queue if task else self.conf.task_default_queue))  # fmt: skip
        if priority is None and task is not None:
            priority = task.priority
        job_id = transactional.enqueue(
            name, call_params(args, kwargs), id=task_id and job_id_of(task_id), queue=queue,
            priority=celery_priority(priority), delay=countdown, run_at=self._aware(eta),
        )  # fmt: skip
        return AsyncResult(task_id or job_id)

    def AsyncResult(self, task_id: str, **kwargs: Any) -> AsyncResult[Any]:  # noqa: N802 - Celery's name
        return AsyncResult(task_id, **kwargs)

    def GroupResult(self, id: str, results: Sequence[_AsyncResult[Any]] | None = None) -> Any:  # noqa: N802
        from jobconsole.canvas import GroupResult

        return GroupResult(id, list(results or ()))

    def signature(self, name: Any, args: Sequence[Any] | None = None, kwargs: dict[str, Any] | None = None,
                  **options: Any) -> "Signature":  # fmt: skip
        from jobconsole.canvas import signature

        return signature(name, args, kwargs, **options)

    def finalize(self, auto: bool = False) -> None:
        finalize()

    def add_periodic_task(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("periodic jobs are JOBCONSOLE['PERIODIC'] (or the console's schedules), run by runscheduler; "
                        "Celery's add_periodic_task and beat are not supported")  # fmt: skip

    def set_current(self) -> None:
        _current.append(self)

    def set_default(self) -> None:
        self.set_current()

    def __repr__(self) -> str:
        return f"<Celery {self.main}>"


class _Signal:
    """Celery's `app.on_after_configure` & co.: `connect` takes a receiver (as a decorator too) and logs that it
    will not be called, since what they set up there (periodic tasks) is JOBCONSOLE['PERIODIC'] here."""

    def __init__(self, app: Celery) -> None:
        self.app = app

    def connect(self, receiver: Callable[..., Any] | None = None, **options: Any) -> Any:
        def connected(func: Callable[..., Any]) -> Callable[..., Any]:
            log.warning("Celery app signal receiver %s.%s is not called: periodic jobs are JOBCONSOLE['PERIODIC'] "
                        "(runscheduler)", func.__module__, func.__qualname__)  # fmt: skip
            return func

        return connected(receiver) if receiver is not None else connected


def _import_related(package: str, related_name: str) -> None:
    """`package.related_name` if there is one, as Celery finds it: an AppConfig path ("shop.apps.ShopConfig")
    looks in its package's parent; a module that is missing is skipped, a missing import inside it raises."""
    try:
        import_module(package)
    except ModuleNotFoundError:
        package = package.rpartition(".")[0]
        if not package:
            raise
    module = f"{package}.{related_name}"
    try:
        import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise


def _queue_of(target: Any) -> str | None:
    """A route's target: a queue name, or Celery's {"queue": name, ...}."""
    if isinstance(target, str):
        return target
    if isinstance(target, Mapping):
        queue = target.get("queue")
        return str(queue) if queue else None
    return None


# Celery's canvas names, so that `from jobconsole.celery import chain, group, chord` reads as Celery's. Imported
# here so that its built-in tasks (celery.map, celery.starmap, celery.errback) are registered wherever tasks are;
# looked up when asked for, since jobconsole.canvas imports this module (either may be imported first).
import jobconsole.canvas  # noqa: E402

if TYPE_CHECKING:
    from jobconsole.canvas import (
        GroupResult,
        Signature,
        chain,
        chord,
        chunks,
        group,
        maybe_signature,
        signature,
        xmap,
        xstarmap,
    )

_CANVAS_NAMES = frozenset(
    {"GroupResult", "Signature", "chain", "chord", "chunks", "group", "maybe_signature", "signature", "xmap",
     "xstarmap", "NotRegistered", "push_down"}
)  # fmt: skip


def __getattr__(name: str) -> Any:
    if name in _CANVAS_NAMES:
        return getattr(jobconsole.canvas, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "FAILURE", "PENDING", "RETRY", "REVOKED", "STARTED", "SUCCESS",
    "AsyncResult", "Celery", "CeleryTask", "ChordError", "EagerResult", "GroupResult", "Request", "Settings",
    "Signature", "TaskError", "TaskOptions", "TaskRevokedError", "celery_priority", "chain", "chord", "chunks",
    "current_app", "group", "job_id_of", "maybe_signature", "shared_task", "signature", "xmap", "xstarmap",
]  # fmt: skip
