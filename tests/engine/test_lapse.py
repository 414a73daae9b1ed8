"""Process heartbeats: a worker that stops beating is declared gone and its running jobs are taken back at once,
whatever their lease; only its own jobs; its late acks and beats are refused; a silence spares everyone."""

import json
import time

import redis

from jobconsole.core import Client, JobState, keys
from jobconsole.core.lapse import LapseWatch
from jobconsole.core.maintenance import Maintenance
from jobconsole.core.queries import Queries
from jobconsole.core.store import Store
from tests.helpers import claim, complete, heartbeat, wait_for
from tests.queue_fixtures import *  # noqa: F403  (the client and registry fixtures)

LONG_LEASE_MS = 300_000


def _register(store: Store, worker: str, *, expiry_ms: int, queues: str = "q") -> None:
    info = {"id": worker, "host": "h", "pid": 7, "queues": queues, "processed": 41, "failed": 2, "state": "running"}
    assert store.register_worker(worker, ttl_s=30, now_ms=store.time_ms(), info=dict(info)) == ""  # no control
    assert store.worker_beat(worker, expiry_ms=expiry_ms)


def _long_jobs(r: "redis.Redis", client: Client, n: int) -> list[str]:
    ids = [client.enqueue("t.ok").id for _ in range(n)]
    for job_id in ids:  # a 5-minute lease: only the process heartbeat can bring these back soon
        r.hset(keys.queue_keys("q").job(job_id), "lease_ms", LONG_LEASE_MS)
    return ids


def _watch(r: "redis.Redis") -> LapseWatch:
    store = Store(r, events_maxlen=1000)
    return LapseWatch(store, Queries(store), ttl_ms=1000)


def test_a_lapsed_worker_loses_its_jobs_at_once_and_only_its_own(r: "redis.Redis", client: Client) -> None:
    store = Store(r, events_maxlen=1000)
    _register(store, "dead", expiry_ms=300)
    _register(store, "alive", expiry_ms=60_000)
    _long_jobs(r, client, 4)
    mine = claim(r, "q", 2, worker="dead")
    theirs = claim(r, "q", 2, worker="alive")
    watch = _watch(r)
    assert watch.step() == 0  # nothing lapsed yet
    time.sleep(0.4)
    assert watch.step() == 2
    k = keys.queue_keys("q")
    for lease in mine:
        job = client.get(lease.id)
        assert job.state is JobState.QUEUED and job.attempts == 1
        assert job.history[-1].outcome == "worker_lost" and job.history[-1].error_class == "WorkerLost"
        assert "worker dead stopped heartbeating; last heartbeat 0." in job.history[-1].message
        assert " s before recovery" in job.history[-1].message
        # The paused worker's heartbeat and ack are refused: the token moved on.
        assert heartbeat(r, "q", lease.id, lease.token) == -1
        assert complete(r, "q", lease.id, lease.token) != 1
    for lease in theirs:
        assert client.get(lease.id).state is JobState.RUNNING
        assert heartbeat(r, "q", lease.id, lease.token) == 0
    assert set(r.zrange(k.active, 0, -1)) == {lease.id for lease in theirs}
    # The gone worker keeps its record (host, pid, queues, totals), with when and why; it can beat no more.
    gone = {w.id: w for w in client.queries.workers.all()}["dead"]
    assert gone.state == "gone" and gone.host == "h" and gone.pid == 7 and gone.queues == ["q"]
    assert gone.processed == 41 and gone.failed == 2 and gone.jobs_taken_back == 2
    assert gone.gone_at is not None and gone.gone_reason.startswith("no heartbeat for 0.")
    assert 0 < r.ttl(keys.worker_key("dead")) <= 3600
    assert not store.worker_beat("dead", expiry_ms=300)
    assert store.register_worker("dead", ttl_s=30, now_ms=store.time_ms(), info={"state": "running"}) is None
    assert watch.step() == 0  # declared once
    assert r.zcard(keys.TAKING) == 0


