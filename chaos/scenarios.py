"""The scenarios of reliability.md part (b) that run on one machine. Each one starts its processes, injects
its faults under load with seeded random timing, then stops faulting and lets the queue drain; the checker
judges the result. Sizes: (quick, full)."""

import contextlib
import itertools
import math
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, cast

import redis

from chaos.checker import EPS, leases, match
from chaos.cluster_failover import CLUSTER_GATES, cluster_failover
from chaos.cluster_workflows import CLUSTER_WORKFLOW_GATES, cluster_workflows
from chaos.harness import Ctx, Planned, work
from chaos.ledger import Accepted
from chaos.proxy import Mode, Proxy
from chaos.tasks import FLAKY_RETRIES, GROUP, LEASE_S, QUEUE, SPIN_LEASE_S
from jobconsole.core import keys
from jobconsole.core.errors import JobNotFound, JobStateConflict
from jobconsole.core.groups import Group
from jobconsole.core.job import Job
from jobconsole.core.keys import group_keys, queue_keys
from jobconsole.core.lapse import DEFAULT_WORKER_EXPIRY_S
from jobconsole.core.maintenance import RETRYABLE_ERRORS
from jobconsole.core.store import Store
from jobconsole.core.streams import parse_id

if TYPE_CHECKING:
    from jobconsole.core import JobSpec


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    title: str
    run: Callable[[Ctx], None]
    appendfsync: str = "always"
    extra_gates: tuple[str, ...] = ()  # counts (Report fields or the scenario's tallies) that must also be 0 here


def kill_loop(ctx: Ctx) -> None:
    """#1: kill -9 a random worker every 0.5-2 s (quick: 0.3-1 s) and restart it, under steady load."""
    ctx.cluster.start_recoverer()
    ctx.workers(3)
    n = int(ctx.size(400, 10_000))
    plan = [work(f"k{i}", ctx.rng.choice([0.0, 0.0, 0.0, 0.005, 0.02, 0.3])) for i in range(n)]
    rate = ctx.size(150, 300)
    ctx.produce(plan[::2], rate=rate / 2)
    ctx.produce(plan[1::2], rate=rate / 2, single=True)  # one by one, through the intake when workers are busy
    _kill_workers_under_load(ctx)
    ctx.settle()


def worker_lost(ctx: Ctx) -> None:
    """Issue 30's measure: kill -9 one worker at a time while the others have threads to spare, and only once its
    replacement has started, so that the time from the kill to each of its jobs' next run elsewhere is the
    engine's (the workers' heartbeat expiry, a scan, a claim), not a wait for capacity. Run it with a long lease
    (CHAOS_LEASE_S=300): the jobs' leases play no part."""
    ctx.cluster.start_recoverer()
    ctx.workers(3)
    n = int(ctx.size(120, 900))
    plan = [work(f"l{i}", ctx.rng.uniform(0.5, 3.0)) for i in range(n)]  # about 10 of 24 threads busy at 6/s
    ctx.produce(plan, rate=6)
    for done in itertools.count():
        if not ctx.faulting(done):
            break
        ctx.sleep(2.0, 4.0)
        slot = ctx.rng.choice(sorted(ctx.cluster.workers))
        ctx.cluster.kill(ctx.cluster.workers[slot])
        ctx.cluster.wait_started([ctx.cluster.start_worker(slot)])
    ctx.settle()


def _kill_workers_under_load(ctx: Ctx, after_each: Callable[[], object] | None = None) -> None:
    """SIGKILL a random worker (and start its replacement) every 0.5-2 s (quick: 0.3-1 s) while the load lasts,
    at least twice; `after_each` runs after every kill."""
    low, high = ctx.size(0.3, 0.5), ctx.size(1.0, 2.0)
    for done in itertools.count():
        if not ctx.faulting(done):
            break
        ctx.sleep(low, high)
        ctx.kill_a_worker()
        if after_each is not None:
            after_each()


def kill_before_ack(ctx: Ctx) -> None:
    """#2: the task applies its side effect, then its process is SIGKILLed before the ack (first attempt)."""
    ctx.cluster.start_recoverer()
    ctx.workers(3)
    n, dying = int(ctx.size(120, 1500)), int(ctx.size(6, 60))
    doomed = set(ctx.rng.sample(range(n), dying))
    plan = [work(f"a{i}", ctx.rng.choice([0.0, 0.01, 0.1]), die_after_effect=i in doomed) for i in range(n)]
    ctx.produce(plan, rate=ctx.size(60, 120))
    while ctx.producing():
        ctx.cluster.restart_dead()
        time.sleep(0.05)
    ctx.settle()


def sigterm(ctx: Ctx) -> None:
    """#3: SIGTERM a worker, wait a grace period, SIGKILL it if it is still there; short jobs, medium jobs that
    finish on shutdown, long on_shutdown=requeue jobs that are interrupted and put back."""
    ctx.cluster.start_recoverer()
    ctx.workers(3)
    n = int(ctx.size(90, 1200))
    plan: list[Planned] = []
    for i in range(n):
        kind = ctx.rng.random()
        if kind < 0.15:
            plan.append(work(f"t{i}", ctx.rng.uniform(1.0, 3.0), task="chaos.requeue"))
        elif kind < 0.35:
            plan.append(work(f"t{i}", ctx.rng.uniform(0.2, 1.0)))
        else:
            plan.append(work(f"t{i}", 0.01))
    ctx.produce(plan, rate=ctx.size(30, 40))
    for done in itertools.count():
        if not ctx.faulting(done):
            break
        ctx.sleep(1.0, 2.5)
        ctx.term_a_worker(grace=2 * LEASE_S)
    ctx.settle()


def sigstop(ctx: Ctx) -> None:
    """#4: freeze a worker with SIGSTOP for 3x the lease (at least twice the workers' heartbeat expiry, so that it
    is declared gone whatever the jobs' lease), then SIGCONT: its jobs run elsewhere meanwhile, its late
    heartbeats and acks must be refused (stale token), and it goes on under a new id."""
    ctx.cluster.start_recoverer()
    ctx.workers(3)
    n = int(ctx.size(60, 800))
    plan = [work(f"s{i}", ctx.rng.uniform(0.2, 1.5), heartbeat=ctx.rng.random() < 0.5) for i in range(n)]
    ctx.produce(plan, rate=ctx.size(20, 20))
    for done in itertools.count():
        if not ctx.faulting(done, 1):
            break
        ctx.sleep(0.5, 1.5)
        ctx.stop_a_worker(max(3 * LEASE_S, 2 * DEFAULT_WORKER_EXPIRY_S))
    ctx.settle()


