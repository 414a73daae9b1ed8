"""The intake: a single enqueue while no worker waits is one XADD; whatever touches the queue next makes
the job (hash, ready set, event, counters) in acceptance order, so no reader or worker sees a difference."""

import json
import logging
import re
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from jobconsole.core import Client, JobSpec, JobState, TaskRegistry, scripts
from jobconsole.core.connection import connect
from jobconsole.core.errors import JobNotFound
from jobconsole.core.keys import queue_keys
from jobconsole.core.maintenance import Maintenance
from jobconsole.core.store import INTAKE_MAX
from tests.helpers import claim
from tests.queue_fixtures import *  # noqa: F403  (the client and registry fixtures)

K = queue_keys("q")


def test_the_client_and_the_scripts_share_one_intake_bound() -> None:
    lib = (Path(scripts.__file__).parent / "lua" / "_lib.lua").read_text()
    assert re.search(r"^local INTAKE_MAX = (\d+)", lib, re.M)[1] == str(INTAKE_MAX)  # type: ignore[index]


def _claim(r: "redis.Redis", count: int = 10) -> list[str]:
    return [lease.id for lease in claim(r, "q", count)]


def test_a_single_enqueue_with_no_idle_worker_is_one_intake_entry(r: "redis.Redis", client: Client) -> None:
    before_ms = int(time.time() * 1000)
    result = client.enqueue("t.ok", {"x": 3})
    assert (result.status, result.state) == ("created", JobState.QUEUED)
    assert r.xlen(K.intake) == 1
    assert not r.exists(K.job(result.id)) and r.zcard(K.ready) == 0  # nothing else was written yet

    job = client.get(result.id)  # a read makes the job first
    assert r.xlen(K.intake) == 0 and r.zcard(K.ready) == 1
    assert (job.state, job.task, job.params, job.queue) == (JobState.QUEUED, "t.ok", {"x": 3}, "q")
    assert job.enqueued_at is not None
    assert abs(job.enqueued_at.timestamp() * 1000 - before_ms) < 2000  # the entry's Redis time
    events = [fields for _, fields in r.xrange(K.events)]
    assert events == [{"job": result.id, "event": "enqueued", "state": "queued"}]
    stats = r.hgetall(K.stats)
    assert [int(v) for f, v in stats.items() if f.endswith("|enqueued|t.ok")] == [1]


def test_claims_take_intake_jobs_in_the_order_they_were_accepted(r: "redis.Redis", client: Client) -> None:
    first = client.enqueue("t.ok").id
    second = client.enqueue("t.ok").id
    # Full-path enqueues (a unique key; a batch) drain the intake before adding their own jobs.
    third = client.enqueue("t.ok", unique_key="u").id
    fourth, fifth = (res.id for res in client.enqueue_many([JobSpec(task="t.ok"), JobSpec(task="t.ok")]))
    sixth = client.enqueue("t.ok").id
    assert r.xlen(K.intake) == 1
    assert _claim(r, 10) == [first, second, third, fourth, fifth, sixth]


def test_priority_holds_across_the_intake(r: "redis.Redis", client: Client) -> None:
    low = client.enqueue("t.ok", priority=5).id
    high = client.enqueue("t.ok", priority=-5).id
    assert r.xlen(K.intake) == 2
    assert _claim(r, 10) == [high, low]


def test_a_claim_leases_intake_jobs_with_their_hash_written_once(r: "redis.Redis", client: Client) -> None:
    grouped = client.enqueue("t.ok", {"x": 9}, group="g").id  # a group's job never takes the intake
    ids = [client.enqueue("t.ok", {"x": i}).id for i in range(3)]
    assert r.xlen(K.intake) == 3 and r.zrange(K.ready, 0, -1) == [grouped]
    leases = claim(r, "q", 2)
    assert [(lease.id, json.loads(lease.params)) for lease in leases] == [(ids[0], {"x": 0}), (ids[1], {"x": 1})]
    for lease in leases:  # every field of the entry, and the lease over them
        h = r.hgetall(K.job(lease.id))
        assert (h["state"], h["token"], h["attempts"], h["task"], h["id"]) == (
            "running",
            lease.token,
            "1",
            "t.ok",
            lease.id,
        )
        assert h["enqueued_at"] and h["started_at"] == str(lease.leased_at) and h["params"] == lease.params
    # The group's job went to its held set; the one this claim did not lease is written as drain_intake writes it.
    assert r.zrange(K.held("g"), 0, -1) == [grouped]
    waiting = r.hgetall(K.job(ids[2]))
    assert (waiting["state"], waiting["params"], waiting["id"]) == ("queued", '{"x":2}', ids[2])
    assert r.zrange(K.ready, 0, -1) == [ids[2]] and _claim(r, 10) == [ids[2]]
    assert client.get(ids[2]).params == {"x": 2}


