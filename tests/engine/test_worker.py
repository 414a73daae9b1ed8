"""The worker and the scripts behind it: outcomes, retries, dead letters, leases, cancel, pause, requeue."""

import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest
import redis

from jobconsole.core import (
    Cancelled,
    Client,
    JobContext,
    JobState,
    JobStateConflict,
    PermanentError,
    Retry,
    TaskRegistry,
    Worker,
)
from jobconsole.core.errors import LeaseLost
from jobconsole.core.keys import queue_keys
from jobconsole.core.maintenance import Maintenance
from jobconsole.core.results import Beat, Lease
from jobconsole.core.store import Store
from jobconsole.core.worker import PREFETCH_MAX, PREFETCH_MIN, prefetch_count
from tests.helpers import claim, complete, heartbeat, run_burst, wait_for, worker_in_thread


class Boom(Exception):
    pass


class Other(Exception):
    pass


@pytest.fixture
def registry() -> TaskRegistry:
    reg = TaskRegistry()

    @reg.task(name="t.ok", queue="q")
    def ok(x: int = 0) -> dict[str, int]:
        return {"x": x}

    @reg.task(name="t.boom", queue="q", max_retries=2, retry_delay=0.05, backoff_strategy="constant")
    def boom() -> None:
        raise Boom("it broke")

    @reg.task(name="t.picky", queue="q", max_retries=5, retry_delay=0.05, retry_on=[Boom])
    def picky(kind: str) -> None:
        raise Boom("retry me") if kind == "boom" else Other("do not retry me")

    @reg.task(name="t.permanent", queue="q", max_retries=5, retry_delay=0.05)
    def permanent() -> None:
        raise PermanentError("bad input, retrying will not help")

    @reg.task(name="t.retry_later", queue="q", max_retries=1)
    def retry_later(context: JobContext) -> int:
        if context.attempt == 1:
            raise Retry(delay=0.3)
        return context.attempt

    @reg.task(name="t.discard", queue="q", max_retries=0, dead_letter_policy="discard")
    def discard() -> None:
        raise Boom("discarded")

    @reg.task(name="t.slow", queue="q", timeout=0.3, max_retries=1, retry_delay=0.05)
    def slow() -> None:
        for _ in range(100):
            time.sleep(0.02)

    @reg.task(name="t.async_slow", queue="q", timeout=0.3, max_retries=0)
    async def async_slow() -> None:
        import asyncio

        await asyncio.sleep(5)

    @reg.task(name="t.async_ok", queue="q")
    async def async_ok(x: int) -> int:
        return x * 2

    @reg.task(name="t.checkpoint", queue="q", max_retries=1, retry_delay=0.05)
    def checkpoint(context: JobContext) -> Any:
        if context.attempt == 1:
            context.heartbeat(progress=0.5, checkpoint={"step": 7})
            raise Boom("crash after saving a checkpoint")
        return context.checkpoint

    @reg.task(name="t.cancellable", queue="q", visibility_timeout=0.6)
    def cancellable(context: JobContext) -> str:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if context.cancel_requested:
                raise Cancelled("saw the request")
            time.sleep(0.02)
        return "never cancelled"

    @reg.task(name="t.unserialisable", queue="q", max_retries=3)
    def unserialisable() -> object:
        return object()

    return reg


@pytest.fixture
def client(r: "redis.Redis", registry: TaskRegistry) -> Client:
    return Client(r, registry)


def test_success_records_result_and_one_attempt(r: "redis.Redis", client: Client, registry: TaskRegistry) -> None:
    job_id = client.enqueue("t.ok", {"x": 3}).id
    run_burst(r, registry, ["q"])
    job = client.get(job_id)
    assert job.state is JobState.COMPLETED and job.result == {"x": 3} and job.attempts == 1
    [attempt] = job.history
    assert attempt.outcome == "completed" and attempt.attempt == 1 and attempt.pid > 0 and attempt.host
    assert attempt.started_at and attempt.ended_at and attempt.started_at <= attempt.ended_at
    # A first attempt that succeeds is recorded by the hash's own fields: no attempt list (complete.lua).
    assert not r.exists(queue_keys("q").attempts(job_id))
    h = r.hgetall(queue_keys("q").job(job_id))
    assert (attempt.worker, attempt.host, str(attempt.pid)) == (h["worker"], h["host"], h["pid"])
    assert (attempt.started_at, attempt.ended_at) == (job.started_at, job.finished_at)
    assert r.zscore(queue_keys("q").sets["completed"], job_id) is not None
    assert r.zcard(queue_keys("q").active) == 0


