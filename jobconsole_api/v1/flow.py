"""Flow control: concurrency groups and queue limits, read live from Redis and set at run time (audited)."""

from typing import Any

from jobconsole import audit
from jobconsole.core.errors import InvalidJob
from jobconsole.core.groups import PERIODS_MS, Group
from jobconsole.core.queries.queues import GroupState
from jobconsole.engine import get_client
from jobconsole_api.problems import Problem
from jobconsole_api.v1.common import REASON, queue_param
from jobconsole_api.v1.routing import Call, Param, Reply, Response, operation
from jobconsole_api.v1.schema import NAME_PATTERN, Schema, array, integer, nullable, obj, string

GROUP = obj(
    {
        "name": string(),
        "connections": integer("jobs of the group running at once across all workers; 0: no cap"),
        "requests": integer("starts per period; 0: no rate limit"),
        "period_ms": integer("the rate limit's period"),
        "in_use": integer("slots held now (leases not run out)"),
        "started_in_window": integer("starts in the current rate window"),
        "waiting": integer("jobs waiting for a slot"),
        "held": {"type": "object", "additionalProperties": integer(), "description": "queue -> jobs waiting there"},
    },
    ("name", "connections", "requests", "period_ms", "in_use", "waiting"),
)
LIMIT = obj({"queue": string(), "limit": integer(), "running": integer()}, ("queue", "limit", "running"))
LIMIT_BODY = obj(
    {
        "limit": nullable(integer("the most jobs of the queue running at once; null: no limit", minimum=1)),
        "reason": REASON,
    },
    ("limit",),
)
FLOW = obj({"groups": array(GROUP), "queue_limits": array(LIMIT)}, ("groups", "queue_limits"))


def _group(state: GroupState) -> dict[str, Any]:
    return {
        "name": state.name, "connections": state.connections, "requests": state.requests,
        "period_ms": state.period_ms, "in_use": state.in_use, "started_in_window": state.started_in_window,
        "waiting": state.waiting, "held": state.held,
    }  # fmt: skip


def _flow() -> dict[str, Any]:
    flow = get_client().queries.queues.flow_control()
    limits = [{"queue": q, "limit": n, "running": flow.running.get(q, 0)} for q, n in sorted(flow.queue_limits.items())]
    return {"groups": [_group(g) for g in flow.groups], "queue_limits": limits}


@operation(
    "GET", "/flow", operation_id="get_flow_control", summary="Concurrency groups and queue limits", tag="flow",
    scope="read",
    responses={200: Response("Every group with its slots held and jobs waiting; every queue limit.", FLOW)},
)  # fmt: skip
def get_flow(call: Call) -> Reply:
    """Every concurrency group (its limits, slots held, starts in the rate window, jobs waiting by queue) and
    every queue limit with the jobs running under it. Not for a limited token (it shows every queue)."""
    call.caller.check_unlimited()
    return Reply(200, _flow())


COUNT = integer(minimum=1)
UNIT = string(enum=sorted({*PERIODS_MS, *(unit + "s" for unit in PERIODS_MS)}))
RATE: Schema = {"type": "array", "prefixItems": [COUNT, UNIT], "minItems": 2, "maxItems": 2}


@operation(
    "PUT", "/groups/{group}", operation_id="define_group", summary="Define a concurrency group", tag="flow",
    params=(Param("group", string("the group's name", pattern=NAME_PATTERN), where="path", required=True),),
    body=obj(
        {
            "connections": integer("jobs running at once across all workers; 0 or absent: no cap", minimum=0),
            "requests": {
                "anyOf": [RATE, {**RATE, "prefixItems": [COUNT, COUNT, UNIT], "minItems": 3, "maxItems": 3}],
                "description": "a rate limit: [n, unit] or [n, per, unit] (second, minute or hour; singular or "
                "plural), e.g. [10, \"second\"]",
            },
            "reason": REASON,
        }
    ) | {"anyOf": [{"required": ["connections"], "properties": {"connections": {"minimum": 1}}},
                   {"required": ["requests"]}],
         "x-any-message": "give connections (at least 1), requests or both"},
    responses={200: Response("Every group and limit as they are now.", FLOW), 400: Response("A bad limit.")},
)  # fmt: skip
def define_group(call: Call) -> Reply:
    """Set a group's limits now (workers read them at every slot they take); settings override it at a
    worker's next start. Not for a limited token (a group spans every queue)."""
    call.caller.check_unlimited("A concurrency group spans every queue")
    name = call.params["group"]
    spec = {k: v for k, v in call.body.items() if k in ("connections", "requests")}
    try:
        group = Group.parse(name, spec)
    except ValueError as exc:
        raise Problem(400, str(exc)) from exc
    get_client().define_group(group)
    audit.record(
        call.actor, "define_group", detail={"group": name, **spec}, count=0, reason=call.body.get("reason", "")
    )
    return Reply(200, _flow())


@operation(
    "PUT",
    "/queues/{queue}/limit",
    operation_id="set_queue_limit",
    summary="Set a queue's limit",
    tag="flow",
    params=(queue_param("path", "the queue's name"),),
    body=LIMIT_BODY,
    responses={200: Response("Every group and limit as they are now.", FLOW), 400: Response("A bad limit.")},
)
def set_queue_limit(call: Call) -> Reply:
    """Cap the queue's running jobs across all workers, or lift the cap."""
    queue, limit = call.params["queue"], call.body["limit"]
    call.caller.check_queue_change(queue)
    try:
        get_client().set_queue_limit(queue, limit)
    except InvalidJob as exc:
        raise Problem(400, str(exc)) from exc
    audit.record(call.actor, "set_queue_limit", queue=queue, detail={"limit": limit}, count=0,
                 reason=call.body.get("reason", ""))  # fmt: skip
    return Reply(200, _flow())
