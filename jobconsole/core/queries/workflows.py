"""Workflows and the links between jobs (core/workflows.py): a workflow's steps with their jobs' states now, and a
job's parents and dependents."""

from typing import cast

from jobconsole.core.keys import queue_keys
from jobconsole.core.queries.base import Reader
from jobconsole.core.workflows import JobLinks, WorkflowView, decode_links, decode_view, members


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
