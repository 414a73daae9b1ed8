"""One exception root for the engine, specific subclasses, and the control-flow signals tasks raise."""

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobconsole.core.results import EnqueueResult


class JobQueueError(Exception):
    """Root of every error the engine raises."""


class InvalidJob(JobQueueError, ValueError):
    """A job was described wrongly (bad name, priority, parameters, time...). Nothing was enqueued."""


class UnknownTask(InvalidJob):
    """No task of that name is registered."""


class JobNotFound(JobQueueError, LookupError):
    """No job has that id."""


class JobStateConflict(JobQueueError):
    """The job is in a state that does not allow the operation (it moved on meanwhile)."""

    def __init__(self, job_id: str, state: str, operation: str) -> None:
        super().__init__(f"job {job_id} is {state}; cannot {operation}")
        self.job_id = job_id
        self.state = state
        self.operation = operation


class DuplicateJob(JobQueueError):
    """The unique key is held by another live job."""

    def __init__(self, job_id: str, unique_key: str) -> None:
        super().__init__(f"unique key {unique_key!r} is held by live job {job_id}")
        self.job_id = job_id
        self.unique_key = unique_key


class RedisFull(JobQueueError):
    """Redis refused new jobs: its memory is over `maxmemory` and its policy is `noeviction`. Nothing of a
    refused job was written, so sending it again later is safe (with its id, or as a new job). Workers keep
    running and finishing jobs meanwhile; memory comes back as finished jobs expire, or when an operator
    raises `maxmemory`. `refused`: the ids not enqueued; `accepted`: the results of the same call's jobs that
    Redis took before it filled up (enqueue_many sends in batches)."""

    def __init__(self, refused: Sequence[str], accepted: Sequence["EnqueueResult"] = ()) -> None:
        self.refused = list(refused)
        self.accepted = list(accepted)
        total = len(self.refused) + len(self.accepted)
        done = "job not enqueued" if total == 1 else f"{len(self.accepted)} of {total} jobs enqueued, the rest not"
        super().__init__(
            f"Redis is full (used memory over maxmemory, policy noeviction): {done}. Nothing of a refused job "
            "was written: send it again once memory is freed (finished jobs expire, or raise maxmemory)."
        )


class NotReplicated(JobQueueError):
    """Redis accepted the jobs, but fewer than `wanted` replicas acknowledged them within the timeout (the
    client's `replicas` option: WAIT after the enqueue). The jobs exist on the primary and may run; if the
    primary fails before a replica has them, a failover loses them. Enqueuing the same ids again is safe (an
    id already there is left as it is) and waits for the replicas again. `accepted`: the results of the jobs
    Redis took; `unsent`: the ids of later batches of the same call, not sent."""

    def __init__(
        self, accepted: Sequence["EnqueueResult"], acknowledged: int, wanted: int, unsent: Sequence[str] = ()
    ) -> None:
        self.accepted = list(accepted)
        self.acknowledged = acknowledged
        self.wanted = wanted
        self.unsent = list(unsent)
        count = "1 job" if len(self.accepted) == 1 else f"{len(self.accepted)} jobs"
        super().__init__(
            f"{count} enqueued on the primary, but only {acknowledged} of {wanted} replicas acknowledged in time: "
            "the jobs exist and may run, but a failover now could lose them"
            + (f"; {len(self.unsent)} more not sent" if self.unsent else "")
        )


class LeaseLost(JobQueueError):
    """This worker's lease on the job is no longer valid (expired, recovered, or given to another worker)."""


# --- Raised by task code -------------------------------------------------------------------------


class Retry(Exception):
    """Raise from a task to retry it (counts as an attempt), optionally after `delay` seconds."""

    def __init__(self, delay: float | None = None, message: str = "retry requested") -> None:
        super().__init__(message)
        self.delay = delay


class PermanentError(Exception):
    """Raise from a task to fail it without any retry."""


class UndecodablePayload(PermanentError):
    """A job's stored params or checkpoint are not what the engine writes (a JSON object; JSON): something
    wrote the job's hash directly. No retry can decode it, so the job is dead-lettered at once; an operator
    can fix the params (admin edit) and resubmit it."""


class Cancelled(Exception):
    """Raise from a task that saw `context.cancel_requested` to end the job as cancelled."""


class TaskTimeout(Exception):
    """The task ran past its timeout. Raised inside the task; retried like any expected failure."""


class WorkerShutdown(BaseException):
    """Injected into a task whose worker is stopping and whose on_shutdown policy is requeue or fail.

    A BaseException so that a task's own `except Exception` does not swallow it.
    """
