"""Jobs by unique key: find the live job holding a key, or delete it before it runs (Runqueue's "delete the
reminder before it runs")."""

from jobconsole import audit
from jobconsole.core.client import MAX_UNIQUE_KEY
from jobconsole.core.errors import JobNotFound, JobStateConflict
from jobconsole.engine import get_client
from jobconsole_api.problems import Problem
from jobconsole_api.v1.common import live_shape, queue_param
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
    return Reply(200, live_shape(job))


@operation(
    "DELETE", "/unique", operation_id="delete_unique", summary="Delete a job by its unique key", tag="jobs",
    scope="submit", params=PARAMS,
    responses={
        200: Response("The job was deleted before it ran.", obj({"id": string()}, ("id",))),
        404: Response("No live job holds the key (or none this token may see)."),
        409: Response("The job holding it runs (cancel it instead) or has ended."),
    },
)  # fmt: skip
def delete_unique(call: Call) -> Reply:
    """Delete the waiting job holding the key: a job that starts meanwhile is never deleted. Audited. A submit
    token deletes only a job it submitted; a limited token only one inside its limits."""
    queue, key = call.params["queue"], call.params["key"]
    caller, client = call.caller, get_client()
    try:
        if caller.may_read_all and not caller.limited:
            job_id = client.delete_unique(queue, key)  # the lookup and the delete in one step
        else:
            # The holder must be one the caller may see: delete that very job, only while it is still in the
            # state it was found in (a key taken over meanwhile by another job leaves that one alone).
            job = client.find_unique(queue, key)
            if job is None or not caller.visible([job]):
                raise _missing(call)
            client.delete(job.id, job.queue, expected_state=job.state)
            job_id = job.id
    except JobStateConflict as exc:
        raise Problem(409, str(exc)) from exc
    except JobNotFound:  # deleted by someone else meanwhile
        job_id = None
    if job_id is None:
        raise _missing(call)
    audit.record(call.actor, "delete", job_ids=[job_id], queue=queue, count=1, detail={"unique_key": key})
    return Reply(200, {"id": job_id})