def _redis_kill(ctx: Ctx) -> None:
    """#6: kill -9 redis-server under load and restart it on the same AOF; workers must resume by themselves."""
    ctx.cluster.start_recoverer()
    ctx.workers(3)
    n = int(ctx.size(600, 8000))
    plan = [work(f"r{i}", ctx.rng.choice([0.0, 0.0, 0.01, 0.2])) for i in range(n)]
    ctx.produce(plan[::2], rate=150)
    ctx.produce(plan[1::2], rate=150, single=True)  # intake entries must survive the restart like jobs
    for done in itertools.count():
        if not ctx.faulting(done):
            break
        ctx.sleep(0.5, 2.0)
        ctx.kill_redis(0.2, 1.5)
    ctx.settle()


def redis_freeze(ctx: Ctx) -> None:
    """#10: SIGSTOP redis-server for 3x the lease: every lease expires at once when it resumes."""
    ctx.cluster.start_recoverer()
    ctx.workers(3)
    n = int(ctx.size(80, 900))
    plan = [work(f"f{i}", ctx.rng.uniform(0.1, 1.0), heartbeat=ctx.rng.random() < 0.5) for i in range(n)]
    ctx.produce(plan, rate=ctx.size(25, 30))
    for done in itertools.count():
        if not ctx.faulting(done, 1):
            break
        ctx.sleep(1.0, 3.0)
        ctx.freeze_redis(3 * LEASE_S)
    ctx.settle()


def network(ctx: Ctx) -> None:
    """#9: workers reach Redis through TCP proxies that cut connections (RST), blackhole them past the lease,
    or add latency. Workers 0-1 sit behind proxy A, worker 2 behind B; the recoverer and producer go direct."""
    proxies = [Proxy(ctx.server.port).start(), Proxy(ctx.server.port).start()]
    try:
        ctx.cluster.start_recoverer()
        ctx.workers(3, lambda slot: f"redis://127.0.0.1:{proxies[0 if slot < 2 else 1].port}/0")
        n = int(ctx.size(300, 5000))
        plan = [
            work(f"n{i}", ctx.rng.choice([0.0, 0.0, 0.01, 0.3, 1.0]), heartbeat=ctx.rng.random() < 0.5)
            for i in range(n)
        ]
        ctx.produce(plan, rate=ctx.size(60, 70))
        faults = [Mode.CUT, Mode.BLACKHOLE, Mode.DELAY]
        for done in itertools.count():
            if not ctx.faulting(done, 3):
                break
            ctx.sleep(0.3, 1.0)
            mode = faults.pop(0) if faults else ctx.rng.choice([Mode.CUT, Mode.CUT, Mode.BLACKHOLE, Mode.DELAY])
            ctx.disturb(ctx.rng.choice(proxies), mode)
        ctx.settle()
    finally:
        for proxy in proxies:
            proxy.close()


def poison(ctx: Ctx) -> None:
    """#12: jobs whose handler calls os._exit crash their worker on every attempt; after max_retries+1 crashes
    they must be dead-lettered while the other jobs keep flowing. Also #12's payload that cannot be decoded:
    jobs whose stored params were overwritten with text that is not JSON must be dead-lettered at their first
    attempt (chaos.work allows 25 retries), without crashing the worker that claimed them."""
    ctx.cluster.start_recoverer()
    ctx.workers(3)
    n, bad = int(ctx.size(120, 2000)), int(ctx.size(3, 10))
    poisoned = set(ctx.rng.sample(range(n), bad))
    plan = [
        work(f"p{i}", task="chaos.poison", expect="dead")
        if i in poisoned
        else work(f"p{i}", ctx.rng.choice([0.0, 0.05]))
        for i in range(n)
    ]
    ctx.produce(plan, rate=ctx.size(40, 100))
    garbled: list[str] = []
    tries = 0
    while ctx.producing():
        if len(garbled) < bad and tries < 3 * bad:
            tries += 1
            if job_id := _enqueue_garbled(ctx, tries):
                garbled.append(job_id)
        ctx.cluster.restart_dead()
        time.sleep(0.05)
    ctx.settle(timeout=90)
    ctx.tallies |= _judge_garbled(ctx, garbled)


GARBLED_PARAMS = "{key: not json"  # what a foreign producer writing the hash by hand might leave


# Overwrite a job's params only while it still waits for its run_at: on a machine starved of CPU the harness may
# reach this line after the delay passed and a worker ran the job, and garbling a finished job proves nothing.
_GARBLE_WHILE_SCHEDULED = """
if redis.call('HGET', KEYS[1], 'state') ~= 'scheduled' then return 0 end
redis.call('HSET', KEYS[1], 'params', ARGV[1])
return 1
"""


def _enqueue_garbled(ctx: Ctx, index: int) -> str | None:
    """A job whose params are overwritten in Redis after it was accepted. Delayed, so that no worker can
    claim it before; an id of its own keeps it out of the intake, so its hash exists at once. None (and the job
    booked as one to complete) when a worker claimed it before the harness could garble it."""
    planned = work(f"g{index}", delay=ctx.rng.uniform(0.3, 1.5), expect="dead")
    sent_at = time.time()
    job_id = ctx.client.enqueue_many([planned.spec])[0].id
    garbled = ctx.r.eval(_GARBLE_WHILE_SCHEDULED, 1, queue_keys(QUEUE).job(job_id), GARBLED_PARAMS) == 1
    expect = "dead" if garbled else "completed"
    ctx.ledger.accept([Accepted(job_id, planned.spec.task, expect, sent_at + (planned.spec.delay or 0.0))])
    if not garbled:
        ctx.notes.append(f"job {job_id} was claimed before it could be garbled (the harness was starved)")
    return job_id if garbled else None


def _judge_garbled(ctx: Ctx, garbled: list[str]) -> dict[str, int]:
    """Each garbled job must be dead-lettered at once (see garbled_dead_at_once)."""
    poison_ids = {a.job_id for a in ctx.ledger.accepted() if a.task == "chaos.poison"}
    crashes = [(e.worker, e.started) for e in ctx.ledger.executions() if e.job_id in poison_ids]
    retried = 0
    for job_id in garbled:
        job = ctx.client.get(job_id, QUEUE)
        if not garbled_dead_at_once(job, crashes):
            retried += 1
            outcomes = [(a.worker, a.outcome, a.error_class.rsplit(".", 1)[-1], a.message) for a in job.history]
            ctx.notes.append(
                f"garbled job {job_id}: {job.state.value}, {len(outcomes)} history entries, first {outcomes[:2]}; "
                f"poison runs began on its workers: {[c for c in crashes if c[0] in {a.worker for a in job.history}]}"
            )
        elif len(job.history) > 1:
            ctx.notes.append(f"garbled job {job_id}: {len(job.history) - 1} lease(s) lost to a poison job's crash")
    ctx.notes.append(f"{len(garbled)} garbled job(s) dead-lettered at their first attempt: {len(garbled) - retried}")
    return {"garbled": len(garbled), "garbled_not_dead_at_once": retried}


