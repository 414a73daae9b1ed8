"""Real `manage.py runworker` processes against a real redis-server: a worker killed with SIGKILL, a
worker frozen with SIGSTOP past its lease, SIGTERM under each on_shutdown policy, Redis restarted under
a running worker, and jobs for a task the worker does not have.

The tasks (tests/tasks.py) append 'start'/'end' lines to a ledger file, so executions are counted from
outside processes that get killed. Every subprocess is killed in the fixture teardown, even on failure.
"""

import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis

import tests.tasks  # noqa: F401  (registers the test tasks here, so the client enqueues them with their leases)
from jobconsole.core import Client, Job, JobSpec, JobState
from jobconsole.core.connection import connect
from jobconsole.core.keys import queue_keys
from tests.conftest import PROJECT, PYTHON, manage_env
from tests.redis_server import RedisServer
from tests.tasks import read_ledger

pytestmark = pytest.mark.slow

LEASE_S = 2.0  # visibility_timeout of tests.record and tests.slow_*


@dataclass
class Proc:
    """One `manage.py` subprocess; its stdout+stderr (the engine's log) go to `log`."""

    popen: "subprocess.Popen[bytes]"
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def send(self, sig: signal.Signals) -> None:
        self.popen.send_signal(sig)


class Processes:
    """Starts manage.py commands for one test and kills whatever is left of them at teardown."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.started: list[Proc] = []

    def run(self, redis_url: str, name: str, command: Sequence[str], **env_overrides: str) -> Proc:
        """Any command in the project's environment (manage_env), its output in `<name>.log`."""
        log = self.tmp_path / f"{name}.log"
        # The database mirror is not under test here: keep it out of the workers (it would need a migrated
        # database). The var dir holds the sqlite file of commands that do use the database.
        (self.tmp_path / "var").mkdir(exist_ok=True)
        env = manage_env(redis_url, self.tmp_path, JOBCONSOLE_MIRROR_IN_WORKER="0", **env_overrides)
        with log.open("wb") as out:  # the child keeps its own copy of the descriptor
            popen = subprocess.Popen(list(command), cwd=PROJECT, env=env, stdout=out, stderr=subprocess.STDOUT)
        proc = Proc(popen, log)
        self.started.append(proc)
        return proc

    def manage(self, redis_url: str, name: str, *args: str, **env_overrides: str) -> Proc:
        return self.run(redis_url, name, [PYTHON, str(PROJECT / "manage.py"), *args], **env_overrides)

    def worker(self, redis_url: str, queue: str, name: str, *extra: str, **env_overrides: str) -> Proc:
        """A runworker, returned once it has registered with Redis (so it claims what is enqueued next)."""
        proc = self.manage(redis_url, name, "runworker", "--queues", queue, "--name", name, *extra, **env_overrides)
        wait_for(lambda: f"worker={name} started" in proc.output(), 20, f"worker {name} to start", proc)
        return proc

    def kill_all(self) -> None:
        for proc in self.started:  # every kill first, so one slow wait cannot spare the others
            if proc.popen.poll() is None:
                proc.popen.kill()  # SIGKILL also ends a SIGSTOPped process
        for proc in self.started:
            proc.popen.wait(timeout=10)


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Processes]:
    processes = Processes(tmp_path)
    try:
        yield processes
    finally:
        processes.kill_all()


def logs(procs: tuple[Proc, ...]) -> str:
    return "".join(f"\n--- {p.log.name} (exit {p.popen.poll()}):\n{p.output()[-4000:]}" for p in procs)


def wait_for[T](condition: Callable[[], T], timeout: float, what: str, *procs: Proc, interval: float = 0.05) -> T:
    """Poll `condition` until it returns something truthy; fail with the processes' logs on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}{logs(procs)}")
        time.sleep(interval)


def eventually(condition: Callable[[], bool], timeout: float) -> bool:
    """Like wait_for, but answers False on timeout (for conditions asserted after more telling ones)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def wait_exit(proc: Proc, timeout: float) -> int:
    try:
        return proc.popen.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{proc.log.name} did not exit within {timeout}s{logs((proc,))}")


