"""/api/v1/dead-letters and /operations: the list (filters, cursor), a job's attempts with their times, resubmit
and purge by ids or by filter (inline, or as a tracked bulk operation past API.BULK_THRESHOLD), audited."""

from typing import Any

import pytest

from jobconsole.engine import get_client
from jobconsole.models import AuditLog, BulkOperation, DeadLetter, Job
from tests.api.v1.conftest import Api, problem
from tests.mirror_fixtures import run_worker

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


def dead_jobs(operator: Api, r: Any, mirror: Any, messages: list[str]) -> list[str]:
    ids = [operator.post("/jobs", {"task": "apitest.boom", "params": {"message": m}}).json()["id"] for m in messages]
    run_worker(r, ["apitest.dead"])
    mirror.drain()
    assert DeadLetter.objects.count() == len(messages)
    return ids


def test_list_filters_and_pages(operator: Api, r: Any, mirror: Any) -> None:
    ids = dead_jobs(operator, r, mirror, ["disk full", "timeout", "disk full again"])
    page = operator.get("/dead-letters", limit=2).json()
    assert len(page["items"]) == 2 and page["next_cursor"]
    rest = operator.get("/dead-letters", limit=2, cursor=page["next_cursor"]).json()
    assert len(rest["items"]) == 1 and rest["next_cursor"] is None
    listed = {d["job_id"] for d in page["items"] + rest["items"]}
    assert listed == set(ids)
    letter = page["items"][0]
    assert letter["error_class"] == "ValueError" and letter["task"] == "apitest.boom" and letter["died_at"]
    found = operator.get("/dead-letters", q="disk").json()["items"]
    assert {d["message"] for d in found} == {"disk full", "disk full again"}
    assert operator.get("/dead-letters", queue="apitest.dead", status="resubmitted").json()["items"] == []
    fingerprint = letter["fingerprint"]
    assert len(operator.get("/dead-letters", fingerprint=fingerprint).json()["items"]) >= 1
    problem(operator.get("/dead-letters", fingerprint="xyz"), 400)
    problem(operator.get("/dead-letters", since="not a date"), 400)
    problem(operator.get("/dead-letters", status="closed"), 400)
    problem(operator.get("/dead-letters", cursor="bm9wZQ=="), 400)


def test_history_has_every_attempt_with_times(operator: Api, r: Any, mirror: Any) -> None:
    [job_id] = dead_jobs(operator, r, mirror, ["boom"])
    body = operator.get(f"/dead-letters/{job_id}/history").json()
    [attempt] = body["attempts"]
    assert attempt["outcome"] == "failed" and attempt["error_class"] == "ValueError" and "boom" in attempt["message"]
    assert attempt["started_at"] <= attempt["ended_at"] and "ValueError" in attempt["traceback"]
    assert [d["job_id"] for d in body["deaths"]] == [job_id]
    r.flushall()  # Redis forgets the job: the database's copy answers
    from_db = operator.get(f"/dead-letters/{job_id}/history").json()
    assert from_db["attempts"][0]["started_at"] == attempt["started_at"]
    problem(operator.get("/dead-letters/01JCZ4Y1V6Q2J8M3N4P5R6S7T8/history"), 404)


def test_resubmit_by_ids_is_a_compare_and_set_and_audited(operator: Api, r: Any, mirror: Any) -> None:
    first, second = dead_jobs(operator, r, mirror, ["a", "b"])
    response = operator.post("/dead-letters/resubmit", {"ids": [first], "reason": "fixed the bug"})
    assert response.status_code == 200, response.content
    assert response.json() == {"done": 1, "refused": {}, "job_ids": [first]}
    assert get_client().get(first).state.value == "queued" and get_client().get(second).state.value == "dead"
    assert DeadLetter.objects.get(job_id=first).resubmitted_by == "api:ops"
    record = AuditLog.objects.get(action="resubmit")
    assert record.actor == "api:ops" and record.count == 1 and record.reason == "fixed the bug"
    again = operator.post("/dead-letters/resubmit", {"ids": [first]}).json()
    assert again == {"done": 0, "refused": {}, "job_ids": []}  # it is no open dead letter any more


