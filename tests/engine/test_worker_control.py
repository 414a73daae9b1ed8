"""An operator's quiet, resume and stop of a worker (core/worker/control.py, lua/worker_control.lua), against a
real redis-server and real workers: a quieted worker claims nothing and finishes what it runs; a stopped one
leaves as SIGTERM makes it."""

import threading
import time

import pytest
import redis

from jobconsole.core import Client, JobState, TaskRegistry, Worker, keys
from jobconsole.core.keys import worker_key
from jobconsole.core.lapse import LapseWatch
from jobconsole.core.queries import Queries
from jobconsole.core.store import Store
from jobconsole.core.worker.registry import REGISTRY_EVERY_S
from tests.helpers import wait_for, worker_in_thread

GATE = threading.Event()


@pytest.fixture
def registry() -> TaskRegistry:
    reg = TaskRegistry()

    @reg.task(name="c.gated", queue="cq", on_shutdown="finish")
    def gated() -> str:
        assert GATE.wait(20), "the test never opened the gate"
        return "done"

    @reg.task(name="c.quick", queue="cq")
    def quick() -> str:
        return "quick"

    return reg


@pytest.fixture(autouse=True)
def closed_gate() -> None:
    GATE.clear()


def _state(client: Client, worker_id: str) -> str:
    return next((w.state for w in client.queries.workers.all() if w.id == worker_id), "absent")


def test_a_quieted_worker_finishes_its_job_claims_nothing_and_resumes(r: "redis.Redis", registry: TaskRegistry) -> None:
    client = Client(r, registry)
    with worker_in_thread(r, registry, ["cq"], concurrency=2) as worker:
        running = client.enqueue("c.gated", {}).id
        wait_for(lambda: client.get(running).state is JobState.RUNNING)
        assert client.control_workers([worker.id], "quiet") == {worker.id: "done"}
        assert client.control_workers([worker.id], "quiet") == {worker.id: "already"}
        # Acted on at the next registry renewal, which then shows it.
        wait_for(lambda: _state(client, worker.id) == "quiet", timeout=REGISTRY_EVERY_S * 3)
        waiting = client.enqueue("c.quick", {}).id  # no idle registration left: not handed to the quiet worker
        GATE.set()
        wait_for(lambda: client.get(running).state is JobState.COMPLETED)
        time.sleep(1.0)  # a second of a quiet worker with a free thread and a job waiting
        assert client.get(waiting).state is JobState.QUEUED
        wait_for(lambda: [w.current for w in client.queries.workers.all() if w.id == worker.id] == [[]], timeout=5)
        assert client.get(waiting).state is JobState.QUEUED
        assert client.control_workers([worker.id], "resume") == {worker.id: "done"}
        wait_for(lambda: client.get(waiting).state is JobState.COMPLETED, timeout=REGISTRY_EVERY_S * 3)
        assert _state(client, worker.id) == "running"


def test_a_stopped_worker_finishes_its_job_and_leaves_the_registry(r: "redis.Redis", registry: TaskRegistry) -> None:
    client = Client(r, registry)
    worker = Worker(r, ["cq"], registry, concurrency=2, maintenance=False)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        job = client.enqueue("c.gated", {}).id
        wait_for(lambda: client.get(job).state is JobState.RUNNING)
        assert client.control_workers([worker.id], "stop") == {worker.id: "done"}
        wait_for(lambda: _state(client, worker.id) == "stopping", timeout=REGISTRY_EVERY_S * 3)
        assert client.control_workers([worker.id], "quiet") == {worker.id: "already"}  # a stop is not undone
        assert client.control_workers([worker.id], "resume") == {worker.id: "already"}
        time.sleep(0.3)  # past a blocking pop begun before the stop (50 ms while a job runs)
        later = client.enqueue("c.quick", {}).id  # not handed to the stopping worker: it left the idle lists
        time.sleep(0.5)
        assert client.get(later).state is JobState.QUEUED  # a stopping worker claims nothing
        assert thread.is_alive()  # on_shutdown="finish": it waits for its job
        GATE.set()
        thread.join(10)
        assert not thread.is_alive()
    finally:
        GATE.set()
        worker.request_stop()
        thread.join(10)
    assert client.get(job).state is JobState.COMPLETED and client.get(job).history[-1].outcome == "completed"
    assert _state(client, worker.id) == "absent" and not r.exists(worker_key(worker.id))