def test_failures_retry_with_backoff_then_dead_letter_with_full_history(
    r: "redis.Redis", client: Client, registry: TaskRegistry
) -> None:
    job_id = client.enqueue("t.boom").id
    run_burst(r, registry, ["q"], burst_horizon=2)
    job = client.get(job_id)
    assert job.state is JobState.DEAD and job.attempts == 3  # 1 + max_retries 2
    assert [a.outcome for a in job.history] == ["failed"] * 3
    assert [a.attempt for a in job.history] == [1, 2, 3]
    for a in job.history:
        assert a.error_class == "tests.engine.test_worker.Boom" and a.message == "it broke"
        assert "raise Boom" in a.traceback and "test_worker.py" in a.top_frame
    gaps = [(b.started_at - a.ended_at).total_seconds() for a, b in zip(job.history, job.history[1:], strict=False)]  # type: ignore[operator]
    assert all(g >= 0.05 for g in gaps)  # never before the backoff
    assert job.last_error and job.last_error["error_class"].endswith("Boom")
    assert r.zscore(queue_keys("q").sets["dead"], job_id) is not None


def test_only_listed_exceptions_retry(r: "redis.Redis", client: Client, registry: TaskRegistry) -> None:
    retried = client.enqueue("t.picky", {"kind": "boom"}, max_retries=1).id
    not_retried = client.enqueue("t.picky", {"kind": "other"}).id
    permanent = client.enqueue("t.permanent").id
    run_burst(r, registry, ["q"], burst_horizon=2)
    assert client.get(retried).attempts == 2  # per-job max_retries overrides the task's 5
    assert client.get(not_retried).attempts == 1 and client.get(not_retried).state is JobState.DEAD
    assert client.get(permanent).attempts == 1 and client.get(permanent).state is JobState.DEAD


def test_a_task_stopped_by_lease_lost_is_retried_even_when_its_policy_would_not(
    r: "redis.Redis", client: Client, registry: TaskRegistry
) -> None:
    """context.heartbeat() raises LeaseLost when Redis was unreachable for longer than the lease. If the lease is in
    fact still this worker's, the job must go back for another attempt: it was stopped for safety, not broken,
    so neither retry_on nor the exception's class may dead-letter it."""

    @registry.task(name="t.unlucky", queue="q", max_retries=3, retry_delay=0.05, retry_on=[Boom])
    def unlucky(context: JobContext) -> int:
        if context.attempt == 1:
            raise LeaseLost(f"job {context.job_id}: Redis unreachable for longer than the lease")
        return context.attempt

    job_id = client.enqueue("t.unlucky").id
    run_burst(r, registry, ["q"], burst_horizon=2)
    job = client.get(job_id)
    assert job.state is JobState.COMPLETED and job.result == 2
    assert [a.outcome for a in job.history] == ["failed", "completed"]
    assert job.history[0].error_class.endswith("LeaseLost")


def test_retry_with_explicit_delay(r: "redis.Redis", client: Client, registry: TaskRegistry) -> None:
    job_id = client.enqueue("t.retry_later").id
    run_burst(r, registry, ["q"], burst_horizon=2)
    job = client.get(job_id)
    assert job.state is JobState.COMPLETED and job.result == 2
    first, second = job.history
    assert (second.started_at - first.ended_at).total_seconds() >= 0.3  # type: ignore[operator]


def test_discard_policy_ends_failed_not_dead(r: "redis.Redis", client: Client, registry: TaskRegistry) -> None:
    job_id = client.enqueue("t.discard").id
    run_burst(r, registry, ["q"])
    assert client.get(job_id).state is JobState.FAILED
    assert r.zcard(queue_keys("q").sets["dead"]) == 0


def test_timeouts_interrupt_sync_and_async_tasks(r: "redis.Redis", client: Client, registry: TaskRegistry) -> None:
    sync_id = client.enqueue("t.slow").id
    async_id = client.enqueue("t.async_slow").id
    started = time.monotonic()
    run_burst(r, registry, ["q"], burst_horizon=2)
    assert time.monotonic() - started < 3
    sync_job, async_job = client.get(sync_id), client.get(async_id)
    assert [a.outcome for a in sync_job.history] == ["timeout", "timeout"]
    assert sync_job.state is JobState.DEAD
    assert [a.outcome for a in async_job.history] == ["timeout"]


