"""The job state model, and how each seed system's state names map onto it."""

from enum import StrEnum


class JobState(StrEnum):
    SCHEDULED = "scheduled"  # waiting for its run_at (a delay)
    QUEUED = "queued"  # ready; workers claim in priority, then FIFO, order
    RUNNING = "running"  # claimed by a worker under a lease
    RETRYING = "retrying"  # an attempt failed; waiting for its backoff to pass
    COMPLETED = "completed"
    DEAD = "dead"  # attempts exhausted (or not retryable); in the dead-letter queue, can be requeued
    FAILED = "failed"  # as dead, for tasks whose dead_letter_policy is "discard"; expires like completed
    CANCELLED = "cancelled"
    DROPPED = "dropped"  # a worker claimed it but has no such task registered; kept, can be requeued

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATES

    @property
    def is_waiting(self) -> bool:
        return self in (JobState.SCHEDULED, JobState.QUEUED, JobState.RETRYING)


TERMINAL_STATES = frozenset({JobState.COMPLETED, JobState.DEAD, JobState.FAILED, JobState.CANCELLED, JobState.DROPPED})

# Seed state names -> ours. "Stalled" is not stored: it is a running job whose lease has expired,
# which the recoverer turns back into queued (or dead) with a "worker_lost" attempt in its history.
JOBBERS_STATES: dict[str, JobState | None] = {
    "UNSUBMITTED": None,  # never reached Redis
    "SUBMITTED": JobState.QUEUED,
    "SCHEDULED": JobState.SCHEDULED,
    "STARTED": JobState.RUNNING,
    "COMPLETED": JobState.COMPLETED,
    "FAILED": JobState.DEAD,
    "CANCELLED": JobState.CANCELLED,
    "STALLED": JobState.RUNNING,
    "DROPPED": JobState.DROPPED,
}
GO_SCHEDULER_STATES: dict[str, JobState] = {
    "PENDING": JobState.QUEUED,
    "IN_PROGRESS": JobState.RUNNING,
    "RETRYING": JobState.RETRYING,
    "COMPLETED": JobState.COMPLETED,
    "FAILED": JobState.DEAD,
}


def to_jobbers(state: JobState) -> str:
    """Our state as the Jobbers API names it."""
    return {
        JobState.QUEUED: "SUBMITTED",
        JobState.SCHEDULED: "SCHEDULED",
        JobState.RETRYING: "SCHEDULED",
        JobState.RUNNING: "STARTED",
        JobState.COMPLETED: "COMPLETED",
        JobState.DEAD: "FAILED",
        JobState.FAILED: "FAILED",
        JobState.CANCELLED: "CANCELLED",
        JobState.DROPPED: "DROPPED",
    }[state]


def to_go_scheduler(state: JobState) -> str:
    """Our state as the Go scheduler seed names it."""
    return {
        JobState.QUEUED: "PENDING",
        JobState.SCHEDULED: "PENDING",
        JobState.RETRYING: "RETRYING",
        JobState.RUNNING: "IN_PROGRESS",
        JobState.COMPLETED: "COMPLETED",
    }.get(state, "FAILED")
