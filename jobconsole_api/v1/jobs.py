"""Jobs: submit (one or a batch), get, search, cancel, retry, delete, recover, and edit a waiting job."""

import json
from collections.abc import Callable
from dataclasses import fields
from datetime import datetime
from functools import cache
from typing import Any

from django.db import transaction

from jobconsole import actions, audit, search
from jobconsole.conf import api_config
from jobconsole.core import (
    DuplicateJob,
    InvalidJob,
    JobNotFound,
    JobState,
    JobStateConflict,
    NotReplicated,
    RedisFull,
    UnknownTask,
)
from jobconsole.core.client import MAX_RETRIES, MAX_UNIQUE_KEY, JobSpec
from jobconsole.core.editing import edit_job
from jobconsole.core.priority import MAX_PRIORITY, MIN_PRIORITY, PRIORITY_NAMES
from jobconsole.core.states import WAITING_STATES
from jobconsole.core.timing import MAX_DELAY_SECONDS
from jobconsole.engine import get_client
from jobconsole.models import Job as JobRow
from jobconsole_api.problems import Problem
from jobconsole_api.v1 import shapes
from jobconsole_api.v1.common import (
    CONFLICT,
    MESSAGE,
    NOT_FOUND,
    REASON,
    job_id_param,
    live_shape,
    no_job,
    paging,
    refusal,
    visible_job,
)
from jobconsole_api.v1.routing import Call, Param, Reply, Response, operation
from jobconsole_api.v1.schema import (
    NAME_PATTERN,
    ULID_PATTERN,
    Schema,
    any_object,
    array,
    boolean,
    integer,
    number,
    obj,
    parse_datetime,
    ref,
    string,
)

GROUP_PATTERN = "^[A-Za-z0-9_.\\-]{0,100}$"  # a group's name, or "" (none)

PRIORITY: Schema = {
    "anyOf": [
        integer(minimum=MIN_PRIORITY, maximum=MAX_PRIORITY),
        string(enum=list(PRIORITY_NAMES)),
    ],
    "description": f"lower runs first: an integer from {MIN_PRIORITY} to {MAX_PRIORITY}, or high, normal, low "
    "(default: the task's)",
}
JOB_SPEC = obj(
    {
        "task": string("a registered task's name", pattern=NAME_PATTERN),
        "params": any_object("keyword arguments of the task, checked against its signature"),
        "id": string("an id of your own (a ULID): sending the same job again is then harmless", pattern=ULID_PATTERN),
        "queue": string("another queue than the task's", pattern=NAME_PATTERN),
        "priority": PRIORITY,
        "delay": number("run no sooner than this many seconds from now", minimum=0, maximum=MAX_DELAY_SECONDS),
        "run_at": {
            "anyOf": [
                string(format="date-time"),
                array({"anyOf": [number(), string()]}, minItems=2, maxItems=2),
            ],
            "description": "run no sooner than this time (with its zone), or Runqueue's relative [n, unit] "
            "(unit months|M, weeks|w, days|d, hours|h, minutes|m, seconds|s), e.g. [5, \"minutes\"]",
        },
        "group": string("another concurrency group than the task's; \"\" for none", pattern=GROUP_PATTERN),
        "unique_until": string("hold the unique key until the job ends (the default) or until it starts",
                               enum=["end", "start"]),
        "max_retries": integer("retries after the first attempt (default: the task's)", minimum=0, maximum=MAX_RETRIES),
        "unique_key": string("while a live job holds this key, no other is enqueued with it", minLength=1,
                             maxLength=MAX_UNIQUE_KEY),
    },
    ("task",),
    "One job to enqueue.",
)  # fmt: skip


def _batch_body() -> Schema:
    return obj({"jobs": array(JOB_SPEC, minItems=1, maxItems=api_config()["MAX_BATCH"])}, ("jobs",))


