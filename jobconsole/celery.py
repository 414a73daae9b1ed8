"""Celery's calling convention on Jobconsole tasks, so moving a Celery task over is a change of import:

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
- Options that need Celery's broker (`link`, `link_error`, `expires`, `exchange`, `routing_key`, `producer`,
  `shadow`, per-call time limits...) raise TypeError instead of being dropped silently.
"""

import inspect
import sys
import time
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Concatenate, Literal, cast, overload

from jobconsole import transactional
from jobconsole.calls import call_params, register_call_task
from jobconsole.core import JobContext, JobNotFound, JobState, Retry
from jobconsole.core.errors import InvalidJob
from jobconsole.core.job import Job
from jobconsole.core.states import STATES
from jobconsole.core.tasks import Task as EngineTask
from jobconsole.engine import get_client

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


@dataclass(frozen=True, slots=True)
class Request:
    """What a bound task sees of its running job as `self.request` (a subset of Celery's)."""

    id: str
    retries: int  # attempts before this one
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    delivery_info: dict[str, Any] = field(default_factory=dict)


_current_request: ContextVar[Request | None] = ContextVar("jobconsole_celery_request", default=None)


class AsyncResult[R]:
    """A job by id, read from Redis when asked (Celery's AsyncResult). An unknown id is PENDING, as in Celery."""

    def __init__(self, id: str) -> None:  # Celery's name
        self.id = id

    @property
    def task_id(self) -> str:
        return self.id

    def _job(self) -> Job | None:
        try:
            return get_client().get(self.id)
        except (JobNotFound, InvalidJob):
            return None

    @property
    def state(self) -> str:
        job = self._job()
        return STATE_OF_JOB[job.state] if job is not None else PENDING

    status = state

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

    info = result

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

    wait = get

    def revoke(
        self, connection: Any = None, terminate: bool = False, signal: str | None = None, **ignored: Any
    ) -> None:
        """Cancel the job: a waiting one at once, a running one is asked to stop (`context.cancel_requested`)."""
        get_client().cancel(self.id)

    def forget(self) -> None:
        """Nothing to do: results expire with their job (RETENTION)."""

    def __repr__(self) -> str:
        return f"<AsyncResult: {self.id}>"


def _exception(job: Job) -> BaseException:
    """The exception a failed job ended with, made again when its class is in a module this process has imported
    already (a class path read from Redis never imports anything) and takes a message."""
    if job.state is JobState.CANCELLED:
        return TaskRevokedError(f"job {job.id} was cancelled")
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


class CeleryTask[**P, R]:
    """A registered task with Celery's calling convention; calling it runs the function here, now."""

    def __init__(
        self, func: Callable[..., R], *, name: str, queue: str, priority: int | None, bind: bool, engine: EngineTask
    ) -> None:
        self.func = func
        self.name = name
        self.queue = queue
        self.priority = priority
        self.bind = bind
        self.engine_task = engine
        self._signature = inspect.signature(func)
        self.__doc__ = func.__doc__
        self.__name__ = func.__name__
        self.__module__ = func.__module__

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
        """Enqueue a job. `countdown` (seconds) or `eta` (a timezone-aware datetime) delay it; `queue` and
        `priority` (0..9, 0 first) override the task's. Raises TypeError for arguments the function does not take
        or options Jobconsole cannot honour, ValueError (InvalidJob) for bad values. Inside a database
        transaction, as JOBCONSOLE["IN_TRANSACTION"] (or `mode`) says: by default, when it commits."""
        unsupported = sorted(
            [n for n, v in (("producer", producer), ("link", link), ("link_error", link_error), ("shadow", shadow))
             if v is not None] + [n for n, v in options.items() if n not in _NO_OP_OPTIONS and v is not None]
        )  # fmt: skip
        if unsupported:
            raise TypeError(f"{self.name}: apply_async options not supported by Jobconsole: {', '.join(unsupported)}")
        args, kwargs = list(args or ()), dict(kwargs or {})
        self._check_arguments(args, kwargs)
        if countdown is not None and eta is not None:
            raise TypeError(f"{self.name}: give countdown or eta, not both")
        job_id = transactional.enqueue(
            self.name, call_params(args, kwargs), mode=mode, id=task_id, queue=queue or self.queue,
            priority=celery_priority(priority if priority is not None else self.priority),
            delay=countdown, run_at=eta,
        )  # fmt: skip
        return AsyncResult(job_id)

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


