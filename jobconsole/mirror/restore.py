"""Putting back into Redis the jobs it lost: after a rollback (an AOF restored from a copy, a power loss with
`appendfsync everysec`, a new empty server) the database still knows every job the mirror had applied.
Jobs it knew as ready, delayed or running are enqueued again under their own ids, with their task, parameters,
queue, priority, retries, unique key and (for a later run_at) their schedule. Enqueue is idempotent by id,
so a job Redis still has, or one restored twice, stays one job. Finished jobs stay history (in_redis=false).

Jobs waiting for other jobs come back waiting (core/restoring.py), with their edges (JobLink rows), their release
options and their workflow's record, one atomic call per workflow, parents before their dependents. A parent
that ended (the database saw it end) counts at once: a job whose parents all ended is released in that call,
exactly once; one whose parent is pending (put back, or still in Redis) waits for it. The other jobs of a
workflow put back get their workflow again. A parent the database knows nothing of, or could not put back,
counts as dropped: its dependents are cancelled or run under their policy, never left waiting for ever.

A restored job starts a new attempt count in Redis; the attempts the database recorded before the loss stay
in its Attempt rows. A job that was running may still be running in a worker that survived the loss: its
lease is gone from Redis, so its next heartbeat or ack is refused and the restored copy runs again
(at-least-once, like any lease lost)."""

import heapq
import json
import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import redis

from jobconsole.core import Client, JobSpec
from jobconsole.core.errors import InvalidJob
from jobconsole.core.restoring import LostParent, LostWaitingJob, LostWorkflow, restore_waiting
from jobconsole.core.states import STATES, TERMINAL_STATES, JobState
from jobconsole.models import Job, JobLink, Workflow

log = logging.getLogger(__name__)

# Jobs that were ready, delayed, retrying or running are enqueued again as they were; a job waiting for other jobs
# cannot be (enqueued, it would run before them): it comes back waiting, with its edges (restore_waiting).
RESTORABLE = frozenset(s for s, i in STATES.items() if i.zset in ("ready", "scheduled", "active"))
WAITING = JobState.WAITING.value
ENDED = frozenset(s.value for s in TERMINAL_STATES)
CHUNK = 500


@dataclass(frozen=True, slots=True)
class Restored:
    ids: frozenset[str]  # jobs Redis holds again under their own ids (enqueued now, or already back)
    created: int  # how many of them this call enqueued


def restore_lost_jobs(connection: "redis.Redis", rows: Sequence[Job]) -> Restored:
    """Put back the waiting, ready, delayed and running jobs among `rows` (jobs Redis no longer has), with the
    other jobs of their workflows that Redis lost too (in any queue) and the parents they wait for."""
    client = Client(connection, strict=False)  # the mirror need not import every task module
    plan = _plan(rows)
    back, restored = _enqueue(client, plan.plain)
    for workflow, jobs in plan.calls:
        jobs = [job for job in jobs if _valid(client, job.spec)]
        try:
            states = restore_waiting(client, workflow, jobs)
        except InvalidJob as exc:  # refused whole: its jobs stay out, their rows history
            log.error("cannot restore the waiting jobs of workflow=%s: %s", workflow.id or "-", exc)
            continue
        back |= {job.spec.id for job in jobs if job.spec.id}
        restored += sum(1 for state in states if state)
    if restored:
        log.warning("restored %d job(s) Redis had lost, from the database", restored)
    return Restored(frozenset(back), restored)


def _valid(client: Client, spec: JobSpec) -> bool:
    try:
        client.check(spec)
    except InvalidJob as exc:
        log.error("cannot restore job=%s: %s", spec.id, exc)
        return False
    return True


def _spec(row: Job, params: object, run_at: datetime | None = None) -> JobSpec:
    return JobSpec(
        task=row.task, params=params, id=row.id, queue=row.queue, priority=row.priority,  # type: ignore[arg-type]
        max_retries=row.max_retries, unique_key=row.unique_key or None, group=row.group or None, run_at=run_at,
    )  # fmt: skip


