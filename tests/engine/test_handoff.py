"""Direct hand-off: an enqueue leases its job straight to an idle worker's inbox (no claim round trip)."""

import json
import threading
import time

import redis

from jobconsole.core import Client, JobState, TaskRegistry, Worker
from jobconsole.core.keys import queue_keys
from jobconsole.core.maintenance import Maintenance
from jobconsole.core.queries.events import events_of
from jobconsole.core.results import Ack, Beat, Lease, decode_lease
from tests.helpers import claim, complete, heartbeat, wait_for, worker_in_thread
from tests.queue_fixtures import *  # noqa: F403  (the client and registry fixtures)

K = queue_keys("q")


def _redis_ms(r: "redis.Redis") -> int:
    seconds, micros = r.time()
    return int(seconds) * 1000 + int(micros) // 1000


def _register_idle(r: "redis.Redis", worker: str, valid_ms: int = 10_000) -> str:
    """What a worker's claim does when the ready set runs dry."""
    member = json.dumps([worker, "host", 42])
    r.zadd(K.idle, {member: _redis_ms(r) + valid_ms})
    return member


def _claim(r: "redis.Redis", worker: str, count: int = 10) -> list[Lease]:
    return claim(r, "q", count, worker, pid=42)


def test_an_idle_worker_is_handed_the_job_by_the_enqueue_itself(
    r: "redis.Redis", client: Client, registry: TaskRegistry
) -> None:
    with worker_in_thread(r, registry, ["q"]) as worker:
        wait_for(lambda: r.zcard(K.idle) == 1)  # its claim found nothing and registered it as idle
        result = client.enqueue("t.ok", {"x": 7})
        assert result.state is JobState.RUNNING  # leased to the worker inside the enqueue
        job = wait_for(lambda: (j := client.get(result.id)).state is JobState.COMPLETED and j)
        assert job.worker == worker.id and job.attempts == 1 and job.result == 7
        entries = r.xrange(K.events)
        events = [e.fields["event"] for i, f in entries for e in events_of("q", i, f) if e.fields["job"] == result.id]
        assert events == ["enqueued", "started", "completed"]
        assert r.zcard(K.ready) == 0 and r.llen(K.wake) == 0  # never went through the ready set
    assert r.zcard(K.idle) == 0 and not r.exists(K.inbox(worker.id))  # left nothing behind


def test_no_hand_off_while_paused_or_while_other_jobs_wait(r: "redis.Redis", client: Client) -> None:
    _register_idle(r, "w1")
    client.pause("q")
    assert r.zcard(K.idle) == 0  # a pause drops the registrations (the worker registers again on resume)
    assert client.enqueue("t.ok").state is JobState.QUEUED
    client.resume("q")
    _register_idle(r, "w1")
    # The queue still holds the job enqueued while paused: a newer job must not jump ahead of it.
    assert client.enqueue("t.ok").state is JobState.QUEUED
    assert r.llen(K.inbox("w1")) == 0


def test_one_registration_takes_one_job(r: "redis.Redis", client: Client) -> None:
    _register_idle(r, "w1")
    first, second = client.enqueue("t.ok"), client.enqueue("t.ok")
    assert first.state is JobState.RUNNING and second.state is JobState.QUEUED
    assert r.llen(K.inbox("w1")) == 1 and client.get(first.id).worker == "w1"


def test_a_lapsed_registration_is_ignored(r: "redis.Redis", client: Client) -> None:
    _register_idle(r, "gone", valid_ms=-1)
    assert client.enqueue("t.ok").state is JobState.QUEUED
    assert r.zcard(K.idle) == 0 and not r.exists(K.inbox("gone"))