def in_state(client: Client, job_id: str, state: JobState) -> Job | None:
    job = client.get(job_id)
    return job if job.state is state else None


def entries(path: Path, kind: str) -> list[list[str]]:
    return [line for line in read_ledger(path) if line[0] == kind]


def history(job: Job) -> list[tuple[int, str, int]]:
    return [(a.attempt, a.outcome, a.pid) for a in job.history]


# --- 1. SIGKILL: the job runs again elsewhere, exactly once more ------------------------------------


def test_job_of_killed_worker_runs_again_exactly_once(
    r: "redis.Redis", redis_url: str, procs: Processes, tmp_path: Path
) -> None:
    client = Client(r)
    ledger = tmp_path / "ledger"
    seconds = 1.5  # long enough to kill the first attempt mid-run
    first = procs.worker(redis_url, "tests.record", "first")
    job_id = client.enqueue("tests.record", {"ledger": str(ledger), "seconds": seconds}).id
    wait_for(lambda: entries(ledger, "start"), 10, "the first attempt to start", first)
    first.popen.kill()
    first.popen.wait()
    killed_at = time.monotonic()

    second = procs.worker(redis_url, "tests.record", "second")  # returns once it logged "started"
    startup = time.monotonic() - killed_at
    done = wait_for(lambda: in_state(client, job_id, JobState.COMPLETED), 30, "the job to complete", second)
    elapsed = time.monotonic() - killed_at
    # Lease expiry (or the rescuer's start, if slower: its maintenance runs the recoverer), the recoverer's next
    # pass, and the second run of the task: nothing waits longer. The start is measured, not assumed: on a
    # loaded 2-core machine a Django process takes seconds to start, which is not recovery time.
    limit = max(LEASE_S, startup) + seconds + 4
    assert elapsed < limit, f"recovery took {elapsed:.1f}s (limit {limit:.1f}s){logs((second,))}"

    time.sleep(0.3)  # a duplicate run would show up in the ledger by now
    ledger_lines = [(kind, job, attempt, int(pid)) for kind, job, attempt, pid in read_ledger(ledger)]
    assert ledger_lines == [
        ("start", job_id, "1", first.pid),
        ("start", job_id, "2", second.pid),
        ("end", job_id, "2", second.pid),
    ]
    assert done.result == {"pid": second.pid}
    assert done.attempts == 2
    assert history(done) == [(1, "worker_lost", first.pid), (2, "completed", second.pid)]
    assert done.history[0].error_class == "WorkerLost"


# --- 2. SIGSTOP past the lease: the frozen worker cannot ack afterwards -----------------------------


