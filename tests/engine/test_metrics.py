"""The latency histograms and the gauges the console reads (core/metrics.py, the scripts, Queries): buckets alike in
Lua and Python, histograms written by real claims and acknowledgements, batched per bucket, and the gauges'
oldest waiting job, overdue running jobs and counts."""

import time
from collections import Counter
from datetime import UTC, datetime

import pytest
import redis

from jobconsole.core import Client, JobState, TaskRegistry, metrics
from jobconsole.core.keys import queue_keys
from jobconsole.core.queries.statistics import MinuteStat
from jobconsole.core.store import Store, WorkerIdentity
from tests.helpers import claim, complete, run_burst, wait_for, worker_in_thread
from tests.queue_fixtures import *  # noqa: F403  (the client and registry fixtures)

MS = [-5, 0, 0.5, 1, 1.5, 2, 3, 4, 7, 8, 1023, 1024, 1025, 2**21 - 1, 2**21, 2**22 - 1, 2**22, 2**22 + 1, 10**9]


def stats_by_metric(client: Client, queue: str = "q", task: str = "t.ok") -> Counter[str]:
    """Every counter of the task, summed over the minutes (the tests run within a minute or two)."""
    totals: Counter[str] = Counter()
    for s in client.queries.stats.minutes(queue):
        if s.task != task:
            continue
        if s.metric == metrics.RETRY_MAX:
            totals[s.metric] = max(totals[s.metric], s.value)
        else:
            totals[s.metric] += s.value
    return totals


def test_lua_and_python_put_a_duration_in_the_same_bucket(r: "redis.Redis") -> None:
    from jobconsole.core.scripts import LUA_DIR, PRELUDE

    source = (
        PRELUDE
        + (LUA_DIR / "_lib.lua").read_text()
        + ("\nlocal out = {}\nfor i = 1, #ARGV do out[i] = hist_bucket(tonumber(ARGV[i])) end\nreturn out")
    )
    assert r.eval(source, 0, *MS) == [metrics.bucket_of(ms) for ms in MS]
    assert [metrics.bucket_of(ms) for ms in (0, 1, 2, 3, 4, 2**22 - 1, 2**22, 10**9)] == [0, 1, 2, 2, 3, 22, 23, 23]
    for i in range(metrics.BUCKETS):  # each bucket's lower edge falls in it; below it, the bucket before
        low, high = metrics.bounds(i)
        assert metrics.bucket_of(low) == i and (high is None or metrics.bucket_of(high) == i + 1)


def test_percentiles_of_known_durations_fall_in_their_buckets() -> None:
    durations = [5] * 50 + [100] * 45 + [3000] * 4 + [9_000_000]  # ms; the last in the overflow bucket
    counts = [0] * metrics.BUCKETS
    for ms in durations:
        counts[metrics.bucket_of(ms)] += 1
    p50, p95, p99 = (metrics.percentile(counts, q) for q in (0.5, 0.95, 0.99))
    # Each within the bucket of the true value (interpolated inside it, so up to its upper edge).
    assert p50 is not None and 4 <= p50 <= 8  # the 50th of 100 is a 5 ms one
    assert p95 is not None and 64 <= p95 <= 128  # the 95th: 100 ms
    assert p99 is not None and 2048 <= p99 <= 4096  # the 99th: 3 s
    assert metrics.percentile(counts, 0.999) == 2**22  # the overflow bucket answers its lower edge
    assert metrics.percentile([0] * metrics.BUCKETS, 0.5) is None
    # Interpolation inside a bucket: 10 values in [64, 128): the median is halfway.
    assert metrics.percentile([0] * 7 + [10] + [0] * 16, 0.5) == pytest.approx(96)


