"""/api/v1/jobs: submit (one, a batch), idempotency (client ids, Idempotency-Key), get, search, the actions
(cancel, retry, recover, delete) and the compare-and-set edit, each with its audit record and refusals."""

import json
from typing import Any

import pytest
from django.test import Client as WebClient

from jobconsole.engine import get_client
from jobconsole.models import AuditLog
from jobconsole_api.models import ApiToken, SubmittedJob
from jobconsole_api.v1 import idempotency
from tests.api.v1.conftest import Api, problem
from tests.mirror_fixtures import run_worker

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

ID = "01JCZ4Y1V6Q2J8M3N4P5R6S7T8"


def job_keys(r: Any) -> list[str]:
    """Every job Redis holds (a queue's intake entries made into jobs first)."""
    client = get_client()
    for queue in client.queues():
        client.materialize(queue)
    return list(r.scan_iter("jc:*:job:*"))


def test_submit_enqueues_and_get_reads_it(operator: Api, r: Any) -> None:
    response = operator.post("/jobs", {"task": "apitest.add", "params": {"a": 1, "b": 2}, "priority": "high"})
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "created" and body["queue"] == "apitest" and body["state"] == "queued"
    assert response["Location"] == f"/api/v1/jobs/{body['id']}"
    job = operator.get(f"/jobs/{body['id']}").json()
    assert job["task"] == "apitest.add" and job["params"] == {"a": 1, "b": 2} and job["priority"] == -10
    assert job["in_redis"] is True and job["history"] == [] and job["enqueued_at"].endswith("Z")
    assert not SubmittedJob.objects.exists()  # an operate token reads every job: nothing to remember


def test_a_job_that_ran_shows_its_result_and_attempts(operator: Api, r: Any) -> None:
    job_id = operator.post("/jobs", {"task": "apitest.add", "params": {"a": 40, "b": 2}}).json()["id"]
    run_worker(r, ["apitest"])
    job = operator.get(f"/jobs/{job_id}").json()
    assert job["state"] == "completed" and job["result"] == 42
    [attempt] = job["history"]
    assert attempt["outcome"] == "completed" and attempt["started_at"] and attempt["ended_at"]


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        ({"task": "apitest.nope"}, "task", "Unknown task"),
        ({"task": "os.system", "params": {"command": "true"}}, "task", "Unknown task"),
        ({"task": "apitest.add", "params": {"b": 1}}, "(body)", "a"),  # the required parameter is missing
        ({"task": "apitest.add", "params": {"a": 1, "c": 2}}, "(body)", "c"),  # not in the signature
        ({"task": "apitest.add", "params": {"a": "one"}}, "(body)", "a"),  # the annotation says int
        ({"task": "apitest.add", "params": {"a": 1}, "priority": "urgent"}, "priority", "high, normal, low"),
        ({"task": "apitest.add", "params": {"a": 1}, "priority": True}, "priority", ""),
        ({"task": "apitest.add", "params": {"a": 1}, "priority": 2**63}, "priority", ""),
        ({"task": "apitest.add", "params": {"a": 1}, "delay": -1}, "delay", "at least 0"),
        ({"task": "apitest.add", "params": {"a": 1}, "delay": 1, "run_at": "2030-01-01T00:00:00Z"}, "(body)", "both"),
        ({"task": "apitest.add", "params": {"a": 1}, "run_at": "2030-01-01T00:00:00"}, "run_at", "zone"),
        ({"task": "apitest.add", "params": {"a": 1}, "run_at": "9999-12-31T00:00:00Z"}, "(body)", "future"),
        ({"task": "apitest.add", "params": {"a": 1}, "queue": "nobody-serves-this"}, "queue", "Unknown queue"),
        ({"task": "apitest.add", "params": {"a": 1}, "queue": "a:{b}*"}, "queue", "must match"),
        ({"task": "apitest.add\r\nX: y"}, "task", "must match"),
        ({"task": "", "params": {}}, "task", "must match"),
        ({"task": "apitest.add", "params": {"a": 1}, "id": "not-a-ulid"}, "id", "must match"),
        ({"task": "apitest.add", "params": [1]}, "params", "object"),
        ({"task": "apitest.add", "params": {"a": 1}, "max_retries": -1}, "max_retries", "at least 0"),
        ({"task": "apitest.add", "params": {"a": 1}, "colour": "red"}, "colour", "not a known field"),
        ({"params": {"a": 1}}, "task", "required"),
    ],
)
def test_refused_submissions_are_422_and_enqueue_nothing(
    operator: Api, r: Any, body: dict[str, Any], field: str, says: str
) -> None:
    found = problem(operator.post("/jobs", body), 422)
    assert says in found["detail"] + str(found.get("errors")), found
    if field != "(body)":
        assert any(e["field"] == field for e in found.get("errors", [])), found
    assert job_keys(r) == []


