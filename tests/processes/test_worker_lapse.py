"""A worker process that dies or freezes, seen by its process heartbeat (core/lapse.py) with real `runworker`
processes: a job under a 5-minute lease runs again elsewhere within 5 s of a `kill -9`, the other workers' jobs are
left alone, and a worker frozen past its expiry comes back to refused acks, its run stopped, under a new id."""

import signal
import time
from pathlib import Path

import pytest
import redis

import tests.tasks  # noqa: F401  (registers tests.long_lease here, so the client enqueues it with its lease)
from jobconsole.core import Client, JobState
from tests.processes.test_worker_processes import Processes, eventually, history, in_state, logs, procs, wait_for
from tests.tasks import read_ledger

__all__ = ["procs"]  # the fixture

pytestmark = pytest.mark.slow

TASK = "tests.long_lease"  # its queue too
GOAL_S = 5.0  # kill -9 to the next run, whatever the lease (issue 30)


def starts(ledger: Path, job_id: str) -> list[tuple[int, int, float]]:
    """(attempt, pid, unix time) of each start of `job_id`."""
    return [(int(a), int(p), float(t)) for kind, j, a, p, t in read_ledger(ledger) if kind == "start" and j == job_id]


def ends(ledger: Path, job_id: str) -> list[int]:
    return [int(p) for kind, j, _, p, _ in read_ledger(ledger) if kind == "end" and j == job_id]


def test_a_killed_workers_job_with_a_5_minute_lease_runs_again_within_5_s_and_only_its_job(
    r: "redis.Redis", redis_url: str, procs: Processes, tmp_path: Path
) -> None:
    client = Client(r)
    ledger = tmp_path / "ledger"
    victim = procs.worker(redis_url, TASK, "victim", "--concurrency", "1")
    doomed = client.enqueue(TASK, {"ledger": str(ledger), "seconds": 60.0, "retry_seconds": 1.0}).id
    wait_for(lambda: starts(ledger, doomed), 10, "the victim to start its job", victim)
    survivor = procs.worker(redis_url, TASK, "survivor", "--concurrency", "2")
    spared = client.enqueue(TASK, {"ledger": str(ledger), "seconds": 30.0}).id  # the victim is busy: the survivor's
    wait_for(lambda: starts(ledger, spared), 10, "the survivor to start its job", survivor)

    victim.popen.kill()
    killed_at = time.time()
    victim.popen.wait()
    wait_for(lambda: len(starts(ledger, doomed)) == 2, 2 * GOAL_S, "the job to run again", survivor)
    rerun = starts(ledger, doomed)[1]
    assert rerun[1] == survivor.pid
    took = rerun[2] - killed_at
    assert took < GOAL_S, f"kill -9 to re-run took {took:.2f}s{logs((survivor,))}"

    done = wait_for(lambda: in_state(client, doomed, JobState.COMPLETED), 10, "the job to complete", survivor)
    assert history(done) == [(1, "worker_lost", victim.pid), (2, "completed", survivor.pid)]
    assert "worker victim stopped heartbeating; last heartbeat " in done.history[0].message
    assert done.history[0].message.endswith(" s before recovery")
    # The survivor's own job was never touched: one attempt, still running under its lease.
    job = client.get(spared)
    assert job.state is JobState.RUNNING and job.attempts == 1 and job.worker == "survivor", job
    # The console's source: the victim is gone, with its host, pid, queues and why.
    gone = {w.id: w for w in client.queries.workers.all()}["victim"]
    assert gone.state == "gone" and gone.pid == victim.pid and gone.queues == [TASK] and gone.jobs_taken_back == 1
    assert gone.gone_reason.startswith("no heartbeat for ")
    assert gone.gone_at is not None and gone.gone_at.timestamp() - killed_at < GOAL_S


def test_a_worker_frozen_past_its_expiry_comes_back_to_a_refused_ack_under_a_new_id(
    r: "redis.Redis", redis_url: str, procs: Processes, tmp_path: Path
) -> None:
    client = Client(r)
    ledger = tmp_path / "ledger"
    zombie = procs.worker(redis_url, TASK, "zombie", "--concurrency", "1")
    job_id = client.enqueue(TASK, {"ledger": str(ledger), "seconds": 60.0, "retry_seconds": 4.0}).id
    wait_for(lambda: starts(ledger, job_id), 10, "the zombie to start the job", zombie)
    rescuer = procs.worker(redis_url, TASK, "rescuer", "--concurrency", "1")
    zombie.send(signal.SIGSTOP)
    stopped_at = time.time()
    try:
        wait_for(lambda: len(starts(ledger, job_id)) == 2, 2 * GOAL_S, "the rescuer to start the job", rescuer)
        assert starts(ledger, job_id)[1][2] - stopped_at < GOAL_S  # the lease had 5 minutes to go
        time.sleep(1.0)  # the rescuer's run holds a valid lease while the zombie wakes up
    finally:
        zombie.send(signal.SIGCONT)

    # The zombie finds its heartbeat refused, stops the run whose lease is gone (its report refused), goes on.
    wait_for(lambda: "continuing as worker=zombie~2" in zombie.output(), 10, "the zombie to take a new id", zombie)
    assert eventually(lambda: f"stale lease job={job_id}" in zombie.output(), 10), logs((zombie,))
    assert client.get(job_id).state is JobState.RUNNING and client.get(job_id).worker == "rescuer"
    done = wait_for(lambda: in_state(client, job_id, JobState.COMPLETED), 20, "the rescuer to complete", rescuer)
    assert done.result == {"pid": rescuer.pid}
    assert history(done) == [(1, "worker_lost", zombie.pid), (2, "completed", rescuer.pid)]
    assert ends(ledger, job_id) == [rescuer.pid]  # the zombie's run was stopped, never finished
    assert zombie.popen.poll() is None
    workers = {w.id: w for w in client.queries.workers.all()}
    assert workers["zombie"].state == "gone"
    assert workers["zombie~2"].state == "running" and workers["zombie~2"].pid == zombie.pid
    # Under its new id it works: a new job may go to either worker, and completes once.
    again = client.enqueue(TASK, {"ledger": str(ledger), "seconds": 0.1}).id
    wait_for(lambda: in_state(client, again, JobState.COMPLETED), 20, "a new job to complete", zombie, rescuer)