def garbled_dead_at_once(job: Job, crashes: list[tuple[str, float]]) -> bool:
    """A garbled job is dead, its payload error shown, and its last attempt failed with UndecodablePayload. Any
    attempt before that may only have ended `worker_lost` on a worker a poison job crashed (`crashes`: worker id
    and the moment a poison run began) before that lease ended: the garbled job's failure was not reported yet.
    The poison run may have begun before the garbled job was claimed: its booked start is the worker's gate,
    and on a loaded machine the worker claims more jobs while the poison's ledger write waits for its lock
    (CI, 2026-12-07: a garbled job claimed after a poison run's gate, lost with the process). A worker id is one
    process, and a poison run ends it, so the crash came after the claim. The garbled job itself must never take
    a worker down, nor be retried once it was read."""
    if job.state.value != "dead" or not job.payload_error or not job.history:
        return False
    *before, last = job.history
    if (last.outcome, last.error_class.rsplit(".", 1)[-1]) != ("failed", "UndecodablePayload"):
        return False
    return all(
        a.outcome == "worker_lost" and a.ended_at is not None
        and any(worker == a.worker and at <= a.ended_at.timestamp() + EPS for worker, at in crashes)
        for a in before
    )  # fmt: skip


def flaky(ctx: Ctx) -> None:
    """#13: handlers that raise on their first attempts (a seeded number of them, some past max_retries) while
    workers are killed; meanwhile an operator resubmits what reached the dead-letter set (Client.requeue, as the
    console does). The checker reads every job's attempt history: each attempt there, numbered in order, with
    its worker, times and error, none before its retry's backoff was over (chaos.checker.history_defects)."""
    ctx.cluster.start_recoverer()
    ctx.workers(3)
    n = int(ctx.size(200, 3000))
    # fail_first > FLAKY_RETRIES: dead-lettered after every allowed attempt failed, completed once resubmitted.
    failures = [0, 0, 1, 1, 2, 3, FLAKY_RETRIES + 1]
    plan = [
        work(f"f{i}", ctx.rng.choice([0.0, 0.0, 0.02, 0.1]), task="chaos.flaky", fail_first=ctx.rng.choice(failures))
        for i in range(n)
    ]
    ctx.produce(plan, rate=ctx.size(80, 150))
    resubmits: list[int] = []
    _kill_workers_under_load(ctx, lambda: resubmits.append(_resubmit_dead(ctx)))
    ctx.settle()
    resubmitted = sum(resubmits) + _resubmit_until_none_dead(ctx)
    ctx.notes.append(f"resubmitted {resubmitted} dead-lettered job(s), history kept")


def _resubmit_until_none_dead(ctx: Ctx, task: str | None = None) -> int:
    """Once the queue has drained: resubmit the dead-lettered jobs (of `task`) and let them run, again while
    some end up dead once more (a resubmitted job can be killed back into the dead-letter set)."""
    resubmitted = 0
    for _ in range(FLAKY_RETRIES + 2):
        if not (again := _resubmit_dead(ctx, task)):
            break
        resubmitted += again
        ctx.settle()
    return resubmitted


def _resubmit_dead(ctx: Ctx, task: str | None = None) -> int:
    """Requeue every dead-lettered job (of `task`, if given); attempts are not reset, so its history goes on
    at the next number."""
    requeued = 0
    try:
        k = queue_keys(QUEUE)
        for job_id in cast(list[str], ctx.r.zrange(k.sets["dead"], 0, -1)):
            if task is not None and ctx.r.hget(k.job(job_id), "task") != task:
                continue
            with contextlib.suppress(JobStateConflict, JobNotFound):  # changed meanwhile: judged by the checker
                ctx.client.requeue(job_id, QUEUE)
                requeued += 1
    except RETRYABLE_ERRORS:
        pass  # the next pass tries again
    return requeued


def delayed(ctx: Ctx) -> None:
    """#14 (the parts that exist): delayed jobs and unique keys while workers and the recoverer (the promoter)
    are killed. Each delayed job runs, never before its run_at. Beside them a second producer keeps sending
    short-lived jobs over a few unique keys, so each key is taken, refused (a duplicate names its live holder)
    and freed again many times, across kills: at no moment may two jobs with one key be live, and a job may be
    refused only while its key's holder is live. Concurrency groups are group_slots."""
    recoverer = ctx.cluster.start_recoverer()
    ctx.workers(3)
    n = int(ctx.size(200, 3000))
    horizon = ctx.size(3.0, 10.0)
    plan = [work(f"d{i}", ctx.rng.choice([0.0, 0.05]), delay=ctx.rng.uniform(0.0, horizon)) for i in range(n)]
    ctx.produce(plan, rate=ctx.size(100, 150))
    unique_rate = ctx.size(40, 60)
    ctx.produce(unique_jobs(ctx, int(unique_rate * horizon), keys=int(ctx.size(4, 10))), rate=unique_rate, batch=3)
    end = time.monotonic() + horizon
    while ctx.producing() or time.monotonic() < end:
        ctx.sleep(0.4, 1.2)
        if ctx.rng.random() < 0.3:
            ctx.cluster.kill(recoverer)
            recoverer = ctx.cluster.start_recoverer()
        else:
            ctx.kill_a_worker()
    ctx.settle()


def unique_jobs(ctx: Ctx, n: int, keys: int, prefix: str = "u") -> list[Planned]:
    """Short jobs, some delayed up to 0.3 s, over a few unique keys: sent a few at a time, each key is taken,
    refused and freed again many times."""
    return [
        work(
            f"{prefix}{i}", ctx.rng.choice([0.0, 0.05, 0.2]), delay=ctx.rng.choice([None, ctx.rng.uniform(0.0, 0.3)]),
            unique_key=f"k{ctx.rng.randrange(keys)}",
        )
        for i in range(n)
    ]  # fmt: skip


