"""The metrics history: the rollup of Redis's per-minute counters into the database (idempotent, downsampled,
pruned), the depth samples, and the read API the console charts (series, percentiles, task summaries, rates)."""

import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from jobconsole.core import Client
from jobconsole.core.keys import queue_keys
from jobconsole.core.store import Store, WorkerIdentity
from jobconsole.metrics import rollup, sampling
from jobconsole.metrics.series import LIVE_MINUTES, Series, depth, rates
from jobconsole.metrics.windows import UnknownSpan
from jobconsole.mirror.service import build_service
from jobconsole.models import MetricBucket, MetricsCursor, QueueSample
from tests.mirror_fixtures import *  # noqa: F403
from tests.mirror_fixtures import SimulatedCrash, run_worker

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

type Counters = dict[tuple[int, str, str], int]


def put(r, queue: str, counters: Counters) -> None:
    """Counters as the scripts write them: field "<minute>|<metric>|<task>" of the queue's stats hash."""
    Store(r).register_queues([queue])
    r.hset(queue_keys(queue).stats, mapping={f"{m}|{metric}|{task}": v for (m, metric, task), v in counters.items()})


def at(minute: int) -> datetime:
    return datetime.fromtimestamp(minute * 60, tz=UTC)


def now_minute(client: Client) -> int:
    """The current minute (Redis's clock), once it is 6 to 45 seconds old: a test then finishes in the minute it
    began in, and the minute before it is closed (rollup.CLOSE_AFTER_MS)."""
    while not 6_000 <= client.queries.now_ms() % 60_000 <= 45_000:
        time.sleep(0.5)
    return client.queries.now_ms() // 60_000


def snapshot() -> dict[tuple[int, datetime, str, str, str], int]:
    rows = MetricBucket.objects.values_list("resolution", "start", "queue", "task", "metric", "value")
    return {tuple(row[:5]): row[5] for row in rows}  # type: ignore[misc]


def history(now: int, span: int = 150) -> Counters:
    """Counters for the minutes `span` to 2 before `now` (closed), and one in the current minute (open)."""
    counters: Counters = {}
    for m in range(now - span, now - 1):
        counters[(m, "completed", "a")] = 2
        counters[(m, "failed", "a")] = 1
        counters[(m, "fail_h:7", "a")] = 3
        counters[(m, "retry_max", "a")] = m % 5
    counters[(now, "completed", "a")] = 100
    return counters


def test_rollup_copies_closed_minutes_and_sums_them_into_coarser_buckets(client, r):
    now = now_minute(client)
    counters = history(now)
    put(r, "q", counters)
    assert rollup.rollup(client.queries) == 4 * 149
    closed = [m for (m, metric, _) in counters if metric == "completed" and m < now]
    minutes = MetricBucket.objects.filter(resolution=60, queue="q", metric="completed")
    assert sorted(minutes.values_list("start", flat=True)) == [at(m) for m in sorted(closed)]
    assert not MetricBucket.objects.filter(start__gte=at(now), resolution=60).exists()  # still open
    cursor = MetricsCursor.objects.get(queue="q")
    assert now - 2 <= cursor.flushed_through < now and set(cursor.tasks) == {"a"}
    for resolution in (600, 3600):
        for bucket in MetricBucket.objects.filter(resolution=resolution, queue="q"):
            inside = [m for m in closed if bucket.start <= at(m) < bucket.start + timedelta(seconds=resolution)]
            expected = {"completed": 2 * len(inside), "failed": len(inside), "fail_h:7": 3 * len(inside)}
            expected["retry_max"] = max(m % 5 for m in inside)  # a maximum, not a sum
            assert bucket.value == expected[bucket.metric], (resolution, bucket)
    assert MetricBucket.objects.filter(resolution=3600, metric="completed").count() in (3, 4)


