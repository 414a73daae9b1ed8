"""The Jobbers seed's manager API, under /jobbers/ (its clients set their base URL): its routes, bodies, limits
and status codes (docs/seeds.md lists each and where we differ).

A Jobbers task is a job of the registered task of that name: `parameters` are its keyword arguments (checked
against its signature at submission), `version` its registered version, `queue` a known queue (by default the
task's own). Statuses are reported in Jobbers' words (core/states.py JOBBERS_STATUS), a running job whose lease
ran out as "stalled". Error bodies are FastAPI's: {"detail": "..."}, and for a value of the wrong kind 422 with
{"detail": [{"type", "loc", "msg", "input"}]}.

Access (jobconsole_api/access.py): the read routes answer any token, a submit token seeing only the tasks it
submitted (another's is "Task not found"); a submit token cancels its own tasks; resubmitting and setting a
role's queues need operate. A token's queue and task limits narrow every list and refuse a filter outside them."""

from collections.abc import Callable, Sequence
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from jobconsole import actions, audit
from jobconsole.core.errors import InvalidJob, JobNotFound, JobStateConflict
from jobconsole.core.ids import check_job_id
from jobconsole.core.job import Job
from jobconsole.core.queries.jobs import JobPage
from jobconsole.core.roles import Roles, check_name
from jobconsole.core.states import JOBBERS_STATUS, JobState
from jobconsole_api.access import Caller
from jobconsole_api.auth import actor
from jobconsole_api.seeds.common import (
    SeedError,
    SeedResponse,
    caller,
    client,
    fastapi_detail,
    find_visible_job,
    iso,
    read_body,
    seed_view,
)

TASK_NOT_FOUND = "Task not found"
TASK_LIST_LIMIT = (10, 100)  # (default, most) of /task-list and /scheduled-tasks
DLQ_LIMIT = (100, 1000)  # of /dead-letter-queue and /dead-letter-queue/resubmit
MAX_IDS = 1000  # task ids one /tasks/cancel or resubmit may name (the seed had no limit)
SCAN_MAX = 20_000  # jobs a filtered list looks at per queue before it answers with what it found
PAGE = 500

view = seed_view  # (short alias for the decorators below)


# --- the shapes Jobbers answers with ---------------------------------------------------------------------------


def status(job: Job, stalled: bool = False) -> str:
    return "stalled" if stalled and job.state is JobState.RUNNING else JOBBERS_STATUS[job.state]


def retry_attempt(job: Job) -> int:
    """Jobbers counted retries, raised when a retry was scheduled: attempts so far while the job waits for its
    next one, one less while an attempt runs or after the last."""
    return job.attempts if job.state.is_waiting else max(0, job.attempts - 1)


def error_text(error: dict[str, Any] | None) -> str | None:
    if not error:
        return None
    kind, message = str(error.get("error_class") or ""), str(error.get("message") or "")
    return f"{kind}: {message}" if kind and message else kind or message or None


def summary(job: Job, stalled: bool = False) -> dict[str, Any]:
    """Jobbers' Task.summarized()."""
    out: dict[str, Any] = {
        "id": job.id, "name": job.task, "parameters": job.params, "status": status(job, stalled),
        "retry_attempt": retry_attempt(job), "submitted_at": iso(job.enqueued_at),
    }  # fmt: skip
    last_error = error_text(job.last_error)
    if last_error:
        out["last_error"] = last_error
    return out


def full(job: Job, stalled: bool = False) -> dict[str, Any]:
    """Every field of a Jobbers Task (/task-list); needs the job read with its history."""
    result = job.result
    errors = [e for e in (error_text(_attempt_error(a)) for a in job.history) if e]
    retried = [a.started_at for a in job.history if a.attempt > 1 and a.started_at]
    return {
        "id": job.id, "name": job.task, "queue": job.queue, "version": job.version, "parameters": job.params,
        "results": result if isinstance(result, dict) else ({} if result is None else {"result": result}),
        "errors": errors, "retry_attempt": retry_attempt(job), "status": status(job, stalled),
        "submitted_at": iso(job.enqueued_at), "retried_at": iso(retried[-1] if retried else None),
        "started_at": iso(job.started_at), "heartbeat_at": iso(job.heartbeat_at),
        "completed_at": iso(job.finished_at),
    }  # fmt: skip


def _attempt_error(attempt: Any) -> dict[str, Any] | None:
    if not (attempt.error_class or attempt.message):
        return None
    return {"error_class": attempt.error_class, "message": attempt.message}


