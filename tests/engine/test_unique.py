"""Unique keys: one live job per key under concurrent submissions, held until the job ends or (an option) until
it starts; looked up and deleted by key; a dead job resubmitted takes its key back only if it is free."""

import threading
import time

import pytest
import redis

from jobconsole.core import Client, JobState, TaskRegistry
from jobconsole.core.errors import JobStateConflict
from jobconsole.core.keys import queue_keys
from tests.helpers import claim, complete, wait_for, worker_in_thread
from tests.queue_fixtures import *  # noqa: F403  (the client and registry fixtures)

K = queue_keys("q")


def test_fifty_concurrent_submissions_of_one_key_make_one_job(r: "redis.Redis", registry: TaskRegistry) -> None:
    start = threading.Barrier(50)
    results: list[tuple[str, str]] = []
    lock = threading.Lock()

    def submit() -> None:
        client = Client(r, registry)
        start.wait()
        result = client.enqueue("t.ok", {"x": 1}, unique_key="reminder:42")
        with lock:
            results.append((result.status, result.id))

    threads = [threading.Thread(target=submit) for _ in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    created = [job_id for status, job_id in results if status == "created"]
    assert len(created) == 1
    assert sorted(status for status, _ in results).count("duplicate") == 49
    assert {job_id for _, job_id in results} == set(created)  # every duplicate names the holder
    assert r.zcard(K.ready) == 1 and r.hget(K.unique, "reminder:42") == created[0]


def test_unique_until_start_frees_the_key_when_the_job_is_leased(r: "redis.Redis", client: Client) -> None:
    first = client.enqueue("t.ok", unique_key="sync:7", unique_until="start")
    assert client.enqueue("t.ok", unique_key="sync:7").status == "duplicate"  # waiting: still held
    [lease] = claim(r, "q", 1)
    assert lease.id == first.id and not r.hexists(K.unique, "sync:7")
    second = client.enqueue("t.ok", unique_key="sync:7")  # runs beside the first: the key was only until start
    assert second.status == "created"
    assert complete(r, "q", first.id, lease.token) == 1
    assert r.hget(K.unique, "sync:7") == second.id  # the first's end does not free the second's key


def test_a_task_may_hold_its_keys_until_start(r: "redis.Redis", registry: TaskRegistry) -> None:
    registry.register(lambda: time.sleep(0.3), name="t.refresh", queue="q", unique_until="start")
    client = Client(r, registry)
    client.enqueue("t.refresh", unique_key="refresh")
    with worker_in_thread(r, registry, ["q"]):
        wait_for(lambda: client.counts("q").running == 1)
        assert client.enqueue("t.refresh", unique_key="refresh").status == "created"  # while the first runs
    with pytest.raises(ValueError, match="unique_until must be 'end' or 'start'"):
        registry.register(lambda: None, name="t.bad", unique_until="forever")


def test_a_job_is_found_and_deleted_by_its_unique_key_before_it_runs(r: "redis.Redis", client: Client) -> None:
    reminder = client.enqueue("t.ok", unique_key="remind:ana", delay=3600)
    found = client.find_unique("t.ok", "remind:ana")  # by the task's name, or by queue
    assert found is not None and found.id == reminder.id and found.state is JobState.SCHEDULED
    assert client.find_unique("q", "remind:bob") is None
    assert client.delete_unique("q", "remind:ana") == reminder.id
    assert not r.exists(K.job(reminder.id)) and not r.hexists(K.unique, "remind:ana")
    assert r.zcard(K.scheduled) == 0
    assert client.delete_unique("q", "remind:ana") is None  # nothing holds it now
    assert client.enqueue("t.ok", unique_key="remind:ana").status == "created"  # free again


def test_a_running_job_is_not_deleted_by_its_key(r: "redis.Redis", client: Client) -> None:
    job = client.enqueue("t.ok", unique_key="remind:cy")
    claim(r, "q", 1)
    with pytest.raises(JobStateConflict, match="is running"):
        client.delete_unique("q", "remind:cy")
    assert client.get(job.id).state is JobState.RUNNING


def test_a_dead_job_takes_its_key_back_only_when_it_is_free(r: "redis.Redis", client: Client) -> None:
    dead = client.enqueue("t.ok", unique_key="k1", max_retries=0)
    [lease] = claim(r, "q", 1)
    store = client.store
    store.run(store.fail_call("q", dead.id, lease.token, outcome="dead", retry=False, delay_ms=0,
                              error={"error_class": "E", "message": "m"}, runtime_ms=1, ttl_ms=0))  # fmt: skip
    assert client.get(dead.id).state is JobState.DEAD and not r.hexists(K.unique, "k1")
    other = client.enqueue("t.ok", unique_key="k1")  # takes the freed key
    with pytest.raises(JobStateConflict, match="same unique key"):
        client.requeue(dead.id)
    client.delete(other.id)
    client.requeue(dead.id)
    assert client.get(dead.id).state is JobState.QUEUED
    assert r.hget(K.unique, "k1") == dead.id  # taken back with the resubmit