def _spec(
    body: dict[str, Any], place: str = "", known_queues: Callable[[], set[str]] | None = None, *, check: bool = True
) -> JobSpec:
    """A checked body as the engine's JobSpec; refused with 422 for what the engine refuses. `check=False`: the
    task and queue are checked, the rest is left to the caller's engine call (a workflow's steps: the engine
    checks each with its parents' results in place)."""
    client = get_client()
    prefix = f"{place}." if place else ""
    if client.registry.find(body["task"]) is None:
        known = ", ".join(sorted(t.name for t in client.registry.all())) or "none"
        raise Problem(
            422,
            f"Unknown task {body['task']!r}: no task of that name is registered (registered: {known}).",
            errors=[{"field": f"{prefix}task", "message": "is not a registered task"}],
        )
    queue = body.get("queue")
    if queue is not None and queue not in (known_queues or _known_queues)():
        raise Problem(
            422,
            f"Unknown queue {queue!r}: no task is registered on it and no job has used it (no worker would take it).",
            errors=[{"field": f"{prefix}queue", "message": "is not a known queue"}],
        )
    raw_run_at = body.get("run_at")
    run_at = parse_datetime(raw_run_at) if isinstance(raw_run_at, str) else raw_run_at  # or [n, unit]
    spec = JobSpec(
        task=body["task"], params=body.get("params"), id=body.get("id"), queue=body.get("queue"),
        priority=body.get("priority"), delay=body.get("delay"), run_at=run_at, max_retries=body.get("max_retries"),
        unique_key=body.get("unique_key"), group=body.get("group"), unique_until=body.get("unique_until"),
    )  # fmt: skip
    if not check:
        return spec
    try:
        client.check(spec)
    except UnknownTask as exc:
        raise Problem(422, str(exc), errors=[{"field": f"{prefix}task", "message": str(exc)}]) from None
    except InvalidJob as exc:
        error = {"field": place or "(body)", "message": str(exc)}
        raise Problem(422, f"The job is not valid: {exc}.", errors=[error]) from None
    return spec


def _known_queues() -> set[str]:
    client = get_client()
    return {t.queue for t in client.registry.all()} | set(client.queries.queues.names())


def _redis_full(exc: RedisFull) -> Problem:
    return Problem(503, str(exc), headers={"Retry-After": "30"}, refused=exc.refused)


def _not_replicated(exc: NotReplicated) -> Problem:
    """The jobs are on the primary but not yet on enough replicas (ENQUEUE_REPLICAS): a failover now could lose
    them. Sending the same request again is safe (the same ids answer `exists`) and waits for the replicas again."""
    return Problem(
        503,
        f"{exc}. Send the same request again (with the same ids or Idempotency-Key) to wait for the replicas.",
        headers={"Retry-After": "5"},
        accepted=[r.id for r in exc.accepted],
    )


def _same_job(existing: Any, spec: JobSpec) -> bool:
    """Whether a job found under a client id is the one submitted again (same task and parameters)."""
    return existing is not None and existing.task == spec.task and existing.params == (spec.params or {})


def _remember(call: Call, job_ids: list[str]) -> None:
    """Record the jobs a submit token submitted: the ones it may see and change."""
    call.caller.remember(job_ids)


SUBMIT_RESPONSES = {
    201: Response("Enqueued.", ref("Submitted")),
    200: Response("Nothing new: this id was submitted before, or the unique key is held by a live job.",
                  ref("Submitted")),
    403: Response("The task or its queue is outside the token's limits (or the scope is not submit); nothing was "
                  "enqueued."),
    409: Response("The id was used before for another task or other parameters."),
    422: Response("Refused: an unknown task or queue, parameters its signature does not take, or a wrong value; "
                  "or the Idempotency-Key was used before with another body."),
}  # fmt: skip


@operation(
    "POST", "/jobs", operation_id="submit_job", summary="Submit a job", tag="jobs", scope="submit",
    body=JOB_SPEC, responses=SUBMIT_RESPONSES, idempotent=True,
)  # fmt: skip
def submit(call: Call) -> Reply:
    """Enqueue one job. Send an `id` of your own (a ULID) or an `Idempotency-Key` header to make a retried request
    harmless: the same id answers 200 with status `exists`."""
    call.caller.check_submit(call.body["task"], call.body.get("queue"))
    spec = _spec(call.body)
    client = get_client()
    try:
        result = client.enqueue(**{f.name: getattr(spec, f.name) for f in fields(spec)})
    except RedisFull as exc:
        raise _redis_full(exc) from None
    except NotReplicated as exc:
        _remember(call, [r.id for r in exc.accepted if r.created])
        raise _not_replicated(exc) from None
    except InvalidJob as exc:
        raise Problem(422, f"The job is not valid: {exc}.") from None
    if result.status == "exists":
        existing = client.queries.jobs.by_id([(result.queue, result.id)])[0]
        if not _same_job(existing, spec):
            raise Problem(409, f"The id {result.id} was used before for another task or other parameters.")
    if result.created:
        _remember(call, [result.id])
        return Reply(201, shapes.submitted(result), {"Location": f"/api/v1/jobs/{result.id}"})
    return Reply(200, shapes.submitted(result))