def test_async_task_runs_on_the_event_loop(r: "redis.Redis", client: Client, registry: TaskRegistry) -> None:
    job_id = client.enqueue("t.async_ok", {"x": 21}).id
    run_burst(r, registry, ["q"])
    assert client.get(job_id).result == 42


def test_checkpoint_reaches_the_next_attempt(r: "redis.Redis", client: Client, registry: TaskRegistry) -> None:
    job_id = client.enqueue("t.checkpoint").id
    run_burst(r, registry, ["q"], burst_horizon=2)
    job = client.get(job_id)
    assert job.state is JobState.COMPLETED and job.result == {"step": 7} and job.progress == 0.5


def test_unserialisable_result_fails_without_retry(r: "redis.Redis", client: Client, registry: TaskRegistry) -> None:
    job_id = client.enqueue("t.unserialisable").id
    run_burst(r, registry, ["q"])
    job = client.get(job_id)
    assert job.state is JobState.DEAD and job.attempts == 1 and "JSON" in job.history[0].message


def test_cancel_waiting_scheduled_and_running_jobs(r: "redis.Redis", client: Client, registry: TaskRegistry) -> None:
    waiting = client.enqueue("t.ok").id
    scheduled = client.enqueue("t.ok", delay=60).id
    assert client.cancel(waiting) == "cancelled" and client.cancel(scheduled) == "cancelled"
    assert client.counts("q").queued == 0 and client.counts("q").scheduled == 0
    running = client.enqueue("t.cancellable").id
    with worker_in_thread(r, registry, ["q"]):
        wait_for(lambda: client.get(running).state is JobState.RUNNING)
        assert client.cancel(running) == "requested"
        wait_for(lambda: client.get(running).state is JobState.CANCELLED, timeout=5)
    assert client.get(running).history[-1].outcome == "cancelled"
    with pytest.raises(JobStateConflict):
        client.cancel(running)


def test_pause_and_resume(r: "redis.Redis", client: Client, registry: TaskRegistry) -> None:
    job_id = client.enqueue("t.ok").id
    assert client.pause("q") and not client.pause("q")
    run_burst(r, registry, ["q"])
    assert client.get(job_id).state is JobState.QUEUED
    assert client.counts("q").paused
    assert client.resume("q")
    run_burst(r, registry, ["q"])
    assert client.get(job_id).state is JobState.COMPLETED


def test_requeue_dead_job_keeps_history_and_can_reset_attempts(
    r: "redis.Redis", client: Client, registry: TaskRegistry
) -> None:
    job_id = client.enqueue("t.boom", max_retries=0).id
    run_burst(r, registry, ["q"])
    assert client.get(job_id).state is JobState.DEAD
    client.requeue(job_id)
    run_burst(r, registry, ["q"])
    job = client.get(job_id)
    assert job.state is JobState.DEAD and job.attempts == 2 and len(job.history) == 2
    client.requeue(job_id, reset_attempts=True)
    assert client.get(job_id).attempts == 0
    run_burst(r, registry, ["q"])
    assert [a.attempt for a in client.get(job_id).history] == [1, 2, 1]
    with pytest.raises(JobStateConflict):
        client.requeue(client.enqueue("t.ok").id)  # already queued


def test_delete_removes_job_and_history_but_not_a_running_one(
    r: "redis.Redis", client: Client, registry: TaskRegistry
) -> None:
    job_id = client.enqueue("t.ok").id
    client.delete(job_id)
    assert r.exists(queue_keys("q").job(job_id)) == 0 and client.counts("q").queued == 0
    running = client.enqueue("t.ok").id
    claim(r, "q", 1)
    with pytest.raises(JobStateConflict):
        client.delete(running)


def _claim_one(r: "redis.Redis", queue: str = "q") -> Lease:
    [lease] = claim(r, queue, 1, "test-worker", pid=123)
    return lease


def _complete(r: "redis.Redis", job_id: str, token: str) -> int:
    return complete(r, "q", job_id, token, '"late"')


def test_stale_lease_token_cannot_ack_heartbeat_or_fail(r: "redis.Redis", client: Client) -> None:
    k = queue_keys("q")
    job_id = client.enqueue("t.ok").id
    first = _claim_one(r)
    r.zadd(k.active, {job_id: 0})  # the lease has expired
    assert Maintenance(r).recover("q") == 1
    second = _claim_one(r)
    assert second.token != first.token
    assert heartbeat(r, "q", job_id, first.token) == Beat.LOST
    store = Store(r)
    failed = store.run(
        store.fail_call("q", job_id, first.token, outcome="failed", retry=False, delay_ms=0,
                        error={"error_class": "X"}, runtime_ms=1, ttl_ms=0)
    )  # fmt: skip
    assert not failed.recorded
    assert _complete(r, job_id, first.token) == 0  # the zombie is refused
    assert client.get(job_id).state is JobState.RUNNING
    assert _complete(r, job_id, second.token) == 1  # the owner is not
    assert _complete(r, job_id, second.token) == 2  # a repeated ack is recognised, not re-applied
    job = client.get(job_id)
    assert job.state is JobState.COMPLETED and [a.outcome for a in job.history] == ["worker_lost", "completed"]


