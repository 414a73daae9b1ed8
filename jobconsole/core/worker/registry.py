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
    from jobconsole.core.worker.liveness import Liveness

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
        liveness: "Liveness",
        controls: Controls,
        *,
        concurrency: int,
    ) -> None:
        self._liveness = liveness
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
        self.carried_control = ""  # an operator's quiet of the id we were declared gone under, for the next id
        self._concurrency = concurrency
        self.started_at_ms = 0  # Redis time, set by start()

    def start(self) -> bool:
        """Clear our inboxes, load the scripts, announce our queues and tasks, register and beat once, retrying
        until done. False when our id was declared gone (an earlier process's name): take another one."""
        worker_id = self._identity.id
        while True:
            try:
                self._store.clear_inboxes(worker_id, self._queues)
                self._store.clear_worker_control(worker_id)
                self._store.load_scripts()
                self._store.announce(self._queues, self._tasks.options_json())
                self.started_at_ms = self._clock.now_ms()
                if not (self.renew() and self._liveness.beat()):
                    self._liveness.gone.clear()
                    log.warning("worker=%s: this id was declared gone within the hour; taking another", worker_id)
                    return False
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
        return True

    def renew(self) -> bool:
        """Write the entry afresh: state, counts, and the jobs running now. False when our id was declared gone
        (the process heartbeat finds out too, and the dispatcher takes a new id)."""
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
        carried = self.carried_control
        if carried:  # written with the new id's first entry, so that no renewal reads it resumed
            info["control"] = carried
        control = self._store.register_worker(identity.id, ttl_s=REGISTRY_TTL_S, now_ms=now_ms, info=info)
        if control is None:
            return False  # declared gone (the old id, when the dispatcher has not renamed us yet): nothing written
        if carried and self.carried_control == carried:
            self.carried_control = ""
        if self._controls.apply(control):
            return self.renew()  # the registry shows the new state now, not a renewal later
        return True

    def remove(self) -> None:
        """Leave the registry (on the way out)."""
        try:
            self._store.unregister_worker(self._identity.id)
        except RETRYABLE_ERRORS:
            pass  # the hash expires on its own
