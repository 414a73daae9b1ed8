"""The checker: compares the ledger (what producers were told and what tasks really did) with what Redis says
happened to each job (its state and its attempt history), in the spirit of Jepsen's total-queue checker."""

import contextlib
import math
import sqlite3
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import redis

from chaos.ledger import Accepted, Duplicate, Execution, Fault, Ledger
from chaos.tasks import FLAKY_DELAY_CAP_S, FLAKY_DELAY_S, FLAKY_RETRIES, QUEUE, FlakyError
from jobconsole.core.backoff import Backoff, retry_delay
from jobconsole.core.job import Attempt, Job
from jobconsole.core.keys import queue_keys
from jobconsole.core.states import STATES

EPS = 0.002  # Redis stamps times in whole milliseconds; the ledger in float seconds
RETRY_BACKOFF_MAX_S = 5.0  # the dispatcher's longest wait between tries while Redis is unreachable (dispatcher.py)
PROCESS_FAULTS = {"kill", "stop", "term", "crash", "power_loss"}
MARKS = {"aof_copy"}  # ledger rows that mark a moment (when the AOF was copied), not a fault
SPARED = {"requeued", "completed"}  # how an on_shutdown=requeue attempt may end under a graceful SIGTERM
FLAKY_ERROR = f"{FlakyError.__module__}.{FlakyError.__qualname__}"  # as the engine records a class


@dataclass
class Report:
    accepted: int = 0
    executions: int = 0
    lost: int = 0  # accepted, yet gone from Redis, never finished, or "completed" without a successful run
    # Lost, but accepted in the last FSYNC_WINDOW_S before a kill of a redis-server running appendfsync
    # everysec: Redis itself may ack a write it has not yet written to its AOF (it postpones the write while
    # a background fsync runs, for up to 2 s), so these are Redis's documented loss, not the job system's.
    lost_in_fsync_window: int = 0
    # Lost in a simulated power loss (Redis rolled back to an older AOF) before the database mirror had seen
    # them: nothing outside Redis knew them, so no reconciler can put them back (the producer's outbox can).
    lost_in_rollback: int = 0
    # The longest such a job had been accepted when Redis rolled back: how far behind the mirror was (within
    # the scenario's copy-to-kill window; a mirror still starting after the previous power loss shows here).
    rollback_loss_age: float | None = None
    finished_in_mirror_only: int = 0  # ran and completed; Redis forgot them in the rollback, the database did not
    unexpected_dead: int = 0  # expected to complete, dead-lettered instead
    overlaps: int = 0  # pairs of executions of one job whose valid leases overlap, or that shared one lease
    unmatched: int = 0  # executions with no lease in the job's history (counted as valid throughout)
    rerun_after_ack: int = 0  # executions that began after the job's completion was acknowledged
    early: int = 0  # executions that began before the job's run_at
    effects_applied: int = 0
    effect_attempts: int = 0
    duplicate_effects: int = 0
    wallclock_overlaps: int = 0  # also counting zombies whose lease had expired (their reports are refused)
    live_worker_leases_lost: int = 0  # worker_lost attempts of workers the harness never stopped or killed
    shutdown_attempts_used: int = 0  # on_shutdown=requeue jobs charged an attempt by a graceful SIGTERM
    stale_reports: int = 0
    never_accepted: int = 0  # jobs that ran though no enqueue of theirs was accepted (an unknown outcome, or a leak)
    orphans: int = 0  # Redis entries left inconsistent once the queue drained (see leftovers())
    histories_checked: int = 0  # completed chaos.flaky jobs whose attempt history was read attempt by attempt
    history_defects: int = 0  # of those, histories with a defect (see history_defects())
    unique_jobs: int = 0  # accepted jobs that carried a unique key
    unique_duplicates: int = 0  # enqueues refused because their unique key was held
    unique_overlaps: int = 0  # pairs of jobs with one unique key that were live at the same time
    unique_refused_wrongly: int = 0  # duplicates refused for a holder that was not live (or not that key's job)
    dlq_attempts: list[int] = field(default_factory=list)
    recovery: list[float] = field(default_factory=list)
    rerun: list[float] = field(default_factory=list)  # process faults: fault -> the next run of each job it hit
    notes: list[str] = field(default_factory=list)

    def percentile(self, q: float, values: list[float] | None = None) -> float | None:
        """The q-th percentile of `values` (default: the recovery times)."""
        values = self.recovery if values is None else values
        if not values:
            return None
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def load_jobs(r: "redis.Redis", ids: list[str], queues: Sequence[str] = (QUEUE,)) -> dict[str, Job | None]:
    """Each job by id, from whichever of `queues` holds it."""
    jobs: dict[str, Job | None] = dict.fromkeys(ids)
    for queue in queues:
        k = queue_keys(queue)
        for start in range(0, len(ids), 1000):
            chunk = [job_id for job_id in ids[start : start + 1000] if jobs[job_id] is None]
            pipe = r.pipeline(transaction=False)
            for job_id in chunk:
                pipe.hgetall(k.job(job_id))
                pipe.lrange(k.attempts(job_id), 0, -1)
            replies = pipe.execute() if chunk else []
            for i, job_id in enumerate(chunk):
                h, attempts = cast(dict[str, str], replies[2 * i]), cast(list[str], replies[2 * i + 1])
                jobs[job_id] = Job.from_hash(h, attempts) if h else None
    return jobs