def test_text_is_stored_exactly_as_sent(operator: Api, r: Any) -> None:
    strange = {"a": 1, "b": 0}
    job_id = operator.post("/jobs", {"task": "apitest.add", "params": strange, "unique_key": "k"}).json()["id"]
    note = "emoji 🎉, rtl \u202e, zero width \u200b, '; DROP TABLE jobs; --, <script>alert(1)</script>"
    response = operator.post("/jobs", {"task": "examples.echo", "params": {"note": note}})
    assert response.status_code == 201
    assert operator.get(f"/jobs/{response.json()['id']}").json()["params"] == {"note": note}
    assert operator.get(f"/jobs/{job_id}").json()["unique_key"] == "k"


def test_a_past_run_at_runs_at_once(operator: Api) -> None:
    body = operator.post("/jobs", {"task": "apitest.add", "params": {"a": 1}, "run_at": "2001-01-01T00:00:00+02:00"})
    assert body.status_code == 201 and body.json()["state"] == "queued"


def test_run_at_may_be_runqueues_relative_n_unit_and_a_job_may_name_a_group(operator: Api, r: Any) -> None:
    later = operator.post("/jobs", {"task": "apitest.add", "params": {"a": 1}, "run_at": [5, "minutes"], "group": "g1"})
    assert later.status_code == 201 and later.json()["state"] == "scheduled", later.content
    assert get_client().get(later.json()["id"]).group == "g1"
    found = problem(operator.post("/jobs", {"task": "apitest.add", "params": {"a": 1}, "run_at": [5, "aeons"]}), 422)
    assert "unknown unit 'aeons'" in found["detail"]
    problem(operator.post("/jobs", {"task": "apitest.add", "params": {"a": 1}, "run_at": [5]}), 422)
    problem(operator.post("/jobs", {"task": "apitest.add", "params": {"a": 1}, "group": "bad:name"}), 422)


def test_a_client_id_makes_a_retry_harmless(operator: Api, r: Any) -> None:
    spec = {"task": "apitest.add", "params": {"a": 1}, "id": ID}
    first = operator.post("/jobs", spec)
    again = operator.post("/jobs", spec)
    assert first.status_code == 201 and again.status_code == 200
    assert again.json() == {**first.json(), "status": "exists"}
    found = problem(operator.post("/jobs", {**spec, "params": {"a": 2}}), 409)
    assert ID in found["detail"] and len(job_keys(r)) == 1


def test_a_held_unique_key_answers_the_live_job(operator: Api) -> None:
    first = operator.post("/jobs", {"task": "apitest.add", "params": {"a": 1}, "unique_key": "once"}).json()
    second = operator.post("/jobs", {"task": "apitest.add", "params": {"a": 2}, "unique_key": "once"})
    assert second.status_code == 200 and second.json()["status"] == "duplicate" and second.json()["id"] == first["id"]


def test_an_idempotency_key_replays_the_first_response(operator: Api, r: Any) -> None:
    spec = {"task": "apitest.add", "params": {"a": 1}}
    first = operator.post("/jobs", spec, **{"Idempotency-Key": "order-17"})
    again = operator.post("/jobs", {"params": {"a": 1}, "task": "apitest.add"}, **{"Idempotency-Key": "order-17"})
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json() and again["Idempotent-Replayed"] == "true" and again["Location"]
    assert len(job_keys(r)) == 1
    changed = problem(operator.post("/jobs", {**spec, "params": {"a": 2}}, **{"Idempotency-Key": "order-17"}), 422)
    assert "different request" in changed["detail"] and len(job_keys(r)) == 1
    other = operator.post("/jobs", spec, **{"Idempotency-Key": "order-18"})
    assert other.status_code == 201 and other.json()["id"] != first.json()["id"]


def test_an_idempotency_key_in_flight_is_409_and_refusals_are_replayed(operator: Api, r: Any) -> None:
    refused = operator.post("/jobs", {"task": "apitest.nope"}, **{"Idempotency-Key": "k1"})
    replay = operator.post("/jobs", {"task": "apitest.nope"}, **{"Idempotency-Key": "k1"})
    assert refused.status_code == replay.status_code == 422 and replay["Idempotent-Replayed"] == "true"
    assert replay.json() == refused.json()
    # A first request still running has only reserved its key (what once() writes before it runs the request).
    spec = {"task": "apitest.add", "params": {"a": 1}}
    token = ApiToken.objects.get(name="ops")
    reserved = {"digest": idempotency._digest("submit_job", json.dumps(spec).encode()), "running": True}
    assert get_client().idempotency.reserve(str(token.pk), "k2", json.dumps(reserved), 60) == (True, None)
    found = problem(operator.post("/jobs", spec, **{"Idempotency-Key": "k2"}), 409)
    assert "still being processed" in found["detail"] and job_keys(r) == []


