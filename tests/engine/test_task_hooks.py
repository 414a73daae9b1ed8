"""TaskHooks (core/hooks.py): a framework's callables around each sync task, on the task's own thread (the Django
layer replaces stale database connections with them, which are per thread)."""

import threading

import pytest
import redis

from jobconsole.core import Client, JobState, TaskHooks, TaskRegistry
from tests.helpers import run_burst


@pytest.fixture
def calls() -> list[tuple[str, int]]:
    return []


@pytest.fixture
def registry(calls: list[tuple[str, int]]) -> TaskRegistry:
    reg = TaskRegistry()

    @reg.task(name="t.ok", queue="q")
    def ok() -> None:
        calls.append(("task", threading.get_ident()))

    @reg.task(name="t.boom", queue="q", max_retries=0)
    def boom() -> None:
        calls.append(("task", threading.get_ident()))
        raise ValueError("boom")

    @reg.task(name="t.async", queue="q")
    async def asynchronous() -> None:
        calls.append(("task", threading.get_ident()))

    return reg


def recording(calls: list[tuple[str, int]]) -> TaskHooks:
    return TaskHooks(
        before=lambda: calls.append(("before", threading.get_ident())),
        after=lambda: calls.append(("after", threading.get_ident())),
    )


def test_hooks_run_before_and_after_each_sync_task_on_its_thread(
    r: "redis.Redis", registry: TaskRegistry, calls: list[tuple[str, int]]
) -> None:
    client = Client(r, registry)
    ok, boom = client.enqueue("t.ok", {}).id, client.enqueue("t.boom", {}).id
    run_burst(r, registry, ["q"], concurrency=1, hooks=recording(calls))
    assert [name for name, _ in calls] == ["before", "task", "after"] * 2
    assert len({thread for _, thread in calls[:3]}) == 1 and len({thread for _, thread in calls[3:]}) == 1
    assert client.get(ok).state == JobState.COMPLETED
    assert client.get(boom).state == JobState.DEAD  # the task's own error, 'after' ran all the same


def test_a_failing_before_fails_the_job_and_a_failing_after_changes_nothing(
    r: "redis.Redis", registry: TaskRegistry, calls: list[tuple[str, int]], caplog: pytest.LogCaptureFixture
) -> None:
    client = Client(r, registry)

    def refuse() -> None:
        raise RuntimeError("no database")

    refused = client.enqueue("t.ok", {}).id
    run_burst(r, registry, ["q"], concurrency=1, hooks=TaskHooks(before=refuse))
    job = client.get(refused)
    assert (job.state, job.history[0].error_class, calls) == (JobState.RETRYING, "RuntimeError", [])

    client.delete(refused)
    kept = client.enqueue("t.ok", {}).id
    run_burst(r, registry, ["q"], concurrency=1, hooks=TaskHooks(after=refuse))
    assert client.get(kept).state == JobState.COMPLETED
    assert "task hook 'after' failed" in caplog.text


def test_async_tasks_run_without_the_hooks(
    r: "redis.Redis", registry: TaskRegistry, calls: list[tuple[str, int]]
) -> None:
    # They share one event loop thread: per-thread housekeeping there is the framework's (asgiref's) business.
    client = Client(r, registry)
    job = client.enqueue("t.async", {}).id
    run_burst(r, registry, ["q"], concurrency=1, hooks=recording(calls))
    assert [name for name, _ in calls] == ["task"]
    assert client.get(job).state == JobState.COMPLETED