def stalled_ids(jobs: Sequence[Job]) -> set[str]:
    """The running jobs among `jobs` whose lease deadline has passed (Jobbers' STALLED)."""
    running = [j for j in jobs if j.state is JobState.RUNNING]
    if not running:
        return set()
    queries = client().queries
    now = queries.now()
    deadlines = queries.jobs.lease_deadlines([(j.queue, j.id) for j in running])
    return {j.id for j, d in zip(running, deadlines, strict=True) if d is not None and d < now}


def summaries(jobs: Sequence[Job]) -> list[dict[str, Any]]:
    stalled = stalled_ids(jobs)
    return [summary(j, j.id in stalled) for j in jobs]


# --- request values, checked as pydantic did (422 with FastAPI's list) -----------------------------------------


def unprocessable(loc: Sequence[str | int], message: str, value: Any = None) -> SeedResponse:
    detail = [{"type": "value_error", "loc": list(loc), "msg": message, "input": value}]
    return SeedResponse(JsonResponse({"detail": detail}, status=422))


def ulid(value: Any, loc: Sequence[str | int]) -> str:
    try:
        return check_job_id(value)
    except InvalidJob as exc:
        raise unprocessable(loc, str(exc), value) from None


def query_int(request: HttpRequest, name: str, *, default: int | None, low: int, high: int | None) -> int | None:
    raw = request.GET.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise unprocessable(["query", name], "Input should be a valid integer", raw) from None
    if value < low or (high is not None and value > high):
        bound = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise unprocessable(["query", name], f"Input should be {bound}", raw)
    return value


def name_value(value: Any, loc: Sequence[str | int], what: str) -> str:
    try:
        return check_name(value, what)
    except InvalidJob as exc:
        raise unprocessable(loc, str(exc), value) from None


def json_body(request: HttpRequest) -> Any:
    return read_body(request)


def body_object(request: HttpRequest) -> dict[str, Any]:
    body = json_body(request)
    if not isinstance(body, dict):
        raise unprocessable(["body"], "Input should be a valid dictionary or object", body)
    return body


class Filter:
    """The task_name / task_version / start filters of the list routes (a task_name outside the caller's limits:
    403)."""

    def __init__(self, request: HttpRequest) -> None:
        self.task_name = request.GET.get("task_name") or None
        caller(request).check_task(self.task_name)
        self.task_version = query_int(request, "task_version", default=None, low=0, high=None)
        start = request.GET.get("start") or None
        self.start = ulid(start, ["query", "start"]) if start else None

    def keep(self, job: Job) -> bool:
        return (
            (self.task_name is None or job.task == self.task_name)
            and (self.task_version is None or job.version == self.task_version)
            and (self.start is None or job.id > self.start)
        )


def scan(pages: Callable[[str | None], JobPage], keep: Callable[[Job], bool], limit: int, who: Caller) -> list[Job]:
    """The first `limit` jobs `keep` accepts that `who` may see, page by page, looking at SCAN_MAX jobs at most."""
    found: list[Job] = []
    cursor: str | None = None
    seen = 0
    while True:
        page = pages(cursor)
        found += who.visible([j for j in page.jobs if keep(j)])
        seen += len(page.jobs)
        if len(found) >= limit or page.next_cursor is None or seen >= SCAN_MAX:
            return found[:limit]
        cursor = page.next_cursor


def required_queue(request: HttpRequest) -> str:
    """The `queue` parameter (403 when outside the caller's limits)."""
    queue = request.GET.get("queue")
    if queue is None:
        raise unprocessable(["query", "queue"], "Field required")
    queue = name_value(queue, ["query", "queue"], "queue")
    caller(request).check_queue(queue)
    return queue


# --- routes ----------------------------------------------------------------------------------------------------


@view(["GET"], scope="any", style=fastapi_detail)
def root(request: HttpRequest) -> HttpResponse:
    """GET /: the registered tasks as [name, version] pairs (this process's registry; Redis is asked first, as a
    client that reads this as "the service is up" must not be told so while nothing could be submitted)."""
    c = client()
    c.queries.ping()
    tasks = [[t.name, t.version] for t in c.registry.all()]
    return JsonResponse({"message": "Welcome to Task Manager!", "tasks": tasks})


