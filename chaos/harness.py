"""What every scenario runs on: its own redis-server, a cluster of worker processes, a producer thread that
keeps enqueuing (and records each accepted job in the ledger), and helpers to wait for the queue to drain."""

import random
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import redis

from chaos.cluster import Cluster, Proc
from chaos.ledger import Accepted, Duplicate, Ledger
from chaos.proxy import Mode, Proxy
from chaos.tasks import LEASE_S, QUEUE
from jobconsole.core import Client, EnqueueResult, JobSpec, RedisFull
from jobconsole.core.connection import connect
from jobconsole.core.ids import new_job_id
from jobconsole.core.maintenance import RETRYABLE_ERRORS
from tests.redis_server import RedisServer

REFUSED_RETRY_S = 0.05  # a producer refused by a full Redis sends again after this


@dataclass(frozen=True, slots=True)
class Planned:
    spec: JobSpec
    expect: str = "completed"  # or 'dead' for poison jobs


def work(
    key: str, seconds: float | None = None, *, task: str = "chaos.work", delay: float | None = None,
    expect: str = "completed", unique_key: str | None = None, **params: object,
) -> Planned:  # fmt: skip
    """A job with a fixed id (so a retried enqueue is idempotent) and a logical side-effect key. With a
    `unique_key`, Redis may refuse it as a duplicate: the ledger then books it apart, not as accepted."""
    args = {"key": key, **params} | ({} if seconds is None else {"seconds": seconds})
    return Planned(JobSpec(task=task, id=new_job_id(), params=args, delay=delay, unique_key=unique_key), expect)


class Producer(threading.Thread):
    """Enqueues `plan` in batches at `rate` jobs/s. A batch that fails (Redis down, connection cut) is
    re-sent with the same job ids until it is accepted; only then does it enter the ledger as accepted.

    With `single`, each job goes alone through `Client.enqueue` without an id of its own, the way most
    producers call it (and the path that may put it in the queue's intake): it enters the ledger under the
    id the call returned. A call that fails has an unknown outcome and is not re-sent (without an id, a
    re-send would be a second job); if that job ran, the checker reports it as never accepted.

    RedisFull is different: its outcome is known (nothing was written), so the refused jobs are sent again,
    after REFUSED_RETRY_S, until Redis takes them. A job refused with its own id and taken later must then be
    'created', never 'exists': `refused_left_trace` counts those that were not."""

    def __init__(
        self, client: Client, ledger: Ledger, plan: Sequence[Planned], rate: float, batch: int = 50,
        single: bool = False,
    ) -> None:  # fmt: skip
        super().__init__(name="chaos-producer", daemon=True)
        self.client, self.ledger, self.plan, self.rate = client, ledger, plan, rate
        self.batch = 1 if single else batch
        self.single = single
        self.failed_sends = 0
        self.refusals = 0  # RedisFull replies (a refused batch counts once)
        self.refused_left_trace = 0
        self.last_accepted = 0.0  # monotonic
        self._refused_ids: set[str] = set()  # refused with their own id, and sent only into refusals since
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            started = time.monotonic()
            for i in range(0, len(self.plan), self.batch):
                wait = started + i / self.rate - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                if self.single:
                    self._send_one(self.plan[i])
                else:
                    self._send(self.plan[i : i + self.batch])
        except BaseException as exc:  # noqa: BLE001 - reported by the scenario, never swallowed
            self.error = exc

    def _send_one(self, planned: Planned) -> None:
        spec = planned.spec
        while True:
            sent_at = time.time()
            try:
                result = self.client.enqueue(spec.task, spec.params, delay=spec.delay)
                break
            except RedisFull:
                self._refused()
            except RETRYABLE_ERRORS:
                self.failed_sends += 1
                time.sleep(0.1)
                return
        self._accepted([planned], [result], sent_at)

    def _send(self, chunk: Sequence[Planned]) -> None:
        deadline = time.monotonic() + 120
        waiting = {p.spec.id or "": p for p in chunk}
        # Redis stamps run_at = its now (>= this) + delay: a lower bound. The first send's time, not a re-send's:
        # a send whose reply was lost (Redis killed after the write) may have been accepted then, and the re-send
        # only answers that the id exists.
        sent_at = time.time()
        while waiting:
            try:
                self._accepted(
                    list(waiting.values()), self.client.enqueue_many([p.spec for p in waiting.values()]), sent_at
                )
                return
            except RedisFull as full:
                # Its results are those of the jobs that went in, in the order sent (a duplicate's names its holder).
                refused = set(full.refused)
                self._accepted([p for job_id, p in waiting.items() if job_id not in refused], full.accepted, sent_at)
                waiting = {job_id: waiting[job_id] for job_id in full.refused}
                self._refused_ids.update(waiting)
                self._refused()
            except RETRYABLE_ERRORS:
                self.failed_sends += 1
                self._refused_ids.difference_update(waiting)  # the outcome is unknown now: 'exists' is fair
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def _accepted(self, planned: Sequence[Planned], results: Sequence[EnqueueResult], sent_at: float) -> None:
        accepted: list[Accepted] = []
        duplicates: list[Duplicate] = []
        for p, r in zip(planned, results, strict=True):
            if r.status == "duplicate":  # its unique key is held by the live job r.id: nothing was written
                duplicates.append(Duplicate(p.spec.id or "", p.spec.unique_key or "", r.id, sent_at))
                continue
            if r.id in self._refused_ids:
                self._refused_ids.discard(r.id)
                if not r.created:
                    self.refused_left_trace += 1
            not_before = sent_at + (p.spec.delay or 0.0)
            accepted.append(Accepted(r.id, p.spec.task, p.expect, not_before, unique_key=p.spec.unique_key or ""))
        self.ledger.accept(accepted)
        self.ledger.duplicate(duplicates)
        self.last_accepted = time.monotonic()

    def _refused(self) -> None:
        self.refusals += 1
        time.sleep(REFUSED_RETRY_S)


