"""Runqueue's AddJob on the engine (no Django): topic, json state, priority (lower first, 1000 = our 0), run_at
as a date or [n, unit], unique_key."""

from datetime import UTC, datetime, timedelta

import pytest
import redis

from jobconsole.core import Client
from jobconsole.core.errors import DuplicateJob, InvalidJob, UnknownTask
from jobconsole.core.keys import queue_keys
from jobconsole.core.runqueue import add_job, parse_run_at, relative_seconds, to_priority
from jobconsole.core.states import JobState
from tests.queue_fixtures import *  # noqa: F403  (the client and registry fixtures)


def test_add_job_enqueues_the_topics_task_with_its_state(client: Client) -> None:
    result = add_job(client, "t.ok", '{"x": 5}')
    job = client.get(result.id)
    assert job.task == "t.ok" and job.params == {"x": 5} and job.priority == 0 and job.state is JobState.QUEUED


def test_priority_keeps_runqueues_order(client: Client) -> None:
    urgent = add_job(client, "t.ok", priority=320).id
    late = add_job(client, "t.ok", priority=1500).id
    assert client.get(urgent).priority < 0 < client.get(late).priority
    assert client.job_ids("q", JobState.QUEUED) == [urgent, late]
    for bad in (-1, 2001, "high", True, 1.5):
        with pytest.raises(InvalidJob):
            to_priority(bad)


def test_run_at_relative_and_absolute(client: Client) -> None:
    job = client.get(add_job(client, "t.ok", run_at=[5, "m"]).id)
    assert job.state is JobState.SCHEDULED and job.run_at and job.enqueued_at
    assert abs((job.run_at - job.enqueued_at).total_seconds() - 300) < 2
    at = datetime.now(UTC) + timedelta(hours=2)
    job = client.get(add_job(client, "t.ok", run_at=at.isoformat()).id)
    assert job.run_at is not None and abs((job.run_at - at).total_seconds()) < 0.01


@pytest.mark.parametrize(
    ("spec", "seconds"),
    [([1, "s"], 1), ([2, "minutes"], 120), ([1, "h"], 3600), ([1, "day"], 86400), ([1, "d"], 86400),
     ([2, "w"], 14 * 86400), ([0, "s"], 0), ([1.5, "hours"], 5400)],
)  # fmt: skip
def test_units(spec: list[object], seconds: float) -> None:
    assert relative_seconds(spec) == seconds


def test_months_are_calendar_months() -> None:
    jan31 = datetime(2026, 1, 31, 9, tzinfo=UTC)
    assert relative_seconds([1, "M"], now=jan31) == (datetime(2026, 2, 28, 9, tzinfo=UTC) - jan31).total_seconds()
    assert relative_seconds([12, "months"], now=jan31) == 365 * 86400


@pytest.mark.parametrize(
    "value",
    [[1, "fortnights"], [-1, "s"], ["1", "s"], [1], [1, "s", 2], "2026-01-01T00:00:00", "tomorrow", 5, [999, "M"]],
)
def test_bad_run_at_is_refused(value: object) -> None:
    with pytest.raises(InvalidJob):
        parse_run_at(value)


def test_unique_key_duplicate_and_unknown_topic(client: Client) -> None:
    first = add_job(client, "t.ok", unique_key="user-7-reminder").id
    with pytest.raises(DuplicateJob) as caught:
        add_job(client, "t.ok", unique_key="user-7-reminder")
    assert caught.value.job_id == first
    with pytest.raises(UnknownTask):
        add_job(client, "no.such.topic")


@pytest.mark.parametrize("state", ["[1]", "{bad", '"text"', 7, '{"x": NaN}'])
def test_json_state_must_be_an_object(client: Client, state: object) -> None:
    with pytest.raises(InvalidJob):
        add_job(client, "t.ok", state)  # type: ignore[arg-type]
    assert client.queues() == []


def test_the_client_takes_runqueues_relative_run_at_and_iso_text(client: Client, r: "redis.Redis") -> None:
    now = client.store.time_ms()
    later = client.enqueue("t.ok", run_at=[2, "minutes"])
    assert later.state is JobState.SCHEDULED
    due = r.zscore(queue_keys("q").scheduled, later.id)
    assert due is not None and 119_000 <= due - now <= 121_500
    with pytest.raises(InvalidJob, match="must be a number of 0 or more"):
        client.enqueue("t.ok", run_at=("5", "s"))
    dated = client.enqueue("t.ok", run_at="2030-01-01T00:00:00+00:00")
    assert dated.state is JobState.SCHEDULED
    with pytest.raises(InvalidJob, match="unknown unit 'fortnights'"):
        client.enqueue("t.ok", run_at=[1, "fortnights"])
    with pytest.raises(InvalidJob, match="give delay or run_at, not both"):
        client.enqueue("t.ok", run_at=[1, "h"], delay=5)
    assert client.enqueue("t.ok", run_at=[0, "s"]).state is JobState.QUEUED  # due now
