"""A backend for Django's task framework (`django.tasks`): `TASKS = {"default": {"BACKEND":
"jobconsole.django_backend.JobconsoleBackend"}}` makes every `@task` function enqueue into Jobconsole.

A Django Task becomes the engine task named by its module path (`myapp.tasks.send_email`) when it is made, that
is when its module is imported: `@task` validates it against this backend, and validating registers it. Workers
import every installed app's `tasks.py` (jobconsole/apps.py), so they know every such task without any
registration of Jobconsole's own. Its jobs carry `{"args": [...], "kwargs": {...}}` (jobconsole/calls.py) and
show in the console like any job.

Mapping: Django's priority (-100..100, higher first) is stored negated (ours: lower first, -1000..1000);
`run_after` is the job's run-at; `queue_name` is the queue. A job's result id is its job id.

Inside a database transaction, an enqueue happens when it commits and never if it rolls back, unless
JOBCONSOLE["IN_TRANSACTION"] says otherwise ("outbox", "now": jobconsole/transactional.py).

OPTIONS are options of the engine's `@task` given to every Django task of this backend (`max_retries`,
`retry_delay`, `timeout`, `visibility_timeout`, ...); `max_retries` defaults to 0, since a Django task knows
nothing of retries: its first exception fails it (a dead letter an operator can retry from the console).
"""

from __future__ import annotations  # django.tasks' Task and TaskResult are generic only in the stubs

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

from django.tasks import Task, TaskContext, TaskResult, TaskResultStatus
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import TaskError
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.tasks.signals import task_enqueued, task_finished, task_started
from django.utils import timezone
from django.utils.json import normalize_json

from jobconsole import transactional
from jobconsole.calls import call_params, register_call_task
from jobconsole.core import Job, JobContext, JobNotFound, JobState
from jobconsole.core.errors import InvalidJob
from jobconsole.core.execution import describe
from jobconsole.core.states import STATES
from jobconsole.engine import get_client

type AnyTask = Task[..., Any]
type AnyResult = TaskResult[..., Any]

DEFAULT_TASK_OPTIONS: dict[str, Any] = {"max_retries": 0}

# Django's status of each state: the state table's `django` (core/states.py).
STATUS_OF_STATE = {state: TaskResultStatus[info.django] for state, info in STATES.items()}

# Attempts that ran on a worker (Django counts attempts as worker ids); the others were given back unstarted.
_NOT_RUN = {"requeued", "dropped"}

# Django Tasks made with this backend, by module path: what a worker runs and what get_result answers with.
_django_tasks: dict[str, AnyTask] = {}


def engine_priority(django_priority: int) -> int:
    """Django's priority (higher first) as ours (lower first): negated, so the order is kept exactly."""
    return -django_priority


def django_priority(engine_priority: int) -> int:
    """Ours as Django's, clamped into Django's range (an operator may have set any of ours)."""
    return max(-100, min(100, -engine_priority))


class JobconsoleBackend(BaseTaskBackend):
    supports_defer = True
    supports_async_task = True  # Task.call runs a coroutine function to its end on the task thread
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self.task_options = {**DEFAULT_TASK_OPTIONS, **self.options}

    def validate_task(self, task: AnyTask) -> None:
        super().validate_task(task)
        self._register(task)  # refuses a module path that cannot name an engine task

    def _register(self, task: AnyTask) -> None:
        """Make the task runnable here: the engine task of its module path calls it. The first one made is kept:
        the `@task` itself, before any `.using()` copy (each enqueue validates its task again)."""
        if task.module_path in _django_tasks:
            return
        backend_class, alias = type(self), self.alias

        def run(context: JobContext, args: list[Any], kwargs: dict[str, Any]) -> Any:
            return run_django_task(task, backend_class, alias, context, args, kwargs)

        try:
            register_call_task(task.module_path, run, queue=task.queue_name, **self.task_options)
        except (ValueError, TypeError) as exc:
            raise InvalidTask(f"{task.module_path}: {exc}") from exc
        _django_tasks[task.module_path] = task

    def enqueue[**P, R](self, task: Task[P, R], args: Sequence[Any], kwargs: dict[str, Any]) -> TaskResult[P, R]:
        self.validate_task(task)
        # What a worker will receive, as JSON (Django's TaskResult normalises them the same way).
        args, kwargs = cast(list[Any], normalize_json(list(args))), cast(dict[str, Any], normalize_json(kwargs))
        run_after = task.run_after
        if run_after is not None and timezone.is_naive(run_after):
            run_after = timezone.make_aware(run_after)
        try:  # inside a transaction, as JOBCONSOLE["IN_TRANSACTION"] says (by default when it commits)
            job_id = transactional.enqueue(
                task.module_path, call_params(args, kwargs), queue=task.queue_name,
                priority=engine_priority(task.priority), run_at=run_after,
            )  # fmt: skip
        except InvalidJob as exc:
            raise InvalidTask(str(exc)) from exc
        result: TaskResult[P, R] = TaskResult(
            task=task, id=job_id, status=TaskResultStatus.READY, enqueued_at=timezone.now(), started_at=None,
            finished_at=None, last_attempted_at=None, args=args, kwargs=kwargs, backend=self.alias, errors=[],
            worker_ids=[],
        )  # fmt: skip
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> AnyResult:
        try:
            job = get_client().get(result_id)
        except (JobNotFound, InvalidJob):
            raise TaskResultDoesNotExist(result_id) from None
        task = find_task(job.task)
        if task is None:  # a job of an engine task, or of a Django task whose module this process never imported
            raise TaskResultDoesNotExist(result_id)
        return task_result(task, job, self.alias)