@view(["POST"], scope="submit", style=fastapi_detail)
def submit_task(request: HttpRequest) -> HttpResponse:
    """POST /submit-task {id?, name, queue?, version?, parameters?}: 200 {"message", "task"}. Submitting an id
    again answers the job that has it (idempotent), as the seed did."""
    body = body_object(request)
    name = body.get("name")
    if not isinstance(name, str) or not name:
        raise unprocessable(
            ["body", "name"], "Field required" if name is None else "Input should be a valid string", name
        )
    job_id = ulid(body["id"], ["body", "id"]) if body.get("id") is not None else None
    version = body.get("version", 0)
    if isinstance(version, bool) or not isinstance(version, int):
        raise unprocessable(["body", "version"], "Input should be a valid integer", version)
    parameters = body.get("parameters", {})
    if not isinstance(parameters, dict):
        raise unprocessable(["body", "parameters"], "Input should be a valid dictionary", parameters)
    c = client()
    task = c.registry.find(name)
    if task is None or version not in (0, task.version):  # 0: the seed's default, "whichever is registered"
        raise SeedError(400, f"Unknown task {name} v{version}")
    queue = body.get("queue")
    if queue is not None:
        queue = name_value(queue, ["body", "queue"], "queue")
    who = caller(request)
    who.check_submit(name, queue)  # before anything else is told about the queue
    if queue is not None and queue != task.queue and queue not in known_queues():
        raise SeedError(400, f"Unknown queue {queue}")
    try:
        result = c.enqueue(name, parameters, id=job_id, queue=queue)
    except InvalidJob as exc:
        raise SeedError(400, f"Invalid parameters for {name} v{task.version}: {exc}") from None
    if result.created:
        who.remember([result.id])
    job = c.get(result.id, result.queue, history=False)
    if not result.created and not who.visible([job]):  # the id is another's job: tell nothing of it
        raise SeedError(409, f"Task id {result.id} is already used by another task")
    return JsonResponse({"message": "Task submitted successfully", "task": summaries([job])[0]})


def known_queues() -> set[str]:
    c = client()
    roles = Roles(c.redis).all()
    return set(c.queries.queues.names()) | {q for queues in roles.values() for q in queues}


@view(["GET"], scope="any", style=fastapi_detail)
def task_status(request: HttpRequest, task_id: str) -> HttpResponse:
    """GET /task-status/{id}: the task's summary; 404 {"detail": "Task not found"}."""
    job = find_visible_job(request, ulid(task_id, ["path", "task_id"]))
    if job is None:
        raise SeedError(404, TASK_NOT_FOUND)
    return JsonResponse(summaries([job])[0])


def _cancel(request: HttpRequest, job_id: str) -> Job:
    """Cancel a waiting job at once, or ask a running one to stop (the console's action, audited under the
    caller's name); raises the engine's refusal: JobNotFound (also for a job the caller may not see),
    JobStateConflict."""
    if find_visible_job(request, job_id) is None:
        raise JobNotFound(job_id)
    outcome = actions.cancel(actor(request), job_id, "Jobbers API")
    if outcome.refusal is not None:
        raise outcome.refusal
    return client().get(job_id, history=False)


@view(["POST"], scope="submit", style=fastapi_detail)
def cancel_task(request: HttpRequest, task_id: str) -> HttpResponse:
    """POST /task/{id}/cancel: 200 {"message", "task"}; 404 unknown; 409 when it has already ended."""
    try:
        job = _cancel(request, ulid(task_id, ["path", "task_id"]))
    except JobNotFound:
        raise SeedError(404, TASK_NOT_FOUND) from None
    except JobStateConflict as exc:
        raise SeedError(409, str(exc)) from None
    return JsonResponse({"message": "Cancellation request sent", "task": summaries([job])[0]})


def _id_list(body: dict[str, Any], field: str) -> list[str]:
    ids = body.get(field)
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise unprocessable(["body", field], "Input should be a valid list of strings", ids)
    if len(ids) > MAX_IDS:
        raise unprocessable(["body", field], f"List should have at most {MAX_IDS} items", len(ids))
    return ids


@view(["POST"], scope="submit", style=fastapi_detail)
def cancel_tasks(request: HttpRequest) -> HttpResponse:
    """POST /tasks/cancel {task_ids}: one result per id: cancellation_requested, not_found or error."""
    results: list[dict[str, Any]] = []
    for raw in _id_list(body_object(request), "task_ids"):
        try:
            _cancel(request, check_job_id(raw))
        except JobNotFound:
            results.append({"task_id": raw, "status": "not_found"})
        except (InvalidJob, JobStateConflict) as exc:
            results.append({"task_id": raw, "status": "error", "detail": str(exc)})
        else:
            results.append({"task_id": raw, "status": "cancellation_requested"})
    return JsonResponse({"results": results})


