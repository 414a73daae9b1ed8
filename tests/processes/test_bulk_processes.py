"""Bulk operations on real `manage.py runworker` processes: the system worker of every runworker runs them, and a
worker killed mid-operation (at the worst moment: after a chunk's Redis step, before its commit; or anywhere,
with SIGKILL; or stopped with SIGTERM) leaves an operation that the next worker finishes, no job changed twice and
every count right."""

import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from jobconsole.bulk.operations import confirm, preview
from jobconsole.bulk.selection import Selection
from jobconsole.core.keys import queue_keys
from jobconsole.models import BulkChunk, BulkOperation
from tests.bulk_helpers import RUNWORKER_EXITING
from tests.conftest import PROJECT, PYTHON, manage_env
from tests.mirror_fixtures import *  # noqa: F403
from tests.mirror_fixtures import database_url, run_worker

pytestmark = [pytest.mark.slow, pytest.mark.db, pytest.mark.django_db(transaction=True)]

K = queue_keys("examples.fail")
JOBS = 240
CHUNK = 20


class Workers:
    """runworker subprocesses of one test (serving examples.echo, so the resubmitted jobs stay queued), each
    logging to a file; whatever is left is killed at the end."""

    def __init__(self, redis_url: str, tmp_path: Path) -> None:
        self.env = manage_env(redis_url, tmp_path, DATABASE_URL=database_url(), JOBCONSOLE_MIRROR_IN_WORKER="0")
        self.tmp_path = tmp_path
        self.started: list[subprocess.Popen[bytes]] = []

    def start(self, name: str, *, exit_at: int = -1, pause: float = 0.0) -> "subprocess.Popen[bytes]":
        args = ["--queues", "examples.echo", "--name", name, "--concurrency", "2"]
        command = [PYTHON, *RUNWORKER_EXITING, str(exit_at), str(pause), *args]
        with (self.tmp_path / f"{name}.log").open("wb") as log:
            proc = subprocess.Popen(command, env=self.env, cwd=PROJECT, stdout=log, stderr=subprocess.STDOUT)
        self.started.append(proc)
        return proc

    def logs(self) -> str:
        return "".join(f"\n--- {p.name}:\n{p.read_text()[-3000:]}" for p in sorted(self.tmp_path.glob("*.log")))

    def kill_all(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                proc.kill()
        for proc in self.started:
            proc.wait(timeout=10)


@pytest.fixture
def workers(redis_url: str, tmp_path: Path, engine_settings: Any) -> Iterator[Workers]:
    engine_settings.JOBCONSOLE = {**engine_settings.JOBCONSOLE, "BULK": {"CHUNK": CHUNK}}
    running = Workers(redis_url, tmp_path)
    try:
        yield running
    finally:
        running.kill_all()


def wait_until(condition: Callable[[], Any], timeout: float, what: str, workers: Workers) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}{workers.logs()}")
        time.sleep(0.1)
    return value


def resubmit_all(client: Any, mirror: Any, r: Any) -> tuple[list[str], BulkOperation]:
    ids = [client.enqueue("examples.fail", {"message": f"m{i}"}, max_retries=0).id for i in range(JOBS)]
    run_worker(r, ["examples.fail"])
    mirror.drain()
    who = User.objects.create_user("operator", is_staff=True, is_superuser=True)
    operation, _ = confirm(preview("resubmit", Selection("deadletter")).token, user=who, options={})
    assert operation.total == JOBS and operation.chunks == JOBS // CHUNK
    return ids, operation


def chunks_done(operation: BulkOperation) -> int:
    operation.refresh_from_db()
    return operation.chunks_done


def finished(operation: BulkOperation) -> bool:
    operation.refresh_from_db()
    return operation.is_finished


def assert_done_exactly_once(r: Any, ids: list[str], operation: BulkOperation) -> None:
    operation.refresh_from_db()
    assert (operation.status, operation.done, operation.refused, operation.failed) == ("done", JOBS, 0, 0)
    requeued: dict[str, int] = dict.fromkeys(ids, 0)
    for _, fields in r.xrange(K.events):
        if fields["event"] == "requeued":
            requeued[fields["job"]] += 1
    assert set(requeued.values()) == {1}, {i: n for i, n in requeued.items() if n != 1}
    assert {r.hget(K.job(i), "state") for i in ids} == {"queued"}
    # `redone` counts chunks run more than once, not extra runs: a chunk started three times (twice by a worker whose
    # lease lapsed on a loaded machine, then by the next) is one chunk redone.
    runs = list(BulkChunk.objects.filter(operation=operation).values_list("runs", flat=True))
    assert sum(1 for n in runs if n > 1) == operation.redone, runs


def test_a_worker_killed_between_a_chunks_redis_step_and_its_commit(client, mirror, r, workers):
    ids, operation = resubmit_all(client, mirror, r)
    first = workers.start("w1", exit_at=3)
    assert first.wait(timeout=60) == 137, workers.logs()
    chunk = BulkChunk.objects.get(operation=operation, index=3)
    assert (chunk.status, chunks_done(operation)) == ("started", 3), workers.logs()
    # Started once; twice when a loaded machine (the slow pass beside the chaos run) held w1's heartbeats past the
    # system job's lease and w1 ran it again: allowed, the effects below are still checked exactly once.
    assert chunk.runs in (1, 2), workers.logs()
    # Its Redis step did run: those jobs are queued already, the database does not know it yet.
    assert {r.hget(K.job(item[0]), "state") for item in chunk.items} == {"queued"}
    workers.start("w2")  # its recoverer requeues the system job once its lease (10 s) runs out
    wait_until(lambda: finished(operation), 60, "the operation to finish", workers)
    operation.refresh_from_db()
    assert BulkChunk.objects.get(operation=operation, index=3).runs > chunk.runs  # redone by w2
    # Chunk 3 is redone; on a loaded machine (the slow pass beside the chaos run) w2 may also be declared gone
    # mid-chunk and another chunk redone: allowed, as long as every job's effect happens exactly once.
    assert operation.redone >= 1, workers.logs()
    assert_done_exactly_once(r, ids, operation)


def test_workers_killed_and_stopped_mid_operation_leave_it_to_the_next(client, mirror, r, workers):
    ids, operation = resubmit_all(client, mirror, r)
    first = workers.start("w1", pause=0.25)
    wait_until(lambda: chunks_done(operation) >= 3, 60, "three chunks", workers)
    first.send_signal(signal.SIGKILL)  # wherever it is
    first.wait(timeout=10)
    second = workers.start("w2", pause=0.25)
    wait_until(lambda: chunks_done(operation) >= 7, 60, "seven chunks", workers)
    second.send_signal(signal.SIGTERM)  # the system worker gives the job back at once, without an attempt
    assert second.wait(timeout=30) == 0, workers.logs()
    assert chunks_done(operation) < operation.chunks, workers.logs()
    workers.start("w3")
    wait_until(lambda: finished(operation), 60, "the operation to finish", workers)
    assert_done_exactly_once(r, ids, operation)
    # The runner records the end in the database as it returns; the worker acks the system job a moment later.
    wait_until(lambda: client.get(operation.job_id).state.value == "completed", 10, "the system job's ack", workers)
    system_job = client.get(operation.job_id)
    assert system_job.state.value == "completed" and system_job.attempts == 2  # the SIGTERM cost no attempt
