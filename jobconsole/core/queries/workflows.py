"""Workflows and the links between jobs (core/workflows.py): a workflow's steps with their jobs' states now, and a
job's parents and dependents."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from jobconsole.core.keys import queue_keys
from jobconsole.core.queries.base import Reader
from jobconsole.core.workflows import JobLinks, WorkflowView, decode_links, decode_view, members


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

    def get(self, workflow_id: str, queue: str) -> WorkflowView | None:
        """A workflow's steps and the state of each step's job now, or None when unknown (or expired)."""
        record = cast(dict[str, str], self.redis.hgetall(queue_keys(queue).workflow(workflow_id)))
        if not record:
            return None
        jobs = members(record)
        for q in {q for q, _ in jobs}:
            self._drain(q)
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