def test_a_claim_records_each_jobs_wait_in_its_bucket(r: "redis.Redis", client: Client) -> None:
    ids = [client.enqueue("t.ok").id for _ in range(6)]
    Store(r).drain("q")  # the jobs' hashes exist (a fast enqueue may have left them in the intake)
    k = queue_keys("q")
    now = client.queries.now_ms()
    for job_id in ids[:4]:  # these became ready 5 s ago: 4096 <= wait < 8192 ms
        r.hset(k.job(job_id), "ready_at", now - 5000)
    assert len(claim(r, "q", 10)) == 6
    totals = stats_by_metric(client)
    waits = {m: v for m, v in totals.items() if m.startswith(metrics.WAIT)}
    assert waits["wait_h:13"] == 4
    assert sum(waits.values()) == totals["started"] == 6
    assert sum(v for m, v in waits.items() if m != "wait_h:13") == 2  # the two just enqueued: a few ms at most
    assert totals["wait_ms"] >= 4 * 5000


def test_a_batch_of_acks_adds_one_field_per_bucket(r: "redis.Redis", client: Client) -> None:
    for _ in range(10):
        client.enqueue("t.ok")
    leases = claim(r, "q", 10)
    # One enqueue time for all ten, so that they share one end-to-end bucket however long the enqueues took on a
    # busy machine (the buckets below 8 ms are a millisecond or two wide); the acks share one Redis time.
    first = min(int(r.hget(queue_keys("q").job(lease.id), "enqueued_at") or 0) for lease in leases)
    for lease in leases:
        r.hset(queue_keys("q").job(lease.id), "enqueued_at", first)
    store = Store(r, events_maxlen=1000)
    runtimes = [100] * 7 + [3000] * 3  # buckets 7 ([64, 128) ms) and 12 ([2048, 4096) ms)
    acks = [(lease.id, lease.token, "null", ms) for lease, ms in zip(leases, runtimes, strict=True)]
    before = r.info("commandstats").get("cmdstat_hincrby", {}).get("calls", 0)
    assert store.run(store.complete_call("q", acks, ttl_ms=0)) == [1] * 10
    hincrbys = r.info("commandstats")["cmdstat_hincrby"]["calls"] - before
    totals = stats_by_metric(client)
    ends = [m for m in totals if m.startswith(metrics.E2E_DONE)]
    assert len(ends) == 1 and sum(totals[m] for m in ends) == 10
    # runtime_ms, the two run-time buckets (which count the completions too) and the end-to-end buckets: not one
    # per job.
    assert hincrbys == 3 + len(ends)
    assert (totals["done_h:7"], totals["done_h:12"], totals["completed"]) == (7, 3, 10)
    assert totals["runtime_ms"] == 7 * 100 + 3 * 3000


def test_a_claim_or_ack_of_one_bucket_writes_no_more_than_without_histograms(r: "redis.Redis", client: Client) -> None:
    """Two HINCRBYs per call, as before the histograms (the bucket's count is the started or completed count),
    plus the ack's end-to-end bucket."""
    for _ in range(5):
        client.enqueue("t.ok")
    Store(r).drain("q")
    before = r.info("commandstats").get("cmdstat_hincrby", {}).get("calls", 0)
    leases = claim(r, "q", 5)  # all waited under 1 s: one bucket, or two at a boundary
    store = Store(r, events_maxlen=1000)
    store.run(store.complete_call("q", [(x.id, x.token, "null", 20) for x in leases], ttl_ms=0))
    hincrbys = r.info("commandstats")["cmdstat_hincrby"]["calls"] - before
    waits = [m for m in stats_by_metric(client) if m.startswith(metrics.WAIT)]
    ends = [m for m in stats_by_metric(client) if m.startswith(metrics.E2E_DONE)]
    # claim: wait_ms and its buckets; ack: runtime_ms, one run-time bucket and the end-to-end ones
    assert hincrbys == 2 + 1 + len(waits) + len(ends) and 1 <= len(ends) <= 2
    totals = stats_by_metric(client)
    assert (totals["started"], totals["completed"], totals["done_h:5"]) == (5, 5, 5)
    raw = r.hgetall(queue_keys("q").stats)
    assert not any("|started|" in f or "|completed|" in f for f in raw)  # the readers add them


