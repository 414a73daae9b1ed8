"""Transactional enqueue: both or neither; published after commit; a crash after commit still publishes
exactly one job; publishing twice never makes two jobs."""

import io
import json
import subprocess
import textwrap

import pytest
from django.core.management import CommandError, call_command
from django.db import transaction

from jobconsole import outbox
from jobconsole.core import InvalidJob
from jobconsole.core.keys import queue_keys
from jobconsole.models import AuditLog, Job, OutboxEntry
from tests.conftest import PROJECT, PYTHON, manage_env
from tests.mirror_fixtures import *  # noqa: F403
from tests.mirror_fixtures import database_url, run_worker

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


def jobs_in_redis(r, queue="examples.echo") -> list[str]:
    k = queue_keys(queue)
    return [key.removeprefix(k.job_prefix) for key in r.scan_iter(k.job_prefix + "*") if not key.endswith(":attempts")]


def test_rollback_means_no_job(client, r):
    with pytest.raises(RuntimeError), transaction.atomic():
        AuditLog.objects.create(actor="app", action="order")  # the application's own row
        outbox.enqueue("examples.echo", {"order": 1})
        raise RuntimeError("payment declined")
    assert not AuditLog.objects.exists() and not OutboxEntry.objects.exists()
    assert jobs_in_redis(r) == []


def test_commit_publishes_once(client, r):
    with transaction.atomic():
        AuditLog.objects.create(actor="app", action="order")
        job_id = outbox.enqueue("examples.echo", {"order": 2}, delay=60)
        assert jobs_in_redis(r) == []  # nothing is visible before the commit
    assert jobs_in_redis(r) == [job_id]
    entry = OutboxEntry.objects.get(id=job_id)
    assert entry.published_at is not None and entry.status == "created"
    assert r.hget(queue_keys("examples.echo").job(job_id), "state") == "scheduled"
    # The relay and a second publish find nothing to do, and never a second job.
    assert outbox.relay(older_than=0) == 0
    OutboxEntry.objects.filter(id=job_id).update(published_at=None)
    assert outbox.publish([job_id]) == 1
    assert OutboxEntry.objects.get(id=job_id).status == "exists"
    assert jobs_in_redis(r) == [job_id]


def test_a_relative_run_at_a_group_and_unique_until_survive_the_outbox(client, r):
    with transaction.atomic():
        job_id = outbox.enqueue(
            "examples.echo", {"x": 1}, run_at=[2, "minutes"], group="payments", unique_key="u1", unique_until="start"
        )
    key = queue_keys("examples.echo").job(job_id)
    fields = r.hmget(key, "state", "group", "unique_until", "run_at", "enqueued_at")
    assert fields[:3] == ["scheduled", "payments", "start"]
    assert 110_000 <= int(fields[3]) - int(fields[4]) <= 125_000  # counted from the call, not the publish


def test_invalid_job_fails_inside_the_transaction(client, r):
    with pytest.raises(InvalidJob), transaction.atomic():
        outbox.enqueue("no.such.task", {})
    with pytest.raises(InvalidJob), transaction.atomic():
        outbox.enqueue("examples.echo", {"x": float("nan")})
    assert not OutboxEntry.objects.exists()


def test_redis_down_at_publish_is_relayed_later(client, r, monkeypatch):
    def broken(*args, **kwargs):
        import redis

        raise redis.ConnectionError("down")

    monkeypatch.setattr(type(client), "enqueue_many", broken)
    with transaction.atomic():
        job_id = outbox.enqueue("examples.echo", {"later": 1})
    entry = OutboxEntry.objects.get(id=job_id)
    assert entry.published_at is None and entry.tries == 1 and "down" in entry.last_error
    monkeypatch.undo()
    assert outbox.relay(older_than=0) == 1
    assert jobs_in_redis(r) == [job_id]


