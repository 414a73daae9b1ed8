"""The worker's round trips for jobs: the outcomes collected since the last one reported and the next jobs
claimed in one pipeline, after a short gather window that lets more outcomes join it."""

import logging
import queue as stdqueue
import random
import time
from collections.abc import Mapping, Sequence
from typing import Any

from jobconsole.core.execution import Kind, Outcome, RunningJob
from jobconsole.core.maintenance import RETRYABLE_ERRORS, Retention
from jobconsole.core.results import Claimed, Failed
from jobconsole.core.states import JobState
from jobconsole.core.store import Call, Store, WorkerIdentity
from jobconsole.core.task_threads import TaskThreads
from jobconsole.core.thread_pacing import ThreadPacer
from jobconsole.core.worker.groups import GroupClaims
from jobconsole.core.worker.launcher import Launcher
from jobconsole.core.worker.stop import StopRequests
from jobconsole.core.worker.watch import Watch

log = logging.getLogger("jobconsole.core.worker")  # one logger for every part, so log lines name the worker

PREFETCH_BELOW_MS = 20.0  # prefetch only while the average task takes less than this
PREFETCH_WORK_MS = 10.0  # then claim about this much work ahead per task thread: fewer round trips per job,
PREFETCH_MAX = 100  # at most this many jobs, so that one worker does not hoard a burst others could run,
PREFETCH_MIN = 20  # and at least this many, so that a few threads never wait on a claim round trip
IDLE_REGISTRATION_MS = 1500  # outlives idle.LONGEST_BLOCK_S, since only a claim renews (or drops) it
GATHER_WINDOW_S = 0.002


def prefetch_count(avg_runtime_ms: float, threads: int) -> int:
    """Extra jobs to claim ahead of the free slots, for tasks averaging `avg_runtime_ms` on `threads` threads."""
    # More the shorter the tasks, as a claim round trip and its hand-offs cost about as much as a no-op task,
    # and none for long ones, so that a claimed job never waits behind another while other workers idle.
    if avg_runtime_ms >= PREFETCH_BELOW_MS:
        return 0
    ahead = int(PREFETCH_WORK_MS * threads / max(avg_runtime_ms, 0.001))
    return min(max(ahead, PREFETCH_MIN), PREFETCH_MAX)


class ClaimOrder:
    """The order a worker asks its queues in, at each claim: as given (strict: a later queue gets only the
    slots the earlier ones leave), or with weights, a fresh weighted draw each time (Sidekiq's weighted
    queues): a queue of weight 3 comes first three times as often as one of weight 1, and none starves."""

    def __init__(self, queues: Sequence[str], weights: Mapping[str, int] | None, rng: random.Random | None = None):
        self._queues = list(queues)
        self._weights = [weights.get(q, 1) for q in queues] if weights else None
        if self._weights and min(self._weights) < 1:
            raise ValueError("queue weights must be at least 1")
        self._rng = rng or random.Random()

    def next(self) -> list[str]:
        if self._weights is None or len(self._queues) == 1:
            return self._queues
        # Weighted sampling without replacement: each queue's key u^(1/w), highest first (Efraimidis-Spirakis).
        keys = [self._rng.random() ** (1.0 / w) for w in self._weights]
        return [q for _, q in sorted(zip(keys, self._queues, strict=True), reverse=True)]


