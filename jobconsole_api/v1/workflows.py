"""Workflows (docs/workflows.md): create a DAG of named steps in one atomic call, read one, cancel what has not run,
resubmit its members that did not complete. The engine checks the whole graph before anything is written, so a
refusal (422) names the step at fault and nothing is enqueued.

Who may: creating needs the submit scope, every step inside the token's limits (403 naming the step otherwise);
a workflow is there for a caller as its jobs are (jobconsole_api/access.py): a read or operate token sees every
workflow whose every step is inside its limits, a submit token only the workflows it created (it submitted their
jobs); anyone else gets the 404 of an unknown id. Cancel and resubmit follow a job's cancel: a submit token acts
on its own workflows, an operate token on any.

The list reads the database mirror's Workflow rows (jobconsole/mirror/workflows.py): Redis keeps no index of
workflows, and a list must not scan its keys. One workflow is read from Redis, as it is now.
"""

from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet

from jobconsole import audit
from jobconsole.core import InvalidJob, JobNotFound, RedisFull
from jobconsole.core.batch import BatchAction, BatchItem, Verdict, apply_batch
from jobconsole.core.client import JobSpec
from jobconsole.core.ids import new_job_id
from jobconsole.core.job import ms_to_datetime
from jobconsole.core.queries.workflows import WorkflowGraph
from jobconsole.core.states import JobState
from jobconsole.core.workflows import (
    ALL_ENDED,
    ARGS,
    ARGS_LIST,
    CANCEL,
    FIRST_FAILURE,
    MAX_STEPS,
    POLICIES,
    RUN,
    InvalidWorkflow,
    Step,
)
from jobconsole.engine import get_client
from jobconsole.mirror.workflows import summarise
from jobconsole.models import Job as JobRow
from jobconsole.models import Workflow
from jobconsole.moments import from_micros, to_micros
from jobconsole_api.problems import Problem
from jobconsole_api.v1 import shapes, workflow_steps
from jobconsole_api.v1.common import REASON, page_of, paging
from jobconsole_api.v1.jobs import JOB_SPEC, _known_queues, _redis_full, _spec
from jobconsole_api.v1.routing import Call, Param, Reply, Response, operation
from jobconsole_api.v1.schema import (
    NAME_PATTERN,
    ULID_PATTERN,
    Schema,
    array,
    boolean,
    nullable,
    obj,
    ref,
    string,
)

MAX_NAME = 200
GONE = "gone"  # WorkflowView.counts' key for steps whose job Redis dropped (retention)
# What a step's job may say: a single job's options, but for a unique key (the engine refuses one in a workflow).
SPEC_FIELDS = {k: v for k, v in JOB_SPEC["properties"].items() if k not in ("unique_key", "unique_until")}
PASS_RESULTS = string(
    f"give the job its parents' results: {ARGS!r} (the parent's result first in params.args; several parents: "
    f"the list of their results), {ARGS_LIST!r} (the list of the parents' results first in params.args), or the "
    "name of a parameter that gets {parent step: result} (null for a parent that did not complete)",
    pattern="^(\\*args|\\*args-list|[A-Za-z_][A-Za-z0-9_]{0,99})$",
    **{"x-pattern-message": "must be '*args', '*args-list' or a parameter's name"},
)
POLICY = string("what a parent that does not complete (dead, failed, cancelled, dropped) does to this step: "
                "cancel it (and its own dependents in turn), or run it anyway once every parent ended",
                enum=list(POLICIES))  # fmt: skip