def clock_skew(ctx: Ctx) -> None:
    """#11: workers and the recoverer (the promoter) run with wall clocks 300 s ahead or behind.
    Every deadline comes from Redis TIME, so delayed jobs never run early, none waits 300 s, and no live lease is
    taken for expired; workers are killed meanwhile so that the skewed recoverer has leases to judge."""
    ctx.cluster.skews.update({0: 300.0, 1: -300.0, 2: 0.0})
    recoverer = ctx.cluster.start_recoverer(skew=-300.0)
    ctx.workers(3)
    n = int(ctx.size(300, 3000))
    horizon = ctx.size(3.0, 8.0)
    plan = [
        work(f"c{i}", ctx.rng.choice([0.0, 0.05, 0.3]), delay=ctx.rng.uniform(0.0, horizon) if i % 2 else None)
        for i in range(n)
    ]
    ctx.produce(plan, rate=ctx.size(100, 300))
    end = time.monotonic() + horizon
    while ctx.producing() or time.monotonic() < end:
        ctx.sleep(1.0, 2.5)
        if ctx.rng.random() < 0.2:
            ctx.cluster.kill(recoverer)
            recoverer = ctx.cluster.start_recoverer(skew=ctx.rng.choice([300.0, -300.0]))
        else:
            ctx.kill_a_worker()  # with the same skew
    ctx.settle()


def cpu_bound(ctx: Ctx) -> None:
    """#5: every task thread of every worker burns CPU in Python for up to 3x the lease without calling
    heartbeat(); the heartbeat thread has to win the GIL from eight busy threads in time. No lease of a live
    worker may lapse (a false stall would hand a running job to a second worker)."""
    ctx.cluster.start_recoverer()
    ctx.workers(3)
    n = int(ctx.size(60, 400))
    plan = [work(f"s{i}", ctx.rng.uniform(0.2, 1.5 * SPIN_LEASE_S), task="chaos.spin") for i in range(n)]
    ctx.produce(plan, rate=ctx.size(20, 40))
    while ctx.producing():
        ctx.sleep(0.5, 1.0)
    ctx.settle(timeout=120.0)


def intake(ctx: Ctx) -> None:
    """Jobs enqueued one by one while every worker is busy wait in the queue's intake stream (one XADD each)
    until a claim makes them jobs. Workers are killed and redis-server is killed (appendfsync always) while
    the intake holds jobs: every accepted job must still run exactly as often as any other."""
    ctx.cluster.start_recoverer()
    ctx.workers(2)
    n = int(ctx.size(500, 4000))
    # Two workers x 8 threads at 0.12 s a task run about 130 jobs/s: producing faster keeps every worker
    # busy, so no worker registers as idle and the one-by-one enqueues take the intake.
    plan = [work(f"i{i}", ctx.rng.choice([0.05, 0.1, 0.2])) for i in range(n)]
    ctx.produce(plan, rate=ctx.size(250, 250), single=True)
    longest = 0
    for done in itertools.count():
        if not ctx.faulting(done):
            break
        with contextlib.suppress(*RETRYABLE_ERRORS):
            longest = max(longest, int(ctx.r.xlen(queue_keys(QUEUE).intake)))
        ctx.sleep(0.5, 1.5)
        if done % 3 == 2:
            ctx.kill_redis(0.2, 1.0)
        else:
            ctx.kill_a_worker()
    ctx.notes.append(f"the intake held up to {longest} jobs when sampled")
    ctx.settle(timeout=120.0)


def redis_full(ctx: Ctx) -> None:
    """#6, its memory half: Redis reaches maxmemory (policy noeviction) under load. Producers are refused with
    RedisFull and send again (harness.Producer); each time Redis has stayed full for a while, with workers
    killed and restarted meanwhile (a worker must start while Redis is full), an operator raises maxmemory by
    the same step and the producers go on by themselves. Nothing refused may leave a trace, every accepted
    job runs, and the workers must finish jobs in every full spell (none may stall). The database mirror runs
    throughout and must hold every accepted job as completed at the end."""
    ctx.cluster.migrate()
    ctx.cluster.start_mirror()
    ctx.cluster.start_recoverer()
    ctx.workers(3)
    Store(ctx.r).load_scripts()  # loaded scripts take memory too: in before the limit is set
    step = int(ctx.size(1_500_000, 4_000_000))  # about 1,000 (quick) or 2,700 jobs of 1 KB ballast
    limit = _used_memory(ctx) + step
    ctx.r.config_set("maxmemory", limit)
    n = int(ctx.size(3000, 14_000))
    plan = [work(f"m{i}", ctx.rng.choice([0.0, 0.0, 0.01, 0.05]), pad="x" * 1000) for i in range(n)]
    rate = ctx.size(500, 600)
    ctx.produce(plan[::2], rate=rate / 2)
    ctx.produce(plan[1::2], rate=rate / 2, single=True)
    seen = FullSpells()
    while ctx.producing():
        if not _wait(partial(_filled, ctx, _refusals(ctx)), 60):
            ctx.notes.append("Redis did not fill up within 60 s")
            break
        if ctx.producing():
            limit = _full_spell(ctx, seen, limit, step)
    ctx.r.config_set("maxmemory", 0)  # the load is over: the operator lifts the limit (the checks read freely)
    settle_with_mirror(ctx, timeout=120.0)
    with contextlib.closing(sqlite3.connect(ctx.cluster.mirror_db)) as db:
        mirrored = {row[0] for row in db.execute("SELECT id FROM jobconsole_job WHERE state = 'completed'")}
    refusals = _refusals(ctx)
    ctx.tallies |= {
        "refusals": refusals,
        "full_spells": seen.spells,
        "full_spells_stalled": seen.stalled,
        "finished_while_full": seen.finished,
        "refused_left_trace": sum(p.refused_left_trace for p in ctx.producers),
        "memory_overshoot_kb": round(seen.overshoot / 1000),
        "mirror_stalled_spells": seen.mirror_stalled,
        "mirror_missing": len({a.job_id for a in ctx.ledger.accepted()} - mirrored),
    }
    ctx.notes.append(
        f"Redis full {seen.spells} times ({seen.seconds:.1f}s in all): {refusals} refused sends, {seen.finished} "
        f"jobs finished while full, at most {seen.overshoot / 1e6:.2f} MB over maxmemory; producers resumed within "
        f"{seen.resume_s * 1000:.0f} ms of each raise; the mirror read on in {seen.spells - seen.mirror_stalled} "
        f"of {seen.spells} spells and holds {len(mirrored)} completed jobs"
    )


@dataclass
class FullSpells:
    """What redis_full saw over the spells in which Redis was full."""

    spells: int = 0
    stalled: int = 0  # spells with jobs waiting or running and none finished
    mirror_stalled: int = 0  # spells in which the mirror did not read up to the last event within 5 s
    finished: int = 0  # jobs finished while Redis was full
    seconds: float = 0.0
    resume_s: float = 0.0  # the longest wait, after a raise, for the producers' next accepted send
    overshoot: int = 0  # the most Redis used past maxmemory (bytes)


