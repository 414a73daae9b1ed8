"""What the console's charts and summaries read: plain dataclasses of lists, ready for a plotly figure.

- `Series(span, queue=, task=)`: over a range ("hour", "day", "week" or a timedelta), per bucket the counts
  (`counts()`: enqueued, started, completed, failed, retried, dead, lost) and the time-in-queue and run-time
  percentiles (`latency()`: p50, p95, p99 from the histograms), and per task a summary (`tasks()`).
- `depth(span, queue=)`: each queue's waiting, scheduled, running and dead jobs and oldest waiting age over time.
- `rates(queues)`: each queue's throughput over the last few minutes and its estimated time to drain.

The range picks the resolution (windows.py), so no series has more than METRICS.MAX_POINTS buckets. The figures
come from the database's rows up to each queue's MetricsCursor and, after it, from Redis's per-minute counters
(the last LIVE_MINUTES at most, read by name: `queries.stats.minute_values`), so the current minute is live. Nothing
here reads a job. Times are UTC-aware datetimes; durations are seconds.
"""

from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any

from django.db import connection, transaction
from django.db.models import Max, Sum

from jobconsole.core import metrics
from jobconsole.core.metrics import RETRY_MAX, bounds, percentile, run_histogram, wait_histogram
from jobconsole.core.queries import Queries
from jobconsole.engine import get_client
from jobconsole.metrics.windows import (
    RAW,
    Window,
    choose,
    floor_time,
    minute_of,
    parse_span,
    sample_resolution,
)
from jobconsole.models import MetricBucket, MetricsCursor, QueueSample

LIVE_MINUTES = 15  # most minutes after a queue's cursor read from Redis (the rollup normally lags one or two)
COUNTED = ("enqueued", "started", "completed", "failed", "retried", "dead", "lost")
QUANTILES = (0.5, 0.95, 0.99)

type Key = tuple[Any, ...]


def redis_now(queries: Queries) -> datetime:
    return datetime.fromtimestamp(queries.now_ms() / 1000, tz=UTC)


@contextmanager
def consistent_reads() -> Iterator[None]:
    """One snapshot of the database for the block: a cursor and the rows it covers must be read together, or a
    rollup committing in between would have its minutes counted from both the database and Redis."""
    if connection.in_atomic_block:  # the caller's transaction decides
        yield
        return
    with ExitStack() as stack:
        if connection.vendor == "sqlite":
            # A deferred transaction: the first read fixes the snapshot until its end. The project's
            # transaction_mode IMMEDIATE (for writers) would take the write lock, so every chart waited behind
            # the mirror's write transactions, which WAL otherwise lets readers ignore.
            mode = getattr(connection, "transaction_mode", None)
            connection.transaction_mode = "DEFERRED"  # type: ignore[attr-defined]
            try:
                stack.enter_context(transaction.atomic())
            finally:
                connection.transaction_mode = mode  # type: ignore[attr-defined]
        else:
            stack.enter_context(transaction.atomic())
        if connection.vendor == "postgresql":  # READ COMMITTED gives each statement its own snapshot
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        yield


def gather(
    window: Window,
    queries: Queries,
    *,
    queues: Sequence[str] | None = None,
    task: str | None = None,
    group: Sequence[str] = ("start",),
    names: Sequence[str] = metrics.ALL,
) -> dict[Key, int]:
    """Counters `names` over the window, summed (retry_max: the largest) by `group` (any of "start", "queue",
    "task", in that order) and metric: {(*group values, metric): value}. `queues`: None for every queue."""
    wanted = list(queues) if queues is not None else None
    summed = [n for n in names if n != RETRY_MAX]
    fields = [*group, "metric"]
    totals: dict[Key, int] = {}
    with consistent_reads():
        cursors = MetricsCursor.objects.all() if wanted is None else MetricsCursor.objects.filter(queue__in=wanted)
        flushed = {c.queue: (c.flushed_through, list(c.tasks)) for c in cursors}
        rows = MetricBucket.objects.filter(resolution=window.resolution, start__gte=window.start, start__lte=window.end)
        if wanted is not None:
            rows = rows.filter(queue__in=wanted)
        if task is not None:
            rows = rows.filter(task=task)
        if summed:
            for row in rows.filter(metric__in=summed).values(*fields).annotate(total=Sum("value")).order_by():
                totals[tuple(row[f] for f in fields)] = row["total"]
        if RETRY_MAX in names:
            for row in rows.filter(metric=RETRY_MAX).values(*fields).annotate(total=Max("value")).order_by():
                totals[tuple(row[f] for f in fields)] = row["total"]
    _add_live(totals, window, queries, wanted, task, group, names, flushed)
    return totals


