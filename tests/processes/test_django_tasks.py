"""Django's task framework and Celery's calling convention on Jobconsole, with a real `manage.py runworker`:
Django `@task` functions (tests/django_tasks.py) enqueued here, run by the worker subprocess and read back with
`get_result`/`refresh`; run_after and priority; the signals (enqueued here, started and finished in the worker,
whose receivers write a ledger); Celery-style `delay`/`apply_async` and `AsyncResult`."""

from __future__ import annotations  # django.tasks' Task and TaskResult are generic only in the stubs

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.tasks import TaskResult, TaskResultStatus
from django.tasks.exceptions import TaskResultDoesNotExist
from django.tasks.signals import task_enqueued
from django.utils import timezone

from jobconsole.celery import FAILURE, PENDING, REVOKED, SUCCESS
from jobconsole.core import Client, JobState
from jobconsole.django_backend import JobconsoleBackend
from tests import django_tasks
from tests.processes.test_worker_processes import Processes, wait_for
from tests.tasks import read_ledger

pytestmark = pytest.mark.slow

TASK_MODULES = "jobconsole.examples,tests.tasks,tests.django_tasks"


@pytest.fixture
def client(settings: Any, r: Any, redis_url: str) -> Iterator[Client]:
    """The Django layer (and so the backend) pointed at the test Redis."""
    from jobconsole.engine import get_client

    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "REDIS_URL": redis_url}
    yield get_client()


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Processes]:
    processes = Processes(tmp_path)
    try:
        yield processes
    finally:
        processes.kill_all()


def start_worker(procs: Processes, redis_url: str, ledger: Path, queues: str, name: str = "w1") -> None:
    procs.worker(
        redis_url, queues, name, "--concurrency", "1", "--no-system-worker",
        JOBCONSOLE_TASK_MODULES=TASK_MODULES, DJANGO_TASKS_LEDGER=str(ledger),
    )  # fmt: skip


def finished(result: TaskResult[..., Any]) -> bool:
    result.refresh()
    return result.is_finished


