"""Workflows and the links between jobs (core/workflows.py): a workflow's steps with their jobs' states now, and a
job's parents and dependents."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from jobconsole.core import keys
from jobconsole.core.keys import queue_keys
from jobconsole.core.queries.base import Reader
from jobconsole.core.states import JobState
from jobconsole.core.workflows import (
    JobLinks,
    WorkflowView,
    decode_links,
    decode_view,
    members,
)
from jobconsole.core.workflows import ParentLink as StepParent  # (ParentLink here is the mirror's, below)


@dataclass(frozen=True)
class GraphStep:
    """A step of a workflow with its job now: its task and state (both unknown once the job is gone: retention)
    and the steps it waits for, each with its policy and how it ended as the step saw it."""

    name: str
    queue: str
    job_id: str
    task: str  # '' when the job is gone
    state: JobState | None  # None: the job is gone
    parents: list[StepParent]


@dataclass(frozen=True)
class WorkflowGraph:
    """A workflow with every step's job and links (`Workflows.graph`): what the HTTP API answers. `steps` in
    creation order; `view.steps` as the record lists them."""

    view: WorkflowView
    steps: list[GraphStep]


@dataclass(frozen=True, slots=True)
class WorkflowRecord:
    id: str
    queue: str
    name: str
    created_ms: int
    size: int
    cancelled_ms: int | None


@dataclass(frozen=True, slots=True)
class ParentLink:
    parent_id: str
    queue: str
    policy: str
    position: int


class Workflows(Reader):
    def members(self, workflow_id: str, queue: str) -> list[tuple[str, str]]:
        """(queue, job id) of each step of a workflow (`queue`: its WorkflowResult.queue); [] when unknown."""
        return members(cast(dict[str, str], self.redis.hgetall(queue_keys(queue).workflow(workflow_id))))

    def _record(self, workflow_id: str, queue: str) -> tuple[dict[str, str], list[tuple[str, str]]] | None:
        """A workflow's record and its steps' (queue, job id), their queues' intakes drained first so that every
        step's hash exists; None when unknown (or expired)."""
        record = cast(dict[str, str], self.redis.hgetall(queue_keys(queue).workflow(workflow_id)))
        if not record:
            return None
        jobs = members(record)
        for q in {q for q, _ in jobs}:
            self._drain(q)
        return record, jobs

    def get(self, workflow_id: str, queue: str) -> WorkflowView | None:
        """A workflow's steps and the state of each step's job now, or None when unknown (or expired)."""
        read = self._record(workflow_id, queue)
        if read is None:
            return None
        record, jobs = read
        pipe = self.redis.pipeline(transaction=False)
        for q, job_id in jobs:
            pipe.hget(queue_keys(q).job(job_id), "state")
        return decode_view(workflow_id, record, pipe.execute() if jobs else [])

    def links(self, job_id: str, queue: str) -> JobLinks:
        """A job's parents (each with its policy and how it ended, as the job saw it) and its dependents."""
        key = queue_keys(queue).job(job_id)
        pipe = self.redis.pipeline(transaction=False)
        pipe.hgetall(key + ":deps")
        pipe.hgetall(key + ":ended")
        pipe.smembers(key + ":children")
        deps, ended, children = pipe.execute()
        return decode_links(deps, ended, children)

    def locate(self, workflow_id: str) -> str | None:
        """The queue holding a workflow's record (its first step's queue), None when no queue does: one EXISTS per
        queue in one round trip, as Jobs.locate finds a job."""
        queues = sorted(cast(set[str], self.redis.smembers(keys.QUEUES)))
        pipe = self.redis.pipeline(transaction=False)
        for q in queues:
            pipe.exists(queue_keys(q).workflow(workflow_id))
        return next((q for q, found in zip(queues, pipe.execute(), strict=True) if found), None)

    def graph(self, workflow_id: str, queue: str) -> WorkflowGraph | None:
        """A workflow's steps with each job's task, state and parents, in one round trip after the record (two
        commands per step); None when unknown (or expired)."""
        read = self._record(workflow_id, queue)
        if read is None:
            return None
        record, jobs = read
        pipe = self.redis.pipeline(transaction=False)
        for q, job_id in jobs:
            key = queue_keys(q).job(job_id)
            pipe.hmget(key, "state", "task")
            pipe.hgetall(key + ":deps")
        replies = iter(pipe.execute() if jobs else [])
        found = [(next(replies), next(replies)) for _ in jobs]
        view = decode_view(workflow_id, record, [state for (state, _), _ in found])
        steps = [
            GraphStep(s.name, s.queue, s.job_id, task or "", s.state, decode_links(deps, {}, ()).parents)
            for s, ((_, task), deps) in zip(view.steps, found, strict=True)
        ]
        # In creation order (parents first): the record's fields come back in no set order once it is large, and
        # a workflow's job ids are made in one increasing batch in that order (steps given ids of their own: by id).
        return WorkflowGraph(view, sorted(steps, key=lambda s: s.job_id))

    def records(self, workflows: Sequence[tuple[str, str]]) -> list[WorkflowRecord | None]:
        """The records of (workflow id, its queue) pairs in one round trip, without their members' states (the
        mirror's read); None for one Redis no longer holds (expired after its `keep`)."""
        if not workflows:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for workflow_id, queue in workflows:
            pipe.hmget(queue_keys(queue).workflow(workflow_id), ["name", "created_at", "size", "cancelled_at"])
        out: list[WorkflowRecord | None] = []
        for (workflow_id, queue), (name, created, size, cancelled) in zip(workflows, pipe.execute(), strict=True):
            if created is None:
                out.append(None)
                continue
            out.append(WorkflowRecord(workflow_id, queue, name or "", int(created), int(size or 0),
                                      int(cancelled) if cancelled else None))  # fmt: skip
        return out

    def parents(self, jobs: Sequence[tuple[str, str]]) -> list[list[ParentLink]]:
        """Each (queue, job id)'s parents in the order it lists them, in one round trip (the mirror's read)."""
        if not jobs:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for queue, job_id in jobs:
            pipe.hgetall(queue_keys(queue).job(job_id) + ":deps")
        out: list[list[ParentLink]] = []
        for deps in pipe.execute():
            links: list[ParentLink] = []
            for ref, value in deps.items():
                queue, _, parent_id = ref.partition("|")
                policy, index, _ = [*value.split("|", 2), "", ""][:3]
                links.append(ParentLink(parent_id, queue, policy, int(index) if index.isdigit() else 0))
            out.append(sorted(links, key=lambda link: link.position))
        return out
