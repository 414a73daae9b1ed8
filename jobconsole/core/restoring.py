"""Putting back jobs that wait for other jobs after Redis lost them (a rollback), from what the caller kept of them
(the database mirror: jobconsole/mirror/restore.py). A waiting job cannot simply be enqueued again, it would run
before its parents: it comes back waiting, with its edges, its release options (where its parents' results go,
its `when`, its release delay) and its workflow's record, in one atomic call per workflow (lua/workflow_restore.lua).
A parent that ended while Redis no longer holds it counts as the caller saw it end; one still pending releases
the job when it ends, as if nothing had happened."""

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from jobconsole.core import cluster
from jobconsole.core.errors import InvalidJob
from jobconsole.core.keys import queue_keys
from jobconsole.core.scripts import Arg
from jobconsole.core.workflows import KEEP_SECONDS

if TYPE_CHECKING:
    from jobconsole.core.client import Client, JobSpec

# The job hash's release options (lua/_deps.lua) a restore needs back, in workflow_restore.lua's order.
RELEASE_FIELDS = ("pass", "splice_at", "when", "release_delay")


@dataclass(frozen=True, slots=True)
class LostParent:
    queue: str
    job_id: str
    step: str  # '' for a depends_on parent
    policy: str
    ended: str = ""  # the state it ended in, for a parent Redis may no longer hold ('' : it must be there)
    result: str = ""  # its result JSON, when it completed

    @property
    def ref(self) -> str:
        return f"{self.queue}|{self.job_id}"


@dataclass(frozen=True, slots=True)
class LostWaitingJob:
    """A job that waited for its parents. `spec` as it was enqueued (its id, task, queue, priority, retries,
    group); `params_json` its params exactly as stored (a job passed its parents' results holds a `null` where they
    go, at byte `splice_at`); `run_at_ms` a time it must not run before ('' none)."""

    spec: "JobSpec"
    params_json: str
    parents: Sequence[LostParent]
    step: str = ""
    run_at_ms: str = ""
    release: Mapping[str, str] = field(default_factory=dict)  # RELEASE_FIELDS as its hash had them


@dataclass(frozen=True, slots=True)
class LostWorkflow:
    """The workflow the jobs belong to ('' id: depends_on jobs of no workflow, `home` their queue). `members`:
    (step, ref) of every job of it, for its record; `enqueued`: (ref, step) of its jobs put back as plain jobs,
    which get their workflow again."""

    id: str
    home: str
    name: str = ""
    created_ms: int = 0
    cancelled_ms: int | None = None
    size: int = 0
    members: Sequence[tuple[str, str]] = ()
    enqueued: Sequence[tuple[str, str]] = ()


def restore_waiting(client: "Client", workflow: LostWorkflow, jobs: Sequence[LostWaitingJob]) -> list[str]:
    """Put back `jobs` (parents before their dependents) in one atomic call: per job its state now (waiting, or
    released, or cancelled by a parent that failed), '' for one Redis held already. InvalidJob for a job the
    client refuses (nothing is written then)."""
    args: list[Arg] = [workflow.name, workflow.home]
    keep_ms = 0
    if workflow.id and workflow.created_ms:
        keep_ms = max(int(workflow.created_ms + KEEP_SECONDS * 1000 - time.time() * 1000), 0)
    args += [keep_ms, workflow.created_ms, workflow.cancelled_ms or "", workflow.size, len(workflow.members)]
    for step, ref in workflow.members:
        args += [step, ref]
    args.append(len(jobs))
    queues: set[str] = set()
    for job in jobs:
        prepared = client._prepare(replace(job.spec, delay=None, run_at=None))
        queues.add(prepared.queue)
        a = prepared.args
        pairs = list(a[7:])
        assert pairs[2] == "params", pairs  # keep the stored text: the release splices results in at a byte offset
        pairs[3] = job.params_json
        args += [prepared.queue, prepared.id, a[1], a[2], job.run_at_ms, job.step,
                 *(job.release.get(name, "") for name in RELEASE_FIELDS), len(job.parents)]  # fmt: skip
        for p in job.parents:
            args += [p.ref, p.policy, p.step, p.ended, p.result]
        args += [a[6], *pairs]
    args.append(len(workflow.enqueued))
    for ref, step in workflow.enqueued:
        args += [ref, step]
    if client.store.cluster:
        _refuse_spanning_slots(workflow, queues, jobs)
    if new_queues := queues - client._known_queues:  # a queue Redis forgot too: the console and workers see it again
        client._register_queues(new_queues)
    return client.store.run(client.store.workflow_restore_call(workflow.home, workflow.id, args))


def _refuse_spanning_slots(workflow: LostWorkflow, queues: set[str], jobs: Sequence[LostWaitingJob]) -> None:
    """On a Redis Cluster one call reaches one slot: a workflow whose lost waiting jobs, parents or home span
    queues in several slots is refused whole (its rows stay history), not half restored."""
    named = queues | {workflow.home} | {p.queue for job in jobs for p in job.parents}
    if len({cluster.slot_of(queue_keys(q).ready) for q in named}) > 1:
        raise InvalidJob(
            f"its waiting jobs span queues in several Redis Cluster slots ({', '.join(sorted(named))}): "
            "a restore of those is not supported yet; enqueue them again by hand"
        )