@view(["GET"], scope="any", style=fastapi_detail)
def task_list(request: HttpRequest) -> HttpResponse:
    """GET /task-list?queue=&limit=&start=&order_by=&task_name=&task_version=: the tasks waiting in the queue."""
    queue = required_queue(request)
    limit = query_int(request, "limit", default=TASK_LIST_LIMIT[0], low=1, high=TASK_LIST_LIMIT[1])
    order_by = request.GET.get("order_by") or "submitted_at"
    if order_by not in ("submitted_at", "task_id"):
        raise unprocessable(["query", "order_by"], "Input should be 'submitted_at' or 'task_id'", order_by)
    keep = Filter(request).keep
    queries = client().queries

    def pages(cursor: str | None) -> JobPage:
        return queries.jobs.page(queue, JobState.QUEUED, cursor=cursor, limit=PAGE)

    jobs = scan(pages, keep, limit or 1, caller(request))
    if order_by == "task_id":
        jobs.sort(key=lambda j: j.id)
    else:
        jobs.sort(key=lambda j: j.enqueued_at.timestamp() if j.enqueued_at else 0.0)
    histories = queries.jobs.histories(jobs)
    for job, history in zip(jobs, histories, strict=True):
        job.history = history
    return JsonResponse({"tasks": [full(j) for j in jobs]})


@view(["GET"], scope="any", style=fastapi_detail)
def all_queues(request: HttpRequest) -> HttpResponse:
    """GET /queues: every queue (the roles' and every queue a job or worker used; a token limited to queues:
    those)."""
    return JsonResponse({"queues": sorted(caller(request).visible_queues(known_queues()))})


@view(["GET"], scope="any", style=fastapi_detail)
def _role_queues_get(request: HttpRequest, role: str) -> HttpResponse:
    return JsonResponse({"queues": Roles(client().redis).queues(name_value(role, ["path", "role"], "role"))})


@view(["POST"], scope="operate", style=fastapi_detail)
def _role_queues_set(request: HttpRequest, role: str) -> HttpResponse:
    caller(request).check_unlimited("A role's queues span every queue")
    role = name_value(role, ["path", "role"], "role")
    body = json_body(request)
    if not isinstance(body, list):
        raise unprocessable(["body"], "Input should be a valid list", body)
    queues = sorted({name_value(q, ["body", i], "queue") for i, q in enumerate(body)})
    Roles(client().redis).set_queues(role, queues)
    audit.record(None, "set_role_queues", actor=actor(request), reason="Jobbers API", count=len(queues),
                 detail={"role": role, "queues": queues})  # fmt: skip
    return JsonResponse({"message": "Queues set successfully"})


@csrf_exempt
def role_queues(request: HttpRequest, role: str) -> HttpResponse:
    """GET /queues/{role}: the role's queues; POST /queues/{role} [names]: replace them (operate scope; an empty
    list removes the role)."""
    return (_role_queues_set if request.method == "POST" else _role_queues_get)(request, role)


@view(["GET"], scope="any", style=fastapi_detail)
def roles(request: HttpRequest) -> HttpResponse:
    """GET /roles: every role that has queues."""
    return JsonResponse({"roles": list(Roles(client().redis).all())})


def _dead(queue: str | None, keep: Callable[[Job], bool], limit: int, who: Caller) -> list[Job]:
    """Dead jobs `who` may see (newest first per queue, then all of them by when they died), at most `limit`."""
    queries = client().queries
    who.check_queue(queue)
    queues = [queue] if queue is not None else who.visible_queues(queries.queues.names())
    found: list[Job] = []
    for name in queues:

        def pages(cursor: str | None, name: str = name) -> JobPage:
            return queries.jobs.page(name, JobState.DEAD, cursor=cursor, limit=PAGE)

        found += scan(pages, keep, limit, who)
    found.sort(key=lambda j: j.finished_at.timestamp() if j.finished_at else 0.0, reverse=True)
    return found[:limit]


@view(["GET"], scope="any", style=fastapi_detail)
def dead_letter_queue(request: HttpRequest) -> HttpResponse:
    """GET /dead-letter-queue?queue=&task_name=&task_version=&limit= (100, at most 1000)."""
    queue = request.GET.get("queue")
    queue = name_value(queue, ["query", "queue"], "queue") if queue else None
    limit = query_int(request, "limit", default=DLQ_LIMIT[0], low=1, high=DLQ_LIMIT[1]) or 1
    return JsonResponse({"tasks": summaries(_dead(queue, Filter(request).keep, limit, caller(request)))})