@pytest.mark.parametrize("key", ["", "x" * 256, "tab\there"])
def test_a_malformed_idempotency_key_is_400(operator: Api, r: Any, key: str) -> None:
    problem(operator.post("/jobs", {"task": "apitest.add", "params": {"a": 1}}, **{"Idempotency-Key": key}), 400)
    assert job_keys(r) == []


def test_a_batch_is_enqueued_whole_or_not_at_all(operator: Api, r: Any, settings: Any) -> None:
    jobs = [{"task": "apitest.add", "params": {"a": n}} for n in range(5)]
    response = operator.post("/jobs/batch", {"jobs": [*jobs, {"task": "apitest.add", "params": {"a": 1}, "id": ID}]})
    assert response.status_code == 201
    statuses = [j["status"] for j in response.json()["jobs"]]
    assert statuses == ["created"] * 6 and len(job_keys(r)) == 6
    again = operator.post("/jobs/batch", {"jobs": [{"task": "apitest.add", "params": {"a": 1}, "id": ID}]})
    assert again.status_code == 200 and again.json()["jobs"][0]["status"] == "exists"
    other = operator.post("/jobs/batch", {"jobs": [{"task": "apitest.add", "params": {"a": 9}, "id": ID}]})
    assert other.json()["jobs"][0]["status"] == "conflict"
    bad = [{**jobs[0], "queue": "apitest"}, {"task": "apitest.add", "params": {"z": 1}}, {"task": "apitest.nope"},
           {**jobs[0], "queue": "nobody-serves-this"}]  # fmt: skip
    found = problem(operator.post("/jobs/batch", {"jobs": bad}), 422)
    fields = {e["field"] for e in found["errors"]}
    assert fields == {"jobs[1]", "jobs[2].task", "jobs[3].queue"} and len(job_keys(r)) == 6
    twice = problem(operator.post("/jobs/batch", {"jobs": [{**jobs[0], "id": ID}, {**jobs[1], "id": ID}]}), 422)
    assert "same id" in str(twice["errors"])
    problem(operator.post("/jobs/batch", {"jobs": []}), 422)
    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "API": {"MAX_BATCH": 3}}
    too_many = problem(operator.post("/jobs/batch", {"jobs": jobs}), 422)
    assert "at most 3" in too_many["detail"] and len(job_keys(r)) == 6


def test_get_unknown_or_malformed_ids(operator: Api) -> None:
    problem(operator.get(f"/jobs/{ID}"), 404)
    problem(operator.get("/jobs/not-an-id"), 400)


def test_search_reads_the_mirror_with_the_consoles_filters(operator: Api, mirror: Any, r: Any) -> None:
    ids = [operator.post("/jobs", {"task": "apitest.add", "params": {"a": n}}).json()["id"] for n in range(5)]
    operator.post("/jobs", {"task": "examples.echo", "params": {"needle": "haystack"}})
    mirror.drain()
    page = operator.get("/jobs", task="apitest.add", limit=2).json()
    assert [j["id"] for j in page["items"]] == ids[::-1][:2] and page["next_cursor"]
    rest = operator.get("/jobs", task="apitest.add", limit=2, cursor=page["next_cursor"]).json()
    assert [j["id"] for j in rest["items"]] == ids[::-1][2:4]
    found = operator.get("/jobs", text="HAYSTACK").json()
    assert [j["task"] for j in found["items"]] == ["examples.echo"] and found["searched_back_to"] is None
    assert operator.get("/jobs", state="completed").json()["items"] == []
    assert len(operator.get("/jobs", queue="apitest", after="2000-01-01T00:00:00Z").json()["items"]) == 5
    # An offset PostgreSQL cannot store (past ±15:59) is still an instant: compared in UTC, on every database.
    assert len(operator.get("/jobs", after="2000-01-01T12:00:00+22:48").json()["items"]) == 6
    problem(operator.get("/jobs", after="0001-01-01T00:00:00+05:00"), 400)  # before year 1 in UTC
    problem(operator.get("/jobs", state="finished"), 400)
    problem(operator.get("/jobs", cursor="garbage"), 400)
    problem(operator.get("/jobs", limit=0), 400)
    problem(operator.get("/jobs", limit="ten"), 400)
    problem(operator.get("/jobs", after="yesterday"), 400)
    assert operator.get("/jobs", after="2030-01-01T00:00:00Z", before="2020-01-01T00:00:00Z").json()["items"] == []
    unknown = problem(operator.get("/jobs", colour="red"), 400)
    assert "colour" in unknown["detail"]


