"""/api/v1 queues (list, pause, resume), workers, scheduled jobs, stats and series."""

import time
from typing import Any

import pytest

from jobconsole.engine import get_client
from jobconsole.models import AuditLog, Queue
from tests.api.v1.conftest import Api, problem
from tests.mirror_fixtures import run_worker

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


def test_queues_pause_and_resume(operator: Api) -> None:
    operator.post("/jobs", {"task": "apitest.add", "params": {"a": 1}})
    [queue] = [q for q in operator.get("/queues").json()["items"] if q["name"] == "apitest"]
    assert queue["queued"] == 1 and queue["paused"] is False
    paused = operator.post("/queues/apitest/pause", {"reason": "maintenance"})
    assert paused.status_code == 200 and paused.json()["paused"] is True
    assert get_client().queries.queues.is_paused("apitest") and Queue.objects.get(name="apitest").paused
    record = AuditLog.objects.get(action="pause")
    assert record.actor == "api:ops" and record.queue == "apitest" and record.reason == "maintenance"
    assert operator.post("/queues/apitest/resume").json()["paused"] is False
    assert AuditLog.objects.filter(action="resume", queue="apitest").exists()
    problem(operator.post("/queues/nosuchqueue/pause"), 404)
    problem(operator.post("/queues/bad:name/pause"), 400)
    problem(operator.post("/queues/apitest/pause", {"reason": 5}), 422)
    problem(operator.get("/queues/apitest/pause"), 405)


def test_workers_are_listed(operator: Api) -> None:
    store = get_client().store
    now_ms = store.time_ms()
    info = {"host": "web-1", "pid": 4242, "queues": "apitest,emails", "concurrency": 4, "active_threads": 1,
            "started_at": now_ms - 60_000, "heartbeat_at": now_ms, "state": "running", "current": "[]",
            "processed": 17, "failed": 2}  # fmt: skip
    store.register_worker("w-1", ttl_s=30, now_ms=now_ms, info=info)
    [worker] = operator.get("/workers").json()["items"]
    assert worker["id"] == "w-1" and worker["queues"] == ["apitest", "emails"] and worker["processed"] == 17
    assert worker["state"] == "running" and worker["heartbeat_at"].endswith("Z")
    assert worker["gone_at"] is None and worker["gone_reason"] == "" and worker["jobs_taken_back"] == 0


def test_a_gone_worker_is_listed_with_when_and_why(operator: Api) -> None:
    from jobconsole.core.lapse import LapseWatch

    client = get_client()
    store = client.store
    info = {"host": "web-2", "pid": 77, "queues": "apitest", "state": "running", "processed": 9, "failed": 1}
    store.register_worker("w-2", ttl_s=30, now_ms=store.time_ms(), info=info)
    store.worker_beat("w-2", expiry_ms=300)
    time.sleep(0.4)
    LapseWatch(store, client.queries, ttl_ms=1000).step()
    [worker] = operator.get("/workers").json()["items"]
    assert worker["state"] == "gone" and worker["host"] == "web-2" and worker["pid"] == 77 and worker["processed"] == 9
    assert worker["gone_at"].endswith("Z") and worker["gone_reason"].startswith("no heartbeat for ")
    assert worker["jobs_taken_back"] == 0


def test_scheduled_jobs_soonest_first(operator: Api) -> None:
    later = operator.post("/jobs", {"task": "apitest.add", "params": {"a": 1}, "delay": 600}).json()["id"]
    sooner = operator.post("/jobs", {"task": "apitest.add", "params": {"a": 2}, "delay": 60}).json()["id"]
    page = operator.get("/scheduled", limit=1).json()
    assert [i["job"]["id"] for i in page["items"]] == [sooner] and page["items"][0]["due_at"]
    rest = operator.get("/scheduled", cursor=page["next_cursor"]).json()
    assert [i["job"]["id"] for i in rest["items"]] == [later]
    assert operator.get("/scheduled", queue="apitest").json()["items"]
    problem(operator.get("/scheduled", queue="nosuchqueue"), 404)
    problem(operator.get("/scheduled", cursor="!!"), 400)


def test_stats_and_series(operator: Api, r: Any) -> None:
    for n in range(3):
        operator.post("/jobs", {"task": "apitest.add", "params": {"a": n}})
    run_worker(r, ["apitest"])
    stats = operator.get("/stats", span="hour").json()
    [add] = [t for t in stats["tasks"] if t["task"] == "apitest.add"]
    assert add["completed"] == 3 and add["enqueued"] == 3 and add["success_rate"] == 1.0
    assert any(q["queue"] == "apitest" for q in stats["queues"])
    series = operator.get("/series", queue="apitest").json()
    assert sum(series["counts"]["completed"]) == 3 and len(series["times"]) == len(series["run"]["p50"])
    depth = operator.get("/series/depth", span="day").json()["items"]
    assert any(d["queue"] == "apitest" for d in depth)
    problem(operator.get("/stats", span="year"), 400)
    problem(operator.get("/series", queue="nosuchqueue"), 404)


def test_flow_control_groups_and_queue_limits_are_read_and_set(operator: Api, r: Any) -> None:
    assert operator.get("/flow").json() == {"groups": [], "queue_limits": []}
    defined = operator.put("/groups/payments", {"connections": 2, "requests": [10, "second"], "reason": "provider"})
    assert defined.status_code == 200, defined.content
    [group] = defined.json()["groups"]
    assert group | {"held": {}} == {
        "name": "payments", "connections": 2, "requests": 10, "period_ms": 1000, "in_use": 0,
        "started_in_window": 0, "waiting": 0, "held": {},
    }  # fmt: skip
    assert AuditLog.objects.get(action="define_group").detail["group"] == "payments"
    limited = operator.put("/queues/apitest/limit", {"limit": 3})
    assert limited.json()["queue_limits"] == [{"queue": "apitest", "limit": 3, "running": 0}]
    assert operator.put("/queues/apitest/limit", {"limit": None}).json()["queue_limits"] == []
    # Bad input says what is wrong and changes nothing.
    assert (
        "second, minute or hour" in problem(operator.put("/groups/payments", {"requests": [5, "week"]}), 422)["detail"]
    )
    problem(operator.put("/groups/payments", {"connections": -1}), 422)
    problem(operator.put("/queues/apitest/limit", {"limit": 0}), 422)
    problem(operator.put("/groups/bad:name", {"connections": 1}), 400)
    assert operator.get("/flow").json()["groups"][0]["connections"] == 2
