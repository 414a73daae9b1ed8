"""Periodic schedules: list, get, enable, disable, run now (jobconsole/periodic.py, as the console does)."""

from jobconsole import periodic
from jobconsole.core import InvalidJob
from jobconsole.core.periodic import Schedule
from jobconsole_api.problems import Problem
from jobconsole_api.v1 import shapes
from jobconsole_api.v1.common import REASON
from jobconsole_api.v1.routing import Call, Param, Reply, Response, operation
from jobconsole_api.v1.schema import NAME_PATTERN, array, obj, ref, string

NAME = Param("name", string("the schedule's name", pattern=NAME_PATTERN), where="path", required=True)
NOT_FOUND = Response("No such schedule.")


SPANS_QUEUES = "Periodic schedules span every queue"


def _find(name: str) -> Schedule:
    try:
        return periodic.find(name)
    except periodic.ScheduleNotFound:
        raise Problem(404, f"No schedule {name!r}.") from None


def _shown(name: str) -> Reply:
    [info] = periodic.describe([_find(name)])
    return Reply(200, info.as_json())


@operation(
    "GET", "/schedules", operation_id="list_schedules", summary="List periodic schedules", tag="schedules",
    scope="read",
    responses={200: Response("Every schedule (settings, then database), with its last fire and next runs.",
                             obj({"items": array(ref("Schedule"))}, ("items",)))},
)  # fmt: skip
def list_schedules(call: Call) -> Reply:
    """Every periodic schedule: its task and expression, whether it is enabled, when it fired last, its next
    five runs (UTC). Not for a limited token."""
    call.caller.check_unlimited(SPANS_QUEUES)
    return Reply(200, {"items": [info.as_json() for info in periodic.describe(periodic.all_schedules())]})


@operation(
    "GET", "/schedules/{name}", operation_id="get_schedule", summary="Get a periodic schedule", tag="schedules",
    params=(NAME,), responses={200: Response("The schedule.", ref("Schedule")), 404: NOT_FOUND}, database_only=True,
    scope="read",
)  # fmt: skip
def get_schedule(call: Call) -> Reply:
    """One schedule, as the list shows it. Not for a limited token."""
    call.caller.check_unlimited(SPANS_QUEUES)
    return _shown(call.params["name"])


def _set_enabled(call: Call, enabled: bool) -> Reply:
    call.caller.check_unlimited(SPANS_QUEUES)
    name = call.params["name"]
    _find(name)
    try:
        periodic.set_enabled(name, enabled, call.actor, reason=(call.body or {}).get("reason", ""))
    except periodic.ReadOnlySchedule as exc:
        raise Problem(409, str(exc)) from None
    return _shown(name)


TOGGLE_RESPONSES = {
    200: Response("The schedule as it is now.", ref("Schedule")),
    404: NOT_FOUND,
    409: Response("The schedule is defined in the settings: change it there."),
}


@operation(
    "POST", "/schedules/{name}/enable", operation_id="enable_schedule", summary="Enable a schedule",
    tag="schedules", params=(NAME,), body=obj({"reason": REASON}), body_required=False, responses=TOGGLE_RESPONSES,
    database_only=True,
)  # fmt: skip
def enable(call: Call) -> Reply:
    """The schedule fires again from its next slot (the slots it passed while disabled stay unfired)."""
    return _set_enabled(call, True)


@operation(
    "POST", "/schedules/{name}/disable", operation_id="disable_schedule", summary="Disable a schedule",
    tag="schedules", params=(NAME,), body=obj({"reason": REASON}), body_required=False, responses=TOGGLE_RESPONSES,
    database_only=True,
)  # fmt: skip
def disable(call: Call) -> Reply:
    """The schedule's slots pass unfired until it is enabled again."""
    return _set_enabled(call, False)


@operation(
    "POST", "/schedules/{name}/run", operation_id="run_schedule", summary="Run a schedule now", tag="schedules",
    params=(NAME,), body=obj({"reason": REASON}), body_required=False, database_only=True,
    responses={201: Response("The job enqueued.", ref("Submitted")), 404: NOT_FOUND,
               422: Response("The schedule's job was refused (unknown task, bad parameters).")},
)  # fmt: skip
def run_now(call: Call) -> Reply:
    """Enqueue the schedule's job now, under a fresh id: its slots are untouched. Not for a limited token."""
    call.caller.check_unlimited(SPANS_QUEUES)
    name = call.params["name"]
    _find(name)
    try:
        result = periodic.run_now(name, call.actor, reason=(call.body or {}).get("reason", ""))
    except InvalidJob as exc:
        raise Problem(422, f"Schedule {name}: the job was refused: {exc}") from None
    return Reply(201, shapes.submitted(result))