def test_a_worker_records_run_times_and_retries(r: "redis.Redis", client: Client, registry: TaskRegistry) -> None:
    @registry.task(name="t.nap", queue="q")
    def nap() -> None:
        time.sleep(0.15)  # 150 ms: bucket 8 ([128, 256) ms), with 100 ms to spare on a busy machine

    @registry.task(name="t.flaky", queue="q", max_retries=4, retry_delay=0, backoff_strategy="constant")
    def flaky() -> None:
        raise RuntimeError("always")

    for _ in range(3):
        client.enqueue("t.nap")
    client.enqueue("t.flaky")
    run_burst(r, registry, ["q"], burst_horizon=1.0)
    naps = stats_by_metric(client, task="t.nap")
    # Each run timed in its bucket: 150 ms is bucket 8 ([128, 256) ms), or a later one when a loaded machine (the
    # parallel test pass) stretches the sleep; never an earlier one.
    timed = {int(m.split(":")[1]): v for m, v in naps.items() if m.startswith("done_h:") and v}
    assert sum(timed.values()) == 3 and min(timed) >= 8 and naps["completed"] == 3, timed
    flakes = stats_by_metric(client, task="t.flaky")
    assert (flakes["failed"], flakes["retried"], flakes["dead"]) == (5, 4, 1)
    assert sum(v for m, v in flakes.items() if m.startswith(metrics.FAIL)) == 5  # failed attempts are timed too
    assert flakes[metrics.RETRY_MAX] == 4  # its fourth retry was the last


def test_a_job_handed_to_an_idle_worker_waited_zero(r: "redis.Redis", client: Client, registry: TaskRegistry) -> None:
    with worker_in_thread(r, registry, ["q"], name="idle-one"):
        wait_for(lambda: r.zcard(queue_keys("q").idle) == 1)  # registered idle: the next job is handed over
        job = client.enqueue("t.ok").id
        wait_for(lambda: client.get(job).state is JobState.COMPLETED)
    totals = stats_by_metric(client)
    waits = [totals[m] for m in metrics.WAIT_METRICS]
    assert totals["started"] == 1 and sum(waits) == 0  # no claim: no wait counted...
    assert metrics.zero_waits(totals["started"], waits) == 1  # ...so readers put it in bucket 0


def test_minute_reads_by_name_and_by_range(r: "redis.Redis", client: Client) -> None:
    while client.queries.now_ms() % 60_000 > 50_000:  # the counts below land in the minute read after them
        time.sleep(0.5)
    client.enqueue("t.ok")
    complete_one = claim(r, "q", 1)[0]
    assert complete(r, "q", complete_one.id, complete_one.token) == 1
    minute = client.queries.now_ms() // 60_000
    stats = r.hgetall(queue_keys("q").stats)
    r.hset(queue_keys("q").stats, mapping={f"{minute - 90}|completed|t.ok": 7, f"{minute - 9}|completed|t.ok": 5})
    named = client.queries.stats.minute_values("q", [minute, minute - 9], ["t.ok", "t.none"], ["completed", "enqueued"])
    assert sorted((s.metric, s.value) for s in named) == [("completed", 1), ("completed", 5), ("enqueued", 1)]
    nine_back = datetime.fromtimestamp((minute - 9) * 60, tz=UTC)
    assert MinuteStat(nine_back, "completed", "t.ok", 5) in named
    ranged = client.queries.stats.minute_counts("q", minute - 10, minute)
    now = datetime.fromtimestamp(minute * 60, tz=UTC)
    raw = {f.split("|")[1] for f in stats}
    assert {s.metric for s in ranged if s.minute == now} == raw | {"started", "completed"}  # with the totals
    assert [s for s in ranged if s.minute != now] == [MinuteStat(nine_back, "completed", "t.ok", 5)]
    assert [s.value for s in client.queries.stats.minute_counts("q", minute - 90, minute - 90)] == [7]
    assert client.queries.stats.minute_counts("q", minute, minute - 1) == []