def _enqueue(client: Client, rows: Sequence[Job]) -> tuple[set[str], int]:
    """Enqueue again the ready, delayed and running jobs among `rows`: (the ids Redis holds again, how many were
    enqueued now)."""
    now = datetime.now(UTC)
    valid: list[JobSpec] = []
    for row in rows:
        try:
            params = json.loads(row.params or "{}")
        except ValueError:
            log.error("cannot restore job=%s: its mirrored params are not JSON", row.id)
            continue
        later = row.run_at if row.run_at is not None and row.run_at > now else None
        spec = _spec(row, params, later if STATES[JobState(row.state)].zset == "scheduled" else None)
        if _valid(client, spec):
            valid.append(spec)
    results = client.enqueue_many(valid)
    # A unique key another job took meanwhile answers with that job ('duplicate'): this one is not back.
    return {result.id for result in results if result.status != "duplicate"}, sum(r.created for r in results)


@dataclass(frozen=True, slots=True)
class _Plan:
    plain: list[Job]  # to enqueue again
    calls: list[tuple[LostWorkflow, list[LostWaitingJob]]]  # restore_waiting's, parents' calls first


def _rows(ids: set[str]) -> list[Job]:
    ordered = sorted(ids)
    out: list[Job] = []
    for start in range(0, len(ordered), CHUNK):
        out += Job.objects.filter(id__in=ordered[start : start + CHUNK])
    return out


def _plan(rows: Sequence[Job]) -> _Plan:
    """What to put back: the rows, with the jobs of their workflows the database still counts as in Redis, and
    the parents of the waiting ones; the waiting jobs grouped by workflow and ordered parents first."""
    lost = {row.id: row for row in rows if row.state in RESTORABLE or row.state == WAITING}
    workflow_ids = sorted({row.workflow_id for row in lost.values() if row.workflow_id})
    for start in range(0, len(workflow_ids), CHUNK):
        chunk = workflow_ids[start : start + CHUNK]
        for row in Job.objects.filter(workflow_id__in=chunk, in_redis=True):
            if row.state in RESTORABLE or row.state == WAITING:
                lost.setdefault(row.id, row)
    waiting = {i: row for i, row in lost.items() if row.state == WAITING}
    links: dict[str, list[JobLink]] = {i: [] for i in waiting}
    ordered = sorted(waiting)
    for start in range(0, len(ordered), CHUNK):
        for link in JobLink.objects.filter(child_id__in=ordered[start : start + CHUNK]).order_by(
            "child_id", "position"
        ):
            links[link.child_id].append(link)
    parent_ids = {link.parent_id for ls in links.values() for link in ls}
    parents = {row.id: row for row in _rows(parent_ids - set(lost))} | lost
    for row in list(parents.values()):  # a parent outside the workflows that Redis lost too goes back first
        if row.in_redis and row.state in RESTORABLE:
            lost.setdefault(row.id, row)
    records = {w.id: w for w in Workflow.objects.filter(id__in=workflow_ids)}
    by_workflow: dict[str, list[Job]] = defaultdict(list)
    for row in lost.values():
        if row.workflow_id:
            by_workflow[row.workflow_id].append(row)
    calls: list[tuple[LostWorkflow, list[LostWaitingJob]]] = []
    for workflow_id, members in sorted(by_workflow.items()):
        jobs = [
            _waiting_job(row, links[row.id], parents) for row in _parents_first(members, links) if row.id in waiting
        ]
        calls.append((_workflow(workflow_id, records.get(workflow_id), members), jobs))
    for row in sorted((r for r in waiting.values() if not r.workflow_id), key=lambda r: r.id):  # depends_on jobs
        calls.append((LostWorkflow("", row.queue), [_waiting_job(row, links[row.id], parents)]))
    plain = [row for row in lost.values() if row.state in RESTORABLE]
    return _Plan(plain, _calls_in_order(calls))