@dataclass(frozen=True, slots=True)
class Lease:
    worker: str
    attempt: int
    start: float
    end: float
    outcome: str
    pid: int


def leases(job: Job) -> list[Lease]:
    """Every lease of the job, from its attempt history, plus the open one if it is still running."""
    out = [_lease(a) for a in job.history]
    if job.state.value == "running" and job.started_at is not None:
        out.append(Lease(job.worker, job.attempts, job.started_at.timestamp(), math.inf, "running", 0))
    return out


def _lease(a: Attempt) -> Lease:
    start = a.started_at.timestamp() if a.started_at else 0.0
    end = a.ended_at.timestamp() if a.ended_at else math.inf
    return Lease(a.worker, a.attempt, start, end, a.outcome, a.pid)


def match(execution: Execution, held: list[Lease]) -> Lease | None:
    """The lease this execution ran under: same worker and attempt, the latest one granted before it began."""
    candidates = [
        lease for lease in held
        if lease.worker == execution.worker and lease.attempt == execution.attempt
        and lease.start <= execution.started + EPS
    ]  # fmt: skip
    return max(candidates, key=lambda lease: lease.start, default=None)


def count_overlaps(intervals: list[tuple[float, float]]) -> int:
    """Pairs of intervals that overlap by more than EPS."""
    ordered = sorted(intervals)
    pairs = 0
    for i, (_, end) in enumerate(ordered):
        for start, _ in ordered[i + 1 :]:
            if start >= end - EPS:
                break
            pairs += 1
    return pairs


FSYNC_WINDOW_S = 2.5  # Redis postpones an everysec AOF write for up to 2 s; plus the ledger's own lag


def check(
    ledger: Ledger, r: "redis.Redis", stale_reports: int = 0, *, everysec: bool = False, mirror_db: Path | None = None,
    queues: Sequence[str] = (QUEUE,),
) -> Report:  # fmt: skip
    accepted = ledger.accepted()
    duplicates = ledger.duplicates()
    jobs = load_jobs(r, sorted({a.job_id for a in accepted} | {d.holder for d in duplicates}), queues)
    report = judge(
        accepted, ledger.executions(), ledger.faults(), jobs, everysec=everysec,
        mirrored=mirrored_states(mirror_db) if mirror_db is not None else None, duplicates=duplicates,
    )  # fmt: skip
    report.effects_applied, report.effect_attempts, report.duplicate_effects = ledger.effect_counts()
    report.stale_reports = stale_reports
    found = [what for queue in queues for what in leftovers(r, queue)]
    report.orphans = len(found)
    report.notes += [f"orphan: {what}" for what in found[:10]]
    return report


# Which set holds a job in each state (the state table's); a drained queue has no job waiting or running.
STATE_SETS = {s.value: info.zset for s, info in STATES.items()}
# A job's links to other jobs (lua/_deps.lua) live beside its hash: not job hashes.
LINK_SUFFIXES = (":deps", ":ended", ":results", ":children", ":relayed")


LIVE_STATES = {"queued", "scheduled", "retrying", "running"}  # not finished: a job holds its unique key in these


