"""The Worker: builds its parts, and runs the dispatch loop that drives them and paces the task threads."""

import logging
import os
import queue as stdqueue
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence

import redis

from jobconsole.core.connection import require_decoded, without_retries
from jobconsole.core.errors import LeaseLost
from jobconsole.core.execution import Outcome, RunningJob
from jobconsole.core.hooks import TaskHooks
from jobconsole.core.lapse import DEFAULT_WORKER_EXPIRY_S
from jobconsole.core.maintenance import RETRYABLE_ERRORS, Maintenance, Retention
from jobconsole.core.results import Lease
from jobconsole.core.store import Store, WorkerIdentity
from jobconsole.core.task_threads import TaskThreads
from jobconsole.core.tasks import TaskRegistry, default_registry
from jobconsole.core.thread_pacing import ThreadPacer, threads_cpu_clock
from jobconsole.core.worker.clock import RedisClock
from jobconsole.core.worker.control import QUIET, Controls
from jobconsole.core.worker.exchange import PREFETCH_BELOW_MS, Exchange
from jobconsole.core.worker.groups import GroupClaims
from jobconsole.core.worker.heartbeats import Heartbeats
from jobconsole.core.worker.idle import IdleWait
from jobconsole.core.worker.launcher import Launcher
from jobconsole.core.worker.liveness import Liveness
from jobconsole.core.worker.registry import Registration
from jobconsole.core.worker.shutdown import Shutdown
from jobconsole.core.worker.stop import StopRequests
from jobconsole.core.worker.watch import Watch

log = logging.getLogger("jobconsole.core.worker")  # one logger for every part, so log lines name the worker

SWITCH_INTERVAL_S = 0.001  # see Worker.run


def group_slot_lease_ms(registry: TaskRegistry) -> Callable[[str], int]:
    """A group slot's first lease: the longest lease of the group's tasks in the registry (of every task, for
    a group only jobs name), so that it rarely needs renewing before its job runs (worker/groups.py)."""
    longest = max((t.visibility_timeout for t in registry.all()), default=30.0)

    def lease_ms(group: str) -> int:
        of_group = [t.visibility_timeout for t in registry.all() if t.group == group]
        return int((max(of_group) if of_group else longest) * 1000)

    return lease_ms


