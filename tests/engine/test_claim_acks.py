"""A worker's acks ride in its next claim of the same queue (claim.lua, complete_jobs in lua/_deps.lua): one
script call per round trip instead of a completion and a claim, with complete.lua's answers and effects."""

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest
import redis

from jobconsole.core import Client, JobSpec, JobState, TaskRegistry
from jobconsole.core.results import Ack, Claimed
from jobconsole.core.store import Call, Store, WorkerIdentity
from jobconsole.core.workflows import Step
from tests.helpers import claim, wait_for, worker_in_thread

WORKER = WorkerIdentity("w", "host", 1)


def claim_acking(r: "redis.Redis", queue: str, acks: list[tuple[str, str, str, int]], count: int = 10) -> Claimed:
    store = Store(r, events_maxlen=1000)
    return store.run(store.claim_call(queue, WORKER, count, idle_ms=0, acks=acks, ttl_ms=0))


def test_acks_in_a_claim_complete_their_jobs_and_answer_each(r: "redis.Redis") -> None:
    client = Client(r, TaskRegistry(), strict=False)
    ids = [client.enqueue("t.any", {"i": i}, queue="q").id for i in range(3)]
    first, second = claim(r, "q", count=2, worker="w")
    reply = claim_acking(r, "q", [(first.id, first.token, '"one"', 5), (second.id, "w:stale", "null", 5)])
    assert reply.acks == [Ack.COMPLETED, Ack.STALE]
    assert [lease.id for lease in reply.leases] == [ids[2]]  # the claim went on after the acks
    done = client.get(first.id)
    assert (done.state, done.result) == (JobState.COMPLETED, "one")
    assert client.get(second.id).state is JobState.RUNNING  # a stale token changes nothing
    # A retried ack (its reply was lost) is told it was done already, and claims nothing twice.
    again = claim_acking(r, "q", [(first.id, first.token, '"one"', 5)])
    assert (again.acks, again.leases) == ([Ack.REPEATED], [])


def test_a_claim_without_acks_answers_none(r: "redis.Redis") -> None:
    Client(r, TaskRegistry(), strict=False).enqueue("t.any", {}, queue="q")
    reply = claim_acking(r, "q", [])
    assert reply.acks == [] and len(reply.leases) == 1


def test_an_acked_parent_releases_its_dependent_into_the_same_claim(r: "redis.Redis") -> None:
    client = Client(r, TaskRegistry(), strict=False)
    steps = [Step("a", JobSpec(task="t.any", queue="q")), Step("b", JobSpec(task="t.any", queue="q"), after=["a"])]
    made = client.enqueue_workflow(steps)
    [parent] = claim(r, "q", worker="w")
    reply = claim_acking(r, "q", [(parent.id, parent.token, "null", 1)])
    assert reply.acks == [Ack.COMPLETED]
    assert [lease.id for lease in reply.leases] == [made.job_ids_by_step["b"]]


def test_a_worker_acks_through_its_claims(r: "redis.Redis", monkeypatch: pytest.MonkeyPatch) -> None:
    registry = TaskRegistry()
    registry.task(name="t.double", queue="q")(lambda x: 2 * x)
    client = Client(r, registry)
    ids = [client.enqueue("t.double", {"x": i}).id for i in range(200)]
    calls: Counter[str] = Counter()
    run_many = Store.run_many

    def counting(self: Store, batch: Sequence[Call[Any]]) -> list[Any]:
        calls.update(c.script for c in batch)
        return run_many(self, batch)

    monkeypatch.setattr(Store, "run_many", counting)
    with worker_in_thread(r, registry, ["q"], concurrency=4):
        wait_for(lambda: all(client.get(i).state is JobState.COMPLETED for i in ids), timeout=30)
    assert [client.get(i).result for i in ids] == [2 * i for i in range(200)]
    # Every round trip that claimed carried its acks: complete.lua runs only for the acks of a round trip that
    # claims nothing (the worker stopping, at most a few).
    assert calls["claim"] >= 2 and calls["complete"] <= 2, calls
