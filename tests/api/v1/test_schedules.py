"""/api/v1/schedules: list, get, enable, disable, run now; settings schedules are read-only; audited."""

from typing import Any

import pytest

from jobconsole.models import AuditLog, PeriodicSchedule
from tests.api.v1.conftest import Api, problem

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def schedules(engine_settings: Any) -> None:
    nightly = {"task": "examples.echo", "cron": "0 2 * * *", "params": {"report": "nightly"}, "misfire": "run_once"}
    engine_settings.JOBCONSOLE = {**engine_settings.JOBCONSOLE, "PERIODIC": {"SCHEDULES": {"nightly": nightly}}}
    PeriodicSchedule.objects.create(name="tick", task="examples.echo", every_seconds=30, queue="ticks")


def test_list_and_get(operator: Api, schedules: None) -> None:
    response = operator.get("/schedules")
    assert response.status_code == 200
    items = {item["name"]: item for item in response.json()["items"]}
    assert list(items) == ["nightly", "tick"]
    nightly = items["nightly"]
    assert (nightly["origin"], nightly["cron"], nightly["misfire"], nightly["enabled"]) == (
        "settings", "0 2 * * *", "run_once", True,
    )  # fmt: skip
    assert len(nightly["next_runs"]) == 5 and all("T02:00:00" in moment for moment in nightly["next_runs"])
    assert nightly["last_fired_at"] is None and nightly["params"] == {"report": "nightly"}
    tick = operator.get("/schedules/tick").json()
    assert (tick["every_seconds"], tick["queue"], tick["origin"]) == (30.0, "ticks", "database")
    problem(operator.get("/schedules/nope"), 404)
    problem(operator.get("/schedules/bad name!"), 400)


def test_enable_and_disable_a_database_schedule(operator: Api, schedules: None) -> None:
    off = operator.post("/schedules/tick/disable", {"reason": "maintenance"})
    assert off.status_code == 200 and off.json()["enabled"] is False and off.json()["next_runs"] == []
    assert PeriodicSchedule.objects.get(name="tick").enabled is False
    on = operator.post("/schedules/tick/enable")
    assert on.status_code == 200 and on.json()["enabled"] is True
    assert list(AuditLog.objects.order_by("at").values_list("action", "actor", "reason")) == [
        ("schedule_disable", "api:ops", "maintenance"), ("schedule_enable", "api:ops", ""),
    ]  # fmt: skip
    assert "settings" in problem(operator.post("/schedules/nightly/disable"), 409)["detail"]
    problem(operator.post("/schedules/nope/enable"), 404)


def test_run_now_enqueues_one_job_and_audits_it(operator: Api, schedules: None, client: Any) -> None:
    response = operator.post("/schedules/nightly/run", {"reason": "rerun"})
    assert response.status_code == 201
    job_id = response.json()["id"]
    assert client.get(job_id).params == {"report": "nightly"}
    record = AuditLog.objects.get(action="schedule_run_now")
    assert record.job_ids == [job_id] and record.reason == "rerun"


def test_a_submit_token_may_not_touch_schedules(submitter: Api, schedules: None) -> None:
    problem(submitter.get("/schedules"), 403)
    problem(submitter.post("/schedules/tick/disable"), 403)
