"""A job whose stored params or checkpoint cannot be decoded (its hash written by other hands, not by the
client): that job is dead-lettered at once with the reason, and nothing else suffers: not the worker, not
the jobs claimed in the same batch, not a reader listing it. An operator can fix it and resubmit."""

from typing import Any

import pytest
import redis

from jobconsole.core import Client, JobContext, JobSpec, JobState, TaskRegistry, UndecodablePayload
from jobconsole.core.editing import edit_job
from jobconsole.core.ids import new_job_id
from jobconsole.core.keys import queue_keys
from jobconsole.core.payload import decode_checkpoint, decode_params
from tests.helpers import run_burst

UNDECODABLE = "jobconsole.core.errors.UndecodablePayload"


@pytest.fixture
def registry() -> TaskRegistry:
    reg = TaskRegistry()

    @reg.task(name="t.ok", queue="q", max_retries=5)
    def ok(x: int = 0) -> dict[str, int]:
        return {"x": x}

    @reg.task(name="t.resume", queue="q", max_retries=5)
    def resume(context: JobContext) -> Any:
        return context.checkpoint

    return reg


def stored(client: Client, params: dict[str, Any]) -> str:
    """A job whose hash exists now (an id of its own keeps it out of the intake), ready to be corrupted."""
    return client.enqueue("t.ok", params, id=new_job_id()).id


def corrupt(r: "redis.Redis", job_id: str, field: str, text: str) -> None:
    key = f"{queue_keys('q').job_prefix}{job_id}"
    assert r.exists(key)  # a job's own hash, not a new one beside it
    r.hset(key, field, text)


@pytest.mark.parametrize(
    ("task", "field", "text", "reason"),
    [
        ("t.ok", "params", "{not json", "params are not JSON"),
        ("t.ok", "params", "[1, 2]", "params must be a JSON object, got list"),
        ("t.resume", "checkpoint", "{half", "checkpoint is not JSON"),
    ],
)
def test_an_undecodable_job_is_dead_lettered_at_once_and_its_batch_runs(
    r: "redis.Redis", registry: TaskRegistry, task: str, field: str, text: str, reason: str
) -> None:
    client = Client(r, registry=registry)
    # Ids of their own keep them out of the intake: their hashes exist now, to be corrupted before any claim.
    specs = [JobSpec(task=task, id=new_job_id(), params={"x": i} if task == "t.ok" else None) for i in range(6)]
    jobs = client.enqueue_many(specs)
    bad = jobs[3].id
    corrupt(r, bad, field, text)

    worker = run_burst(r, registry, ["q"])  # one claim takes all six; the worker must not crash on the fourth

    assert worker.processed == 5 and worker.failed == 1
    dead = client.get(bad)
    assert dead.state is JobState.DEAD
    assert dead.attempts == 1  # max_retries=5, but no retry can decode it
    [attempt] = dead.history
    assert attempt.outcome == "failed" and attempt.error_class == UNDECODABLE
    assert reason in attempt.message and repr(text) in attempt.message
    assert bad in client.job_ids("q", JobState.DEAD)
    for job in jobs:
        if job.id != bad:
            assert client.get(job.id).state is JobState.COMPLETED


def test_a_reader_lists_an_undecodable_job_with_the_reason(r: "redis.Redis", registry: TaskRegistry) -> None:
    client = Client(r, registry=registry)
    job_id = stored(client, {"x": 1})
    corrupt(r, job_id, "params", "\x00garbage")
    corrupt(r, job_id, "checkpoint", "{")

    job = client.get(job_id)  # raised JSONDecodeError before

    assert job.state is JobState.QUEUED
    assert job.params == {} and job.checkpoint is None
    assert "params are not JSON" in job.payload_error and "checkpoint is not JSON" in job.payload_error
    assert job.raw["params"] == "\x00garbage"  # the stored text, for the operator to see
    assert client.get(client.enqueue("t.ok", {"x": 2}).id).payload_error == ""


def test_an_operator_fixes_the_params_and_resubmits_the_job(r: "redis.Redis", registry: TaskRegistry) -> None:
    client = Client(r, registry=registry)
    job_id = stored(client, {"x": 1})
    corrupt(r, job_id, "params", "x=7")
    run_burst(r, registry, ["q"])
    assert client.get(job_id).state is JobState.DEAD

    edit_job(client, job_id, expected_state="dead", queue="q", params={"x": 7}, resubmit=True)
    run_burst(r, registry, ["q"])

    done = client.get(job_id)
    assert done.state is JobState.COMPLETED and done.result == {"x": 7}
    assert [a.outcome for a in done.history] == ["failed", "completed"]


def test_decoding_says_what_is_wrong() -> None:
    assert decode_params("{}") == {} and decode_params('{"a": [1]}') == {"a": [1]}
    assert decode_checkpoint("") is None and decode_checkpoint("3") == 3
    with pytest.raises(UndecodablePayload, match=r"got str: '\"text\"'"):
        decode_params('"text"')
    with pytest.raises(UndecodablePayload, match=r"not JSON .*\.\.\.'$"):
        decode_params("{" + "x" * 500)  # quoted, but cut short
