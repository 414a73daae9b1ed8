"""The leader's metrics chores: copy each queue's closed minutes from Redis into MetricBucket rows, sum them into
10-minute and hourly buckets, and drop buckets past their retention.

Idempotent by construction: a minute's row takes the value Redis holds (never an increment), and a coarse bucket
is recomputed from the finer rows it spans, so a pass repeated, or cut short by a crash, counts nothing twice.
Each queue's copy commits with its `MetricsCursor`, the last minute copied: readers take the minutes after it
from Redis (series.py), so a chart never counts a minute twice either."""

import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta

from django.db import transaction

from jobconsole.core.metrics import RETRY_MAX
from jobconsole.core.queries import Queries
from jobconsole.core.queries.statistics import MinuteStat
from jobconsole.engine import get_client
from jobconsole.metrics.windows import HOUR, MINUTE, RAW, TEN_MINUTES, floor_time, keep, minute_of
from jobconsole.models import MetricBucket, MetricsCursor, QueueSample

log = logging.getLogger(__name__)

# A minute is closed once Redis's clock is this far past its end: a job a fast enqueue accepted counts in the
# minute it was accepted, when the intake is drained, normally within a second.
CLOSE_AFTER_MS = 5_000
LOOKBACK = 2  # minutes up to the cursor copied again, so a count that came late is corrected
FIRST_COPY = 24 * 60  # minutes a queue's first copy reaches back: the day Redis keeps
TASKS_SEEN_FOR = 24 * 60  # minutes a task stays in the cursor's list after it was last counted
KEY = ["resolution", "start", "queue", "task", "metric"]


def rollup(queries: Queries | None = None) -> int:
    """Copy every queue's closed minutes not yet copied (and the last LOOKBACK again); returns the rows written."""
    queries = queries or get_client().queries
    closed = (queries.now_ms() - CLOSE_AFTER_MS) // 60_000 - 1
    cursors = {c.queue: c for c in MetricsCursor.objects.all()}
    written = 0
    for queue in queries.queues.names():
        cursor = cursors.get(queue)
        if cursor is not None and cursor.flushed_through >= closed:
            continue
        first = cursor.flushed_through - LOOKBACK + 1 if cursor else closed - FIRST_COPY + 1
        written += copy_minutes(queue, queries.stats.minute_counts(queue, first, closed), first, closed, cursor)
    return written


def copy_minutes(
    queue: str, stats: Sequence[MinuteStat], first: int, last: int, cursor: MetricsCursor | None = None
) -> int:
    """Write the queue's counters of the minutes `first` to `last` (what Redis holds for them), the coarse buckets
    they fall in, and the cursor, in one transaction."""
    rows = [
        MetricBucket(queue=queue, task=s.task, metric=s.metric, resolution=MINUTE, start=s.minute, value=s.value)
        for s in stats
    ]
    tasks = dict(cursor.tasks) if cursor else {}
    for s in stats:
        tasks[s.task] = max(tasks.get(s.task, 0), minute_of(s.minute))
    tasks = {t: m for t, m in tasks.items() if m > last - TASKS_SEEN_FOR}
    span_start = datetime.fromtimestamp(first * 60, tz=UTC)
    span_end = datetime.fromtimestamp(last * 60, tz=UTC)
    with transaction.atomic():
        upsert_buckets(rows)
        for resolution, finer in ((TEN_MINUTES, MINUTE), (HOUR, TEN_MINUTES)):
            upsert_buckets(resum(queue, resolution, finer, span_start, span_end))
        MetricsCursor.objects.update_or_create(queue=queue, defaults={"flushed_through": last, "tasks": tasks})
    return len(rows)


def resum(queue: str, resolution: int, finer: int, start: datetime, end: datetime) -> list[MetricBucket]:
    """The queue's `resolution` buckets overlapping [start, end], each summed afresh from its `finer` rows."""
    low = floor_time(start, resolution)
    high = floor_time(end, resolution) + timedelta(seconds=resolution)
    rows = MetricBucket.objects.filter(queue=queue, resolution=finer, start__gte=low, start__lt=high)
    totals: dict[tuple[datetime, str, str], int] = defaultdict(int)
    for task, metric, at, value in rows.values_list("task", "metric", "start", "value").iterator(chunk_size=5000):
        key = (floor_time(at, resolution), task, metric)
        totals[key] = max(totals[key], value) if metric == RETRY_MAX else totals[key] + value
    return [
        MetricBucket(queue=queue, task=task, metric=metric, resolution=resolution, start=at, value=value)
        for (at, task, metric), value in totals.items()
    ]


def upsert_buckets(rows: Iterable[MetricBucket]) -> None:
    MetricBucket.objects.bulk_create(
        list(rows), batch_size=500, update_conflicts=True, unique_fields=KEY, update_fields=["value"]
    )


def prune(now: datetime | None = None) -> dict[str, int]:
    """Drop buckets and depth samples older than their resolution's retention (METRICS.KEEP_*)."""
    now = now or datetime.now(UTC)
    removed: dict[str, int] = {}
    for resolution in (MINUTE, TEN_MINUTES, HOUR):
        old = MetricBucket.objects.filter(resolution=resolution, start__lt=now - keep(resolution))
        removed[f"buckets_{resolution}s"] = old.delete()[0]
    for resolution in (RAW, TEN_MINUTES, HOUR):
        old_samples = QueueSample.objects.filter(resolution=resolution, at__lt=now - keep(resolution))
        removed[f"samples_{resolution}s"] = old_samples.delete()[0]
    if any(removed.values()):
        log.info("metrics retention removed %s", " ".join(f"{k}={v}" for k, v in removed.items()))
    return removed
