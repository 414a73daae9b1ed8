"""A PostgreSQL that drops every session (pg_terminate_backend: what a restart or a failover does to them) while a
real `runworker` (its task threads, its system worker running a bulk operation, its periodic scheduler) and a real
`runmirror` work: no process restarts, no job is lost, every job that starts after a drop succeeds at its first
attempt, the bulk operation completes exactly once, the scheduler keeps firing and the mirror catches up."""

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.contrib.auth.models import User

from jobconsole.bulk.operations import confirm, preview
from jobconsole.bulk.selection import Selection
from jobconsole.core import Client, Job, JobState
from jobconsole.core.keys import queue_keys
from jobconsole.models import BulkOperation, DeadLetter, PeriodicSchedule
from tests.bulk_helpers import RUNWORKER_EXITING
from tests.conftest import PYTHON
from tests.db_restart import require_postgres, terminate_backends
from tests.mirror_fixtures import *  # noqa: F403
from tests.mirror_fixtures import assert_db_matches_redis, database_url, run_worker
from tests.processes.test_worker_processes import Proc, Processes, logs, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.db, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

QUEUE = "tests.db_touch"
LETTERS = 60
CHUNK = 10
FIRED = re.compile(r"scheduler: fired touch slot=\d+ job=(\S+)")


class Stack(Processes):
    """A runworker (its bulk runner pausing 0.3 s after each chunk's Redis step, so that an operation spans the
    drops) and a runmirror on the test database; whatever is left is killed at the end."""

    def __init__(self, redis_url: str, tmp_path: Path) -> None:
        super().__init__(tmp_path)
        self.redis_url = redis_url

    def worker(self) -> Proc:
        args = ["--queues", QUEUE, "--name", "w1", "--concurrency", "3"]
        proc = self.run(self.redis_url, "w1", [PYTHON, *RUNWORKER_EXITING, "-1", "0.3", *args],
                        DATABASE_URL=database_url())  # fmt: skip
        wait_for(lambda: "worker=w1 started" in proc.output(), 20, "the worker to start", proc)
        return proc

    def mirror(self) -> Proc:
        return self.manage(self.redis_url, "mirror", "runmirror", DATABASE_URL=database_url())


@pytest.fixture
def stack(redis_url: str, tmp_path: Path, engine_settings: Any) -> Iterator[Stack]:
    require_postgres()
    engine_settings.JOBCONSOLE = {**engine_settings.JOBCONSOLE, "BULK": {"CHUNK": CHUNK}}
    running = Stack(redis_url, tmp_path)
    try:
        yield running
    finally:
        running.kill_all()


def finished(client: Client, ids: list[str]) -> list[Job] | None:
    jobs = [client.get(i) for i in ids]
    return jobs if all(j.state.is_terminal for j in jobs) else None


def mirrored(r: "redis.Redis") -> bool:
    try:
        assert_db_matches_redis(r)
    except AssertionError:
        return False
    return True


def test_workers_the_mirror_the_scheduler_and_bulk_operations_survive_dropped_sessions(
    client: Client, r: "redis.Redis", stack: Stack
) -> None:
    PeriodicSchedule.objects.create(name="touch", task=QUEUE, every_seconds=1)
    letters = [client.enqueue("examples.fail", {"message": f"m{i}"}, max_retries=0).id for i in range(LETTERS)]
    run_worker(r, ["examples.fail"])
    mirror = stack.mirror()
    worker = stack.worker()
    procs = (worker, mirror)
    wait_for(lambda: DeadLetter.objects.count() == LETTERS, 30, "the mirror to record the dead letters", *procs)

    # Drops while jobs run, the bulk operation is between chunks, and the scheduler fires.
    running = [client.enqueue(QUEUE, {"seconds": 0.2}).id for _ in range(30)]
    who = User.objects.create_user("operator", is_staff=True, is_superuser=True)
    operation, _ = confirm(preview("resubmit", Selection("deadletter")).token, user=who, options={})
    assert operation.chunks == LETTERS // CHUNK

    def chunks_done() -> int:
        return BulkOperation.objects.get(pk=operation.pk).chunks_done

    wait_for(lambda: chunks_done() >= 1, 20, "the bulk operation to begin", *procs)
    killed = []
    for _ in range(3):
        killed.append(terminate_backends())
        time.sleep(0.5)
    assert killed[0] >= 3, killed  # at least the mirror's, the system worker's and a task thread's
    assert chunks_done() < operation.chunks, "the operation ended before the drops: nothing was tested"
    jobs = wait_for(lambda: finished(client, running), 60, "the jobs run across the drops", *procs)
    assert {j.state for j in jobs} == {JobState.COMPLETED}, [(j.id, j.state, j.history) for j in jobs]

    # A drop while the worker idles between jobs: every job that starts after it succeeds at once.
    fired_before = FIRED.findall(worker.output())
    terminate_backends()
    later = [client.enqueue(QUEUE, {}).id for _ in range(12)]
    jobs = wait_for(lambda: finished(client, later), 30, "the jobs enqueued after the drop", *procs)
    assert [(j.state, j.attempts) for j in jobs] == [(JobState.COMPLETED, 1)] * 12, [j.history for j in jobs]

    # The scheduler kept firing, and its jobs since the drop succeeded at once too.
    fired = wait_for(lambda: FIRED.findall(worker.output())[len(fired_before) + 2 :], 20, "later slots", *procs)
    periodic = wait_for(lambda: finished(client, fired), 20, "the periodic jobs", *procs)
    assert [(j.state, j.attempts) for j in periodic] == [(JobState.COMPLETED, 1)] * len(fired)

    # The bulk operation completed, each dead letter resubmitted exactly once.
    wait_for(lambda: BulkOperation.objects.get(pk=operation.pk).is_finished, 60, "the bulk operation", *procs)
    operation.refresh_from_db()
    assert (operation.status, operation.done, operation.refused, operation.failed) == ("done", LETTERS, 0, 0)
    events = r.xrange(queue_keys("examples.fail").events)
    assert sorted(f["job"] for _, f in events if f["event"] == "requeued") == sorted(letters)

    # Every job Redis holds is in the database as Redis has it.
    wait_for(lambda: mirrored(r), 30, "the mirror to catch up", *procs)
    # The same processes all along, each having said what happened.
    assert worker.popen.poll() is None and mirror.popen.poll() is None, logs(procs)
    assert worker.output().count("worker=w1 started") == 1, logs(procs)
    assert "database connection lost (bulk operation " in worker.output(), logs(procs)
    assert "database connection lost (mirror: " in mirror.output(), logs(procs)
