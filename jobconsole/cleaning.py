"""Retention of the database mirror, and the job cleaner behind `manage.py cleanjobs`."""

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.db.models import Exists, OuterRef

from jobconsole.conf import db_retention
from jobconsole.core import Client
from jobconsole.core.editing import delete_many
from jobconsole.core.states import TERMINAL_STATES, JobState
from jobconsole.models import AuditLog, BulkOperation, Job, JobLink, Workflow

log = logging.getLogger(__name__)

CHUNK = 500


def enforce_db_retention(now: datetime | None = None) -> dict[str, int]:
    """Delete finished rows older than their retention (JOBCONSOLE["DB_RETENTION"]), old audit records and finished
    bulk operations as old; a deleted job's links to its parents, and a workflow once none of its jobs is left.

    Only rows Redis no longer holds (in_redis=false) are removed, so the database always keeps at least
    the history Redis has; dead-letter records and attempts go with their job."""
    now = now or datetime.now(UTC)
    retention = db_retention()
    removed: dict[str, int] = {}
    for state in sorted(TERMINAL_STATES):
        cutoff = now - retention[state.value]
        old = Job.objects.filter(state=state.value, in_redis=False, finished_at__lt=cutoff)
        total = 0
        while ids := list(old.values_list("id", flat=True)[:CHUNK]):
            Job.objects.filter(id__in=ids).delete()
            JobLink.objects.filter(child_id__in=ids).delete()
            total += len(ids)
        removed[state.value] = total
    # A workflow's row goes with its last job's (an ended workflow only: a running one has jobs by definition).
    members = Job.objects.filter(workflow_id=OuterRef("id"))
    gone = Workflow.objects.filter(finished_at__isnull=False).exclude(Exists(members))
    removed["workflows"] = 0
    while wfs := list(gone.values_list("id", flat=True)[:CHUNK]):
        Workflow.objects.filter(id__in=wfs).delete()
        removed["workflows"] += len(wfs)
    removed["audit"], _ = AuditLog.objects.filter(at__lt=now - retention["audit"]).delete()
    # Finished bulk operations (with their frozen chunks) are kept as long as the audit records that name them.
    finished = BulkOperation.objects.filter(finished_at__lt=now - retention["audit"])
    removed["bulk"] = 0
    while ops := list(finished.values_list("pk", flat=True)[:CHUNK]):
        BulkOperation.objects.filter(pk__in=ops).delete()
        removed["bulk"] += len(ops)
    if any(removed.values()):
        log.info("db retention removed %s", " ".join(f"{k}={v}" for k, v in removed.items()))
    return removed


@dataclass(frozen=True, kw_only=True)
class CleanFilter:
    tasks: Sequence[str] = ()
    queues: Sequence[str] = ()
    states: Sequence[JobState] = tuple(sorted(TERMINAL_STATES))
    before: datetime | None = None  # submitted (enqueued) before
    after: datetime | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "tasks": list(self.tasks), "queues": list(self.queues), "states": [s.value for s in self.states],
            "before": self.before.isoformat() if self.before else None,
            "after": self.after.isoformat() if self.after else None,
        }  # fmt: skip


@dataclass
class CleanReport:
    matched: int = 0
    deleted_redis: int = 0
    deleted_db: int = 0
    skipped_running: list[str] = field(default_factory=list)
    by_state: dict[str, int] = field(default_factory=dict)


def find_jobs(client: Client, f: CleanFilter) -> dict[str, tuple[str, str]]:
    """Jobs matching the filter, from Redis and from the database: id -> (queue, state)."""
    found: dict[str, tuple[str, str]] = {}
    rows = Job.objects.filter(state__in=[s.value for s in f.states])
    if f.tasks:
        rows = rows.filter(task__in=f.tasks)
    if f.queues:
        rows = rows.filter(queue__in=f.queues)
    if f.before:
        rows = rows.filter(enqueued_at__lt=f.before)
    if f.after:
        rows = rows.filter(enqueued_at__gte=f.after)
    for job_id, queue, state in rows.values_list("id", "queue", "state").iterator(chunk_size=2000):
        found[job_id] = (queue, state)
    for queue in list(f.queues) or client.queues():
        for job in client.queries.jobs.iterate(queue, f.states):
            if f.tasks and job.task not in f.tasks:
                continue
            at = job.enqueued_at
            if f.before and (at is None or at >= f.before):
                continue
            if f.after and (at is None or at < f.after):
                continue
            found[job.id] = (queue, job.state.value)
    return found


def clean(
    client: Client,
    jobs: dict[str, tuple[str, str]],
    *,
    progress: Callable[[int], object] | None = None,
    batch: int = CHUNK,
) -> CleanReport:
    """Delete these jobs from Redis (never a running one) and from the database, in batches."""
    report = CleanReport(matched=len(jobs))
    items = list(jobs.items())
    for start in range(0, len(items), batch):
        chunk = items[start : start + batch]
        outcomes = delete_many(client, [(job_id, queue) for job_id, (queue, _) in chunk])
        removable: list[str] = []
        for (job_id, (_, state)), outcome in zip(chunk, outcomes, strict=True):
            if outcome in ("running", "is:running"):
                report.skipped_running.append(job_id)
                continue
            report.deleted_redis += outcome == "deleted"
            report.by_state[state] = report.by_state.get(state, 0) + 1
            removable.append(job_id)
        report.deleted_db += Job.objects.filter(id__in=removable).delete()[1].get("jobconsole.Job", 0)
        if progress:
            progress(len(chunk))
    return report


def summarize(jobs: Iterable[tuple[str, str]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for queue, state in jobs:
        counts[f"{queue}/{state}"] = counts.get(f"{queue}/{state}", 0) + 1
    return dict(sorted(counts.items()))
