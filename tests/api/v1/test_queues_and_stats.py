"""/api/v1 queues (list, pause, resume), workers, scheduled jobs, stats and series."""

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
