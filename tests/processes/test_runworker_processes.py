"""`runworker --processes N` against a real redis-server: its worker processes start under distinct ids, one killed
with SIGKILL is started again and its job runs again, an operator's stop retires one process and a host's stop the
whole runworker, SIGTERM stops them all with no job lost, a supervisor killed with SIGKILL leaves no orphan, and a
lone runworker runs the database mirror in a process of its own, stopped after the workers."""

import os
import re
import signal
import socket
import subprocess
from pathlib import Path

import pytest
import redis

import tests.tasks  # noqa: F401  (registers the test tasks here, so the client enqueues them with their leases)
from jobconsole.core import Client, JobState
from jobconsole.core.queries.workers import WorkerInfo
from tests.conftest import PROJECT, PYTHON, manage_env
from tests.live import alive
from tests.processes.test_worker_processes import Proc, Processes, eventually, history, in_state, procs, wait_for
from tests.tasks import read_ledger

__all__ = ["procs"]  # the fixture

pytestmark = pytest.mark.slow

TASK = "tests.long_lease"  # its queue too: a 5-minute lease, so only the process heartbeat brings a job back soon


def child_pids(proc: Proc) -> dict[str, int]:
    """The supervisor's latest pid for each of its processes, from its log."""
    return {label: int(pid) for label, pid in re.findall(r"started (\S+): pid (\d+)", proc.output())}


def supervisor(procs: Processes, redis_url: str, name: str, *extra: str, queues: str = TASK) -> Proc:
    """`runworker --processes 2`, returned once both worker processes have registered."""
    proc = procs.manage(redis_url, name, "runworker", "--queues", queues, "--processes", "2", "--name", name, *extra)
    for slot in (1, 2):
        wait_for(lambda s=slot: f"worker={name}-{s} started" in proc.output(), 30, f"{name}-{slot} to start", proc)
    return proc


def starts(ledger: Path, job_id: str) -> list[tuple[int, int]]:
    """(attempt, pid) of each start of `job_id`."""
    return [(int(a), int(p)) for kind, j, a, p, _ in read_ledger(ledger) if kind == "start" and j == job_id]


def test_distinct_processes_and_a_killed_one_is_started_again_and_its_job_runs_again(
    r: "redis.Redis", redis_url: str, procs: Processes, tmp_path: Path
) -> None:
    client = Client(r)
    sup = supervisor(procs, redis_url, "sup", "--concurrency", "1")
    pids = child_pids(sup)

    # The first process also serves the system queue (one per runworker, as a lone worker does), from a thread that
    # registers after its main worker logged its start (on a loaded machine, later than the helper's wait).
    def registered() -> dict[str, WorkerInfo] | None:
        found = {w.id: w for w in client.queries.workers.all()}
        return found if "sup-1:system" in found else None

    workers = wait_for(registered, 30, "the first process's system worker to register", sup)
    assert workers["sup-1"].pid == pids["worker-1"] and workers["sup-2"].pid == pids["worker-2"]
    assert len({sup.pid, pids["worker-1"], pids["worker-2"]}) == 3
    assert workers["sup-1"].host == workers["sup-2"].host == socket.gethostname()
    assert "sup-2:system" not in workers

    ledger = tmp_path / "ledger"
    job_id = client.enqueue(TASK, {"ledger": str(ledger), "seconds": 60.0, "retry_seconds": 0.5}).id
    wait_for(lambda: starts(ledger, job_id), 10, "a worker process to start the job", sup)
    victim_pid = starts(ledger, job_id)[0][1]
    victim = next(label for label, pid in pids.items() if pid == victim_pid)
    os.kill(victim_pid, signal.SIGKILL)

    wait_for(lambda: f"{victim} (pid {victim_pid}) was killed by SIGKILL" in sup.output(), 10, "the exit seen", sup)
    wait_for(lambda: child_pids(sup)[victim] != victim_pid, 10, f"{victim} to start again", sup)
    done = wait_for(lambda: in_state(client, job_id, JobState.COMPLETED), 20, "the job to run again", sup)
    first, second = history(done)
    assert first == (1, "worker_lost", victim_pid) and second[:2] == (2, "completed") and second[2] != victim_pid
    # The new process works under a new id (the console shows the killed one gone beside it).
    new_id = wait_for(
        lambda: [w.id for w in client.queries.workers.all() if w.pid == child_pids(sup)[victim] and TASK in w.queues],
        10,
        "its id",
        sup,
    )[0]
    assert re.fullmatch(rf"sup-{victim[-1]}:[0-9a-f]{{4}}", new_id), new_id
    assert sup.popen.poll() is None