def leftovers(r: "redis.Redis", queue: str = QUEUE) -> list[str]:
    """What the faults left behind in Redis that no job accounts for: a job hash missing from the set of its
    state or listed in another, a set member or attempt history without a job, intake entries nothing
    drained, unique keys held by finished jobs. Each is a description; a consistent queue yields none."""
    k = queue_keys(queue)
    members = {name: set(cast(list[str], r.zrange(k.sets[name], 0, -1))) for name in set(STATE_SETS.values())}
    for group in cast(set[str], r.smembers(k.groups)):  # jobs held for a concurrency group's slot are queued too
        members["ready"] |= set(cast(list[str], r.zrange(k.held(group), 0, -1)))
    hashes: set[str] = set()
    histories: set[str] = set()
    for key in r.scan_iter(match=k.job_prefix + "*", count=1000):
        if not key.endswith(LINK_SUFFIXES):
            (histories if key.endswith(":attempts") else hashes).add(key)
    found: list[str] = []
    ids = sorted(key.removeprefix(k.job_prefix) for key in hashes)
    pipe = r.pipeline(transaction=False)
    for job_id in ids:
        pipe.hget(k.job(job_id), "state")
    for job_id, state in zip(ids, pipe.execute(), strict=True):
        home = STATE_SETS.get(state or "")
        listed = sorted(name for name, held in members.items() if job_id in held)
        if home is None or listed != [home]:
            found.append(f"job {job_id} in state {state!r} is listed in {listed or 'no set'}")
    known = set(ids)
    for name, held in members.items():
        found += [f"{name} lists {job_id}, which has no job hash" for job_id in sorted(held - known)]
    found += [
        f"attempt history {key} without its job" for key in sorted(histories) if key[: -len(":attempts")] not in hashes
    ]
    if intake_left := r.xlen(k.intake):
        found.append(f"{intake_left} intake entries never made into jobs")
    for ukey, holder in cast(dict[str, str], r.hgetall(k.unique)).items():
        if r.hget(k.job(holder), "state") not in LIVE_STATES:
            found.append(f"unique key {ukey!r} still held by finished job {holder}")
    return found


