"""Periodic jobs in the Django layer: settings checked, a database schedule fires, the console's Schedules page
and its actions (operate permission, audited), the admin."""

import time
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.core.exceptions import ValidationError
from django.test import Client as WebClient

from jobconsole import periodic
from jobconsole.conf import problems
from jobconsole.core import JobState
from jobconsole.models import AuditLog, PeriodicSchedule
from tests.mirror_fixtures import *  # noqa: F403

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

VIEW = ["view_job"]
OPERATE = [*VIEW, "operate_periodicschedule"]
NIGHTLY = {"task": "examples.echo", "cron": "0 2 * * *", "params": {"report": "nightly"}}


def web(*codenames: str) -> WebClient:
    user = User.objects.create_user(f"u{User.objects.count()}", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="jobconsole", codename__in=codenames))
    browser = WebClient()
    browser.force_login(user)
    return browser


@pytest.fixture
def with_schedules(engine_settings: Any) -> Any:
    engine_settings.JOBCONSOLE = {**engine_settings.JOBCONSOLE, "PERIODIC": {"SCHEDULES": {"nightly": NIGHTLY}}}
    PeriodicSchedule.objects.create(name="tick", task="examples.echo", every_seconds=1, params={"n": 1})
    return engine_settings


def test_settings_schedules_are_checked() -> None:
    assert problems({"PERIODIC": {"SCHEDULES": {"nightly": NIGHTLY}}}, {}) == []
    bad = {
        "no-when": {"task": "examples.echo"},
        "bad-cron": {"task": "examples.echo", "cron": "61 * * * *"},
        "typo": {"task": "examples.echo", "every": 5, "queeu": "x"},
        "zone": {"task": "examples.echo", "cron": "@daily", "timezone": "Mars/Olympus"},
    }
    for name, spec in bad.items():
        found = problems({"PERIODIC": {"SCHEDULES": {name: spec}}}, {})
        assert [code for code, _, _ in found] == ["E003"], (name, found)
        assert f"schedule {name!r}" in found[0][1]


def test_a_database_schedule_fires_each_slot_once(with_schedules: Any, client: Any) -> None:
    scheduler = periodic.build_scheduler()
    scheduler.step()  # first sight
    time.sleep(2.2)
    fired = scheduler.step() + periodic.build_scheduler().step()
    ticks = [f for f in fired if f.schedule == "tick"]
    assert len(ticks) in (2, 3) and len({f.slot_ms for f in ticks}) == len(ticks)
    job = client.get(ticks[0].job_id)
    assert job.task == "examples.echo" and job.params == {"n": 1} and job.state is JobState.QUEUED
    assert [f for f in fired if f.schedule == "nightly"] == []  # 02:00 is not now (or not twice)


def test_a_model_row_is_validated(with_schedules: Any) -> None:
    with pytest.raises(ValidationError, match="cron or every"):
        PeriodicSchedule(name="x", task="examples.echo").full_clean()
    with pytest.raises(ValidationError, match="defined in the settings"):
        PeriodicSchedule(name="nightly", task="examples.echo", cron="@daily").full_clean()
    with pytest.raises(ValidationError, match="minute"):
        PeriodicSchedule(name="y", task="examples.echo", cron="99 * * * *").full_clean()
    with pytest.raises(ValidationError, match="unknown time zone"):
        PeriodicSchedule(name="z", task="examples.echo", cron="@daily", timezone="Mars/Olympus").full_clean()


def test_the_schedules_page_lists_both_kinds_with_their_next_runs(with_schedules: Any) -> None:
    viewer = web(*VIEW)
    page = viewer.get("/schedules/")
    text = page.content.decode()
    assert page.status_code == 200 and "nightly" in text and "tick" in text and "0 2 * * *" in text
    assert "every 1 s" in text and "Run now" not in text  # a viewer sees no actions
    infos = {info.name: info for info in page.context["schedules"]}
    assert len(infos["nightly"].next_runs) == 5 and all(m.hour == 2 for m in infos["nightly"].next_runs)
    assert infos["nightly"].editable is False and infos["tick"].editable is True
    assert viewer.post("/schedules/tick/action", {"action": "disable"}).status_code == 403
    assert b"<html" not in viewer.get("/schedules/", headers={"HX-Request": "true"}).content
    assert 'href="/schedules/"' in viewer.get("/").content.decode()  # in the sidebar


def test_enable_disable_and_run_now_are_audited(with_schedules: Any, client: Any) -> None:
    operator = web(*OPERATE)
    assert operator.get("/schedules/tick/action").status_code == 405
    response = operator.post("/schedules/tick/action", {"action": "disable", "reason": "noisy"}, follow=True)
    assert response.status_code == 200 and "Schedule tick disabled" in response.content.decode()
    assert PeriodicSchedule.objects.get(name="tick").enabled is False
    operator.post("/schedules/tick/action", {"action": "enable"})
    assert PeriodicSchedule.objects.get(name="tick").enabled is True
    refused = operator.post("/schedules/nightly/action", {"action": "disable"}, follow=True)
    assert "defined in the settings" in refused.content.decode()
    ran = operator.post("/schedules/nightly/action", {"action": "run_now"}, follow=True)
    assert "enqueued" in ran.content.decode()
    actions = list(AuditLog.objects.order_by("at").values_list("action", "reason"))
    assert actions == [("schedule_disable", "noisy"), ("schedule_enable", ""), ("schedule_run_now", "")]
    [job_id] = AuditLog.objects.get(action="schedule_run_now").job_ids
    assert client.get(job_id).params == {"report": "nightly"}
    assert operator.post("/schedules/nope/action", {"action": "run_now"}).status_code == 404


def test_the_admin_lists_and_acts_on_database_schedules(with_schedules: Any, client: Any) -> None:
    admin = User.objects.create_superuser("root", password="pw")
    browser = WebClient()
    browser.force_login(admin)
    listing = browser.get("/admin/jobconsole/periodicschedule/")
    assert listing.status_code == 200 and "tick" in listing.content.decode()
    row = PeriodicSchedule.objects.get(name="tick")
    assert browser.get(f"/admin/jobconsole/periodicschedule/{row.pk}/change/").status_code == 200
    browser.post(
        "/admin/jobconsole/periodicschedule/", {"action": "disable", "_selected_action": [row.pk]}, follow=True
    )
    assert PeriodicSchedule.objects.get(name="tick").enabled is False
    assert AuditLog.objects.filter(action="schedule_disable").count() == 1
