"""The threads that run sync tasks: each takes the next claimed job from one shared queue and puts its
Outcome on the worker's results queue. Two C-implemented queues and no futures, locks or callbacks per
job: on a small VM every extra wake-up and lock costs as much as running a no-op task."""

import queue
import threading
from collections.abc import Callable

from jobconsole.core.execution import Outcome, RunningJob, run_sync


class TaskThreads:
    def __init__(self, count: int, results: "queue.SimpleQueue[Outcome]", name: str = "jc-task") -> None:
        self._jobs: queue.SimpleQueue[RunningJob | Callable[[], None] | None] = queue.SimpleQueue()
        self._results = results
        self._threads = [threading.Thread(target=self._run, name=f"{name}-{i}", daemon=True) for i in range(count)]
        for t in self._threads:
            t.start()

    def submit(self, job: RunningJob) -> None:
        self._jobs.put(job)

    def call(self, chore: Callable[[], None]) -> None:
        """Run `chore` on the next free thread (it must not raise)."""
        self._jobs.put(chore)

    def stop(self) -> None:
        """Let each thread exit after the jobs already queued (run_sync releases those not yet begun
        once shutdown marks them)."""
        for _ in self._threads:
            self._jobs.put(None)

    def _run(self) -> None:
        jobs, results = self._jobs, self._results
        while (item := jobs.get()) is not None:
            if isinstance(item, RunningJob):
                results.put(run_sync(item))  # run_sync never raises
            else:
                item()