def test_rollup_twice_or_after_losing_its_place_counts_nothing_twice(client, r):
    now = now_minute(client)
    put(r, "q", history(now))
    rollup.rollup(client.queries)
    first = snapshot()
    assert rollup.rollup(client.queries) == 0  # nothing new closed
    assert snapshot() == first
    MetricsCursor.objects.filter(queue="q").update(flushed_through=now - 100)  # copy 100 minutes again
    assert rollup.rollup(client.queries) > 0
    assert snapshot() == first


def test_a_rollup_that_dies_midway_leaves_nothing_half_done(client, r, monkeypatch):
    now = now_minute(client)
    put(r, "q", history(now))

    def crash(*args, **kwargs):
        raise SimulatedCrash("after the minutes, before the coarse buckets")

    monkeypatch.setattr(rollup, "resum", crash)
    with pytest.raises(SimulatedCrash):
        rollup.rollup(client.queries)
    assert not MetricBucket.objects.exists() and not MetricsCursor.objects.exists()
    monkeypatch.undo()
    rollup.rollup(client.queries)
    assert MetricBucket.objects.filter(resolution=600, metric="completed").count() >= 15


def test_a_late_count_within_the_lookback_is_corrected(client, r):
    now = now_minute(client)
    put(r, "q", history(now))
    rollup.rollup(client.queries)
    last = MetricsCursor.objects.get(queue="q").flushed_through
    late = now - 2  # the last minute with counts, copied already
    r.hincrby(queue_keys("q").stats, f"{late}|completed|a", 5)  # e.g. an intake drained late
    MetricsCursor.objects.filter(queue="q").update(flushed_through=last - 1)  # a pass once another minute closes
    rollup.rollup(client.queries)
    assert MetricBucket.objects.get(resolution=60, start=at(late), metric="completed").value == 2 + 5
    ten = late - late % 10
    inside = [m for m in range(now - 150, now - 1) if ten <= m < ten + 10]
    assert MetricBucket.objects.get(resolution=600, start=at(ten), metric="completed").value == 2 * len(inside) + 5
    hour = late - late % 60
    inside = [m for m in range(now - 150, now - 1) if hour <= m < hour + 60]
    assert MetricBucket.objects.get(resolution=3600, start=at(hour), metric="completed").value == 2 * len(inside) + 5


def test_prune_drops_each_resolution_after_its_retention(client, r):
    now = datetime.now(UTC)
    for resolution, age in ((60, timedelta(days=3)), (600, timedelta(days=15)), (3600, timedelta(days=91))):
        for old, start in ((True, now - age), (False, now - age + timedelta(days=1))):
            MetricBucket.objects.create(queue="q", task="a", metric="completed", resolution=resolution,
                                        start=start, value=1 if old else 2)  # fmt: skip
    QueueSample.objects.create(queue="q", resolution=0, at=now - timedelta(days=3))
    QueueSample.objects.create(queue="q", resolution=0, at=now - timedelta(hours=1))
    removed = rollup.prune(now)
    assert removed["buckets_60s"] == removed["buckets_600s"] == removed["buckets_3600s"] == 1
    assert removed["samples_0s"] == 1
    assert set(MetricBucket.objects.values_list("value", flat=True)) == {2}


def test_series_count_each_minute_once_before_and_after_the_rollup(client, r):
    now = now_minute(client)
    counters = history(now, span=40)
    put(r, "q", counters)
    live_only = Series("hour", queue="q", queries=client.queries).counts()
    # Nothing copied yet: Redis gives the last LIVE_MINUTES (the current one included; the one before is empty).
    assert sum(live_only.completed) == 2 * (LIVE_MINUTES - 2) + 100
    rollup.rollup(client.queries)
    counts = Series("hour", queue="q", queries=client.queries).counts()
    assert sum(counts.completed) == 2 * 39 + 100 and sum(counts.failed) == 39
    assert counts.completed[-1] == 100  # the current minute, live from Redis
    assert len(counts.times) == len(counts.completed) == 61 and counts.resolution == 60
    assert counts.per_minute("completed")[-3] == 2.0 and counts.per_minute("completed")[-2] == 0.0
    assert counts.points("completed")[-1] == (counts.times[-1], 100)
    assert counts.points("failed", per_minute=True)[-3] == (counts.times[-3], 1.0)
    rollup.rollup(client.queries)  # again: still once
    assert sum(Series("hour", queue="q", queries=client.queries).counts().completed) == 2 * 39 + 100
    assert sum(Series("hour", queue="other", queries=client.queries).counts().completed) == 0


