"""The process heartbeat: proof that this worker process is alive, independent of its jobs and their leases.

A thread that does nothing else calls `worker_beat.lua` every third of the expiry (one Redis call, however many
jobs run). When the beats stop (kill -9, OOM, the host gone, or a pause longer than the expiry), a recoverer
declares the worker gone and takes its jobs back (core/lapse.py). A beat refused means that happened while this
process was paused or cut off: `gone` is set, and the dispatcher goes on under a new id (worker/dispatcher.py).
"""

import logging
import threading
import time
from collections.abc import Callable

from jobconsole.core.maintenance import RETRYABLE_ERRORS
from jobconsole.core.store import Store

log = logging.getLogger("jobconsole.core.worker")  # one logger for every part, so log lines name the worker


class Liveness:
    def __init__(
        self, store: Store, worker_id: Callable[[], str], *, expiry_s: float, on_gone: Callable[[], None] = lambda: None
    ) -> None:
        if expiry_s < 0.3:
            raise ValueError("a worker's heartbeat expiry must be at least 0.3 s")
        self._store = store
        self._worker_id = worker_id  # the current id: it changes when the worker was declared gone
        self.expiry_ms = int(expiry_s * 1000)
        self._fresh_s = self.expiry_ms / 1000 * 2 / 3  # fresh() runs before every job
        self.every_s = expiry_s / 3
        self.gone = threading.Event()  # our id was declared gone: set here, cleared by the dispatcher's rename
        self.last_ok = time.monotonic()  # when the last beat was accepted
        self._on_gone = on_gone  # wakes the dispatcher, which acts on `gone`

    def fresh(self) -> bool:
        """Our last accepted beat is recent enough (two thirds of the expiry: beats come every third) that no
        recoverer can have declared us gone: a job leased to us may begin."""
        return not self.gone.is_set() and time.monotonic() - self.last_ok < self._fresh_s

    def beat(self) -> bool:
        """One heartbeat; False (and `gone` set) when the id was declared gone."""
        worker_id = self._worker_id()
        if self._store.worker_beat(worker_id, expiry_ms=self.expiry_ms):
            self.last_ok = time.monotonic()
            return True
        if not self.gone.is_set():
            log.error(
                "worker=%s was declared gone (no heartbeat for %.1fs: paused, starved or cut off from Redis); its "
                "jobs were taken back and run elsewhere",
                worker_id,
                time.monotonic() - self.last_ok,
            )
            self.gone.set()
            self._on_gone()
        return False

    def run(self, stop: threading.Event) -> None:
        """The heartbeat thread: a beat every third of the expiry until `stop` (none while declared gone)."""
        next_at = time.monotonic()
        while True:
            next_at += self.every_s
            now = time.monotonic()
            if next_at < now:  # this thread itself was held up: beat at once, then keep the pace from here
                next_at = now
            if stop.wait(next_at - now):
                return
            if self.gone.is_set():
                continue  # until the dispatcher has taken a new id
            try:
                self.beat()
            except RETRYABLE_ERRORS as exc:
                log.warning("worker=%s process heartbeat: redis unavailable (%s)", self._worker_id(), exc)
            except Exception:
                log.exception("worker=%s process heartbeat failed", self._worker_id())
