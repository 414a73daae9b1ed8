"""Per-queue figures the overview and the queues page show, read from Redis through the engine's queries."""

from dataclasses import dataclass, field

from django.db.models import Count

from jobconsole.core import JobState
from jobconsole.core.queries.queues import QueueCounts
from jobconsole.core.queries.workers import WorkerInfo
from jobconsole.engine import get_client
from jobconsole.models import Job


@dataclass(slots=True)
class QueueStatus:
    counts: QueueCounts
    workers: int = 0  # live workers serving the queue (a quiet one takes no job: counted apart)
    quiet: int = 0  # live workers of the queue an operator quieted
    busy: int = 0  # its jobs running on them now
    capacity: int = 0  # the threads of the workers serving it
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.counts.queue

    @property
    def waiting(self) -> int:
        return self.counts.queued

    @property
    def no_workers(self) -> bool:
        return self.workers == 0


def live_workers() -> list[WorkerInfo]:
    return [w for w in get_client().queries.workers.all() if w.state != "gone"]


def queue_statuses(names: list[str] | None = None, workers: list[WorkerInfo] | None = None) -> list[QueueStatus]:
    queries = get_client().queries
    workers = live_workers() if workers is None else workers
    out = []
    for counts in queries.queues.counts_many(queries.queues.names() if names is None else names):
        status, name = QueueStatus(counts), counts.queue
        for worker in workers:
            if name in worker.queues and worker.state == "quiet":
                status.quiet += 1
                status.busy += sum(1 for job in worker.current if job.get("queue") == name)
            elif name in worker.queues:
                status.workers += 1
                status.capacity += worker.concurrency
                status.busy += sum(1 for job in worker.current if job.get("queue") == name)
        out.append(status)
    return out


def retrying_counts(names: list[str]) -> dict[str, int]:
    """Jobs waiting for a retry's backoff, per queue, as the database mirror has them (a second or so behind).

    Redis keeps them in the scheduled set with the delayed jobs, which it counts without reading a job; telling
    the two apart there would mean reading every scheduled job. The mirror's (queue, state, enqueued_at) index
    counts them instead: one query for every queue (a count per queue made the overview's queries grow with
    its queues)."""
    found = (
        Job.objects.filter(queue__in=names, state=JobState.RETRYING.value)
        .order_by()
        .values_list("queue")
        .annotate(n=Count("*"))
    )
    counted = dict(found) if names else {}
    return {name: counted.get(name, 0) for name in names}
