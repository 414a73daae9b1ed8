"""The blocking pop on the worker's inboxes and the queues' wake lists while its jobs run, on a thread of its own.

The dispatcher meanwhile waits on the results queue, so it reports a finished job at once (the ack that releases a
workflow's dependents) rather than when its own pop would have returned: Redis ends a blocking pop's timeout only
at its next cron tick (1/hz, 100 ms by default), so even a short pop held an outcome back for about that long. A
pop's end (a job handed to us, a wake-up, its timeout or an error) puts None on the results queue to wake the
dispatcher. One pop is out at a time; it costs no command the dispatcher's own pop did not.
"""

import queue as stdqueue
import threading
import time
from collections.abc import Sequence

from jobconsole.core.execution import Outcome, RunningJob
from jobconsole.core.results import Handed
from jobconsole.core.store import Store, WorkerIdentity
from jobconsole.core.worker.groups import GroupClaims
from jobconsole.core.worker.launcher import Launcher

BEGIN_WAIT_S = 0.005
Popped = Handed | BaseException | None  # None: the pop timed out


class Watch:
    """One blocking pop at a time for the dispatcher, run on the `jc-watch` thread."""

    def __init__(
        self,
        store: Store,
        queues: Sequence[str],
        results: "stdqueue.SimpleQueue[Outcome | None]",
        launcher: Launcher,
        groups: GroupClaims,
    ) -> None:
        self._store = store
        self._queues = queues
        self._results = results
        self._launcher = launcher
        self._groups = groups
        self._requests: stdqueue.SimpleQueue[tuple[WorkerIdentity, float] | None] = stdqueue.SimpleQueue()
        self._replies: stdqueue.SimpleQueue[tuple[Popped, float]] = stdqueue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self.outstanding = False  # a pop is out and its reply not taken (dispatcher thread only)

    def begin(self, identity: WorkerIdentity, timeout: float) -> None:
        """Start a pop of up to `timeout` seconds, unless one is out already."""
        if self.outstanding:
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="jc-watch", daemon=True)
            self._thread.start()
        self.outstanding = True
        self._requests.put((identity, timeout))

    def take(self) -> RunningJob | None:
        """The ended pop's outcome, acted on (dispatcher thread, claiming): a job handed to us started (returned),
        a wake-up passed on to the group claims, an error raised. None while the pop is still out or it brought
        no job."""
        if not self.outstanding or self._replies.empty():
            return None
        self.outstanding = False
        popped, received = self._replies.get()
        if isinstance(popped, BaseException):
            raise popped
        if popped is None:
            return None
        if popped.lease is None:
            self._groups.unblock()  # a wake-up: also a group slot given back (group_release)
            return None
        job = self._launcher.start(popped.queue, popped.lease, received, announce=True)
        if job is not None and job.began_event is not None:
            # Holding the GIL for the next claim would keep the task thread just woken from beginning.
            job.began_event.wait(BEGIN_WAIT_S)
        return job

    def settle(self) -> None:
        """Wait for the pop out, if any, and leave a job it brought unreceived: release_orphans, which comes
        next, gives it back (a job popped during release_orphans would have been given back and run anyway)."""
        if self.outstanding:
            self._replies.get()  # bounded by the pop's timeout and the socket timeout
            self.outstanding = False

    def stop(self) -> None:
        """Let the thread end after the pop out, if any."""
        if self._thread is not None:
            self._requests.put(None)

    def _run(self) -> None:
        while (request := self._requests.get()) is not None:
            identity, timeout = request
            try:
                popped: Popped = self._store.wait_for_work(identity, self._queues, timeout)
            except BaseException as exc:  # noqa: BLE001 - the dispatcher raises it in take()
                popped = exc
            self._replies.put((popped, time.monotonic()))
            self._results.put(None)  # wakes the dispatcher
