"""The dispatcher's wait when it has nothing to claim: blocked on our inboxes and the queues' wake lists
(Store.wait_for_work), so that an enqueue wakes the worker without polling. While jobs run, the blocking pop is
the watch thread's (worker/watch.py) and the dispatcher waits for their outcomes."""

import queue as stdqueue
import time
from collections.abc import Sequence
from functools import partial

from jobconsole.core.execution import Outcome, RunningJob, run_sync
from jobconsole.core.store import Store, WorkerIdentity
from jobconsole.core.task_threads import TaskThreads
from jobconsole.core.thread_pacing import STARVED_AFTER_S
from jobconsole.core.worker.exchange import Exchange
from jobconsole.core.worker.launcher import Launcher
from jobconsole.core.worker.watch import Watch

LONGEST_BLOCK_S = 1.0  # shorter than exchange.IDLE_REGISTRATION_MS, so that an idle worker stays registered
GROUP_WAIT_S = 0.05  # a full group's: see wait()
WATCH_WAIT_S = 2 * LONGEST_BLOCK_S  # the watch thread's pop ends (and wakes us) first
FULL_WAIT_S = 0.5  # every slot taken and every thread taking jobs: only an outcome frees one
# A burst worker leaves once its queues are empty, and leaving waits for the watch thread's pop (Watch.settle):
# its pops stay short so that the last job's end is not followed by a second of waiting.
BURST_WATCH_S = 0.1


class IdleWait:
    """Waits for work while the worker has nothing to claim, and starts a job handed to it meanwhile."""

    def __init__(
        self,
        store: Store,
        identity: WorkerIdentity,
        queues: Sequence[str],
        running: dict[str, RunningJob],
        results: "stdqueue.SimpleQueue[Outcome | None]",
        threads: TaskThreads,
        launcher: Launcher,
        exchange: Exchange,
        watch: Watch,
        *,
        concurrency: int,
    ) -> None:
        self._store = store
        self._identity = identity
        self._queues = queues
        self._running = running
        self._results = results
        self._threads = threads
        self._launcher = launcher
        self._exchange = exchange
        self._watch = watch
        self._concurrency = concurrency
        self._done: stdqueue.SimpleQueue[BaseException | None] = stdqueue.SimpleQueue()  # see _wait_in_thread

    def wait(self, free: int) -> None:
        """Wait for an outcome, a job handed to us, or a wake-up to claim, with `free` slots free."""
        if free <= 0:
            # While some threads wait at the gate, look again soon, for the pacer to see starvation.
            full = self._threads.active >= self._concurrency
            self._exchange.wait_for_results(FULL_WAIT_S if full else STARVED_AFTER_S)
            return
        if self._running and self._exchange.groups.waits_on(self._running.values()):
            # A group is full with slots of ours: the next one frees up with one of our outcomes, so wait for
            # those (a blocking pop would notice one only at its timeout).
            self._exchange.wait_for_results(GROUP_WAIT_S)
            return
        timeout = LONGEST_BLOCK_S
        exchange = self._exchange
        if exchange.next_due_ms >= 0:
            timeout = min(timeout, max(0.001, (exchange.next_due_ms - exchange.redis_now_ms) / 1000))
        if self._running or self._watch.outstanding:
            # An outcome may come first: the pop goes on on the watch thread, which wakes us when it ends (the
            # dispatch loop then takes what it brought, once it has seen a stop or quiet request). Our own wait
            # outlasts the pop, lest each pop cost two claims, but not a job falling due (a pop out may have begun
            # before the claim that told of it).
            self._watch.begin(self._identity, min(timeout, BURST_WATCH_S) if exchange.burst else timeout)
            if self._threads.backlog() > 0 and self._threads.active < self._concurrency:
                timeout = STARVED_AFTER_S  # see ThreadPacer.starved
            elif timeout >= LONGEST_BLOCK_S:
                timeout = WATCH_WAIT_S
            exchange.wait_for_results(timeout)
            return
        # A task thread blocks instead of this one and runs a handed job itself: waking this thread and then
        # a task thread would put a second wake-up before the task starts.
        self._threads.call(partial(self._wait_in_thread, timeout))
        error = self._done.get()  # bounded by the pop's timeout and the socket timeout
        if error is not None:
            raise error

    def _wait_in_thread(self, timeout: float) -> None:
        """A task thread's part of a fully idle wait: the blocking pop, then the handed-off job, if any."""
        try:
            job = self._pop_handed_off(timeout)
        except BaseException as exc:  # noqa: BLE001 - the dispatcher re-raises it
            self._done.put(exc)
            return
        self._done.put(None)
        if job is not None:
            self._results.put(run_sync(job))

    def _pop_handed_off(self, timeout: float) -> RunningJob | None:
        """Block on our inboxes and the queues' wake lists; returns a sync job handed to us, to run here."""
        # An enqueue leases its job to an idle worker's inbox, or pushes a wake-up token for the dispatcher to claim.
        handed = self._store.wait_for_work(self._identity, self._queues, timeout)
        if handed is None:
            return None
        if handed.lease is None:
            self._exchange.groups.unblock()  # a wake-up: also a group slot given back (group_release)
            return None
        job = self._launcher.start(handed.queue, handed.lease, time.monotonic(), run_here=True)
        return job if job is not None and not job.task.is_async else None
