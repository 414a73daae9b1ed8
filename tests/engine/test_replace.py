"""Runqueue's replace: a task finishes by asking to run again later with a new state, keeping its id, with its
attempt count reset; a real worker runs the whole flow."""

import threading
import time

import pytest
import redis

from jobconsole.core import Client, InvalidJob, JobState, Replace, TaskRegistry
from jobconsole.core.keys import queue_keys
from jobconsole.core.queries.events import events_of
from tests.helpers import wait_for, worker_in_thread

K = queue_keys("q")


def registry_with_counter(seen: list[tuple[int, int]]) -> TaskRegistry:
    registry = TaskRegistry()

    def count_to(context: object, counter: int, until: int) -> Replace | dict[str, int]:
        seen.append((counter, context.attempt))  # type: ignore[attr-defined]
        if counter < until:
            return Replace(params={"counter": counter + 1, "until": until}, run_at=[0, "s"], result={"at": counter})
        return {"done": counter}

    registry.register(count_to, name="t.count", queue="q", max_retries=1)
    return registry


def test_a_task_replaces_itself_until_done_keeping_its_id_with_attempts_reset(r: "redis.Redis") -> None:
    seen: list[tuple[int, int]] = []
    registry = registry_with_counter(seen)
    client = Client(r, registry)
    job = client.enqueue("t.count", {"counter": 1, "until": 3}, unique_key="counter")
    with worker_in_thread(r, registry, ["q"]):
        done = wait_for(lambda: (j := client.get(job.id)).state is JobState.COMPLETED and j, 10)
    assert seen == [(1, 1), (2, 1), (3, 1)]  # each run is a first attempt: the count was reset
    assert done.result == {"done": 3} and done.params == {"counter": 3, "until": 3}
    assert [a.outcome for a in done.history] == ["replaced", "replaced", "completed"]
    events = [e.name for i, f in r.xrange(K.events) for e in events_of("q", i, f) if e.job == job.id]
    assert events.count("replaced") == 2
    assert not r.hexists(K.unique, "counter")  # held through the replacements, freed at the end


def test_a_replacement_may_wait_and_change_priority(r: "redis.Redis") -> None:
    registry = TaskRegistry()
    registry.register(lambda: Replace(delay=3600, priority="high"), name="t.later", queue="q")
    client = Client(r, registry)
    job = client.enqueue("t.later")
    with worker_in_thread(r, registry, ["q"]):
        later = wait_for(lambda: (j := client.get(job.id)).state is JobState.SCHEDULED and j, 10)
    assert later.priority == -10 and later.attempts == 0
    due = r.zscore(K.scheduled, job.id)
    assert due is not None and due > client.store.time_ms() + 3_500_000


def test_a_replacement_with_bad_params_fails_the_job_for_good(r: "redis.Redis") -> None:
    registry = TaskRegistry()

    def needs_n(n: int) -> Replace:
        return Replace(params={"m": n})

    registry.register(needs_n, name="t.bad", queue="q", max_retries=3)
    client = Client(r, registry)
    job = client.enqueue("t.bad", {"n": 1})
    with worker_in_thread(r, registry, ["q"]):
        dead = wait_for(lambda: (j := client.get(job.id)).state is JobState.DEAD and j, 10)
    assert dead.attempts == 1 and "Replace refused" in dead.history[-1].message


def test_runqueues_replace_object_is_read() -> None:
    replace = Replace.from_runqueue({"run_at": [0, "s"], "json": '{"counter": 2}', "priority": 990})
    assert replace == Replace(params={"counter": 2}, priority=-10, run_at=[0, "s"])
    with pytest.raises(InvalidJob, match="takes run_at, json and priority; not state"):
        Replace.from_runqueue({"state": 1})


def test_a_cancel_asked_while_it_ran_wins_over_its_replace(r: "redis.Redis") -> None:
    registry = TaskRegistry()
    started = threading.Event()

    def again() -> Replace:
        started.set()
        time.sleep(0.4)  # the operator asks to cancel meanwhile; the task does not look
        return Replace(delay=0)

    registry.register(again, name="t.again", queue="q")
    client = Client(r, registry)
    job = client.enqueue("t.again", unique_key="again")
    with worker_in_thread(r, registry, ["q"]):
        assert started.wait(5)
        assert client.cancel(job.id) == "requested"
        ended = wait_for(lambda: (j := client.get(job.id)).state is JobState.CANCELLED and j, 10)
    assert [a.outcome for a in ended.history] == ["cancelled"]
    assert not r.hexists(K.unique, "again") and r.zscore(K.sets["cancelled"], job.id) is not None
