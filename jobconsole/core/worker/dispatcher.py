"""The worker: claims jobs under leases, runs them (threads for sync tasks, an event loop for async
ones), heartbeats from its own thread, reports outcomes in batches, and shuts down by policy."""

import asyncio
import json
import logging
import os
import queue as stdqueue
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import Future
from functools import partial
from types import FrameType
from typing import Any

import redis

from jobconsole.core.connection import require_decoded, without_retries
from jobconsole.core.context import JobContext
from jobconsole.core.errors import LeaseLost, TaskTimeout, UndecodablePayload, WorkerShutdown
from jobconsole.core.execution import Kind, Outcome, RunningJob, failure, run_async, run_sync
from jobconsole.core.maintenance import RETRYABLE_ERRORS, Maintenance, Retention
from jobconsole.core.payload import decode_checkpoint, decode_params
from jobconsole.core.scripts import Arg
from jobconsole.core.store import Beat, Call, Claimed, Failed, Lease, Store, WorkerIdentity
from jobconsole.core.task_threads import TaskThreads
from jobconsole.core.tasks import OnShutdown, TaskRegistry, default_registry
from jobconsole.core.thread_pacing import STARVED_AFTER_S, ThreadPacer, threads_cpu_clock

log = logging.getLogger(__name__)

REGISTRY_TTL_S = 30  # a worker hash outlives its last heartbeat by this much
REGISTRY_EVERY_S = 2.0
PREFETCH_BELOW_MS = 20.0  # prefetch only while the average task takes less than this
PREFETCH_WORK_MS = 10.0  # then claim about this much work ahead per task thread: fewer round trips per job,
PREFETCH_MAX = 100  # at most this many jobs, so that one worker does not hoard a burst others could run,
PREFETCH_MIN = 20  # and at least this many, so that a few threads never wait on a claim round trip
IDLE_REGISTRATION_MS = 1500  # outlives the longest idle block (1 s); every claim renews or drops it
SWITCH_INTERVAL_S = 0.001  # see Worker.run


def prefetch_count(avg_runtime_ms: float, threads: int) -> int:
    """Extra jobs to claim ahead while tasks are short: the faster they are, the more of them, since each claim
    round trip and its thread hand-offs cost about as much as a no-op task. Long tasks get no prefetch, so a
    claimed job never waits long behind another while other workers sit idle."""
    if avg_runtime_ms >= PREFETCH_BELOW_MS:
        return 0
    ahead = int(PREFETCH_WORK_MS * threads / max(avg_runtime_ms, 0.001))
    return min(max(ahead, PREFETCH_MIN), PREFETCH_MAX)


