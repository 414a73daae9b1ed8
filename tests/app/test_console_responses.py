"""What every console response carries, and what a refused one logs: `Cache-Control: no-store` on each console
URL (pages, htmx fragments, exports, actions, the refusal page), and one WARNING line without a traceback for a
refusal."""

import logging

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client as WebClient
from django.urls import URLPattern, reverse

from dashboards import urls as console_urls
from dashboards.views.assets import VERSION as PLOTLY_VERSION
from jobconsole.models import BulkOperation, PeriodicSchedule, Workflow
from tests.mirror_fixtures import *  # noqa: F403

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


def operator() -> WebClient:
    """A staff account with every permission of the console (view, operate and purge of every kind)."""
    user = User.objects.create_user(f"op{User.objects.count()}", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="jobconsole"))
    browser = WebClient()
    browser.force_login(user)
    return browser


def test_every_console_url_answers_no_store(client):
    job_id = client.enqueue("examples.echo", {"x": 1}).id
    doomed = client.enqueue("examples.echo", {"x": 2}).id
    PeriodicSchedule.objects.create(name="nightly", task="examples.echo", cron="@daily")
    operation = BulkOperation.objects.create(kind=BulkOperation.Kind.RETRY_JOBS, actor="op")
    queue, job, pk = {"name": "examples.echo"}, {"job_id": job_id}, {"pk": operation.pk}
    flow = {"workflow_id": Workflow.objects.create(id="01WF0000000000000000000000", queue="examples.echo").id}
    arguments = {
        "overview": {}, "queues": {}, "queue": queue, "queue_pause": queue, "jobs": {}, "job": job,
        "job_retry": job, "job_cancel": job, "job_recover": job, "job_edit": job,
        "job_delete": {"job_id": doomed},
        "running": {}, "scheduled": {}, "schedules": {}, "schedule_action": {"name": "nightly"},
        "dead_letters": {}, "dead_letters_export": {"fmt": "csv"}, "workers": {}, "flow": {}, "tasks": {},
        "task": {"name": "examples.echo"}, "audit": {}, "bulk_list": {}, "bulk_preview": {}, "bulk_confirm": {},
        "bulk_detail": pk, "bulk_progress": pk, "bulk_cancel": pk, "bulk_resume": pk, "healthz": {},
        "alarms": {}, "alarm_silence": {}, "alarm_lift": {}, "worker_control": {}, "flow_limit": {}, "flow_group": {},
        "workflows": {}, "workflow": flow, "workflow_cancel": flow,
    }  # fmt: skip
    # The one exception: plotly.js, a public static file whose URL names its version, is kept a year.
    static = {"plotly": {"version": PLOTLY_VERSION}}
    names = [p.name for p in console_urls.urlpatterns if isinstance(p, URLPattern)]
    assert sorted([*arguments, *static]) == sorted(names), "a console URL without arguments here: add it"
    names = [name for name in names if name not in static]
    browser = operator()
    for name in names:
        url = reverse(f"dashboards:{name}", kwargs=arguments[name])
        response = browser.get(url)
        if response.status_code == 405:  # an action (POST only): POST it
            response = browser.post(url, {"action": "pause" if name == "queue_pause" else "disable"})
        assert response.status_code < 500, (url, response.status_code)
        assert "no-store" in response.get("Cache-Control", ""), (url, response.status_code)
    asset = browser.get(reverse("dashboards:plotly", kwargs=static["plotly"]))
    assert asset.status_code == 200 and "immutable" in asset["Cache-Control"], asset.get("Cache-Control")
    for extra in (
        browser.get("/", headers={"HX-Request": "true"}),  # an htmx fragment
        browser.get(reverse("dashboards:dead_letters_export", kwargs={"fmt": "json"})),
        WebClient().get("/"),  # the login redirect
        web_without_permission().get("/dead/"),  # the refusal page
    ):
        assert "no-store" in extra.get("Cache-Control", ""), extra


def web_without_permission(*codenames: str) -> WebClient:
    """A staff account with only these permissions (none: it may not even look)."""
    user = User.objects.create_user(f"nobody{User.objects.count()}", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="jobconsole", codename__in=codenames))
    browser = WebClient()
    browser.force_login(user)
    return browser


def test_a_refusal_logs_one_line_without_a_traceback(engine_settings, caplog: pytest.LogCaptureFixture):
    browser, viewer = web_without_permission(), web_without_permission("view_job")
    for client, method, path in ((browser, "get", "/dead/"), (viewer, "post", "/queues/examples.echo/pause")):
        caplog.clear()
        with caplog.at_level(logging.DEBUG):
            response = getattr(client, method)(path, {"action": "pause"} if method == "post" else {})
        assert response.status_code == 403
        records = [r for r in caplog.records if r.levelno >= logging.INFO]
        assert len(records) == 1, [(r.name, r.getMessage()) for r in records]
        [record] = records
        assert record.levelno == logging.WARNING and record.exc_info is None and record.exc_text is None
        assert record.getMessage().startswith(f"refused {method.upper()} {path} to user ")
        assert "\n" not in record.getMessage()