def test_recoverer_finds_every_expired_lease_not_only_the_oldest(r: "redis.Redis", client: Client) -> None:
    k = queue_keys("q")
    ids = [client.enqueue("t.ok", max_retries=1).id for _ in range(450)]
    for _ in ids:
        _claim_one(r)
    r.zadd(k.active, dict.fromkeys(ids[:300], 1))  # 300 expired, 150 still leased
    assert Maintenance(r).recover("q") == 300
    assert client.counts("q").queued == 300 and client.counts("q").running == 150
    job = client.get(ids[0])
    assert job.attempts == 1 and job.history[0].outcome == "worker_lost"
    # A job that is lost again with no retries left is dead-lettered, not requeued.
    for _ in range(300):
        _claim_one(r)
    r.zadd(k.active, {ids[0]: 1})
    Maintenance(r).recover("q")
    job = client.get(ids[0])
    assert job.state is JobState.DEAD and [a.outcome for a in job.history] == ["worker_lost", "worker_lost"]


def test_a_job_asked_to_cancel_whose_worker_died_ends_cancelled_not_requeued(r: "redis.Redis", client: Client) -> None:
    k = queue_keys("q")
    job_id = client.enqueue("t.ok", max_retries=3, unique_key="only-one").id
    _claim_one(r)
    assert client.cancel(job_id) == "requested"  # its worker would see it at its next heartbeat: it died first
    r.zadd(k.active, {job_id: 1})
    assert Maintenance(r).recover("q") == 1
    job = client.get(job_id)
    assert job.state is JobState.CANCELLED and [a.outcome for a in job.history] == ["worker_lost"]
    assert client.counts("q").queued == 0 and r.zscore(k.sets["cancelled"], job_id) is not None
    assert client.enqueue("t.ok", unique_key="only-one").created  # its unique key was let go


def run_burst_with_recoverer(r: "redis.Redis", registry: TaskRegistry) -> None:
    """A burst worker on queue q, with a recoverer passing every 0.1 s beside it."""
    stop = threading.Event()
    recoverer = threading.Thread(target=Maintenance(r, interval=0.1).run, args=(stop,))
    recoverer.start()
    try:
        run_burst(r, registry, ["q"])
    finally:
        stop.set()
        recoverer.join()


def test_heartbeats_keep_a_long_job_leased(r: "redis.Redis", registry: TaskRegistry) -> None:
    @registry.task(name="t.long", queue="q", visibility_timeout=0.5, max_retries=0)
    def long() -> str:
        time.sleep(1.6)  # three leases long, without calling heartbeat() itself
        return "done"

    client = Client(r, registry)
    job_id = client.enqueue("t.long").id
    run_burst_with_recoverer(r, registry)
    job = client.get(job_id)
    assert job.state is JobState.COMPLETED and [a.outcome for a in job.history] == ["completed"]


def test_task_that_stops_heartbeating_is_treated_as_stalled(r: "redis.Redis", registry: TaskRegistry) -> None:
    @registry.task(name="t.hung", queue="q", visibility_timeout=0.4, max_heartbeat_interval=0.2, max_retries=0)
    def hung(context: JobContext) -> str:
        context.heartbeat()
        time.sleep(1.5)  # hangs without reporting
        return "too late"

    client = Client(r, registry)
    job_id = client.enqueue("t.hung").id
    run_burst_with_recoverer(r, registry)
    job = client.get(job_id)
    assert job.state is JobState.DEAD and job.history[0].outcome == "worker_lost"


def test_unknown_task_on_the_worker_is_dropped_with_a_reason(r: "redis.Redis", registry: TaskRegistry) -> None:
    loose = Client(r, TaskRegistry(), strict=False)
    job_id = loose.enqueue("t.elsewhere", {"a": 1}, queue="q").id
    run_burst(r, registry, ["q"])
    job = loose.get(job_id)
    assert job.state is JobState.DROPPED and "t.elsewhere" in job.reason and job.attempts == 0
    loose.requeue(job_id)
    assert loose.get(job_id).state is JobState.QUEUED