@view(["GET"], scope="any", style=fastapi_detail)
def dead_letter_history(request: HttpRequest, task_id: str) -> HttpResponse:
    """GET /dead-letter-queue/{id}/history: every failed attempt, oldest first, with its times (the seed's
    entries had none)."""
    job = find_visible_job(request, ulid(task_id, ["path", "task_id"]), history=True)
    if job is None:
        raise SeedError(404, TASK_NOT_FOUND)
    history = [
        {
            "attempt": a.attempt - 1,
            "error": error_text(_attempt_error(a)),
            "outcome": a.outcome,
            "timestamp": iso(a.ended_at),
            "started_at": iso(a.started_at),
            "worker": a.worker,
        }
        for a in job.history
        if a.outcome != "completed"
    ]
    return JsonResponse({"task_id": job.id, "history": history})


RESUBMIT_CRITERIA = "Provide task_ids or at least one of: queue, task_name, task_version."


@view(["POST"], scope="operate", style=fastapi_detail)
def dead_letter_resubmit(request: HttpRequest) -> HttpResponse:
    """POST /dead-letter-queue/resubmit {task_ids | queue/task_name/task_version, reset_retry_count, limit}."""
    body = body_object(request)
    reset = body.get("reset_retry_count", True)
    if not isinstance(reset, bool):
        raise unprocessable(["body", "reset_retry_count"], "Input should be a valid boolean", reset)
    limit = body.get("limit", DLQ_LIMIT[0])
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= DLQ_LIMIT[1]:
        raise unprocessable(["body", "limit"], f"Input should be an integer from 1 to {DLQ_LIMIT[1]}", limit)
    queue, task_name, version = body.get("queue"), body.get("task_name"), body.get("task_version")
    if body.get("task_ids") is not None:
        ids = [ulid(i, ["body", "task_ids", n]) for n, i in enumerate(_id_list(body, "task_ids"))]
        found = (find_visible_job(request, i) for i in dict.fromkeys(ids))
        jobs = [j for j in found if j is not None and j.state is JobState.DEAD]
    elif queue or task_name or version is not None:
        if queue:
            queue = name_value(queue, ["body", "queue"], "queue")
        if task_name is not None and not isinstance(task_name, str):
            raise unprocessable(["body", "task_name"], "Input should be a valid string", task_name)
        caller(request).check_task(task_name or None)
        if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
            raise unprocessable(["body", "task_version"], "Input should be a valid integer", version)

        def keep(job: Job) -> bool:
            return (not task_name or job.task == task_name) and (version is None or job.version == version)

        jobs = _dead(queue or None, keep, limit, caller(request))
    else:
        raise SeedError(400, RESUBMIT_CRITERIA)
    c = client()
    done: list[Job] = []
    for job in jobs:
        try:
            c.requeue(job.id, job.queue, reset_attempts=reset)
        except (JobNotFound, JobStateConflict):
            continue  # resubmitted or removed by someone else meanwhile
        done.append(job)
    if done:
        audit.record(None, "resubmit", job_ids=[j.id for j in done], actor=actor(request), reason="Jobbers API",
                     refused=len(jobs) - len(done), count=len(done), detail={"reset_attempts": reset})  # fmt: skip
    fresh = [j for j in c.queries.jobs.by_id([(j.queue, j.id) for j in done]) if j is not None]
    return JsonResponse({"resubmitted": len(done), "tasks": summaries(fresh)})


@view(["GET"], scope="any", style=fastapi_detail)
def scheduled_tasks(request: HttpRequest) -> HttpResponse:
    """GET /scheduled-tasks?queue=&limit=&start=&task_name=&task_version=: delayed jobs and retries waiting for
    their backoff, soonest due first."""
    queue = required_queue(request)
    limit = query_int(request, "limit", default=TASK_LIST_LIMIT[0], low=1, high=TASK_LIST_LIMIT[1]) or 1
    queries = client().queries

    def pages(cursor: str | None) -> JobPage:
        page = queries.jobs.timed("scheduled", [queue], cursor=cursor, limit=PAGE)
        return JobPage([t.job for t in page.jobs], page.next_cursor)

    return JsonResponse({"tasks": summaries(scan(pages, Filter(request).keep, limit, caller(request)))})
