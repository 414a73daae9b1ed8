"""Workers that stopped heartbeating: declared gone, and their running jobs taken back at once.

A worker process beats every third of its expiry from a thread that does nothing else (worker/liveness.py),
one script call each: its deadline in `jc:{workers}:alive`. Every recoverer (every `runworker` with maintenance,
every `runrecoverer`; no leader lock: one cheap script call when nothing lapsed) scans those deadlines every
half second. A lapsed worker is declared gone in one atomic step in the registry's slot (lapse.lua): from then on
its own heartbeat and registry renewal are refused, so the decision cannot be undone by a worker that was only
paused. Then its jobs are taken back queue by queue (takeback.lua, in each queue's slot, all in one round trip):
only jobs whose lease holder is that worker, their tokens cleared, as when a lease runs out. So a killed worker's
jobs run again within its expiry plus a scan, whatever their lease; a worker paused past its expiry comes back to
refused acks and a refused heartbeat, and goes on under a new id (worker/dispatcher.py).
"""

import logging

from jobconsole.core.queries import Queries
from jobconsole.core.results import Lapsed
from jobconsole.core.store import Store

log = logging.getLogger("jobconsole.core.maintenance")

# A worker beats every third of its expiry: two beats may be missed (a GC pause, a slow Redis, a starved
# process) before it is declared gone. 3 s keeps a dead worker's jobs back within 5 s at p99 (the expiry, plus
# at most one scan, plus a claim) and costs one Redis call a second per worker process.
DEFAULT_WORKER_EXPIRY_S = 3.0
WATCH_EVERY_S = 0.5  # how often every recoverer scans the deadlines
SILENCE_MS = 2_000  # no scan for this long: Redis was away (or no recoverer ran); deadlines are spared
STALE_TAKING_MS = 5_000  # a takeback not finished by then (its recoverer died) is handed to another recoverer
GONE_KEEP_S = 3_600.0  # how long a gone worker's record (host, pid, queues, totals, when and why) is kept
GONE_KEEP = 500  # and at most this many


class LapseWatch:
    """One recoverer's part: scan the deadlines, take back the jobs of the workers that lapsed."""

    def __init__(
        self,
        store: Store,
        queries: Queries,
        *,
        ttl_ms: int,
        expiry_s: float = DEFAULT_WORKER_EXPIRY_S,
        keep_s: float = GONE_KEEP_S,
        keep: int = GONE_KEEP,
    ) -> None:
        self.store = store
        self.queries = queries
        self.ttl_ms = ttl_ms  # how long a dead-lettered (failed) job's hash is kept, as recover.lua
        self.expiry_ms = int(expiry_s * 1000)
        self.keep_ms = int(keep_s * 1000)
        self.keep = keep
        self.taken_back = 0  # jobs, since this process started

    def step(self, limit: int = 100) -> int:
        """One scan; returns the number of jobs taken back."""
        lapsed = self.store.lapse_workers(
            limit=limit, keep_ms=self.keep_ms, keep=self.keep, silence_ms=SILENCE_MS, spare_ms=self.expiry_ms,
            stale_ms=STALE_TAKING_MS,
        )  # fmt: skip
        return sum(self.take_back(w) for w in lapsed)

    def take_back(self, lapsed: Lapsed) -> int:
        """Every running job of the worker, from each queue it served (every queue when that is unknown)."""
        queues = lapsed.queues or self.queries.queues.names()
        calls = [
            self.store.take_back_call(q, lapsed.worker, last_beat_ms=lapsed.last_beat_ms, ttl_ms=self.ttl_ms)
            for q in queues
        ]
        replies = self.store.run_many(calls) if calls else []
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply  # the worker stays in `taking`; this or another recoverer takes it again
        ago = (lapsed.now_ms - lapsed.last_beat_ms) / 1000 if lapsed.last_beat_ms else float("nan")
        total = 0
        for queue, (requeued, ended) in zip(queues, replies, strict=True):
            for job_id in requeued:
                log.warning("recovered job=%s queue=%s reason=worker_gone worker=%s action=requeued",
                            job_id, queue, lapsed.worker)  # fmt: skip
            for job_id in ended:
                log.warning("recovered job=%s queue=%s reason=worker_gone worker=%s action=ended",
                            job_id, queue, lapsed.worker)  # fmt: skip
            total += len(requeued) + len(ended)
        self.release_slots(lapsed.worker)
        self.store.taken_back(lapsed.worker, total)
        log.warning("worker=%s gone: no heartbeat for %.1fs; %d job(s) taken back", lapsed.worker, ago, total)
        self.taken_back += total
        return total

    def release_slots(self, worker: str) -> None:
        """Give back the concurrency-group slots the worker held (its jobs were just taken back), and wake the
        queues that waited for one: a group need not wait for the slots' own leases."""
        held = self.store.slots_held_by(worker)
        if not held:
            return
        calls = [self.store.group_release_call(group, tokens, unused=False) for group, tokens in held.items()]
        waiting: set[str] = set()
        for group, reply in zip(held, self.store.run_many(calls), strict=True):
            if isinstance(reply, Exception):
                raise reply
            log.warning("worker=%s gone: %d slot(s) of group %s given back", worker, len(held[group]), group)
            waiting.update(reply)
        if waiting:
            self.store.wake(waiting)
