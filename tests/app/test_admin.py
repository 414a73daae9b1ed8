"""Django admin over the mirror: filters and search, edits applied to Redis by compare-and-set (and refused
when the job moved on), actions, permissions and the audit log."""

import json
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.test import Client as WebClient

from jobconsole.core import JobState
from jobconsole.core.ids import new_job_id
from jobconsole.core.keys import queue_keys
from jobconsole.models import AuditLog, DeadLetter, Job, Queue
from tests.mirror_fixtures import *  # noqa: F403
from tests.mirror_fixtures import run_worker

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

VIEW = ["view_job", "view_deadletter", "view_queue", "view_auditlog", "view_attempt"]
OPERATE = [*VIEW, "operate_job", "operate_deadletter", "operate_queue"]
PURGE = [*OPERATE, "purge_job", "purge_deadletter"]


def web(*codenames: str) -> WebClient:
    user = User.objects.create_user(f"u{User.objects.count()}", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="jobconsole", codename__in=codenames))
    browser = WebClient()
    browser.force_login(user)
    return browser


def action(browser: WebClient, model: str, name: str, pks: list, **extra) -> object:
    return browser.post(f"/admin/jobconsole/{model}/", {"action": name, "_selected_action": pks, **extra}, follow=True)


def change_form(job: Job, **overrides) -> dict:
    data = {
        "priority": job.priority,
        "run_at_0": job.run_at.strftime("%Y-%m-%d") if job.run_at else "",
        "run_at_1": job.run_at.strftime("%H:%M:%S") if job.run_at else "",
        "params": job.params,
        "audit_reason": "",
        "expected_state": job.state,
        "expected_attempts": job.attempts,
        "history-TOTAL_FORMS": job.history.count(),
        "history-INITIAL_FORMS": job.history.count(),
        "history-MIN_NUM_FORMS": 0,
        "history-MAX_NUM_FORMS": 1000,
    }
    data.update(overrides)
    return data


def test_lists_filter_search_and_show_retention(client, mirror, r):
    a = client.enqueue("examples.echo", {"needle": "findme-42"}, unique_key="order-7")
    client.enqueue("examples.echo", {"other": 1}, delay=600)
    mirror.drain()
    browser = web(*VIEW)
    page = browser.get("/admin/jobconsole/job/", {"q": "findme-42"})
    assert page.status_code == 200 and a.id in page.content.decode()
    assert page.context["cl"].result_count == 1
    assert browser.get("/admin/jobconsole/job/", {"q": "order-7"}).context["cl"].result_count == 1
    assert browser.get("/admin/jobconsole/job/", {"q": "50%"}).context["cl"].result_count == 0
    assert browser.get("/admin/jobconsole/job/", {"state": "scheduled"}).context["cl"].result_count == 1
    assert "Retention of finished jobs" in page.content.decode()
    detail = browser.get(f"/admin/jobconsole/job/{a.id}/change/")
    assert detail.status_code == 200 and "findme-42" in detail.content.decode()


def test_view_only_user_cannot_act(client, mirror, r):
    job = client.enqueue("examples.echo", {"x": 1}, delay=600)
    mirror.drain()
    browser = web(*VIEW)
    page = browser.get("/admin/jobconsole/job/")
    assert "retry_now" not in page.content.decode()
    action(browser, "job", "retry_now", [job.id])
    assert r.hget(queue_keys("examples.echo").job(job.id), "state") == "scheduled"
    assert not AuditLog.objects.exists()
    # And its change page is read-only: a POST changes nothing.
    browser.post(f"/admin/jobconsole/job/{job.id}/change/", change_form(Job.objects.get(id=job.id), priority=7))
    assert r.hget(queue_keys("examples.echo").job(job.id), "priority") == "0"


