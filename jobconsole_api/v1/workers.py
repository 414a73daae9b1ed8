"""Workers: quiet, resume or stop one worker, or every worker of a host (audited; jobconsole/controls.py)."""

from jobconsole.controls import ControlError, WorkerControl, control_workers
from jobconsole_api.problems import Problem
from jobconsole_api.v1 import shapes
from jobconsole_api.v1.common import REASON
from jobconsole_api.v1.routing import Call, Param, Reply, Response, operation
from jobconsole_api.v1.schema import array, obj, ref, string

ACTION = string(
    "quiet: take no new jobs and finish the running ones; resume: lift a quiet; stop: shut down gracefully, as "
    "SIGTERM (each running job by its task's on_shutdown)",
    enum=["quiet", "resume", "stop"],
)
BODY = obj({"action": ACTION, "reason": REASON}, ("action",))
CONTROLLED = obj(
    {
        "action": ACTION,
        "outcomes": {"type": "object", "additionalProperties": string(enum=["done", "already"]),
                     "description": "worker id -> done, or already (it was so, or is stopping)"},
        "workers": array(ref("Worker"), "the workers named, as they are now (each acts within about 2 s)"),
    },
    ("action", "outcomes", "workers"),
)  # fmt: skip
ID = string(pattern=r"^[^/\x00]{1,300}$")


def _answer(call: Call, **target: str) -> Reply:
    call.caller.check_unlimited("A worker serves every queue it names")
    try:
        done: WorkerControl = control_workers(
            call.actor, call.body["action"], reason=call.body.get("reason", ""), **target
        )
    except ControlError as exc:
        raise Problem(exc.status, str(exc)) from exc
    return Reply(
        200, {"action": done.action, "outcomes": done.outcomes, "workers": [shapes.worker(w) for w in done.workers]}
    )


@operation(
    "POST", "/workers/{worker}/control", operation_id="control_worker", summary="Quiet, resume or stop a worker",
    tag="workers", params=(Param("worker", ID, where="path", required=True),), body=BODY,
    responses={200: Response("What changed, and the worker as it is now.", CONTROLLED),
               404: Response("No live worker by that id.")},
)  # fmt: skip
def control_worker(call: Call) -> Reply:
    """The worker acts on it at its next registry renewal (about 2 s): quiet shows as state `quiet`, stop as
    `stopping`, then it leaves the list. Not for a limited token."""
    return _answer(call, worker=call.params["worker"])


@operation(
    "POST", "/hosts/{host}/control", operation_id="control_host", summary="Quiet, resume or stop a host's workers",
    tag="workers", params=(Param("host", ID, where="path", required=True),), body=BODY,
    responses={200: Response("What changed, and the host's workers as they are now.", CONTROLLED),
               404: Response("No live worker on that host.")},
)  # fmt: skip
def control_host(call: Call) -> Reply:
    """Every live worker registered from the host (runworker's JOBCONSOLE_HOST_ID, or its host name), each
    atomically. Not for a limited token."""
    return _answer(call, host=call.params["host"])
