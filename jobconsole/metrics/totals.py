"""Each queue's and task's counters summed since the start of the current day (00:00 UTC, Redis's clock): the
totals the Prometheus and OpenTelemetry exports turn into counters and histograms.

Why since midnight, and not over a sliding window or "ever": an exported counter must never go down. The
per-minute counters Redis keeps expire after a day, and the database's buckets after their retention, so a sum
over "what is still kept" would drop whenever an old minute left; a sum over the last N minutes would drop every
minute. A sum over the minutes since a fixed instant only grows, as long as every minute since that instant is
still kept: Redis keeps a day of minutes (maintenance trims older ones), so the instant is the start of the
day, and the totals go back to zero once a day, at 00:00 UTC. An exporter states that instant as the counters'
start (`_created` in Prometheus, the start time in OTLP), which is what a reset is to both.

Where the minutes come from, without reading a job: the database's hourly buckets since midnight, up to each
queue's MetricsCursor (the mirror leader's rollup copies closed minutes there), and from Redis the minutes after
the cursor, read by field name (`queries.stats.minute_values`: one HMGET). A queue with no cursor (no rollup yet, or
no mirror running anywhere), or one whose cursor lags more than LIVE_LIMIT minutes, is read from Redis by a walk
of its stats hash (`queries.stats.minute_counts`) instead: correct, but a scan of up to a day's fields per scrape.
"""

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db.models import Sum

from jobconsole.core import metrics
from jobconsole.core.queries import Queries
from jobconsole.core.queries.statistics import MinuteStat
from jobconsole.metrics.series import consistent_reads
from jobconsole.metrics.windows import HOUR
from jobconsole.models import MetricBucket, MetricsCursor

DAY_MINUTES = 24 * 60
LIVE_LIMIT = 30  # most minutes after a queue's cursor read by name; a longer lag walks the hash

type Counts = dict[str, int]  # metric (core/metrics.py's SUMMED names) -> value


@dataclass(frozen=True, slots=True)
class DayTotals:
    """The counters of every queue and task since `since` (00:00 UTC of Redis's clock) up to `at`."""

    since: datetime
    at: datetime
    counts: dict[tuple[str, str], Counts]  # (queue, task) -> metric -> value

    def by_task(self) -> dict[str, Counts]:
        """The counts summed over queues, per task."""
        out: dict[str, Counts] = defaultdict(lambda: defaultdict(int))
        for (_, task), values in self.counts.items():
            for metric, value in values.items():
                out[task][metric] += value
        return out


def day_totals(queries: Queries, queues: Sequence[str] | None = None) -> DayTotals:
    """The counters since 00:00 UTC (Redis's clock) of every queue (or those named), per queue and task."""
    now_ms = queries.now_ms()
    now = now_ms // 60_000
    first = now - now % DAY_MINUTES
    since = datetime.fromtimestamp(first * 60, tz=UTC)
    names = list(queues) if queues is not None else queries.queues.names()
    counts: dict[tuple[str, str], Counts] = defaultdict(lambda: defaultdict(int))
    with consistent_reads():  # the cursors and the rows they cover, in one snapshot
        cursors = {c.queue: c for c in MetricsCursor.objects.filter(queue__in=names)}
        rows = (
            MetricBucket.objects.filter(resolution=HOUR, start__gte=since, queue__in=list(cursors))
            .exclude(metric=metrics.RETRY_MAX)
            .values("queue", "task", "metric")
            .annotate(total=Sum("value"))
            .order_by()
        )
        for row in rows:
            counts[(row["queue"], row["task"])][row["metric"]] += row["total"]
    registered = list(queries.tasks.options())
    for queue in names:
        cursor = cursors.get(queue)
        # The database's rows for this queue stop at its cursor: the minutes after it (since midnight) come
        # from Redis, so nothing is counted twice.
        start = first if cursor is None else max(first, cursor.flushed_through + 1)
        if cursor is not None and now - start < LIVE_LIMIT:
            seen = {task for (q, task) in counts if q == queue}
            tasks = sorted({*cursor.tasks, *registered, *seen})
            live = queries.stats.minute_values(queue, range(start, now + 1), tasks, metrics.SUMMED)
        else:  # no rollup yet, or one far behind: walk the hash
            live = queries.stats.minute_counts(queue, start, now)
        _add(counts, queue, live)
    at = datetime.fromtimestamp(now_ms / 1000, tz=UTC)
    return DayTotals(since, at, {key: dict(values) for key, values in counts.items()})


def _add(counts: dict[tuple[str, str], Counts], queue: str, stats: Iterable[MinuteStat]) -> None:
    for s in stats:
        if s.metric != metrics.RETRY_MAX:
            counts[(queue, s.task)][s.metric] += s.value
