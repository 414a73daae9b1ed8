"""The django.tasks backend and the Celery-style calls without a worker: what is refused, how priorities map,
what get_result and AsyncResult answer for jobs that are not theirs or not there (tests/processes/
test_django_tasks.py runs them on a real worker)."""

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from django.tasks import TaskResultStatus, task
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist

from jobconsole.calls import register_call_task
from jobconsole.celery import PENDING, AsyncResult, Celery, celery_priority
from jobconsole.core import Client, JobState, Worker, default_registry
from jobconsole.django_backend import JobconsoleBackend, django_priority, engine_priority
from tests import django_tasks


@task(backend="retrying", queue_name="retrying")
def always_fails(n: int) -> None:
    raise KeyError(n)


@pytest.fixture
def client(settings: Any, r: Any, redis_url: str) -> Iterator[Client]:
    from jobconsole.engine import get_client

    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "REDIS_URL": redis_url}
    yield get_client()


def test_priorities_map_in_order() -> None:
    django = list(range(-100, 101))
    ours = [engine_priority(p) for p in django]
    assert ours == sorted(ours, reverse=True) and len(set(ours)) == len(ours)  # higher first = lower first, 1:1
    assert [django_priority(engine_priority(p)) for p in django] == django
    assert (django_priority(-1000), django_priority(1000)) == (100, -100)  # an operator's value, clamped
    assert [celery_priority(p) for p in range(10)] == list(range(10))
    for bad in (-1, 10, True, "high"):
        with pytest.raises(ValueError, match="priority"):
            celery_priority(bad)  # type: ignore[arg-type]


def test_tasks_the_backend_refuses() -> None:
    with pytest.raises(InvalidTask, match="not valid for backend"):
        django_tasks.add.using(queue_name="elsewhere")  # not in the backend's QUEUES
    with pytest.raises(InvalidTask, match="first argument of 'context'"):
        task(takes_context=True)(django_tasks.add.func)

    def local(x: int) -> int:
        return x

    with pytest.raises(InvalidTask, match="module level"):
        task(local)


def test_an_engine_task_of_the_same_name_is_not_taken_over() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_call_task("tests.record", lambda context, args, kwargs: None)


def test_enqueue_writes_a_job_get_result_reads_it(client: Client) -> None:
    result = django_tasks.add.using(priority=30).enqueue(1, y=2)
    job = client.get(result.id)
    assert (job.state, job.priority, job.params) == (JobState.QUEUED, -30, {"args": [1], "kwargs": {"y": 2}})
    read = django_tasks.add.get_result(result.id)
    assert (read.status, read.args, read.kwargs, read.worker_ids, read.errors) == (
        TaskResultStatus.READY, [1], {"y": 2}, [], []
    )  # fmt: skip
    assert read.task.priority == 30 and read.enqueued_at is not None and read.started_at is None
    with pytest.raises(ValueError, match="not finished"):
        _ = read.return_value


def test_get_result_of_jobs_that_are_not_django_tasks(client: Client) -> None:
    backend = JobconsoleBackend("default", {})
    native = client.enqueue("tests.sleep_plain", {"seconds": 0})
    for result_id in (native.id, "01J00000000000000000000000", "not an id"):
        with pytest.raises(TaskResultDoesNotExist):
            backend.get_result(result_id)


def test_celery_results_of_unknown_ids_are_pending_and_task_ids_are_idempotent(client: Client) -> None:
    unknown = Celery("tests").AsyncResult("01J00000000000000000000000")
    assert (unknown.state, unknown.ready(), unknown.result) == (PENDING, False, None)
    first = django_tasks.multiply.apply_async((2, 2), task_id="01J00000000000000000000001", countdown=30)
    again = django_tasks.multiply.apply_async((9, 9), task_id="01J00000000000000000000001", countdown=30)
    assert isinstance(again, AsyncResult) and first.id == again.id
    assert client.get(first.id).params == {"args": [2, 2], "kwargs": {}}  # the first one stands


def test_a_backend_s_options_retry_its_tasks_and_every_attempt_is_read_back(client: Client, r: Any) -> None:
    result = always_fails.enqueue(7)
    assert client.get(result.id).max_retries == 1  # OPTIONS: {"max_retries": 1, "retry_delay": 0}
    Worker(r, ["retrying"], default_registry, concurrency=1, burst=True, burst_horizon=5, maintenance=False,
           name="wr").run()  # fmt: skip
    result.refresh()
    assert result.status == TaskResultStatus.FAILED and result.attempts == 2 and result.worker_ids == ["wr", "wr"]
    assert [e.exception_class for e in result.errors] == [KeyError, KeyError]
    assert all("raise KeyError(n)" in e.traceback for e in result.errors)
    assert result.started_at and result.last_attempted_at and result.finished_at
    assert result.started_at < result.last_attempted_at < result.finished_at


def test_the_async_api(client: Client) -> None:
    async def enqueue_and_read() -> tuple[str, str]:
        result = await django_tasks.add.aenqueue(1, 2)
        read = await django_tasks.add.aget_result(result.id)
        return result.id, read.id

    enqueued, read = asyncio.run(enqueue_and_read())
    assert enqueued == read and client.get(enqueued).params == {"args": [1, 2], "kwargs": {}}