def _register[**P, R](
    func: Callable[..., R],
    *,
    name: str | None,
    bind: bool,
    queue: str,
    priority: int | None,
    max_retries: int | None,
    default_retry_delay: float,
    autoretry_for: Sequence[type[BaseException]],
    retry_backoff: bool | int,
    retry_backoff_max: float,
    retry_jitter: bool,
    time_limit: float | None,
) -> CeleryTask[P, R]:
    task_name = name or f"{func.__module__}.{func.__name__}"
    holder: list[CeleryTask[P, R]] = []  # the task object, made after its engine task

    def run(context: JobContext, args: list[Any], kwargs: dict[str, Any]) -> Any:
        request = Request(id=context.job_id, retries=context.attempt - 1, args=args, kwargs=kwargs,
                          delivery_info={"routing_key": context.queue})  # fmt: skip
        token = _current_request.set(request)
        try:
            return holder[0].run(*args, **kwargs)
        finally:
            _current_request.reset(token)

    if retry_backoff:
        strategy = "exponential_jitter" if retry_jitter else "exponential"
        # Celery's retry_backoff=N is the first delay in seconds (True: 1 s); the base delay otherwise.
        delay = 1.0 if retry_backoff is True else float(retry_backoff)
    else:
        strategy, delay = "constant", float(default_retry_delay)
    engine = register_call_task(
        task_name, run, queue=queue, priority=celery_priority(priority) or 0,
        max_retries=UNLIMITED_RETRIES if max_retries is None else max_retries, retry_delay=delay,
        backoff_strategy=strategy, max_retry_delay=float(retry_backoff_max), retry_on=tuple(autoretry_for),
        timeout=time_limit,
    )  # fmt: skip
    celery_task: CeleryTask[P, R] = CeleryTask(func, name=task_name, queue=queue, priority=priority, bind=bind,
                                               engine=engine)  # fmt: skip
    holder.append(celery_task)
    return celery_task


@overload
def shared_task[**P, R](fun: Callable[P, R]) -> CeleryTask[P, R]: ...
@overload
def shared_task[**P, R](
    *,
    name: str | None = ...,
    bind: Literal[False] = ...,
    queue: str = ...,
    priority: int | None = ...,
    max_retries: int | None = ...,
    default_retry_delay: float = ...,
    autoretry_for: Sequence[type[BaseException]] = ...,
    retry_backoff: bool | int = ...,
    retry_backoff_max: float = ...,
    retry_jitter: bool = ...,
    time_limit: float | None = ...,
    **ignored: Any,
) -> Callable[[Callable[P, R]], CeleryTask[P, R]]: ...
@overload
def shared_task[**P, R](
    *,
    name: str | None = ...,
    bind: Literal[True],
    queue: str = ...,
    priority: int | None = ...,
    max_retries: int | None = ...,
    default_retry_delay: float = ...,
    autoretry_for: Sequence[type[BaseException]] = ...,
    retry_backoff: bool | int = ...,
    retry_backoff_max: float = ...,
    retry_jitter: bool = ...,
    time_limit: float | None = ...,
    **ignored: Any,
) -> Callable[[Callable[Concatenate[CeleryTask[P, R], P], R]], CeleryTask[P, R]]: ...
def shared_task(
    fun: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    bind: bool = False,
    queue: str = DEFAULT_QUEUE,
    priority: int | None = None,
    max_retries: int | None = 3,
    default_retry_delay: float = 180,
    autoretry_for: Sequence[type[BaseException]] = (),
    retry_backoff: bool | int = False,
    retry_backoff_max: float = 600,
    retry_jitter: bool = True,
    time_limit: float | None = None,
    **ignored: Any,  # Celery's acks_late, serializer, track_started...: what Jobconsole does anyway or not at all
) -> Any:
    """Celery's `shared_task`: register a function as a task with `delay` and `apply_async`."""

    def decorate(func: Callable[..., Any]) -> CeleryTask[..., Any]:
        return _register(
            func, name=name, bind=bind, queue=queue, priority=priority, max_retries=max_retries,
            default_retry_delay=default_retry_delay, autoretry_for=autoretry_for, retry_backoff=retry_backoff,
            retry_backoff_max=retry_backoff_max, retry_jitter=retry_jitter, time_limit=time_limit,
        )  # fmt: skip

    return decorate(fun) if fun is not None else decorate


class Celery:
    """Stands in for a Celery app object in a module that used `app.task`: `app = Celery("proj")`."""

    def __init__(self, main: str | None = None, **ignored: Any) -> None:
        self.main = main

    task = staticmethod(shared_task)

    def AsyncResult(self, task_id: str) -> AsyncResult[Any]:  # noqa: N802 - Celery's name
        return AsyncResult(task_id)
