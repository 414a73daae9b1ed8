"""The system queue and the system task that runs bulk operations on the engine itself.

Every `runworker` serves the system queue with a small worker of its own (BULK.CONCURRENCY threads) beside
the worker of its own queues, so a bulk operation never waits behind a backlog of ordinary jobs and never takes
one of their slots; `runworker --no-system-worker` leaves it out.
"""

SYSTEM_QUEUE = "jobconsole.system"
BULK_TASK = "jobconsole.bulk"


def unique_key(stamp: str) -> str:
    """One live system job per operation: enqueueing it again (a resume) while one lives does nothing."""
    return f"{BULK_TASK}:{stamp}"