def find_task(module_path: str) -> AnyTask | None:
    """The Django Task of a module path, made in this process (its module imported: an app's tasks.py always
    is, and `Task.get_result` has its task at hand). A task name read from Redis never imports anything."""
    return _django_tasks.get(module_path)


def task_result(task: AnyTask, job: Job, alias: str) -> AnyResult:
    """A job read back as Django's TaskResult."""
    params = job.params
    args, kwargs = params.get("args"), params.get("kwargs")
    ran = [attempt for attempt in job.history if attempt.outcome not in _NOT_RUN]
    worker_ids = [attempt.worker for attempt in ran]
    if job.state is JobState.RUNNING and job.worker:
        worker_ids.append(job.worker)  # the attempt under way has no entry yet
    errors = [
        TaskError(exception_class_path=_class_path(attempt.error_class), traceback=attempt.traceback)
        for attempt in ran
        if attempt.outcome != "completed" and attempt.error_class
    ]
    last_attempted_at = max((a.started_at for a in ran if a.started_at), default=None)
    if job.state is JobState.RUNNING:
        last_attempted_at = job.started_at
    first_started = min((a.started_at for a in ran if a.started_at), default=job.started_at)
    status = STATUS_OF_STATE[job.state]
    result: AnyResult = TaskResult(
        task=_as_enqueued(task, job),
        id=job.id,
        status=status,
        enqueued_at=job.enqueued_at,
        started_at=first_started,
        finished_at=job.finished_at if status in (TaskResultStatus.SUCCESSFUL, TaskResultStatus.FAILED) else None,
        last_attempted_at=last_attempted_at,
        args=args if isinstance(args, list) else [],
        kwargs=kwargs if isinstance(kwargs, dict) else {},
        backend=alias,
        errors=errors,
        worker_ids=worker_ids,
    )
    if status == TaskResultStatus.SUCCESSFUL:
        object.__setattr__(result, "_return_value", job.result)
    return result


def _as_enqueued(task: AnyTask, job: Job) -> AnyTask:
    """The task with the priority and queue its job has (an operator may have changed the priority)."""
    priority, queue = django_priority(job.priority), job.queue
    if task.priority == priority and task.queue_name == queue:
        return task
    try:
        return replace(task, priority=priority, queue_name=queue)  # validated again, like Task.using
    except InvalidTask:  # a queue the backend does not list (the job was moved): the task as declared
        return task


def _class_path(error_class: str) -> str:
    """Our attempts name builtin exceptions without their module; Django's TaskError imports the path."""
    return error_class if "." in error_class else f"builtins.{error_class}"


def run_django_task(
    task: AnyTask,
    backend_class: type[JobconsoleBackend],
    alias: str,
    context: JobContext,
    args: list[Any],
    kwargs: dict[str, Any],
) -> Any:
    """The engine task of a Django Task, on a worker: signals around the call, exceptions raised on to the
    engine (which records them in the attempt, with the traceback, and retries or dead-letters the job)."""
    running = _running_result(task, alias, context, args, kwargs)
    task_started.send(sender=backend_class, task_result=running)
    try:
        if task.takes_context:
            value = task.call(TaskContext(task_result=running), *args, **kwargs)
        else:
            value = task.call(*args, **kwargs)
        value = normalize_json(value)
    except BaseException as exc:
        error = describe(exc)
        running.errors.append(
            TaskError(exception_class_path=_class_path(error["error_class"]), traceback=error["traceback"])
        )
        _finish(running, TaskResultStatus.FAILED)
        task_finished.send(sender=backend_class, task_result=running)
        raise
    object.__setattr__(running, "_return_value", value)
    _finish(running, TaskResultStatus.SUCCESSFUL)
    task_finished.send(sender=backend_class, task_result=running)
    return value


def _running_result(
    task: AnyTask, alias: str, context: JobContext, args: list[Any], kwargs: dict[str, Any]
) -> AnyResult:
    """The TaskResult a running task and the signals see: read from Redis (times, earlier attempts, this
    worker's id), RUNNING."""
    try:
        job = get_client().get(context.job_id, context.queue)
    except JobNotFound:
        job = None
    if job is not None:
        result = task_result(task, job, alias)
        object.__setattr__(result, "status", TaskResultStatus.RUNNING)
        return result
    now = timezone.now()
    return TaskResult(
        task=task, id=context.job_id, status=TaskResultStatus.RUNNING, enqueued_at=None, started_at=now,
        finished_at=None, last_attempted_at=now, args=args, kwargs=kwargs, backend=alias, errors=[], worker_ids=[],
    )  # fmt: skip


def _finish(result: AnyResult, status: TaskResultStatus) -> None:
    object.__setattr__(result, "status", status)
    object.__setattr__(result, "finished_at", timezone.now())


def served_queues() -> set[str]:
    """The queues Django tasks may be sent to through a Jobconsole backend (its QUEUES setting), which
    `runworker` serves by default besides every registered task's queue: a `.using(queue_name=...)` job
    goes to a queue no task is registered on."""
    from django.tasks import task_backends

    return {q for backend in task_backends.all() if isinstance(backend, JobconsoleBackend) for q in backend.queues}
