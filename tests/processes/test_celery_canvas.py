"""Celery's canvas on a real `manage.py runworker`: Celery's documented examples unchanged but for the import,
chains passing results (and `si` not), chords, a chain of chords (one workflow), groups of chains, map /
starmap / chunks, link and link_error, and what a failure does: a chain stops and its last result's get() raises
the failure, as Celery's does; a chord's body does not run and raises ChordError."""

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jobconsole.celery import (
    FAILURE,
    REVOKED,
    SUCCESS,
    AsyncResult,
    ChordError,
    GroupResult,
    chain,
    chord,
    group,
    job_id_of,
)
from jobconsole.core import Client, JobState
from tests.celery_tasks import add, fail, identity, mul, on_error, xsum
from tests.processes.test_worker_processes import Processes

pytestmark = pytest.mark.slow

TIMEOUT = 30


@pytest.fixture
def client(settings: Any, r: Any, redis_url: str) -> Iterator[Client]:
    from jobconsole.engine import get_client

    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "REDIS_URL": redis_url}
    yield get_client()


@pytest.fixture
def worker(tmp_path: Path, redis_url: str, client: Client) -> Iterator[Processes]:
    processes = Processes(tmp_path)
    try:
        processes.worker(redis_url, "celery", "w1", "--concurrency", "4", "--no-system-worker",
                         JOBCONSOLE_TASK_MODULES="tests.celery_tasks")  # fmt: skip
        yield processes
    finally:
        processes.kill_all()


def test_celerys_documented_examples_and_results_passing(client: Client, worker: Processes, r: Any) -> None:
    # Celery's canvas guide, unchanged.
    assert chain(add.s(2, 2), add.s(4), add.s(8))().get(timeout=TIMEOUT) == 16
    assert group(add.s(i, i) for i in range(10))().get(timeout=TIMEOUT) == [i + i for i in range(10)]
    assert chord((add.s(i, i) for i in range(10)), xsum.s())().get(timeout=TIMEOUT) == 90

    # si ignores the previous result; a group in a chain gets it; the step after a group gets the list.
    piped = (add.s(1, 1) | add.si(5, 5) | group(add.s(1), add.s(2)) | xsum.s()).delay()
    assert piped.get(timeout=TIMEOUT) == 23
    assert piped.parent is not None and isinstance(piped.parent, GroupResult)
    assert piped.parent.get(timeout=TIMEOUT) == [11, 12] and piped.parent.parent.get(timeout=TIMEOUT) == 10  # type: ignore[union-attr]

    # A chain of chords, a group of chains, results that are lists and dicts.
    workflows_before = len(r.keys("*}:wf:*"))
    nested = chain(chord([add.s(1, 1), add.s(2, 2)], xsum.s()), group(add.s(1), mul.s(2)), xsum.s()).apply_async()
    assert nested.get(timeout=TIMEOUT) == 6 + 1 + 12
    assert len(r.keys("*}:wf:*")) == workflows_before + 1  # one workflow for the whole canvas
    assert group(chain(add.s(1, 1), mul.s(3)), add.s(5, 5)).apply_async().get(timeout=TIMEOUT) == [6, 10]
    assert chain(identity.s({"a": [1]}), identity.s()).delay().get(timeout=TIMEOUT) == {"a": [1]}

    # Celery's own task ids, UUIDs: the job's id is the ULID of the same bits; results answer to the UUID.
    first_id, last_id = str(uuid.uuid4()), str(uuid.uuid4())
    by_uuid = add.apply_async((3, 4), task_id=first_id)
    assert by_uuid.id == first_id and AsyncResult(first_id).get(timeout=TIMEOUT) == 7
    assert client.get(job_id_of(first_id)).task == add.name and job_id_of(last_id) != last_id
    chained = chain(add.s(1, 1), add.s(1)).apply_async(task_id=last_id)
    assert chained.id == last_id and chained.get(timeout=TIMEOUT) == 3
    assert group(add.s(1, 1).set(task_id=str(uuid.uuid4()))).apply_async().get(timeout=TIMEOUT) == [2]

    # map / starmap: one job each; chunks: a group of starmaps.
    assert add.starmap([(1, 2), (3, 4)]).delay().get(timeout=TIMEOUT) == [3, 7]
    assert identity.map([1, 2]).delay().get(timeout=TIMEOUT) == [1, 2]
    assert add.chunks([(i, i) for i in range(5)], 2)().get(timeout=TIMEOUT) == [[0, 2], [4, 6], [8]]


def test_failures_links_and_errbacks(client: Client, worker: Processes) -> None:
    # A failed step: the chain stops; get() on its last result raises the failure, as Celery's does.
    stopped = chain(add.s(1, 1), fail.s(), add.s(100)).apply_async()
    with pytest.raises(ValueError, match=r"failed with \[2\]"):
        stopped.get(timeout=TIMEOUT)
    assert stopped.state == REVOKED and client.get(stopped.id).state is JobState.CANCELLED
    assert stopped.parent is not None and stopped.parent.state == FAILURE
    assert stopped.parent.parent is not None and stopped.parent.parent.state == SUCCESS

    # A failed member: the chord's body does not run.
    body = chord([add.s(1, 1), fail.s(3)], xsum.s()).apply_async()
    with pytest.raises(ChordError, match=r"ValueError\('failed with \[3\]'\)"):
        body.get(timeout=TIMEOUT)
    assert client.get(body.id).attempts == 0  # never ran
    assert isinstance(body.parent, GroupResult) and body.parent.get(timeout=TIMEOUT, propagate=False)[0] == 2

    # link: given the result; link_error: called with (request, exc, traceback) only when the task failed.
    linked = add.apply_async((2, 2), link=mul.s(10), link_error=on_error.s())
    assert linked.get(timeout=TIMEOUT) == 4
    assert linked.children[0].get(timeout=TIMEOUT) == 40
    assert linked.children[1].state == REVOKED  # the errback's step was cancelled when its task completed
    failing = fail.apply_async((7,), link=mul.s(10), link_error=on_error.s())
    errback = failing.children[1]
    assert errback.get(timeout=TIMEOUT) == f"{failing.id} failed: ValueError('failed with [7]')"
    assert failing.children[0].state == REVOKED  # the link was cancelled with its failed parent

    # A chain's errback watches every step, called once with the one that failed; a group's, each member.
    stopped = chain(add.s(1, 1), fail.s(), add.s(1)).apply_async(link_error=on_error.s())
    [chain_errback] = stopped.children
    failed_step = stopped.parent
    assert failed_step is not None
    assert chain_errback.get(timeout=TIMEOUT) == f"{failed_step.id} failed: ValueError('failed with [2]')"
    members = group(add.s(1, 1), fail.s(4)).apply_async(link_error=on_error.s())
    assert isinstance(members, GroupResult)
    good, bad = members.results
    assert bad.children[0].get(timeout=TIMEOUT) == f"{bad.id} failed: ValueError('failed with [4]')"
    assert good.get(timeout=TIMEOUT) == 2 and good.children[0].state == REVOKED
