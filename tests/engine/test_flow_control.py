"""Flow control against a real Redis: concurrency groups, rate limits and queue limits across workers, and a
worker's queue order (strict or weighted)."""

import random
import threading
import time
from collections import Counter
from contextlib import ExitStack
from typing import Any

import pytest
import redis

from jobconsole.core import Client, JobState, TaskRegistry
from jobconsole.core.editing import edit_job
from jobconsole.core.groups import Group
from jobconsole.core.keys import group_keys, queue_keys
from jobconsole.core.store import Store, WorkerIdentity
from jobconsole.core.worker.exchange import ClaimOrder
from tests.helpers import claim, wait_for, worker_in_thread


class Meter:
    """Counts a task's runs at once (the peak) and when each began."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.peak = 0
        self.starts: list[float] = []
        self.done = 0

    def enter(self) -> None:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
            self.starts.append(time.monotonic())

    def leave(self) -> None:
        with self.lock:
            self.now -= 1
            self.done += 1


@pytest.fixture
def meter() -> Meter:
    return Meter()


@pytest.fixture
def registry(meter: Meter) -> TaskRegistry:
    registry = TaskRegistry()

    def sleeper(seconds: float = 0.3) -> None:
        meter.enter()
        try:
            time.sleep(seconds)
        finally:
            meter.leave()

    registry.register(sleeper, name="ext.call", queue="q", group="ext", max_retries=0)
    registry.register(sleeper, name="ext.other", queue="q2", group="ext", max_retries=0)
    registry.register(lambda: None, name="plain", queue="q")
    registry.register(lambda: None, name="side.call", queue="q", group="side")
    registry.register(sleeper, name="limited", queue="lq")
    return registry


@pytest.fixture
def client(r: "redis.Redis", registry: TaskRegistry) -> Client:
    return Client(r, registry)


def workers(r: "redis.Redis", registry: TaskRegistry, n: int, queues: list[str], **options: object) -> ExitStack:
    stack = ExitStack()
    for _ in range(n):
        stack.enter_context(worker_in_thread(r, registry, queues, **options))
    return stack


def test_runqueues_scenario_three_due_jobs_with_two_connections_run_two_at_once(
    r: "redis.Redis", client: Client, registry: TaskRegistry, meter: Meter
) -> None:
    client.define_group(Group("ext", connections=2))
    ids = [client.enqueue("ext.call", {"seconds": 0.5}).id for _ in range(3)]
    with workers(r, registry, 2, ["q", "q2"], concurrency=5):
        wait_for(lambda: meter.now == 2, 5)
        time.sleep(0.2)
        assert meter.now == 2  # the third waits for a slot, on neither worker
        wait_for(lambda: meter.done == 3, 10)
    assert meter.peak == 2
    for job_id in ids:
        job = client.get(job_id)
        assert job.state is JobState.COMPLETED and job.attempts == 1  # waiting used no attempt
    assert r.zcard(group_keys("ext").slots) == 0  # every slot given back


def test_a_group_spans_queues_and_tasks_and_holds_across_workers(
    r: "redis.Redis", client: Client, registry: TaskRegistry, meter: Meter
) -> None:
    client.define_group(Group("ext", connections=3))
    for n in range(12):
        client.enqueue("ext.call" if n % 2 else "ext.other", {"seconds": 0.15})
    with workers(r, registry, 3, ["q", "q2"], concurrency=4):
        wait_for(lambda: meter.done == 12, 20)
    assert meter.peak == 3
    assert r.zcard(group_keys("ext").slots) == 0


def test_jobs_waiting_for_a_slot_do_not_hold_up_other_jobs_of_the_queue(
    r: "redis.Redis", client: Client, registry: TaskRegistry, meter: Meter
) -> None:
    client.define_group(Group("ext", connections=1))
    client.define_group(Group("side", connections=5))
    slow = [client.enqueue("ext.call", {"seconds": 0.4}).id for _ in range(5)]
    others = [client.enqueue("plain").id for _ in range(3)] + [client.enqueue("side.call").id for _ in range(3)]
    with workers(r, registry, 1, ["q"], concurrency=4):
        wait_for(lambda: all(client.get(i).state is JobState.COMPLETED for i in others), 5)
        assert sum(client.get(i).state is JobState.COMPLETED for i in slow) <= 2  # still going, one at a time
        counts = client.counts("q")
        assert counts.queued >= 2  # the held ones count as queued
        wait_for(lambda: meter.done == 5, 10)
    assert meter.peak == 1


def test_a_rate_limit_spaces_the_starts(r: "redis.Redis", client: Client, registry: TaskRegistry, meter: Meter) -> None:
    client.define_group(Group.parse("ext", {"requests": [4, "second"]}))
    for _ in range(12):
        client.enqueue("ext.call", {"seconds": 0.0})
    began = time.monotonic()
    with workers(r, registry, 2, ["q"], concurrency=5):
        wait_for(lambda: meter.done == 12, 15)
    starts = sorted(meter.starts)
    # No window of one second holds more than 4 starts (20 ms for the two clocks' difference), and 12 starts
    # at 4 a second take at least two full windows.
    for n in range(len(starts) - 4):
        assert starts[n + 4] - starts[n] >= 0.98, starts
    assert starts[-1] - began >= 1.95


def test_a_dead_holders_slots_come_back_when_their_lease_runs_out(
    r: "redis.Redis", client: Client, registry: TaskRegistry, meter: Meter
) -> None:
    client.define_group(Group("ext", connections=2))
    store = Store(r)
    # A worker took both slots and died before claiming (or while running): nothing gives them back.
    grant = store.group_acquire("ext", 2, holder="dead:1", lease_ms=800, queue="q")
    assert len(grant.tokens) == 2
    assert store.group_acquire("ext", 1, holder="other", lease_ms=800, queue="q").tokens == []
    client.enqueue("ext.call", {"seconds": 0.0})
    with workers(r, registry, 1, ["q"], concurrency=2):
        time.sleep(0.4)
        assert meter.done == 0  # the limit holds while the dead holder's leases run
        wait_for(lambda: meter.done == 1, 5)
    assert meter.peak == 1
    assert r.zcard(group_keys("ext").slots) == 0


def test_slots_are_renewed_with_the_jobs_heartbeats(r: "redis.Redis", client: Client, registry: TaskRegistry) -> None:
    # The group's only task has a 0.6 s lease: so has a slot's first lease, and the job runs 1.5 s.
    registry.register(lambda seconds: time.sleep(seconds), name="long.call", queue="q", group="slow",
                      visibility_timeout=0.6)  # fmt: skip
    client.define_group(Group("slow", connections=1))
    client.enqueue("long.call", {"seconds": 1.5})
    client.enqueue("long.call", {"seconds": 0.0})
    slots = group_keys("slow").slots
    with workers(r, registry, 1, ["q"], concurrency=2):
        wait_for(lambda: r.zcard(slots) == 1, 5)
        time.sleep(1.0)  # past the slot's first lease: renewed, so the second job still waits
        assert r.zcard(slots) == 1 and client.counts("q").queued == 1
        deadline = r.zrange(slots, 0, 0, withscores=True)[0][1]
        assert deadline - Store(r).time_ms() <= 600  # the job's lease, not the longest of the worker's tasks
        wait_for(lambda: client.counts("q").completed == 2, 5)


def test_a_slot_follows_a_longer_job_lease_from_its_claim(r: "redis.Redis", client: Client) -> None:
    registry = TaskRegistry()
    registry.register(lambda: time.sleep(0.5), name="short", queue="q", group="mixed", visibility_timeout=1)
    client = Client(r, registry)
    client.define_group(Group("mixed", connections=1))
    job = client.enqueue("short", group="mixed")
    # A job naming the group of a task with a 1 s lease, from a task whose lease is 60 s (strict=False client).
    registry.register(lambda: time.sleep(0.5), name="long", queue="q", visibility_timeout=60)
    long_job = Client(r, registry).enqueue("long", group="mixed")
    slots = group_keys("mixed").slots
    with workers(r, registry, 1, ["q"], concurrency=1):
        wait_for(lambda: client.get(job.id).state is JobState.COMPLETED, 5)
        wait_for(lambda: client.get(long_job.id).state is JobState.RUNNING, 5)
        deadline = r.zrange(slots, 0, 0, withscores=True)[0][1]
        assert deadline - Store(r).time_ms() > 30_000  # renewed to the job's 60 s right after its claim
        wait_for(lambda: client.get(long_job.id).state is JobState.COMPLETED, 5)


def test_a_queue_limit_holds_across_workers(
    r: "redis.Redis", client: Client, registry: TaskRegistry, meter: Meter
) -> None:
    client.set_queue_limit("lq", 2)
    for _ in range(8):
        client.enqueue("limited", {"seconds": 0.2})
    with workers(r, registry, 3, ["lq"], concurrency=4):
        wait_for(lambda: meter.done == 8, 10)
    assert meter.peak == 2
    client.set_queue_limit("lq", None)
    assert not r.exists(queue_keys("lq").limit)


def test_a_queue_limit_stops_hand_offs_to_idle_workers(
    r: "redis.Redis", client: Client, registry: TaskRegistry, meter: Meter
) -> None:
    client.set_queue_limit("lq", 1)
    with workers(r, registry, 3, ["lq"], concurrency=2):
        time.sleep(0.3)  # every worker waits, registered idle
        for _ in range(4):
            client.enqueue("limited", {"seconds": 0.2})
            time.sleep(0.02)
        wait_for(lambda: meter.done == 4, 10)
    assert meter.peak == 1


def test_held_jobs_can_be_cancelled_deleted_and_reprioritised(
    r: "redis.Redis", client: Client, registry: TaskRegistry
) -> None:
    client.define_group(Group("ext", connections=1))
    store = Store(r)
    ids = [client.enqueue("ext.call").id for _ in range(3)]
    assert claim(r, "q", 10) == []  # the claim moved them aside: no slot asked for
    held = queue_keys("q").held("ext")
    assert r.zcard(held) == 3 and r.smembers(queue_keys("q").groups) == {"ext"}
    assert client.cancel(ids[0]) == "cancelled"
    client.delete(ids[1])
    assert r.zrange(held, 0, -1) == [ids[2]]
    job = client.get(ids[2])
    edit_job(client, ids[2], expected_state=job.state, expected_attempts=0, priority=-5)
    assert r.zscore(held, ids[2]) is not None and r.zscore(held, ids[2]) < 0
    leased = store.run(store.claim_group_call("q", "ext", _identity(), 5)).leases
    assert [lease.id for lease in leased] == [ids[2]]
    assert not r.exists(held) and not r.smembers(queue_keys("q").groups)


def _identity() -> WorkerIdentity:
    return WorkerIdentity("w", "host", 1)


def test_a_job_may_name_another_group_or_none(r: "redis.Redis", client: Client) -> None:
    client.define_group(Group("side", connections=1))
    moved = client.enqueue("ext.call", group="side")
    freed = client.enqueue("ext.call", group="")
    assert r.hget(queue_keys("q").job(moved.id), "group") == "side"
    assert not r.hget(queue_keys("q").job(freed.id), "group")


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ({}, "give connections, requests or both"),
        ({"connections": -1}, "must be >= 0"),
        ({"requests": [0, "second"]}, "positive whole numbers"),
        ({"requests": [5, "fortnight"]}, "second, minute or hour"),
        ({"requests": 5}, "n, unit"),
        ({"connection": 2}, "unknown option"),
    ],
)
def test_bad_group_definitions_say_what_is_wrong(spec: dict[str, object], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        Group.parse("ext", spec)


def test_runqueues_rate_form_is_read() -> None:
    assert Group.parse("ext", {"connections": 2, "requests": [100, 1, "minute"]}) == Group("ext", 2, 100, 60_000)
    assert Group.parse("ext", {"requests": [10, "seconds"]}).period_ms == 1000


def test_a_weighted_order_puts_each_queue_first_in_proportion() -> None:
    order = ClaimOrder(["a", "b", "c"], {"a": 3, "b": 1}, random.Random(7))
    firsts = Counter(order.next()[0] for _ in range(6000))
    assert 0.55 < firsts["a"] / 6000 < 0.65  # 3 of 5
    assert 0.15 < firsts["b"] / 6000 < 0.25 and 0.15 < firsts["c"] / 6000 < 0.25  # c weighs 1 by default
    assert ClaimOrder(["a", "b"], None).next() == ["a", "b"]  # strict: as given, every time
    with pytest.raises(ValueError, match="at least 1"):
        ClaimOrder(["a"], {"a": 0})


def test_strict_order_serves_a_later_queue_only_with_slots_to_spare_and_weights_share(
    r: "redis.Redis", client: Client, registry: TaskRegistry
) -> None:
    registry.register(lambda: time.sleep(0.01), name="first", queue="qa")
    registry.register(lambda: time.sleep(0.01), name="second", queue="qb")
    for _ in range(60):
        client.enqueue("first")
        client.enqueue("second")
    with worker_in_thread(r, registry, ["qa", "qb"], concurrency=1):
        wait_for(lambda: client.counts("qa").completed >= 30, 10)
        assert client.counts("qb").completed == 0  # strict: qb waits while qa has jobs
        wait_for(lambda: client.counts("qb").completed == 60, 10)
    for _ in range(60):
        client.enqueue("first")
        client.enqueue("second")
    with worker_in_thread(r, registry, ["qa", "qb"], concurrency=1, queue_weights={"qa": 1, "qb": 1}):
        wait_for(lambda: client.counts("qa").completed >= 90, 10)
        assert client.counts("qb").completed >= 70  # weighted: both advance together


def test_held_jobs_are_listed_with_the_queued_ones_in_claim_order(r: "redis.Redis", client: Client) -> None:
    client.define_group(Group("ext", connections=1))
    ids = []
    for n in range(6):
        ids.append(client.enqueue("ext.call" if n % 2 else "plain").id)
    leased = claim(r, "q", 2)  # two plain jobs leased; the group's job between them held aside
    assert [lease.id for lease in leased] == [ids[0], ids[2]] and r.zrange(queue_keys("q").held("ext"), 0, -1) == [
        ids[1]
    ]
    listed, cursor = [], None
    while True:
        page = client.queries.jobs.page("q", JobState.QUEUED, cursor=cursor, limit=2)
        listed += [job.id for job in page.jobs]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert listed == [ids[1], ids[3], ids[4], ids[5]] and client.counts("q").queued == 4


def test_a_claim_whose_reply_is_lost_between_the_two_steps_loses_no_job_and_leaks_no_slot(
    r: "redis.Redis", client: Client, registry: TaskRegistry, meter: Meter
) -> None:
    """The slot was taken and claim_group ran, but its reply never came back (a connection cut): the jobs it
    leased go back unstarted (release_orphans), the slots with them, and the limit holds throughout."""
    client.define_group(Group("ext", connections=2))
    ids = [client.enqueue("ext.call", {"seconds": 0.05}).id for _ in range(6)]
    with worker_in_thread(r, registry, ["q"], concurrency=3) as worker:
        original = worker.store.run
        cut = {"left": 2}

        def run_losing_replies(call: Any, **kw: Any) -> Any:
            reply = original(call, **kw)
            if call.script == "claim_group" and cut["left"]:
                cut["left"] -= 1
                raise redis.ConnectionError("reply lost")
            return reply

        worker.store.run = run_losing_replies  # type: ignore[method-assign]
        wait_for(lambda: meter.done == 6, 15)
        assert cut["left"] == 0
    assert meter.peak <= 2
    assert all(client.get(i).state is JobState.COMPLETED and client.get(i).attempts == 1 for i in ids)
    assert r.zcount(group_keys("ext").slots, Store(r).time_ms(), "+inf") == 0


def test_slots_that_ran_out_while_redis_was_away_get_their_time_back(r: "redis.Redis", client: Client) -> None:
    """After a silence (no script and no maintenance tick touched the group: Redis was away), the slots that
    lapsed during it are shifted by its length, so a holder that could not renew is not robbed of its slot; one
    whose holder is dead frees up within a lease. Without the silence, a lapsed slot is free at once."""
    client.define_group(Group("ext", connections=1))
    store = Store(r)
    slots, seen = group_keys("ext").slots, group_keys("ext").seen
    [token] = store.group_acquire("ext", 1, holder="w1", lease_ms=500, queue="q").tokens
    r.set(seen, store.time_ms() - 5_000)  # as if nothing had touched the group for 5 s: Redis was down
    r.zadd(slots, {token: store.time_ms() - 100})  # and the slot ran out meanwhile
    assert store.group_acquire("ext", 1, holder="w2", lease_ms=500, queue="q").tokens == []  # spared
    assert store.run(store.group_renew_call("ext", [token], lease_ms=500)) == 1  # its holder renews it
    # While the group is touched (a maintenance pass every second), a lapsed slot is free at once.
    r.zadd(slots, {token: store.time_ms() - 100})
    assert store.touch_groups() == 1
    assert len(store.group_acquire("ext", 1, holder="w2", lease_ms=500, queue="q").tokens) == 1


def test_a_group_claim_and_a_promotion_write_one_batch_event_for_their_jobs(r: "redis.Redis", client: Client) -> None:
    """claim_group.lua's 'started' and promote_due's 'promoted' are one stream entry for the jobs of the call
    (emit_jobs), read back as one event per job, attempts included; the leases come back flat and in order."""
    from jobconsole.core.queries.events import events_of

    client.define_group(Group("ext", connections=3))
    store = Store(r)
    ids = [client.enqueue("ext.call").id for _ in range(3)]
    assert claim(r, "q", 10) == []  # moved to the group's held set
    before = r.xlen(queue_keys("q").events)
    leased = store.run(store.claim_group_call("q", "ext", _identity(), 3)).leases
    assert [lease.id for lease in leased] == ids and {lease.attempt for lease in leased} == {1}
    assert all(lease.token.startswith("w:") and lease.params == "{}" for lease in leased)
    entries = r.xrange(queue_keys("q").events)[before:]
    assert len(entries) == 1
    events = events_of("q", *entries[0])
    assert [(e.fields["job"], e.fields["event"], e.fields["attempt"], e.fields["worker"]) for e in events] == [
        (job_id, "started", "1", "w") for job_id in ids
    ]
    due = [client.enqueue("ext.call", delay=0.001).id for _ in range(3)]
    time.sleep(0.01)
    before = r.xlen(queue_keys("q").events)
    assert store.promote("q", limit=10) == 3
    entries = r.xrange(queue_keys("q").events)[before:]
    # (in run-at order; jobs due the same ms in id order)
    assert len(entries) == 1 and sorted(e.fields["job"] for e in events_of("q", *entries[0])) == sorted(due)
    assert {e.fields["event"] for e in events_of("q", *entries[0])} == {"promoted"}
