"""Operator actions on many jobs in one round trip (core/batch.py): each job under its compare-and-set, and a
batch run again with the same stamp changing nothing twice."""

import json

import pytest
import redis

from jobconsole.core import Client, TaskRegistry
from jobconsole.core.batch import BatchAction, BatchItem, Verdict, apply_batch
from jobconsole.core.editing import edit_job
from jobconsole.core.keys import queue_keys
from jobconsole.core.queries.events import events_of
from tests.helpers import claim, run_burst

K = queue_keys("q")


@pytest.fixture
def registry() -> TaskRegistry:
    reg = TaskRegistry()

    @reg.task(name="t.fail", queue="q", max_retries=0)
    def fail(x: int = 0) -> None:
        raise RuntimeError(f"boom {x}")

    return reg


@pytest.fixture
def client(r: "redis.Redis", registry: TaskRegistry) -> Client:
    return Client(r, registry)


def dead_jobs(client: Client, r: "redis.Redis", registry: TaskRegistry, n: int) -> list[str]:
    ids = [client.enqueue("t.fail", {"x": i}).id for i in range(n)]
    run_burst(r, registry, ["q"])
    assert all(r.hget(K.job(i), "state") == "dead" for i in ids)
    return ids


def events(r: "redis.Redis", job_id: str, name: str) -> int:
    events = [e for i, fields in r.xrange(K.events) for e in events_of("q", i, fields)]  # batch entries too
    return sum(1 for e in events if e.job == job_id and e.name == name)


def test_a_resubmit_batch_applies_once_per_stamp(client, r, registry):
    ids = dead_jobs(client, r, registry, 5)
    items = [BatchItem(i, "q", expected_attempts=1) for i in ids]
    first = apply_batch(client, BatchAction.RESUBMIT, items, stamp="OP1", reset_attempts=True)
    assert [x.verdict for x in first] == [Verdict.DONE] * 5
    assert all(r.hget(K.job(i), "state") == "queued" and r.hget(K.job(i), "attempts") == "0" for i in ids)
    # The jobs run and die again with the same attempt count: a repeat of the batch must not resubmit them.
    run_burst(r, registry, ["q"])
    again = apply_batch(client, BatchAction.RESUBMIT, items, stamp="OP1", reset_attempts=True)
    assert [x.verdict for x in again] == [Verdict.ALREADY] * 5
    assert all(r.hget(K.job(i), "state") == "dead" for i in ids)
    assert all(events(r, i, "requeued") == 1 for i in ids)
    # Another operation (another stamp) may resubmit them.
    other = apply_batch(client, BatchAction.RESUBMIT, items, stamp="OP2")
    assert [x.verdict for x in other] == [Verdict.DONE] * 5


def test_resubmit_refuses_jobs_that_moved_on(client, r, registry):
    moved, other_death, gone, fine = dead_jobs(client, r, registry, 4)
    client.requeue(moved)  # resubmitted elsewhere
    r.delete(K.job(gone))
    items = [
        BatchItem(moved, "q", expected_attempts=1),
        BatchItem(other_death, "q", expected_attempts=5),  # the operator saw another death of it
        BatchItem(gone, "q"),
        BatchItem(fine, "q", expected_attempts=1),
    ]
    results = apply_batch(client, BatchAction.RESUBMIT, items, stamp="OP")
    assert [(x.verdict, x.why) for x in results] == [
        (Verdict.REFUSED, "it is queued"),
        (Verdict.REFUSED, "it died again since (attempt count changed)"),
        (Verdict.REFUSED, "it is no longer in Redis"),
        (Verdict.DONE, ""),
    ]
    assert r.hget(K.job(other_death), "state") == "dead" and r.hget(K.job(other_death), "bulk_op") is None


def test_a_resubmit_with_a_run_at_waits_in_the_scheduled_set(client, r, registry):
    [later, past] = dead_jobs(client, r, registry, 2)
    now_ms = client.store.time_ms()
    items = [BatchItem(later, "q", run_at_ms=now_ms + 60_000), BatchItem(past, "q", run_at_ms=now_ms - 1)]
    assert [x.verdict for x in apply_batch(client, BatchAction.RESUBMIT, items, stamp="S")] == [Verdict.DONE] * 2
    assert r.hget(K.job(later), "state") == "scheduled" and r.zscore(K.scheduled, later) == now_ms + 60_000
    assert r.hget(K.job(past), "state") == "queued" and r.zscore(K.ready, past) is not None
    assert [lease.id for lease in claim(r, "q")] == [past]  # the scheduled one is not due
    r.zadd(K.scheduled, {later: now_ms - 1})  # its time comes
    assert [lease.id for lease in claim(r, "q")] == [later]


