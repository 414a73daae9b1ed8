"""Periodic jobs: slots fire exactly once across racing schedulers, never early; misfire policies; repair."""

import itertools
import threading
import time

import redis

from jobconsole.core import Client, JobState
from jobconsole.core.ids import slot_job_id
from jobconsole.core.periodic import Fired, Misfire, Schedule, Scheduler, enqueue_now, read_records
from tests.queue_fixtures import client, registry

__all__ = ["client", "registry"]

EVERY_SECOND = Schedule(name="tick", task="t.ok", params={"x": 1}, every=1)


def wait_for_next_second(r: "redis.Redis") -> None:
    _seconds, micros = r.time()
    time.sleep(1.0 - int(micros) / 1e6 + 0.01)


def race(client: Client, schedules: list[Schedule], seconds: float, *, use_lock: bool) -> list[Scheduler]:
    """Three schedulers, each on its own thread, passing every 50 ms for `seconds`."""
    schedulers = [Scheduler(client, schedules, interval=0.05, use_lock=use_lock, lock_ttl=0.2) for _ in range(3)]
    stop = threading.Event()
    threads = [threading.Thread(target=s.run, args=(stop,)) for s in schedulers]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    return schedulers


def created(schedulers: list[Scheduler]) -> list[Fired]:
    return sorted((f for s in schedulers for f in s.fired if f.status == "created"), key=lambda f: f.slot_ms)


def test_three_racing_schedulers_fire_each_slot_once(r: "redis.Redis", client: Client) -> None:
    # Without the leader lock, so that all three really race on every slot: the compare-and-set alone holds.
    schedulers = race(client, [EVERY_SECOND], 4.5, use_lock=False)
    fired = created(schedulers)
    slots = [f.slot_ms for f in fired]
    assert len(slots) >= 3 and len(set(slots)) == len(slots)  # each slot once
    assert all(b - a == 1000 for a, b in itertools.pairwise(slots))  # none left out
    assert sum(len(s.fired) for s in schedulers) == len(fired)  # no scheduler even tried a slot twice
    assert sorted(client.job_ids("q", JobState.QUEUED, 100)) == sorted(f.job_id for f in fired)
    for f in fired:
        assert f.job_id == slot_job_id("tick", f.slot_ms)
        job = client.get(f.job_id)
        assert job.enqueued_at is not None and job.enqueued_at.timestamp() * 1000 >= f.slot_ms  # never early
        assert job.unique_key == f"periodic:tick:{f.slot_ms}" and job.params == {"x": 1}


def test_with_the_leader_lock_one_scheduler_does_the_work(r: "redis.Redis", client: Client) -> None:
    schedulers = race(client, [EVERY_SECOND], 3.5, use_lock=True)
    fired = created(schedulers)
    slots = [f.slot_ms for f in fired]
    assert len(slots) >= 2 and len(set(slots)) == len(slots)
    assert all(b - a == 1000 for a, b in itertools.pairwise(slots))
    assert len(client.job_ids("q", JobState.QUEUED, 100)) == len(fired)


def test_a_scheduler_that_stalled_after_reading_cannot_fire_the_slot_again(r: "redis.Redis", client: Client) -> None:
    # A leader reads the records, stalls past its lock's TTL; another takes over and fires the slot; the first
    # wakes up and goes on with what it read.
    stalled, successor = Scheduler(client, [EVERY_SECOND]), Scheduler(client, [EVERY_SECOND], use_lock=False)
    wait_for_next_second(r)
    stalled.step()  # first sight
    time.sleep(1.1)  # one slot falls due
    seen = read_records(client, ["tick"])["tick"]
    seen_at = client.store.time_ms()
    [fired] = successor.step()
    assert stalled._step_schedule(EVERY_SECOND, seen, seen_at) == []  # its compare-and-set is refused
    assert client.job_ids("q", JobState.QUEUED) == [fired.job_id]


def test_a_new_schedule_fires_nothing_in_the_past_and_nothing_early(r: "redis.Redis", client: Client) -> None:
    scheduler = Scheduler(client, [Schedule(name="m", task="t.ok", cron="* * * * *")])
    assert scheduler.step() == []  # first sight: its first slot is the next minute
    assert scheduler.step() == []
    assert client.job_ids("q", JobState.QUEUED) == []
    record = read_records(client, ["m"])["m"]
    assert record.handled_ms is not None and record.last_job == ""


