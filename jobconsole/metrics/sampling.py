"""The leader's depth chore: sample every queue's gauges (waiting, scheduled, running, dead, the oldest waiting
job's age) into QueueSample rows, and keep each 10-minute and hourly interval's maxima up to date, so a week's
chart reads 168 rows per queue instead of twenty thousand samples. Reads are O(log n) per queue (gauges.lua)."""

from datetime import datetime, timedelta
from typing import Any, cast

from django.db import transaction
from django.db.models import Max

from jobconsole.core.queries import Queries
from jobconsole.core.queries.queues import QueueGauges
from jobconsole.engine import get_client
from jobconsole.metrics.windows import HOUR, RAW, TEN_MINUTES, floor_time
from jobconsole.models import QueueSample

FIGURES = ["queued", "scheduled", "running", "dead", "oldest_wait"]
KEY = ["resolution", "at", "queue"]


def sample(queries: Queries | None = None) -> int:
    """Record one sample of every queue; returns how many."""
    queries = queries or get_client().queries
    gauges = queries.queues.gauges(queries.queues.names())
    if not gauges:
        return 0
    record(gauges)
    return len(gauges)


def record(gauges: list[QueueGauges]) -> None:
    """Store these readings and recompute the maxima of the intervals they fall in, in one transaction."""
    rows = [
        QueueSample(
            queue=g.queue, resolution=RAW, at=g.at.replace(microsecond=0), queued=g.queued, scheduled=g.scheduled,
            running=g.running, dead=g.dead, oldest_wait=g.oldest_wait,
        )
        for g in gauges
    ]  # fmt: skip
    at = min(g.at for g in gauges)
    with transaction.atomic():
        _upsert(rows)
        for resolution in (TEN_MINUTES, HOUR):
            _upsert(maxima(resolution, floor_time(at, resolution), [g.queue for g in gauges]))


def maxima(resolution: int, start: datetime, queues: list[str]) -> list[QueueSample]:
    """Each queue's largest figures among the samples of the interval [start, start + resolution)."""
    samples = QueueSample.objects.filter(
        resolution=RAW, queue__in=queues, at__gte=start, at__lt=start + timedelta(seconds=resolution)
    )
    found = cast(list[dict[str, Any]], list(samples.values("queue").annotate(**{f"max_{f}": Max(f) for f in FIGURES})))
    return [
        QueueSample(resolution=resolution, at=start, queue=row["queue"], **{f: row[f"max_{f}"] for f in FIGURES})
        for row in found
    ]


def _upsert(rows: list[QueueSample]) -> None:
    QueueSample.objects.bulk_create(rows, update_conflicts=True, unique_fields=KEY, update_fields=FIGURES)