def test_a_client_appends_while_no_worker_waits_and_hands_off_again_once_one_does(
    r: "redis.Redis", client: Client
) -> None:
    first = client.enqueue("t.ok")
    assert first.state is JobState.QUEUED  # by enqueue_one.lua: no worker waits idle
    r.config_resetstat()
    second = client.enqueue("t.ok")  # so this client now appends by a plain XADD: no script runs
    stats = r.info("commandstats")
    assert "cmdstat_evalsha" not in stats and stats["cmdstat_xadd"]["calls"] == 1
    assert second.state is JobState.QUEUED and r.xlen(K.intake) == 2 and r.llen(K.wake) == 0
    _register_idle(r, "w1")
    woke = client.enqueue("t.ok")  # an append that sees w1 waiting: it wakes it (w1's pop ends, and it claims)
    assert woke.state is JobState.QUEUED and r.llen(K.wake) == 1 and r.llen(K.inbox("w1")) == 0
    assert [lease.id for lease in _claim(r, "w1")] == [first.id, second.id, woke.id]  # w1 woke and claimed
    assert r.llen(K.wake) == 0  # the claim ran the ready set dry: no token left to wake anyone else
    _register_idle(r, "w1")
    handed = client.enqueue("t.ok")  # and its next enqueue hands the job to w1 in the same step again
    assert handed.state is JobState.RUNNING and client.get(handed.id).worker == "w1"


def test_delayed_jobs_are_not_handed_off(r: "redis.Redis", client: Client) -> None:
    _register_idle(r, "w1")
    assert client.enqueue("t.ok", delay=60).state is JobState.SCHEDULED
    assert r.zcard(K.idle) == 1


def test_a_claim_returns_handed_jobs_first_and_only_while_their_lease_is_current(
    r: "redis.Redis", client: Client
) -> None:
    _register_idle(r, "w1")
    handed = client.enqueue("t.ok").id
    queued = client.enqueue("t.ok").id
    [a, b] = _claim(r, "w1")
    assert (a.id, b.id) == (handed, queued)
    assert a.token == client.get(handed).token and a.attempt == 1
    assert not r.exists(K.inbox("w1")) and _claim(r, "w1") == []

    # A payload whose lease moved on (the recoverer requeued it, another worker claimed it) is dropped.
    _register_idle(r, "w2")
    # This client's last enqueue met no idle worker, so its next appends and wakes w2; a fresh one hands off.
    stale = Client(r, client.registry).enqueue("t.ok").id
    assert client.get(stale).state is JobState.RUNNING  # reading it made its leased intake entry a job hash
    r.hset(K.job(stale), "token", "someone-else:1")
    assert _claim(r, "w2") == []


def test_a_handed_job_is_one_leased_intake_entry_until_the_queue_is_next_touched(
    r: "redis.Redis", client: Client
) -> None:
    _register_idle(r, "w1")
    result = client.enqueue("t.ok", {"x": 3})
    assert result.state is JobState.RUNNING
    # The enqueue wrote only the durable lease (the entry) and the worker's copy (its inbox).
    assert not r.exists(K.job(result.id)) and r.xlen(K.intake) == 1 and r.xlen(K.events) == 0
    payload = decode_lease(json.loads(r.lindex(K.inbox("w1"), 0)))
    assert (payload.id, payload.attempt, payload.params) == (result.id, 1, '{"x":3}')

    job = client.get(result.id)  # a reader drains the intake first
    assert (job.state, job.worker, job.token, job.attempts) == (JobState.RUNNING, "w1", payload.token, 1)
    assert r.xlen(K.intake) == 0 and r.zcard(K.ready) == 0
    assert r.zscore(K.active, result.id) == payload.leased_at + 30_000
    events = [(e["event"], e["state"]) for _, e in r.xrange(K.events)]
    assert events == [("enqueued", "queued"), ("started", "running")]
    counters = {f.split("|", 1)[1]: int(v) for f, v in r.hgetall(K.stats).items()}
    assert counters == {"enqueued|t.ok": 1, "started|t.ok": 1}


def test_a_worker_acks_and_heartbeats_a_handed_job_before_anything_else_drained_it(
    r: "redis.Redis", client: Client
) -> None:
    _register_idle(r, "w1")
    job_id = client.enqueue("t.ok").id
    token = json.loads(r.lindex(K.inbox("w1"), 0))[1]
    assert heartbeat(r, "q", job_id, token) == Beat.RENEWED  # not "lease lost"
    _register_idle(r, "w1")
    other = client.enqueue("t.ok").id
    other_token = json.loads(r.lindex(K.inbox("w1"), 1))[1]
    done = complete(r, "q", other, other_token)
    assert done == Ack.COMPLETED and client.get(other).state is JobState.COMPLETED
    assert client.get(job_id).state is JobState.RUNNING