def test_edit_waiting_job_applies_to_redis_and_is_audited(client, mirror, r):
    job = client.enqueue("examples.echo", {"x": 1}, delay=600)
    mirror.drain()
    browser = web(*OPERATE)
    row = Job.objects.get(id=job.id)
    assert browser.get(f"/admin/jobconsole/job/{job.id}/change/").status_code == 200
    run_at = datetime.now(UTC) + timedelta(hours=2)
    response = browser.post(
        f"/admin/jobconsole/job/{job.id}/change/",
        change_form(row, priority=-5, params='{"x": 2, "note": "fixed"}', audit_reason="customer asked",
                    run_at_0=run_at.strftime("%Y-%m-%d"), run_at_1=run_at.strftime("%H:%M:%S")),
    )  # fmt: skip
    assert response.status_code == 302, response.context["adminform"].form.errors
    h = r.hgetall(queue_keys("examples.echo").job(job.id))
    assert h["priority"] == "-5" and json.loads(h["params"]) == {"x": 2, "note": "fixed"}
    assert abs(int(h["run_at"]) / 1000 - run_at.timestamp()) < 2
    assert r.zscore(queue_keys("examples.echo").scheduled, job.id) == int(h["run_at"])
    record = AuditLog.objects.get(action="edit_job")
    assert record.job_ids == [job.id] and record.reason == "customer asked" and record.count == 1
    mirror.drain()
    assert Job.objects.get(id=job.id).priority == -5


def test_edit_is_refused_when_the_job_moved_on(client, mirror, r):
    job = client.enqueue("examples.echo", {"x": 1}, delay=600)
    mirror.drain()
    browser = web(*OPERATE)
    seen = Job.objects.get(id=job.id)  # the page as the operator loaded it
    client.requeue(job.id)  # meanwhile someone runs it now, and a worker finishes it
    run_worker(r, ["examples.echo"])
    response = browser.post(f"/admin/jobconsole/job/{job.id}/change/", change_form(seen, priority=9))
    # The mirror has not caught up: the page still offers the form, but the compare-and-set refuses.
    assert response.status_code == 200
    text = response.content.decode()
    assert "Nothing was changed: the job moved on" in text and "it is now completed" in text
    assert r.hget(queue_keys("examples.echo").job(job.id), "priority") == "0"
    assert not AuditLog.objects.filter(action="edit_job").exists()


def test_edit_refused_on_retried_job_with_same_state(client, mirror, r):
    """Same state name, different attempt: a stale page must not edit the new incarnation."""
    job = client.enqueue("examples.flaky", {"failures": 1}, delay=600)
    mirror.drain()
    seen = Job.objects.get(id=job.id)
    browser = web(*OPERATE)
    k = queue_keys("examples.flaky")
    client.requeue(job.id)
    run_worker(r, ["examples.flaky"], max_tasks=1)  # fails once -> retrying (scheduled again)
    assert r.hget(k.job(job.id), "state") == "retrying"
    r.hset(k.job(job.id), "state", "scheduled")  # as if it had been re-scheduled with the same state name
    response = browser.post(f"/admin/jobconsole/job/{job.id}/change/", change_form(seen, priority=9))
    assert "Nothing was changed" in response.content.decode()
    assert r.hget(k.job(job.id), "priority") == "0"


def test_bad_params_are_rejected(client, mirror, r):
    job = client.enqueue("examples.echo", {"x": 1}, delay=600)
    mirror.drain()
    browser = web(*OPERATE)
    row = Job.objects.get(id=job.id)
    for bad in ("[1, 2]", "{not json", '{"x": NaN}'):
        response = browser.post(f"/admin/jobconsole/job/{job.id}/change/", change_form(row, params=bad))
        assert response.status_code == 200
    assert json.loads(r.hget(queue_keys("examples.echo").job(job.id), "params")) == {"x": 1}
    # Parameters the task's signature rejects.
    response = browser.post(
        f"/admin/jobconsole/job/{job.id}/change/", change_form(row, params='{"x": 1}', priority="abc")
    )
    assert response.status_code == 200


