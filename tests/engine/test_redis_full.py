"""Redis full (used memory over maxmemory, policy noeviction): new jobs are refused with RedisFull and leave
nothing behind, while workers start, run, retry, fail and finish the jobs already in Redis."""

import time
from collections.abc import Iterator

import pytest
import redis

from jobconsole.core import Client, JobContext, JobNotFound, JobSpec, JobState, RedisFull, TaskRegistry, keys, scripts
from jobconsole.core.connection import connect
from jobconsole.core.keys import queue_keys
from jobconsole.core.maintenance import Maintenance
from tests.helpers import claim, run_burst, wait_for, worker_in_thread
from tests.redis_server import RedisServer

PAD = "x" * 1000  # ballast, so that a few hundred jobs fill the headroom


@pytest.fixture
def registry() -> TaskRegistry:
    return TaskRegistry()


@pytest.fixture
def full_r(own_redis: RedisServer) -> Iterator["redis.Redis"]:
    connection = connect(own_redis.url)
    yield connection
    connection.close()


def limit_memory(r: "redis.Redis", headroom: int) -> None:
    """maxmemory = what Redis uses now, with every script loaded, plus `headroom` bytes."""
    scripts.load_all(r)
    r.config_set("maxmemory", int(r.info("memory")["used_memory"]) + headroom)


def fill(client: Client, task: str) -> list[str]:
    """Enqueue padded jobs one by one until Redis refuses one; returns the accepted ids."""
    accepted: list[str] = []
    while True:
        try:
            accepted.append(client.enqueue(task, {"pad": PAD}).id)
        except RedisFull as full:
            assert len(full.refused) == 1 and full.accepted == []
            return accepted
        assert len(accepted) < 100_000, "Redis never filled up: is maxmemory set?"


def snapshot(r: "redis.Redis", queue: str) -> tuple[int, int, int, int]:
    k = queue_keys(queue)
    return r.dbsize(), r.zcard(k.ready), r.xlen(k.events), r.xlen(k.intake) if r.exists(k.intake) else 0


def test_a_refused_enqueue_writes_nothing_and_says_why(full_r: "redis.Redis", registry: TaskRegistry) -> None:
    @registry.task(name="t.pad", queue="q")
    def pad(pad: str) -> None:
        pass

    client = Client(full_r, registry)
    limit_memory(full_r, 300_000)
    assert len(fill(client, "t.pad")) > 50
    before = snapshot(full_r, "q")
    attempts = [
        {},  # the fast path (engine-made id: may go to the intake)
        {"id": "01HZZZZZZZZZZZZZZZZZZZZZZZ"},  # a client-made id
        {"delay": 30},
        {"unique_key": "one-only"},
    ]
    for options in attempts:
        with pytest.raises(RedisFull, match=r"Redis is full .* job not enqueued") as refused:
            client.enqueue("t.pad", {"pad": PAD}, **options)
        assert len(refused.value.refused) == 1
    with pytest.raises(RedisFull):
        client.enqueue("t.pad", {"pad": PAD}, queue="brand-new")  # a new queue is refused before its SADD
    assert snapshot(full_r, "q") == before
    assert not full_r.sismember(keys.QUEUES, "brand-new")
    with pytest.raises(JobNotFound):
        client.get("01HZZZZZZZZZZZZZZZZZZZZZZZ", "q")
    full_r.config_set("maxmemory", 0)  # memory back: the same call goes through
    assert client.enqueue("t.pad", {"pad": PAD}, unique_key="one-only").created


def test_enqueue_many_says_which_jobs_went_in(full_r: "redis.Redis", registry: TaskRegistry) -> None:
    @registry.task(name="t.pad", queue="q")
    def pad(pad: str) -> None:
        pass

    client = Client(full_r, registry)
    client.enqueue("t.pad", {"pad": ""})  # the queue exists: only the jobs take memory below
    limit_memory(full_r, 400_000)
    specs = [JobSpec(task="t.pad", params={"pad": PAD}) for _ in range(2000)]
    with pytest.raises(RedisFull, match=r"\d+ of 2000 jobs enqueued, the rest not") as refused:
        client.enqueue_many(specs, batch_size=100)
    full = refused.value
    accepted = [result.id for result in full.accepted]
    assert 0 < len(accepted) < 2000 and len(accepted) + len(full.refused) == 2000
    # Batches go in order and none is sent after the first refusal: the accepted jobs are a prefix.
    assert sorted(accepted) == sorted(full.refused + accepted)[: len(accepted)]
    assert all(result.created for result in full.accepted)
    k = queue_keys("q")
    assert full_r.zcard(k.ready) == len(accepted) + 1
    present = full_r.pipeline(transaction=False)
    for job_id in full.refused:
        present.exists(k.job(job_id))
    assert sum(present.execute()) == 0