def test_a_handed_job_whose_worker_died_is_recovered(r: "redis.Redis") -> None:
    registry = TaskRegistry()

    @registry.task(name="t.short", queue="q", visibility_timeout=1)
    def short() -> None:
        pass

    client = Client(r, registry)
    _register_idle(r, "died")
    job_id = client.enqueue("t.short").id
    assert r.xlen(K.intake) == 1  # nothing but the entry and the inbox hold it
    time.sleep(1.1)
    Maintenance(r).step()  # drains the intake, then recovers the expired lease in the same pass
    job = client.get(job_id)
    assert job.state is JobState.QUEUED and [a.outcome for a in job.history] == ["worker_lost"]


def test_a_worker_on_its_way_out_gives_back_a_handed_job_without_using_an_attempt(
    r: "redis.Redis", client: Client, registry: TaskRegistry
) -> None:
    worker = Worker(r, ["q"], registry, name="leaving", maintenance=False)
    r.zadd(K.idle, {worker.identity.idle_member: _redis_ms(r) + 10_000})
    job_id = client.enqueue("t.ok").id  # handed to it just as it stopped watching its inbox
    assert client.get(job_id).state is JobState.RUNNING
    worker.exchange.leave()
    job = client.get(job_id)
    assert job.state is JobState.QUEUED and job.attempts == 0
    assert [a.outcome for a in job.history] == ["requeued"]
    assert r.zcard(K.idle) == 0 and not r.exists(K.inbox("leaving"))


def test_the_lease_counts_from_when_it_began_not_from_when_the_worker_read_it(
    r: "redis.Redis", client: Client, registry: TaskRegistry
) -> None:
    """A dispatcher starved of CPU reads a claim reply (or its inbox) late: the lease has been running since
    Redis granted it. The worker must count from then, or a heartbeat comes too late for a live job."""
    _register_idle(r, "w")
    handed = client.enqueue("t.ok")
    assert handed.state is JobState.RUNNING
    payload = decode_lease(json.loads(r.lpop(K.inbox("w"))))
    worker = Worker(r, ["q"], registry, name="w", maintenance=False)
    fresh = worker.launcher.start("q", payload, time.monotonic())
    assert fresh is not None and fresh.lease_fresh()
    assert fresh.next_heartbeat - time.monotonic() > 30.0 / 3 - 1  # 30 s lease, granted just now

    late = payload._replace(leased_at=payload.leased_at - 25_000)  # granted 25 s before it was read
    job = Worker(r, ["q"], registry, name="w2", maintenance=False).launcher.start("q", late, time.monotonic())
    assert job is not None
    assert not job.lease_fresh()  # 5 s of a 30 s lease left: not started, given back instead
    assert job.next_heartbeat <= time.monotonic()  # and renewed at the heartbeat thread's next pass


def test_a_fully_idle_worker_runs_a_handed_job_on_a_task_thread_and_keeps_claiming_meanwhile(
    r: "redis.Redis", client: Client, registry: TaskRegistry
) -> None:
    """The blocking pop of a fully idle worker is made by a task thread, which then runs the handed job
    itself (one wake-up fewer). A long job run that way must not hold up the dispatcher: other jobs are
    claimed and run beside it."""
    release = threading.Event()
    threads: dict[str, str] = {}

    @registry.task(name="t.long", queue="q")
    def long_job() -> None:
        threads["long"] = threading.current_thread().name
        release.wait(10)

    @registry.task(name="t.short", queue="q")
    def short_job(n: int) -> int:
        threads[f"short-{n}"] = threading.current_thread().name
        return n

    with worker_in_thread(r, registry, ["q"], concurrency=3):
        wait_for(lambda: r.zcard(K.idle) == 1)
        long_id = client.enqueue("t.long").id
        wait_for(lambda: "long" in threads)
        assert threads["long"].startswith("jc-task")
        # While the handed job runs, the dispatcher claims (or is handed) and runs the next jobs.
        shorts = [client.enqueue("t.short", {"n": n}).id for n in range(5)]
        for job_id in shorts:
            wait_for(lambda job_id=job_id: client.get(job_id).state is JobState.COMPLETED)
        assert client.get(long_id).state is JobState.RUNNING
        release.set()
        wait_for(lambda: client.get(long_id).state is JobState.COMPLETED)
