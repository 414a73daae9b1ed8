"""Lease renewal: the heartbeat thread (timeouts, stalled tasks, renewals due) and a task's own
context.heartbeat()."""

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from jobconsole.core.errors import LeaseLost, TaskTimeout
from jobconsole.core.execution import RunningJob
from jobconsole.core.maintenance import RETRYABLE_ERRORS
from jobconsole.core.results import Beat
from jobconsole.core.store import Call, Store
from jobconsole.core.worker.groups import GroupClaims
from jobconsole.core.worker.registry import REGISTRY_EVERY_S

log = logging.getLogger("jobconsole.core.worker")  # one logger for every part, so log lines name the worker

PASS_EVERY_S = 0.1


class Heartbeats:
    """Renews the leases of the running jobs and records what Redis answers (lost, cancel requested)."""

    def __init__(self, store: Store, running: dict[str, RunningJob], worker_id: str, groups: GroupClaims) -> None:
        self._groups = groups
        self._store = store
        self._running = running
        self._worker_id = worker_id

    def run(self, stop: threading.Event, renew_registration: Callable[[], object]) -> None:
        """The heartbeat thread: a pass every PASS_EVERY_S, the registry entry every REGISTRY_EVERY_S, until `stop`."""
        last_registry = 0.0
        while not stop.wait(PASS_EVERY_S):
            try:
                self.check()
                if time.monotonic() - last_registry >= REGISTRY_EVERY_S:
                    renew_registration()
                    last_registry = time.monotonic()
            except RETRYABLE_ERRORS as exc:
                log.warning("worker=%s heartbeat: redis unavailable (%s)", self._worker_id, exc)
            except Exception:
                log.exception("worker=%s heartbeat pass failed", self._worker_id)

    def check(self) -> None:
        """One pass: interrupt jobs past their timeout, mark stalled ones, renew the leases that are due."""
        now = time.monotonic()
        due: list[RunningJob] = []
        for job in list(self._running.values()):
            if job.timeout_s and not job.timed_out and not job.task.is_async and now - job.started > job.timeout_s:
                job.timed_out = True
                job.interrupt(TaskTimeout)
            limit = job.task.max_heartbeat_interval
            if limit and not job.stalled and now - job.last_task_heartbeat > limit:
                # Its lease lapses, so that the recoverer treats a task that stopped reporting as stalled.
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
            self.send(due, {})

    def send(self, jobs: list[RunningJob], updates: dict[str, tuple[str, str]]) -> None:
        """Renew the leases of `jobs` in one round trip (with progress and checkpoint `updates` by job id)."""
        by_queue: dict[str, list[RunningJob]] = {}
        for job in jobs:
            by_queue.setdefault(job.queue, []).append(job)
        calls: list[Call[list[int]]] = []
        for queue, batch in by_queue.items():
            beats = [(job.id, job.token, *updates.get(job.id, ("", ""))) for job in batch]
            calls.append(self._store.heartbeat_call(queue, beats))
        renewals = self._groups.renew_calls(jobs)  # their group slots' leases, in the same round trip
        sent = time.monotonic()
        replies = self._store.run_many([*calls, *renewals])
        for renewal, renewed in zip(renewals, replies[len(calls) :], strict=True):
            if isinstance(renewed, Exception) or renewed < len(renewal.args) - 1:
                log.warning("worker=%s could not renew every group slot (%s)", self._worker_id, renewed)
        for batch, reply in zip(by_queue.values(), replies[: len(calls)], strict=True):
            if isinstance(reply, Exception):
                raise reply
            for job, code in zip(batch, reply, strict=True):
                job.next_heartbeat = sent + job.lease_s / 3
                if code != Beat.LOST:
                    job.renewed = sent
                if code == Beat.LOST and not job.lost:
                    job.lost = True
                    # Not logged for a finished task: its heartbeat usually just crossed its ack, and an ack
                    # refused for a lease really lost is logged as stale instead.
                    if not job.finished:
                        log.warning(
                            "lease lost job=%s task=%s: another worker may be running it", job.id, job.task.name
                        )
                elif code == Beat.CANCEL_REQUESTED and not job.cancel_requested:
                    job.cancel_requested = True
                    if job.context is not None:
                        job.context.cancel_requested = True

    def from_task(self, job: RunningJob, progress: float | None, checkpoint: Any) -> None:
        """context.heartbeat(): renew now, saving progress/checkpoint; LeaseLost if we no longer own it."""
        job.last_task_heartbeat = time.monotonic()
        if job.stalled:
            job.stalled = False
        encoded = (
            "" if progress is None else repr(float(progress)),
            "" if checkpoint is None else json.dumps(checkpoint, allow_nan=False),
        )
        try:
            self.send([job], {job.id: encoded})
        except RETRYABLE_ERRORS as exc:
            # A Redis blip must not fail a healthy task: only a lease that may have run out is a reason to stop.
            if time.monotonic() - job.renewed > job.lease_s:
                raise LeaseLost(f"job {job.id}: Redis unreachable for longer than the lease ({exc})") from exc
            log.warning("heartbeat of job=%s failed (%s); the lease is still valid, going on", job.id, exc)
            return
        if job.lost:
            raise LeaseLost(f"job {job.id}: lease lost; stop, another worker may own it")