STEP = obj(
    {
        "name": string("the step's name, unique in the workflow", pattern=NAME_PATTERN),
        **SPEC_FIELDS,
        "after": {
            "anyOf": [
                array(string(pattern=NAME_PATTERN), maxItems=MAX_STEPS),
                {"type": "object", "additionalProperties": POLICY},
            ],
            "description": "the steps it waits for: a list of names (each under on_parent_failure), or "
            '{"name": "cancel" | "run"} per parent',
        },
        "on_parent_failure": POLICY | {"default": CANCEL},
        "pass_results": PASS_RESULTS,
        "when": string("all_ended (default): once every parent ended, under each link's policy; first_failure: as "
                       "soon as one parent does not complete (cancelled once every parent completed)",
                       enum=[ALL_ENDED, FIRST_FAILURE]),
    },
    ("name", "task"),
    "One step: a job (as POST /jobs takes it, without a unique key) and the steps it waits for.",
)  # fmt: skip
CALLBACK = obj(
    {**SPEC_FIELDS, "pass_results": string("a parameter that gets {step: result} of every step",
                                           pattern="^[A-Za-z_][A-Za-z0-9_]{0,99}$")},
    ("task",),
    "A job run after the workflow's steps (it waits for every one of them).",
)  # fmt: skip
# Sidekiq's batch callbacks over every step: (its step's name, the policy of its links, when it runs).
CALLBACKS = {
    "on_complete": (RUN, ALL_ENDED),  # once every step ended, whatever each outcome
    "on_success": (CANCEL, ALL_ENDED),  # once every step completed; cancelled as soon as one does not
    "on_death": (RUN, FIRST_FAILURE),  # as soon as one step does not complete; cancelled if all complete
}
CREATE_BODY = obj(
    {
        "name": string("a name for people (the console shows it)", maxLength=MAX_NAME, pattern="^[^\\u0000-\\u001f]*$",
                       **{"x-pattern-message": "must not contain control characters"}),
        "id": string("an id of your own (a ULID): sending the same workflow again is then harmless",
                     pattern=ULID_PATTERN),
        "steps": array(STEP, minItems=1, maxItems=MAX_STEPS),
        "callbacks": obj(
            {name: CALLBACK for name in CALLBACKS},
            (),
            "Sidekiq's batch callbacks, each a step named after its key that waits for every step: on_complete "
            "once every step ended (whatever each outcome), on_success once every step completed (cancelled "
            "otherwise), on_death as soon as one step does not complete (cancelled if all complete).",
        ),
    },
    ("steps",),
    "A workflow: its steps (a graph without cycles), created all or nothing.",
)  # fmt: skip

PARENT = obj({"step": string(), "job_id": string(), "policy": string()}, ("step", "job_id", "policy"))
WORKFLOW_STATE = string(
    "running (a step has not ended), completed (every step completed), cancelled (it was cancelled, and every step "
    "ended), failed (every step ended, one did not complete)",
    enum=[s.value for s in Workflow.State],
)
STEP_STATE = {"type": ["string", "null"], "description": "the job's state now; null once Redis dropped the job"}
CREATED_STEP = obj({"name": string(), "job_id": string(), "queue": string(), "state": STEP_STATE},
                   ("name", "job_id", "queue", "state"))  # fmt: skip