def test_a_job_waits_in_the_intake_only_while_no_worker_is_idle(r: "redis.Redis", client: Client) -> None:
    seconds, micros = r.time()
    r.zadd(K.idle, {json.dumps(["w1", "host", 1]): int(seconds) * 1000 + int(micros) // 1000 + 10_000})
    handed = client.enqueue("t.ok")
    assert handed.state is JobState.RUNNING  # leased to the idle worker: a leased entry
    assert [next(iter(fields)) for _, fields in r.xrange(K.intake)] == ["leased"]
    queued = client.enqueue("t.ok")  # the idle worker was used up: a queued entry
    assert [next(iter(fields)) for _, fields in r.xrange(K.intake)] == ["leased", "id"]
    assert queued.state is JobState.QUEUED
    assert client.get(handed.id).state is JobState.RUNNING and client.get(queued.id).state is JobState.QUEUED


@pytest.mark.parametrize(
    "options",
    [{"id": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}, {"unique_key": "k"}, {"delay": 60}],
    ids=["client-id", "unique-key", "delayed"],
)
def test_jobs_that_need_a_check_or_a_time_never_take_the_intake(
    r: "redis.Redis", client: Client, options: dict[str, object]
) -> None:
    result = client.enqueue("t.ok", **options)
    assert r.xlen(K.intake) == 0 and r.exists(K.job(result.id))


def test_resending_an_id_from_the_intake_is_still_idempotent(r: "redis.Redis", client: Client) -> None:
    first = client.enqueue("t.ok", {"x": 1})
    assert r.xlen(K.intake) == 1
    again = client.enqueue("t.ok", {"x": 2}, id=first.id)  # a retry with the id the first call returned
    assert (again.id, again.status) == (first.id, "exists")
    assert client.get(first.id).params == {"x": 1}
    assert client.counts("q").queued == 1


def test_the_intake_is_bounded_and_nothing_is_lost_at_the_bound(r: "redis.Redis", client: Client) -> None:
    ids = [client.enqueue("t.ok").id for _ in range(INTAKE_MAX + 5)]
    # The append that made INTAKE_MAX entries drained them all; later ones start it again.
    assert r.xlen(K.intake) == 5
    assert client.counts("q").queued == INTAKE_MAX + 5
    assert _claim(r, INTAKE_MAX + 10) == ids  # every job, in order


def test_operators_act_on_jobs_still_in_the_intake(r: "redis.Redis", client: Client) -> None:
    cancelled = client.enqueue("t.ok").id
    deleted = client.enqueue("t.ok").id
    queued = client.enqueue("t.ok").id
    assert r.xlen(K.intake) == 3
    assert client.cancel(cancelled, "q") == "cancelled"
    client.delete(deleted)  # located without its queue
    assert client.get(cancelled).state is JobState.CANCELLED
    with pytest.raises(JobNotFound):
        client.get(deleted)
    assert client.job_ids("q", JobState.QUEUED) == [queued]
    with pytest.raises(JobNotFound):
        client.get("01ARZ3NDEKTSV4RRFFQ69G5FAV")  # neither a hash nor in any intake


def test_maintenance_drains_a_queue_nobody_claims_from(r: "redis.Redis", client: Client) -> None:
    client.pause("q")
    job_id = client.enqueue("t.ok").id
    assert r.xlen(K.intake) == 1
    Maintenance(r).step()
    assert r.xlen(K.intake) == 0 and r.hget(K.job(job_id), "state") == "queued"


def test_a_drain_takes_every_entry_in_order_a_bounded_block_at_a_time(r: "redis.Redis", client: Client) -> None:
    ids = [client.enqueue("t.ok").id for _ in range(3)]
    # More entries than one block (producers appending at once may each add one past INTAKE_MAX).
    fields = ["task", "t.ok", "priority", 0, "queue", "q", "params", "{}", "max_retries", 3, "lease_ms", 30000]
    for i in range(2 * INTAKE_MAX):
        job_id = f"01ARZ3NDEKTSV4RRFF{i:08d}"
        r.xadd(K.intake, dict(zip(["id", *fields[::2]], [job_id, *fields[1::2]], strict=True)))
        ids.append(job_id)
    assert client.materialize("q") == 2 * INTAKE_MAX + 3 and not r.exists(K.intake)
    assert client.materialize("q") == 0
    assert _claim(r, 3 * INTAKE_MAX) == ids


def test_lapsed_idle_registrations_are_cleared(r: "redis.Redis", client: Client) -> None:
    seconds, micros = r.time()
    killed = {json.dumps(["killed", "host", 1]): int(seconds) * 1000 + int(micros) // 1000 - 1}
    r.zadd(K.idle, killed)  # a worker SIGKILLed while idle
    client.enqueue("t.ok")  # the freshest registration has lapsed, so every one has
    assert not r.exists(K.idle)
    assert [next(iter(fields)) for _, fields in r.xrange(K.intake)] == ["id"]  # queued, not handed off
    r.zadd(K.idle, killed)
    claim(r, "q", 0, pid=2)  # any live worker's next claim drops them too
    assert not r.exists(K.idle)


def test_a_read_finds_a_job_that_another_client_drained_meanwhile(
    r: "redis.Redis", client: Client, registry: TaskRegistry
) -> None:
    """Between a read's first look and its own drain, a worker or another client may drain the job's entry:
    the read's drain then finds nothing, and the job exists all the same."""
    other = Client(r, registry)

    class Overtaken(Client):
        def materialize(self, queue: str) -> int:
            other.materialize(queue)  # someone else drains first
            return super().materialize(queue)  # so this drain finds nothing

    reader = Overtaken(r, registry)
    got = client.enqueue("t.ok").id
    assert r.xlen(K.intake) == 1
    assert reader.get(got, "q").state is JobState.QUEUED
    located = client.enqueue("t.ok").id
    assert r.xlen(K.intake) == 1
    assert reader.locate(located) == "q"


def test_a_job_enqueue_one_leaves_to_the_full_script_is_written_once(r: "redis.Redis", client: Client) -> None:
    """enqueue_one.lua writes nothing when an idle worker is registered while a job waits ahead: it puts the
    registration back and answers 0, and enqueue.lua queues the job behind the waiting one (one job, not two)."""
    waiting = client.enqueue("t.ok", delay=0)  # a full-path job on the ready set
    seconds, micros = r.time()
    r.zadd(K.idle, {json.dumps(["w1", "host", 1]): int(seconds) * 1000 + int(micros) // 1000 + 10_000})
    assert client.store.run(client.store.enqueue_one_call("q", "01ARZ3NDEKTSV4RRFFQ69G5FAV", ["task", "t.ok"])) == 0
    assert r.xlen(K.intake) == 0 and r.zcard(K.idle) == 1  # nothing written, the registration back
    queued = client.enqueue("t.ok")
    assert queued.state is JobState.QUEUED and queued.status == "created" and r.zcard(K.idle) == 1
    assert client.counts("q").queued == 2
    assert _claim(r) == [waiting.id, queued.id]


def test_an_accepted_append_is_not_failed_by_its_wake_up(
    r: "redis.Redis", redis_server: Any, registry: TaskRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    # The wake-up after a plain append only speeds up pick-up: a Redis error there (here a producer user that may
    # not LPUSH) is logged, and the call still answers with the job, which is in (raising would invite a resend).
    r.acl_setuser("producer", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-lpush"])
    try:
        client = Client(connect(f"redis://producer:pw@127.0.0.1:{redis_server.port}/0"), registry)
        client.enqueue("t.ok")  # no worker waits idle: this client appends from now on
        r.zadd(K.idle, {json.dumps(["w1", "host", 1]): 2**50})  # then one does
        with caplog.at_level(logging.WARNING, logger="jobconsole.core.client"):
            result = client.enqueue("t.ok")
        assert result.state is JobState.QUEUED and r.xlen(K.intake) == 2 and r.llen(K.wake) == 0
        assert "the job is in; waking a worker or draining the intake failed" in caplog.text
        assert client.get(result.id).state is JobState.QUEUED
    finally:
        r.acl_deluser("producer")