@pytest.mark.parametrize(
    ("task", "resume"),
    [
        # The zombie resumes after the rescuer completed the job, finishes its own run and tries to ack it.
        ("tests.sleep_pid", "after_rescue"),
        # It resumes while the rescuer still runs the job: the lease token is the only thing refusing its ack.
        ("tests.sleep_pid", "during_rescue"),
        # A task that heartbeats itself: context.heartbeat() raises LeaseLost; the zombie's failure is refused.
        ("tests.record", "after_rescue"),
    ],
)
def test_frozen_worker_cannot_ack_after_its_lease_expired(
    r: "redis.Redis", redis_url: str, procs: Processes, tmp_path: Path, task: str, resume: str
) -> None:
    client = Client(r)
    ledger = tmp_path / "ledger"
    zombie = procs.worker(redis_url, task, "zombie")
    args: dict[str, Any] = {"ledger": str(ledger), "seconds": 1.5}
    retry_gate = tmp_path / "retry_gate"
    if resume == "during_rescue":
        # The rescuer's run holds the job until the test opens this gate, which it does only once the
        # zombie's report was refused. (A fixed sleep is not enough: the SIGSTOP may land between the task's
        # 'start' line and its sleep, and then the zombie sleeps its whole time after SIGCONT.)
        args["retry_gate"] = str(retry_gate)
    job_id = client.enqueue(task, args).id
    wait_for(lambda: entries(ledger, "start"), 10, "the zombie to start the job", zombie)
    zombie.send(signal.SIGSTOP)
    try:
        # Frozen, the zombie lets its lease run out; a second worker's recoverer requeues the job and it runs.
        rescuer = procs.worker(redis_url, task, "rescuer")
        if resume == "after_rescue":
            wait_for(lambda: in_state(client, job_id, JobState.COMPLETED), 30, "the rescuer to complete", rescuer)
        else:
            wait_for(lambda: len(entries(ledger, "start")) == 2, 30, "the rescuer to start the job", rescuer)
    finally:
        zombie.send(signal.SIGCONT)

    # The zombie resumes and reports its attempt (sleep_pid: done; record: LeaseLost at its next heartbeat).
    refused = eventually(lambda: f"stale lease job={job_id}" in zombie.output(), 10)
    if resume == "during_rescue":  # it really reported while the rescuer held the job
        assert refused, f"the zombie's report was not refused as stale{logs((zombie, rescuer))}"
        assert client.get(job_id).state is JobState.RUNNING, client.get(job_id)  # the rescuer still holds it
        retry_gate.touch()
    done = wait_for(lambda: in_state(client, job_id, JobState.COMPLETED), 10, "the job to complete", rescuer)
    assert done.result == {"pid": rescuer.pid}  # the rescuer's result, not overwritten by the zombie's
    assert done.worker == "rescuer"
    assert history(done) == [(1, "worker_lost", zombie.pid), (2, "completed", rescuer.pid)]
    assert [a.outcome for a in done.history].count("completed") == 1
    assert refused, f"the zombie's report was not refused as stale{logs((zombie,))}"
    if task == "tests.record":
        assert "lease lost" in zombie.output()
        assert [e for e in entries(ledger, "end") if int(e[3]) == zombie.pid] == []  # stopped at its heartbeat
    else:
        # sleep_pid's ledger lines are 'start <pid>' / 'end <pid>'. The rescuer's run went to the end; the
        # zombie's did too, unless on waking it learnt first that it had been declared gone (its process heartbeat
        # refused) and stopped the run whose lease it had lost: which comes first is a race, both are correct.
        ends = sorted(int(e[1]) for e in entries(ledger, "end"))
        assert ends in (sorted([zombie.pid, rescuer.pid]), [rescuer.pid]), ends
    assert zombie.popen.poll() is None  # the zombie itself carries on as a worker


# --- 3. SIGTERM and the on_shutdown policies ---------------------------------------------------------


def start_slow_job(
    client: Client, procs: Processes, redis_url: str, ledger: Path, task: str, seconds: float
) -> tuple[Proc, str]:
    worker = procs.worker(redis_url, task, "w")
    job_id = client.enqueue(task, {"ledger": str(ledger), "seconds": seconds}).id
    wait_for(lambda: entries(ledger, "start"), 10, f"{task} to start", worker)
    return worker, job_id


def test_sigterm_requeues_an_on_shutdown_requeue_job_without_using_an_attempt(
    r: "redis.Redis", redis_url: str, procs: Processes, tmp_path: Path
) -> None:
    client = Client(r)
    ledger = tmp_path / "ledger"
    worker, job_id = start_slow_job(client, procs, redis_url, ledger, "tests.slow_requeue", 30)
    assert client.get(job_id).attempts == 1
    worker.send(signal.SIGTERM)
    assert wait_exit(worker, 10) == 0  # interrupted at once, not after the task's 30 s

    job = client.get(job_id)
    assert job.state is JobState.QUEUED
    assert job.attempts == 0  # as enqueued: the interrupted run did not count
    assert history(job) == [(1, "requeued", worker.pid)]
    assert "on_shutdown=requeue" in job.history[0].message
    assert job_id in client.job_ids("tests.slow_requeue", JobState.QUEUED)
    assert entries(ledger, "end") == []