SCHEMAS: dict[str, Schema] = {
    "WorkflowCreated": obj(
        {
            "id": string("the workflow's id"),
            "name": string(),
            "queue": string("where its record lives (its first step's queue)"),
            "status": string("created; exists (this id was sent before: nothing new)", enum=["created", "exists"]),
            "steps": array(CREATED_STEP, "each step's job, in the order sent"),
        },
        ("id", "queue", "status", "steps"),
    ),
    "WorkflowStep": obj(
        {
            "name": string(),
            "job_id": string(),
            "queue": string(),
            "task": string("'' once Redis dropped the job (read from Redis)"),
            "state": STEP_STATE,
            "parents": array(
                PARENT,
                f"the steps it waits for, the first {workflow_steps.MAX_LINKS} (parent_count: "
                "all of them; GET /workflows/{id}/steps?parents_of=<name> pages them)",
            ),
            "parent_count": {"type": "integer"},
            "dependents": array(
                string(),
                f"the steps waiting for this one, the first {workflow_steps.MAX_LINKS} "
                "(dependents_of=<name> pages them)",
            ),
            "dependent_count": {"type": "integer"},
        },
        ("name", "job_id", "queue", "state", "parents", "parent_count", "dependents", "dependent_count"),
    ),
    "Workflow": obj(
        {
            "id": string(),
            "name": string(),
            "queue": string("where its record lives (its first step's queue)"),
            "state": WORKFLOW_STATE,
            "created_at": shapes.TIME,
            "cancelled_at": shapes.TIME,
            "finished_at": shapes.TIME,
            "size": {"type": "integer"},
            "in_redis": boolean("false: Redis has dropped its record (retention); only the database has it"),
            "synced_at": nullable(
                string(
                    "when the database mirror last updated it (its state, counts and steps "
                    "are as of then); null: the mirror has not seen it yet, read from Redis",
                    format="date-time",
                )
            ),
            "counts": {
                "type": "object",
                "additionalProperties": {"type": "integer"},
                "description": "steps by their job's state (gone: Redis dropped the job)",
            },
            "groups": array(
                obj(
                    {
                        "name": string("a step's name, or the name a fan-out's steps share without their numbers"),
                        "size": {"type": "integer"},
                        "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
                    },
                    ("name", "size", "counts"),
                ),
                "its steps collapsed by name (export.0 ... export.9999 are one group `export`), in creation order; "
                "GET /workflows/{id}/steps?step=<name> pages a group's steps",
            ),
            "steps": array(ref("WorkflowStep"), "the first page of its steps, in creation order"),
            "steps_next_cursor": nullable(
                string(
                    "the cursor of GET /workflows/{id}/steps for the next page of steps; null: `steps` holds them all"
                )
            ),
        },
        (
            "id",
            "name",
            "queue",
            "state",
            "created_at",
            "size",
            "in_redis",
            "synced_at",
            "counts",
            "groups",
            "steps",
            "steps_next_cursor",
        ),
    ),
}
shapes.SCHEMAS.update(SCHEMAS)  # components of the document, beside the jobs' (openapi.py reads shapes.SCHEMAS)

WORKFLOW_ID = Param("workflow_id", string("the workflow's id, a ULID", pattern=ULID_PATTERN), where="path",
                    required=True)  # fmt: skip
NOT_FOUND = Response("No such workflow (or not one this token may see: a step outside its limits, or, for a submit "
                     "token, not one it created).")  # fmt: skip


# --- create -------------------------------------------------------------------------------------------------