@operation(
    "POST", "/jobs/batch", operation_id="submit_jobs", summary="Submit many jobs", tag="jobs", scope="submit",
    body=_batch_body, idempotent=True,
    responses={
        201: Response("Every valid job enqueued (status per job).",
                      obj({"jobs": array(ref("Submitted"))}, ("jobs",))),
        200: Response("Nothing new: every job was there already.", obj({"jobs": array(ref("Submitted"))}, ("jobs",))),
        403: Response("A job's task or queue is outside the token's limits; nothing was enqueued."),
        422: Response("Some job is not valid: the errors name each (jobs[3].task...); nothing was enqueued. Or the "
                      "Idempotency-Key was used before with another body."),
    },
)  # fmt: skip
def submit_batch(call: Call) -> Reply:
    """Enqueue up to API.MAX_BATCH jobs in one request. Every job is checked first: if any is refused, none is
    enqueued and the errors name each one."""
    for index, body in enumerate(call.body["jobs"]):
        try:
            call.caller.check_submit(body["task"], body.get("queue"))
        except Problem as problem:
            raise Problem(403, f"jobs[{index}]: {problem.detail} Nothing in the batch was enqueued.") from None
    specs: list[JobSpec] = []
    errors: list[dict[str, str]] = []
    known_queues = cache(_known_queues)  # read once per batch, and only if a job names a queue
    for index, body in enumerate(call.body["jobs"]):
        try:
            specs.append(_spec(body, f"jobs[{index}]", known_queues))
        except Problem as problem:
            errors += problem.extra.get("errors") or [{"field": f"jobs[{index}]", "message": problem.detail}]
    ids = [s.id for s in specs if s.id]
    if len(ids) != len(set(ids)):
        errors.append({"field": "jobs", "message": "two jobs have the same id"})
    if errors:
        raise Problem(422, f"{len(errors)} problem(s) in the batch; nothing was enqueued.", errors=errors)
    client = get_client()
    try:
        results = client.enqueue_many(specs)
    except RedisFull as exc:
        if exc.accepted:
            _remember(call, [r.id for r in exc.accepted if r.created])
        raise _redis_full(exc) from None
    except NotReplicated as exc:
        _remember(call, [r.id for r in exc.accepted if r.created])
        raise _not_replicated(exc) from None
    existing = [(r.queue, r.id) for r in results if r.status == "exists"]
    found = {job.id: job for job in client.queries.jobs.by_id(existing) if job is not None} if existing else {}
    out = []
    for spec, result in zip(specs, results, strict=True):
        same = result.status != "exists" or _same_job(found.get(result.id), spec)
        out.append(shapes.submitted(result, None if same else "conflict"))
    created = [r.id for r in results if r.created]
    _remember(call, created)
    return Reply(201 if created else 200, {"jobs": out})


@operation(
    "GET", "/jobs/{job_id}", operation_id="get_job", summary="Get a job", tag="jobs", scope="any",
    params=(job_id_param(),), responses={200: Response("The job, with every attempt.", ref("Job")), 404: NOT_FOUND},
)  # fmt: skip
def get_job(call: Call) -> Reply:
    """The job as Redis holds it now, or, once Redis has dropped it (retention), as the database kept it. A
    submit token sees only the jobs it submitted; a limited token only those inside its limits."""
    job_id = visible_job(call, call.params["job_id"])
    try:
        job = get_client().get(job_id)
    except JobNotFound:
        pass
    else:
        return Reply(200, live_shape(job))
    row = JobRow.objects.filter(id=job_id).first()
    if row is None:
        raise no_job(job_id)
    return Reply(200, shapes.stored_job(row))


STATES = [s.value for s in JobState]
SEARCHED_BACK_TO = (
    "set when a text search stopped at the most rows one request looks through: it looked at the jobs enqueued "
    "from this time on, and next_cursor goes on with older ones (also after a page with no items)"
)