def test_max_tasks_stops_the_worker(r: "redis.Redis", client: Client, registry: TaskRegistry) -> None:
    for x in range(5):
        client.enqueue("t.ok", {"x": x})
    worker = run_burst(r, registry, ["q"], max_tasks=3, concurrency=2)
    assert worker.processed == 3 and client.counts("q").queued == 2


def test_queues_are_claimed_in_the_order_given(r: "redis.Redis", registry: TaskRegistry) -> None:
    seen: list[str] = []

    @registry.task(name="t.first", queue="first")
    def first() -> None:
        seen.append("first")

    @registry.task(name="t.second", queue="second")
    def second() -> None:
        seen.append("second")

    client = Client(r, registry)
    for _ in range(3):
        client.enqueue("t.second")
        client.enqueue("t.first")
    run_burst(r, registry, ["first", "second"], concurrency=1)
    assert seen == ["first"] * 3 + ["second"] * 3


def test_leader_lock_admits_one_maintainer(r: "redis.Redis") -> None:
    a, b = Maintenance(r, lock_ttl=0.3), Maintenance(r, lock_ttl=0.3)
    assert a.is_leader() and not b.is_leader() and a.is_leader()
    time.sleep(0.4)  # a stopped renewing
    assert b.is_leader() and not a.is_leader()
    b.release()
    assert a.is_leader()