def test_a_claim_for_a_future_slot_is_refused_by_redis_clock(r: "redis.Redis", client: Client) -> None:
    now = client.store.time_ms()
    client.store.periodic_advance("x", expected_ms=None, new_ms=now, job_id="", slot_ms=0)
    assert client.store.periodic_advance("x", expected_ms=now, new_ms=now + 5000, job_id="J", slot_ms=now) == "early"
    assert client.store.periodic_advance("x", expected_ms=now - 1, new_ms=now, job_id="J", slot_ms=now) == "stale"


def test_skip_fires_none_of_the_missed_slots(r: "redis.Redis", client: Client) -> None:
    schedule = Schedule(name="s", task="t.ok", every=1, misfire=Misfire.SKIP)
    scheduler = Scheduler(client, [schedule], misfire_grace=1.5)
    wait_for_next_second(r)
    scheduler.step()  # seen now; then no scheduler runs for 4 s
    time.sleep(4.0)
    fired = scheduler.step()
    assert [f.late for f in fired] == [False] * len(fired) and 1 <= len(fired) <= 2  # only the recent ones
    now = client.store.time_ms()
    assert all(now - f.slot_ms <= 1500 for f in fired)


def test_run_once_fires_one_job_for_all_missed_slots(r: "redis.Redis", client: Client) -> None:
    schedule = Schedule(name="s", task="t.ok", every=1, misfire=Misfire.RUN_ONCE)
    scheduler = Scheduler(client, [schedule], misfire_grace=1.5)
    wait_for_next_second(r)
    scheduler.step()
    time.sleep(4.0)
    fired = scheduler.step()
    late = [f for f in fired if f.late]
    assert len(late) == 1 and 1 <= len(fired) - 1 <= 2
    assert len(client.job_ids("q", JobState.QUEUED)) == len(fired)
    assert scheduler.step() == []  # and then on as usual


def test_a_disabled_schedule_lets_its_slots_pass(r: "redis.Redis", client: Client) -> None:
    off = Schedule(name="s", task="t.ok", every=1, enabled=False, misfire=Misfire.RUN_ONCE)
    scheduler = Scheduler(client, [off], use_lock=False)
    wait_for_next_second(r)
    scheduler.step()
    time.sleep(2.1)
    assert scheduler.step() == []
    on = Schedule(name="s", task="t.ok", every=1, misfire=Misfire.RUN_ONCE)
    enabled = Scheduler(client, [on], use_lock=False)
    assert enabled.step() == []  # enabling it fires no backlog
    assert client.job_ids("q", JobState.QUEUED) == []
    time.sleep(1.0)
    [fired] = enabled.step()  # then its next slot
    assert not fired.late


def test_a_slot_whose_scheduler_died_before_the_enqueue_is_repaired_once(r: "redis.Redis", client: Client) -> None:
    # A scheduler claimed a slot and died before enqueuing it: the pending record stays behind.
    now = client.store.time_ms()
    client.store.periodic_advance("tick", expected_ms=None, new_ms=now - 5000, job_id="", slot_ms=0)
    slot = (now - 5000) // 1000 * 1000 + 1000
    job_id = slot_job_id("tick", slot)
    assert (
        client.store.periodic_advance("tick", expected_ms=now - 5000, new_ms=slot, job_id=job_id, slot_ms=slot) == "ok"
    )
    young = Scheduler(client, [EVERY_SECOND], repair_after=60)
    assert young.step() == []  # may still be on its way: wait
    young.release()
    repairer = Scheduler(client, [EVERY_SECOND], repair_after=0, misfire_grace=60)
    [repaired] = repairer.step()
    assert (repaired.job_id, repaired.status) == (job_id, "created")
    assert read_records(client, ["tick"])["tick"].pending_job == ""
    # The slot's job was also enqueued by the dying scheduler after all: the same id is taken once.
    assert client.enqueue("t.ok", {"x": 1}, id=job_id).status == "exists"


def test_run_now_uses_no_slot(r: "redis.Redis", client: Client) -> None:
    result = enqueue_now(client, EVERY_SECOND)
    assert result.created and client.get(result.id).params == {"x": 1}


def test_cron_schedules_list_their_next_runs_in_their_zone() -> None:
    daily = Schedule(name="d", task="t.ok", cron="0 9 * * *", timezone="Europe/Paris")
    start = 1767225600000  # 2026-01-01 00:00 UTC
    assert [(ms - start) // 3_600_000 for ms in daily.next_runs(start, 2)] == [8, 32]  # 09:00 CET = 08:00 UTC
    assert Schedule(name="e", task="t.ok", every=30).next_runs(start + 1, 2) == [start + 30_000, start + 60_000]
