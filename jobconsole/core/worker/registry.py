"""This worker's entry in the worker registry: joining at start-up, renewing it, leaving it."""

import json
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from jobconsole.core.execution import RunningJob
from jobconsole.core.maintenance import RETRYABLE_ERRORS
from jobconsole.core.scripts import Arg
from jobconsole.core.store import Store, WorkerIdentity
from jobconsole.core.task_threads import TaskThreads
from jobconsole.core.tasks import TaskRegistry
from jobconsole.core.worker.clock import RedisClock
from jobconsole.core.worker.control import Controls
from jobconsole.core.worker.stop import StopRequests

if TYPE_CHECKING:
    from jobconsole.core.worker.exchange import Exchange

log = logging.getLogger("jobconsole.core.worker")  # one logger for every part, so log lines name the worker

REGISTRY_TTL_S = 30  # a worker hash outlives its last renewal by this much, so a dead worker drops out
REGISTRY_EVERY_S = 2.0


class Registration:
    """The worker's registry hash: who it is, what it runs now and how much it has done."""

    def __init__(
        self,
        store: Store,
        clock: RedisClock,
        identity: WorkerIdentity,
        queues: Sequence[str],
        tasks: TaskRegistry,
        running: dict[str, RunningJob],
        threads: TaskThreads,
        exchange: "Exchange",
        stop: StopRequests,
        controls: Controls,
        *,
        concurrency: int,
    ) -> None:
        self._store = store
        self._clock = clock
        self._identity = identity
        self._queues = queues
        self._tasks = tasks
        self._running = running
        self._threads = threads
        self._exchange = exchange
        self._stop = stop
        self._controls = controls
        self._concurrency = concurrency
        self.started_at_ms = 0  # Redis time, set by start()

    def start(self) -> None:
        """Clear our inboxes, load the scripts, announce our queues and tasks, and register, retrying until done."""
        worker_id = self._identity.id
        while True:
            try:
                self._store.clear_inboxes(worker_id, self._queues)
                self._store.clear_worker_control(worker_id)
                self._store.load_scripts()
                self._store.announce(self._queues, self._tasks.options_json())
                self.started_at_ms = self._clock.now_ms()
                self.renew()
                break
            except RETRYABLE_ERRORS as exc:
                log.warning("worker=%s cannot reach redis (%s); retrying", worker_id, exc)
                time.sleep(1)
        log.info(
            "worker=%s started queues=%s concurrency=%d tasks=%d",
            worker_id,
            ",".join(self._queues),
            self._concurrency,
            len(self._tasks.all()),
        )

    def renew(self) -> None:
        """Write the entry afresh: state, counts, and the jobs running now."""
        current = [
            {"id": j.id, "queue": j.queue, "task": j.task.name, "attempt": j.attempt,
             "running_s": round(time.monotonic() - j.started, 3)}
            for j in list(self._running.values())
        ]  # fmt: skip
        state = "stopping" if self._stop.count else "quiet" if self._controls.quiet_now else "running"
        now_ms = self._clock.now_ms()
        identity, exchange = self._identity, self._exchange
        info: dict[str, Arg] = {
            "id": identity.id, "host": identity.host, "pid": identity.pid, "queues": ",".join(self._queues),
            "concurrency": self._concurrency, "active_threads": self._threads.active,
            "started_at": self.started_at_ms, "heartbeat_at": now_ms, "state": state, "current": json.dumps(current),
            "processed": exchange.processed, "failed": exchange.failed,
        }  # fmt: skip
        control = self._store.register_worker(identity.id, ttl_s=REGISTRY_TTL_S, now_ms=now_ms, info=info)
        if self._controls.apply(control):
            self.renew()  # the registry shows the new state now, not a renewal later

    def remove(self) -> None:
        """Leave the registry (on the way out)."""
        try:
            self._store.unregister_worker(self._identity.id)
        except RETRYABLE_ERRORS:
            pass  # the hash expires on its own
