"""The blocking pop on the worker's inboxes and the queues' wake lists while its jobs run, on a thread of its own.

The dispatcher meanwhile waits on the results queue, so it reports a finished job at once (the ack that releases a
workflow's dependents) rather than when its own pop would have returned: Redis ends a blocking pop's timeout only
at its next cron tick (1/hz, 100 ms by default), so even a short pop held an outcome back for about that long. A
pop's end (a job handed to us, a wake-up, its timeout or an error) puts None on the results queue to wake the
dispatcher. One pop is out at a time; it costs no command the dispatcher's own pop did not.

A pop out is ended at once when it has no more use (`wake`: a token pushed to the inbox it blocks on,
Store.wake_waiting): when the last running job has ended, so that the next pop is a task thread's, which runs a
job handed to it itself (`finish`: a job arriving then is one thread wake-up from starting, not three), and before
leaving the idle lists (`settle`: stopping, quiet, a new id), so that neither waits for the pop's timeout.
"""

import logging
import queue as stdqueue
import threading
import time
from collections.abc import Sequence

import redis

from jobconsole.core.execution import Outcome, RunningJob
from jobconsole.core.results import Handed
from jobconsole.core.store import Store, WorkerIdentity
from jobconsole.core.worker.groups import GroupClaims
from jobconsole.core.worker.launcher import Launcher

log = logging.getLogger("jobconsole.core.worker")  # one logger for every part, so log lines name the worker

BEGIN_WAIT_S = 0.005
Popped = Handed | BaseException | None  # None: the pop timed out


def wake_pop(store: Store, identity: WorkerIdentity, queues: Sequence[str]) -> None:
    """End the worker's blocking pop now (Store.wake_waiting). When Redis refuses (away, or full: a plain RPUSH
    is refused past maxmemory) the pop ends as before, with its connection's error or at its timeout."""
    try:
        store.wake_waiting(identity, queues[0])
    except redis.RedisError as exc:
        log.debug("worker=%s could not end its blocking pop early (%s)", identity.id, exc)


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
        self._popping: WorkerIdentity | None = None  # whose inboxes the pop out blocks on (wake)
        self._woken = False  # a wake token was pushed for the pop out

    def begin(self, identity: WorkerIdentity, timeout: float) -> None:
        """Start a pop of up to `timeout` seconds, unless one is out already."""
        if self.outstanding:
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="jc-watch", daemon=True)
            self._thread.start()
        self.outstanding = True
        self._popping, self._woken = identity, False
        self._requests.put((identity, timeout))

    def take(self) -> RunningJob | None:
        """The ended pop's outcome, acted on (dispatcher thread, claiming): a job handed to us started (returned),
        a wake-up passed on to the group claims, an error raised. None while the pop is still out or it brought
        no job."""
        if not self.outstanding or self._replies.empty():
            return None
        return self._act(*self._reply())

    def finish(self) -> bool:
        """No job runs any more (dispatcher thread): end the pop out and act on what it brought, as take() does.
        True when it brought nothing, so that a task thread's pop may take over; False when the dispatch loop has
        work from it (a job started, a wake-up to claim on)."""
        self.wake()
        popped, received = self._reply()
        self._act(popped, received)
        return popped is None

    def wake(self) -> None:
        """End the pop out, if any, at once rather than at its timeout (a token to the inbox it blocks on). Redis
        away: the pop ends with a connection error, or its timeout."""
        if not self.outstanding or self._woken or self._popping is None or not self._replies.empty():
            return  # a token for a pop already ended would end the next one for nothing
        self._woken = True
        wake_pop(self._store, self._popping, self._queues)

    def _reply(self) -> tuple[Popped, float]:
        """The pop's reply (bounded by its timeout and the socket timeout, and woken at once by wake())."""
        reply = self._replies.get()
        self.outstanding = False
        return reply

    def _act(self, popped: Popped, received: float) -> RunningJob | None:
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
        """End the pop out, if any, and leave a job it brought unreceived: release_orphans, which comes next,
        gives it back (a job popped during release_orphans would have been given back and run anyway)."""
        if self.outstanding:
            self.wake()
            self._reply()

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
