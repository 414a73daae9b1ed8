"""Jobs of Django tasks and Celery-style tasks are jobs like any other: the mirror copies them, the console finds
them by task and shows their arguments, result and error (run here by an in-process worker)."""

import pytest
from django.contrib.auth.models import Permission, User
from django.tasks import TaskResultStatus
from django.test import Client as WebClient

from jobconsole.models import Job
from tests import django_tasks
from tests.mirror_fixtures import *  # noqa: F403
from tests.mirror_fixtures import run_worker

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


def operator() -> WebClient:
    user = User.objects.create_user("operator", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="jobconsole", codename="view_job"))
    browser = WebClient()
    browser.force_login(user)
    return browser


def test_django_and_celery_jobs_show_in_the_console(client, mirror, r):
    added = django_tasks.add.enqueue(20, y=22)
    exploded = django_tasks.explode.enqueue("kaboom-17")
    multiplied = django_tasks.multiply.delay(6, 7)
    run_worker(r, ["default", "celery"])
    mirror.drain()

    added.refresh()
    assert added.status == TaskResultStatus.SUCCESSFUL and added.return_value == 42
    assert multiplied.get(timeout=1) == 42
    assert Job.objects.get(id=exploded.id).state == "dead"

    browser = operator()
    listed = browser.get("/jobs/", {"task": "tests.django_tasks.add"})
    assert [row.id for row in listed.context["rows"]] == [added.id]
    page = browser.get(f"/jobs/{added.id}/").content.decode()
    assert "tests.django_tasks.add" in page and "&quot;kwargs&quot;" in page and "42" in page
    page = browser.get(f"/jobs/{exploded.id}/").content.decode()
    assert "ValueError" in page and "kaboom-17" in page
    page = browser.get(f"/jobs/{multiplied.id}/").content.decode()
    assert "tests.django_tasks.multiply" in page
