"""ENQUEUE_REPLICAS: Redis's WAIT after an enqueue, in the same round trip. The session's redis-server has no
replica, so WAIT 1 times out with 0 acknowledgements: the jobs are in, and the client says they are unconfirmed.
(tests/processes/test_sentinel.py runs it against a real replica.)"""

import pytest
import redis

from jobconsole.conf import problems, resolve
from jobconsole.core import Client, JobSpec, JobState, NotReplicated


def test_without_replicas_nothing_changes(r: "redis.Redis") -> None:
    client = Client(r, strict=False)
    assert client.replicas == 0
    assert client.enqueue("t.x", {}).state is JobState.QUEUED


def test_too_few_replicas_raise_with_the_jobs_that_went_in(r: "redis.Redis") -> None:
    client = Client(r, strict=False, replicas=1, replicas_timeout=0.05)
    with pytest.raises(NotReplicated) as raised:
        client.enqueue("t.x", {"n": 1}, id="01HZZZZZZZZZZZZZZZZZZZZZZZ")
    assert (raised.value.acknowledged, raised.value.wanted) == (0, 1)
    [result] = raised.value.accepted
    assert result.id == "01HZZZZZZZZZZZZZZZZZZZZZZZ" and result.status == "created"
    assert client.get(result.id).state is JobState.QUEUED  # it exists: a failover could lose it, nothing else
    with pytest.raises(NotReplicated) as again:  # sending the same id again is safe, and waits again
        client.enqueue("t.x", {"n": 1}, id="01HZZZZZZZZZZZZZZZZZZZZZZZ")
    assert again.value.accepted[0].status == "exists"


def test_a_batch_stops_at_the_first_unconfirmed_round_trip(r: "redis.Redis") -> None:
    client = Client(r, strict=False, replicas=1, replicas_timeout=0.05)
    with pytest.raises(NotReplicated) as raised:
        client.enqueue_many([JobSpec(task="t.x")] * 5, batch_size=2)
    assert len(raised.value.accepted) == 2 and len(raised.value.unsent) == 3
    assert client.counts("t.x").queued == 2


def test_zero_replicas_asked_is_always_enough(r: "redis.Redis") -> None:
    with pytest.raises(ValueError):
        Client(r, replicas=-1)
    with pytest.raises(ValueError):
        Client(r, replicas=1, replicas_timeout=0)


def test_the_settings_and_their_variables() -> None:
    config = resolve({}, {"JOBCONSOLE_ENQUEUE_REPLICAS": "1", "JOBCONSOLE_ENQUEUE_REPLICAS_TIMEOUT": "0.5",
                          "JOBCONSOLE_HOST_ID": "rack-3"})  # fmt: skip
    assert (config["ENQUEUE_REPLICAS"], config["ENQUEUE_REPLICAS_TIMEOUT"], config["HOST_ID"]) == (1, 0.5, "rack-3")
    assert resolve({}, {})["ENQUEUE_REPLICAS"] == 0
    wrong = problems({"ENQUEUE_REPLICAS": -1, "ENQUEUE_REPLICAS_TIMEOUT": 30.0}, {})
    assert [code for code, _, _ in wrong] == ["E003", "E003"]
