"""One exception root for the engine, specific subclasses, and the control-flow signals tasks raise."""


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


class Cancelled(Exception):
    """Raise from a task that saw `context.cancel_requested` to end the job as cancelled."""


class TaskTimeout(Exception):
    """The task ran past its timeout. Raised inside the task; retried like any expected failure."""


class WorkerShutdown(BaseException):
    """Injected into a task whose worker is stopping and whose on_shutdown policy is requeue or fail.

    A BaseException so that a task's own `except Exception` does not swallow it.
    """
