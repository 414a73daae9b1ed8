"""/api/v1 worker controls: quiet, resume or stop a worker or a host's workers (audited), and the worker shape's
busy threads and uptime."""

from typing import Any

import pytest

from jobconsole.engine import get_client
from jobconsole.models import AuditLog
from tests.api.v1.conftest import Api, problem

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


def _register(worker_id: str, host: str) -> None:
    store = get_client().store
    now_ms = store.time_ms()
    info = {"host": host, "pid": 1, "queues": "apitest", "concurrency": 4, "active_threads": 4,
            "started_at": now_ms - 90_000, "heartbeat_at": now_ms, "state": "running",
            "current": '[{"id": "j", "queue": "apitest", "task": "apitest.add", "attempt": 1}]', "processed": 1,
            "failed": 0}  # fmt: skip
    store.register_worker(worker_id, ttl_s=60, now_ms=now_ms, info=info)


def test_quiet_resume_and_stop_a_worker_and_a_host(operator: Api, engine_settings: Any) -> None:
    _register("a:1:aaaaaa", "a")
    _register("a:2:bbbbbb", "a")
    _register("b:1:cccccc", "b")
    [listed] = [w for w in operator.get("/workers").json()["items"] if w["id"] == "a:1:aaaaaa"]
    assert listed["busy"] == 1 and listed["concurrency"] == 4 and listed["uptime_s"] == 90.0
    assert listed["control"] == ""
    quiet = operator.post("/workers/a:1:aaaaaa/control", {"action": "quiet", "reason": "deploy"})
    assert quiet.status_code == 200, quiet.content
    body = quiet.json()
    assert body["outcomes"] == {"a:1:aaaaaa": "done"} and body["workers"][0]["control"] == "quiet"
    again = operator.post("/workers/a:1:aaaaaa/control", {"action": "quiet"}).json()
    assert again["outcomes"] == {"a:1:aaaaaa": "already"}
    stopped = operator.post("/hosts/a/control", {"action": "stop"}).json()
    assert stopped["outcomes"] == {"a:1:aaaaaa": "done", "a:2:bbbbbb": "done"}
    assert {w.id: w.control for w in get_client().queries.workers.all()} == {
        "a:1:aaaaaa": "stop", "a:2:bbbbbb": "stop", "b:1:cccccc": ""}  # fmt: skip
    records = list(AuditLog.objects.order_by("at").values_list("actor", "action", "reason", "count"))
    assert records == [("api:ops", "worker_quiet", "deploy", 1), ("api:ops", "worker_quiet", "", 0),
                       ("api:ops", "worker_stop", "", 2)]  # fmt: skip


def test_a_bad_worker_control_is_refused_and_changes_nothing(operator: Api, engine_settings: Any) -> None:
    _register("a:1:aaaaaa", "a")
    assert "pause" in problem(operator.post("/workers/a:1:aaaaaa/control", {"action": "pause"}), 422)["detail"]
    problem(operator.post("/workers/a:1:aaaaaa/control", {}), 422)
    assert "No live worker" in problem(operator.post("/workers/nobody/control", {"action": "stop"}), 404)["detail"]
    assert "host 'z'" in problem(operator.post("/hosts/z/control", {"action": "stop"}), 404)["detail"]
    assert get_client().queries.workers.all()[0].control == "" and not AuditLog.objects.exists()
