"""The job state model. How each seed system's state names map onto it: docs/architecture.md (States)."""

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
    WAITING = "waiting"  # waits for its parent jobs to end (core/workflows.py); then queued or scheduled

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATES

    @property
    def is_waiting(self) -> bool:
        return self in (JobState.SCHEDULED, JobState.QUEUED, JobState.RETRYING)


TERMINAL_STATES = frozenset({JobState.COMPLETED, JobState.DEAD, JobState.FAILED, JobState.CANCELLED, JobState.DROPPED})


# The seed systems' names for our states, where their HTTP interfaces report one (docs/seeds.md). Jobbers
# reports a running job whose lease ran out as "stalled" (jobconsole_api/seeds/jobbers.py); the Go scheduler had
# no cancel and no dropped state, so both read as FAILED there.
JOBBERS_STATUS: dict[JobState, str] = {
    JobState.QUEUED: "submitted",
    JobState.SCHEDULED: "scheduled",
    JobState.RETRYING: "scheduled",
    JobState.RUNNING: "started",
    JobState.COMPLETED: "completed",
    JobState.DEAD: "failed",
    JobState.FAILED: "failed",
    JobState.CANCELLED: "cancelled",
    JobState.DROPPED: "dropped",
    JobState.WAITING: "scheduled",
}
GO_SCHEDULER_STATUS: dict[JobState, str] = {
    JobState.QUEUED: "PENDING",
    JobState.SCHEDULED: "PENDING",
    JobState.RETRYING: "RETRYING",
    JobState.RUNNING: "IN_PROGRESS",
    JobState.COMPLETED: "COMPLETED",
    JobState.DEAD: "FAILED",
    JobState.FAILED: "FAILED",
    JobState.CANCELLED: "FAILED",
    JobState.DROPPED: "FAILED",
    JobState.WAITING: "PENDING",
}
