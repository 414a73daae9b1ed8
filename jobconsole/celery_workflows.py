"""A Celery canvas with dependencies (a chain, a chord, a link) sent as one workflow of the engine."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobconsole.canvas import Signature
    from jobconsole.celery import AsyncResult


def send(sig: "Signature") -> "AsyncResult[Any]":
    from jobconsole.canvas import WorkflowsUnavailable

    raise WorkflowsUnavailable(
        f"{sig!r}: sending a chain, chord or linked call needs the engine's workflows "
        "(jobconsole.core.workflows, Client.enqueue_workflow), which this version does not have yet; "
        ".apply() runs it here, and a group of plain calls can be sent"
    )
