"""A workflow's steps a page at a time, and its steps collapsed by name (the members of a fan-out, `export.0` ...
`export.9999`, counted as one group): what GET /workflows/{id} and GET /workflows/{id}/steps answer.

Read from the database mirror (Job and JobLink rows), as the job search and the list of workflows are: a page
costs a few indexed queries whatever the workflow's size, and nothing scans Redis. A workflow the mirror has not
seen yet (created a moment ago) is read from Redis once (`live_*`) and paged in memory.

A step's parents and dependents are listed up to MAX_LINKS each, with their counts: a fan-in's callback waits for
every member, and its whole list is a page of its own (`parents_of`)."""

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Q, QuerySet

from jobconsole.core.queries.workflows import WorkflowGraph
from jobconsole.models import Job as JobRow
from jobconsole.models import JobLink
from jobconsole.step_names import base, siblings_regex
from jobconsole_api.problems import Problem

MAX_LINKS = 100  # parents (or dependents) listed per step; the counts say how many there are
COLLAPSE = 2  # a name shared by this many steps (without their numbers) is one group
CHUNK = 500
GONE = "gone"  # a state key for a step whose job Redis dropped, read from Redis


@dataclass(frozen=True, slots=True)
class StepFilters:
    state: str | None = None
    step: str | None = None  # a step's name, or the name its fan-out's members share
    parents_of: str | None = None  # the steps this step waits for
    dependents_of: str | None = None  # the steps waiting for this step

    @classmethod
    def of(cls, params: dict[str, Any]) -> "StepFilters":
        return cls(params.get("state"), params.get("step"), params.get("parents_of"), params.get("dependents_of"))


@dataclass(frozen=True, slots=True)
class StepPage:
    items: list[dict[str, Any]]
    next_cursor: str | None  # the last item's job id, when there are more


def groups(steps: Iterable[tuple[str, str]]) -> list[dict[str, Any]]:
    """(step name, state) pairs collapsed by the name without its trailing number, in the order first seen; a name
    only one step has stays that step's own name."""
    by_name: dict[str, dict[str, int]] = {}
    names: dict[str, list[str]] = defaultdict(list)
    for step, state in steps:
        shared = base(step)
        counts = by_name.setdefault(shared, {})
        counts[state] = counts.get(state, 0) + 1
        if len(names[shared]) < COLLAPSE:
            names[shared].append(step)
    out = []
    for shared, counts in by_name.items():
        size = sum(counts.values())
        name = shared if size >= COLLAPSE else names[shared][0]
        out.append({"name": name, "size": size, "counts": dict(sorted(counts.items()))})
    return out


def _no_step(field: str, name: str) -> Problem:
    return Problem(422, f"The parameters are not valid: {field} names no step of this workflow ({name!r}).",
                   errors=[{"field": field, "message": f"names no step of this workflow ({name!r})"}])  # fmt: skip


# --- from the mirror ----------------------------------------------------------------------------------------


def stored_groups(workflow_id: str) -> list[dict[str, Any]]:
    rows = JobRow.objects.filter(workflow_id=workflow_id).order_by("id").values_list("step", "state")
    return groups(rows.iterator(chunk_size=2000))


def _step_id(workflow_id: str, field: str, name: str) -> str:
    found = JobRow.objects.filter(workflow_id=workflow_id, step=name).values_list("id", flat=True).first()
    if found is None:
        raise _no_step(field, name)
    return found


def _filtered(workflow_id: str, filters: StepFilters) -> QuerySet[JobRow]:
    rows = JobRow.objects.filter(workflow_id=workflow_id)
    if filters.state:
        rows = rows.filter(state=filters.state)
    if filters.step:
        rows = rows.filter(Q(step=filters.step) | Q(step__regex=siblings_regex(filters.step)))
    if filters.parents_of:
        child = _step_id(workflow_id, "parents_of", filters.parents_of)
        rows = rows.filter(id__in=JobLink.objects.filter(child_id=child).values("parent_id"))
    if filters.dependents_of:
        parent = _step_id(workflow_id, "dependents_of", filters.dependents_of)
        rows = rows.filter(id__in=JobLink.objects.filter(parent_id=parent).values("child_id"))
    return rows