def test_a_text_search_reports_how_far_back_it_looked(
    operator: Api, mirror: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(4):
        operator.post("/jobs", {"task": "examples.echo", "params": {"n": n, "tag": "needle" if n == 0 else ""}})
    mirror.drain()
    monkeypatch.setattr("jobconsole.search.TEXT_SCAN", 2)
    first = operator.get("/jobs", text="needle").json()
    assert first["items"] == [] and first["searched_back_to"] and first["next_cursor"]
    cursor, found = first["next_cursor"], []
    while cursor:
        page = operator.get("/jobs", text="needle", cursor=cursor).json()
        found += page["items"]
        cursor = page["next_cursor"]
    assert [j["params_preview"] for j in found] == ['{"n":0,"tag":"needle"}']


def test_a_submit_token_sees_and_cancels_only_its_own_jobs_and_cannot_operate(
    operator: Api, submitter: Api, mirror: Any
) -> None:
    mine = submitter.post("/jobs", {"task": "apitest.add", "params": {"a": 1}}).json()["id"]
    assert SubmittedJob.objects.get().job_id == mine
    theirs = operator.post("/jobs", {"task": "apitest.add", "params": {"a": 2}}).json()["id"]
    mirror.drain()
    assert submitter.get(f"/jobs/{mine}").status_code == 200
    problem(submitter.get(f"/jobs/{theirs}"), 404)
    assert [j["id"] for j in submitter.get("/jobs").json()["items"]] == [mine]
    assert {j["id"] for j in operator.get("/jobs").json()["items"]} == {mine, theirs}
    for path in (f"/jobs/{mine}/retry", "/dead-letters/purge", "/queues/apitest/pause"):
        problem(submitter.post(path, {}), 403)
    problem(submitter.get("/queues"), 403)
    problem(Api(None).get(f"/jobs/{mine}"), 401)
    assert get_client().get(mine).state.value == "queued"
    # It cancels its own job, never another's (404, as an unknown id).
    problem(submitter.post(f"/jobs/{theirs}/cancel", {}), 404)
    assert get_client().get(theirs).state.value == "queued"
    assert submitter.post(f"/jobs/{mine}/cancel", {}).status_code == 200
    assert get_client().get(mine).state.value == "cancelled"
    assert AuditLog.objects.get(action="cancel").actor == "api:producer"


def test_a_submission_record_goes_with_its_job(operator: Api, submitter: Api, mirror: Any) -> None:
    mine = submitter.post("/jobs", {"task": "apitest.add", "params": {"a": 1}}).json()["id"]
    mirror.drain()
    assert operator.delete(f"/jobs/{mine}", {"reason": "test"}).status_code == 200
    assert not SubmittedJob.objects.exists()  # no record left behind for a job that is gone


def test_cancel_is_audited_and_refused_once_done(operator: Api) -> None:
    job_id = operator.post("/jobs", {"task": "apitest.add", "params": {"a": 1}}).json()["id"]
    response = operator.post(f"/jobs/{job_id}/cancel", {"reason": "not needed"})
    assert response.status_code == 200 and "cancelled" in response.json()["message"]
    assert get_client().get(job_id).state.value == "cancelled"
    record = AuditLog.objects.get(action="cancel")
    assert record.actor == "api:ops" and record.job_ids == [job_id] and record.reason == "not needed"
    again = problem(operator.post(f"/jobs/{job_id}/cancel"), 409)
    assert "cancelled" in again["detail"]
    problem(operator.post(f"/jobs/{ID}/cancel"), 404)


def test_retry_recover_and_delete(operator: Api, r: Any) -> None:
    dead = operator.post("/jobs", {"task": "apitest.boom"}).json()["id"]
    run_worker(r, ["apitest.dead"])
    assert get_client().get(dead).state.value == "dead"
    assert operator.post(f"/jobs/{dead}/retry", {"reset_attempts": True}).status_code == 200
    assert get_client().get(dead).state.value == "queued"
    assert AuditLog.objects.get(action="retry").detail == {"reset_attempts": True}
    problem(operator.post(f"/jobs/{dead}/recover"), 409)  # not running
    assert operator.delete(f"/jobs/{dead}", {"reason": "test"}).status_code == 200
    problem(operator.get(f"/jobs/{dead}"), 404)
    problem(operator.delete(f"/jobs/{dead}"), 404)
    problem(operator.post(f"/jobs/{dead}/retry", {"reset_attempts": "yes"}), 422)


def test_edit_is_a_compare_and_set(operator: Api) -> None:
    job_id = operator.post("/jobs", {"task": "apitest.add", "params": {"a": 1}, "delay": 600}).json()["id"]
    seen = {"expected_state": "scheduled", "expected_attempts": 0}
    edited = operator.patch(f"/jobs/{job_id}", {**seen, "params": {"a": 5}, "priority": 3, "reason": "fix"})
    assert edited.status_code == 200, edited.content
    assert edited.json()["params"] == {"a": 5} and edited.json()["priority"] == 3
    record = AuditLog.objects.get(action="edit_job")
    assert record.actor == "api:ops" and record.reason == "fix" and "params" in record.detail["changes"]
    stale = problem(operator.patch(f"/jobs/{job_id}", {**seen, "expected_state": "queued", "priority": 1}), 409)
    assert "moved on" in stale["detail"]
    problem(operator.patch(f"/jobs/{job_id}", seen), 422)  # nothing to change
    problem(operator.patch(f"/jobs/{job_id}", {**seen, "params": {"zz": 1}}), 422)
    problem(operator.patch(f"/jobs/{job_id}", {**seen, "expected_state": "completed", "priority": 1}), 422)
    problem(operator.patch(f"/jobs/{ID}", {**seen, "priority": 1}), 404)
    assert get_client().get(job_id).params == {"a": 5}
    soon = operator.patch(f"/jobs/{job_id}", {**seen, "run_at": "2001-01-01T00:00:00Z"})
    assert soon.status_code == 200 and soon.json()["state"] == "queued"  # due now: it waits no more


def test_api_calls_need_no_csrf_token(operator: Api) -> None:
    """Clients authenticate with a bearer token, which no browser sends by itself: no CSRF cookie dance."""
    token = operator.web.defaults["HTTP_AUTHORIZATION"]
    strict = WebClient(enforce_csrf_checks=True, HTTP_AUTHORIZATION=token)
    response = strict.post("/api/v1/jobs", {"task": "apitest.add", "params": {"a": 1}}, content_type="application/json")
    assert response.status_code == 201, response.content


def test_a_job_is_found_and_deleted_by_its_unique_key(operator: Api) -> None:
    body = {"task": "apitest.add", "params": {"a": 1}, "unique_key": "remind/ana", "run_at": [1, "h"]}
    job_id = operator.post("/jobs", {**body, "unique_until": "start"}).json()["id"]
    found = operator.get("/unique", queue="apitest", key="remind/ana")
    assert found.status_code == 200 and found.json()["id"] == job_id and found.json()["state"] == "scheduled"
    assert operator.get("/unique", queue="apitest.add", key="remind/ana").json()["id"] == job_id  # by task too
    problem(operator.get("/unique", queue="apitest", key="remind/bob"), 404)
    deleted = operator.web.delete("/api/v1/unique?queue=apitest&key=remind%2Fana")
    assert deleted.status_code == 200 and deleted.json() == {"id": job_id}
    assert AuditLog.objects.get(action="delete").detail == {"unique_key": "remind/ana"}
    problem(operator.web.delete("/api/v1/unique?queue=apitest&key=remind%2Fana"), 404)
    problem(operator.get("/unique", queue="apitest"), 400)  # the key is required
    problem(operator.post("/jobs", {**body, "unique_until": "later"}), 422)


def test_a_job_no_replica_confirmed_is_503_and_sending_it_again_is_safe(operator: Api, engine_settings: Any) -> None:
    # ENQUEUE_REPLICAS against the test Redis, which has no replica: WAIT 1 times out with none acknowledging.
    engine_settings.JOBCONSOLE = {**engine_settings.JOBCONSOLE, "ENQUEUE_REPLICAS": 1, "ENQUEUE_REPLICAS_TIMEOUT": 0.05}
    spec = {"id": ID, "task": "apitest.add", "params": {"a": 1, "b": 2}}
    response = operator.post("/jobs", spec)
    body = problem(response, 503)
    assert response["Retry-After"] == "5"
    assert "only 0 of 1 replicas acknowledged" in body["detail"] and "Send the same request again" in body["detail"]
    assert body["accepted"] == [ID]
    assert operator.get(f"/jobs/{ID}").json()["state"] == "queued"  # it exists on the primary
    again = operator.post("/jobs", spec)  # the same id: nothing new, and the replicas are waited for again
    assert problem(again, 503)["accepted"] == [ID]
    assert len(job_keys(get_client().redis)) == 1
