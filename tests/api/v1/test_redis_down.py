"""With Redis unreachable every route of /api/v1 answers 503 with Retry-After and a problem body, changes
nothing, and never a 2xx; the document and the docs page (no Redis needed) still answer."""

import json
import re
from typing import Any

import pytest

from jobconsole.models import AuditLog
from jobconsole_api.models import ApiToken
from jobconsole_api.v1.catalogue import OPERATIONS
from tests.api.v1.conftest import Api, problem
from tests.redis_server import free_port

pytestmark = pytest.mark.django_db

ID = "01JCZ4Y1V6Q2J8M3N4P5R6S7T8"
PATH_VALUES = {
    "job_id": ID,
    "queue": "apitest",
    "operation_id": "1",
    "group": "payments",
    "name": "nightly",
    "worker": "h:1:abc",
    "host": "h",
    "workflow_id": ID,
}
# The required query parameters of the operations that have some.
QUERIES = {"find_unique": "?queue=apitest&key=k", "delete_unique": "?queue=apitest&key=k"}
# A valid request body for each operation that takes one (any other gets none).
BODIES: dict[str, Any] = {
    "submit_job": {"task": "apitest.add", "params": {"a": 1}},
    "submit_jobs": {"jobs": [{"task": "apitest.add", "params": {"a": 1}}]},
    "edit_job": {"expected_state": "queued", "expected_attempts": 0, "priority": 1},
    "resubmit_dead_letters": {"ids": [ID]},
    "purge_dead_letters": {"filter": {}},
    "define_group": {"connections": 2},
    "set_queue_limit": {"limit": 2},
    "control_worker": {"action": "quiet"},
    "control_host": {"action": "quiet"},
    "silence_alarm": {"alarm": "delay:apitest:", "for": "1h", "reason": "known"},
    "lift_silence": {"alarm": "delay:apitest:"},
    "create_workflow": {
        "steps": [
            {"name": "a", "task": "apitest.add", "params": {"a": 1}},
            {"name": "b", "task": "apitest.add", "params": {"a": 2}, "after": ["a"]},
        ]
    },
}


@pytest.fixture
def cut_off(settings: Any) -> Api:
    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"}
    _, plain = ApiToken.objects.issue("ops", "operate")
    return Api(plain)


@pytest.mark.parametrize("op", OPERATIONS, ids=lambda op: op.operation_id)
def test_every_route_is_503_with_retry_after(cut_off: Api, op: Any) -> None:
    path = "/api/v1" + re.sub(r"\{(\w+)\}", lambda m: PATH_VALUES[m.group(1)], op.route)
    path += QUERIES.get(op.operation_id, "")
    body = BODIES.get(op.operation_id)
    data = "" if body is None else json.dumps(body)
    response = cut_off.web.generic(op.method, path, data, content_type="application/json",
                                   headers={"Idempotency-Key": "k"} if op.idempotent else {})  # fmt: skip
    found = problem(response, 503)
    assert response["Retry-After"] == "5" and "Redis is unreachable" in found["detail"]
    assert not AuditLog.objects.exists()


def test_the_document_needs_no_redis(cut_off: Api) -> None:
    assert cut_off.web.get("/api/v1/openapi.json").status_code == 200
    assert cut_off.web.get("/api/v1/docs").status_code == 200
