"""Hooks a framework installs around each sync task: callables run on the task's own thread, just before the
task and just after it. The engine knows nothing of what they do; the Django layer closes the thread's stale
database connections with them (jobconsole/db_connections.py), as Django does around each request."""

import logging
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("jobconsole.core.worker")


@dataclass(frozen=True, slots=True)
class TaskHooks:
    """`before` runs once the job has begun, on the thread that runs the task: raising fails the job as the task
    would (the retry policy decides). `after` runs when the task has returned or raised, on the same thread:
    raising is logged and changes nothing (the outcome stands). Both must be quick: they run for every job."""

    before: Callable[[], None] | None = None
    after: Callable[[], None] | None = None

    def run_after(self) -> None:
        """`after`, its failure logged, not raised."""
        if self.after is None:
            return
        try:
            self.after()
        except Exception:
            log.exception("task hook 'after' failed (the job's outcome stands)")