def _full_spell(ctx: Ctx, seen: FullSpells, limit: int, step: int) -> int:
    """Redis has just refused a send: stop workers (SIGKILL or SIGTERM, in turn) and wait for their replacements
    to start, let it stay full for 0.5-1.5 s more, check that jobs finished and the mirror read meanwhile, then
    raise maxmemory (the operator's answer) and wait for the producers to be accepted again. Returns the new
    limit."""
    seen.spells += 1
    began = time.monotonic()
    completed = ctx.client.counts(QUEUE).completed
    for i in range(int(ctx.size(1, 2))):  # a worker stops, and its replacement must start, while Redis is full
        ctx.sleep(0.3, 0.8)
        if (seen.spells + i) % 2:
            ctx.term_a_worker(grace=2 * LEASE_S)  # graceful: its last reports and its goodbye must go through
        else:
            ctx.kill_a_worker()
        ctx.cluster.wait_started(list(ctx.cluster.workers.values()))
    end = time.monotonic() + ctx.rng.uniform(0.5, 1.5)
    while time.monotonic() < end:
        seen.overshoot = max(seen.overshoot, _used_memory(ctx) - limit)
        time.sleep(0.05)
    counts = ctx.client.counts(QUEUE)
    finished = counts.completed - completed
    seen.finished += finished
    seen.stalled += finished == 0 and counts.queued + counts.running > 0
    # The mirror reads on while Redis is full: it reaches the events written so far within 5 s.
    written = ctx.r.xinfo_stream(queue_keys(QUEUE).events)["last-generated-id"]
    seen.mirror_stalled += not _wait(partial(_mirror_read_up_to, ctx, written), 5.0)
    # The operator raises maxmemory: past what Redis uses now (draining went over the limit) by a step.
    limit = max(limit, _used_memory(ctx)) + step
    ctx.r.config_set("maxmemory", limit)
    raised = time.monotonic()
    seen.seconds += raised - began
    if _wait(partial(_resumed, ctx, raised), 10):
        seen.resume_s = max(seen.resume_s, _last_accepted(ctx) - raised)
    return limit


# Besides the common gates: nothing refused ran or left a trace, and neither the workers nor the mirror stalled.
REDIS_FULL_GATES = (
    "never_accepted", "refused_left_trace", "full_spells_stalled", "mirror_stalled_spells", "mirror_missing",
)  # fmt: skip


def _refusals(ctx: Ctx) -> int:
    return sum(p.refusals for p in ctx.producers)


def _last_accepted(ctx: Ctx) -> float:
    return max(p.last_accepted for p in ctx.producers)


def _filled(ctx: Ctx, refusals_before: int) -> bool:
    """Redis refused a send since `refusals_before` was read (or the load is over)."""
    return _refusals(ctx) > refusals_before or not ctx.producing()


def _resumed(ctx: Ctx, since: float) -> bool:
    """A producer had a send accepted after `since` (monotonic), or the load is over."""
    return _last_accepted(ctx) > since or not ctx.producing()


def _mirror_read_up_to(ctx: Ctx, entry_id: str) -> bool:
    """The mirror's consumer group has been handed every event up to `entry_id` of the chaos queue."""
    groups = ctx.r.xinfo_groups(queue_keys(QUEUE).events)
    group = next((g for g in groups if g["name"] == keys.MIRROR_GROUP), None)
    return group is not None and parse_id(group["last-delivered-id"]) >= parse_id(entry_id)


def _used_memory(ctx: Ctx) -> int:
    return int(ctx.r.info("memory")["used_memory"])