def test_a_range_picks_a_resolution_with_a_few_hundred_points_at_most(client, r):
    now = now_minute(client)
    put(r, "q", history(now, span=150))
    rollup.rollup(client.queries)
    expected = {"hour": (60, 61), "day": (600, 145), "week": (3600, 169)}
    for span, (resolution, points) in expected.items():
        counts = Series(span, queries=client.queries).counts()
        assert (counts.resolution, len(counts.times)) == (resolution, points), span
        assert sum(counts.completed) == (2 * 59 if span == "hour" else 2 * 149) + 100, span
    assert Series(timedelta(hours=6), queries=client.queries).window.resolution == 600  # 360 minutes > 300
    with pytest.raises(UnknownSpan, match="hour, day, week"):
        Series("fortnight", queries=client.queries)


def _run_known_jobs(r, client: Client, waits: list[int], runtimes: list[int], task: str = "examples.echo") -> None:
    """Jobs that waited and ran for known milliseconds, claimed and acknowledged through the scripts."""
    queue = task
    ids = [client.enqueue(task).id for _ in waits]
    store = Store(r, events_maxlen=1000)
    store.drain(queue)
    now = client.queries.now_ms()
    for job_id, wait in zip(ids, waits, strict=True):
        r.hset(queue_keys(queue).job(job_id), "ready_at", now - wait)
    claimed = store.run(store.claim_call(queue, WorkerIdentity("w", "h", 1), len(ids), idle_ms=0)).leases
    acks = [(lease.id, lease.token, "null", ms) for lease, ms in zip(claimed, runtimes, strict=True)]
    assert store.run(store.complete_call(queue, acks, ttl_ms=0)) == [1] * len(acks)


def test_latency_percentiles_and_task_summaries_from_known_durations(client, r):
    now_minute(client)
    waits = [1_500] * 90 + [30_000] * 10  # 1.5 s (bucket [1.024, 2.048) s) and 30 s ([16.384, 32.768) s)
    runtimes = [50] * 50 + [700] * 45 + [5_000] * 5  # ms
    _run_known_jobs(r, client, waits, runtimes)
    series = Series("hour", queue="examples.echo", queries=client.queries)
    latency = series.latency()
    wait_p50, wait_p95, run_p50, run_p95, run_p99 = (
        latency.wait.p50[-1], latency.wait.p95[-1], latency.run.p50[-1], latency.run.p95[-1], latency.run.p99[-1]
    )  # fmt: skip
    assert wait_p50 is not None and 1.024 <= wait_p50 <= 2.048
    assert wait_p95 is not None and 16.384 <= wait_p95 <= 32.768
    assert run_p50 is not None and 0.032 <= run_p50 <= 0.064
    assert run_p95 is not None and 0.512 <= run_p95 <= 1.024
    assert run_p99 is not None and 4.096 <= run_p99 <= 8.192
    assert latency.run.p50[0] is None  # an hour ago nothing ran
    assert latency.points("run", "p99")[-1] == (latency.times[-1], run_p99)
    [summary] = series.tasks()
    assert (summary.task, summary.completed, summary.started, summary.failed) == ("examples.echo", 100, 100, 0)
    assert summary.success_rate == 1.0 and summary.attempts == 100
    assert summary.runtime_mean == pytest.approx((50 * 50 + 700 * 45 + 5000 * 5) / 100 / 1000)
    assert summary.runtime[0.5] == run_p50
    bins = summary.runtime_histogram
    assert (bins[0].low, bins[-1].high) == (0.032, 8.192) and sum(b.count for b in bins) == 100
    assert [b.count for b in bins if b.count] == [50, 45, 5]


