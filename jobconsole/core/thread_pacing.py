"""How many of a worker's task threads take jobs: the fewest that keep the process busy.

Sync tasks share one GIL. While tasks are short, every thread the dispatcher wakes runs a little Python and
then waits for the GIL, so fewer threads spend less CPU per job on wake-ups and context switches. The right
number depends on how much of a task is waiting (I/O) and how much is Python, so it is measured, not
configured: every PACE_EVERY_S the pacer looks at the share of a core that the job pipeline's threads used
(the dispatcher and the task threads, not a mirror or maintenance thread that may share the process: a busy
mirror must not make I/O-bound tasks run on fewer threads).

- Near a whole core (the GIL is the limit): one thread fewer; the others lose nothing by it.
- Well under a core while jobs wait for a thread: twice as many threads; the tasks wait on I/O and more
  of them can wait at once (growing fast: a waiting job costs more than a spare thread).
- Jobs waiting and no task finished for STARVED_AFTER_S: one thread more at once (slow tasks hold every
  active thread; the jobs behind them must not wait for the next look).
- Tasks that are not short (see prefetch_count in core/worker/exchange.py), or a worker stopping: every thread.

`concurrency` stays the upper bound: never more tasks at once than configured.
"""

import time
from collections.abc import Callable, Iterable

PACE_EVERY_S = 0.1
SHRINK_ABOVE_CPU = 0.85  # share of one core over the last look
GROW_BELOW_CPU = 0.6
STARVED_AFTER_S = 0.01
MIN_ACTIVE = 3  # a slow task or two never hold every active thread; three overlap a short task's I/O


class ThreadPacer:
    """Decides how many task threads take jobs, from the pipeline's share of a core and the jobs waiting."""

    def __init__(self, limit: int, cpu_clock: Callable[[], float] = time.process_time) -> None:
        self.limit = limit
        self.active = limit  # start as configured; shrink only once the process shows it is GIL-bound
        self._cpu_clock = cpu_clock
        self.restart()

    def restart(self) -> None:
        """Measure from now (the worker calls it once its dispatcher thread is known)."""
        self._looked_at = time.monotonic()
        self._looked_cpu = self._cpu_clock()
        self._last_outcome_at = self._looked_at

    def outcome_seen(self, now: float) -> None:
        """A task finished at `now`."""
        self._last_outcome_at = now

    def starved(self, now: float, backlog: int) -> bool:
        """Jobs wait for a thread and none of the active ones finished anything lately: grow now."""
        if backlog <= 0 or self.active >= self.limit or now - self._last_outcome_at < STARVED_AFTER_S:
            return False
        self.active += 1
        self._last_outcome_at = now  # at most one more thread per STARVED_AFTER_S
        return True

    def look(self, now: float, *, backlog: int, short_tasks: bool) -> bool:
        """Every PACE_EVERY_S: adjust `active`. True when it changed."""
        if now - self._looked_at < PACE_EVERY_S:
            return False
        cpu_now = self._cpu_clock()
        cpu_share = (cpu_now - self._looked_cpu) / (now - self._looked_at)
        self._looked_at, self._looked_cpu = now, cpu_now
        before = self.active
        if not short_tasks:
            self.active = self.limit
        elif cpu_share > SHRINK_ABOVE_CPU:
            self.active = max(min(MIN_ACTIVE, self.limit), self.active - 1)
        elif cpu_share < GROW_BELOW_CPU and backlog > 0:
            self.active = min(self.limit, self.active * 2)
        return self.active != before

    def open_all(self) -> None:
        """Every thread takes jobs (the worker is stopping)."""
        self.active = self.limit


def threads_cpu_clock(threads: Callable[[], Iterable[int | None]]) -> Callable[[], float]:
    """A clock of the CPU seconds the given threads (by ident) have used, from each thread's own CPU clock."""
    if not hasattr(time, "pthread_getcpuclockid"):
        return time.process_time  # no per-thread clocks here: the whole process's CPU time is the nearest

    def cpu_seconds() -> float:
        """CPU seconds used by the threads alive now."""
        total = 0.0
        for ident in threads():
            if ident is None:  # not started yet
                continue
            try:
                total += time.clock_gettime(time.pthread_getcpuclockid(ident))
            except OSError:  # the thread has just ended (the worker is stopping)
                continue
        return total

    return cpu_seconds
