"""A job's place in a workflow for its page, from the mirror: its workflow and step, its parents (with the policy
of each link) and its dependents, each with its step and state."""

from dataclasses import dataclass, field
from typing import Any

from jobconsole.models import Job, JobLink, Workflow

SHOWN = 25  # dependents listed; a fan-in's parents too (the rest are counted, and on the workflow's page)


@dataclass
class Linked:
    workflow: Workflow | None = None
    workflow_id: str = ""
    step: str = ""
    parents: list[dict[str, Any]] = field(default_factory=list)
    parent_count: int = 0
    dependents: list[dict[str, Any]] = field(default_factory=list)
    dependent_count: int = 0

    @property
    def any(self) -> bool:
        return bool(self.workflow_id or self.parent_count or self.dependent_count)


def _rows(ids: list[str]) -> dict[str, dict[str, Any]]:
    return {r["id"]: dict(r) for r in Job.objects.filter(id__in=ids).values("id", "step", "state", "task")}


def job_links(job_id: str) -> Linked:
    row = Job.objects.filter(id=job_id).values_list("workflow_id", "step").first() or ("", "")
    out = Linked(workflow_id=row[0], step=row[1])
    if out.workflow_id:
        out.workflow = Workflow.objects.filter(id=out.workflow_id).first()
    parents = JobLink.objects.filter(child_id=job_id).order_by("position")
    out.parent_count = parents.count()
    ups: list[dict[str, Any]] = [dict(p) for p in parents.values("parent_id", "parent_queue", "policy")[:SHOWN]]
    found = _rows([p["parent_id"] for p in ups])
    out.parents = [{**p, "job": found.get(p["parent_id"])} for p in ups]
    dependents = JobLink.objects.filter(parent_id=job_id).order_by("child_id")
    out.dependent_count = dependents.count()
    downs: list[dict[str, Any]] = [dict(d) for d in dependents.values("child_id", "policy")[:SHOWN]]
    found = _rows([d["child_id"] for d in downs])
    out.dependents = [{**d, "job": found.get(d["child_id"])} for d in downs]
    return out