def _add_live(
    totals: dict[Key, int],
    window: Window,
    queries: Queries,
    queues: list[str] | None,
    task: str | None,
    group: Sequence[str],
    names: Sequence[str],
    flushed: dict[str, tuple[int, list[str]]],
) -> None:
    """Add the minutes after each queue's cursor, read from Redis by name. The tasks asked for: those the cursor
    saw on the queue lately and the registered ones whose default queue it is. Asking every registered task on
    every queue multiplied the fields read (minutes x tasks x ~80 names) by the number of tasks and made the
    overview's server time grow with it; the price is that a task's first jobs on a queue other than its own
    count from the next rollup (METRICS.ROLLUP_EVERY), which walks the whole hash and adds the task to the
    cursor. A queue never copied yet has no cursor: its minutes are found by a walk of its hash instead
    (`minute_counts`), until the first rollup."""
    now = minute_of(window.end)
    earliest = max(now - LIVE_MINUTES + 1, minute_of(window.start))
    homes: dict[str, set[str]] = defaultdict(set)
    if task is None:
        for name, options in queries.tasks.options().items():
            homes[str(options.get("queue", ""))].add(name)
    wanted = set(names)
    every = queues if queues is not None else queries.queues.names()
    copied = [q for q in every if q in flushed]
    asks = [
        (q, range(max(earliest, flushed[q][0] + 1), now + 1),
         [task] if task is not None else sorted({*flushed[q][1], *homes[q]}))
        for q in copied
    ]  # fmt: skip
    live = dict(zip(copied, queries.stats.minute_values_many(asks, names), strict=True))  # one round trip
    for queue in every:
        if queue in live:
            stats = live[queue]
        else:
            stats = [
                s for s in queries.stats.minute_counts(queue, earliest, now)
                if s.metric in wanted and (task is None or s.task == task)
            ]  # fmt: skip
        for stat in stats:
            parts = {"start": window.bucket_of(stat.minute), "queue": queue, "task": stat.task}
            key = (*(parts[g] for g in group), stat.metric)
            if stat.metric == RETRY_MAX:
                totals[key] = max(totals.get(key, 0), stat.value)
            else:
                totals[key] = totals.get(key, 0) + stat.value


# --- the views a Series offers -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Counts:
    """Jobs per bucket of `resolution` seconds (the last bucket is the current one, still filling)."""

    times: list[datetime]
    resolution: int
    enqueued: list[int]
    started: list[int]
    completed: list[int]
    failed: list[int]  # failed attempts (each retry's failure included)
    retried: list[int]
    dead: list[int]
    lost: list[int]  # attempts whose worker vanished (the recoverer requeued or dead-lettered the job)
    end: datetime

    def per_minute(self, name: str) -> list[float]:
        """A count as a rate per minute; the current bucket is divided by the minutes it has lasted so far."""
        values: list[int] = getattr(self, name)
        minutes = [self.resolution / 60] * len(values)
        if self.times:
            elapsed = (self.end - self.times[-1]).total_seconds() / 60
            minutes[-1] = min(max(elapsed, 1.0), self.resolution / 60)
        return [v / m for v, m in zip(values, minutes, strict=True)]

    def points(self, name: str, *, per_minute: bool = False) -> list[tuple[datetime, float | None]]:
        """(time, value) pairs of a count, as dashboards.charts.time_series takes them."""
        values: Sequence[float] = self.per_minute(name) if per_minute else getattr(self, name)
        return list(zip(self.times, values, strict=True))


@dataclass(frozen=True, slots=True)
class Percentiles:
    """Seconds per bucket; None where nothing was measured."""

    p50: list[float | None]
    p95: list[float | None]
    p99: list[float | None]


@dataclass(frozen=True, slots=True)
class Latency:
    times: list[datetime]
    resolution: int
    wait: Percentiles  # time in queue: from ready (enqueued, promoted or requeued) to leased
    run: Percentiles  # run time of attempts that completed or failed

    def points(self, kind: str, quantile: str) -> list[tuple[datetime, float | None]]:
        """(time, seconds) pairs: kind "wait" or "run", quantile "p50", "p95" or "p99"."""
        return list(zip(self.times, getattr(getattr(self, kind), quantile), strict=True))


@dataclass(frozen=True, slots=True)
class HistogramBin:
    low: float  # seconds
    high: float | None  # None: the overflow bin (about 70 minutes and longer)
    count: int


