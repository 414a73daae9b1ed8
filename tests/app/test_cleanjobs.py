"""manage.py cleanjobs: selection by task, queue, state and submission time; --dry-run; both stores."""

from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import call_command

from jobconsole.cleaning import enforce_db_retention
from jobconsole.core.keys import queue_keys
from jobconsole.models import AuditLog, DeadLetter, Job
from tests.mirror_fixtures import *  # noqa: F403
from tests.mirror_fixtures import assert_db_matches_redis, run_worker

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


def _run(*args: str) -> str:
    out = StringIO()
    call_command("cleanjobs", *args, "--no-progress", stdout=out, stderr=StringIO())
    return out.getvalue()


def test_dry_run_then_clean_by_task_and_state(client, mirror, r):
    echo = [client.enqueue("examples.echo", {"i": i}).id for i in range(5)]
    waiting = client.enqueue("examples.echo", {"w": 1}, delay=600).id
    dead = client.enqueue("examples.fail", {"message": "x"}, max_retries=0).id
    run_worker(r, ["examples.echo", "examples.fail"])
    mirror.drain()
    out = _run("--task", "examples.echo", "--dry-run")
    assert "5 job(s) would be removed" in out and "examples.echo/completed: 5" in out
    assert Job.objects.filter(id__in=echo).count() == 5
    out = _run("--task", "examples.echo")
    assert "removed 5 job(s): 5 from Redis, 5 database rows" in out
    assert not Job.objects.filter(id__in=echo).exists()
    assert not any(r.exists(queue_keys("examples.echo").job(i)) for i in echo)
    assert r.exists(queue_keys("examples.echo").job(waiting)) and r.exists(queue_keys("examples.fail").job(dead))
    mirror.drain()  # the 'deleted' events change nothing more
    assert_db_matches_redis(r)
    record = AuditLog.objects.get(action="clean")
    assert record.count == 5 and record.filter["tasks"] == ["examples.echo"]


def test_clean_by_queue_state_and_time_includes_db_only_history(client, mirror, r):
    dead = client.enqueue("examples.fail", {"message": "x"}, max_retries=0).id
    waiting = client.enqueue("examples.echo", {"w": 1}, delay=600).id
    run_worker(r, ["examples.fail"])
    mirror.drain()
    # Redis forgot the dead job (retention); the database still has it and its dead letter.
    r.delete(queue_keys("examples.fail").job(dead))
    r.zrem(queue_keys("examples.fail").sets["dead"], dead)
    Job.objects.filter(id=dead).update(in_redis=False)
    assert "0 job(s) would be removed" in _run(
        "--queue", "examples.fail", "--state", "dead", "--before", "1h", "--dry-run"
    )
    assert "1 job(s) would be removed" in _run(
        "--queue", "examples.fail", "--state", "dead", "--after", "1h", "--dry-run"
    )
    _run("--queue", "examples.fail", "--state", "dead")
    assert not Job.objects.filter(id=dead).exists() and not DeadLetter.objects.exists()
    # Waiting jobs only when asked for by state; future ISO times work too.
    later = (datetime.now(UTC) + timedelta(minutes=5)).isoformat()
    _run("--state", "scheduled", "--before", later)
    assert not r.exists(queue_keys("examples.echo").job(waiting))


def test_running_jobs_are_never_removed(client, mirror, r):
    job = client.enqueue("examples.echo", {"x": 1}).id
    k = queue_keys("examples.echo")
    client.materialize("examples.echo")  # out of the intake, so that the hash can be poked
    r.hset(k.job(job), "state", "running")  # as a worker holding it would have it
    out = _run("--state", "running")
    assert "skipped 1 running" in out and r.exists(k.job(job))


def test_db_retention_removes_only_what_redis_dropped(client, mirror, r, engine_settings):
    old = client.enqueue("examples.echo", {"o": 1}).id
    kept = client.enqueue("examples.echo", {"k": 1}).id
    run_worker(r, ["examples.echo"])
    mirror.drain()
    long_ago = datetime.now(UTC) - timedelta(days=400)
    Job.objects.filter(id__in=[old, kept]).update(finished_at=long_ago)
    Job.objects.filter(id=old).update(in_redis=False)
    AuditLog.objects.create(actor="x", action="old")
    AuditLog.objects.filter(action="old").update(at=long_ago)
    removed = enforce_db_retention()
    assert removed["completed"] == 1 and removed["audit"] == 1
    assert Job.objects.filter(id=kept).exists() and not Job.objects.filter(id=old).exists()