@operation(
    "GET", "/jobs", operation_id="search_jobs", summary="Search jobs", tag="jobs", scope="any",
    params=(
        Param("state", string(enum=STATES)),
        Param("queue", string(pattern=NAME_PATTERN)),
        Param("task", string(pattern=NAME_PATTERN)),
        Param("id", string("one job by id", pattern=ULID_PATTERN)),
        Param("workflow", string("the jobs of one workflow (its id)", pattern=ULID_PATTERN)),
        Param("unique_key", string(maxLength=MAX_UNIQUE_KEY)),
        Param("text", string("text inside the parameters (any case)", maxLength=200)),
        Param("after", string("enqueued at or after", format="date-time", maxLength=40)),
        Param("before", string("enqueued before (a time not after `after` finds nothing)", format="date-time",
                               maxLength=40)),
        *paging(search.CURSOR_PATTERN, "its enqueue time in microseconds since the epoch ~ its id"),
    ),
    database_only=True,
    responses={200: Response("A page of jobs, newest first.", obj(
        {"items": array(ref("JobSummary")), "next_cursor": {"type": ["string", "null"]},
         "searched_back_to": {"type": ["string", "null"], "format": "date-time", "description": SEARCHED_BACK_TO}},
        ("items", "next_cursor", "searched_back_to")))},
)  # fmt: skip
def search_jobs(call: Call) -> Reply:
    """The console's job search over the database mirror (what the mirror has copied: a job submitted a moment
    ago may not be listed yet; GET /jobs/{id} reads Redis). A submit token finds only its own jobs; a limited
    token only jobs inside its limits (a `queue` or `task` outside them: 403)."""
    filters: dict[str, Any] = {k: v for k, v in call.params.items() if k not in ("limit", "cursor")}
    for name in ("id", "workflow"):
        if name in filters:
            filters[name] = filters[name].upper()
    for name in ("after", "before"):
        if name in filters:
            filters[name] = parse_datetime(filters[name])
    caller = call.caller
    caller.check_queue(filters.get("queue"))
    caller.check_task(filters.get("task"))
    if caller.queue_limits and "queue" not in filters:
        filters["queues"] = sorted(caller.queue_limits)
    if caller.task_limits and "task" not in filters:
        filters["tasks"] = sorted(caller.task_limits)
    if not caller.may_read_all:
        filters["among"] = call.token.jobs.values("job_id")
    try:
        found = search.page(filters, call.params.get("cursor"), call.params["limit"])
    except search.BadCursor:
        raise Problem(400, "The cursor is not one this API gave out; start from the first page (no cursor).") from None
    items = [shapes.job_summary(row) for row in found.rows]
    searched = shapes.iso(found.searched_back_to)
    return Reply(200, {"items": items, "next_cursor": found.next_cursor, "searched_back_to": searched})


ACTION_BODY = obj({"reason": REASON})
RETRY_BODY = obj({"reason": REASON, "reset_attempts": boolean("count attempts from zero again", default=False)})
ACTION_RESPONSES = {200: Response("Done.", MESSAGE), 404: NOT_FOUND, 409: CONFLICT}


def _act(call: Call, outcome: actions.Outcome) -> Reply:
    if not outcome.ok:
        raise refusal(outcome)
    return Reply(200, {"id": call.params["job_id"].upper(), "message": outcome.message})


@operation(
    "POST", "/jobs/{job_id}/cancel", operation_id="cancel_job", summary="Cancel a job", tag="jobs", scope="submit",
    params=(job_id_param(),), body=ACTION_BODY, body_required=False, responses=ACTION_RESPONSES,
)  # fmt: skip
def cancel(call: Call) -> Reply:
    """Cancel a waiting job, or ask a running one to stop (it ends as cancelled at its next heartbeat). A submit
    token cancels only the jobs it submitted."""
    return _act(call, actions.cancel(call.actor, visible_job(call, call.params["job_id"]), call.body.get("reason", "")))


@operation(
    "POST", "/jobs/{job_id}/retry", operation_id="retry_job", summary="Retry a job", tag="jobs",
    params=(job_id_param(),), body=RETRY_BODY, body_required=False, responses=ACTION_RESPONSES,
)  # fmt: skip
def retry(call: Call) -> Reply:
    """Run a waiting job now, or bring back a dead, failed, dropped or cancelled one (its history is kept)."""
    body = call.body
    return _act(call, actions.retry(call.actor, visible_job(call, call.params["job_id"]), body.get("reason", ""),
                                    reset_attempts=body.get("reset_attempts", False)))  # fmt: skip