def test_a_task_summary_counts_failures_retries_and_dead_letters(client, r):
    client.enqueue("examples.fail", {"message": "boom"})  # 3 attempts 0.5 s apart, then dead
    for _ in range(4):
        client.enqueue("examples.echo", {}, queue="examples.fail")
    run_worker(r, ["examples.fail"], burst_horizon=2.0)
    summaries = {s.task: s for s in Series("hour", queue="examples.fail", queries=client.queries).tasks()}
    fail, echo = summaries["examples.fail"], summaries["examples.echo"]
    assert (fail.failed, fail.retried, fail.dead, fail.completed, fail.max_retry) == (3, 2, 1, 0, 2)
    assert fail.success_rate == 0.0 and fail.runtime[0.5] is not None
    assert (echo.completed, echo.success_rate) == (4, 1.0)


def test_depth_samples_keep_interval_maxima_and_end_with_the_live_queue(client, r):
    for _ in range(3):
        client.enqueue("examples.echo", {}, delay=3600)
    client.enqueue("examples.echo", {})
    assert sampling.sample(client.queries) == 1
    # A second sample with more waiting, taken in another second.
    for _ in range(5):
        client.enqueue("examples.echo", {})
    later = client.queries.queues.gauges(["examples.echo"])[0]
    sampling.record([replace(later, at=later.at + timedelta(seconds=2))])
    raw = list(QueueSample.objects.filter(resolution=0).order_by("at").values_list("queued", "scheduled"))
    assert raw == [(1, 3), (6, 3)]
    for resolution in (600, 3600):
        row = QueueSample.objects.filter(resolution=resolution, queue="examples.echo").latest("at")
        assert (row.queued, row.scheduled) == (6, 3)  # each interval's largest figure
        assert row.at.timestamp() % resolution == 0
    [series] = depth("hour", queries=client.queries)
    assert series.queue == "examples.echo" and series.resolution == 0
    assert series.queued == [1, 6, 6] and len(series.times) == 3
    assert series.oldest_wait[-1] is not None
    assert [v for _, v in series.points("scheduled")] == [3, 3, 3]
    [weekly] = depth("week", queue="examples.echo", queries=client.queries)
    assert weekly.resolution == 3600 and weekly.queued == [6, 6]  # the hour's maximum, then now


def test_rates_give_throughput_and_time_to_drain(client, r):
    now = now_minute(client)
    put(r, "busy", {(m, "completed", "a"): 10 for m in range(now - 5, now)} | {(now - 3, "failed", "a"): 6})
    Store(r).register_queues(["stuck", "idle"])
    for _ in range(40):
        client.enqueue("examples.echo", {}, queue="busy")
    client.enqueue("examples.echo", {}, queue="stuck")
    found = {rate.queue: rate for rate in rates(["busy", "stuck", "idle"], queries=client.queries)}
    busy = found["busy"]
    assert busy.waiting == 40
    assert 56 / 6 <= busy.throughput <= 56 / 5  # 56 attempts over 5 minutes and part of the current one
    assert busy.drain_seconds == pytest.approx(40 / busy.throughput * 60)
    assert (found["stuck"].throughput, found["stuck"].drain_seconds) == (0.0, None)  # waiting, nothing ends
    assert found["idle"].drain_seconds == 0.0


def test_the_leader_chores_fill_the_history(client, r, engine_settings):
    now = now_minute(client)
    put(r, "q", history(now, span=20))
    run_worker(r, ["examples.echo"])  # a queue with jobs, for the depth sample
    service = build_service(r)
    service.burst()
    assert MetricsCursor.objects.filter(queue="q").exists()
    assert MetricBucket.objects.filter(resolution=600, queue="q", metric="completed").exists()
    assert set(QueueSample.objects.filter(resolution=0).values_list("queue", flat=True)) >= {"q", "examples.echo"}


def test_percentile_of_no_jobs_is_none_everywhere(client, r):
    Store(r).register_queues(["q"])
    series = Series("day", queries=client.queries)
    latency = series.latency()
    assert set(latency.wait.p99) == {None} and set(latency.run.p50) == {None}
    assert series.tasks() == [] and set(series.counts().completed) == {0}