def test_idle_worker_picks_up_a_new_job_within_milliseconds(
    r: "redis.Redis", client: Client, registry: TaskRegistry
) -> None:
    with worker_in_thread(r, registry, ["q"]):
        time.sleep(0.3)  # the worker is now blocked waiting for work
        samples = []
        for _ in range(20):
            job_id = client.enqueue("t.ok").id
            job = wait_for(lambda job_id=job_id: (j := client.get(job_id)).state is JobState.COMPLETED and j, 2, 0.001)
            samples.append((job.started_at - job.enqueued_at).total_seconds())
        samples.sort()
        assert samples[len(samples) // 2] < 0.05  # no polling interval: woken by the enqueue itself


def test_claim_whose_reply_was_lost_is_given_back_without_using_an_attempt(
    r: "redis.Redis", client: Client, registry: TaskRegistry
) -> None:
    kept, orphan = client.enqueue("t.ok").id, client.enqueue("t.ok").id
    # Redis ran this worker's claim, but the connection broke before the reply arrived.
    claim(r, "q", 2, "worker-a")
    other = client.enqueue("t.ok").id
    claim(r, "q", 1, "worker-b", pid=2)
    worker = Worker(r, ["q"], registry, name="worker-a", maintenance=False)
    worker.running[kept] = SimpleNamespace(queue="q")  # type: ignore[assignment]  # the reply that did arrive
    worker.exchange.release_orphans()
    assert client.get(kept).state is JobState.RUNNING  # known to the worker: left alone
    assert client.get(other).state is JobState.RUNNING  # another worker's: left alone
    job = client.get(orphan)
    assert job.state is JobState.QUEUED and job.attempts == 0
    assert [a.outcome for a in job.history] == ["requeued"]


def test_leases_that_ran_out_while_redis_was_away_get_their_remaining_time_back(
    r: "redis.Redis", client: Client
) -> None:
    k = queue_keys("q")
    ids = [client.enqueue("t.ok").id for _ in range(5)]
    for _ in ids:
        _claim_one(r)
    lapsed_in_outage, expired_before, about_to_lapse, short_lease, far_ahead = ids
    r.hset(k.job(short_lease), "lease_ms", 2_000)  # the others have the default 30 s
    seconds, micros = r.time()
    now = seconds * 1000 + micros // 1000
    # Redis was unreachable for the last 10 s (11 s with the recoverer's margin). One lease ran out 2 s ago,
    # 4 s after the outage began: its worker could not renew it. One had run out before the outage: that
    # worker is really gone. Two run out 1 s from now: their workers, held up by the same outage, may
    # renew a little after the recoverer is back. One runs out long after that: nothing to do.
    r.zadd(k.active, {lapsed_in_outage: now - 7_000, expired_before: now - 20_000, about_to_lapse: now + 1_000,
                      short_lease: now + 1_000, far_ahead: now + 25_000})  # fmt: skip
    maintenance = Maintenance(r, interval=0.1)
    maintenance._last_ok -= 10  # what the maintenance loop saw: no pass could reach Redis for 10 s
    assert maintenance.is_leader()
    assert maintenance.step() == 1
    assert client.get(expired_before).state is JobState.QUEUED
    deadlines = {job_id: r.zscore(k.active, job_id) for job_id in ids}
    assert deadlines[expired_before] is None
    assert all(client.get(i).state is JobState.RUNNING for i in ids if i != expired_before)
    left = {job_id: d - now for job_id, d in deadlines.items() if d is not None}
    assert 3_000 <= left[lapsed_in_outage] <= 5_000  # what it had left when the outage began
    assert 11_500 <= left[about_to_lapse] <= 12_500  # the outage (11 s) added
    assert 1_500 <= left[short_lease] <= 2_500  # capped at one lease (2 s) from now
    assert left[far_ahead] == 25_000  # untouched
    assert maintenance.step() == 0  # the next, timely pass spares nothing more and recovers nothing


def test_a_prefetched_job_whose_lease_may_be_gone_is_not_started(registry: TaskRegistry) -> None:
    from jobconsole.core.execution import Kind, RunningJob, run_sync

    calls: list[int] = []
    task = registry.register(lambda: calls.append(1), name="t.counted", queue="q")
    job = RunningJob(
        id="j", queue="q", token="t", task=task, attempt=1, max_retries=0, params={}, context=None,
        lease_s=3.0, timeout_s=None,
    )  # fmt: skip
    job.renewed -= 2.5  # the process was frozen: no renewal for most of the lease
    assert run_sync(job).kind is Kind.RELEASE and calls == []
    job.renewed = time.monotonic()
    assert run_sync(job).kind is Kind.COMPLETE and calls == [1]


def test_worker_registry_reads_redis_clock_not_the_hosts(
    r: "redis.Redis", registry: TaskRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jobconsole.core import keys

    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() + 3600)  # this host's clock is an hour fast
    worker = Worker(r, ["q"], registry, maintenance=False)
    worker.registration.start()
    try:
        seconds, micros = r.time()
        redis_ms = int(seconds) * 1000 + int(micros) // 1000
        info = r.hgetall(keys.worker_key(worker.id))
        assert abs(int(info["heartbeat_at"]) - redis_ms) < 5000
        assert abs(int(info["started_at"]) - redis_ms) < 5000
        assert abs(int(r.zscore(keys.WORKERS, worker.id) or 0) - redis_ms) < 5000
    finally:
        worker.registration.remove()


def test_prefetch_covers_more_jobs_the_shorter_they_are_within_bounds() -> None:
    assert prefetch_count(25.0, threads=10) == 0  # long tasks: a claimed job never waits behind another
    assert prefetch_count(5.0, threads=10) == PREFETCH_MIN  # 10 ms per thread is 20 jobs
    assert prefetch_count(2.0, threads=10) == 50
    assert prefetch_count(2.0, threads=3) == PREFETCH_MIN  # 15 by work, raised to the floor
    assert prefetch_count(0.05, threads=3) == PREFETCH_MAX  # no-ops: bounded, so no worker hoards a burst
    assert prefetch_count(0.0, threads=1) == PREFETCH_MAX


def test_a_freed_slot_is_claimed_at_once_while_tasks_are_long(r: "redis.Redis", registry: TaskRegistry) -> None:
    """Outcomes are gathered for a moment so that one round trip reports many, but only while jobs claimed
    ahead keep the threads busy: long tasks get none, so waiting would leave a thread idle on every job."""
    from jobconsole.core.execution import Kind, Outcome

    worker = Worker(r, ["q"], registry, concurrency=4, maintenance=False)
    try:
        exchange = worker.exchange
        exchange.pending = [Outcome(job=None, kind=Kind.COMPLETE, runtime_ms=50)]  # gather only counts them
        worker.running.update(dict.fromkeys(["a", "b", "c", "d"]))
        exchange.avg_runtime_ms = 50.0  # nothing claimed ahead
        began = time.monotonic()
        assert exchange.gather(window=1.0) == 1
        assert time.monotonic() - began < 0.5

        exchange.avg_runtime_ms = 1.0  # short tasks: 40 claimed ahead, most of them still held
        worker.running.clear()
        worker.running.update(dict.fromkeys(str(i) for i in range(40)))
        began = time.monotonic()
        assert exchange.gather(window=0.3) == 5  # 4 slots + 40 ahead - 40 held + 1 finished
        assert time.monotonic() - began >= 0.3
    finally:
        worker._threads.stop()
