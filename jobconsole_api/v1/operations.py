"""Bulk operations started through the API (or the console): their progress, and stopping one."""

from jobconsole.bulk.operations import request_cancel
from jobconsole.models import BulkOperation
from jobconsole_api.problems import Problem
from jobconsole_api.v1 import shapes
from jobconsole_api.v1.routing import Call, Param, Reply, Response, operation
from jobconsole_api.v1.schema import integer, ref

OPERATION_ID = Param(
    "operation_id", integer("the operation's id", minimum=1, maximum=2**53), where="path", required=True
)


def _operation(call: Call) -> BulkOperation:
    op = BulkOperation.objects.filter(pk=call.params["operation_id"]).first()
    if op is None:
        raise Problem(404, f"No bulk operation {call.params['operation_id']}.")
    if op.actor != call.actor:  # a limited token's own operations were narrowed to its limits; no others
        call.caller.check_unlimited("Bulk operations span every queue (a limited token follows only its own)")
    return op


@operation(
    "GET", "/operations/{operation_id}", operation_id="get_operation", summary="A bulk operation's progress",
    tag="dead letters", params=(OPERATION_ID,), database_only=True, scope="read",
    responses={200: Response("Its status and counts.", ref("Operation")), 404: Response("No such operation.")},
)  # fmt: skip
def get_operation(call: Call) -> Reply:
    """Done, refused and failed so far, of the total; the rate and the time left; pending, running, done,
    cancelled or failed. A limited token reads only the operations it started."""
    return Reply(200, shapes.operation(_operation(call)))


@operation(
    "POST", "/operations/{operation_id}/cancel", operation_id="cancel_operation", summary="Stop a bulk operation",
    tag="dead letters", params=(OPERATION_ID,), database_only=True,
    responses={200: Response("As it is now: cancelled, or to stop after the chunk under way.", ref("Operation")),
               404: Response("No such operation.")},
)  # fmt: skip
def cancel_operation(call: Call) -> Reply:
    """Stop the operation between two chunks (at once while it waits); what was done stays done. A limited token
    stops only the operations it started."""
    return Reply(200, shapes.operation(request_cancel(_operation(call), call.actor)))
