"""Walrus: POST /schedule/ runs the job after run_after_secs; PUT and DELETE /schedule/{id} change and remove a job
that has not started (the seed's were stubs)."""

import time

import pytest
import redis
from django.test import Client

from jobconsole.core.states import JobState
from tests.api.seeds.conftest import job, post, work

pytestmark = pytest.mark.django_db


def schedule(http: Client, **body: object) -> str:
    response = post(http, "/schedule/", {"job_type": "send_email", "payload": "hello", **body})
    assert response.status_code == 200, response.content
    job_id: str = response.json()["job_id"]
    return job_id


def test_schedule_waits_run_after_secs(http: Client) -> None:
    job_id = schedule(http, run_after_secs=60)
    stored = job(job_id)
    assert stored.state is JobState.SCHEDULED and stored.params == {"payload": "hello"}
    assert stored.run_at is not None and stored.enqueued_at is not None
    assert 59 <= (stored.run_at - stored.enqueued_at).total_seconds() <= 61


def test_schedule_without_delay_is_queued(http: Client) -> None:
    assert job(schedule(http)).state is JobState.QUEUED


def test_the_seeds_misread_field_name_is_accepted_too(http: Client) -> None:
    assert job(schedule(http, RunAfterSecs=30)).state is JobState.SCHEDULED


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({"payload": "x"}, 400, "JobType cannot be empty"),
        ({"job_type": "nope"}, 400, "unknown task"),
        ({"job_type": "send_email", "payload": 5}, 400, "payload must be a string"),
        ({"job_type": "send_email", "run_after_secs": -1}, 400, "run_after_secs must be"),
        ({"job_type": "send_email", "run_after_secs": "5"}, 400, "run_after_secs must be"),
    ],
)
def test_bad_schedules_are_4xx(http: Client, r: "redis.Redis", body: dict[str, object], status: int, says: str) -> None:
    response = post(http, "/schedule/", body)
    assert response.status_code == status and says in response.content.decode(), response.content
    assert r.dbsize() == 0


def test_put_changes_payload_and_time_of_a_waiting_job(http: Client) -> None:
    job_id = schedule(http, run_after_secs=600)
    response = http.put(f"/schedule/{job_id}", data='{"payload": "changed", "run_after_secs": 5}',
                        content_type="application/json")  # fmt: skip
    assert response.status_code == 200 and response.json() == {"job_id": job_id}
    stored = job(job_id)
    assert stored.params == {"payload": "changed"} and stored.state is JobState.SCHEDULED
    assert stored.run_at is not None and stored.run_at.timestamp() - time.time() < 10


def test_put_can_delay_a_queued_job(http: Client) -> None:
    job_id = schedule(http)
    response = http.put(f"/schedule/{job_id}", data='{"run_after_secs": 300}', content_type="application/json")
    assert response.status_code == 200, response.content
    assert job(job_id).state is JobState.SCHEDULED


def test_delete_removes_a_waiting_job(http: Client) -> None:
    job_id = schedule(http, run_after_secs=600)
    response = http.delete(f"/schedule/{job_id}")
    assert response.status_code == 200 and response.json() == {"job_id": job_id}
    assert http.delete(f"/schedule/{job_id}").status_code == 404


def test_a_started_or_finished_job_is_409_and_unchanged(http: Client, r: "redis.Redis") -> None:
    job_id = schedule(http)
    work(r, "send_email")
    assert job(job_id).state is JobState.COMPLETED
    put = http.put(f"/schedule/{job_id}", data='{"payload": "late"}', content_type="application/json")
    assert put.status_code == 409 and "completed" in put.content.decode()
    assert http.delete(f"/schedule/{job_id}").status_code == 409
    assert job(job_id).params == {"payload": "hello"}


def test_unknown_ids_and_empty_puts(http: Client) -> None:
    assert http.delete("/schedule/01ARZ3NDEKTSV4RRFFQ69G5FAV").status_code == 404
    assert http.put("/schedule/not-an-id", data="{}", content_type="application/json").status_code == 404
    job_id = schedule(http, run_after_secs=60)
    response = http.put(f"/schedule/{job_id}", data="{}", content_type="application/json")
    assert response.status_code == 400 and "give payload, run_after_secs or both" in response.content.decode()
    assert http.get(f"/schedule/{job_id}").status_code == 405