def test_gauges_find_the_oldest_waiting_job_across_priorities(r: "redis.Redis", client: Client) -> None:
    [empty] = client.queries.queues.gauges(["q"])
    assert (empty.queued, empty.oldest_waiting_since, empty.oldest_wait, empty.overdue) == (0, None, None, 0)
    low = client.enqueue("t.ok", priority=5).id  # the oldest, but last in line
    Store(r).drain("q")
    k = queue_keys("q")
    r.hset(k.job(low), "enqueued_at", client.queries.now_ms() - 60_000)
    client.enqueue("t.ok", priority=0)
    client.enqueue("t.ok", priority=-3)
    client.enqueue("t.ok", delay=60)
    [g] = client.queries.queues.gauges(["q"])
    assert (g.queued, g.scheduled, g.running, g.dead, g.paused) == (3, 1, 0, 0, False)
    assert g.oldest_wait is not None and 60 <= g.oldest_wait < 70
    assert g.oldest_waiting_since == client.get(low).enqueued_at


def test_gauges_count_overdue_running_jobs_and_the_intake(r: "redis.Redis", client: Client) -> None:
    for _ in range(3):
        client.enqueue("t.ok")
    leases = claim(r, "q", 2)
    k = queue_keys("q")
    now = client.queries.now_ms()
    r.zadd(k.active, {leases[0].id: now - 30_000})  # its lease ran out 30 s ago
    [g] = client.queries.queues.gauges(["q"], grace_ms=10_000)
    assert (g.running, g.overdue, g.queued) == (2, 1, 1)
    [strict] = client.queries.queues.gauges(["q"], grace_ms=60_000)
    assert strict.overdue == 0
    # A job a fast enqueue left in the intake is waiting too, since its acceptance.
    store = Store(r, events_maxlen=1000)
    store.run(store.claim_call("q", WorkerIdentity("w", "h", 1), 5, idle_ms=0))  # the ready set is empty now
    client.enqueue("t.ok")  # a single job, no worker idle: it only goes into the intake
    assert r.xlen(k.intake) == 1
    [g] = client.queries.queues.gauges(["q"])
    assert g.queued == 1 and g.oldest_wait is not None and g.oldest_wait < 5


def test_a_job_the_recoverer_dead_letters_counts_as_dead_like_one_that_failed(r: "redis.Redis", client: Client) -> None:
    from jobconsole.core.maintenance import Maintenance

    lost_once = client.enqueue("t.ok", max_retries=0).id
    [lease] = claim(r, "q", count=1)
    assert lease.id == lost_once
    r.zadd(queue_keys("q").active, {lost_once: 1})  # its lease ran out: the worker died
    Maintenance(r).recover("q")
    assert client.get(lost_once).state is JobState.DEAD
    totals = stats_by_metric(client)
    assert (totals["lost"], totals["dead"]) == (1, 1)


def test_end_to_end_times_count_from_the_enqueue_to_the_end_of_each_attempt(r: "redis.Redis", client: Client) -> None:
    done_id = client.enqueue("t.ok").id
    failed_id = client.enqueue("t.ok").id
    Store(r).drain("q")
    time.sleep(0.3)  # both wait 300 ms and more before a worker takes them
    leases = {lease.id: lease for lease in claim(r, "q", 2)}
    store = Store(r, events_maxlen=1000)
    assert store.run(store.complete_call("q", [(done_id, leases[done_id].token, "null", 5)], ttl_ms=0)) == [1]
    failing = store.fail_call(
        "q", failed_id, leases[failed_id].token, outcome="failed", retry=False, delay_ms=0,
        error={"error_class": "E", "message": "m"}, runtime_ms=5, ttl_ms=0,
    )  # fmt: skip
    store.run(failing)
    totals = stats_by_metric(client)
    # 300 ms and more since the enqueue (a 5 ms run): bucket 9, [256, 512) ms, or later on a slow machine; the
    # run-time histograms keep the 5 ms in bucket 3.
    [(done_metric, done_count)] = [(m, n) for m, n in totals.items() if m.startswith(metrics.E2E_DONE)]
    [(fail_metric, fail_count)] = [(m, n) for m, n in totals.items() if m.startswith(metrics.E2E_FAIL)]
    assert done_count == fail_count == 1
    assert int(done_metric.partition(":")[2]) >= 9 and int(fail_metric.partition(":")[2]) >= 9
    assert (totals["done_h:3"], totals["fail_h:3"]) == (1, 1)