def test_an_operators_stop_retires_one_process_and_a_hosts_stop_the_runworker(
    r: "redis.Redis", redis_url: str, procs: Processes
) -> None:
    client = Client(r)
    sup = supervisor(procs, redis_url, "ops")
    pids = child_pids(sup)
    assert client.control_workers(["ops-2"], "stop") == {"ops-2": "done"}
    wait_for(lambda: "worker-2 (pid" in sup.output() and "not started again" in sup.output(), 20, "ops-2 to stop", sup)
    assert not eventually(lambda: child_pids(sup)["worker-2"] != pids["worker-2"], 2.0)  # not started again
    assert sup.popen.poll() is None and alive(pids["worker-1"])

    client.control_host(socket.gethostname(), "stop")
    assert sup.popen.wait(timeout=20) == 0
    assert not alive(pids["worker-1"])


def test_sigterm_stops_every_process_and_loses_no_job(
    r: "redis.Redis", redis_url: str, procs: Processes, tmp_path: Path
) -> None:
    client = Client(r)
    ledger = tmp_path / "ledger"
    sup = supervisor(procs, redis_url, "term", "--concurrency", "2", queues="tests.slow_finish,tests.slow_requeue")
    finishing = [client.enqueue("tests.slow_finish", {"ledger": str(ledger), "seconds": 2.0}).id for _ in range(2)]
    requeued = [client.enqueue("tests.slow_requeue", {"ledger": str(ledger), "seconds": 60.0}).id for _ in range(2)]
    wait_for(lambda: len([e for e in read_ledger(ledger) if e[0] == "start"]) == 4, 15, "all four to start", sup)
    pids = child_pids(sup)

    sup.send(signal.SIGTERM)
    assert sup.popen.wait(timeout=30) == 0, sup.output()
    assert not [label for label, pid in pids.items() if alive(pid)]
    for job_id in finishing:
        assert client.get(job_id).state is JobState.COMPLETED
    for job_id in requeued:  # handed back, to run again elsewhere
        assert client.get(job_id).state is JobState.QUEUED


def test_a_supervisor_killed_with_sigkill_leaves_no_orphan(
    r: "redis.Redis", redis_url: str, procs: Processes, tmp_path: Path
) -> None:
    client = Client(r)
    ledger = tmp_path / "ledger"
    sup = supervisor(procs, redis_url, "orphans", "--concurrency", "1", queues="tests.slow_requeue")
    job_ids = [client.enqueue("tests.slow_requeue", {"ledger": str(ledger), "seconds": 60.0}).id for _ in range(2)]
    wait_for(lambda: len(read_ledger(ledger)) == 2, 15, "both jobs to start", sup)
    pids = child_pids(sup)

    sup.popen.kill()
    sup.popen.wait()
    wait_for(lambda: not [pid for pid in pids.values() if alive(pid)], 15, "the worker processes to leave", sup)
    assert "supervisor gone: stopping" in sup.output()
    for job_id in job_ids:  # each stopped gracefully: its job handed back, not left to its lease
        assert client.get(job_id).state is JobState.QUEUED


def test_a_lone_runworker_runs_the_mirror_in_a_process_stopped_after_the_worker(
    r: "redis.Redis", redis_url: str, procs: Processes, tmp_path: Path
) -> None:
    (tmp_path / "var").mkdir(exist_ok=True)
    env = manage_env(redis_url, tmp_path)
    migrate = [PYTHON, str(PROJECT / "manage.py"), "migrate", "--noinput"]
    subprocess.run(migrate, env=env, check=True, cwd=PROJECT, capture_output=True)
    log = tmp_path / "lone.log"
    with log.open("wb") as out:  # the shipped default: the mirror beside the worker (Processes.run leaves it out)
        command = [PYTHON, str(PROJECT / "manage.py"), "runworker", "--queues", TASK, "--name", "lone"]
        popen = subprocess.Popen(command, cwd=PROJECT, env=env, stdout=out, stderr=subprocess.STDOUT)
    lone = Proc(popen, log)
    procs.started.append(lone)
    wait_for(lambda: "worker=lone started" in lone.output(), 30, "the worker to start", lone)
    wait_for(lambda: " is the leader" in lone.output(), 30, "the mirror process to lead", lone)
    assert "mirror=process" in lone.output() and "mirror=thread" not in lone.output()
    pids = child_pids(lone)
    assert set(pids) == {"worker-1", "mirror"} and lone.pid not in pids.values()

    lone.send(signal.SIGTERM)
    assert lone.popen.wait(timeout=30) == 0
    out = lone.output()
    assert out.index(f"worker-1 (pid {pids['worker-1']}) exited with code 0") < out.index(
        f"mirror (pid {pids['mirror']}) exited with code 0"
    ), out
