"""The dispatcher's wait while jobs run (worker/idle.py, worker/watch.py): the blocking pop is the watch thread's,
so an outcome is reported as soon as it comes, and a job handed to the worker meanwhile starts at once."""

import threading
import time
from collections.abc import Iterator, Sequence

import pytest
import redis

from jobconsole.core import Client, JobState, TaskRegistry, Worker
from jobconsole.core.keys import queue_keys
from jobconsole.core.results import Handed
from jobconsole.core.store import WorkerIdentity
from tests.helpers import wait_for, worker_in_thread

GATE = threading.Event()


@pytest.fixture
def registry() -> Iterator[TaskRegistry]:
    reg = TaskRegistry()

    @reg.task(name="w.gated", queue="wq")
    def gated() -> str:
        GATE.wait(10)
        return "gated"

    @reg.task(name="w.short", queue="wq")
    def short() -> str:
        time.sleep(0.2)
        return "short"

    GATE.clear()
    yield reg
    GATE.set()


def test_a_job_that_ends_while_the_pop_is_out_is_acknowledged_at_once(r: "redis.Redis", registry: TaskRegistry) -> None:
    client = Client(r, registry)
    gated = client.enqueue("w.gated").id
    short = client.enqueue("w.short").id
    worker = Worker(r, ["wq"], registry, concurrency=3, maintenance=False)  # a slot free: it waits for work
    # Every blocking pop lasts 8 s, as one does on a quiet queue (Redis ends it only at its cron tick after the
    # timeout): the ack of the short job must not wait for it.
    popping = threading.Event()
    release = threading.Event()
    real_pop = worker.store.wait_for_work

    def long_pop(identity: WorkerIdentity, queues: Sequence[str], timeout: float) -> Handed | None:
        popping.set()
        release.wait(8)
        return real_pop(identity, queues, 0.001)

    worker.store.wait_for_work = long_pop  # type: ignore[method-assign]
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        wait_for(lambda: client.get(short).state is JobState.COMPLETED, timeout=5)
        assert popping.is_set() and not release.is_set()  # acknowledged while a pop was out
        assert client.get(gated).state is JobState.RUNNING
    finally:
        release.set()
        GATE.set()
        worker.request_stop()
        thread.join(10)
    assert client.get(gated).state is JobState.COMPLETED


def test_a_job_handed_to_a_busy_worker_starts_while_its_other_job_runs(
    r: "redis.Redis", registry: TaskRegistry
) -> None:
    client = Client(r, registry)
    gated = client.enqueue("w.gated").id
    with worker_in_thread(r, registry, ["wq"], concurrency=2):
        wait_for(lambda: client.get(gated).state is JobState.RUNNING)
        time.sleep(0.2)  # its claim found nothing more: registered idle, the watch thread's pop out
        # A client that has met no busy queue yet hands a job to an idle worker (the other one's last enqueue, with
        # no worker up, met none idle: it would append, wake the worker and hand off from its next enqueue on).
        handed = Client(r, registry).enqueue("w.short")
        assert handed.state is JobState.RUNNING  # leased to the worker's inbox by the enqueue
        wait_for(lambda: client.get(handed.id).state is JobState.COMPLETED, timeout=5)
        assert client.get(gated).state is JobState.RUNNING
        GATE.set()
        wait_for(lambda: client.get(gated).state is JobState.COMPLETED)


def test_once_the_last_job_ends_the_watch_pop_ends_and_a_task_thread_pops(
    r: "redis.Redis", registry: TaskRegistry
) -> None:
    # A job handed to the watch thread's pop would wake it, then the dispatcher, then a task thread: once no job
    # runs, the pop is ended (a token to the inbox) and a task thread pops, which runs a handed job itself.
    client = Client(r, registry)
    with worker_in_thread(r, registry, ["wq"], concurrency=2) as worker:
        first = client.enqueue("w.short").id
        wait_for(lambda: client.get(first).state is JobState.COMPLETED, timeout=5)
        wait_for(lambda: worker.idle._idle_pop and not worker.watch.outstanding, timeout=0.5)
        assert worker.idle._idle_pop and not worker.watch.outstanding
        started = time.monotonic()
        second = Client(r, registry).enqueue("w.short")  # one that hands off, as above
        assert second.state is JobState.RUNNING  # handed to the worker's inbox
        wait_for(lambda: client.get(second.id).state is JobState.COMPLETED, timeout=5)
        assert time.monotonic() - started < 0.9  # not held up by a pop's timeout
        assert not r.lrange(queue_keys("wq").inbox(worker.id), 0, -1)  # no token left over


def test_a_stop_ends_a_fully_idle_workers_pop_at_once(r: "redis.Redis", registry: TaskRegistry) -> None:
    worker = Worker(r, ["wq"], registry, concurrency=2, maintenance=False)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        wait_for(lambda: worker.idle._idle_pop)
        time.sleep(0.05)  # the task thread's pop sent
        asked = time.monotonic()
        worker.request_stop()
        thread.join(5)
        assert not thread.is_alive()
        assert time.monotonic() - asked < 0.5  # a pop lasts a second
    finally:
        worker.request_stop()
        thread.join(5)


def test_a_stop_while_a_job_runs_ends_the_watch_pop_at_once(r: "redis.Redis", registry: TaskRegistry) -> None:
    client = Client(r, registry)
    worker = Worker(r, ["wq"], registry, concurrency=2, maintenance=False)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        gated = client.enqueue("w.gated").id
        wait_for(lambda: client.get(gated).state is JobState.RUNNING)
        wait_for(lambda: worker.watch.outstanding)
        time.sleep(0.05)
        worker.request_stop()  # w.gated finishes (on_shutdown's default): leaving the idle lists ends the pop first
        time.sleep(0.1)
        assert not worker.watch.outstanding
        asked = time.monotonic()
        GATE.set()
        thread.join(5)
        assert not thread.is_alive()
        assert time.monotonic() - asked < 0.5
        assert client.get(gated).state is JobState.COMPLETED
    finally:
        GATE.set()
        worker.request_stop()
        thread.join(5)