@dataclass
class Ctx:
    name: str
    quick: bool
    rng: random.Random
    workdir: Path
    ledger: Ledger
    server: RedisServer
    cluster: Cluster
    r: "redis.Redis"
    client: Client
    producers: list[Producer] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tallies: dict[str, int] = field(default_factory=dict)  # a scenario's own counts, for chaos.tally to sum
    soak_seconds: float | None = None  # --soak-seconds: how long `soak` faults (default: its size)
    cleanups: list[Callable[[], object]] = field(default_factory=list)  # run after the check (cluster_failover)

    def size(self, quick: float, full: float) -> float:
        return quick if self.quick else full

    def workers(self, n: int, redis_url: str | Callable[[int], str] | None = None) -> list[Proc]:
        procs = [
            self.cluster.start_worker(slot, redis_url(slot) if callable(redis_url) else redis_url) for slot in range(n)
        ]
        began = time.monotonic()
        self.cluster.wait_started(procs)
        self.notes.append(f"{n} workers started in {time.monotonic() - began:.1f}s")
        return procs

    def produce(self, plan: Sequence[Planned], rate: float, batch: int = 50, *, single: bool = False) -> Producer:
        producer = Producer(self.client, self.ledger, plan, rate, batch, single)
        producer.start()
        self.producers.append(producer)
        return producer

    def producing(self) -> bool:
        return any(p.is_alive() for p in self.producers)

    def faulting(self, done: int, minimum: int = 2) -> bool:
        """Inject another fault? While the load lasts, and at least `minimum` times in all."""
        return self.producing() or done < minimum

    def drained(self) -> bool:
        """Nothing left to run: producers done and every job of the queue in a final state."""
        if self.producing():
            return False
        try:
            c = self.client.counts(QUEUE)
        except RETRYABLE_ERRORS:
            return False
        return c.queued + c.scheduled + c.running == 0

    def sleep(self, low: float, high: float) -> None:
        time.sleep(self.rng.uniform(low, high))

    def kill_a_worker(self) -> None:
        """SIGKILL a random worker and start its replacement in the same slot (same clock skew)."""
        slot = self.rng.choice(sorted(self.cluster.workers))
        self.cluster.kill(self.cluster.workers[slot])
        self.cluster.start_worker(slot)

    def kill_redis(self, low: float, high: float) -> None:
        """kill -9 redis-server, leave it down for `low`-`high` s, restart it on its own AOF."""
        started = time.time()
        self.server.kill()
        self.sleep(low, high)
        self.server.start()
        self.ledger.fault("redis_kill", [], started, time.time())

    def freeze_redis(self, seconds: float) -> None:
        """SIGSTOP redis-server for `seconds`, then SIGCONT: every lease may expire while it hangs."""
        assert self.server.proc is not None
        started = time.time()
        self.server.proc.send_signal(signal.SIGSTOP)
        time.sleep(seconds)
        self.server.proc.send_signal(signal.SIGCONT)
        self.ledger.fault("redis_stop", [], started, time.time())

    def term_a_worker(self, grace: float) -> None:
        """SIGTERM a random worker, SIGKILL it if it outlives `grace`, start its replacement."""
        slot = self.rng.choice(sorted(self.cluster.workers))
        victim = self.cluster.workers[slot]
        self.cluster.signal(victim, signal.SIGTERM, "term")
        try:
            victim.popen.wait(grace)
        except subprocess.TimeoutExpired:
            self.cluster.kill(victim)
            self.notes.append(f"{victim.name} outlived its {grace:.0f}s grace and was killed")
        self.cluster.start_worker(slot)

    def stop_a_worker(self, seconds: float) -> None:
        """SIGSTOP a random worker for `seconds`, then SIGCONT (a zombie whose leases moved on)."""
        victim = self.cluster.workers[self.rng.choice(sorted(self.cluster.workers))]
        fault = self.cluster.signal(victim, signal.SIGSTOP, "stop")
        time.sleep(seconds)
        victim.popen.send_signal(signal.SIGCONT)
        self.ledger.fault_ended(fault, time.time())

    def disturb(self, proxy: Proxy, mode: Mode) -> None:
        """Put `mode` on a proxy for its fault's length (a cut 0.5 s, a blackhole past the lease, 2 s of delay)."""
        started = time.time()
        proxy.set_mode(mode)
        time.sleep({Mode.CUT: 0.5, Mode.BLACKHOLE: 2.5 * LEASE_S, Mode.DELAY: 2.0}[mode])
        proxy.set_mode(Mode.PASS)
        self.ledger.fault(str(mode), [], started, time.time())

    def settle(self, timeout: float = 60.0, restart_dead: bool = True) -> None:
        """Faults are over: keep the workers alive until the queue drains (or give up; the checker tells)."""
        began = time.monotonic()
        deadline = began + timeout
        while not self.drained():
            if restart_dead:
                self.cluster.restart_dead()
            if time.monotonic() > deadline:
                self.notes.append(f"queue did not drain within {timeout:.0f}s")
                break
            time.sleep(0.1)
        self.notes.append(f"faults stopped; queue drained in {time.monotonic() - began:.1f}s")
        for producer in self.producers:
            producer.join(5)
            if producer.failed_sends and producer.single:
                self.notes.append(f"{producer.failed_sends} single enqueue(s) failed (outcome unknown, not re-sent)")
            elif producer.failed_sends:
                self.notes.append(f"producer re-sent {producer.failed_sends} batch(es) after Redis errors")
            if producer.error is not None:
                self.notes.append(f"producer failed: {producer.error!r}")


def open_redis(url: str) -> tuple["redis.Redis", Client]:
    import chaos.tasks  # noqa: F401  (registers the chaos tasks, so the client knows their leases)

    r = connect(url)
    return r, Client(r)