def _links(ids: Sequence[str], mine: str, other: str, order: str) -> tuple[dict[str, list[Any]], dict[str, int]]:
    """For each of `ids` (the `mine` side of its links): up to MAX_LINKS links (other id, policy) and their count.
    A job with more (a fan-in's callback, a fan-out's root) is read alone, up to the cap."""
    counts: dict[str, int] = {}
    for start in range(0, len(ids), CHUNK):
        found = JobLink.objects.filter(**{f"{mine}__in": ids[start : start + CHUNK]}).values_list(mine)
        counts.update(found.annotate(n=Count("id")).order_by())
    links: dict[str, list[Any]] = defaultdict(list)
    few = [i for i in ids if 0 < counts.get(i, 0) <= MAX_LINKS]
    for start in range(0, len(few), CHUNK):
        rows = JobLink.objects.filter(**{f"{mine}__in": few[start : start + CHUNK]}).order_by(mine, order)
        for job_id, linked, policy in rows.values_list(mine, other, "policy"):
            links[job_id].append((linked, policy))
    for job_id in (i for i in ids if counts.get(i, 0) > MAX_LINKS):
        rows = JobLink.objects.filter(**{mine: job_id}).order_by(order)[:MAX_LINKS]
        links[job_id] = list(rows.values_list(other, "policy"))
    return links, counts


def stored_page(workflow_id: str, filters: StepFilters, cursor: str | None, limit: int) -> StepPage:
    """A page of a workflow's steps as the mirror has them, in creation order (its job ids'), after `cursor`."""
    rows = _filtered(workflow_id, filters)
    if cursor:
        rows = rows.filter(id__gt=cursor.upper())
    found = list(rows.order_by("id").values_list("id", "step", "queue", "task", "state")[: limit + 1])
    more = len(found) > limit
    found = found[:limit]
    ids = [row[0] for row in found]
    parents, parent_counts = _links(ids, "child_id", "parent_id", "position")
    dependents, dependent_counts = _links(ids, "parent_id", "child_id", "child_id")
    linked = sorted({i for ls in (*parents.values(), *dependents.values()) for i, _ in ls})
    step_of: dict[str, str] = {}
    for start in range(0, len(linked), CHUNK):
        step_of.update(JobRow.objects.filter(id__in=linked[start : start + CHUNK]).values_list("id", "step"))
    items = [
        {"name": step, "job_id": job_id, "queue": queue, "task": task, "state": state,
         "parents": [{"step": step_of.get(p, ""), "job_id": p, "policy": policy} for p, policy in parents[job_id]],
         "parent_count": parent_counts.get(job_id, 0),
         "dependents": [step_of.get(c, "") for c, _ in dependents[job_id]],
         "dependent_count": dependent_counts.get(job_id, 0)}
        for job_id, step, queue, task, state in found
    ]  # fmt: skip
    return StepPage(items, ids[-1] if more and ids else None)


# --- from Redis, for a workflow the mirror has not seen yet -------------------------------------------------


def live_groups(graph: WorkflowGraph) -> list[dict[str, Any]]:
    return groups((s.name, s.state.value if s.state else GONE) for s in graph.steps)


def live_page(graph: WorkflowGraph, filters: StepFilters, cursor: str | None, limit: int) -> StepPage:
    """The same page as `stored_page`, from the steps Redis holds (read in one round trip, paged here)."""
    steps = graph.steps  # in creation order
    by_name = {s.name: s for s in steps}
    dependents: dict[str, list[str]] = {s.name: [] for s in steps}
    for s in steps:
        for p in s.parents:
            if p.step in dependents:
                dependents[p.step].append(s.name)
    chosen = steps
    if filters.state:
        chosen = [s for s in chosen if (s.state.value if s.state else None) == filters.state]
    if filters.step:
        chosen = [s for s in chosen if s.name == filters.step or base(s.name) == filters.step]
    if filters.parents_of:
        if filters.parents_of not in by_name:
            raise _no_step("parents_of", filters.parents_of)
        waited_for = {p.step for p in by_name[filters.parents_of].parents}
        chosen = [s for s in chosen if s.name in waited_for]
    if filters.dependents_of:
        if filters.dependents_of not in by_name:
            raise _no_step("dependents_of", filters.dependents_of)
        waiting = set(dependents[filters.dependents_of])
        chosen = [s for s in chosen if s.name in waiting]
    if cursor:
        chosen = [s for s in chosen if s.job_id > cursor.upper()]
    shown = chosen[:limit]
    items = [
        {"name": s.name, "job_id": s.job_id, "queue": s.queue, "task": s.task,
         "state": s.state.value if s.state else None,
         "parents": [{"step": p.step, "job_id": p.job_id, "policy": p.policy} for p in s.parents[:MAX_LINKS]],
         "parent_count": len(s.parents), "dependents": dependents[s.name][:MAX_LINKS],
         "dependent_count": len(dependents[s.name])}
        for s in shown
    ]  # fmt: skip
    return StepPage(items, shown[-1].job_id if len(chosen) > limit else None)