def _entries(body: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(field, step name, its body) for every step and callback, in the order the engine gets them."""
    out = [(f"steps[{i}]", str(step["name"]), step) for i, step in enumerate(body["steps"])]
    out += [(f"callbacks.{name}", name, cb) for name, cb in (body.get("callbacks") or {}).items()]
    return out


def _steps(body: dict[str, Any]) -> list[Step]:
    """The engine's steps for a checked body: an unknown task or queue is a 422 naming every such step."""
    entries = _entries(body)
    names = [str(step["name"]) for step in body["steps"]]
    known_queues: set[str] | None = None

    def queues() -> set[str]:
        nonlocal known_queues
        if known_queues is None:
            known_queues = _known_queues()
        return known_queues

    errors: list[dict[str, str]] = []
    bad: list[str] = []
    steps: list[Step] = []
    for place, name, entry in entries:
        try:
            spec = _spec(entry, place, queues, check=False)
        except Problem as problem:
            fields = [e["field"] for e in problem.extra.get("errors") or []] or [place]
            errors += [{"field": field, "message": problem.detail} for field in fields]
            bad.append(name)
            continue
        if place.startswith("steps["):
            after = entry.get("after", ())
            steps.append(Step(name, spec, after=dict(after) if isinstance(after, dict) else tuple(after),
                              on_parent_failure=entry.get("on_parent_failure", CANCEL),
                              pass_results=entry.get("pass_results"), when=entry.get("when", ALL_ENDED)))  # fmt: skip
        else:
            policy, when = CALLBACKS[name]
            steps.append(Step(name, spec, after=dict.fromkeys(names, policy), pass_results=entry.get("pass_results"),
                              when=when))  # fmt: skip
    if errors:
        first = f"step {bad[0]!r}: {errors[0]['message']}"
        more = f" (and {len(errors) - 1} more problem(s), in `errors`)" if len(errors) > 1 else ""
        raise Problem(422, f"The workflow is not valid: {first}{more}. Nothing was enqueued.", errors=errors,
                      step=bad[0])  # fmt: skip
    return steps


def _invalid(body: dict[str, Any], exc: InvalidJob) -> Problem:
    step = exc.step if isinstance(exc, InvalidWorkflow) else None
    field = next((place for place, name, _ in _entries(body) if name == step), "steps")
    return Problem(422, f"The workflow is not valid: {exc}. Nothing was enqueued.",
                   errors=[{"field": field, "message": str(exc)}], step=step)  # fmt: skip


@operation(
    "POST", "/workflows", operation_id="create_workflow", summary="Create a workflow", tag="workflows",
    scope="submit", body=CREATE_BODY, idempotent=True,
    responses={
        201: Response("Created: every step's job, waiting for its parents (or queued, for a step without any).",
                      ref("WorkflowCreated")),
        200: Response("Nothing new: this id was sent before.", ref("WorkflowCreated")),
        403: Response("A step's task or queue is outside the token's limits (or the scope is not submit); nothing "
                      "was enqueued."),
        409: Response("The id was used before for another workflow."),
        422: Response("Refused, nothing enqueued: `step` and `errors` name the step at fault (an unknown task or "
                      "queue, parameters its task does not take, a wait for a step that is not there, two steps of "
                      "one name, a cycle, a wrong value); or the Idempotency-Key was used before with another "
                      "body."),
    },
)  # fmt: skip
def create(call: Call) -> Reply:
    """Create a workflow, a graph of named steps, in one atomic call: every step is checked first (its task and
    parameters, the steps it waits for, no cycle), and if one is refused nothing is enqueued. Steps without
    parents are queued (or scheduled, with a delay), the others wait for their parents. Send an `id` of your own
    (a ULID) or an `Idempotency-Key` to make a retried request harmless."""
    body = call.body
    for place, name, entry in _entries(body):
        try:
            call.caller.check_submit(entry["task"], entry.get("queue"))
        except Problem as problem:
            raise Problem(403, f"{place} ({name!r}): {problem.detail} Nothing of the workflow was enqueued.",
                          step=name) from None  # fmt: skip
    steps = _steps(body)
    client = get_client()
    try:
        made = client.enqueue_workflow(steps, name=body.get("name", ""), id=body.get("id"))
    except RedisFull as exc:
        raise _redis_full(exc) from None
    except InvalidJob as exc:  # InvalidWorkflow naming the step, or a name the engine refuses
        raise _invalid(body, exc) from None
    if not made.created:
        graph = client.queries.workflows.graph(made.workflow_id, made.queue)
        known = {s.name: s for s in graph.steps} if graph is not None else {}
        if graph is None or set(known) != {s.name for s in steps} or not _may_see(call, graph):
            raise Problem(409, f"The id {made.workflow_id} was used before for another workflow.")
        shown = [{"name": s.name, "job_id": known[s.name].job_id, "queue": known[s.name].queue,
                  "state": _state(known[s.name].state)} for s in steps]  # fmt: skip
        return Reply(200, _created(made.workflow_id, graph.view.name, made.queue, "exists", shown))
    call.caller.remember(list(made.job_ids_by_step.values()))
    shown = [{"name": s.name, "job_id": made.job_ids_by_step[s.name], "queue": _queue_of(client, s.spec),
              "state": _state(made.states_by_step.get(s.name))} for s in steps]  # fmt: skip
    reply = _created(made.workflow_id, body.get("name", ""), made.queue, "created", shown)
    return Reply(201, reply, {"Location": f"/api/v1/workflows/{made.workflow_id}"})


def _queue_of(client: Any, spec: JobSpec) -> str:
    if spec.queue:
        return spec.queue
    registered = client.registry.find(spec.task)
    return registered.queue if registered is not None else ""


def _created(workflow_id: str, name: str, queue: str, status: str, steps: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": workflow_id, "name": name, "queue": queue, "status": status, "steps": steps}


def _state(state: JobState | None) -> str | None:
    return None if state is None else state.value


# --- read ---------------------------------------------------------------------------------------------------


def _owns(call: Call, job_ids: Sequence[str]) -> bool:
    """Whether the caller's token submitted one of these jobs (a workflow's jobs are all its creator's)."""
    caller = call.caller
    return any(caller.owned(job_ids[i : i + 500]) for i in range(0, len(job_ids), 500))


def _may_see(call: Call, graph: WorkflowGraph) -> bool:
    caller = call.caller
    if caller.limited:
        for step in graph.steps:
            if caller.queue_limits and step.queue not in caller.queue_limits:
                return False
            if caller.task_limits and step.task and step.task not in caller.task_limits:
                return False
    return caller.may_read_all or _owns(call, [s.job_id for s in graph.steps])


def live_workflow(workflow_id: str) -> WorkflowGraph | None:
    """The workflow as Redis holds it, None when Redis holds no record of it."""
    queries = get_client().queries
    queue = queries.workflows.locate(workflow_id)
    return queries.workflows.graph(workflow_id, queue) if queue is not None else None


def no_workflow(workflow_id: str) -> Problem:
    return Problem(404, f"No workflow {workflow_id}.")


def visible_workflow(call: Call, workflow_id: str) -> WorkflowGraph:
    """The workflow Redis holds, once the caller may see it; else the 404 of an unknown id."""
    workflow_id = workflow_id.upper()
    graph = live_workflow(workflow_id)
    if graph is None or not _may_see(call, graph):
        raise no_workflow(workflow_id)
    return graph


def workflow_state(graph: WorkflowGraph) -> str:
    """As the mirror's Workflow row says it (jobconsole/mirror/workflows.py), from the steps Redis still holds."""
    counts = {state: n for state, n in graph.view.counts().items() if state != GONE}
    return str(summarise(counts, graph.view.cancelled_at is not None))


def _may_see_stored(call: Call, row: Workflow) -> bool:
    """As _may_see, from the mirror's rows: every job inside the caller's limits, and for a submit token one of
    its jobs its own (a workflow's jobs are all its creator's)."""
    caller = call.caller
    jobs = JobRow.objects.filter(workflow_id=row.id)
    if caller.queue_limits and (row.queue not in caller.queue_limits or
                                jobs.exclude(queue__in=sorted(caller.queue_limits)).exists()):  # fmt: skip
        return False
    if caller.task_limits and jobs.exclude(task__in=sorted(caller.task_limits)).exists():
        return False
    return caller.may_read_all or call.token.jobs.filter(job_id__in=jobs.values("id")).exists()


def _stored_summary(row: Workflow, in_redis: bool) -> dict[str, Any]:
    return {
        "id": row.id, "name": row.name, "queue": row.queue, "state": row.state,
        "created_at": shapes.iso(row.created_at), "cancelled_at": shapes.iso(row.cancelled_at),
        "finished_at": shapes.iso(row.finished_at), "size": row.size, "in_redis": in_redis,
        "synced_at": shapes.iso(row.synced_at), "counts": row.counts or {},
        "groups": workflow_steps.stored_groups(row.id),
    }  # fmt: skip


def _live_summary(graph: WorkflowGraph) -> dict[str, Any]:
    view = graph.view
    return {
        "id": view.id, "name": view.name, "queue": view.queue, "state": workflow_state(graph),
        "created_at": shapes.iso(ms_to_datetime(view.created_at)),
        "cancelled_at": shapes.iso(ms_to_datetime(view.cancelled_at)), "finished_at": None,
        "size": len(graph.steps), "in_redis": True, "synced_at": None, "counts": view.counts(),
        "groups": workflow_steps.live_groups(graph),
    }  # fmt: skip


def _read(call: Call, workflow_id: str) -> tuple[Workflow | None, WorkflowGraph | None]:
    """The mirror's row of a workflow the caller may see, or, while the mirror has not seen it, its graph from
    Redis; the 404 of an unknown id otherwise."""
    row = Workflow.objects.filter(id=workflow_id).first()
    if row is not None:
        if not _may_see_stored(call, row):
            raise no_workflow(workflow_id)
        return row, None
    return None, visible_workflow(call, workflow_id)


def _page(row: Workflow | None, graph: WorkflowGraph | None, params: dict[str, Any]) -> workflow_steps.StepPage:
    filters = workflow_steps.StepFilters.of(params)
    cursor, limit = params.get("cursor"), params["limit"]
    if row is not None:
        return workflow_steps.stored_page(row.id, filters, cursor, limit)
    assert graph is not None
    return workflow_steps.live_page(graph, filters, cursor, limit)


STEPS_CURSOR = "the last step's job id (steps come in creation order)"


@operation(
    "GET", "/workflows/{workflow_id}", operation_id="get_workflow", summary="Get a workflow", tag="workflows",
    scope="any", params=(WORKFLOW_ID, paging(ULID_PATTERN, STEPS_CURSOR)[0]),
    responses={200: Response("The workflow: its state, its steps by state and collapsed by name, and the first "
                             "page of its steps with their links.", ref("Workflow")), 404: NOT_FOUND},
)  # fmt: skip
def get_workflow(call: Call) -> Reply:
    """A workflow as the database mirror has it (GET /workflows lists the same rows): its state, its steps counted
    by state and collapsed by name (a fan-out's `export.0` ... `export.9999` are one group), and the first `limit`
    steps with their parents and dependents; GET /workflows/{id}/steps pages on from `steps_next_cursor`. A
    workflow the mirror has not seen yet (created a moment ago) is read from Redis (`synced_at: null`). A submit
    token sees only the workflows it created; a limited token only those whose every step is inside its limits."""
    workflow_id = call.params["workflow_id"].upper()
    row, graph = _read(call, workflow_id)
    if row is not None:
        [record] = get_client().queries.workflows.records([(row.id, row.queue)])
        summary = _stored_summary(row, in_redis=record is not None)
    else:
        assert graph is not None
        summary = _live_summary(graph)
    page = _page(row, graph, call.params)
    return Reply(200, {**summary, "steps": page.items, "steps_next_cursor": page.next_cursor})


@operation(
    "GET", "/workflows/{workflow_id}/steps", operation_id="list_workflow_steps", summary="List a workflow's steps",
    tag="workflows", scope="any",
    params=(
        WORKFLOW_ID,
        Param("state", string("only steps whose job is in this state", enum=[s.value for s in JobState])),
        Param("step", string("only this step, or the steps of a fan-out sharing this name without their numbers "
                             "(a group of GET /workflows/{id})", pattern=NAME_PATTERN)),
        Param("parents_of", string("only the steps this step waits for", pattern=NAME_PATTERN)),
        Param("dependents_of", string("only the steps waiting for this step", pattern=NAME_PATTERN)),
        *paging(ULID_PATTERN, STEPS_CURSOR),
    ),
    database_only=True,
    responses={200: Response("A page of steps, in creation order (parents before their dependents).",
                             page_of(ref("WorkflowStep"))),
               422: Response("parents_of or dependents_of names no step of this workflow (`errors` names the "
                             "parameter)."),
               404: NOT_FOUND},
)  # fmt: skip
def list_steps(call: Call) -> Reply:
    """A workflow's steps a page at a time, from the database mirror (from Redis while the mirror has not seen the
    workflow), each with its job's state, its parents and its dependents; filtered by state, by step name (a
    fan-out's group), or to the parents or dependents of one step. Who may see it: as GET /workflows/{id}."""
    row, graph = _read(call, call.params["workflow_id"].upper())
    page = _page(row, graph, call.params)
    return Reply(200, {"items": page.items, "next_cursor": page.next_cursor})


# --- list (the database mirror's Workflow rows: Redis keeps no index of workflows) ---------------------------

LIST_CURSOR = "^[0-9]{1,16}~[0-9A-Z]{1,26}$"  # the last row's creation (microseconds since the epoch) ~ its id


def _listed(call: Call) -> QuerySet[Workflow]:
    """The workflows the caller sees: a submit token those whose jobs it submitted, a limited token those whose
    every job is inside its limits (as the mirror knows them)."""
    caller = call.caller
    rows = Workflow.objects.all()
    if not caller.may_read_all:
        own = JobRow.objects.filter(id__in=call.token.jobs.values("job_id")).exclude(workflow_id="")
        rows = rows.filter(id__in=own.values("workflow_id"))
    members = JobRow.objects.exclude(workflow_id="")
    if caller.queue_limits:
        rows = rows.filter(queue__in=sorted(caller.queue_limits))
        outside = members.exclude(queue__in=sorted(caller.queue_limits))
        rows = rows.exclude(id__in=outside.values("workflow_id"))
    if caller.task_limits:
        rows = rows.exclude(id__in=members.exclude(task__in=sorted(caller.task_limits)).values("workflow_id"))
    return rows


def workflow_row(row: Workflow) -> dict[str, Any]:
    return {
        "id": row.id, "name": row.name, "queue": row.queue, "state": row.state, "size": row.size,
        "counts": row.counts or {}, "created_at": shapes.iso(row.created_at),
        "cancelled_at": shapes.iso(row.cancelled_at), "finished_at": shapes.iso(row.finished_at),
    }  # fmt: skip


SCHEMAS["WorkflowSummary"] = obj(
    {
        "id": string(), "name": string(), "queue": string(), "state": WORKFLOW_STATE, "size": {"type": "integer"},
        "counts": {"type": "object", "additionalProperties": {"type": "integer"},
                   "description": "its jobs by state, as the mirror copied them"},
        "created_at": shapes.TIME, "cancelled_at": shapes.TIME,
        "finished_at": nullable(string("when its last job ended (null while running)", format="date-time")),
    },
    ("id", "name", "queue", "state", "size", "counts", "created_at"),
)  # fmt: skip
shapes.SCHEMAS["WorkflowSummary"] = SCHEMAS["WorkflowSummary"]


@operation(
    "GET", "/workflows", operation_id="list_workflows", summary="List workflows", tag="workflows", scope="any",
    params=(
        Param("state", string(enum=[s.value for s in Workflow.State])),
        Param("queue", string("the queue holding its record (its first step's)", pattern=NAME_PATTERN)),
        Param("name", string("text inside its name (any case)", maxLength=MAX_NAME)),
        *paging(LIST_CURSOR, "its creation in microseconds since the epoch ~ its id"),
    ),
    database_only=True,
    responses={200: Response("A page of workflows, newest first.", page_of(ref("WorkflowSummary")))},
)  # fmt: skip
def list_workflows(call: Call) -> Reply:
    """Workflows as the database mirror has them (a workflow created a moment ago may not be listed yet; GET
    /workflows/{id} reads Redis), newest first, with their jobs counted by state. A submit token lists only the
    workflows it created; a limited token only those whose every job is inside its limits (a `queue` outside
    them: 403)."""
    params = call.params
    call.caller.check_queue(params.get("queue"))
    rows = _listed(call)
    if "state" in params:
        rows = rows.filter(state=params["state"])
    if "queue" in params:
        rows = rows.filter(queue=params["queue"])
    if "name" in params:
        rows = rows.filter(name__icontains=params["name"])
    if cursor := params.get("cursor"):
        micros, _, last = cursor.partition("~")
        at = from_micros(int(micros))
        rows = rows.filter(Q(created_at__lt=at) | Q(created_at=at, id__lt=last))
    limit = params["limit"]
    found = list(rows.filter(created_at__isnull=False).order_by("-created_at", "-id")[: limit + 1])
    next_cursor = None
    if len(found) > limit:
        found = found[:limit]
        last_row = found[-1]
        next_cursor = f"{to_micros(last_row.created_at)}~{last_row.id}" if last_row.created_at else None
    return Reply(200, {"items": [workflow_row(w) for w in found], "next_cursor": next_cursor})


# --- cancel and resubmit ------------------------------------------------------------------------------------

ACTION_BODY = obj({"reason": REASON})
RESUBMIT_BODY = obj({"reason": REASON, "reset_attempts": boolean("count attempts from zero again", default=False)})
# The members a resubmit brings back: those that did not complete (their dependents cancelled by their failure come
# back as waiting with them). Cancelled members are left alone: someone cancelled them, or a parent's failure did
# (and that parent's resubmit brings them back).
RESUBMITTED = (JobState.DEAD, JobState.FAILED, JobState.DROPPED)


@operation(
    "POST", "/workflows/{workflow_id}/cancel", operation_id="cancel_workflow", summary="Cancel a workflow",
    tag="workflows", scope="submit", params=(WORKFLOW_ID,), body=ACTION_BODY, body_required=False,
    responses={200: Response("Done: how many steps were cancelled, and how many running ones were asked to stop.",
                             obj({"id": string(), "cancelled": {"type": "integer"}, "asked": {"type": "integer"},
                                  "message": string()}, ("id", "cancelled", "asked", "message"))),
               404: NOT_FOUND},
)  # fmt: skip
def cancel(call: Call) -> Reply:
    """Cancel every step that has not started (waiting, queued, scheduled, retrying) and ask the running ones to
    stop; nothing of the workflow starts afterwards. A submit token cancels only the workflows it created."""
    graph = visible_workflow(call, call.params["workflow_id"])
    view = graph.view
    try:
        cancelled, asked = get_client().cancel_workflow(view.id, view.queue)
    except JobNotFound:  # its record expired since it was read
        raise no_workflow(view.id) from None
    with transaction.atomic():
        audit.record(
            call.actor,
            "workflow_cancel",
            queue=view.queue,
            filter={"workflow": [view.id]},
            count=cancelled,
            reason=call.body.get("reason", ""),
            detail={"workflow": view.id, "name": view.name, "asked": asked},
        )  # as the console's
    message = f"Workflow {view.id}: {cancelled} step(s) cancelled, {asked} running step(s) asked to stop."
    return Reply(200, {"id": view.id, "cancelled": cancelled, "asked": asked, "message": message})


@operation(
    "POST", "/workflows/{workflow_id}/resubmit", operation_id="resubmit_workflow",
    summary="Resubmit a workflow's failed steps", tag="workflows", scope="submit", params=(WORKFLOW_ID,),
    body=RESUBMIT_BODY, body_required=False,
    responses={200: Response("Done (also when no step needed it: done 0).",
                             obj({"id": string(), "done": {"type": "integer"},
                                  "refused": {"type": "object", "description": "job id: why it was left alone"},
                                  "job_ids": array(string()), "message": string()},
                                 ("id", "done", "refused", "job_ids", "message"))),
               404: NOT_FOUND, 409: Response("The workflow was cancelled: nothing of it runs again.")},
)  # fmt: skip
def resubmit(call: Call) -> Reply:
    """Queue again every step that ended dead, failed or dropped (history kept): the steps their failure
    cancelled wait again, and the workflow goes on where it stopped. A submit token resubmits only the workflows
    it created."""
    graph = visible_workflow(call, call.params["workflow_id"])
    view = graph.view
    if view.cancelled_at is not None:
        raise Problem(409, f"Workflow {view.id} was cancelled: nothing of it runs again; nothing was resubmitted.")
    reset = bool(call.body.get("reset_attempts", False))
    items = [BatchItem(s.job_id, s.queue) for s in graph.steps if s.state in RESUBMITTED]
    results = apply_batch(get_client(), BatchAction.RETRY, items, stamp=new_job_id(), reset_attempts=reset)
    done = [r.job_id for r in results if r.verdict in (Verdict.DONE, Verdict.ALREADY)]
    refused = {r.job_id: r.why for r in results if r.verdict not in (Verdict.DONE, Verdict.ALREADY)}
    detail: dict[str, Any] = {"workflow": view.id, "name": view.name, "reset_attempts": reset}
    if refused:
        detail["refused"] = refused
    with transaction.atomic():
        audit.record(call.actor, "workflow_resubmit", job_ids=[*done, *refused], queue=view.queue,
                     filter={"workflow": [view.id]}, count=len(done), refused=len(refused),
                     reason=call.body.get("reason", ""), detail=detail)  # fmt: skip
    left = f", {len(refused)} left alone (they moved on)" if refused else ""
    message = f"Workflow {view.id}: {len(done)} step(s) queued again{left}."
    return Reply(200, {"id": view.id, "done": len(done), "refused": refused, "job_ids": done, "message": message})
