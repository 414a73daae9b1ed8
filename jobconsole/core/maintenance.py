"""The maintenance loop: take back the jobs of workers that stopped heartbeating, recover expired leases,
promote due jobs, enforce retention, prune dead workers.

It runs inside every worker and alone as `runrecoverer`. Every instance scans the workers' heartbeat deadlines
every half second (`lapse.py`: one cheap call, an atomic decision); for the rest an owner-token leader lock makes
exactly one instance active at a time, and every step is a Lua script, so two leaders briefly overlapping is safe.
"""

import logging
import threading
import time
import uuid
from collections.abc import Mapping
from types import MappingProxyType

import redis

from jobconsole.core import workflows
from jobconsole.core.lapse import DEFAULT_WORKER_EXPIRY_S, GONE_KEEP_S, WATCH_EVERY_S, LapseWatch
from jobconsole.core.queries import Queries
from jobconsole.core.states import REDIS_RETENTION, TERMINAL_STATES, JobState
from jobconsole.core.store import Store

log = logging.getLogger(__name__)

RETRYABLE_ERRORS = (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError)


class Retention:
    """How long Redis keeps finished jobs (seconds), per terminal state: `Retention(failed=60)`; a state not
    named keeps the state table's default. The database mirror keeps history for longer."""

    __slots__ = ("seconds",)

    def __init__(self, **seconds: float) -> None:
        unknown = sorted(set(seconds) - set(REDIS_RETENTION))
        if unknown:
            raise TypeError(f"Retention() names no terminal state: {', '.join(unknown)}")
        self.seconds: Mapping[str, float] = MappingProxyType(
            {state: float(seconds.get(state, default)) for state, default in REDIS_RETENTION.items()}
        )

    def __getitem__(self, state: JobState) -> float:
        return self.seconds[state.value]

    def as_dict(self) -> dict[str, float]:
        return dict(self.seconds)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Retention) and self.seconds == other.seconds

    def __hash__(self) -> int:
        return hash(tuple(self.seconds.items()))

    def __repr__(self) -> str:
        return f"Retention({', '.join(f'{k}={v}' for k, v in self.seconds.items())})"


