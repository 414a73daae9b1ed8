"""Queues (list, pause, resume), workers, and scheduled jobs: live state read from Redis."""

from django.utils import timezone

from jobconsole import audit
from jobconsole.core import InvalidJob
from jobconsole.core.queries.jobs import TIMED_CURSOR_PATTERN
from jobconsole.engine import get_client
from jobconsole.models import Queue
from jobconsole_api.problems import Problem
from jobconsole_api.v1 import shapes
from jobconsole_api.v1.common import REASON, paging, queue_param
from jobconsole_api.v1.routing import Call, Reply, Response, operation
from jobconsole_api.v1.schema import array, obj, ref, string

QUEUES = obj({"items": array(ref("Queue"))}, ("items",))


@operation(
    "GET", "/queues", operation_id="list_queues", summary="List queues", tag="queues", scope="read",
    responses={200: Response("Every queue with its counts by state.", QUEUES)},
)  # fmt: skip
def list_queues(call: Call) -> Reply:
    """Every queue ever used, with its jobs by state and whether it is paused. A token limited to queues sees
    those queues; one limited to tasks only is refused (a queue's counts span every task)."""
    caller = call.caller
    if caller.task_limits and not caller.queue_limits:
        caller.check_unlimited("This route shows every queue, with every task's jobs")
    queries = get_client().queries
    names = caller.visible_queues(queries.queues.names())
    return Reply(200, {"items": [shapes.queue(queries.queues.counts(name)) for name in names]})


def _known(name: str) -> str:
    if name not in get_client().queries.queues.names():
        raise Problem(404, f"No queue {name!r}: no job has used it.")
    return name


def _set_paused(call: Call, pause: bool) -> Reply:
    call.caller.check_queue_change(call.params["queue"])
    name = _known(call.params["queue"])
    client = get_client()
    changed = client.pause(name) if pause else client.resume(name)
    Queue.objects.update_or_create(name=name, defaults={"paused": pause, "changed_at": timezone.now()})
    verb = "pause" if pause else "resume"
    audit.record(call.actor, verb, queue=name, filter={"queues": [name]}, count=int(changed),
                 reason=call.body.get("reason", ""))  # fmt: skip
    return Reply(200, shapes.queue(client.queries.queues.counts(name)))


PAUSE_RESPONSES = {200: Response("The queue as it is now.", ref("Queue")), 404: Response("No such queue.")}


@operation(
    "POST", "/queues/{queue}/pause", operation_id="pause_queue", summary="Pause a queue", tag="queues",
    params=(queue_param("path", "the queue's name"),), body=obj({"reason": REASON}), body_required=False,
    responses=PAUSE_RESPONSES,
)  # fmt: skip
def pause(call: Call) -> Reply:
    """Workers take nothing more from the queue (jobs running go on); enqueuing still works."""
    return _set_paused(call, True)


@operation(
    "POST", "/queues/{queue}/resume", operation_id="resume_queue", summary="Resume a queue", tag="queues",
    params=(queue_param("path", "the queue's name"),), body=obj({"reason": REASON}), body_required=False,
    responses=PAUSE_RESPONSES,
)  # fmt: skip
def resume(call: Call) -> Reply:
    """Workers take jobs from the queue again."""
    return _set_paused(call, False)


@operation(
    "GET", "/workers", operation_id="list_workers", summary="List workers", tag="workers", scope="read",
    responses={200: Response("Every registered worker, latest heartbeat first.",
                             obj({"items": array(ref("Worker"))}, ("items",)))},
)  # fmt: skip
def workers(call: Call) -> Reply:
    """Every worker that registered: its queues, threads, what it runs now, and whether it is gone. Not for a
    limited token (it shows every queue)."""
    call.caller.check_unlimited()
    return Reply(200, {"items": [shapes.worker(w) for w in get_client().queries.workers.all()]})


SCHEDULED_ITEM = obj({"job": ref("JobSummary"), "due_at": string(format="date-time")}, ("job", "due_at"))


@operation(
    "GET", "/scheduled", operation_id="list_scheduled", summary="List scheduled jobs", tag="jobs", scope="read",
    params=(queue_param(), *paging(TIMED_CURSOR_PATTERN, "its due time in ms since the epoch ~ queue ~ job id")),
    responses={200: Response("Delayed jobs and retries waiting for their backoff, soonest due first.", obj(
        {"items": array(SCHEDULED_ITEM), "next_cursor": {"type": ["string", "null"]}}, ("items", "next_cursor"))),
               404: Response("No such queue.")},
)  # fmt: skip
def scheduled(call: Call) -> Reply:
    """Jobs waiting for their time, across queues (or one), soonest first, read live from Redis. A limited token
    sees the jobs inside its limits (a `queue` outside them: 403; a page may then hold fewer items)."""
    queries = get_client().queries
    caller = call.caller
    queue = call.params.get("queue")
    caller.check_queue(queue)
    if queue is not None:
        _known(queue)
    queues = [queue] if queue else (sorted(caller.queue_limits) or None)
    try:
        found = queries.jobs.timed("scheduled", queues, cursor=call.params.get("cursor"), limit=call.params["limit"])
    except InvalidJob:
        raise Problem(400, "The cursor is not one this API gave out; start from the first page.") from None
    shown = {job.id for job in caller.visible([t.job for t in found.jobs])}
    items = [{"job": shapes.live_summary(t.job), "due_at": shapes.iso(t.at)} for t in found.jobs if t.job.id in shown]
    return Reply(200, {"items": items, "next_cursor": found.next_cursor})