def test_resubmit_refuses_a_job_that_moved_on(operator: Api, r: Any, mirror: Any) -> None:
    [job_id] = dead_jobs(operator, r, mirror, ["a"])
    get_client().requeue(job_id)  # someone else brought it back meanwhile
    body = operator.post("/dead-letters/resubmit", {"ids": [job_id]}).json()
    assert body["done"] == 0 and "queued" in body["refused"][job_id]


def test_purge_by_filter(operator: Api, r: Any, mirror: Any) -> None:
    ids = dead_jobs(operator, r, mirror, ["a", "b"])
    body = operator.post("/dead-letters/purge", {"filter": {"queue": "apitest.dead"}}).json()
    assert body["done"] == 2 and sorted(body["job_ids"]) == sorted(ids)
    assert not Job.objects.filter(id__in=ids).exists() and not DeadLetter.objects.exists()
    problem(operator.get(f"/jobs/{ids[0]}"), 404)
    assert AuditLog.objects.get(action="purge").filter == {
        "target": "deadletter",
        "filter": {"queue": ["apitest.dead"]},
    }


def test_purge_by_ids_removes_only_those(operator: Api, r: Any, mirror: Any) -> None:
    first, second = dead_jobs(operator, r, mirror, ["a", "b"])
    body = operator.post("/dead-letters/purge", {"ids": [first], "reason": "junk"}).json()
    assert body["done"] == 1 and body["job_ids"] == [first]
    problem(operator.get(f"/jobs/{first}"), 404)
    assert get_client().get(second).state.value == "dead" and list(
        DeadLetter.objects.values_list("job_id", flat=True)
    ) == [second]  # fmt: skip
    record = AuditLog.objects.get(action="purge")
    assert record.job_ids == [first] and record.reason == "junk"


@pytest.mark.parametrize(
    "body",
    [{}, {"ids": []}, {"ids": ["x"]}, {"ids": ["01JCZ4Y1V6Q2J8M3N4P5R6S7T8"], "filter": {}},
     {"filter": {"state": "dead"}}, {"filter": {"since": "yesterday"}}, {"filter": []}],
)  # fmt: skip
def test_bad_selections_are_422_and_change_nothing(operator: Api, r: Any, mirror: Any, body: Any) -> None:
    [job_id] = dead_jobs(operator, r, mirror, ["a"])
    problem(operator.post("/dead-letters/purge", body), 422)
    assert get_client().get(job_id).state.value == "dead"


def test_a_large_selection_runs_as_a_bulk_operation(operator: Api, r: Any, mirror: Any, settings: Any) -> None:
    ids = dead_jobs(operator, r, mirror, ["a", "b", "c"])
    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "API": {"BULK_THRESHOLD": 2}}
    response = operator.post("/dead-letters/resubmit", {"filter": {}, "reset_attempts": True, "reason": "deploy"})
    assert response.status_code == 202, response.content
    op = response.json()
    assert response["Location"] == f"/api/v1/operations/{op['id']}"
    assert op["kind"] == "resubmit_deadletters" and op["total"] == 3 and op["status"] == "pending"
    assert op["actor"] == "api:ops" and op["options"]["reset_attempts"] is True
    progress = operator.get(f"/operations/{op['id']}").json()
    assert progress["total"] == 3 and progress["done"] == 0
    from jobconsole.bulk.runner import run_operation

    run_operation(op["id"])  # what the system task does on a worker
    done = operator.get(f"/operations/{op['id']}").json()
    assert done["status"] == "done" and done["done"] == 3 and done["percent"] == 100
    assert all(get_client().get(i).state.value == "queued" for i in ids)
    assert AuditLog.objects.get(action="bulk_resubmit").actor == "api:ops"
    problem(operator.get("/operations/999999"), 404)
    problem(operator.get("/operations/0"), 400)


def test_a_bulk_operation_can_be_stopped(operator: Api, r: Any, mirror: Any, settings: Any) -> None:
    dead_jobs(operator, r, mirror, ["a", "b"])
    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "API": {"BULK_THRESHOLD": 1}}
    op = operator.post("/dead-letters/purge", {"filter": {}}).json()
    stopped = operator.post(f"/operations/{op['id']}/cancel").json()
    assert stopped["status"] == "cancelled" and BulkOperation.objects.get().cancelled_by == "api:ops"