def test_taken_back_jobs_run_next_ahead_of_the_backlog(r: "redis.Redis", client: Client) -> None:
    """They were taken off the queue in their turn: back in front, oldest first, not behind what came since."""
    store = Store(r, events_maxlen=1000)
    _register(store, "dead", expiry_ms=300)
    _long_jobs(r, client, 2)
    lost = [lease.id for lease in claim(r, "q", 2, worker="dead")]
    backlog = [client.enqueue("t.ok").id for _ in range(3)]
    urgent = client.enqueue("t.ok", priority=-1).id  # a higher priority still goes first
    time.sleep(0.4)
    assert _watch(r).step() == 2
    order = [lease.id for lease in claim(r, "q", 6, worker="other")]
    assert order == [urgent, *sorted(lost), *backlog]


def test_a_takeback_drops_the_workers_idle_registration_and_inbox(r: "redis.Redis", client: Client) -> None:
    store = Store(r, events_maxlen=1000)
    _register(store, "dead", expiry_ms=300)
    k = keys.queue_keys("q")
    r.zadd(k.idle, {json.dumps(["dead", "h", 7]): store.time_ms() + 60_000, json.dumps(["other", "h", 8]): 1})
    r.rpush(k.inbox("dead"), "x")
    time.sleep(0.4)
    _watch(r).step()
    assert r.zrange(k.idle, 0, -1) == [json.dumps(["other", "h", 8])]
    assert not r.exists(k.inbox("dead"))


def test_an_unfinished_takeback_is_handed_out_again(r: "redis.Redis", client: Client) -> None:
    """A recoverer that died between declaring a worker gone and taking its jobs back leaves it in `taking`;
    after STALE_TAKING_MS another recoverer takes its jobs back."""
    store = Store(r, events_maxlen=1000)
    _register(store, "dead", expiry_ms=300)
    _long_jobs(r, client, 1)
    [lease] = claim(r, "q", 1, worker="dead")
    time.sleep(0.4)
    [lapsed] = store.lapse_workers(limit=10, keep_ms=60_000, keep=10, silence_ms=2000, spare_ms=3000, stale_ms=200)
    assert lapsed.worker == "dead" and lapsed.queues == ["q"]
    assert client.get(lease.id).state is JobState.RUNNING  # ... and the recoverer died here
    time.sleep(0.3)
    [again] = store.lapse_workers(limit=10, keep_ms=60_000, keep=10, silence_ms=2000, spare_ms=3000, stale_ms=200)
    assert again.worker == "dead"
    assert _watch(r).take_back(again) == 1
    assert client.get(lease.id).state is JobState.QUEUED


def test_after_a_silence_no_worker_is_declared_gone(r: "redis.Redis", client: Client) -> None:
    """No scan for longer than SILENCE_MS (Redis frozen or unreachable): no worker could beat either."""
    store = Store(r, events_maxlen=1000)
    _register(store, "w", expiry_ms=300)
    watch = _watch(r)
    watch.step()
    time.sleep(0.4)
    r.set(keys.WORKERS_SEEN, store.time_ms() - 5000)  # as if nothing had scanned for 5 s
    assert watch.step() == 0
    assert r.zscore(keys.ALIVE, "w") > store.time_ms() + 2000  # spared: a whole expiry from now
    assert not r.zscore(keys.GONE, "w")


def test_gone_records_are_bounded(r: "redis.Redis", client: Client) -> None:
    store = Store(r, events_maxlen=1000)
    for i in range(4):
        _register(store, f"w{i}", expiry_ms=300)
    time.sleep(0.4)
    LapseWatch(store, Queries(store), ttl_ms=1000, keep=2).step()
    _register(store, "late", expiry_ms=300)  # one more scan trims to the newest two
    LapseWatch(store, Queries(store), ttl_ms=1000, keep=2).step()
    assert r.zcard(keys.GONE) == 2
    assert sum(bool(r.exists(keys.worker_key(f"w{i}"))) for i in range(4)) == 2