def test_sigterm_dead_letters_an_on_shutdown_fail_job(
    r: "redis.Redis", redis_url: str, procs: Processes, tmp_path: Path
) -> None:
    client = Client(r)
    ledger = tmp_path / "ledger"
    worker, job_id = start_slow_job(client, procs, redis_url, ledger, "tests.slow_fail", 30)
    worker.send(signal.SIGTERM)
    assert wait_exit(worker, 10) == 0

    job = client.get(job_id)
    assert job.state is JobState.DEAD  # not retried although max_retries=3
    assert history(job) == [(1, "shutdown", worker.pid)]
    assert job.history[0].error_class.endswith("WorkerShutdown")
    assert job_id in client.job_ids("tests.slow_fail", JobState.DEAD)
    assert entries(ledger, "end") == []


def test_sigterm_waits_for_an_on_shutdown_finish_job(
    r: "redis.Redis", redis_url: str, procs: Processes, tmp_path: Path
) -> None:
    client = Client(r)
    ledger = tmp_path / "ledger"
    seconds = 2.0
    worker, job_id = start_slow_job(client, procs, redis_url, ledger, "tests.slow_finish", seconds)
    signalled = time.monotonic()
    worker.send(signal.SIGTERM)
    assert wait_exit(worker, seconds + 10) == 0
    # It left only after the job's end (it had ~2 s to go when signalled).
    assert time.monotonic() - signalled > seconds - 0.5
    assert len(entries(ledger, "end")) == 1

    job = client.get(job_id)
    assert job.state is JobState.COMPLETED
    assert history(job) == [(1, "completed", worker.pid)]


def test_second_sigterm_exits_at_once_and_the_recoverer_requeues_the_job_after_its_lease(
    r: "redis.Redis", redis_url: str, procs: Processes, tmp_path: Path
) -> None:
    client = Client(r)
    ledger = tmp_path / "ledger"
    worker, job_id = start_slow_job(client, procs, redis_url, ledger, "tests.slow_finish", 30)
    worker.send(signal.SIGTERM)
    # Two signals sent back to back may be delivered as one: send the second once the first was handled.
    wait_for(lambda: "SIGTERM: stopping" in worker.output(), 10, "the first SIGTERM to be handled", worker)
    assert worker.popen.poll() is None  # an on_shutdown=finish job keeps the worker alive
    worker.send(signal.SIGTERM)
    assert wait_exit(worker, 3) == 1
    assert client.get(job_id).state is JobState.RUNNING  # nothing reported: only its lease can free it

    recoverer = procs.manage(redis_url, "recoverer", "runrecoverer", "--interval", "0.2")
    job = wait_for(lambda: in_state(client, job_id, JobState.QUEUED), 30, "the job to be recovered", recoverer)
    assert job.attempts == 1 and job.max_retries == 1  # requeued: one attempt left
    assert history(job) == [(1, "worker_lost", worker.pid)]
    lost = job.history[0]
    assert lost.error_class == "WorkerLost"
    assert job.heartbeat_at is not None and lost.ended_at is not None
    assert lost.ended_at - job.heartbeat_at >= timedelta(seconds=LEASE_S)  # not before the lease ran out
    assert entries(ledger, "end") == []


# --- 4. Redis killed and restarted under a running worker --------------------------------------------


