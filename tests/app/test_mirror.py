"""The database mirror: events applied in batches, idempotently; crashes, trimmed streams, leaders."""

import random
import subprocess
import time

import pytest

from jobconsole.core import RedisFull, keys
from jobconsole.core.editing import edit_job
from jobconsole.core.errors import JobNotFound
from jobconsole.core.keys import MIRROR_GROUP as GROUP
from jobconsole.core.keys import queue_keys
from jobconsole.core.maintenance import Maintenance, Retention
from jobconsole.mirror.leader import LostLeadership
from jobconsole.mirror.loop import Mirror
from jobconsole.mirror.service import Chore, Chores, build_service
from jobconsole.models import Attempt, DeadLetter, Job, MirrorCursor, MirrorResync, Queue
from tests.conftest import PROJECT, PYTHON, manage_env
from tests.mirror_fixtures import *  # noqa: F403
from tests.mirror_fixtures import (
    RUNMIRROR_EXITING,
    Crash,
    SimulatedCrash,
    assert_db_matches_redis,
    crashing_mirror,
    database_url,
    run_worker,
)

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


def _mixed_workload(client, r, n: int = 40) -> dict[str, str]:
    """Jobs in every state: completed, dead (with history), retried then completed, scheduled, cancelled,
    deleted, edited. Returns a few ids by role."""
    ids = {}
    for i in range(n):
        client.enqueue("examples.echo", {"i": i, "text": "héllo <b>"})
    ids["dead"] = client.enqueue("examples.fail", {"message": "boom"}, max_retries=1).id
    ids["scheduled"] = client.enqueue("examples.echo", {"later": True}, delay=3600).id
    ids["cancelled"] = client.enqueue("examples.echo", {"c": 1}, delay=3600).id
    ids["deleted"] = client.enqueue("examples.echo", {"d": 1}, delay=3600).id
    client.cancel(ids["cancelled"])
    client.delete(ids["deleted"])
    edit_job(client, ids["scheduled"], expected_state="scheduled", priority=5, params={"later": "edited"})
    run_worker(r, ["examples.echo", "examples.fail"])
    time.sleep(0.6)  # examples.fail retries after 0.5 s
    run_worker(r, ["examples.fail"])
    return ids


def _start_mirrored(client, r) -> None:
    """The mirror has seen both queues (initial resync done), so later changes arrive as events."""
    client.enqueue("examples.echo", {"first": True})
    client.enqueue("examples.fail", {"message": "first"}, delay=3600)
    first = Mirror(r, block_ms=10)
    first.drain()
    first.release()


def test_mirror_applies_lifecycle(client, mirror, r):
    ok = client.enqueue("examples.echo", {"x": 1})
    dead = client.enqueue("examples.fail", {"message": "boom"}, max_retries=0)
    waiting = client.enqueue("examples.echo", {"x": 2}, delay=3600)
    mirror.drain()
    assert Job.objects.get(id=ok.id).state == "queued"
    run_worker(r, ["examples.echo", "examples.fail"])
    mirror.drain()
    assert Job.objects.get(id=ok.id).state == "completed"
    assert Job.objects.get(id=ok.id).result == '{"x":1}'
    assert Job.objects.get(id=waiting.id).state == "scheduled"
    job = Job.objects.get(id=dead.id)
    assert job.state == "dead"
    letter = job.dead_letters.get()
    assert letter.error_class.endswith("ExampleFailure")
    assert "examples.py" in letter.top_frame and len(letter.fingerprint) == 16
    assert [a.outcome for a in job.history.all()] == ["failed"]
    assert MirrorCursor.objects.get(queue="examples.echo").events >= 2  # started, completed
    assert r.xpending(queue_keys("examples.echo").events, GROUP)["pending"] == 0
    assert_db_matches_redis(r)


def test_mixed_workload_matches_redis_and_requeue_closes_dead_letter(client, mirror, r):
    ids = _mixed_workload(client, r)
    mirror.drain()
    assert_db_matches_redis(r)
    assert not Job.objects.filter(id=ids["deleted"]).exists()
    assert Job.objects.get(id=ids["scheduled"]).params == '{"later":"edited"}'
    assert [a.outcome for a in Attempt.objects.filter(job_id=ids["dead"])] == ["failed", "failed"]
    client.requeue(ids["dead"], reset_attempts=True)
    mirror.drain()
    letter = DeadLetter.objects.get(job_id=ids["dead"])
    assert letter.resubmitted_at is not None
    assert Job.objects.get(id=ids["dead"]).state == "queued"