def test_a_worker_that_leaves_is_not_declared_gone(r: "redis.Redis", client: Client) -> None:
    store = Store(r, events_maxlen=1000)
    _register(store, "w", expiry_ms=300)
    store.unregister_worker("w")
    time.sleep(0.4)
    assert _watch(r).step() == 0 and not r.zscore(keys.GONE, "w")


def test_a_lease_that_ran_out_says_when_in_words(r: "redis.Redis", client: Client) -> None:
    client.enqueue("t.ok")
    [lease] = claim(r, "q", 1)
    k = keys.queue_keys("q")
    now = Store(r).time_ms()
    r.hset(k.job(lease.id), "heartbeat_at", now - 12_000)
    r.zadd(k.active, {lease.id: now - 1})
    Maintenance(r).step()
    message = client.get(lease.id).history[-1].message
    assert message == "lease expired; last heartbeat 12 s before recovery", message


def test_every_recoverer_watches_not_only_the_leader(r: "redis.Redis", client: Client) -> None:
    store = Store(r, events_maxlen=1000)
    leader, other = Maintenance(r), Maintenance(r)
    assert leader.is_leader()
    _register(store, "dead", expiry_ms=300)
    _long_jobs(r, client, 1)
    [lease] = claim(r, "q", 1, worker="dead")
    time.sleep(0.4)
    assert other.step() == 1  # not the leader, and still takes the job back
    wait_for(lambda: client.get(lease.id).state is JobState.QUEUED, timeout=1)


def test_a_gone_workers_group_slots_are_given_back_at_once(r: "redis.Redis", client: Client) -> None:
    from jobconsole.core.groups import Group
    from jobconsole.core.keys import group_keys

    client.define_group(Group("ext", connections=2))
    store = Store(r, events_maxlen=1000)
    _register(store, "dead", expiry_ms=300)
    dead = store.group_acquire("ext", 1, holder="dead", lease_ms=LONG_LEASE_MS, queue="q").tokens
    kept = store.group_acquire("ext", 1, holder="dead:system", lease_ms=LONG_LEASE_MS, queue="q").tokens
    assert len(dead) == len(kept) == 1
    assert store.group_acquire("ext", 1, holder="other", lease_ms=1000, queue="q").tokens == []  # full
    time.sleep(0.4)
    _watch(r).step()
    assert r.zrange(group_keys("ext").slots, 0, -1) == kept  # only the gone worker's own slot came back
    assert r.lrange(keys.queue_keys("q").wake, 0, -1)  # the queue that waited for a slot is woken


def test_a_job_does_not_begin_when_the_process_heartbeat_is_stale(r: "redis.Redis", client: Client) -> None:
    """A worker frozen past two thirds of its expiry may have been declared gone, its jobs taken back whatever their
    lease: a job it had prefetched is given back instead of begun (run_sync's gate)."""
    from jobconsole.core.execution import Kind, run_sync
    from jobconsole.core.worker.liveness import Liveness

    store = Store(r, events_maxlen=1000)
    liveness = Liveness(store, lambda: "w", expiry_s=3.0)
    assert liveness.beat() and liveness.fresh()
    liveness.last_ok -= 2.5  # the process was frozen: no beat accepted for 2.5 s
    assert not liveness.fresh()
    from jobconsole.core.execution import RunningJob

    task = client.registry.find("t.ok")
    assert task is not None
    running = RunningJob(id="j", queue="q", token="w:1", task=task, attempt=1, max_retries=3, params={},
                         context=None, lease_s=300.0, timeout_s=None, process_alive=liveness.fresh)  # fmt: skip
    assert run_sync(running).kind is Kind.RELEASE and not running.began
    liveness.beat()
    assert run_sync(running).kind is not Kind.RELEASE and running.began
