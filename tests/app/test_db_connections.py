"""A database that drops its connections (a restart, a failover: pg_terminate_backend here) costs the long-lived
threads nothing lasting (jobconsole/db_connections.py): a worker's task threads reconnect around each job, the
mirror (and its commit thread) retries its batch on a new connection, the scheduler reads its database schedules
again at once, a bulk operation starts again at its first chunk not done. In this process, on PostgreSQL."""

import json
import logging
import threading
import time
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import OperationalError, connection

import jobconsole.bulk.runner as runner
from jobconsole.bulk.operations import confirm, preview
from jobconsole.bulk.runner import run_operation
from jobconsole.bulk.selection import Selection
from jobconsole.core import Client, Job, JobState, default_registry
from jobconsole.core.keys import queue_keys
from jobconsole.db_connections import task_hooks
from jobconsole.models import BulkChunk, BulkOperation, MirrorCursor, PeriodicSchedule
from jobconsole.periodic import _SchedulerSource
from tests.db_restart import require_postgres, sessions, terminate_backends
from tests.helpers import wait_for, worker_in_thread
from tests.mirror_fixtures import *  # noqa: F403
from tests.mirror_fixtures import assert_db_matches_redis, run_worker

pytestmark = [pytest.mark.db, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

QUEUE = "tests.db_touch"


@pytest.fixture(autouse=True)
def postgres() -> None:
    require_postgres()


def finished(client: Client, ids: list[str]) -> list[Job] | None:
    jobs = [client.get(i) for i in ids]
    return jobs if all(j.state.is_terminal for j in jobs) else None


def backends(jobs: list[Job]) -> set[int]:
    return {json.loads(j.result_json)["backend"] for j in jobs}


def test_jobs_that_start_after_the_database_dropped_the_workers_connections_succeed(client: Client, r: Any) -> None:
    with worker_in_thread(r, default_registry, [QUEUE], concurrency=3, hooks=task_hooks()):
        first = [client.enqueue(QUEUE, {}).id for _ in range(9)]
        before = wait_for(lambda: finished(client, first), 20)
        # The task threads keep their connections between jobs (CONN_MAX_AGE): the database drops them all.
        assert backends(before) <= sessions()
        assert terminate_backends() >= len(backends(before))
        ids = [client.enqueue(QUEUE, {}).id for _ in range(9)]
        after = wait_for(lambda: finished(client, ids), 20)
    # Each ran once, and well: not one attempt failed on a dead connection.
    assert [(j.state, j.attempts) for j in after] == [(JobState.COMPLETED, 1)] * 9, [j.history for j in after]
    assert not backends(after) & backends(before)


def test_a_job_whose_connection_drops_mid_run_is_retried_on_a_new_one(client: Client, r: Any) -> None:
    with worker_in_thread(r, default_registry, [QUEUE], concurrency=2, hooks=task_hooks()):
        ids = [client.enqueue(QUEUE, {"seconds": 1.5}).id for _ in range(2)]
        wait_for(lambda: all(client.get(i).state == JobState.RUNNING for i in ids), 10)
        time.sleep(0.3)  # both have run their first query
        assert terminate_backends() >= 2
        jobs = wait_for(lambda: finished(client, ids), 20)
    for job in jobs:
        assert job.state == JobState.COMPLETED
        assert [a.outcome for a in job.history] == ["failed", "completed"]
        assert job.history[0].error_class == "django.db.utils.OperationalError"


def test_the_mirror_applies_every_event_on_a_new_connection(
    client: Client, mirror: Any, r: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "jobconsole.db")
    # Overlap (PostgreSQL's default) commits in a thread of its own, whose connection is dropped too.
    first: list[str] = []
    for batch in range(2):  # the first is resynced (a new queue), the second applied (in the commit thread)
        first += [client.enqueue("examples.echo", {"message": f"a{batch}.{i}"}).id for i in range(20)]
        run_worker(r, ["examples.echo"])
        mirror.drain()
    assert terminate_backends(keep_own=True) >= 1  # the mirror's thread is this one
    later = [client.enqueue("examples.echo", {"message": f"b{i}"}).id for i in range(20)]
    run_worker(r, ["examples.echo"])
    stop = threading.Event()

    def caught_up() -> bool:
        mirror.turn(stop)
        try:
            assert_db_matches_redis(r)
        except AssertionError:
            return False
        except OperationalError:  # the check's own query, on this thread's connection (the mirror's, but idle)
            connection.close()
            return False
        return True

    wait_for(caught_up, 20)
    assert len(first) + len(later) == 60
    top = r.xrevrange(queue_keys("examples.echo").events, count=1)[0][0]
    assert MirrorCursor.objects.get(queue="examples.echo").last_id == top
    assert "database connection lost (mirror: " in caplog.text


def test_the_scheduler_reads_its_database_schedules_in_the_pass_the_connection_dropped(
    engine_settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "jobconsole.db")
    PeriodicSchedule.objects.create(name="touch", task=QUEUE, every_seconds=60)
    source = _SchedulerSource()
    assert [s.name for s in source()] == ["touch"]
    # A connection kept without health checks (CONN_HEALTH_CHECKS off) is not checked before its next query.
    connection.close()
    connection.settings_dict["CONN_HEALTH_CHECKS"] = False
    try:
        assert [s.name for s in source()] == ["touch"]
        assert terminate_backends(keep_own=True) >= 1
        assert [s.name for s in source()] == ["touch"]
    finally:
        connection.settings_dict["CONN_HEALTH_CHECKS"] = True
        connection.close()
    assert "database connection lost (periodic scheduler: " in caplog.text


def test_a_bulk_operation_across_a_dropped_connection_completes_once(
    client: Client, mirror: Any, r: Any, engine_settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "jobconsole.db")
    engine_settings.JOBCONSOLE = {**engine_settings.JOBCONSOLE, "BULK": {"CHUNK": 3}}
    ids = [client.enqueue("examples.fail", {"message": f"m{i}"}, max_retries=0).id for i in range(9)]
    run_worker(r, ["examples.fail"])
    mirror.drain()
    who = User.objects.create_user("operator", is_staff=True, is_superuser=True)
    operation, _ = confirm(preview("resubmit", Selection("deadletter")).token, user=who, options={})
    killed: list[int] = []

    def drop_connections(chunk: BulkChunk) -> None:
        if chunk.index == 1 and not killed:  # after the chunk's Redis step, before its commit
            killed.append(terminate_backends(keep_own=True))

    runner.after_redis_step = drop_connections
    try:
        result = run_operation(operation.pk)
    finally:
        runner.after_redis_step = None
    assert killed and killed[0] >= 1
    operation = BulkOperation.objects.get(pk=operation.pk)
    assert (result["status"], operation.done, operation.refused, operation.failed) == ("done", 9, 0, 0)
    assert operation.redone == 1  # chunk 1's Redis step ran twice: its jobs answered ALREADY the second time
    events = r.xrange(queue_keys("examples.fail").events)
    assert sorted(f["job"] for _, f in events if f["event"] == "requeued") == sorted(ids)
    assert "database connection lost (bulk operation " in caplog.text