@operation(
    "POST", "/jobs/{job_id}/recover", operation_id="recover_job", summary="Requeue a stalled running job",
    tag="jobs", params=(job_id_param(),), body=ACTION_BODY, body_required=False, responses=ACTION_RESPONSES,
)  # fmt: skip
def recover(call: Call) -> Reply:
    """Requeue a running job whose lease ran out (what the recoverer would do at its next pass). Refused (409)
    while its lease is valid: its worker may still be running it."""
    return _act(
        call, actions.recover(call.actor, visible_job(call, call.params["job_id"]), call.body.get("reason", ""))
    )


@operation(
    "DELETE", "/jobs/{job_id}", operation_id="delete_job", summary="Delete a job", tag="jobs", scope="submit",
    params=(job_id_param(),), body=ACTION_BODY, body_required=False, responses=ACTION_RESPONSES,
)  # fmt: skip
def delete(call: Call) -> Reply:
    """Delete a job that is not running, with its history, from Redis and the database. A submit token deletes
    only the jobs it submitted."""
    return _act(call, actions.delete(call.actor, visible_job(call, call.params["job_id"]), call.body.get("reason", "")))


WAITING = [s.value for s in JobState if s in WAITING_STATES]  # editable in place
EDIT_BODY = obj(
    {
        "expected_state": string("the state you saw the job in", enum=WAITING),
        "expected_attempts": integer("the attempt count you saw", minimum=0),
        "params": any_object("new parameters (checked against the task's signature)"),
        "priority": PRIORITY,
        "run_at": string("a new time to run it (with its zone)", format="date-time"),
        "reason": REASON,
    },
    ("expected_state", "expected_attempts"),
    "What to change (params, priority or run_at: at least one), and the job as you saw it: the change applies "
    "only if the job is still in that state with that attempt count (compare-and-set), so a job that started "
    "meanwhile is never changed behind your back.",
) | {
    "anyOf": [{"required": [name]} for name in ("params", "priority", "run_at")],
    "x-any-message": "nothing to change: give params, priority or run_at",
}


@operation(
    "PATCH", "/jobs/{job_id}", operation_id="edit_job", summary="Edit a waiting job", tag="jobs", scope="submit",
    params=(job_id_param(),), body=EDIT_BODY,
    responses={200: Response("Changed; the job as it is now.", ref("Job")), 404: NOT_FOUND,
               409: Response("The job moved on (another state or attempt count); nothing was changed."),
               422: Response("Nothing to change, or a value the task refuses.")},
)  # fmt: skip
def edit(call: Call) -> Reply:
    """Change a waiting job's parameters, priority or run-at, as the console's edit does (compare-and-set). A
    submit token edits only the jobs it submitted."""
    job_id = visible_job(call, call.params["job_id"])
    body = call.body
    changes: dict[str, Any] = {k: body[k] for k in ("params", "priority") if k in body}
    if "run_at" in body:
        changes["run_at"] = parse_datetime(body["run_at"])
    client = get_client()
    try:
        result = edit_job(client, job_id, expected_state=body["expected_state"],
                          expected_attempts=body["expected_attempts"], **changes)  # fmt: skip
    except JobNotFound:
        raise no_job(job_id) from None
    except JobStateConflict as exc:
        raise Problem(409, f"Nothing was changed: the job moved on (it is now {exc.state}).", state=exc.state) from None
    except DuplicateJob as exc:
        raise Problem(409, f"Nothing was changed: {exc}.") from None
    except InvalidJob as exc:
        raise Problem(422, f"Nothing was changed: {exc}.") from None
    job = client.get(job_id)
    shown = {k: _shown(v) for k, v in changes.items()}
    with transaction.atomic():
        audit.record(call.actor, "edit_job", job_ids=[job_id], queue=job.queue, reason=body.get("reason", ""),
                     detail={"changes": shown, "state": str(result.state)})  # fmt: skip
    return Reply(200, live_shape(job))


def _shown(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    return value if isinstance(value, str) else json.dumps(value)
