"""The system task (registered when Django loads the app's tasks.py, like every installed app's): the work of a
bulk operation, on the system queue that every runworker serves (jobconsole/bulk/system.py)."""

from typing import Any

from jobconsole.bulk.runner import mark_failed, run_operation
from jobconsole.bulk.system import BULK_TASK, SYSTEM_QUEUE
from jobconsole.core import JobContext, task
from jobconsole.core.errors import LeaseLost


@task(
    name=BULK_TASK,
    queue=SYSTEM_QUEUE,
    # A killed worker's operation goes on elsewhere once this lease runs out (the recoverer requeues it);
    # the worker's heartbeat thread renews it every third while the task runs.
    visibility_timeout=10,
    # A database or Redis outage fails an attempt; later attempts go on from the first chunk not done.
    max_retries=12,
    retry_delay=2,
    backoff_strategy="exponential",
    max_retry_delay=60,
    # A stopping worker interrupts it and gives it back without using an attempt: it is resumable anywhere.
    on_shutdown="requeue",
)
def bulk(context: JobContext, operation: int) -> dict[str, Any]:
    """Run bulk operation `operation` (jobconsole.models.BulkOperation) from its first chunk not done."""
    try:
        return run_operation(operation, context)
    except LeaseLost:
        raise  # another worker holds the job now and goes on with the operation
    except Exception as exc:
        if context.attempt > context.max_retries:  # the last attempt: record why, keep it resumable
            mark_failed(operation, exc)
        raise
