"""Starting a job leased to this worker: decoding it, counting its lease from when it began, and handing it
to a task thread or the event loop."""

import asyncio
import logging
import queue as stdqueue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from functools import partial
from typing import Any

from jobconsole.core.context import JobContext
from jobconsole.core.errors import UndecodablePayload
from jobconsole.core.execution import Outcome, RunningJob, failure, run_async
from jobconsole.core.hooks import TaskHooks
from jobconsole.core.payload import decode_checkpoint, decode_params
from jobconsole.core.results import Lease
from jobconsole.core.store import Store
from jobconsole.core.task_threads import TaskThreads
from jobconsole.core.tasks import TaskRegistry
from jobconsole.core.worker.clock import RedisClock

log = logging.getLogger("jobconsole.core.worker")  # one logger for every part, so log lines name the worker


class Launcher:
    """Turns leases into running jobs, entered in the worker's running-jobs table."""

    def __init__(
        self,
        store: Store,
        tasks: TaskRegistry,
        running: dict[str, RunningJob],
        results: "stdqueue.SimpleQueue[Outcome | None]",
        threads: TaskThreads,
        clock: RedisClock,
        heartbeat: Callable[[RunningJob, float | None, Any], None],
        *,
        worker_id: str,
        hooks: TaskHooks | None = None,
        process_alive: Callable[[], bool] | None = None,
    ) -> None:
        self._process_alive = process_alive  # worker/liveness.py: checked with the lease before a job begins
        self._store = store
        self._hooks = hooks
        self._tasks = tasks
        self._running = running
        self._results = results
        self._threads = threads
        self._clock = clock
        self._heartbeat = heartbeat
        self._worker_id = worker_id
        self._loop: asyncio.AbstractEventLoop | None = None
        self.claimed = 0  # leases received, run or not

    def start(
        self,
        queue: str,
        leased: Lease,
        received: float,
        redis_now_ms: int | None = None,
        *,
        announce: bool = False,
        run_here: bool = False,
    ) -> RunningJob | None:
        """Start a job leased to us, received at monotonic `received`, no later than Redis time `redis_now_ms`."""
        # run_here: a sync task is entered in the table but left for the calling thread to run.
        self.claimed += 1
        job_id, token, task_name, attempt, max_retries, params, lease_ms, timeout_ms, checkpoint, leased_at = leased
        task = self._tasks.find(task_name)
        if task is None:
            reason = f"task {task_name!r} is not registered on worker {self._worker_id}"
            self._store.run(self._store.release_call(queue, job_id, token, reason, drop=True))
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
        # The lease counts from when Redis granted it, since a starved dispatcher or a wait in the inbox may
        # have delayed its reading: the first heartbeat is due then, and run_sync checks it is still fresh.
        redis_now = self._clock.now_ms() if redis_now_ms is None else redis_now_ms
        renewed = received - max(0, redis_now - leased_at) / 1000
        job = RunningJob(
            id=job_id, queue=queue, token=token, task=task, attempt=attempt, max_retries=max_retries,
            params=decoded_params, context=None, lease_s=lease_s,
            timeout_s=timeout_ms / 1000 if timeout_ms else None, renewed=renewed, hooks=self._hooks,
            process_alive=self._process_alive,
        )  # fmt: skip
        job.next_heartbeat = renewed + lease_s / 3
        if task.context_param:
            job.context = JobContext(
                job_id=job_id, queue=queue, task=task.name, attempt=job.attempt, max_retries=job.max_retries,
                checkpoint=decoded_checkpoint,
                send_heartbeat=partial(self._heartbeat, job),
            )  # fmt: skip
        if announce:
            job.began_event = threading.Event()
        self._running[job_id] = job
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

    def stop(self) -> None:
        """Stop the event loop of async tasks, if one was started."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)

    def _results_put(self, future: "Future[Outcome]") -> None:
        """An async task's outcome onto the results queue."""
        self._results.put(future.result())

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        """The event loop of async tasks, started on its thread with the first of them."""
        if self._loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="jc-asyncio", daemon=True).start()
            self._loop = loop
        return self._loop
