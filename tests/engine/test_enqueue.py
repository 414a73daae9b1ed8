"""Enqueueing: validation, ids, priorities, FIFO, delays, unique keys, bulk."""

import time
from datetime import UTC, datetime, timedelta

import pytest
import redis

from jobconsole.core import Client, InvalidJob, JobState, TaskRegistry, UnknownTask
from jobconsole.core.keys import queue_keys
from tests.helpers import run_burst


@pytest.fixture
def registry() -> TaskRegistry:
    reg = TaskRegistry()
    order: list[int] = []

    @reg.task(name="t.order", queue="q")
    def record_order(n: int) -> int:
        order.append(n)
        return n

    @reg.task(name="t.typed")
    def typed(count: int, label: str = "", ratio: float = 1.0) -> None:
        return None

    reg.order = order  # type: ignore[attr-defined]
    return reg


@pytest.fixture
def client(r: "redis.Redis", registry: TaskRegistry) -> Client:
    return Client(r, registry)


def test_fifo_within_priority_and_lower_priority_first(
    r: "redis.Redis", client: Client, registry: TaskRegistry
) -> None:
    client.enqueue("t.order", {"n": 1})
    client.enqueue("t.order", {"n": 2}, priority="low")
    client.enqueue("t.order", {"n": 3})
    client.enqueue("t.order", {"n": 4}, priority="high")
    client.enqueue("t.order", {"n": 5}, priority=-1000)
    client.enqueue("t.order", {"n": 6})
    run_burst(r, registry, ["q"], concurrency=1)
    assert registry.order == [5, 4, 1, 3, 6, 2]  # type: ignore[attr-defined]


def test_fifo_holds_for_many_jobs_and_requeued_jobs_go_to_the_back(
    r: "redis.Redis", client: Client, registry: TaskRegistry
) -> None:
    ids = [client.enqueue("t.order", {"n": n}).id for n in range(50)]
    client.cancel(ids[0])
    client.requeue(ids[0])
    run_burst(r, registry, ["q"], concurrency=1)
    assert registry.order == [*range(1, 50), 0]  # type: ignore[attr-defined]


def test_client_supplied_id_is_idempotent(client: Client) -> None:
    job_id = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
    first = client.enqueue("t.order", {"n": 1}, id=job_id)
    again = client.enqueue("t.order", {"n": 2}, id=job_id.lower())
    assert first.created and first.id == job_id
    assert again.status == "exists" and again.id == job_id
    assert client.counts("q").queued == 1
    assert client.get(job_id).params == {"n": 1}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"id": "not-a-ulid"}, "ULID"),
        ({"id": "01ARZ3NDEKTSV4RRFFQ69G5FAU!"}, "ULID"),
        ({"priority": "urgent"}, "priority"),
        ({"priority": True}, "priority"),
        ({"priority": 10**6}, "between"),
        ({"delay": -1}, "delay"),
        ({"delay": float("nan")}, "delay"),
        ({"delay": 1, "run_at": datetime.now(UTC)}, "not both"),
        ({"run_at": datetime(2030, 1, 1)}, "timezone"),
        ({"run_at": datetime(9999, 1, 1, tzinfo=UTC)}, "too far"),
        ({"max_retries": -1}, "max_retries"),
        ({"queue": "bad{queue}"}, "queue"),
        ({"unique_key": "a\r\nb"}, "unique_key"),
    ],
)
def test_bad_options_are_refused_and_enqueue_nothing(
    client: Client, r: "redis.Redis", options: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidJob, match=message):
        client.enqueue("t.order", {"n": 1}, **options)
    assert r.dbsize() == 0


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "missing parameter"),
        (None, "missing parameter"),
        ([], "JSON object"),
        ({"count": "3"}, "should be int"),
        ({"count": True}, "should be int"),
        ({"count": 1, "ratio": "x"}, "should be float"),
        ({"count": 1, "extra": 2}, "unknown parameter"),
        ({"count": float("inf")}, "JSON"),
        ({"count": object()}, "JSON"),
    ],
)
def test_parameters_are_checked_against_the_signature(
    client: Client, r: "redis.Redis", params: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidJob, match=message):
        client.enqueue("t.typed", params)
    assert r.dbsize() == 0


def test_unknown_task_is_refused_by_a_strict_client(client: Client, r: "redis.Redis") -> None:
    with pytest.raises(UnknownTask, match=r"no\.such\.task"):
        client.enqueue("no.such.task", {})
    assert r.dbsize() == 0


def test_payload_text_is_stored_exactly(client: Client, registry: TaskRegistry) -> None:
    @registry.task(name="t.text")
    def text(value: str) -> str:
        return value

    weird = "emoji 🎉 rtl \u202e zero\u200bwidth '; DROP TABLE jobs; -- <script>alert(1)</script>"
    job_id = client.enqueue("t.text", {"value": weird}).id
    assert client.get(job_id).params == {"value": weird}