class Maintenance:
    def __init__(
        self,
        connection: "redis.Redis",
        *,
        events_maxlen: int = 100_000,
        retention: Retention | None = None,
        interval: float = 1.0,
        lock_ttl: float | None = None,
        trim_every: float = 60.0,
        worker_expiry: float = DEFAULT_WORKER_EXPIRY_S,
        gone_keep: float = GONE_KEEP_S,
    ) -> None:
        self.store = Store(connection, events_maxlen=events_maxlen)
        self.queries = Queries(self.store)
        self.retention = retention or Retention()
        self.interval = interval
        # worker_expiry: how long past a worker's last heartbeat its deadline is spared after a silence (the
        # workers' own setting; see lapse.py). gone_keep: how long a gone worker's record is kept.
        self.lapses = LapseWatch(
            self.store, self.queries, ttl_ms=int(self.retention[JobState.FAILED] * 1000), expiry_s=worker_expiry,
            keep_s=gone_keep,
        )  # fmt: skip
        # The leader renews the lock every pass. Its TTL is how long recovery stalls when a leader dies
        # without releasing it (SIGKILL, os._exit, a frozen host): keep it to a few missed passes, not
        # a fixed 10 s that dwarfs short leases. A slow pass that outlives it only lets leaders overlap,
        # which is safe (every step is an atomic, idempotent script).
        if lock_ttl is None:
            lock_ttl = max(3 * interval, 3.0)
        self.lock_ttl_ms = int(lock_ttl * 1000)
        self._last_ok = time.monotonic()  # end of the last pass that reached Redis
        self.trim_every = trim_every
        self.token = uuid.uuid4().hex
        self._last_trim = 0.0
        self.recovered = 0

    def is_leader(self) -> bool:
        """Take or renew the leader lock (owner-checked)."""
        return self.store.acquire_lock("maintenance", self.token, self.lock_ttl_ms)

    def release(self) -> None:
        try:
            self.store.release_lock("maintenance", self.token)
        except RETRYABLE_ERRORS:
            pass

    def watch_workers(self) -> int:
        """Take back the jobs of workers whose heartbeat lapsed (every instance, leader or not)."""
        return self.lapses.step()

    def step(self) -> int:
        """Watch the workers, then one pass over every queue if we lead; returns the number of jobs taken back,
        recovered or promoted."""
        try:
            taken = self.watch_workers()
        except RETRYABLE_ERRORS:
            raise
        except Exception:
            # A failing takeback (it is retried: the worker stays in `taking`) must not stop the leader's chores.
            log.exception("maintenance: taking back the jobs of a gone worker failed")
            taken = 0
        leader = self.is_leader()
        # Passes normally follow each other every `interval`; a longer gap means our calls to Redis blocked
        # or failed meanwhile (Redis frozen, restarting, unreachable), or this process got no CPU: recover.lua
        # then spares the leases that ran out during the outage or are about to, since their workers could
        # not renew them either.
        gap = time.monotonic() - self._last_ok
        self._last_ok = time.monotonic()
        if not leader:
            return taken
        outage_ms = int((gap + 1.0) * 1000) if gap > 2 * self.interval + 0.3 else 0
        if outage_ms:
            log.warning(
                "maintenance: Redis was unreachable for about %.1fs; sparing leases that ran out meanwhile", gap
            )
        # Concurrency groups first: a group touched every pass tells its scripts that Redis is up, so after an
        # outage they give the slots that ran out meanwhile their time back (GROUP_SILENCE_MS in lua/_lib.lua).
        self.store.touch_groups()
        done = taken
        for queue in self.queries.queues.names():
            # Promote (which drains the intake) first: a job handed to a worker that died before anything
            # drained it is then in the active set, and this same pass recovers it.
            done += self.promote(queue) + self.recover(queue, outage_ms=outage_ms)
            if self.store.cluster:  # workflows spanning slots: their outboxes and unfinished creations
                self.relay(queue)
        if time.monotonic() - self._last_trim >= self.trim_every:
            self._last_trim = time.monotonic()
            for queue in self.queries.queues.names():
                self.trim(queue)
            self.prune_workers()
        return done

    def recover(self, queue: str, limit: int = 200, outage_ms: int = 0) -> int:
        """Requeue or dead-letter every job of the queue whose lease has expired."""
        total = 0
        ttl_ms = int(self.retention[JobState.FAILED] * 1000)
        while True:
            requeued, ended = self.store.recover(queue, limit=limit, outage_ms=outage_ms, ttl_ms=ttl_ms)
            for job_id in requeued:
                log.warning("recovered job=%s queue=%s reason=lease_expired action=requeued", job_id, queue)
            for job_id in ended:
                log.warning("recovered job=%s queue=%s reason=lease_expired action=ended", job_id, queue)
            total += len(requeued) + len(ended)
            if len(requeued) + len(ended) < limit:
                self.recovered += total
                return total

    def relay(self, queue: str) -> int:
        """Cluster: a queue's messages to dependents in other slots delivered, its workflows' creations past their
        deadline rolled back or finished (core/workflows.py)."""
        try:
            workflows.recover_creations(self.store, self.queries, queue)
            return workflows.relay(self.store, queue)
        except redis.RedisError as exc:  # one node failing over must not stop the other queues' chores
            log.warning("maintenance: relaying the workflow outbox of %s failed (%s)", queue, exc)
            return 0

    def promote(self, queue: str, limit: int = 1000) -> int:
        return self.store.promote(queue, limit=limit)

    def trim(self, queue: str, limit: int = 1000) -> int:
        removed = 0
        for state in sorted(TERMINAL_STATES):
            age_ms = int(self.retention[state] * 1000)
            while True:
                n = self.store.trim(queue, state, age_ms=age_ms, limit=limit)
                removed += n
                if n < limit:
                    break
        # Per-minute counters older than a day go too, by Redis's clock (the minutes the scripts count in).
        self.store.trim_stats(queue, self.store.time_ms() // 60_000 - 24 * 60)
        return removed

    def prune_workers(self) -> None:
        """Forget registry entries of workers whose heartbeat hash expired (they died without saying so)."""
        self.store.prune_workers()

    def run(self, stop: threading.Event) -> None:
        """Loop until `stop` is set; Redis outages are logged and waited out."""
        # The workers' deadlines are scanned every WATCH_EVERY_S (or every pass, when passes come faster), the
        # rest every `interval`.
        tick = min(self.interval, WATCH_EVERY_S)
        next_pass = 0.0
        try:
            while not stop.is_set():
                try:
                    if time.monotonic() >= next_pass:
                        next_pass = time.monotonic() + self.interval - tick / 10
                        self.step()
                    else:
                        self.watch_workers()
                except RETRYABLE_ERRORS as exc:
                    log.warning("maintenance: redis unavailable (%s); retrying", exc)
                except Exception:
                    # One bad pass must not stop every later one (a Runqueue bug we do not copy).
                    log.exception("maintenance pass failed")
                stop.wait(tick)
        finally:
            self.release()