class Worker:
    """A worker: claims jobs under leases and runs them (sync tasks on threads, async ones on an event loop)."""

    def __init__(
        self,
        connection: "redis.Redis",
        queues: Sequence[str],
        registry: TaskRegistry | None = None,
        *,
        concurrency: int = 10,
        max_tasks: int | None = None,
        burst: bool = False,
        burst_horizon: float = 0.0,
        maintenance: bool = True,
        events_maxlen: int = 100_000,
        retention: Retention | None = None,
        shutdown_grace: float = 10.0,
        name: str | None = None,
        queue_weights: dict[str, int] | None = None,
        host: str | None = None,
        hooks: TaskHooks | None = None,
        expiry: float = DEFAULT_WORKER_EXPIRY_S,
    ) -> None:
        # hooks: run on a sync task's thread just before and after each task (core/hooks.py).
        # expiry: the process heartbeat's; a worker silent this long is declared gone (core/lapse.py).
        if not queues:
            raise ValueError("a worker needs at least one queue")
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        require_decoded(connection)
        self.redis = without_retries(connection)
        self.store = Store(self.redis, events_maxlen=events_maxlen)
        self.queues = list(dict.fromkeys(queues))  # claim order = the order given
        self.registry = registry if registry is not None else default_registry
        self.concurrency = concurrency
        self.max_tasks = max_tasks
        self.burst = burst
        self.burst_horizon_ms = int(burst_horizon * 1000)  # burst also waits for jobs due this soon
        self.events_maxlen = events_maxlen
        self.retention = retention or Retention()
        self.shutdown_grace = shutdown_grace
        self.host = host or socket.gethostname()  # the registry's host; runworker: JOBCONSOLE_HOST_ID
        self.pid = os.getpid()
        self.id = name or f"{self.host}:{self.pid}:{uuid.uuid4().hex[:6]}"
        self.identity = WorkerIdentity(self.id, self.host, self.pid)
        self.maintenance = (
            Maintenance(connection, events_maxlen=events_maxlen, retention=self.retention, worker_expiry=expiry)
            if maintenance
            else None
        )
        self.running: dict[str, RunningJob] = {}  # every job leased to us and received, until its report
        self._results: stdqueue.SimpleQueue[Outcome | None] = stdqueue.SimpleQueue()  # None: see watch.py
        self._threads_stop = threading.Event()
        self._threads = TaskThreads(concurrency, self._results)
        self._dispatcher_ident: int | None = None  # the thread that calls run()
        self._pacer = ThreadPacer(concurrency, threads_cpu_clock(self._pipeline_idents))
        self._stop = StopRequests(wake=self._wake)
        self.controls = Controls(self._stop, self.id)  # an operator's quiet or stop (core/worker/control.py)
        self.clock = RedisClock(self.store)
        self._base_id, self._incarnation = self.id, 1  # a worker declared gone goes on as <id>~2, ~3, ...
        self.liveness = Liveness(self.store, lambda: self.id, expiry_s=expiry, on_gone=self._stop.wake)
        self.groups = GroupClaims(
            self.store, self.identity, self.running, self._start_leased, lease_ms=group_slot_lease_ms(self.registry)
        )
        self.heartbeats = Heartbeats(self.store, self.running, self.id, self.groups)
        self.launcher = Launcher(
            self.store, self.registry, self.running, self._results, self._threads, self.clock,
            self.heartbeats.from_task, worker_id=self.id, hooks=hooks, process_alive=self.liveness.fresh,
        )  # fmt: skip
        self.watch = Watch(self.store, self.queues, self._results, self.launcher, self.groups)
        self.exchange = Exchange(
            self.store, self.identity, self.queues, self.running, self._results, self.launcher, self._threads,
            self._pacer, self._stop, self.groups, self.watch, concurrency=concurrency, max_tasks=max_tasks,
            burst=burst, retention=self.retention, weights=queue_weights,
        )  # fmt: skip
        self.registration = Registration(
            self.store, self.clock, self.identity, self.queues, self.registry, self.running, self._threads,
            self.exchange, self._stop, self.liveness, self.controls, concurrency=concurrency,
        )  # fmt: skip
        self.idle = IdleWait(
            self.store, self.identity, self.queues, self.running, self._results, self._threads, self.launcher,
            self.exchange, self.watch, concurrency=concurrency,
        )  # fmt: skip
        self.shutdown = Shutdown(
            self._stop, self.running, self._threads, self._pacer, self.exchange, self.registration,
            concurrency=concurrency, grace=shutdown_grace, worker_id=self.id,
        )  # fmt: skip

    def _wake(self) -> None:
        """Wake the dispatcher to act on a stop, quiet or new id, whatever it waits for (a signal handler's too)."""
        self._results.put(None)
        idle = getattr(self, "idle", None)  # built after the stop requests
        if idle is not None:
            idle.interrupt()

    def _start_leased(self, queue: str, lease: Lease, received: float, redis_now_ms: int) -> RunningJob | None:
        return self.launcher.start(queue, lease, received, redis_now_ms)  # built after the group claims

    @property
    def claimed(self) -> int:
        """Leases received so far."""
        return self.launcher.claimed

    @property
    def processed(self) -> int:
        """Jobs completed so far."""
        return self.exchange.processed

    @property
    def failed(self) -> int:
        """Jobs failed so far (retried, dead, or given back on shutdown)."""
        return self.exchange.failed

    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT: stop by each task's on_shutdown policy; a second signal exits at once."""
        self.shutdown.install_signal_handlers()

    def request_stop(self) -> None:
        """Stop as SIGTERM would."""
        self.shutdown.request()

    def run(self) -> int:
        """Work until stopped (or, in burst mode, until there is nothing to do). Returns jobs processed."""
        # CPU-bound tasks hand the GIL on only every switch interval, and at the default 5 ms the heartbeat
        # thread, which needs it a few times per renewal, let renewals slip past short leases.
        sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL_S))
        self._dispatcher_ident = threading.get_ident()
        self._pacer.restart()
        while not self.registration.start():
            self._rename()  # a name declared gone (an earlier process's, within the hour): go on under a new one
        heartbeat_args = (self._threads_stop, self.registration.renew)
        threads = [
            threading.Thread(target=self.liveness.run, args=(self._threads_stop,), name="jc-alive", daemon=True),
            threading.Thread(target=self.heartbeats.run, args=heartbeat_args, name="jc-heartbeat", daemon=True),
        ]
        if self.maintenance is not None:
            threads.append(
                threading.Thread(
                    target=self.maintenance.run, args=(self._threads_stop,), name="jc-maintenance", daemon=True
                )
            )
        for t in threads:
            t.start()
        try:
            self._dispatch_loop()
        finally:
            self._threads_stop.set()
            for t in threads:
                t.join(timeout=5)
            self.exchange.report()
            self.exchange.leave()
            self.watch.stop()
            self._threads.stop()
            self.launcher.stop()
            self.registration.remove()
        log.info("worker=%s stopped processed=%d failed=%d", self.id, self.processed, self.failed)
        return self.processed

    def _dispatch_loop(self) -> None:
        """Report, claim and wait in turn until stopped, out of work (burst) or done with --max-tasks."""
        exchange, idle, shutdown, stop, running = self.exchange, self.idle, self.shutdown, self._stop, self.running
        controls, watch = self.controls, self.watch
        backoff = 0.1
        while True:
            try:
                if self.liveness.gone.is_set():
                    self._rejoin()
                exchange.collect()
                self._pace()
                if stop.count:
                    exchange.report_and_claim(0)
                    # The on_shutdown policies first: leaving the idle lists waits for the watch's pop out to end
                    # (Watch.settle wakes it: a round trip), and an interrupted job must not run on meanwhile.
                    if shutdown.step():
                        return
                    controls.leave_idle(exchange)
                    exchange.wait_for_results(0.1)
                    continue
                if controls.quiet:
                    controls.quiet_step(exchange, self.registration.renew)
                    continue
                controls.resumed()
                if exchange.orphans_possible:
                    exchange.release_orphans()
                watch.take()  # what the watch thread's pop brought: a job handed to us, or a wake-up
                free = exchange.gather()
                if exchange.report_and_claim(free):
                    backoff = 0.1
                    continue
                if self._done_with_max_tasks():
                    return
                if self.burst and not running and not exchange.due_within(self.burst_horizon_ms):
                    return
                idle.wait(self.concurrency - len(running))
                backoff = 0.1
            except RETRYABLE_ERRORS as exc:
                log.warning("worker=%s redis unavailable (%s); retrying in %.1fs", self.id, exc, backoff)
                exchange.wait_for_results(backoff)
                backoff = min(backoff * 2, 5.0)
                exchange.orphans_possible = True

    def _rejoin(self) -> None:
        """We were declared gone (paused, starved or cut off past our expiry) and our jobs were taken back:
        stop the runs whose leases are gone, give back what was handed to the old id, go on under a new id."""
        old_id = self.id
        running = [job for job in list(self.running.values()) if not job.finished]
        if running:
            self.heartbeats.send(running, {})  # marks the jobs taken back as lost (their tokens were cleared)
        interrupted = 0
        for job in running:
            # Their acks would be refused anyway: stopping them spares a second run of their side effects. A job
            # claimed after the takeback still holds a valid lease and runs on.
            if job.lost and job.interrupt(LeaseLost):
                interrupted += 1
        self.exchange.release_orphans()  # the old id's idle registration and inbox, and leases never received
        if self.controls.quiet:  # the operator quieted this worker, not its old id: the new id stays quiet
            self.registration.carried_control = QUIET  # before the rename, so no renewal of the new id reads ''
        self._rename()
        self.liveness.gone.clear()
        self.registration.renew()
        self.liveness.beat()
        log.warning(
            "worker=%s declared gone; %d run(s) stopped, their jobs run elsewhere; continuing as worker=%s",
            old_id, interrupted, self.id,
        )  # fmt: skip

    def _rename(self) -> None:
        """Take the next id (`<first id>~<n>`), in every part that names us."""
        self._incarnation += 1
        self.id = f"{self._base_id}~{self._incarnation}"
        self.identity = WorkerIdentity(self.id, self.host, self.pid)
        # The parts hold who we are, read at each use; this is the one place it changes (on the dispatcher's
        # thread, between two claims).
        self.exchange._identity = self.groups._identity = self.identity
        self.idle._identity = self.registration._identity = self.identity
        self.heartbeats._worker_id = self.launcher._worker_id = self.shutdown._worker_id = self.id
        self.controls._worker_id = self.id

    def _done_with_max_tasks(self) -> bool:
        """--max-tasks jobs claimed, and all of them reported."""
        return self.max_tasks is not None and self.launcher.claimed >= self.max_tasks and not self.running

    def _pace(self) -> None:
        """Let as many task threads take jobs as keep the process busy (core/thread_pacing.py)."""
        now = time.monotonic()
        backlog = self._threads.backlog()
        pacer = self._pacer
        if pacer.starved(now, backlog) or pacer.look(
            now, backlog=backlog, short_tasks=self.exchange.avg_runtime_ms < PREFETCH_BELOW_MS
        ):
            self._threads.set_active(pacer.active)
            log.debug("worker=%s task threads taking jobs: %d of %d", self.id, pacer.active, self.concurrency)

    def _pipeline_idents(self) -> list[int | None]:
        """The threads whose CPU says whether the GIL limits the jobs: the dispatcher and the task threads."""
        return [self._dispatcher_ident, *self._threads.idents()]