def test_django_tasks_run_by_runworker_and_read_back(
    client: Client, procs: Processes, redis_url: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    enqueued: list[TaskResult[..., Any]] = []

    def on_enqueued(sender: type, task_result: TaskResult[..., Any], **kwargs: Any) -> None:
        enqueued.append(task_result)

    task_enqueued.connect(on_enqueued)
    try:
        added = django_tasks.add.enqueue(2, y=3)
        introspected = django_tasks.introspect.enqueue("ab", repeat=2)
        exploded = django_tasks.explode.enqueue("boom")
        added_async = django_tasks.add_async.enqueue(4, 5)
    finally:
        task_enqueued.disconnect(on_enqueued)
    assert [r.id for r in enqueued] == [added.id, introspected.id, exploded.id, added_async.id]
    assert added.status == TaskResultStatus.READY and added.backend == "default"
    # A job like any other: its task is the module path, its params the call's arguments.
    job = client.get(added.id)
    assert (job.task, job.queue, job.params) == ("tests.django_tasks.add", "default", {"args": [2], "kwargs": {"y": 3}})

    start_worker(procs, redis_url, ledger, "default")
    for result in (added, introspected, exploded, added_async):
        wait_for(lambda result=result: finished(result), 30, f"{result.task.name} to finish", *procs.started)

    assert added.status == TaskResultStatus.SUCCESSFUL and added.return_value == 5
    assert added.worker_ids == ["w1"] and added.attempts == 1 and added.errors == []
    assert added.enqueued_at and added.started_at and added.finished_at
    assert added.enqueued_at <= added.started_at <= added.finished_at

    assert added_async.return_value == 9  # an async def task, run to its end on a task thread

    fresh = django_tasks.introspect.get_result(introspected.id)
    assert fresh.status == TaskResultStatus.SUCCESSFUL
    assert fresh.return_value == {"tag": "abab", "id": introspected.id, "attempt": 1, "worker_ids": ["w1"]}
    assert (fresh.args, fresh.kwargs) == (["ab"], {"repeat": 2})

    assert exploded.status == TaskResultStatus.FAILED
    [error] = exploded.errors
    assert error.exception_class is ValueError and error.exception_class_path == "builtins.ValueError"
    assert "ValueError: boom" in error.traceback and "in explode" in error.traceback
    assert exploded.worker_ids == ["w1"] and exploded.attempts == 1  # no retries unless OPTIONS ask for them
    with pytest.raises(ValueError, match="Task failed"):
        _ = exploded.return_value
    assert client.get(exploded.id).state is JobState.DEAD  # a dead letter an operator can retry

    lines = read_ledger(ledger)
    worker_pid = {line[4] for line in lines if line[0] == "started"}
    assert len(worker_pid) == 1  # every signal was sent in the worker
    assert ["started", added.id, "RUNNING", "tests.django_tasks.add"] in [line[:4] for line in lines]
    assert ["finished", added.id, "SUCCESSFUL", "0"] in [line[:4] for line in lines]
    assert ["finished", exploded.id, "FAILED", "1"] in [line[:4] for line in lines]

    with pytest.raises(TaskResultDoesNotExist):
        JobconsoleBackend("default", {}).get_result("01J00000000000000000000000")


def test_run_after_and_priority(client: Client, procs: Processes, redis_url: str, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    run_after = timezone.now() + timedelta(seconds=2)
    deferred = django_tasks.mark.using(run_after=run_after, priority=100).enqueue("deferred")
    low = django_tasks.mark.using(priority=-50).enqueue("low")
    normal = django_tasks.mark.enqueue("normal")
    high = django_tasks.mark.using(priority=80).enqueue("high")
    # Django's priority, higher first, is ours negated (lower first); run_after is the job's run-at.
    assert [client.get(r.id).priority for r in (deferred, low, normal, high)] == [-100, 50, 0, -80]
    assert client.get(deferred.id).state is JobState.SCHEDULED
    assert django_tasks.mark.get_result(deferred.id).status == TaskResultStatus.READY

    start_worker(procs, redis_url, ledger, "default")
    # All four: the deferred one may run first (below), so its end says nothing of the others'.
    wait_for(lambda: all(finished(r) for r in (deferred, low, normal, high)), 30, "the four jobs", *procs.started)
    ran = [line[1] for line in read_ledger(ledger) if line[0] == "ran"]
    # The ready ones by priority; the deferred one (highest priority) whenever its time came: before them too when
    # the worker took longer than its delay to start on a busy machine, never before its run_after (below).
    assert sorted(ran) == ["deferred", "high", "low", "normal"]
    assert [label for label in ran if label != "deferred"] == ["high", "normal", "low"]
    assert deferred.started_at is not None and deferred.started_at >= run_after - timedelta(milliseconds=5)
    assert deferred.task.priority == 100 and deferred.return_value == "deferred"


def test_celery_style_calls(client: Client, procs: Processes, redis_url: str, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    # Checked before anything is sent, as Celery's typing=True does.
    with pytest.raises(TypeError, match="missing a required argument"):
        django_tasks.multiply.delay(1)
    with pytest.raises(TypeError, match="link"):
        django_tasks.multiply.apply_async((1, 2), link=object())
    with pytest.raises(ValueError, match="priority"):
        django_tasks.multiply.apply_async((1, 2), priority=10)
    assert django_tasks.multiply(3, 4) == 12  # calling it runs it here

    # Before the worker: priorities on one queue (0 first, Redis's convention), a countdown and a revoked job.
    late = django_tasks.tagged.apply_async(("late",), priority=9)
    early = django_tasks.tagged.apply_async(kwargs={"label": "early"}, priority=0, queue="celery-other")
    counted = django_tasks.multiply.apply_async((2, 3), countdown=1.5)
    eta = django_tasks.multiply.apply_async((4, 5), eta=timezone.now() + timedelta(seconds=1))
    revoked = django_tasks.multiply.apply_async((1, 1), countdown=60)
    assert client.get(counted.id).state is JobState.SCHEDULED and counted.state == PENDING
    assert client.get(early.id).priority == 0 and client.get(late.id).priority == 9
    revoked.revoke()
    assert revoked.state == REVOKED and revoked.ready() and not revoked.successful()

    start_worker(procs, redis_url, ledger, "celery,celery-other")
    assert django_tasks.multiply.delay(6, 7).get(timeout=30) == 42
    assert counted.get(timeout=30) == 6 and eta.get(timeout=30) == 20
    assert counted.successful() and counted.status == SUCCESS and counted.result == 6
    assert client.get(counted.id).queue == "celery"

    assert late.get(timeout=30) == "late" and early.get(timeout=30) == "early"
    assert [line[1] for line in read_ledger(ledger) if line[0] == "ran"] == ["early", "late"]

    retried = django_tasks.flaky.delay(succeed_on=2)
    assert retried.get(timeout=30) == {"retries": 1, "id": retried.id}
    assert [a.outcome for a in client.get(retried.id).history] == ["failed", "completed"]

    failing = django_tasks.broken.delay("missing")
    with pytest.raises(KeyError, match="missing"):
        failing.get(timeout=30)
    assert failing.failed() and failing.state == FAILURE and isinstance(failing.result, KeyError)
    assert failing.traceback is not None and "KeyError: 'missing'" in failing.traceback
    assert len(client.get(failing.id).history) == 2  # autoretry_for=(KeyError,), max_retries=1
    assert isinstance(failing.get(timeout=1, propagate=False), KeyError)

    with pytest.raises(TimeoutError):
        django_tasks.multiply.apply_async((1, 2), countdown=60).get(timeout=0.3, interval=0.1)
