"""Stopping: signals counted, then each running task's on_shutdown policy, with a grace period before the
worker leaves anyway."""

import logging
import os
import signal
import time
from types import FrameType

from jobconsole.core.errors import WorkerShutdown
from jobconsole.core.execution import RunningJob, failure
from jobconsole.core.task_threads import TaskThreads
from jobconsole.core.tasks import OnShutdown
from jobconsole.core.thread_pacing import ThreadPacer
from jobconsole.core.worker.exchange import Exchange
from jobconsole.core.worker.registry import Registration
from jobconsole.core.worker.stop import StopRequests

log = logging.getLogger("jobconsole.core.worker")  # one logger for every part, so log lines name the worker


class Shutdown:
    """The two-stage stop: the first request applies the on_shutdown policies, a second signal exits at once."""

    def __init__(
        self,
        stop: StopRequests,
        running: dict[str, RunningJob],
        threads: TaskThreads,
        pacer: ThreadPacer,
        exchange: Exchange,
        registration: Registration,
        *,
        concurrency: int,
        grace: float,
        worker_id: str,
    ) -> None:
        self._stop = stop
        self._running = running
        self._threads = threads
        self._pacer = pacer
        self._exchange = exchange
        self._registration = registration
        self._concurrency = concurrency
        self._grace = grace
        self._worker_id = worker_id
        self._since: float | None = None  # monotonic time of the first step

    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT: stop by each task's on_shutdown policy; a second signal exits at once."""
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def request(self) -> None:
        """Stop as the first signal would."""
        self._stop.count = max(self._stop.count, 1)
        self._stop.wake()

    def step(self) -> bool:
        """Apply the on_shutdown policies (once), then tell whether the worker may exit."""
        now = time.monotonic()
        running = self._running
        if self._since is None:
            self._since = now
            # Every thread, so that prefetched jobs behind slow tasks are given back at once.
            self._pacer.open_all()
            self._threads.set_active(self._concurrency)
            self._registration.renew()
            for job in list(running.values()):
                with job.lock:
                    if not job.began:  # prefetched, not started: give it back untouched
                        job.interrupted = OnShutdown.REQUEUE
                        continue
                if job.task.on_shutdown is not OnShutdown.FINISH:
                    job.interrupted = job.task.on_shutdown
                    job.interrupt(WorkerShutdown)
        if not running:
            return True
        if now - self._since < self._grace:
            return False
        # Interrupted tasks still running after the grace period are blocked in C: report them anyway and leave.
        stuck = [j for j in running.values() if j.interrupted is not None]
        if stuck and len(stuck) == len(running):
            self._exchange.pending.extend(failure(j, WorkerShutdown()) for j in stuck)
            self._exchange.report()
            return True
        return False

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        """SIGTERM/SIGINT: the first starts the shutdown, the second exits at once."""
        self._stop.count += 1
        if self._stop.count >= 2:
            log.warning(
                "worker=%s second signal: exiting now; leases of %d running job(s) will expire",
                self._worker_id,
                len(self._running),
            )
            os._exit(1)
        self._stop.wake()
        log.warning(
            "worker=%s %s: stopping (running=%d)", self._worker_id, signal.Signals(signum).name, len(self._running)
        )