def _wait(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def power_loss(ctx: Ctx) -> None:
    """#7: a power loss that rolls Redis back. The AOF is copied under load, writing goes on for 0.5-1.5 s, then
    every process dies at once (redis-server, workers, recoverer, mirror) and Redis restarts on the copy: the
    writes after it are gone. The database mirror notices (Redis's epoch is behind the one it recorded) and
    enqueues again the jobs it knew as waiting or running. Jobs accepted after the mirror's last batch are
    known to nothing outside Redis: reported with their age at the power loss, not gated (a
    producer that must not lose them uses the outbox). A job accepted before the AOF copy must survive."""
    ctx.cluster.migrate()
    ctx.cluster.start_recoverer()
    ctx.cluster.start_mirror()
    ctx.workers(3)
    n, rate = int(ctx.size(500, 3000)), ctx.size(100.0, 150.0)
    plan = [
        work(f"o{i}", ctx.rng.choice([0.0, 0.0, 0.05, 0.3]), delay=ctx.rng.uniform(0.5, 3.0) if i % 5 == 0 else None)
        for i in range(n)
    ]
    ctx.produce(plan[::2], rate=rate / 2)
    ctx.produce(plan[1::2], rate=rate / 2, single=True)
    unfinished: set[str] = set()  # accepted, not yet run to completion, and forgotten by a rollback
    for done in itertools.count():
        if not ctx.faulting(done, 1):
            break
        ctx.sleep(1.5, 3.0)
        copy = ctx.workdir / f"aof-copy-{done}"
        copied_at = time.time()  # every job accepted before this is in the copy (appendfsync always)
        ctx.server.copy_aof(copy)
        ctx.ledger.fault("aof_copy", [], copied_at, copied_at)
        ctx.sleep(0.5, 1.5)
        started = time.time()
        victims = [p for p in ctx.cluster.procs if p.alive()]
        ctx.server.kill()
        for proc in victims:
            ctx.cluster.signalled.add(proc.pid)
            proc.popen.kill()
        for proc in victims:
            proc.popen.wait()
        ctx.server.restore_aof(copy)
        restarting = time.time()  # Redis accepts writes again only after this: those this loss cannot take
        ctx.server.start()
        completed = {e.job_id for e in ctx.ledger.executions() if e.outcome == "ok"}
        unfinished |= _missing_from_redis(ctx) - completed
        ctx.ledger.fault("power_loss", [p.pid for p in victims], started, restarting)
        ctx.cluster.start_recoverer()
        ctx.cluster.start_mirror()
        for slot in sorted(ctx.cluster.workers):
            ctx.cluster.start_worker(slot)
    settle_with_mirror(ctx, timeout=120.0)
    with contextlib.closing(sqlite3.connect(ctx.cluster.mirror_db)) as db:
        (restored,) = db.execute(
            "SELECT COALESCE(SUM(restored), 0) FROM jobconsole_mirrorresync WHERE reason = 'redis-rewound'"
        ).fetchone()
    ctx.tallies.update(forgotten_by_redis=len(unfinished), restored_by_mirror=int(restored))
    ctx.notes.append(
        f"unfinished accepted jobs Redis forgot in its rollbacks (lost without a reconciler): {len(unfinished)}; "
        f"the mirror enqueued {restored} again"
    )


def settle_with_mirror(ctx: Ctx, timeout: float) -> None:
    """Settle, then wait until the mirror has read this Redis since the last rollback and applied every event,
    seen twice with a step of its own in between (so a resync that step began has ended) and the queue drained
    both times: jobs the mirror restores must run before the check, and a check made while a mirror restarted
    after the last power loss is still starting would count the jobs it is about to put back as lost."""
    began = time.monotonic()
    ctx.settle(timeout=timeout)
    first_seen: int | None = None  # the Redis epoch when the mirror was first seen caught up
    while time.monotonic() - began < timeout:
        epoch = _mirror_caught_up(ctx)
        if epoch is None or not ctx.drained():
            first_seen = None
        elif first_seen is None:
            first_seen = epoch
        elif epoch > first_seen:
            ctx.notes.append(f"mirror caught up {time.monotonic() - began:.1f}s after the faults stopped")
            return
        ctx.cluster.restart_dead()
        time.sleep(0.2)
    ctx.notes.append(f"mirror did not catch up within {timeout:.0f}s")


def _mirror_caught_up(ctx: Ctx) -> int | None:
    """Redis's epoch counter if the mirror has stepped since Redis last rolled back (the counter is past the one
    the database recorded) and has read and acknowledged every event; otherwise None."""
    events = queue_keys(QUEUE).events
    try:
        with contextlib.closing(sqlite3.connect(ctx.cluster.mirror_db)) as db:
            row = db.execute("SELECT redis_epoch FROM jobconsole_mirrorlease").fetchone()
        pipe = ctx.r.pipeline(transaction=True)
        pipe.get(keys.REDIS_EPOCH)
        pipe.xinfo_stream(events)
        pipe.xinfo_groups(events)
        epoch, stream, groups = pipe.execute()
    except (sqlite3.Error, *RETRYABLE_ERRORS):
        return None
    if row is None or epoch is None or int(epoch) <= row[0]:
        return None
    group = next((g for g in groups if g["name"] == keys.MIRROR_GROUP), None)
    if group is None or group["pending"] or group["last-delivered-id"] != stream["last-generated-id"]:
        return None
    return int(epoch)


def _missing_from_redis(ctx: Ctx) -> set[str]:
    """Accepted jobs (so far) that the restarted Redis does not have."""
    Store(ctx.r).drain(QUEUE)  # jobs still in the intake have no hash yet
    ids = [a.job_id for a in ctx.ledger.accepted()]
    k = queue_keys(QUEUE)
    pipe = ctx.r.pipeline(transaction=False)
    for job_id in ids:
        pipe.exists(k.job(job_id))
    return {job_id for job_id, present in zip(ids, pipe.execute(), strict=True) if not present}


def soak(ctx: Ctx) -> None:
    """#16: every fault above that one machine can inject, mixed at random for minutes (quick: seconds)
    under steady mixed load: worker kill -9, SIGTERM, SIGSTOP past the lease, connection cuts, blackholes and
    delays, redis-server killed (appendfsync always) and frozen, the recoverer killed. Jobs of every kind,
    unique-key jobs among them. Reports Redis's memory before and after; the checker also looks for orphaned
    entries."""
    proxies = [Proxy(ctx.server.port).start(), Proxy(ctx.server.port).start()]
    try:
        memory_before = int(ctx.r.info("memory")["used_memory"])
        recoverer = ctx.cluster.start_recoverer()
        # Worker 0 behind proxy A, worker 1 behind B, workers 2-3 direct.
        ctx.workers(4, lambda slot: f"redis://127.0.0.1:{proxies[slot].port}/0" if slot < 2 else ctx.server.url)
        seconds, rate = ctx.soak_seconds or ctx.size(15.0, 150.0), ctx.size(60.0, 80.0)
        plan: list[Planned] = []
        for i in range(int(seconds * rate)):
            kind = ctx.rng.random()
            if kind < 0.1:
                plan.append(work(f"m{i}", ctx.rng.uniform(0.5, 2.0), task="chaos.requeue"))
            elif kind < 0.3:
                plan.append(work(f"m{i}", ctx.rng.uniform(0.1, 1.0), heartbeat=True))
            elif kind < 0.45:
                plan.append(work(f"m{i}", ctx.rng.choice([0.0, 0.05]), delay=ctx.rng.uniform(0.0, 3.0)))
            elif kind < 0.55:  # their attempt histories are checked too (see flaky)
                plan.append(
                    work(f"m{i}", ctx.rng.choice([0.0, 0.05]), task="chaos.flaky", fail_first=ctx.rng.choice([1, 2]))
                )
            else:
                plan.append(work(f"m{i}", ctx.rng.choice([0.0, 0.0, 0.01, 0.2])))
        ctx.produce(plan[::2], rate=rate / 2)
        ctx.produce(plan[1::2], rate=rate / 2, single=True)
        # Unique keys under every fault (see delayed). Batches only: a re-sent batch keeps its ids, so the ledger
        # learns every job that may hold a key (a lost single enqueue's job could hold one unknown to it).
        ctx.produce(unique_jobs(ctx, int(seconds * 8), keys=8, prefix="mu"), rate=8, batch=3)
        faults: dict[str, int] = {}
        while ctx.producing():
            ctx.sleep(0.5, 1.5)
            fault = ctx.rng.choice(
                ["kill", "kill", "term", "stop", "cut", "blackhole", "delay", "redis_kill", "redis_stop", "recoverer"]
            )
            faults[fault] = faults.get(fault, 0) + 1
            if fault == "kill":
                ctx.kill_a_worker()
            elif fault == "term":
                ctx.term_a_worker(grace=2 * LEASE_S)
            elif fault == "stop":
                ctx.stop_a_worker(3 * LEASE_S)
            elif fault in ("cut", "blackhole", "delay"):
                ctx.disturb(ctx.rng.choice(proxies), Mode(fault))
            elif fault == "redis_kill":
                ctx.kill_redis(0.2, 1.0)
            elif fault == "redis_stop":
                ctx.freeze_redis(2 * LEASE_S)
            else:
                ctx.cluster.kill(recoverer)
                recoverer = ctx.cluster.start_recoverer()
        ctx.notes.append("faults: " + ", ".join(f"{name} {n}" for name, n in sorted(faults.items())))
        ctx.settle(timeout=120.0)
        # A flaky job that faults pushed past its retries is resubmitted, as in flaky; any other dead job is
        # left for the checker (unexpected).
        _resubmit_until_none_dead(ctx, task="chaos.flaky")
        memory_after = int(ctx.r.info("memory")["used_memory"])
        ctx.notes.append(f"redis used_memory {memory_before / 1e6:.1f} MB before, {memory_after / 1e6:.1f} MB after")
    finally:
        for proxy in proxies:
            proxy.close()


GROUP_LIMIT = 3
GROUP_GATES = ("group_over_limit", "group_slots_leaked")


def group_slots(ctx: Ctx) -> None:
    """#14: jobs of a concurrency group (connections 3) among other jobs; workers SIGKILLed while they hold its
    slots, and redis-server killed and restarted on its AOF now and then. Gates: the group's runs at once under
    valid leases (from the ledger and the attempt histories: a killed run ends at its kill, a run whose lease
    was taken away while Redis was down ends then) never pass the limit, and once the queue drained and the
    dead holders' leases ran out, no slot is held. The peak counting zombies too is reported, not gated."""
    ctx.client.define_group(Group(GROUP, connections=GROUP_LIMIT))
    ctx.cluster.start_recoverer()
    ctx.workers(3)
    # Half the jobs in the group, 70 ms on average: the group can start about 40 a second (3 at once), above
    # the 30 a second the load brings it, so the backlog it builds while slots wait for dead holders drains.
    n = int(ctx.size(240, 3000))
    plan = [
        work(f"g{i}", ctx.rng.choice([0.01, 0.05, 0.15]), task="chaos.grouped")
        if i % 2
        else work(f"g{i}", ctx.rng.choice([0.0, 0.01]))
        for i in range(n)
    ]
    ctx.produce(plan, rate=ctx.size(60, 60))
    kills = itertools.count()

    def now_and_then_redis() -> None:
        if next(kills) % 4 == 3:
            ctx.kill_redis(0.2, 1.0)

    _kill_workers_under_load(ctx, now_and_then_redis)
    ctx.settle(timeout=120)
    grouped = [p.spec.id for p in plan if p.spec.task == "chaos.grouped" and p.spec.id]
    valid, raw = _peaks_at_once(ctx, grouped)
    slots = group_keys(GROUP).slots
    _wait(lambda: ctx.r.zcount(slots, Store(ctx.r).time_ms(), "+inf") == 0, 10 * LEASE_S)
    ctx.tallies |= {
        "group_peak": valid,
        "group_peak_with_zombies": raw,
        "group_over_limit": max(0, valid - GROUP_LIMIT),
        "group_slots_leaked": int(ctx.r.zcount(slots, Store(ctx.r).time_ms(), "+inf")),
    }
    ctx.notes.append(f"group {GROUP}: peak {valid} running at once under valid leases, {raw} counting zombies "
                     f"(limit {GROUP_LIMIT})")  # fmt: skip


def _peaks_at_once(ctx: Ctx, job_ids: list[str]) -> tuple[int, int]:
    """The most runs of `job_ids` at once in the ledger: under valid leases, and counting zombies too. A run whose
    process was killed ends at the kill; under its lease, it ends when its attempt was closed in Redis (acked,
    failed, or taken away by the recoverer)."""
    killed_at: dict[int, list[float]] = {}
    for fault in ctx.ledger.faults():
        if fault.kind in {"kill", "crash"}:
            for pid in fault.pids:
                killed_at.setdefault(pid, []).append(fault.started)
    jobs = dict(zip(job_ids, ctx.client.queries.jobs.by_id([(QUEUE, i) for i in job_ids], history=True), strict=True))
    wanted = set(job_ids)
    valid: list[tuple[float, int]] = []
    raw: list[tuple[float, int]] = []
    for run in ctx.ledger.executions():
        if run.job_id not in wanted:
            continue
        end = run.ended
        if end is None:
            end = min((t for t in killed_at.get(run.pid, []) if t >= run.started), default=math.inf)
        raw += [(run.started, 1), (end, -1)]
        job = jobs.get(run.job_id)
        lease = match(run, leases(job)) if job is not None else None
        if lease is not None:
            valid += [(run.started, 1), (min(end, lease.end), -1)]
    return _peak(valid), _peak(raw)


def _peak(edges: list[tuple[float, int]]) -> int:
    peak = now = 0
    for _, step in sorted(edges):  # an end at the same instant as a start comes first (-1 sorts before 1)
        now += step
        peak = max(peak, now)
    return peak


WORKFLOW_GATES = ("released_twice", "started_early", "left_waiting", "workflows_not_created")


def workflows(ctx: Ctx) -> None:
    """Workflows (docs/workflows.md) under kill -9 of workers and of redis-server (appendfsync always): each a chain,
    a fan-out of hundreds with a callback (a chord), nested groups of chains and a diamond, created one after another
    while the faults go on (each creation retried under its workflow id until Redis answers: idempotent). Every
    dependent is released exactly once (its `released` events), starts only after every run of its parents ended,
    none is left waiting, and every step runs (the checker's gates: a step ran twice only when a run of its own was
    interrupted)."""
    ctx.cluster.start_recoverer()
    ctx.workers(3)
    book = WorkflowBook(ctx)
    count = int(ctx.size(3, 10))
    creator = threading.Thread(target=book.create_paced, args=(count,))
    creator.start()
    for done in itertools.count():
        if not (creator.is_alive() or done < 3):
            break
        ctx.sleep(0.4, 1.2)
        if done % 3 == 2:
            ctx.kill_redis(0.2, 1.0)
        else:
            ctx.kill_a_worker()
    creator.join()
    book.judge(count)


class WorkflowBook:
    """The workflows a scenario creates (each a chain, a chord of `fan` members, nested groups of chains and a
    diamond; `queues`: the steps spread over these in turn, the first one first) and what they are judged on."""

    def __init__(
        self, ctx: Ctx, queues: Sequence[str] = (QUEUE,), accepted: Callable[[], object] | None = None
    ) -> None:
        self.ctx, self.queues, self.accepted = ctx, list(queues), accepted
        self.fan = int(ctx.size(60, 400))
        self.parents: dict[str, list[str]] = {}  # job id -> its parents' job ids
        self.queue_of: dict[str, str] = {}  # job id -> its queue
        self.made_ids: list[str] = []
        self.failed = 0
        self._turn = itertools.count()  # each workflow's steps go to the queues in turn, the first step first

    def _spec(self, key: str) -> "JobSpec":
        from jobconsole.core import JobSpec

        queue = self.queues[next(self._turn) % len(self.queues)]
        seconds = self.ctx.rng.choice([0.0, 0.02, 0.1, 0.3])
        return JobSpec(task="chaos.work", queue=queue, params={"key": key, "seconds": seconds})

    def create_paced(self, count: int) -> None:
        """Create `count` workflows, a random 0.3-1 s apart (a thread's target, while the scenario faults)."""
        for index in range(count):
            self.create(index)
            self.ctx.sleep(0.3, 1.0)

    def create(self, index: int) -> None:
        from jobconsole.core import Step
        from jobconsole.core.compose import chain, chord, group
        from jobconsole.core.ids import new_job_id

        w, spec = f"wf{index}", self._spec
        self._turn = itertools.count()
        flow = group(
            chain(spec(f"{w}.c0"), spec(f"{w}.c1"), spec(f"{w}.c2"), name="chain", pass_results=None),
            chord([spec(f"{w}.f{i}") for i in range(self.fan)], spec(f"{w}.callback"), name="fan", pass_results=None),
            group(chain(spec(f"{w}.n0"), spec(f"{w}.n1"), pass_results=None),
                  chain(spec(f"{w}.n2"), spec(f"{w}.n3"), pass_results=None), name="nested"),
            name="g",
        )  # fmt: skip
        steps = [*flow, Step("top", spec(f"{w}.top")), Step("left", spec(f"{w}.left"), after=["top"]),
                 Step("right", spec(f"{w}.right"), after=["top"]),
                 Step("bottom", spec(f"{w}.bottom"), after=["left", "right"])]  # fmt: skip
        workflow_id, deadline, first_send = new_job_id(), time.monotonic() + 60, time.time()
        while True:
            try:
                made = self.ctx.client.enqueue_workflow(steps, name=w, id=workflow_id)
                if self.accepted is not None:
                    self.accepted()
                break
            except RETRYABLE_ERRORS:
                if time.monotonic() > deadline:
                    self.failed += 1
                    return
                time.sleep(0.1)
        ids = made.job_ids_by_step
        for s in steps:
            self.parents[ids[s.name]] = [ids[p] for p in s.parents()]
            self.queue_of[ids[s.name]] = s.spec.queue or QUEUE
        self.made_ids.extend(ids.values())
        # Not before its first send: a step may start before `accepted` returned (a replica's acknowledgement).
        self.ctx.ledger.accept([Accepted(job_id, "chaos.work", "completed", first_send) for job_id in ids.values()])

    def waiting(self) -> int:
        return sum(int(self.ctx.r.zcard(queue_keys(q).sets["waiting"])) for q in self.queues)

    def drained(self) -> bool:
        """Nothing ready, running or waiting in any of the queues."""
        counts = [self.ctx.client.counts(q) for q in self.queues]
        return sum(c.queued + c.scheduled + c.running for c in counts) == 0 and self.waiting() == 0

    def judge(self, count: int) -> None:
        ctx = self.ctx
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # drained: nothing ready or running, and nothing left waiting either
            with contextlib.suppress(*RETRYABLE_ERRORS, redis.RedisError):
                if self.drained():
                    break
            time.sleep(0.2)
        ctx.settle(timeout=60.0)
        runs: dict[str, list[tuple[float, float | None]]] = {}
        for e in ctx.ledger.executions():
            runs.setdefault(e.job_id, []).append((e.started, e.ended))
        released: dict[str, int] = {}
        for q in self.queues:
            entries = cast(list[tuple[str, dict[str, str]]], ctx.r.xrange(queue_keys(q).events, "-", "+"))
            for _id, fields in entries:
                if fields.get("event") == "released":
                    released[fields["job"]] = released.get(fields["job"], 0) + 1
        early = 0
        for job_id, ups in self.parents.items():
            first = min((start for start, _end in runs.get(job_id, [])), default=None)
            ends = [end for p in ups for _start, end in runs.get(p, []) if end is not None]
            if first is not None and ends and first < max(ends):
                early += 1
        dependents = [job_id for job_id, ups in self.parents.items() if ups]
        ctx.tallies.update(
            released_twice=sum(1 for job_id in self.parents if released.get(job_id, 0) > 1),
            released_never=sum(1 for job_id in dependents if released.get(job_id, 0) == 0),
            started_early=early,
            left_waiting=self.waiting(),
            workflows_not_created=self.failed,
            workflow_steps=len(self.made_ids),
            dependents=len(dependents),
        )
        ctx.notes.append(f"{count - self.failed} workflows of {len(self.made_ids) // max(1, count - self.failed)} steps"
                         f" each over {len(self.queues)} queue(s)")  # fmt: skip


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in [
        Scenario("kill_loop", "kill -9 workers in a loop", kill_loop),
        Scenario("worker_lost", "kill -9 one worker at a time: kill to re-run", worker_lost),
        Scenario("kill_before_ack", "kill between success and ack", kill_before_ack),
        Scenario("sigterm", "SIGTERM, grace, SIGKILL", sigterm),
        Scenario("sigstop", "worker frozen past its lease", sigstop),
        Scenario("redis_kill_always", "redis-server kill -9 (appendfsync always)", _redis_kill, "always"),
        Scenario("redis_kill_everysec", "redis-server kill -9 (appendfsync everysec)", _redis_kill, "everysec"),
        Scenario("redis_freeze", "redis-server frozen past the lease", redis_freeze),
        Scenario("network", "TCP proxy: RST, blackhole, delay", network),
        Scenario(
            "poison",
            "poison jobs crash their worker; garbled payloads",
            poison,
            extra_gates=("garbled_not_dead_at_once",),
        ),
        Scenario("flaky", "failing handlers, kills, resubmits: histories", flaky),
        Scenario("delayed", "delayed and unique jobs; workers and promoter killed", delayed),
        Scenario("clock_skew", "worker and promoter clocks 300 s off", clock_skew),
        Scenario("cpu_bound", "CPU-bound tasks starve nothing", cpu_bound, extra_gates=("live_worker_leases_lost",)),
        Scenario("intake", "busy workers: jobs wait in the intake; kills", intake),
        Scenario(
            "redis_full",
            "Redis at maxmemory: enqueues refused, workers drain",
            redis_full,
            extra_gates=REDIS_FULL_GATES,
        ),
        Scenario(
            "group_slots", "concurrency group, workers killed holding slots", group_slots, extra_gates=GROUP_GATES
        ),
        Scenario("power_loss", "Redis rolled back by a power loss; the mirror restores", power_loss),
        Scenario("soak", "every fault above, mixed at random", soak),
        Scenario(
            "workflows",
            "workflows: chains, fan-ins, diamonds; workers and redis-server killed",
            workflows,
            extra_gates=WORKFLOW_GATES,
        ),
        Scenario(
            "cluster_failover",
            "Redis Cluster: a primary killed, its replica promoted",
            cluster_failover,
            "everysec",
            extra_gates=CLUSTER_GATES,
        ),
        Scenario(
            "cluster_workflows",
            "workflows across slots on Redis Cluster: workers killed, a primary failed over",
            cluster_workflows,
            "everysec",
            extra_gates=CLUSTER_WORKFLOW_GATES,
        ),
    ]
}
