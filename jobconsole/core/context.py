"""What a running task may ask for: its job id, attempt, checkpoint, heartbeats and cancellation."""

from collections.abc import Callable
from typing import Any


class JobContext:
    """Passed to a task that declares a parameter named `context` (or annotated `JobContext`)."""

    def __init__(
        self,
        *,
        job_id: str,
        queue: str,
        task: str,
        attempt: int,
        max_retries: int,
        checkpoint: Any,
        send_heartbeat: Callable[[float | None, Any], None],
    ) -> None:
        self.job_id = job_id
        self.queue = queue
        self.task = task
        self.attempt = attempt  # 1 for the first attempt
        self.max_retries = max_retries
        self.checkpoint = checkpoint  # the last checkpoint saved by this or a previous attempt
        self.cancel_requested = False  # set by the worker when an operator cancels the running job
        self._send_heartbeat = send_heartbeat

    def heartbeat(self, progress: float | None = None, checkpoint: Any = None) -> None:
        """Renew the lease now, optionally saving progress (0..1) and a JSON checkpoint that a later
        attempt receives as `context.checkpoint`. Raises LeaseLost if this worker no longer owns the job,
        in which case the task should stop: another worker may already be running it."""
        if checkpoint is not None:
            self.checkpoint = checkpoint
        self._send_heartbeat(progress, checkpoint)