def test_edit_job_resubmits_into_the_scheduled_set(client, r, registry):
    from datetime import UTC, datetime, timedelta

    [job_id] = dead_jobs(client, r, registry, 1)
    result = edit_job(client, job_id, expected_state="dead", resubmit=True,
                      run_at=datetime.now(UTC) + timedelta(minutes=5))  # fmt: skip
    assert result.status == "resubmitted" and result.state == "scheduled"
    assert r.zscore(K.scheduled, job_id) is not None and r.zscore(K.sets["dead"], job_id) is None


def test_purge_deletes_only_jobs_still_dead(client, r, registry):
    dead, resubmitted, gone = dead_jobs(client, r, registry, 3)
    client.requeue(resubmitted)
    r.delete(K.job(gone))
    items = [BatchItem(i, "q") for i in (dead, resubmitted, gone)]
    results = apply_batch(client, BatchAction.PURGE, items, stamp="P")
    assert [(x.verdict, x.why) for x in results] == [
        (Verdict.DONE, ""), (Verdict.REFUSED, "it is queued"), (Verdict.DONE, "")
    ]  # fmt: skip
    assert not r.exists(K.job(dead)) and r.hget(K.job(resubmitted), "state") == "queued"
    # Purging again: the purged job is gone, which is what was asked.
    assert apply_batch(client, BatchAction.PURGE, items[:1], stamp="P")[0].verdict is Verdict.DONE


def test_retry_cancel_and_delete_batches(client, r, registry):
    waiting = client.enqueue("t.fail", {"x": 1}, delay=600).id
    running = client.enqueue("t.fail", {"x": 2}).id
    [lease] = claim(r, "q", 1)
    assert lease.id == running
    cancel = apply_batch(client, BatchAction.CANCEL, [BatchItem(waiting, "q"), BatchItem(running, "q")], stamp="C")
    assert [x.verdict for x in cancel] == [Verdict.DONE, Verdict.DONE]
    assert r.hget(K.job(waiting), "state") == "cancelled" and r.hget(K.job(running), "cancel_requested") == "1"
    again = apply_batch(client, BatchAction.CANCEL, [BatchItem(waiting, "q"), BatchItem(running, "q")], stamp="C")
    assert [x.verdict for x in again] == [Verdict.ALREADY, Verdict.ALREADY]
    elsewhere = apply_batch(client, BatchAction.CANCEL, [BatchItem(running, "q")], stamp="C2")
    assert (elsewhere[0].verdict, elsewhere[0].why) == (Verdict.REFUSED, "it is already being cancelled")

    retry = apply_batch(client, BatchAction.RETRY, [BatchItem(waiting, "q"), BatchItem(running, "q")], stamp="R")
    assert [(x.verdict, x.why) for x in retry] == [(Verdict.DONE, ""), (Verdict.REFUSED, "it is running")]
    assert apply_batch(client, BatchAction.RETRY, [BatchItem(waiting, "q")], stamp="R")[0].verdict is Verdict.ALREADY
    assert events(r, waiting, "requeued") == 1

    delete = apply_batch(client, BatchAction.DELETE, [BatchItem(waiting, "q"), BatchItem(running, "q")], stamp="D")
    assert [(x.verdict, x.why) for x in delete] == [(Verdict.DONE, ""), (Verdict.REFUSED, "it is running")]
    assert not r.exists(K.job(waiting)) and r.exists(K.job(running))


def test_a_unique_key_held_by_a_live_job_refuses_the_resubmit_and_leaves_no_stamp(client, r, registry):
    first = client.enqueue("t.fail", {"x": 1}, unique_key="order-1").id
    run_burst(r, registry, ["q"])
    holder = client.enqueue("t.fail", {"x": 2}, unique_key="order-1", delay=600).id
    [result] = apply_batch(client, BatchAction.RESUBMIT, [BatchItem(first, "q")], stamp="U")
    assert (result.verdict, result.why) == (Verdict.REFUSED, "its unique key is held by another live job")
    client.delete(holder)
    [result] = apply_batch(client, BatchAction.RESUBMIT, [BatchItem(first, "q")], stamp="U")
    assert result.verdict is Verdict.DONE  # not ALREADY: the refusal left no stamp behind


def test_a_batch_drains_the_intake_first(client, r, registry):
    job_id = client.enqueue("t.fail", {"x": 1}).id  # a single enqueue with no idle worker: an intake entry
    assert not r.exists(K.job(job_id))
    [result] = apply_batch(client, BatchAction.CANCEL, [BatchItem(job_id, "q")], stamp="I")
    assert result.verdict is Verdict.DONE and r.hget(K.job(job_id), "state") == "cancelled"
    assert json.loads(r.hget(K.job(job_id), "params")) == {"x": 1}