def test_crash_after_commit_publishes_exactly_one_job(client, r, redis_url, tmp_path):
    """A real process commits, then dies before its on-commit publish runs; the relay publishes it once."""
    script = textwrap.dedent("""
        import os, django
        django.setup()
        from django.db import transaction
        from jobconsole import outbox
        from jobconsole.models import AuditLog
        with transaction.atomic():
            transaction.on_commit(lambda: os._exit(9))  # runs first: dies between commit and publish
            AuditLog.objects.create(actor="app", action="order")
            print(outbox.enqueue("examples.echo", {"crash": 1}), flush=True)
    """)
    env = manage_env(redis_url, tmp_path, DATABASE_URL=database_url())
    done = subprocess.run([PYTHON, "-c", script], env=env, cwd=PROJECT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 9, done.stderr
    job_id = done.stdout.strip()
    assert AuditLog.objects.filter(action="order").count() == 1  # committed
    assert OutboxEntry.objects.get(id=job_id).published_at is None
    assert jobs_in_redis(r) == []
    for _ in range(2):  # two relays (or a relay racing a late publish) still make one job
        call_command("relayoutbox", "--once", "--older-than", "0")
    assert jobs_in_redis(r) == [job_id]
    assert OutboxEntry.objects.get(id=job_id).published_at is not None


def test_relay_never_resends_a_job_the_mirror_already_saw(client, mirror, r):
    """Published, never marked, then the job ran and Redis forgot it: the relay must not run it again."""
    with transaction.atomic():
        job_id = outbox.enqueue("examples.echo", {"once": 1})
    run_worker(r, ["examples.echo"])
    mirror.drain()
    OutboxEntry.objects.filter(id=job_id).update(published_at=None)  # the mark was lost
    r.delete(queue_keys("examples.echo").job(job_id), queue_keys("examples.echo").job(job_id) + ":attempts")
    assert outbox.relay(older_than=0) == 0
    assert jobs_in_redis(r) == [] and Job.objects.get(id=job_id).state == "completed"
    assert OutboxEntry.objects.get(id=job_id).status == "exists"


def test_a_full_redis_takes_part_of_a_relay_and_the_rest_waits(client, r):
    client.enqueue("examples.echo", {})  # the queue exists; scripts loaded
    used = int(r.info("memory")["used_memory"])
    r.config_set("maxmemory", used // 2)  # full
    try:
        with transaction.atomic():
            ids = [outbox.enqueue("examples.echo", {"pad": "x" * 1000}) for _ in range(600)]
        waiting = OutboxEntry.objects.filter(published_at__isnull=True)
        assert waiting.count() == 600 and set(waiting.values_list("tries", flat=True)) == {1}
        assert "Redis is full" in waiting.first().last_error
        # Room for about 250 of them: the first script of the batch goes in, the others are refused.
        r.config_set("maxmemory", used + 300_000)
        sent = outbox.relay(older_than=0)
        assert 0 < sent < 600
        published = set(OutboxEntry.objects.filter(published_at__isnull=False).values_list("id", flat=True))
        assert published == set(jobs_in_redis(r)) & set(ids)  # exactly the jobs Redis took
        assert len(published) == sent and set(OutboxEntry.objects.values_list("status", flat=True)) <= {"", "created"}
    finally:
        r.config_set("maxmemory", 0)
    assert outbox.relay(older_than=0) == 600 - sent
    assert not OutboxEntry.objects.filter(published_at__isnull=True).exists()
    assert sorted(set(jobs_in_redis(r)) & set(ids)) == sorted(ids)
    assert set(OutboxEntry.objects.values_list("status", flat=True)) == {"created"}


def test_the_enqueue_command_prints_what_a_full_redis_took(client, r):
    client.enqueue("examples.echo", {})  # the queue exists; scripts loaded
    r.config_set("maxmemory", int(r.info("memory")["used_memory"]) + 300_000)
    out = io.StringIO()
    try:
        with pytest.raises(CommandError, match=r"Redis is full .* \d+ of 600 jobs enqueued, the rest not"):
            call_command("enqueue", "examples.echo", json.dumps({"pad": "x" * 1000}), "--count", "600", stdout=out)
    finally:
        r.config_set("maxmemory", 0)
    printed = [line.split()[0] for line in out.getvalue().splitlines()]
    assert 0 < len(printed) < 600 and all(" created " in line for line in out.getvalue().splitlines())
    assert sorted(printed) == sorted(set(jobs_in_redis(r)) - {min(jobs_in_redis(r))})  # all but the first job


def test_the_enqueue_command_takes_a_group_unique_until_and_run_at(client, r):
    out = io.StringIO()
    call_command("enqueue", "examples.echo", '{"x": 1}', "--group", "payments", "--unique-key", "k", "--unique-until",
                 "start", "--run-at", "2030-01-31T09:00:00Z", stdout=out)  # fmt: skip
    job_id = out.getvalue().split()[0]
    fields = r.hmget(queue_keys("examples.echo").job(job_id), "state", "group", "unique_until")
    assert fields == ["scheduled", "payments", "start"]
    with pytest.raises(CommandError, match="invalid choice"):
        call_command("enqueue", "examples.echo", "--unique-until", "never", stderr=io.StringIO())