def _waiting_job(row: Job, links: Sequence[JobLink], known: dict[str, Job]) -> LostWaitingJob:
    try:
        params = json.loads(row.params or "{}")
        release = json.loads(row.release_options) if row.release_options else {}
    except ValueError:
        params, release = None, {}  # refused by the client's check: logged there
    now = datetime.now(UTC)
    parents = []
    for link in links:
        parent = known.get(link.parent_id)
        ended = parent.state if parent is not None and parent.state in ENDED else JobState.DROPPED.value
        completed = parent is not None and parent.state == JobState.COMPLETED.value
        parents.append(LostParent(link.parent_queue, link.parent_id, parent.step if parent is not None else "",
                                  link.policy, ended, parent.result if completed and parent else ""))  # fmt: skip
    later = row.run_at is not None and row.run_at > now and row.run_at != row.enqueued_at
    return LostWaitingJob(
        spec=_spec(row, params), params_json=row.params or "{}", parents=parents, step=row.step,
        run_at_ms=str(int(row.run_at.timestamp() * 1000)) if later and row.run_at else "", release=release,
    )  # fmt: skip


def _workflow(workflow_id: str, record: Workflow | None, lost: Sequence[Job]) -> LostWorkflow:
    """The workflow's record as the database kept it, with every job it was made of."""
    jobs = Job.objects.filter(workflow_id=workflow_id).order_by("id").values_list("step", "queue", "id")
    every = [(step, f"{queue}|{job_id}") for step, queue, job_id in jobs.iterator(chunk_size=2000)]
    enqueued = [(f"{row.queue}|{row.id}", row.step) for row in lost if row.state in RESTORABLE]
    if record is None or record.created_at is None:  # never mirrored whole: no record to put back
        return LostWorkflow(workflow_id, min(lost, key=lambda r: r.id).queue, members=every, enqueued=enqueued)
    cancelled = int(record.cancelled_at.timestamp() * 1000) if record.cancelled_at else None
    return LostWorkflow(workflow_id, record.queue, record.name, int(record.created_at.timestamp() * 1000), cancelled,
                        record.size, every, enqueued)  # fmt: skip


def _parents_first(rows: Sequence[Job], links: dict[str, list[JobLink]]) -> list[Job]:
    """Rows ordered so that a job comes after the parents among them (by id among the ready ones)."""
    by_id = {row.id: row for row in rows}
    edges = {row.id: [link.parent_id for link in links.get(row.id, ()) if link.parent_id in by_id] for row in rows}
    return [by_id[i] for i in _kahn(sorted(by_id), edges)]


def _calls_in_order(
    calls: list[tuple[LostWorkflow, list[LostWaitingJob]]],
) -> list[tuple[LostWorkflow, list[LostWaitingJob]]]:
    """A call whose jobs wait for jobs another call puts back comes after it (a depends_on across workflows)."""
    owner = {job.spec.id: n for n, (_, jobs) in enumerate(calls) for job in jobs}
    edges = {n: [owner[p.job_id] for job in jobs for p in job.parents if owner.get(p.job_id, n) != n]
             for n, (_, jobs) in enumerate(calls)}  # fmt: skip
    return [calls[n] for n in _kahn(list(range(len(calls))), edges)]


def _kahn[T: (str, int)](nodes: list[T], parents: dict[T, list[T]]) -> list[T]:
    """`nodes` with each after its `parents` (Kahn's order, the smallest ready first); a cycle, which the engine
    never makes, is broken at its smallest node rather than dropped."""
    waiting = {node: len(set(parents[node])) for node in nodes}
    children: dict[T, list[T]] = defaultdict(list)
    for node in nodes:
        for parent in set(parents[node]):
            children[parent].append(node)
    ready = [node for node in nodes if not waiting[node]]
    heapq.heapify(ready)
    out: list[T] = []
    placed: set[T] = set()
    while len(out) < len(nodes):
        if not ready:
            heapq.heappush(ready, min(node for node in nodes if node not in placed))
        node = heapq.heappop(ready)
        if node in placed:
            continue
        out.append(node)
        placed.add(node)
        for child in children[node]:
            waiting[child] -= 1
            if waiting[child] == 0 and child not in placed:
                heapq.heappush(ready, child)
    return out