def test_job_actions_retry_cancel_delete_with_permissions(client, mirror, r):
    waiting = client.enqueue("examples.echo", {"a": 1}, delay=600)
    other = client.enqueue("examples.echo", {"b": 1}, delay=600)
    done = client.enqueue("examples.echo", {"c": 1})
    run_worker(r, ["examples.echo"])
    mirror.drain()
    k = queue_keys("examples.echo")
    operator = web(*OPERATE)
    action(operator, "job", "retry_now", [waiting.id, done.id])
    assert r.hget(k.job(waiting.id), "state") == "queued"
    record = AuditLog.objects.get(action="retry")
    assert record.count == 1 and record.refused == 1 and done.id in record.detail["refused"]
    action(operator, "job", "cancel_jobs", [other.id])
    assert r.hget(k.job(other.id), "state") == "cancelled"
    action(operator, "job", "delete_jobs", [other.id])  # not allowed without purge
    assert r.exists(k.job(other.id))
    purger = web(*PURGE)
    action(purger, "job", "delete_jobs", [other.id])
    assert not r.exists(k.job(other.id)) and not Job.objects.filter(id=other.id).exists()
    assert AuditLog.objects.filter(action="delete", count=1).exists()


def test_dead_letter_resubmit_edit_and_purge(client, mirror, r):
    ids = [client.enqueue("examples.fail", {"message": f"m{i}"}, max_retries=0).id for i in range(4)]
    run_worker(r, ["examples.fail"])
    mirror.drain()
    letters = {d.job_id: d for d in DeadLetter.objects.all()}
    assert set(letters) == set(ids)
    assert len({d.fingerprint for d in letters.values()}) == 1  # same error, same place
    k = queue_keys("examples.fail")
    browser = web(*OPERATE)
    page = browser.get(f"/admin/jobconsole/deadletter/{letters[ids[0]].pk}/change/")
    assert page.status_code == 200 and "m0" in page.content.decode()  # history inline

    action(browser, "deadletter", "resubmit", [letters[ids[0]].pk])
    assert r.hget(k.job(ids[0]), "state") == "queued" and r.hget(k.job(ids[0]), "attempts") == "1"
    action(browser, "deadletter", "resubmit_reset", [letters[ids[1]].pk])
    assert r.hget(k.job(ids[1]), "attempts") == "0"
    assert DeadLetter.objects.get(pk=letters[ids[1]].pk).resubmitted_by.startswith("u")

    # Edit then resubmit: first the form, then the apply.
    form = action(browser, "deadletter", "resubmit_edited", [letters[ids[2]].pk])
    assert "Resubmit with these parameters" in form.content.decode()
    action(browser, "deadletter", "resubmit_edited", [letters[ids[2]].pk], apply="1",
           params='{"message": "fixed"}', reset_attempts="on", expected_attempts="1", reason="typo")  # fmt: skip
    assert json.loads(r.hget(k.job(ids[2]), "params")) == {"message": "fixed"}
    assert r.hget(k.job(ids[2]), "state") == "queued"
    assert AuditLog.objects.get(action="resubmit_edited").reason == "typo"

    # Resubmitting a dead letter that was already resubmitted elsewhere is refused (compare-and-set).
    client.requeue(ids[3])
    form = action(browser, "deadletter", "resubmit_edited", [letters[ids[3]].pk], apply="1",
                  params='{"message": "x"}', expected_attempts="1")  # fmt: skip
    assert "moved on" in form.content.decode()
    assert json.loads(r.hget(k.job(ids[3]), "params")) == {"message": "m3"}

    action(browser, "deadletter", "purge", [letters[ids[3]].pk])  # operators cannot purge
    assert Job.objects.filter(id=ids[3]).exists()
    run_worker(r, ["examples.fail"])  # they die again
    mirror.drain()
    purger = web(*PURGE)
    action(purger, "deadletter", "purge", [d.pk for d in DeadLetter.objects.filter(job_id=ids[3])])
    assert not r.exists(k.job(ids[3])) and not Job.objects.filter(id=ids[3]).exists()
    assert AuditLog.objects.filter(action="purge", count=1).exists()