@pytest.mark.parametrize("overlap", [False, True], ids=["sequential", "overlap"])
@pytest.mark.parametrize("point", ["before_commit", "after_commit"])
def test_crash_mid_batch_then_restart_loses_nothing(client, r, engine_settings, point, overlap):
    _start_mirrored(client, r)
    ids = _mixed_workload(client, r, n=120)
    for crash_on in (1, 2, 3):
        # Batches of a few entries: a batch entry (emit_jobs) records up to 50 jobs' events.
        m = crashing_mirror(r, Crash(point, crash_on), batch=3, block_ms=10, overlap=overlap)
        with pytest.raises(SimulatedCrash):
            m.drain()
        if point == "after_commit":  # committed but never acknowledged: still pending in the group
            pending = sum(
                r.xpending(queue_keys(q).events, GROUP)["pending"] for q in ("examples.echo", "examples.fail")
            )
            assert pending > 0
        r.delete(keys.MIRROR_LOCK)  # the dead process's lock would expire
    Mirror(r, batch=50, block_ms=10).drain()
    assert_db_matches_redis(r)
    assert DeadLetter.objects.filter(job_id=ids["dead"]).count() == 1
    assert MirrorResync.objects.exclude(reason="initial").count() == 0


def test_trimmed_stream_is_noticed_and_resynchronised(client, mirror, r):
    kept = client.enqueue("examples.echo", {"a": 1}, delay=3600)
    gone = client.enqueue("examples.echo", {"b": 1}, delay=3600)
    mirror.drain()
    assert Job.objects.filter(id__in=[kept.id, gone.id]).count() == 2
    # The mirror is down while these happen, and the stream is trimmed before it comes back.
    mirror.release()
    for i in range(30):
        client.enqueue("examples.echo", {"i": i})
    client.delete(gone.id)
    edit_job(client, kept.id, expected_state="scheduled", priority=-3)
    run_worker(r, ["examples.echo"])
    r.xtrim(queue_keys("examples.echo").events, maxlen=5, approximate=False)
    back = Mirror(r, batch=100, block_ms=10)
    back.drain()
    resync = MirrorResync.objects.get(queue="examples.echo", reason="gap")
    assert resync.jobs == 31 and resync.missing == 1
    assert not Job.objects.filter(id=gone.id).exists()
    assert Job.objects.get(id=kept.id).priority == -3
    assert_db_matches_redis(r)
    # And it goes on normally from there.
    later = client.enqueue("examples.echo", {"after": 1})
    back.drain()
    assert Job.objects.filter(id=later.id).exists()


def test_trimmed_pending_entries_are_a_gap_too(client, r, engine_settings):
    client.enqueue("examples.echo", {"first": True})
    crash = Crash("before_commit", on=0)  # armed below, once the first events are applied
    m = crashing_mirror(r, crash, batch=10, block_ms=10)
    m.drain()
    for i in range(20):
        client.enqueue("examples.echo", {"i": i})
        client.materialize("examples.echo")  # an entry each (drained together, they would share a batch entry)
    crash.on = crash.seen + 1
    with pytest.raises(SimulatedCrash):
        m.drain()  # 10 entries delivered to the group (pending), none committed
    assert r.xpending(queue_keys("examples.echo").events, GROUP)["pending"] == 10
    r.xtrim(queue_keys("examples.echo").events, maxlen=0, approximate=False)
    r.delete(keys.MIRROR_LOCK)
    Mirror(r, batch=10, block_ms=10).drain()
    assert MirrorResync.objects.filter(reason="gap").exists()
    assert_db_matches_redis(r)


def test_expired_jobs_and_dead_letters_outlive_redis(client, mirror, r):
    dead = client.enqueue("examples.fail", {"message": "x"}, max_retries=0)
    done = client.enqueue("examples.echo", {"y": 1})
    run_worker(r, ["examples.fail", "examples.echo"])
    mirror.drain()
    Maintenance(r, retention=Retention(completed=0, dead=0, failed=0, cancelled=0, dropped=0)).trim("examples.fail")
    Maintenance(r, retention=Retention(completed=0, dead=0, failed=0, cancelled=0, dropped=0)).trim("examples.echo")
    assert not r.exists(queue_keys("examples.fail").job(dead.id))
    mirror.drain()
    job = Job.objects.get(id=dead.id)
    assert job.in_redis is False and job.state == "dead"
    assert job.dead_letters.count() == 1 and job.history.count() == 1
    assert Job.objects.get(id=done.id).in_redis is False
    assert_db_matches_redis(r)