class Worker:
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
    ) -> None:
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
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.id = name or f"{self.host}:{self.pid}:{uuid.uuid4().hex[:6]}"
        self.identity = WorkerIdentity(self.id, self.host, self.pid)
        self.maintenance = (
            Maintenance(connection, events_maxlen=events_maxlen, retention=self.retention) if maintenance else None
        )
        self.running: dict[str, RunningJob] = {}
        self.claimed = 0
        self.processed = 0
        self.failed = 0
        self._results: stdqueue.SimpleQueue[Outcome] = stdqueue.SimpleQueue()
        self._idle_done: stdqueue.SimpleQueue[BaseException | None] = stdqueue.SimpleQueue()  # see _idle_wait
        self._pending: list[Outcome] = []  # outcomes not yet reported (e.g. Redis was down)
        self._stop_signals = 0
        self._stopping_since: float | None = None
        self._threads_stop = threading.Event()
        self._threads = TaskThreads(concurrency, self._results)
        self._dispatcher_ident: int | None = None  # the thread that calls run()
        self._pacer = ThreadPacer(concurrency, threads_cpu_clock(self._pipeline_idents))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._orphans_possible = False  # a claim may have run without its reply reaching us
        self._avg_runtime_ms = PREFETCH_BELOW_MS * 10  # no prefetch until tasks prove short
        self._next_due_ms: int = -1
        self._redis_now_ms: int = 0
        self.started_at_ms = 0  # Redis time, set at start-up
        self._clock: tuple[int, float] | None = None  # (Redis ms, monotonic s) sampled together

    # --- lifecycle --------------------------------------------------------------------------------

    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT: stop by each task's on_shutdown policy; a second signal exits at once."""
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._stop_signals += 1
        if self._stop_signals >= 2:
            log.warning(
                "worker=%s second signal: exiting now; leases of %d running job(s) will expire",
                self.id,
                len(self.running),
            )
            os._exit(1)
        log.warning("worker=%s %s: stopping (running=%d)", self.id, signal.Signals(signum).name, len(self.running))

    def request_stop(self) -> None:
        self._stop_signals = max(self._stop_signals, 1)

    def run(self) -> int:
        """Work until stopped (or, in burst mode, until there is nothing to do). Returns jobs processed."""
        # CPU-bound tasks hand the GIL on only every switch interval, and the heartbeat thread needs it a few
        # times per renewal; with many busy threads the default 5 ms let renewals slip past short leases.
        sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL_S))
        self._dispatcher_ident = threading.get_ident()
        self._pacer.restart()
        self._startup()
        threads = [threading.Thread(target=self._heartbeat_loop, name="jc-heartbeat", daemon=True)]
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
            self._report()
            self._leave()
            self._threads.stop()
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self._loop.stop)
            self._unregister()
        log.info("worker=%s stopped processed=%d failed=%d", self.id, self.processed, self.failed)
        return self.processed

    def _startup(self) -> None:
        while True:
            try:
                self.store.clear_inboxes(self.id, self.queues)
                self.store.load_scripts()
                self.store.announce(self.queues, self.registry.options_json())
                self.started_at_ms = self._redis_ms()
                self._register()
                break
            except RETRYABLE_ERRORS as exc:
                log.warning("worker=%s cannot reach redis (%s); retrying", self.id, exc)
                time.sleep(1)
        log.info(
            "worker=%s started queues=%s concurrency=%d tasks=%d",
            self.id,
            ",".join(self.queues),
            self.concurrency,
            len(self.registry.all()),
        )

    # --- the dispatcher ---------------------------------------------------------------------------

    def _dispatch_loop(self) -> None:
        backoff = 0.1
        while True:
            try:
                self._collect()
                self._pace()
                if self._stop_signals:
                    self._exchange(0)
                    if self._shutdown_step():
                        return
                    self._wait_for_results(0.1)
                    continue
                if self._orphans_possible:
                    self._release_orphans()
                free = self._gather()
                if self._exchange(free):
                    backoff = 0.1
                    continue
                if self._done_with_max_tasks():
                    return
                if self.burst and not self.running and not self._due_soon():
                    return
                self._idle_wait(self.concurrency - len(self.running))
                backoff = 0.1
            except RETRYABLE_ERRORS as exc:
                log.warning("worker=%s redis unavailable (%s); retrying in %.1fs", self.id, exc, backoff)
                self._wait_for_results(backoff)
                backoff = min(backoff * 2, 5.0)
                self._orphans_possible = True

    def _prefetch(self) -> int:
        return prefetch_count(self._avg_runtime_ms, self._threads.active)

    def _gather(self, window: float = 0.002) -> int:
        """While few slots are free and jobs are still running, let more of them finish (at most
        `window` seconds), so that one round trip reports many outcomes and claims their successors.
        Not while tasks are long: nothing is claimed ahead of them, so a free slot is a thread with nothing to
        run, and waiting for others to free up would idle it for the window on every job."""
        prefetch = self._prefetch()
        if prefetch == 0:
            return self._claimable()
        deadline = time.monotonic() + window
        half = (self.concurrency + prefetch) // 2
        while True:
            free = self._claimable()
            remaining = deadline - time.monotonic()
            if free >= half or len(self.running) <= len(self._pending) or remaining <= 0:
                return free
            self._wait_for_results(remaining)
            self._collect()

    def _release_orphans(self) -> None:
        """After a connection error, and on the way out: stop being offered jobs as an idle worker, and give
        back jobs Redis leased to us that we never received (a claim whose reply was lost, or a job an
        enqueue handed to our inbox while we were stopping)."""
        for queue in self.queues:
            held = [job_id for job_id, job in self.running.items() if job.queue == queue]
            for job_id in self.store.release_orphans(queue, self.identity, held):
                log.warning("released job=%s queue=%s: leased to this worker but never received", job_id, queue)
        self._orphans_possible = False

    def _leave(self) -> None:
        try:
            self._release_orphans()
        except RETRYABLE_ERRORS as exc:  # their leases expire and the recoverer requeues them
            log.warning("worker=%s could not give back unreceived jobs on exit (%s)", self.id, exc)

    def _claimable(self) -> int:
        """Slots free once the collected outcomes are reported, capped by --max-tasks."""
        free = self.concurrency + self._prefetch() - len(self.running) + len(self._pending)
        if self.max_tasks is not None:
            free = min(free, self.max_tasks - self.claimed)
        return max(0, free)

    def _done_with_max_tasks(self) -> bool:
        return self.max_tasks is not None and self.claimed >= self.max_tasks and not self.running

    def _due_soon(self) -> bool:
        return self._next_due_ms >= 0 and self._next_due_ms - self._redis_now_ms <= self.burst_horizon_ms

    def _pace(self) -> None:
        """Let as many task threads take jobs as keep the process busy (core/thread_pacing.py)."""
        now = time.monotonic()
        backlog = self._threads.backlog()
        pacer = self._pacer
        if pacer.starved(now, backlog) or pacer.look(
            now, backlog=backlog, short_tasks=self._avg_runtime_ms < PREFETCH_BELOW_MS
        ):
            self._threads.set_active(pacer.active)
            log.debug("worker=%s task threads taking jobs: %d of %d", self.id, pacer.active, self.concurrency)

    def _pipeline_idents(self) -> list[int | None]:
        """The threads whose CPU says whether the GIL limits the jobs: the dispatcher and the task threads."""
        return [self._dispatcher_ident, *self._threads.idents()]

    def _idle_wait(self, free: int) -> None:
        if free <= 0:
            # Every slot is taken; while some threads wait at the gate, look again soon for starvation.
            self._wait_for_results(0.5 if self._threads.active >= self.concurrency else STARVED_AFTER_S)
            return
        if self.running:
            # Results may arrive meanwhile; they are collected after this short block.
            popped = self._pop_handed_off(0.05, run_here=False)
            if popped is not None and popped.began_event is not None:
                # Step aside until the task has begun: holding the GIL meanwhile (for the next claim)
                # would keep the task thread we just woke waiting for it.
                popped.began_event.wait(0.005)
            return
        timeout = 1.0
        if self._next_due_ms >= 0:
            timeout = min(timeout, max(0.001, (self._next_due_ms - self._redis_now_ms) / 1000))
        # Fully idle: a task thread blocks instead of this one, and runs a job handed to us itself; waking
        # this thread first and then a task thread would put a second wake-up before the task starts.
        self._threads.call(partial(self._idle_wait_in_thread, timeout))
        error = self._idle_done.get()  # bounded by the pop's timeout and the socket timeout
        if error is not None:
            raise error

    def _idle_wait_in_thread(self, timeout: float) -> None:
        """A task thread's part of a fully idle wait: the blocking pop, then the handed-off job, if any."""
        try:
            job = self._pop_handed_off(timeout, run_here=True)
        except BaseException as exc:  # noqa: BLE001 - the dispatcher re-raises it
            self._idle_done.put(exc)
            return
        self._idle_done.put(None)
        if job is not None:
            self._results.put(run_sync(job))

    def _pop_handed_off(self, timeout: float, *, run_here: bool) -> RunningJob | None:
        """Block on our inboxes (an enqueue leased its job straight to us) and the queues' wake lists (an
        enqueue pushed a token: the dispatcher claims next), so pick-up needs no polling. Returns the job
        handed to us: started (run_here=False), or registered for the caller to run (a sync task)."""
        handed = self.store.wait_for_work(self.identity, self.queues, timeout)
        if handed is None or handed.lease is None:
            return None
        job = self._start(handed.queue, handed.lease, time.monotonic(), announce=not run_here, run_here=run_here)
        return job if job is not None and (not run_here or not job.task.is_async) else None

    def _wait_for_results(self, timeout: float) -> None:
        try:
            self._pending.append(self._results.get(timeout=timeout))
        except stdqueue.Empty:
            return
        self._pacer.outcome_seen(time.monotonic())

    def _collect(self) -> None:
        collected = False
        while True:
            try:
                self._pending.append(self._results.get_nowait())
                collected = True
            except stdqueue.Empty:
                break
        if collected:
            self._pacer.outcome_seen(time.monotonic())

    def _claim_call(self, queue: str, count: int) -> Call[Claimed]:
        idle_ms = 0 if self.burst or self._stop_signals else IDLE_REGISTRATION_MS
        return self.store.claim_call(queue, self.identity, count, idle_ms=idle_ms)

    def _exchange(self, want: int) -> int:
        """One round trip: report every collected outcome and claim up to `want` jobs from the first
        queue; later queues are asked in order only while slots remain. Returns jobs started."""
        calls, owners, outcomes = self._outcome_calls()
        if want > 0:
            calls.append(self._claim_call(self.queues[0], want))
        sent = time.monotonic()  # no lease in the reply began before this
        try:
            replies = self.store.run_many(calls)
        except RETRYABLE_ERRORS:
            self._pending = outcomes + self._pending  # every script is safe to repeat (token-checked)
            raise
        self._apply_reports(owners, replies[: len(owners)])
        if want <= 0:
            return 0
        started = 0
        next_due = -1
        for index, queue in enumerate(self.queues):
            if index == 0:
                reply = replies[-1]
                if isinstance(reply, Exception):
                    raise reply
            elif want - started > 0:
                sent = time.monotonic()
                reply = self.store.run(self._claim_call(queue, want - started))
            else:
                break
            self._redis_now_ms = reply.now_ms
            due = reply.next_due_ms
            if due >= 0 and (next_due < 0 or due < next_due):
                next_due = due
            for lease in reply.leases:
                self._start(queue, lease, sent, self._redis_now_ms)
                started += 1
        self._next_due_ms = next_due
        return started

    def _start(
        self,
        queue: str,
        leased: Lease,
        received: float,
        redis_now_ms: int | None = None,
        *,
        announce: bool = False,
        run_here: bool = False,
    ) -> RunningJob | None:
        """Run a job leased to us. `received` is a monotonic time
        and `redis_now_ms` Redis's time no earlier than it (a claim: when it was sent, and the time the claim
        read; default: now, and our estimate of Redis's clock). run_here: a sync task is registered but left
        for the calling thread to run."""
        self.claimed += 1
        job_id, token, task_name, attempt, max_retries, params, lease_ms, timeout_ms, checkpoint, leased_at = leased
        task = self.registry.find(task_name)
        if task is None:
            reason = f"task {task_name!r} is not registered on worker {self.id}"
            self.store.run(self.store.release_call(queue, job_id, token, reason, drop=True))
            log.error("dropped job=%s queue=%s reason=%s", job_id, queue, reason)
            return None
        try:
            decoded_params = decode_params(params)
            decoded_checkpoint = decode_checkpoint(checkpoint) if task.context_param else None
        except UndecodablePayload as exc:
            undecodable: UndecodablePayload | None = exc
            decoded_params, decoded_checkpoint = {}, None
        else:
            undecodable = None
        lease_s = lease_ms / 1000
        # Count the lease from when it began, not from now: a dispatcher starved of CPU may read the reply
        # late, and a job handed to the inbox may have waited there; its heartbeat is due a third of the
        # lease after that, and a job whose lease may be running out is not started (lease_fresh).
        redis_now = self._redis_ms() if redis_now_ms is None else redis_now_ms
        renewed = received - max(0, redis_now - leased_at) / 1000
        job = RunningJob(
            id=job_id, queue=queue, token=token, task=task, attempt=attempt, max_retries=max_retries,
            params=decoded_params, context=None, lease_s=lease_s,
            timeout_s=timeout_ms / 1000 if timeout_ms else None, renewed=renewed,
        )  # fmt: skip
        job.next_heartbeat = renewed + lease_s / 3
        if task.context_param:
            job.context = JobContext(
                job_id=job_id, queue=queue, task=task.name, attempt=job.attempt, max_retries=job.max_retries,
                checkpoint=decoded_checkpoint,
                send_heartbeat=partial(self._task_heartbeat, job),
            )  # fmt: skip
        if announce:
            job.began_event = threading.Event()
        self.running[job_id] = job
        if undecodable is not None:  # this job fails for good; the rest of its batch runs
            # Reported with the next exchange, which logs the job's end; a crash before that loses this lease.
            log.error("undecodable job=%s queue=%s task=%s: %s; failing it", job_id, queue, task_name, undecodable)
            self._results.put(failure(job, undecodable))
            return None
        if task.is_async:
            future = asyncio.run_coroutine_threadsafe(run_async(job), self._event_loop())
            future.add_done_callback(self._results_put)
        elif not run_here:
            self._threads.submit(job)
        return job

    def _results_put(self, future: "Future[Outcome]") -> None:
        self._results.put(future.result())

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="jc-asyncio", daemon=True).start()
            self._loop = loop
        return self._loop

    # --- reporting outcomes -----------------------------------------------------------------------

    def _outcome_calls(self) -> tuple[list[Call[Any]], list[list[Outcome]], list[Outcome]]:
        """Script calls reporting the collected outcomes (completions batched per queue)."""
        outcomes, self._pending = self._pending, []
        calls: list[Call[Any]] = []
        owners: list[list[Outcome]] = []
        completions: dict[str, list[Outcome]] = {}
        for o in outcomes:
            if o.kind is Kind.COMPLETE:
                completions.setdefault(o.job.queue, []).append(o)
            else:
                calls.append(self._outcome_call(o))
                owners.append([o])
        ttl_ms = int(self.retention.completed * 1000)
        for queue, batch in completions.items():
            acks = [(o.job.id, o.job.token, o.result_json, o.runtime_ms) for o in batch]
            calls.append(self.store.complete_call(queue, acks, ttl_ms=ttl_ms))
            owners.append(batch)
        return calls, owners, outcomes

    def _apply_reports(self, owners: list[list[Outcome]], replies: list[Any]) -> None:
        for batch, reply in zip(owners, replies, strict=True):
            if isinstance(reply, RETRYABLE_ERRORS):
                self._pending.extend(batch)
                continue
            if isinstance(reply, Exception):
                log.error("reporting outcome failed jobs=%s error=%s", [o.job.id for o in batch], reply)
                # The lease will expire and the recoverer will requeue it: nothing is lost.
                self._forget(batch)
                continue
            codes = reply if batch[0].kind is Kind.COMPLETE else [reply]
            for o, code in zip(batch, codes, strict=True):
                self._log_outcome(o, code)
                self._avg_runtime_ms += (o.runtime_ms - self._avg_runtime_ms) * 0.05
            self._forget(batch)

    def _report(self) -> None:
        self._collect()
        self._exchange(0)

    def _outcome_call(self, o: Outcome) -> Call[Any]:
        if o.kind is Kind.RELEASE:
            reason = "worker shutting down (on_shutdown=requeue)"
            return self.store.release_call(o.job.queue, o.job.id, o.job.token, reason)
        return self.store.fail_call(
            o.job.queue, o.job.id, o.job.token, outcome=o.status, retry=o.retry, delay_ms=o.delay_ms, error=o.error,
            runtime_ms=o.runtime_ms, ttl_ms=int(self.retention.failed * 1000),
        )  # fmt: skip

    def _log_outcome(self, o: Outcome, code: Any) -> None:
        accepted = code.recorded if isinstance(code, Failed) else bool(code)  # Failed, Ack or release's bool
        if accepted and o.kind is Kind.COMPLETE:
            self.processed += 1
        elif accepted:
            self.failed += 1
        if not accepted:
            log.warning(
                "stale lease job=%s queue=%s outcome=%s: another worker owns it now; result discarded",
                o.job.id,
                o.job.queue,
                o.kind,
            )
        elif o.kind is Kind.FAIL:
            state = code.state if isinstance(code, Failed) else ""
            log.info(
                "job failed job=%s task=%s attempt=%d error=%s state=%s",
                o.job.id,
                o.job.task.name,
                o.job.attempt,
                o.error.get("error_class"),
                state,
            )
        elif o.kind is Kind.RELEASE:
            log.info("job requeued on shutdown job=%s task=%s", o.job.id, o.job.task.name)

    def _forget(self, batch: list[Outcome]) -> None:
        for o in batch:
            self.running.pop(o.job.id, None)

    # --- heartbeats -------------------------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        last_registry = 0.0
        while not self._threads_stop.wait(0.1):
            try:
                self._check_running()
                if time.monotonic() - last_registry >= REGISTRY_EVERY_S:
                    self._register()
                    last_registry = time.monotonic()
            except RETRYABLE_ERRORS as exc:
                log.warning("worker=%s heartbeat: redis unavailable (%s)", self.id, exc)
            except Exception:
                log.exception("worker=%s heartbeat pass failed", self.id)

    def _check_running(self) -> None:
        now = time.monotonic()
        due: list[RunningJob] = []
        for job in list(self.running.values()):
            if job.timeout_s and not job.timed_out and not job.task.is_async and now - job.started > job.timeout_s:
                job.timed_out = True
                job.interrupt(TaskTimeout)
            limit = job.task.max_heartbeat_interval
            if limit and not job.stalled and now - job.last_task_heartbeat > limit:
                # The task stopped reporting: let its lease lapse so the recoverer treats it as stalled.
                job.stalled = True
                log.warning(
                    "stalled job=%s task=%s: no heartbeat() for %.0fs; not renewing its lease",
                    job.id,
                    job.task.name,
                    limit,
                )
            if job.next_heartbeat <= now and not job.lost and not job.stalled:
                due.append(job)
        if due:
            self._send_heartbeats(due, {})

    def _send_heartbeats(self, jobs: list[RunningJob], updates: dict[str, tuple[str, str]]) -> None:
        by_queue: dict[str, list[RunningJob]] = {}
        for job in jobs:
            by_queue.setdefault(job.queue, []).append(job)
        calls: list[Call[list[int]]] = []
        for queue, batch in by_queue.items():
            beats = [(job.id, job.token, *updates.get(job.id, ("", ""))) for job in batch]
            calls.append(self.store.heartbeat_call(queue, beats))
        sent = time.monotonic()
        for batch, reply in zip(by_queue.values(), self.store.run_many(calls), strict=True):
            if isinstance(reply, Exception):
                raise reply
            for job, code in zip(batch, reply, strict=True):
                job.next_heartbeat = sent + job.lease_s / 3
                if code != Beat.LOST:
                    job.renewed = sent
                if code == Beat.LOST and not job.lost:
                    job.lost = True
                    # A task that already finished has usually just been acked (this heartbeat crossed the
                    # ack); if its lease really was lost, the ack is refused and logged as stale instead.
                    if not job.finished:
                        log.warning(
                            "lease lost job=%s task=%s: another worker may be running it", job.id, job.task.name
                        )
                elif code == Beat.CANCEL_REQUESTED and not job.cancel_requested:
                    job.cancel_requested = True
                    if job.context is not None:
                        job.context.cancel_requested = True

    def _task_heartbeat(self, job: RunningJob, progress: float | None, checkpoint: Any) -> None:
        """context.heartbeat(): renew now, saving progress/checkpoint; LeaseLost if we no longer own it."""
        job.last_task_heartbeat = time.monotonic()
        if job.stalled:
            job.stalled = False
        encoded = (
            "" if progress is None else repr(float(progress)),
            "" if checkpoint is None else json.dumps(checkpoint, allow_nan=False),
        )
        try:
            self._send_heartbeats([job], {job.id: encoded})
        except RETRYABLE_ERRORS as exc:
            # A Redis blip must not fail a healthy task; only a lease that may have run out is a reason to stop.
            if time.monotonic() - job.renewed > job.lease_s:
                raise LeaseLost(f"job {job.id}: Redis unreachable for longer than the lease ({exc})") from exc
            log.warning("heartbeat of job=%s failed (%s); the lease is still valid, going on", job.id, exc)
            return
        if job.lost:
            raise LeaseLost(f"job {job.id}: lease lost; stop, another worker may own it")

    # --- registry ---------------------------------------------------------------------------------

    def _register(self) -> None:
        current = [
            {"id": j.id, "queue": j.queue, "task": j.task.name, "attempt": j.attempt,
             "running_s": round(time.monotonic() - j.started, 3)}
            for j in list(self.running.values())
        ]  # fmt: skip
        state = "stopping" if self._stop_signals else "running"
        now_ms = self._redis_ms()
        info: dict[str, Arg] = {
            "id": self.id, "host": self.host, "pid": self.pid, "queues": ",".join(self.queues),
            "concurrency": self.concurrency, "active_threads": self._threads.active, "started_at": self.started_at_ms,
            "heartbeat_at": now_ms, "state": state, "current": json.dumps(current),
            "processed": self.processed, "failed": self.failed,
        }  # fmt: skip
        self.store.register_worker(self.id, ttl_s=REGISTRY_TTL_S, now_ms=now_ms, info=info)

    def _redis_ms(self) -> int:
        """Redis's clock, not this host's (which may be off): sampled with TIME once a minute and carried
        forward by the monotonic clock in between."""
        if self._clock is None or time.monotonic() - self._clock[1] > 60:
            self._clock = (self.store.time_ms(), time.monotonic())
        base_ms, at = self._clock
        return base_ms + int((time.monotonic() - at) * 1000)

    def _unregister(self) -> None:
        try:
            self.store.unregister_worker(self.id)
        except RETRYABLE_ERRORS:
            pass  # the hash expires on its own

    # --- shutdown ---------------------------------------------------------------------------------

    def _shutdown_step(self) -> bool:
        """Apply on_shutdown policies; True when the worker may exit."""
        now = time.monotonic()
        if self._stopping_since is None:
            self._stopping_since = now
            # Every thread, so that prefetched jobs behind slow tasks are given back at once.
            self._pacer.open_all()
            self._threads.set_active(self.concurrency)
            self._register()
            for job in list(self.running.values()):
                with job.lock:
                    if not job.began:  # prefetched, not started: give it back untouched
                        job.interrupted = OnShutdown.REQUEUE
                        continue
                if job.task.on_shutdown is not OnShutdown.FINISH:
                    job.interrupted = job.task.on_shutdown
                    job.interrupt(WorkerShutdown)
        if not self.running:
            return True
        if now - self._stopping_since < self.shutdown_grace:
            return False
        # Interrupted tasks that did not stop in time (blocked in C): report them anyway and leave.
        stuck = [j for j in self.running.values() if j.interrupted is not None]
        if stuck and len(stuck) == len(self.running):
            self._pending.extend(failure(j, WorkerShutdown()) for j in stuck)
            self._report()
            return True
        return False
