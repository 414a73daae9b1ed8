"""Jobs by unique key: find the live job holding a key, or delete it before it runs (Runqueue's "delete the
reminder before it runs")."""

from jobconsole import audit
from jobconsole.core.client import MAX_UNIQUE_KEY
from jobconsole.core.errors import JobStateConflict
from jobconsole.engine import get_client
from jobconsole_api.problems import Problem
from jobconsole_api.v1 import shapes
from jobconsole_api.v1.common import queue_param
from jobconsole_api.v1.routing import Call, Param, Reply, Response, operation
from jobconsole_api.v1.schema import obj, ref, string

KEY = Param("key", string("the unique key", minLength=1, maxLength=MAX_UNIQUE_KEY), required=True)
QUEUE = queue_param("query", "the queue (or a registered task, whose queue it is)")
PARAMS = (Param(QUEUE.name, QUEUE.source, required=True), KEY)


def _missing(call: Call) -> Problem:
    return Problem(404, f"No live job holds unique key {call.params['key']!r} in {call.params['queue']!r}.")


@operation(
    "GET", "/unique", operation_id="find_unique", summary="Find a job by its unique key", tag="jobs", scope="any",
    params=PARAMS,
    responses={200: Response("The live job holding the key.", ref("Job")),
               404: Response("No live job holds it (or none this token may see).")},
)  # fmt: skip
def find_unique(call: Call) -> Reply:
    """The live job (waiting or running) holding the unique key in the queue. A submit token finds only the jobs
    it submitted; a limited token only those inside its limits."""
    job = get_client().find_unique(call.params["queue"], call.params["key"])
    if job is None or not call.caller.visible([job]):
        raise _missing(call)
    return Reply(200, shapes.live_job(job))


@operation(
    "DELETE", "/unique", operation_id="delete_unique", summary="Delete a job by its unique key", tag="jobs",
    params=PARAMS,
    responses={
        200: Response("The job was deleted before it ran.", obj({"id": string()}, ("id",))),
        404: Response("No live job holds the key."),
        409: Response("The job holding it runs (cancel it instead) or has ended."),
    },
)  # fmt: skip
def delete_unique(call: Call) -> Reply:
    """Delete the waiting job holding the key, in one step with its lookup: a job that starts meanwhile is never
    deleted. Audited. A token limited to tasks may not use it (whichever task's job holds the key is deleted)."""
    queue, key = call.params["queue"], call.params["key"]
    caller = call.caller
    if caller.task_limits:
        caller.check_unlimited("DELETE /unique deletes the job of whichever task holds the key")
    registered = get_client().registry.find(queue)  # a task's name stands for its queue
    caller.check_queue(registered.queue if registered is not None else queue)
    try:
        job_id = get_client().delete_unique(queue, key)
    except JobStateConflict as exc:
        raise Problem(409, str(exc)) from exc
    if job_id is None:
        raise _missing(call)
    audit.record(call.actor, "delete", job_ids=[job_id], queue=queue, count=1, detail={"unique_key": key})
    return Reply(200, {"id": job_id})