def test_delayed_job_never_runs_early(r: "redis.Redis", client: Client, registry: TaskRegistry) -> None:
    job_id = client.enqueue("t.order", {"n": 1}, delay=0.6).id
    assert client.get(job_id).state is JobState.SCHEDULED
    run_burst(r, registry, ["q"])  # nothing due: exits at once without running it
    assert client.get(job_id).state is JobState.SCHEDULED
    run_burst(r, registry, ["q"], burst_horizon=2)
    job = client.get(job_id)
    assert job.state is JobState.COMPLETED
    assert job.run_at is not None and job.started_at is not None
    assert job.started_at >= job.run_at  # both times come from Redis' clock


def test_run_at_in_the_past_runs_at_once(client: Client) -> None:
    result = client.enqueue("t.order", {"n": 1}, run_at=datetime.now(UTC) - timedelta(days=1))
    assert result.state is JobState.QUEUED


def test_unique_key_admits_one_live_job(r: "redis.Redis", client: Client, registry: TaskRegistry) -> None:
    first = client.enqueue("t.order", {"n": 1}, unique_key="report:42")
    second = client.enqueue("t.order", {"n": 2}, unique_key="report:42")
    assert first.created
    assert second.status == "duplicate" and second.id == first.id
    run_burst(r, registry, ["q"])
    third = client.enqueue("t.order", {"n": 3}, unique_key="report:42")  # the first one finished
    assert third.created and third.id != first.id


def test_bulk_enqueue_uses_one_round_trip_per_batch(r: "redis.Redis", client: Client) -> None:
    from jobconsole.core import JobSpec

    client.enqueue("t.order", {"n": 0})  # registers the queue name
    r.config_resetstat()
    results = client.enqueue_many([JobSpec(task="t.order", params={"n": n}) for n in range(2500)], batch_size=1000)
    calls = {name: stat["calls"] for name, stat in r.info("commandstats").items() if name.startswith("cmdstat_")}
    assert len(results) == 2500 and all(x.created for x in results)
    assert len({x.id for x in results}) == 2500
    assert client.counts("q").queued == 2501
    # 3 batches of up to 1,000 jobs, each one pipelined write of scripts of up to 250 jobs: 4 + 4 + 2 calls.
    assert calls["cmdstat_evalsha"] == 10


def test_bulk_enqueue_validates_everything_before_sending(client: Client, r: "redis.Redis") -> None:
    from jobconsole.core import JobSpec

    specs = [JobSpec(task="t.order", params={"n": 1}), JobSpec(task="t.order", params={"n": 2}, priority="urgent")]
    with pytest.raises(InvalidJob):
        client.enqueue_many(specs)
    assert r.dbsize() == 0


def test_every_key_of_a_queue_shares_one_cluster_slot() -> None:
    from redis.crc import key_slot

    k = queue_keys("emails")
    names = [getattr(k, f) for f in k.__slots__ if f not in ("queue", "job_prefix", "inbox_prefix", "sets")]
    names += list(k.sets.values())
    names += [k.job("01ARZ3NDEKTSV4RRFFQ69G5FAV"), k.attempts("01ARZ3NDEKTSV4RRFFQ69G5FAV"), k.inbox("host:1:abc")]
    names += [k.held("payments"), k.workflow("01ARZ3NDEKTSV4RRFFQ69G5FAV")]
    # the state sets, ten other keys, a job's two, an inbox, a held set, a workflow's record
    assert len(set(names)) == 15 + len(k.sets)
    assert len({key_slot(n.encode()) for n in names}) == 1


def test_generated_ids_are_valid_ulids_in_creation_order() -> None:
    from ulid import ULID

    from jobconsole.core.ids import new_job_id, new_job_ids

    batch = new_job_ids(5000)
    assert batch == sorted(batch) and len(set(batch)) == 5000
    assert all(str(ULID.from_str(i)) == i for i in batch[:100])
    assert abs(ULID.from_str(batch[0]).timestamp - time.time()) < 5
    later = new_job_ids(3)
    assert not set(later) & set(batch)
    assert len({new_job_id() for _ in range(1000)}) == 1000


def test_a_negative_spin_is_refused(r: "redis.Redis") -> None:
    with pytest.raises(ValueError, match="spin_us"):
        Client(r, spin_us=-1)


def test_enqueue_without_spinning_gives_the_same_result(r: "redis.Redis") -> None:
    client = Client(r, strict=False, spin_us=0)
    result = client.enqueue("examples.echo")
    assert result.status == "created" and client.get(result.id) is not None