def test_controls_reach_live_workers_only_and_by_host(r: "redis.Redis", registry: TaskRegistry) -> None:
    client = Client(r, registry)
    assert client.control_workers(["nobody:1:abc"], "quiet") == {"nobody:1:abc": "missing"}
    assert not r.exists(worker_key("nobody:1:abc"))  # no stray hash for a worker that is not there
    with (
        worker_in_thread(r, registry, ["cq"], host="host-a") as a1,
        worker_in_thread(r, registry, ["cq"], host="host-a") as a2,
        worker_in_thread(r, registry, ["cq"], host="host-b") as b,
    ):
        wait_for(lambda: len(client.queries.workers.all()) == 3)
        assert client.control_host("host-a", "quiet") == {a1.id: "done", a2.id: "done"}
        assert client.control_host("host-c", "quiet") == {}
        wait_for(lambda: {_state(client, w.id) for w in (a1, a2)} == {"quiet"}, timeout=REGISTRY_EVERY_S * 3)
        assert _state(client, b.id) == "running"
        job = client.enqueue("c.quick", {}).id
        wait_for(lambda: client.get(job).state is JobState.COMPLETED)
        assert client.get(job).worker == b.id
    with pytest.raises(Exception, match="unknown worker action"):
        client.control_workers([b.id], "pause")


def test_a_worker_started_under_a_stopped_workers_name_runs(r: "redis.Redis", registry: TaskRegistry) -> None:
    """--name reused after a stop the old process never read (it died first): the control was for that one."""
    client = Client(r, registry)
    r.hset(worker_key("fixed-name"), mapping={"state": "running", "control": "stop"})
    with worker_in_thread(r, registry, ["cq"], name="fixed-name"):
        job = client.enqueue("c.quick", {}).id
        wait_for(lambda: client.get(job).state is JobState.COMPLETED)
        time.sleep(REGISTRY_EVERY_S + 0.5)
        assert _state(client, "fixed-name") == "running"


def test_a_quiet_worker_declared_gone_stays_quiet_under_its_new_id(r: "redis.Redis", registry: TaskRegistry) -> None:
    """The operator quieted the process, not its id: declared gone (a pause past its expiry), it goes on as
    <id>~2 (worker/dispatcher.py's _rejoin) and still claims nothing until resumed."""
    client = Client(r, registry)
    store = Store(r)
    with worker_in_thread(r, registry, ["cq"], concurrency=2) as worker:
        old_id = worker.id
        wait_for(lambda: _state(client, old_id) == "running")
        assert client.control_workers([old_id], "quiet") == {old_id: "done"}
        wait_for(lambda: _state(client, old_id) == "quiet", timeout=REGISTRY_EVERY_S * 3)
        r.zadd(keys.ALIVE, {old_id: 0})  # its deadline passed: the next scan declares it gone
        assert LapseWatch(store, Queries(store), ttl_ms=1000).step() >= 0
        new_id = f"{old_id}~2"
        wait_for(lambda: _state(client, new_id) == "quiet", timeout=10)
        assert _state(client, old_id) == "gone"
        assert {w.id: w.control for w in client.queries.workers.all()}[new_id] == "quiet"
        waiting = client.enqueue("c.quick", {}).id
        time.sleep(1.0)  # a second of a quiet worker with free threads and a job waiting
        assert client.get(waiting).state is JobState.QUEUED
        assert client.control_workers([new_id], "resume") == {new_id: "done"}
        wait_for(lambda: client.get(waiting).state is JobState.COMPLETED, timeout=REGISTRY_EVERY_S * 3)
        assert client.get(waiting).worker == new_id