def test_a_job_whose_params_cannot_be_decoded_is_shown_fixed_and_resubmitted(client, mirror, r):
    """Its hash was written by other hands: the worker dead-letters it at once; an operator sees the stored
    text, and resubmits it with params that work."""
    k = queue_keys("examples.echo")
    job_id = client.enqueue("examples.echo", {"x": 1}, id=new_job_id()).id  # its own id: the hash exists now
    r.hset(k.job(job_id), "params", "{x: 1")
    run_worker(r, ["examples.echo"])
    mirror.drain()
    letter = DeadLetter.objects.get(job_id=job_id)
    browser = web(*OPERATE)
    for page in (f"job/{job_id}", f"deadletter/{letter.pk}"):
        response = browser.get(f"/admin/jobconsole/{page}/change/")
        assert response.status_code == 200 and "UndecodablePayload" in response.content.decode()
    form = action(browser, "deadletter", "resubmit_edited", [letter.pk])
    assert "{x: 1" in form.content.decode()  # the stored text, to fix
    action(browser, "deadletter", "resubmit_edited", [letter.pk], apply="1", params='{"x": 2}',
           expected_attempts="1", reason="payload written by hand")  # fmt: skip
    assert json.loads(r.hget(k.job(job_id), "params")) == {"x": 2}
    run_worker(r, ["examples.echo"])
    assert r.hget(k.job(job_id), "state") == "completed"


def test_a_waiting_job_whose_params_cannot_be_decoded_is_fixed_in_its_change_form(client, mirror, r):
    job = client.enqueue("examples.echo", {"x": 1}, delay=600)
    r.hset(queue_keys("examples.echo").job(job.id), "params", "x=1")
    mirror.drain()
    row = Job.objects.get(id=job.id)
    assert row.params == "x=1"  # mirrored as stored
    response = web(*OPERATE).post(f"/admin/jobconsole/job/{job.id}/change/", change_form(row, params='{"x": 3}'))
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert json.loads(r.hget(queue_keys("examples.echo").job(job.id), "params")) == {"x": 3}


def test_jobs_show_prints_a_garbled_job_with_what_is_wrong(client, mirror, r):
    job_id = client.enqueue("examples.echo", {"x": 1}, delay=600).id
    r.hset(queue_keys("examples.echo").job(job_id), "params", "[1")
    out = StringIO()
    call_command("jobs", "show", job_id, stdout=out)
    shown = json.loads(out.getvalue())
    assert shown["params"] == "[1" and "params are not JSON" in shown["payload_error"]


def test_queues_pause_resume_and_audit_is_read_only(client, mirror, r):
    client.enqueue("examples.echo", {})
    mirror.drain()
    browser = web(*OPERATE, "view_auditlog")
    action(browser, "queue", "pause", ["examples.echo"])
    assert r.exists(queue_keys("examples.echo").paused)
    assert Queue.objects.get(name="examples.echo").paused
    action(browser, "queue", "resume", ["examples.echo"])
    assert not r.exists(queue_keys("examples.echo").paused)
    assert list(AuditLog.objects.order_by("at").values_list("action", flat=True)) == ["pause", "resume"]
    record = AuditLog.objects.first()
    assert browser.get("/admin/jobconsole/auditlog/").status_code == 200
    assert browser.get("/admin/jobconsole/auditlog/add/").status_code == 403
    browser.post(f"/admin/jobconsole/auditlog/{record.pk}/change/", {"reason": "rewritten"})
    assert AuditLog.objects.get(pk=record.pk).reason == ""
    assert JobState.QUEUED  # keep import used