@dataclass(frozen=True, slots=True)
class TaskSummary:
    task: str
    enqueued: int
    started: int
    completed: int
    failed: int  # failed attempts
    retried: int
    dead: int
    lost: int
    max_retry: int  # the highest retry number a job of the task reached in the window
    runtime_mean: float | None
    runtime: dict[float, float | None]  # quantile (0.5, 0.95, 0.99) -> seconds
    wait: dict[float, float | None]
    runtime_histogram: list[HistogramBin] = field(default_factory=list)  # first to last non-empty bucket

    @property
    def attempts(self) -> int:
        """Attempts that ended (completed or failed)."""
        return self.completed + self.failed

    @property
    def percentiles(self) -> dict[str, float | None]:
        """Run time p50, p95, p99 and time in queue p95 by name: a template cannot look up a float key
        (`runtime.0.5` reads as runtime[0], then [5], so it rendered "—" for every task)."""
        run = self.runtime
        return {"p50": run[0.5], "p95": run[0.95], "p99": run[0.99], "wait_p95": self.wait[0.95]}

    @property
    def success_rate(self) -> float | None:
        """Share of the ended attempts that completed; None when none ended."""
        return self.completed / self.attempts if self.attempts else None


def _seconds(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000


def _quantiles(counts: list[int]) -> dict[float, float | None]:
    return {q: _seconds(percentile(counts, q)) for q in QUANTILES}


def _bins(counts: list[int]) -> list[HistogramBin]:
    used = [i for i, n in enumerate(counts) if n]
    if not used:
        return []
    out = []
    for i in range(used[0], used[-1] + 1):
        low, high = bounds(i)
        out.append(HistogramBin(low / 1000, None if high is None else high / 1000, counts[i]))
    return out


class Series:
    """The counters of a range, for every queue or one, every task or one. Each view is read once, when first
    asked for; the range ends at Redis's clock when the Series is made."""

    def __init__(
        self,
        span: str | timedelta = "hour",
        *,
        queue: str | None = None,
        task: str | None = None,
        queries: Queries | None = None,
        max_points: int | None = None,
    ) -> None:
        self.queries = queries or get_client().queries
        self.queue = queue
        self.task = task
        self.window = choose(span, redis_now(self.queries), max_points=max_points)

    def _gather(self, group: Sequence[str], names: Sequence[str]) -> dict[Key, int]:
        queues = [self.queue] if self.queue is not None else None
        return gather(self.window, self.queries, queues=queues, task=self.task, group=group, names=names)

    @cached_property
    def _by_bucket(self) -> dict[datetime, dict[str, int]]:
        # One task's page also sums these buckets into the task's summary (`tasks`): its highest retry too.
        names = metrics.CHARTED if self.task is None else (*metrics.CHARTED, RETRY_MAX)
        out: dict[datetime, dict[str, int]] = defaultdict(dict)
        for (start, metric), value in self._gather(("start",), names).items():
            out[start][metric] = value
        return out

    def counts(self) -> Counts:
        times = self.window.buckets
        by = self._by_bucket
        columns = {name: [by.get(t, {}).get(name, 0) for t in times] for name in COUNTED}
        return Counts(times=times, resolution=self.window.resolution, end=self.window.end, **columns)

    def latency(self) -> Latency:
        times = self.window.buckets
        quantiles: dict[str, dict[float, list[float | None]]] = {
            kind: {q: [] for q in QUANTILES} for kind in ("wait", "run")
        }
        for t in times:
            values = self._by_bucket.get(t, {})
            for kind, counts in (("wait", wait_histogram(values)), ("run", run_histogram(values))):
                for q, seconds in _quantiles(counts).items():
                    quantiles[kind][q].append(seconds)
        wait, run = (Percentiles(*(quantiles[kind][q] for q in QUANTILES)) for kind in ("wait", "run"))
        return Latency(times, self.window.resolution, wait, run)

    def tasks(self) -> list[TaskSummary]:
        """One summary per task counted in the range, by name. A Series of one task sums the buckets its charts
        read (one read of the database and Redis for the task's page, not two)."""
        by_task: dict[str, dict[str, int]] = defaultdict(dict)
        if self.task is not None:
            for values in self._by_bucket.values():
                summed = by_task[self.task]
                for metric, value in values.items():
                    combined = max if metric == RETRY_MAX else int.__add__
                    summed[metric] = combined(summed[metric], value) if metric in summed else value
        else:
            for (task, metric), value in self._gather(("task",), (*metrics.CHARTED, RETRY_MAX)).items():
                by_task[task][metric] = value
        return [_summary(task, values) for task, values in sorted(by_task.items())]


def _summary(task: str, values: dict[str, int]) -> TaskSummary:
    run = run_histogram(values)
    ended = values.get("completed", 0) + values.get("failed", 0)
    return TaskSummary(
        task=task, **{name: values.get(name, 0) for name in COUNTED}, max_retry=values.get(RETRY_MAX, 0),
        runtime_mean=values.get("runtime_ms", 0) / ended / 1000 if ended else None,
        runtime=_quantiles(run), wait=_quantiles(wait_histogram(values)), runtime_histogram=_bins(run),
    )  # fmt: skip


# --- queue depth and rates -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DepthSeries:
    """One queue's depth over time. Single samples (resolution 0) or each interval's largest figures; the last
    point is the queue as it is now."""

    queue: str
    resolution: int
    times: list[datetime] = field(default_factory=list)
    queued: list[int] = field(default_factory=list)
    scheduled: list[int] = field(default_factory=list)
    running: list[int] = field(default_factory=list)
    dead: list[int] = field(default_factory=list)
    oldest_wait: list[float | None] = field(default_factory=list)  # seconds

    def points(self, name: str) -> list[tuple[datetime, float | None]]:
        """(time, value) pairs of one figure: queued, scheduled, running, dead or oldest_wait."""
        return list(zip(self.times, getattr(self, name), strict=True))

    def add(self, at: datetime, queued: int, scheduled: int, running: int, dead: int, oldest: float | None) -> None:
        self.times.append(at)
        self.queued.append(queued)
        self.scheduled.append(scheduled)
        self.running.append(running)
        self.dead.append(dead)
        self.oldest_wait.append(oldest)


def depth(
    span: str | timedelta = "hour",
    *,
    queue: str | None = None,
    queries: Queries | None = None,
    max_points: int | None = None,
) -> list[DepthSeries]:
    """Each queue's depth over the range (every queue, or one), by queue name."""
    queries = queries or get_client().queries
    resolution = sample_resolution(span, max_points=max_points)
    live = queries.queues.gauges([queue] if queue is not None else queries.queues.names())
    now = live[0].at if live else redis_now(queries)
    start = now - parse_span(span)
    if resolution != RAW:
        start = floor_time(start, resolution)
    rows = QueueSample.objects.filter(resolution=resolution, at__gte=start).order_by("queue", "at")
    if queue is not None:
        rows = rows.filter(queue=queue)
    series: dict[str, DepthSeries] = {}
    fields = ("queue", "at", "queued", "scheduled", "running", "dead", "oldest_wait")
    for name, at, *figures in rows.values_list(*fields).iterator(chunk_size=2000):
        series.setdefault(name, DepthSeries(name, resolution)).add(at, *figures)
    for g in live:
        series.setdefault(g.queue, DepthSeries(g.queue, resolution)).add(
            g.at, g.queued, g.scheduled, g.running, g.dead, g.oldest_wait
        )
    return [series[name] for name in sorted(series)]


@dataclass(frozen=True, slots=True)
class QueueRate:
    queue: str
    waiting: int  # ready to run now
    throughput: float  # attempts ended (completed or failed) per minute, over the last few minutes
    drain_seconds: float | None  # waiting / throughput: 0 when nothing waits, None when nothing ended lately


def rates(queues: Sequence[str] | None = None, *, minutes: int = 5, queries: Queries | None = None) -> list[QueueRate]:
    """Each queue's throughput over the last `minutes` minutes and the current one, and its estimated time to
    drain (every queue when `queues` is None)."""
    queries = queries or get_client().queries
    gauges = queries.queues.gauges(list(queues) if queues is not None else queries.queues.names())
    if not gauges:
        return []
    now = gauges[0].at
    window = Window(floor_time(now, 60) - timedelta(minutes=minutes), now, 60)
    elapsed_minutes = (now - window.start).total_seconds() / 60
    totals = gather(window, queries, queues=[g.queue for g in gauges], group=("queue",), names=("completed", "failed"))
    out = []
    for g in gauges:
        ended = totals.get((g.queue, "completed"), 0) + totals.get((g.queue, "failed"), 0)
        throughput = ended / elapsed_minutes
        if g.queued == 0:
            drain: float | None = 0.0
        else:
            drain = g.queued / throughput * 60 if throughput > 0 else None
        out.append(QueueRate(g.queue, g.queued, throughput, drain))
    return out
