"""The threads that run sync tasks: each takes the next claimed job from one shared queue and puts its
Outcome on the worker's results queue. Two C-implemented queues and no futures, locks or callbacks per
job: on a small VM every extra wake-up and lock costs as much as running a no-op task.

Only the first `active` threads take jobs; the others wait at a gate (see core/thread_pacing.py): while
tasks are short, ten threads woken in turn by every job only fight over the GIL."""

import queue
import threading
from collections.abc import Callable

from jobconsole.core.execution import Outcome, RunningJob, run_sync


class TaskThreads:
    """The threads that run sync tasks; only the first `active` of them take jobs."""

    def __init__(self, count: int, results: "queue.SimpleQueue[Outcome | None]", name: str = "jc-task") -> None:
        self._jobs: queue.SimpleQueue[RunningJob | Callable[[], None] | None] = queue.SimpleQueue()
        self._results = results
        self._active = count
        self._stopping = False
        self._gate = threading.Condition()
        self._threads = [
            threading.Thread(target=self._run, args=(i,), name=f"{name}-{i}", daemon=True) for i in range(count)
        ]
        for t in self._threads:
            t.start()

    @property
    def active(self) -> int:
        """Threads that take jobs now (a thread past the gate finishes the job it holds first)."""
        return self._active

    def idents(self) -> list[int | None]:
        """The running threads' idents (a thread that has ended has no CPU clock left to read)."""
        return [t.ident for t in self._threads if t.is_alive()]

    def backlog(self) -> int:
        """Jobs (and chores) waiting for a thread."""
        return self._jobs.qsize()

    def set_active(self, active: int) -> None:
        """Let the first `active` threads take jobs (at least one, at most all)."""
        active = max(1, min(active, len(self._threads)))
        if active == self._active:
            return
        with self._gate:
            grow = active > self._active
            self._active = active
            if grow:
                self._gate.notify_all()

    def submit(self, job: RunningJob) -> None:
        """Queue a claimed job for the next free thread."""
        self._jobs.put(job)

    def call(self, chore: Callable[[], None]) -> None:
        """Run `chore` on the next free thread (it must not raise)."""
        self._jobs.put(chore)

    def stop(self) -> None:
        """Let each thread exit once the jobs already queued are done."""
        # Queued jobs do not delay the exit: run_sync gives back those that shutdown marked before they began.
        with self._gate:
            self._stopping = True
            self._gate.notify_all()
        for _ in self._threads:
            self._jobs.put(None)

    def _run(self, index: int) -> None:
        """Thread `index`: wait at the gate while not active, then run the next job or chore."""
        jobs, results, gate = self._jobs, self._results, self._gate
        while True:
            if index >= self._active and not self._stopping:
                with gate:
                    while index >= self._active and not self._stopping:
                        gate.wait()
            item = jobs.get()
            if item is None:
                return
            if isinstance(item, RunningJob):
                results.put(run_sync(item))  # run_sync never raises
            else:
                item()