def mirrored_states(path: Path) -> dict[str, str]:
    """Job id -> state, as the database mirror last wrote it."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        return dict(db.execute("SELECT id, state FROM jobconsole_job").fetchall())


def judge(
    accepted_jobs: list[Accepted], executions: list[Execution], faults: list[Fault], jobs: Mapping[str, Job | None],
    *, everysec: bool = False, mirrored: Mapping[str, str] | None = None, duplicates: Sequence[Duplicate] = (),
) -> Report:  # fmt: skip
    """Everything but the side effects, from plain data (so the checker itself can be tested)."""
    accepted = {a.job_id: a for a in accepted_jobs}
    by_job: dict[str, list[Execution]] = defaultdict(list)
    for e in sorted(executions, key=lambda e: e.started):
        by_job[e.job_id].append(e)
    report = Report(accepted=len(accepted), executions=len(executions))
    copies = [f.started for f in faults if f.kind == "aof_copy"]
    faults = [f for f in faults if f.kind not in MARKS]  # moments, not faults: no outage, no recovery time
    faulted = {pid for f in faults if f.kind in PROCESS_FAULTS for pid in f.pids}
    termed_at = {pid: f.started for f in faults if f.kind == "term" for pid in f.pids}
    # Redis and network faults: a worker cut off from Redis cannot keep or give back its leases either, and after
    # one it may wait out its retry backoff (up to RETRY_BACKOFF_MAX_S) before it reaches Redis again.
    outages = [(f.started, f.ended + RETRY_BACKOFF_MAX_S) for f in faults if f.kind not in PROCESS_FAULTS]
    killed = {pid for f in faults if f.kind in {"kill", "crash"} for pid in f.pids}
    matched: dict[Execution, Lease] = {}  # each execution's lease
    unknown = set(by_job) - set(accepted)
    report.never_accepted = len(unknown)
    if unknown:
        report.notes.append(f"{len(unknown)} executed job(s) were never accepted (enqueue outcome unknown)")

    lost: list[str] = []
    for job_id, a in accepted.items():
        job = jobs.get(job_id)
        runs = by_job.get(job_id, [])
        before = report.lost
        _judge_outcome(report, a, job, runs)
        if report.lost > before:
            lost.append(job_id)
        if job is None:
            continue
        held = leases(job)
        _judge_leases(report, runs, held, matched)
        if job.task == "chaos.flaky" and job.state.value == "completed":
            report.histories_checked += 1
            if defects := history_defects(job, runs):
                report.history_defects += 1
                report.notes += [f"history of {job_id}: {d}" for d in defects[:3]]
        report.early += sum(1 for e in runs if e.started < a.not_before - EPS)
        for lease in held:
            if lease.outcome == "worker_lost" and lease.pid not in faulted:
                report.live_worker_leases_lost += 1
            if job.task == "chaos.requeue" and lease.pid in termed_at.keys() - killed and lease.outcome not in SPARED:
                at = termed_at[lease.pid]
                held_then = lease.start <= at <= lease.end  # a lease lost earlier (another fault) is not the term's
                # A Redis or network fault during the lease may have ended it (the task stopped itself by
                # LeaseLost, or the lease ran out), whenever the attempt was finally reported.
                cut_off = any(start <= lease.end and end >= lease.start for start, end in outages)
                report.shutdown_attempts_used += held_then and not cut_off
    report.recovery = recovery_times(faults, executions, matched)
    report.rerun = rerun_times(faults, executions, matched)
    _judge_unique_keys(report, accepted_jobs, duplicates, jobs)
    kills = [f.started for f in faults if f.kind == "redis_kill"]
    # A power loss's window: jobs accepted from the AOF copy it restored until Redis restarted (its `ended`; the
    # ledger stamps a job after Redis replied, so one stamped just after the kill began may still be in it).
    rollbacks = [
        (max((c for c in copies if c <= f.started), default=-math.inf), f.started, f.ended or f.started)
        for f in sorted(faults, key=lambda f: f.started)
        if f.kind == "power_loss"
    ]
    for job_id in lost:
        a, runs = accepted[job_id], by_job.get(job_id, [])
        if jobs.get(job_id) is not None:
            continue  # Redis still has it: stuck, not forgotten
        if everysec and not runs and any(0 <= kill - a.accepted_at <= FSYNC_WINDOW_S for kill in kills):
            report.lost -= 1
            report.lost_in_fsync_window += 1
        elif mirrored is not None and (window := next((w for w in rollbacks if a.accepted_at < w[2]), None)):
            copied, killed_at, _ = window
            if mirrored.get(job_id) == "completed" and any(e.outcome == "ok" for e in runs):
                report.lost -= 1
                report.finished_in_mirror_only += 1
            elif job_id not in mirrored:
                if a.accepted_at < copied:  # Redis had it on disk before the copy it was restored from: a real loss
                    report.notes.append(f"job {job_id} was accepted before the AOF copy and is gone")
                    continue
                report.lost -= 1
                report.lost_in_rollback += 1
                age = max(0.0, killed_at - a.accepted_at)
                report.rollback_loss_age = max(report.rollback_loss_age or 0.0, age)
    return report


def _judge_outcome(report: Report, a: Accepted, job: Job | None, runs: list[Execution]) -> None:
    state = job.state.value if job is not None else "missing"
    if a.expect == "dead":
        if state == "dead" and job is not None:
            report.dlq_attempts.append(job.attempts)
        else:
            report.lost += 1
        return
    if state == "completed" and any(e.outcome == "ok" for e in runs):
        return
    if state in {"dead", "failed"}:
        report.unexpected_dead += 1
    else:
        report.lost += 1  # missing, stuck unfinished, or "completed" without any successful run


def _judge_unique_keys(
    report: Report, accepted: Sequence[Accepted], duplicates: Sequence[Duplicate], jobs: Mapping[str, Job | None]
) -> None:
    """At most one live job per unique key (reliability #14), and a duplicate only while one is live.

    A job is live from its acceptance to its end (Redis's enqueued_at and finished_at, from one clock); two
    jobs with one key whose lives overlap mean the key let a second job in. A duplicate's holder must be an
    accepted job with that key that had not finished when the producer sent the refused job: a holder already
    finished then (its key leaked) would turn every later job with that key away, which is a silent loss.
    A job an operator brought back after it ended would count as live from its first acceptance: no scenario
    resubmits unique-key jobs (chaos.work allows 25 retries, so none ends dead)."""

    def end_of_life(job: Job) -> float:
        if job.state.value in LIVE_STATES or job.finished_at is None:
            return math.inf
        return job.finished_at.timestamp()

    lives: dict[str, list[tuple[float, float]]] = defaultdict(list)
    keyed = {a.job_id: a.unique_key for a in accepted if a.unique_key}
    for job_id, ukey in keyed.items():
        job = jobs.get(job_id)
        if job is None or job.enqueued_at is None:
            continue  # lost: counted as such
        lives[ukey].append((job.enqueued_at.timestamp(), end_of_life(job)))
    report.unique_jobs = len(keyed)
    report.unique_duplicates = len(duplicates)
    report.unique_overlaps = sum(count_overlaps(spans) for spans in lives.values())
    for d in duplicates:
        holder = jobs.get(d.holder)
        ended_before = holder is not None and end_of_life(holder) < d.sent_at - EPS
        if keyed.get(d.holder) != d.unique_key or ended_before:
            report.unique_refused_wrongly += 1
            if report.unique_refused_wrongly <= 3:
                report.notes.append(f"job {d.job_id} refused as a duplicate of {d.holder}, which was not live")


def _judge_leases(report: Report, runs: list[Execution], held: list[Lease], matched: dict[Execution, Lease]) -> None:
    valid: list[tuple[float, float]] = []
    actual: list[tuple[float, float]] = []
    used: dict[Lease, int] = defaultdict(int)
    acked = [lease.end for lease in held if lease.outcome == "completed"]
    for e in runs:
        lease = match(e, held)
        end = e.ended if e.ended is not None else (lease.end if lease else e.started)
        actual.append((e.started, end))
        if lease is None:
            report.unmatched += 1
            valid.append((e.started, end))
            continue
        used[lease] += 1
        matched[e] = lease
        # Valid only while Redis held this lease: a zombie that runs on after its lease was taken is not.
        start, stop = max(e.started, lease.start), min(end, lease.end)
        if stop > start:
            valid.append((start, stop))
        if acked and e.started > min(acked) + EPS:
            report.rerun_after_ack += 1
    report.overlaps += count_overlaps(valid) + sum(n - 1 for n in used.values() if n > 1)
    report.wallclock_overlaps += count_overlaps(actual)


def history_defects(job: Job, runs: list[Execution]) -> list[str]:
    """What is wrong with a completed chaos.flaky job's attempt history (empty: nothing). It must hold every
    attempt, numbered 1..n in order and not overlapping, each with its worker, pid and times (an attempt a
    graceful shutdown gave back, `requeued`, does not count: the next one runs under the same number); the planned
    failures as `failed` with the error's class, traceback and top frame (or `worker_lost` when a kill got
    there first), matched by a failing run in the ledger; `completed` once, last; nothing but kills between;
    and no retry of a failure before the smallest delay its backoff allows. The ledger's runs of the job
    must never go back to a lower attempt number."""
    fail_first = int(job.params.get("fail_first", 0))
    history = job.history
    defects: list[str] = []
    counted = [a.attempt for a in history if a.outcome != "requeued"]
    if counted != list(range(1, len(counted) + 1)) or len(counted) != job.attempts:
        defects.append(f"attempt numbers {[a.attempt for a in history]} for {job.attempts} attempts")
    if [a.outcome for a in history].count("completed") != 1 or history[-1].outcome != "completed":
        defects.append("not exactly one completed attempt, the last one")
    for a, after in zip(history, [*history[1:], None], strict=True):
        if a.started_at is None or a.ended_at is None or a.ended_at < a.started_at or not a.worker or a.pid <= 0:
            defects.append(f"attempt {a.attempt}: worker, pid or times missing")
            continue
        if after is not None and after.started_at is not None and after.started_at < a.ended_at:
            defects.append(f"attempt {after.attempt} began before attempt {a.attempt} ended")
        if a.outcome == "failed":
            if a.attempt > fail_first:
                defects.append(f"attempt {a.attempt} failed; only the first {fail_first} should")
            if (
                a.error_class != FLAKY_ERROR
                or f"{FlakyError.__name__}: planned failure" not in a.traceback
                or ("chaos/tasks.py" not in a.top_frame)
            ):
                defects.append(f"attempt {a.attempt}: error class, traceback or top frame missing")
            if not any(
                e.attempt == a.attempt and e.worker == a.worker and e.outcome == FlakyError.__name__ for e in runs
            ):
                defects.append(f"attempt {a.attempt} recorded as failed without a failing run in the ledger")
            if after is not None and after.started_at is not None and a.attempt <= FLAKY_RETRIES:
                # chaos.flaky's backoff is exponential with equal jitter: never under half the exponential delay.
                least = retry_delay(Backoff.EXPONENTIAL, FLAKY_DELAY_S, a.attempt, FLAKY_DELAY_CAP_S) / 2
                waited = (after.started_at - a.ended_at).total_seconds()
                if waited < least - EPS:
                    defects.append(f"attempt {after.attempt} began {waited:.3f}s after a failure, backoff >= {least}s")
        elif a.outcome == "completed":
            if a.attempt <= fail_first:
                defects.append(f"attempt {a.attempt} completed; the first {fail_first} fail")
        elif a.outcome == "requeued":
            if after is None or after.attempt != a.attempt:
                defects.append(f"attempt {a.attempt} was given back but not run again under its number")
        elif a.outcome != "worker_lost":
            defects.append(f"attempt {a.attempt}: unexpected outcome {a.outcome!r}")
    in_order = [e.attempt for e in sorted(runs, key=lambda e: e.started)]
    if in_order != sorted(in_order):
        defects.append(f"the ledger's runs went back to a lower attempt: {in_order}")
    return defects


def recovery_times(faults: list[Fault], executions: list[Execution], matched: dict[Execution, Lease]) -> list[float]:
    """Process faults: for each job running in the hit process, fault -> its lease was taken away by the
    recoverer or given back (it is queued again; when it runs next also depends on the backlog).
    Redis and network faults: fault healed -> the next execution finished (seconds until work flows again)."""
    samples: list[float] = []
    ends = sorted(e.ended for e in executions if e.ended is not None)
    last_trace: dict[int, float] = defaultdict(float)
    for e in executions:
        last_trace[e.pid] = max(last_trace[e.pid], e.ended or e.started)
    for f in faults:
        if f.kind in PROCESS_FAULTS:
            # A crash is noticed late by the harness; the process's last ledger write is when it died.
            at = last_trace[min(f.pids)] if f.kind == "crash" and f.pids else f.started
            for e in executions:
                lease = matched.get(e)
                taken = lease is not None and lease.outcome in {"worker_lost", "requeued"}
                if taken and lease and e.pid in f.pids and e.started <= at <= lease_end(e, lease):
                    samples.append(lease.end - at)
        else:
            after = next((t for t in ends if t > f.ended), None)
            if after is not None:
                samples.append(after - f.ended)
    return samples


def rerun_times(faults: list[Fault], executions: list[Execution], matched: dict[Execution, Lease]) -> list[float]:
    """Process faults (kill, stop, crash): for each job whose lease the hit process lost, from the fault to the
    job's next run elsewhere (when a worker let it begin): what an operator waits after a worker dies."""
    by_job: dict[str, list[Execution]] = defaultdict(list)
    for e in executions:
        by_job[e.job_id].append(e)
    last_trace: dict[int, float] = defaultdict(float)
    for e in executions:
        last_trace[e.pid] = max(last_trace[e.pid], e.ended or e.started)
    samples: list[float] = []
    for f in faults:
        if f.kind not in PROCESS_FAULTS:
            continue
        at = last_trace[min(f.pids)] if f.kind == "crash" and f.pids else f.started
        for e in executions:
            lease = matched.get(e)
            if lease is None or lease.outcome != "worker_lost" or e.pid not in f.pids:
                continue
            if not e.started <= at <= lease_end(e, lease):
                continue
            later = [n.started for n in by_job[e.job_id] if n.started > at and n.pid not in f.pids]
            if later:
                samples.append(min(later) - at)
    return samples


def lease_end(e: Execution, lease: Lease | None) -> float:
    return e.ended if e.ended is not None else (lease.end if lease else e.started)


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None