def test_worker_reconnects_after_redis_restart_and_no_accepted_job_is_lost(
    own_redis: RedisServer, procs: Processes, tmp_path: Path
) -> None:
    r = connect(own_redis.url)
    client = Client(r)
    ledger = tmp_path / "ledger"

    def batch(n: int, tag: str) -> list[str]:
        specs = [JobSpec(task="tests.record", params={"ledger": str(ledger), "tag": tag}) for _ in range(n)]
        return [res.id for res in client.enqueue_many(specs)]

    before = batch(400, "before")  # a few hundred ms of work: the kill below lands well inside it
    worker = procs.worker(own_redis.url, "tests.record", "w", "--concurrency", "2")
    wait_for(lambda: len(entries(ledger, "end")) >= 20, 20, "the worker to get going", worker, interval=0.005)
    own_redis.kill()  # SIGKILL: only what AOF (appendfsync always) had on disk survives
    time.sleep(1.0)
    own_redis.start()  # same port and dir: the AOF is replayed

    completed_before = set(client.job_ids("tests.record", JobState.COMPLETED, limit=1000))
    assert len(completed_before & set(before)) < len(before), "the restart should land mid-batch"
    after = batch(100, "after")
    accepted = before + after
    assert len(set(accepted)) == 500

    def all_completed() -> bool:
        return client.counts("tests.record").completed == len(accepted)

    # Jobs whose claim reply was lost in the crash wait for their lease (2 s) and the recoverer: allow that.
    wait_for(all_completed, 40, "every accepted job to complete", worker)
    assert worker.popen.poll() is None  # the same process: it reconnected by itself
    assert "redis unavailable" in worker.output()  # ...after really losing Redis
    assert set(client.job_ids("tests.record", JobState.COMPLETED, limit=1000)) == set(accepted)
    pipe = r.pipeline(transaction=False)
    for job_id in accepted:
        pipe.hget(queue_keys("tests.record").job(job_id), "state")
    assert set(pipe.execute()) == {"completed"}
    ended = {e[1] for e in entries(ledger, "end")}
    assert ended == set(accepted)  # every job really ran (none marked completed without running)
    r.close()


# --- 5. A task the worker does not have ----------------------------------------------------------------


def test_job_for_an_unknown_task_is_dropped_with_a_reason_and_can_be_requeued(
    r: "redis.Redis", redis_url: str, procs: Processes, tmp_path: Path
) -> None:
    loose = Client(r, strict=False)  # a producer that does not know the worker's task set
    worker = procs.worker(redis_url, "tests.record", "w")
    job_id = loose.enqueue("tests.not_here", {"x": 1}, queue="tests.record").id
    dropped = wait_for(lambda: in_state(loose, job_id, JobState.DROPPED), 10, "the job to be dropped", worker)
    assert "'tests.not_here' is not registered" in dropped.reason
    assert dropped.attempts == 0  # not an attempt
    assert history(dropped) == [(1, "dropped", worker.pid)]
    assert dropped.history[0].message == dropped.reason
    assert job_id in loose.job_ids("tests.record", JobState.DROPPED)

    # The worker carries on with jobs it knows.
    ledger = tmp_path / "ledger"
    ok = Client(r).enqueue("tests.record", {"ledger": str(ledger)}).id
    wait_for(lambda: in_state(loose, ok, JobState.COMPLETED), 10, "a known job to complete", worker)

    # Stop the worker (it would claim and drop the job again), then bring the job back.
    worker.send(signal.SIGTERM)
    assert wait_exit(worker, 10) == 0
    loose.requeue(job_id)
    back = loose.get(job_id)
    assert back.state is JobState.QUEUED
    assert history(back) == [(1, "dropped", worker.pid)]  # history kept
    assert job_id in loose.job_ids("tests.record", JobState.QUEUED)


def test_a_worker_starts_and_works_while_the_database_cannot_be_opened(
    r: "redis.Redis", redis_url: str, procs: Processes, tmp_path: Path
) -> None:
    """Redis is a worker's only store: a locked or unreachable database (Django's system checks open it)
    must not keep it from starting. A chaos run once lost a worker restart to 'database is locked'."""
    client = Client(r)
    ledger = tmp_path / "ledger"
    unreachable = f"sqlite:///{tmp_path / 'no-such-dir' / 'db.sqlite3'}"
    worker = procs.worker(redis_url, "tests.record", "dbless", DATABASE_URL=unreachable)
    job_id = client.enqueue("tests.record", {"ledger": str(ledger), "seconds": 0}).id
    wait_for(lambda: in_state(client, job_id, JobState.COMPLETED), 20, "the job to complete", worker)
