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
from jobconsole.core.worker.watch import Watch, wake_pop

LONGEST_BLOCK_S = 1.0  # shorter than exchange.IDLE_REGISTRATION_MS, so that an idle worker stays registered
GROUP_WAIT_S = 0.05  # a full group's: see wait()
WATCH_WAIT_S = 2 * LONGEST_BLOCK_S  # the watch thread's pop ends (and wakes us) first
FULL_WAIT_S = 0.5  # every slot taken and every thread taking jobs: only an outcome frees one
_WOKEN = object()  # IdleWait.interrupt()'s


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
        # A task thread's pop ended (None, or its error), or interrupt() (_WOKEN): see wait().
        self._done: stdqueue.SimpleQueue[BaseException | object | None] = stdqueue.SimpleQueue()
        self._idle_pop = False  # a task thread's pop is out and this thread waits for it (interrupt)

    def interrupt(self) -> None:
        """A stop, quiet or new id to act on (any thread, a signal handler too: SimpleQueue.put is reentrant): a
        fully idle wait ends its task thread's pop at once rather than at its timeout."""
        if self._idle_pop:
            self._done.put(_WOKEN)  # one left over costs the next idle wait a pop ended early

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
        if not self._running and self._watch.outstanding and not self._watch.finish():
            return  # the watch's pop brought work (a job started, a wake-up to claim on): back to the loop
        if self._running:
            # An outcome may come first: the pop goes on on the watch thread, which wakes us when it ends (the
            # dispatch loop then takes what it brought, once it has seen a stop or quiet request). Our own wait
            # outlasts the pop, lest each pop cost two claims, but not a job falling due (a pop out may have begun
            # before the claim that told of it). Once the last job has ended, finish() above ends the pop (a
            # token to our inbox) and a task thread pops instead: a job handed to a watch pop would wake this
            # thread, then a task thread, before it started.
            self._watch.begin(self._identity, timeout)
            if self._threads.backlog() > 0 and self._threads.active < self._concurrency:
                timeout = STARVED_AFTER_S  # see ThreadPacer.starved
            elif timeout >= LONGEST_BLOCK_S:
                timeout = WATCH_WAIT_S
            exchange.wait_for_results(timeout)
            return
        # A task thread blocks instead of this one and runs a handed job itself: waking this thread and then
        # a task thread would put a second wake-up before the task starts.
        self._idle_pop = True
        self._threads.call(partial(self._wait_in_thread, timeout))
        woken = False
        try:
            while (done := self._done.get()) is _WOKEN:  # bounded by the pop's timeout and the socket timeout
                if not woken:  # the pop ends with the token (or a job it brought first, started as usual)
                    woken = True
                    wake_pop(self._store, self._identity, self._queues)
        finally:
            self._idle_pop = False
        if isinstance(done, BaseException):
            raise done

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