class Exchange:
    """Reports the outcomes of finished jobs and claims new ones, as many as it can per round trip."""

    def __init__(
        self,
        store: Store,
        identity: WorkerIdentity,
        queues: Sequence[str],
        running: dict[str, RunningJob],
        results: "stdqueue.SimpleQueue[Outcome | None]",
        launcher: Launcher,
        threads: TaskThreads,
        pacer: ThreadPacer,
        stop: StopRequests,
        groups: GroupClaims,
        watch: Watch,
        *,
        concurrency: int,
        max_tasks: int | None,
        burst: bool,
        retention: Retention,
        weights: Mapping[str, int] | None = None,
    ) -> None:
        self._store = store
        self._identity = identity
        self._queues = queues
        self._order = ClaimOrder(queues, weights)
        self._running = running
        self._results = results
        self._launcher = launcher
        self._start = launcher.start
        self._threads = threads
        self._pacer = pacer
        self._stop = stop
        self.groups = groups
        self._watch = watch
        self._concurrency = concurrency
        self._max_tasks = max_tasks
        self.burst = burst  # out of work, the worker leaves (--burst)
        self._retention = retention
        self.pending: list[Outcome] = []  # collected, not yet reported (or Redis was down)
        self.processed = 0
        self.failed = 0
        self.avg_runtime_ms = PREFETCH_BELOW_MS * 10  # no prefetch until tasks prove short
        self.next_due_ms = -1  # the earliest scheduled job of the last claim (Redis ms), -1 = none
        self.redis_now_ms = 0  # Redis's clock at the last claim
        self.orphans_possible = False  # a claim may have run without its reply reaching us

    # --- outcomes in ------------------------------------------------------------------------------

    def collect(self) -> None:
        """Take every outcome the task threads have put on the results queue."""
        collected = False
        while True:
            try:
                outcome = self._results.get_nowait()
            except stdqueue.Empty:
                break
            if outcome is not None:  # None: the watch's wake-up (worker/watch.py)
                self.pending.append(outcome)
                collected = True
        if collected:
            self._pacer.outcome_seen(time.monotonic())

    def wait_for_results(self, timeout: float) -> None:
        """Wait up to `timeout` seconds for one outcome, or for the watch's pop to end."""
        try:
            outcome = self._results.get(timeout=timeout)
        except stdqueue.Empty:
            return
        if outcome is not None:
            self.pending.append(outcome)
            self._pacer.outcome_seen(time.monotonic())

    # --- how many to claim ------------------------------------------------------------------------

    def prefetch(self) -> int:
        """Jobs to claim ahead of the free slots now (see prefetch_count)."""
        return prefetch_count(self.avg_runtime_ms, self._threads.active)

    def claimable(self) -> int:
        """Slots free once the collected outcomes are reported, capped by --max-tasks."""
        free = self._concurrency + self.prefetch() - len(self._running) + len(self.pending)
        if self._max_tasks is not None:
            free = min(free, self._max_tasks - self._launcher.claimed)
        return max(0, free)

    def gather(self, window: float = GATHER_WINDOW_S) -> int:
        """Jobs to claim, once more running jobs have finished (for at most `window` seconds) if few slots are free."""
        # Waiting lets one round trip report many outcomes and claim their successors.
        prefetch = self.prefetch()
        if prefetch == 0:
            # Long tasks have nothing claimed ahead: a free slot is an idle thread, which waiting would keep idle.
            return self.claimable()
        deadline = time.monotonic() + window
        half = (self._concurrency + prefetch) // 2
        while True:
            free = self.claimable()
            remaining = deadline - time.monotonic()
            if free >= half or len(self._running) <= len(self.pending) or remaining <= 0:
                return free
            self.wait_for_results(remaining)
            self.collect()

    def due_within(self, horizon_ms: int) -> bool:
        """A scheduled job falls due within `horizon_ms` of the last claim."""
        return self.next_due_ms >= 0 and self.next_due_ms - self.redis_now_ms <= horizon_ms

    # --- the round trip ---------------------------------------------------------------------------

    def report_and_claim(self, want: int) -> int:
        """Report the collected outcomes and claim up to `want` jobs in one round trip; returns jobs started."""
        # The first queue is asked in the same round trip, with the acks of its finished jobs in the claim's own
        # script call; later queues, in order, only while slots remain.
        queues = self._order.next()
        calls, owners, outcomes, folded = self._outcome_calls(queues[0] if want > 0 else None)
        releases = self.groups.release_calls([o.job for o in outcomes])  # the ended jobs' group slots
        calls += releases
        if want > 0:
            calls.append(self._claim_call(queues[0], want, folded))
        sent = time.monotonic()  # no lease in the reply began before this
        try:
            replies = self._store.run_many(calls)
        except RETRYABLE_ERRORS:
            self.pending = outcomes + self.pending  # every script is safe to repeat (token-checked)
            raise
        self._apply_reports(owners, replies[: len(owners)])
        self.groups.released(replies[len(owners) : len(owners) + len(releases)])
        if folded:
            claimed = replies[-1]
            self._apply_reports([folded], [claimed if isinstance(claimed, Exception) else claimed.acks])
        if want <= 0:
            return 0
        started = 0
        next_due = -1
        held: list[tuple[str, list[str]]] = []  # queues with jobs held for a group slot
        for index, queue in enumerate(queues):
            if index == 0:
                reply = replies[-1]
                if isinstance(reply, Exception):
                    raise reply
            elif want - started > 0:
                sent = time.monotonic()
                reply = self._store.run(self._claim_call(queue, want - started))
            else:
                break
            self.redis_now_ms = reply.now_ms
            due = reply.next_due_ms
            if due >= 0 and (next_due < 0 or due < next_due):
                next_due = due
            for lease in reply.leases:
                self._start(queue, lease, sent, self.redis_now_ms)
                started += 1
            if reply.groups:
                held.append((queue, reply.groups))
        for queue, groups in held:  # in queue order, with the slots the plain jobs left
            if want - started <= 0:
                break
            started += self.groups.claim(queue, groups, want - started)
        retry_at = self.groups.retry_at_ms  # a rate-limited group's next start counts like a due job
        if retry_at >= 0 and (next_due < 0 or retry_at < next_due):
            next_due = retry_at
        self.next_due_ms = next_due
        return started

    def report(self) -> None:
        """Report what has been collected, claiming nothing."""
        self.collect()
        self.report_and_claim(0)

    def release_orphans(self) -> None:
        """Leave the idle workers, and give back the jobs leased to us that we never received."""
        # A claim whose reply was lost, or a job handed to our inbox while we were stopping, has no one to run it.
        self._watch.settle()  # a job its pop brings now is given back here, not started after
        for queue in self._queues:
            held = [job_id for job_id, job in self._running.items() if job.queue == queue]
            for job_id in self._store.release_orphans(queue, self._identity, held):
                log.warning("released job=%s queue=%s: leased to this worker but never received", job_id, queue)
        self.orphans_possible = False

    def leave(self) -> None:
        """release_orphans() on the way out, where Redis being away is not an error."""
        try:
            self.release_orphans()
        except RETRYABLE_ERRORS as exc:  # their leases expire and the recoverer requeues them
            log.warning("worker=%s could not give back unreceived jobs on exit (%s)", self._identity.id, exc)

    def _claim_call(self, queue: str, count: int, completed: Sequence[Outcome] = ()) -> Call[Claimed]:
        """A claim of up to `count` jobs from `queue`, registering us as idle unless in burst mode or stopping,
        acknowledging the `completed` outcomes of that queue first."""
        idle_ms = 0 if self.burst or self._stop.count else IDLE_REGISTRATION_MS
        return self._store.claim_call(
            queue, self._identity, count, idle_ms=idle_ms, acks=_acks(completed), ttl_ms=self._completed_ttl_ms()
        )

    def _completed_ttl_ms(self) -> int:
        """How long a completed job's hash is kept (retention), as the scripts take it."""
        return int(self._retention[JobState.COMPLETED] * 1000)

    # --- reporting outcomes -----------------------------------------------------------------------

    def _outcome_calls(
        self, claim_queue: str | None
    ) -> tuple[list[Call[Any]], list[list[Outcome]], list[Outcome], list[Outcome]]:
        """Script calls reporting the collected outcomes (completions batched per queue), and the completions of
        `claim_queue`, which its claim acknowledges instead."""
        outcomes, self.pending = self.pending, []
        calls: list[Call[Any]] = []
        owners: list[list[Outcome]] = []
        completions: dict[str, list[Outcome]] = {}
        for o in outcomes:
            if o.kind is Kind.COMPLETE:
                completions.setdefault(o.job.queue, []).append(o)
            else:
                calls.append(self._outcome_call(o))
                owners.append([o])
        folded = completions.pop(claim_queue, []) if claim_queue is not None else []
        ttl_ms = self._completed_ttl_ms()
        for queue, batch in completions.items():
            calls.append(self._store.complete_call(queue, _acks(batch), ttl_ms=ttl_ms))
            owners.append(batch)
        return calls, owners, outcomes, folded

    def _outcome_call(self, o: Outcome) -> Call[Any]:
        """The script call reporting one failure or release."""
        if o.kind is Kind.RELEASE:
            reason = "worker shutting down (on_shutdown=requeue)"
            return self._store.release_call(o.job.queue, o.job.id, o.job.token, reason)
        if o.kind is Kind.REPLACE and o.replace is not None:
            ttl_ms = int(self._retention[JobState.CANCELLED] * 1000)  # for a job whose cancel request wins
            return self._store.replace_call(o.job.queue, o.job.id, o.job.token, o.replace, o.result_json, ttl_ms=ttl_ms)
        return self._store.fail_call(
            o.job.queue, o.job.id, o.job.token, outcome=o.status, retry=o.retry, delay_ms=o.delay_ms, error=o.error,
            runtime_ms=o.runtime_ms, ttl_ms=int(self._retention[JobState.FAILED] * 1000),
        )  # fmt: skip

    def _apply_reports(self, owners: list[list[Outcome]], replies: list[Any]) -> None:
        """Log and forget the reported outcomes; keep those Redis did not get for the next round trip."""
        for batch, reply in zip(owners, replies, strict=True):
            if isinstance(reply, RETRYABLE_ERRORS):
                self.pending.extend(batch)
                continue
            if isinstance(reply, Exception):
                log.error("reporting outcome failed jobs=%s error=%s", [o.job.id for o in batch], reply)
                self._forget(batch)  # the lease expires and the recoverer requeues the job: nothing is lost
                continue
            codes = reply if batch[0].kind is Kind.COMPLETE else [reply]
            # Every job passes here: locals, and an accepted completion (the common case) counted inline.
            avg, accepted, running = self.avg_runtime_ms, 0, self._running
            for o, code in zip(batch, codes, strict=True):
                if o.kind is Kind.COMPLETE and code and not isinstance(code, Failed):
                    accepted += 1  # what _log_outcome would do: count it, log nothing
                else:
                    self._log_outcome(o, code)
                avg += (o.runtime_ms - avg) * 0.05
                running.pop(o.job.id, None)  # _forget
            self.avg_runtime_ms = avg
            self.processed += accepted

    def _log_outcome(self, o: Outcome, code: Any) -> None:
        """Count one reported outcome and log it by what Redis answered."""
        accepted = code.recorded if isinstance(code, Failed) else bool(code)  # Failed, Ack or release's bool
        if accepted and o.kind in (Kind.COMPLETE, Kind.REPLACE):
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
            # One line a failure, with what became of the job: a retry is INFO, an end (dead, failed) ERROR.
            state = code.state if isinstance(code, Failed) else ""
            retrying = state in ("retrying", "queued", "scheduled")
            message = " ".join(str(o.error.get("message", "")).split())[:300]
            log.log(
                logging.INFO if retrying else logging.ERROR,
                "job failed job=%s task=%s attempt=%d state=%s (%s) error=%s: %s",
                o.job.id,
                o.job.task.name,
                o.job.attempt,
                state,
                "will retry" if retrying else "dead-lettered" if state == "dead" else "not retried",
                o.error.get("error_class"),
                message,
            )
        elif o.kind is Kind.RELEASE:
            log.info("job requeued on shutdown job=%s task=%s", o.job.id, o.job.task.name)

    def _forget(self, batch: list[Outcome]) -> None:
        """Take reported jobs out of the running-jobs table."""
        for o in batch:
            self._running.pop(o.job.id, None)


def _acks(completed: Sequence[Outcome]) -> list[tuple[str, str, str, int]]:
    """Completed outcomes as the (job id, token, result JSON, runtime ms) acks complete and claim take."""
    return [(o.job.id, o.job.token, o.result_json, o.runtime_ms) for o in completed]