def test_workers_start_and_drain_while_redis_is_full(full_r: "redis.Redis", registry: TaskRegistry) -> None:
    @registry.task(name="t.pad", queue="q")
    def pad(context: JobContext, pad: str) -> int:
        time.sleep(0.001)
        context.heartbeat(progress=1.0)
        return len(pad)

    @registry.task(name="t.flaky", queue="q", max_retries=1, retry_delay=0.2, backoff_strategy="constant")
    def flaky(pad: str) -> None:
        raise ValueError("fails both attempts")

    @registry.task(name="t.slow", queue="q", visibility_timeout=1.0)
    def slow(pad: str) -> str:
        time.sleep(2.5)  # two and a half leases long: the worker's heartbeats must keep it
        return "done"

    client = Client(full_r, registry)
    client.enqueue("t.pad", {"pad": ""})
    doomed = client.enqueue("t.flaky", {"pad": PAD}).id
    long = client.enqueue("t.slow", {"pad": PAD}).id
    limit_memory(full_r, 300_000)
    padded = fill(client, "t.pad")
    with worker_in_thread(full_r, registry, ["q"], maintenance=True) as worker:
        # The worker started (its registry entry and heartbeats are allowed) and drains the backlog.
        wait_for(lambda: full_r.exists(keys.worker_key(worker.id)))
        wait_for(lambda: client.counts("q").completed == len(padded) + 2, timeout=30)
        wait_for(lambda: client.get(doomed, "q").state is JobState.DEAD, timeout=10)
    with pytest.raises(RedisFull):  # still full: finishing jobs freed nothing (they are kept for a day)
        client.enqueue("t.pad", {"pad": PAD})
    assert [a.outcome for a in client.get(doomed, "q").history] == ["failed", "failed"]
    assert client.get(long, "q").history[0].outcome == "completed"
    assert client.get(padded[-1], "q").result == len(PAD)
    assert not full_r.exists(keys.worker_key(worker.id))  # it left the registry on the way out


def test_the_recoverer_requeues_lost_leases_while_redis_is_full(full_r: "redis.Redis", registry: TaskRegistry) -> None:
    @registry.task(name="t.pad", queue="q", visibility_timeout=0.2)
    def pad(pad: str) -> None:
        pass

    client = Client(full_r, registry)
    client.enqueue("t.pad", {"pad": ""})
    limit_memory(full_r, 200_000)
    padded = fill(client, "t.pad")
    k = queue_keys("q")
    # A worker claims every job (claims are allowed while full), then dies: its leases run out.
    claim(full_r, "q", len(padded) + 1, "dead-worker", pid=123)
    assert full_r.zcard(k.active) == len(padded) + 1
    time.sleep(0.3)
    assert Maintenance(full_r).recover("q") == len(padded) + 1
    run_burst(full_r, registry, ["q"])
    job = client.get(padded[0], "q")
    assert job.state is JobState.COMPLETED and [a.outcome for a in job.history] == ["worker_lost", "completed"]


def test_only_enqueue_is_refused_when_redis_is_full() -> None:
    """The policy in one place: every script but enqueue.lua, enqueue_one.lua, workflow.lua and workflow_restore.lua
    (which add jobs) carries Redis's allow-oom flag; gauges.lua, which only reads, is no-writes too (the console
    reads it while Redis refuses writes of any kind)."""
    flags = {name: scripts.load(name).source.partition("\n")[0] for name in scripts.names()}
    refused = {"enqueue", "enqueue_one", "gauges", "workflow", "workflow_restore"}
    assert {name for name, shebang in flags.items() if shebang != "#!lua flags=allow-oom"} == refused
    assert (
        flags["enqueue"] == flags["enqueue_one"] == flags["workflow"] == "#!lua"
        and flags["gauges"] == "#!lua flags=no-writes,allow-oom"
    )


def test_operators_can_pause_cancel_requeue_and_delete_while_redis_is_full(
    full_r: "redis.Redis", registry: TaskRegistry
) -> None:
    @registry.task(name="t.pad", queue="q")
    def pad(pad: str) -> None:
        pass

    client = Client(full_r, registry)
    later = client.enqueue("t.pad", {"pad": ""}, delay=3600).id
    limit_memory(full_r, 200_000)
    padded = fill(client, "t.pad")
    assert client.pause("q") and client.counts("q").paused
    client.cancel(later, "q")
    client.requeue(later, "q")
    client.delete(padded[0], "q")
    client.resume("q")
    assert not client.counts("q").paused
    assert client.get(later, "q").state is JobState.QUEUED
    with pytest.raises(JobNotFound):
        client.get(padded[0], "q")
