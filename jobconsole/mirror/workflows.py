"""Workflows in the database: each job's links to its parents (JobLink rows), and a Workflow row per workflow with
its jobs' counts by state.

Built from what a batch read anyway: a job's hash names its workflow (`workflow`, `workflow_queue`) and its step;
its parents are read (one HGETALL each, in one round trip) only when the batch saw the job enqueued, or in a
resync. The links are written once (a repeated write is ignored), and a workflow's counts, state and end are
counted again from its Job rows in the same transaction as those rows: applying a batch twice writes the same
values, so the mirror stays replay-safe. Nothing here scans Redis.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Count, Max

from jobconsole.core.job import ms_to_datetime
from jobconsole.core.queries import Queries
from jobconsole.core.queries.workflows import ParentLink, WorkflowRecord
from jobconsole.core.states import TERMINAL_STATES, JobState
from jobconsole.models import Job, JobLink, Workflow

TERMINAL = frozenset(s.value for s in TERMINAL_STATES)
CHUNK = 500


@dataclass(frozen=True, slots=True)
class WorkflowChanges:
    """What a batch writes about workflows, read from Redis before its transaction."""

    records: dict[str, tuple[str, WorkflowRecord | None]] = field(default_factory=dict)  # id -> (queue, record)
    links: list[JobLink] = field(default_factory=list)

    def save(self, synced: datetime) -> None:
        """Write the links and recount the workflows touched (in the caller's transaction, after the Job rows)."""
        if self.links:
            JobLink.objects.bulk_create(self.links, ignore_conflicts=True, batch_size=CHUNK)
        if self.records:
            recount(self.records, synced)


def read(queries: Queries, jobs: Iterable[tuple[dict[str, str], bool]]) -> WorkflowChanges:
    """`jobs`: each touched job's hash, and whether to read its parents (it was enqueued in this batch, or a
    resync). One round trip for the records of the workflows touched, one for the parents asked for."""
    workflows: dict[str, str] = {}
    linked: list[tuple[str, str, str]] = []  # (queue, job id, its workflow)
    for h, created in jobs:
        workflow = h.get("workflow", "")
        if workflow:
            workflows[workflow] = h.get("workflow_queue") or h.get("queue", "")
        if created and h.get("deps_n"):
            linked.append((h.get("queue", ""), h["id"], workflow))
    if not workflows and not linked:
        return WorkflowChanges()
    ordered = list(workflows.items())
    records = dict(zip(workflows, queries.workflows.records(ordered), strict=True))
    parents = queries.workflows.parents([(q, i) for q, i, _ in linked])
    return WorkflowChanges(
        {wf: (queue, records[wf]) for wf, queue in ordered},
        [_link(job_id, workflow, p) for (_, job_id, workflow), ps in zip(linked, parents, strict=True) for p in ps],
    )


def _link(child: str, workflow: str, p: ParentLink) -> JobLink:
    return JobLink(
        child_id=child, parent_id=p.parent_id[:26], parent_queue=p.queue[:100], policy=p.policy[:16],
        position=p.position, workflow_id=workflow,
    )  # fmt: skip


def summarise(counts: dict[str, int], cancelled: bool) -> str:
    """A workflow's state from its jobs' counts: running while any job has not ended; then completed when all
    completed, cancelled when an operator cancelled it, otherwise ended with failures."""
    if not counts or any(n for state, n in counts.items() if state not in TERMINAL):
        return Workflow.State.RUNNING
    if set(counts) == {JobState.COMPLETED.value}:
        return Workflow.State.COMPLETED
    return Workflow.State.CANCELLED if cancelled else Workflow.State.FAILED


def recount(records: dict[str, tuple[str, WorkflowRecord | None]], synced: datetime) -> None:
    ids = list(records)
    counts: dict[str, dict[str, int]] = {wf: {} for wf in ids}
    ends: dict[str, Any] = {}
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        rows = Job.objects.filter(workflow_id__in=chunk).values_list("workflow_id", "state").annotate(n=Count("id"))
        for wf, state, n in rows.order_by():
            counts[wf][state] = n
        for wf, end in (
            Job.objects.filter(workflow_id__in=chunk).values_list("workflow_id").annotate(end=Max("finished_at"))
        ).order_by():
            ends[wf] = end
    known = {w.id: w for w in Workflow.objects.filter(id__in=ids)}
    for wf in ids:
        queue, record = records[wf]
        row = known.get(wf) or Workflow(id=wf, queue=queue[:100])
        if record is not None:  # Redis still holds it (else the row keeps what it last saw)
            row.name = record.name[:200]
            row.size = record.size
            row.created_at = ms_to_datetime(str(record.created_ms))
            row.cancelled_at = ms_to_datetime(str(record.cancelled_ms)) if record.cancelled_ms else None
        row.counts = dict(sorted(counts[wf].items()))
        row.state = summarise(counts[wf], row.cancelled_at is not None)
        row.finished_at = ends.get(wf) if row.state != Workflow.State.RUNNING else None
        row.synced_at = synced
        row.save()


def changes_for_resync(queries: Queries, hashes: Sequence[dict[str, str]]) -> WorkflowChanges:
    """A resync reads every job of a queue again: their links too (ignored when already written)."""
    return read(queries, [(h, True) for h in hashes])