def test_pause_and_resume_are_mirrored(client, mirror, r):
    client.enqueue("examples.echo", {})
    mirror.drain()
    client.pause("examples.echo")
    mirror.drain()
    assert Queue.objects.get(name="examples.echo").paused is True
    client.resume("examples.echo")
    mirror.drain()
    assert Queue.objects.get(name="examples.echo").paused is False


def test_a_deposed_leader_cannot_write(client, r, engine_settings):
    client.enqueue("examples.echo", {"y": 1})
    first = Mirror(r, block_ms=10)
    first.drain()
    job = client.enqueue("examples.echo", {"z": 1})
    r.delete(keys.MIRROR_LOCK)  # the first leader froze past its lock's TTL
    second = Mirror(r, block_ms=10)
    assert second.leadership.lead()
    # The frozen leader wakes up believing it still leads, with a batch in hand.
    first.leadership._renewed = time.monotonic()
    with pytest.raises(LostLeadership):
        first.drain()
    assert not Job.objects.filter(id=job.id).exists()
    second.drain()
    assert Job.objects.filter(id=job.id).exists()


def test_redis_losing_its_data_is_noticed_and_the_waiting_jobs_are_restored(client, mirror, r):
    """Redis restarted empty (or on an older AOF): the epoch the database recorded is ahead of Redis's, every
    queue resyncs, and the jobs the database knew as waiting go back into Redis under their own ids."""
    done = client.enqueue("examples.echo", {"n": 1})
    run_worker(r, ["examples.echo"])
    waiting = client.enqueue("examples.echo", {"n": 2}, priority=-5, unique_key="only-one")
    later = client.enqueue("examples.echo", {"n": 3}, delay=3600)
    mirror.drain()
    r.flushall()  # Redis restarted without its data
    mirror.drain()
    rewound = MirrorResync.objects.get(reason="redis-rewound", queue="examples.echo")
    assert rewound.restored == 2 and rewound.missing == 3
    again = client.get(waiting.id)
    assert again.state.value == "queued" and again.params == {"n": 2} and again.priority == -5
    assert again.unique_key == "only-one"
    assert client.get(later.id).state.value == "scheduled"
    assert client.get(later.id).run_at == Job.objects.get(id=later.id).run_at
    with pytest.raises(JobNotFound):  # finished: kept as history only
        client.get(done.id)
    assert Job.objects.get(id=done.id).in_redis is False
    assert_db_matches_redis(r)
    # Noticed once: the next reads see Redis's epoch ahead again.
    client.enqueue("examples.echo", {"n": 4})
    mirror.drain()
    assert MirrorResync.objects.filter(reason="redis-rewound").count() == 1
    run_worker(r, ["examples.echo"])
    mirror.drain()
    assert Job.objects.get(id=waiting.id).state == "completed"


@pytest.mark.parametrize("point", ["resynced", "rewound"])
def test_a_mirror_killed_while_it_handles_a_rollback_loses_no_waiting_job(client, r, engine_settings, point):
    """'resynced': killed after a queue's rows were resynced, before the rewind was recorded; the next leader
    must still see the rewind. 'rewound': killed once it was handled, before the restored jobs' events were
    applied, and Redis then rolled back again; the rows of the jobs put back must still count as in Redis."""
    waiting = client.enqueue("examples.echo", {"n": 1}, delay=3600)
    ready = client.enqueue("examples.echo", {"n": 2})
    Mirror(r, block_ms=10).drain()
    r.delete(keys.MIRROR_LOCK)
    r.flushall()
    dying = crashing_mirror(r, Crash(point), block_ms=10)
    with pytest.raises(SimulatedCrash):
        dying.drain()
    assert client.get(waiting.id).state.value == "scheduled"  # put back before it died
    r.delete(keys.MIRROR_LOCK)  # the dead process's lock would expire
    if point == "rewound":
        r.flushall()  # a second rollback, to before the first restore
    Mirror(r, block_ms=10).drain()
    assert client.get(waiting.id).state.value == "scheduled"
    assert client.get(ready.id).state.value == "queued"
    assert Job.objects.filter(id__in=[waiting.id, ready.id], in_redis=True).count() == 2
    assert_db_matches_redis(r)


def test_restore_can_be_turned_off(client, r, engine_settings):
    mirror = Mirror(r, batch=200, block_ms=20, restore=False)
    job = client.enqueue("examples.echo", {"q": 1})
    mirror.drain()
    r.flushall()
    mirror.drain()
    assert MirrorResync.objects.filter(reason="redis-rewound").exists()
    assert Job.objects.get(id=job.id).in_redis is False
    with pytest.raises(JobNotFound):
        client.get(job.id)
    assert_db_matches_redis(r)


@pytest.mark.slow
def test_runmirror_killed_at_random_points_converges(client, r, redis_url, tmp_path, engine_settings):
    _start_mirrored(client, r)
    _mixed_workload(client, r, n=300)
    env = manage_env(redis_url, tmp_path, DATABASE_URL=database_url(), JOBCONSOLE_MIRROR_LOCK_TTL="0.5")
    cmd = [PYTHON, str(PROJECT / "manage.py"), "runmirror", "--batch", "40"]
    rng = random.Random(4)
    for crash in ("before_commit:2", "after_commit:3", "", "", "after_commit:1", ""):
        # Killed at a random moment; and at a chosen point first, when `crash` names one.
        exiting = [PYTHON, *RUNMIRROR_EXITING, crash, "--batch", "40"]
        proc = subprocess.Popen(exiting if crash else cmd, env=env, cwd=PROJECT)
        try:
            code = proc.wait(timeout=rng.uniform(0.3, 1.5))
            assert code == 137, f"runmirror {crash or '(no crash)'} ended on its own with {code}"
        except subprocess.TimeoutExpired:
            proc.kill()  # SIGKILL wherever it is
            proc.wait()
        if rng.random() < 0.5:
            client.enqueue("examples.echo", {"more": rng.random()})
        time.sleep(0.6)  # the killed leader's lock expires
    done = subprocess.run([*cmd, "--burst"], env=env, cwd=PROJECT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert_db_matches_redis(r)
    assert MirrorResync.objects.exclude(reason="initial").count() == 0


@pytest.mark.slow
def test_runworker_runs_the_mirror(client, r, redis_url, tmp_path):
    job = client.enqueue("examples.sleep", {"seconds": 1.5})
    env = manage_env(redis_url, tmp_path, DATABASE_URL=database_url())
    done = subprocess.run(
        [PYTHON, str(PROJECT / "manage.py"), "runworker", "--queues", "examples.sleep", "--burst"],
        env=env, cwd=PROJECT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert Job.objects.filter(id=job.id).exists()


def test_job_already_final_when_first_seen_keeps_its_history(client, mirror, r):
    """A lagging mirror reads a job's hash for its 'enqueued' event when it has already died: the row is
    written final with its history then, and the later events of that job are skipped, not lost."""
    client.enqueue("examples.fail", {"message": "warm-up"}, delay=3600)
    mirror.drain()
    job = client.enqueue("examples.fail", {"message": "late"}, max_retries=0)
    mirror.reader.batch = 1  # the 'enqueued' event alone in the first batch
    mirror.step()
    run_worker(r, ["examples.fail"])
    mirror.step()  # still only the old 'enqueued' event (not yet: the worker ran after the read)
    mirror.reader.batch = 1000
    mirror.drain()
    row = Job.objects.get(id=job.id)
    assert row.state == "dead" and [a.outcome for a in row.history.all()] == ["failed"]
    assert row.dead_letters.count() == 1
    assert_db_matches_redis(r)


def test_mirror_starts_and_keeps_up_while_redis_is_full(client, engine_settings, r):
    """With Redis at maxmemory (noeviction) enqueues are refused, but the workers finish the backlog, and a mirror
    that first meets the queue then must set up its consumer group, resync and read on (allow-oom scripts)."""
    client.enqueue("examples.echo", {})  # the queue exists; scripts loaded
    r.config_set("maxmemory", int(r.info("memory")["used_memory"]) + 200_000)
    try:
        accepted = []
        with pytest.raises(RedisFull):
            while len(accepted) < 10_000:
                accepted.append(client.enqueue("examples.echo", {"pad": "x" * 1000}).id)
        assert len(accepted) > 20
        mirror = Mirror(r, batch=200, block_ms=20)
        mirror.drain()
        assert Job.objects.filter(id__in=accepted, state="queued").count() == len(accepted)
        run_worker(r, ["examples.echo"])
        mirror.drain()
        assert Job.objects.filter(id__in=accepted, state="completed").count() == len(accepted)
        with pytest.raises(RedisFull):  # still full all along
            client.enqueue("examples.echo", {"pad": "x" * 1000})
        mirror.release()
    finally:
        r.config_set("maxmemory", 0)


def test_chores_run_each_at_its_interval_and_only_while_leading(engine_settings, r):
    mirror = Mirror(r, block_ms=10)
    ran: list[str] = []

    def broken() -> None:
        raise RuntimeError("a failing chore is logged, the others still run")

    chores = Chores(
        mirror.leadership,
        [Chore("broken", 0.0, broken), Chore("often", 0.0, lambda: ran.append("often")),
         Chore("rarely", 3600.0, lambda: ran.append("rarely"), last=time.monotonic())],
    )  # fmt: skip
    chores.run_due()
    assert ran == []  # not the leader
    assert mirror.leadership.lead()
    chores.run_due()
    chores.run_due()
    assert ran == ["often", "often"]  # "rarely" ran an hour ago
    mirror.release()
    chores.run_due()
    assert ran == ["often", "often"]


def test_the_service_wires_the_leader_chores(engine_settings, r):
    service = build_service(r)
    assert [c.name for c in service.chores.chores] == [
        "outbox relay", "database retention", "outbox prune", "metrics rollup", "queue depth samples",
        "metrics retention",
    ]  # fmt: skip
    assert service.chores.leadership is service.mirror.leadership
    service.burst()
    assert not service.mirror.leader
    assert all(c.last > 0 for c in service.chores.chores)  # the burst did each once, as the leader


def test_a_nul_in_an_error_message_is_mirrored_as_a_replacement_character(client, mirror, r):
    """PostgreSQL's text columns cannot hold NUL: one failing task's message with one made every batch carrying
    its job fail there, so the mirror stopped. The database gets U+FFFD in its place; Redis keeps the original."""
    poisoned = client.enqueue("examples.fail", {"message": "bo\x00om"}, max_retries=0)
    healthy = client.enqueue("examples.echo", {"x": 1})
    run_worker(r, ["examples.echo", "examples.fail"])
    mirror.drain()
    assert Job.objects.get(id=healthy.id).state == "completed"
    assert Job.objects.get(id=poisoned.id).state == "dead"
    assert DeadLetter.objects.get(job_id=poisoned.id).message.endswith("bo\ufffdom")
    assert "bo\ufffdom" in Attempt.objects.get(job_id=poisoned.id).traceback
    assert "bo\x00om" in client.get(poisoned.id, history=True).history[-1].message


def test_an_idle_mirror_waits_rather_than_reading_every_queue_and_still_sees_new_work(client, mirror, r, monkeypatch):
    """Idle, a look (a read of every stream, a drain of every intake) that found nothing is followed by blocking
    waits, not by more looks: a new event ends the wait at once; an intake entry written between two waits (no
    wait sees it) is found by the look QUIET_LOOK_EVERY_S brings."""
    from jobconsole.mirror import loop

    client.enqueue("examples.echo", {})
    client.enqueue("examples.fail", {"message": "boom"})
    client.enqueue("examples.sleep", {"seconds": 0})
    mirror.drain()  # every queue known, everything applied, the last wait timed out

    def looks() -> int:  # mirror_read describes every stream of every queue it reads
        return int(r.info("commandstats").get("cmdstat_xinfo|stream", {}).get("calls", 0))

    r.config_resetstat()
    until = time.monotonic() + 0.5  # 25 waits of 20 ms; within QUIET_LOOK_EVERY_S of the last look
    steps = 0
    while time.monotonic() < until:
        assert mirror.step() == 0
        steps += 1
    assert steps >= 5 and looks() <= 3  # at most one look (3 queues), not one per step (3 per step before)

    scheduled = client.enqueue("examples.echo", {"x": 1}, delay=3600)  # an event on the stream: woken at once
    assert mirror.step() > 0 and Job.objects.get(id=scheduled.id).state == "scheduled"

    monkeypatch.setattr(loop, "QUIET_LOOK_EVERY_S", 0.3)
    mirror.step()  # a look that finds nothing; then waits
    in_intake = client.enqueue("examples.sleep", {"seconds": 0})  # between two waits: only a look finds it
    started = time.monotonic()
    while not Job.objects.filter(id=in_intake.id).exists():
        assert time.monotonic() - started < 5, "the intake entry was never looked for"
        mirror.step()
    assert time.monotonic() - started >= 0.1  # found by the look the interval brought, not by a wait
