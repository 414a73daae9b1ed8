"""The console's job pages: the jobs search (filters, cursor paging, bad input), one job (live from Redis or
from the mirror once Redis dropped it, its actions with and without permission, edit-and-retry refusing a stale
form), running and stalled jobs (a lease that ran out, a task that stopped heartbeating) and scheduled jobs
(soonest first, the histogram of what falls due when)."""

import dataclasses
import json
import re
import time
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import Client as WebClient
from django.test.utils import CaptureQueriesContext

from jobconsole.core import JobContext, JobSpec, JobState, default_registry, task
from jobconsole.core.maintenance import Maintenance, Retention
from jobconsole.models import AuditLog, Job
from tests.helpers import claim
from tests.mirror_fixtures import *  # noqa: F403
from tests.mirror_fixtures import run_worker

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

VIEW = ["view_job", "view_deadletter", "view_queue", "view_auditlog", "view_attempt"]
OPERATE = [*VIEW, "operate_job"]
PURGE = [*OPERATE, "purge_job"]


@task(name="tests.console_beating", max_heartbeat_interval=0.5, visibility_timeout=30, max_retries=1)
def console_beating(context: JobContext) -> None:
    """Never run here: a job of it is claimed by hand, to be found stalled by its heartbeat."""


def web(*codenames: str) -> WebClient:
    user = User.objects.create_user(f"u{User.objects.count()}", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="jobconsole", codename__in=codenames))
    browser = WebClient()
    browser.force_login(user)
    return browser


def text(response) -> str:
    return response.content.decode()


def state_in_redis(client, job_id: str) -> str:
    return client.get(job_id, history=False).state.value


def dead_job(client, r, params: dict | None = None) -> str:
    """A job of examples.fail that failed twice and is dead, with its whole history in Redis."""
    job_id = client.enqueue("examples.fail", params or {"message": "boom"}, max_retries=1).id
    run_worker(r, ["examples.fail"])
    time.sleep(0.6)  # its retry is due after 0.5 s
    run_worker(r, ["examples.fail"])
    assert state_in_redis(client, job_id) == "dead"
    return job_id


def echoes(client, n: int) -> list[str]:
    return [res.id for res in client.enqueue_many([JobSpec(task="examples.echo", params={"i": i}) for i in range(n)])]


def ids_on(response) -> list[str]:
    return [row.id for row in response.context["rows"]]


# --- the jobs search -----------------------------------------------------------------------------------


def test_filters_search_the_mirror_and_stay_in_the_url(client, mirror, r):
    found = client.enqueue("examples.echo", {"needle": "findme-42", "n": 500}, unique_key="order-7").id
    later = client.enqueue("examples.echo", {"other": "50 cents"}, delay=600).id
    failing = client.enqueue("examples.fail", {"message": "no"}, delay=600).id
    mirror.drain()
    browser = web(*VIEW)
    everything = browser.get("/jobs/")
    assert everything.status_code == 200 and set(ids_on(everything)) == {found, later, failing}
    assert set(ids_on(browser.get("/jobs/", {"state": "scheduled"}))) == {failing, later}
    assert ids_on(browser.get("/jobs/", {"state": "queued"})) == [found]
    assert ids_on(browser.get("/jobs/", {"queue": "examples.fail"})) == [failing]
    assert ids_on(browser.get("/jobs/", {"task": "examples.echo", "state": "scheduled"})) == [later]
    assert ids_on(browser.get("/jobs/", {"id": found.lower()})) == [found]  # ids are read case-blind
    assert ids_on(browser.get("/jobs/", {"unique_key": "order-7"})) == [found]
    assert ids_on(browser.get("/jobs/", {"text": "findme-42"})) == [found]
    # The parameter search is a LIKE with its wildcards escaped: "50%" is text, it does not match "500".
    assert ids_on(browser.get("/jobs/", {"text": "50%"})) == []
    assert ids_on(browser.get("/jobs/", {"text": "50 c"})) == [later]
    page = text(everything)
    # The selects offer the known queues and tasks; the page links each job.
    assert '<option value="examples.fail">' in page and '<option value="examples.echo">' in page
    assert f'href="/jobs/{found}/"' in page


def test_the_state_filter_tells_failed_attempts_from_retrying_dead_and_discarded(client, mirror, r):
    # Searching "failed" found nothing while attempts failed: the `failed` state is only the discarded end of a
    # dead_letter_policy "discard" task. "had a failed attempt" finds every job with one, whatever its state now.
    dead = dead_job(client, r)
    retrying = client.enqueue("examples.fail", {"message": "again"}, max_retries=3).id
    run_worker(r, ["examples.fail"])
    fine = client.enqueue("examples.echo", {"x": 1}).id
    run_worker(r, ["examples.echo"])
    mirror.drain()
    assert state_in_redis(client, retrying) == "retrying"
    browser = web(*VIEW)
    assert set(ids_on(browser.get("/jobs/", {"state": "failed_attempts"}))) == {dead, retrying}
    assert ids_on(browser.get("/jobs/", {"state": "failed_attempts", "queue": "examples.fail"}))[0] in {dead, retrying}
    assert ids_on(browser.get("/jobs/", {"state": "retrying"})) == [retrying]
    assert ids_on(browser.get("/jobs/", {"state": "dead"})) == [dead]
    assert ids_on(browser.get("/jobs/", {"state": "failed"})) == []
    assert fine in ids_on(browser.get("/jobs/", {"state": "completed"}))
    # The options are the state table's labels, the words the queue tabs and badges use.
    page = text(browser.get("/jobs/"))
    assert '<option value="failed_attempts">had a failed attempt (any state)</option>' in page
    assert '<option value="failed">failed (discarded)</option>' in page
    assert '<option value="waiting">waiting on dependencies</option>' in page
    assert '<option value="dead">dead</option>' in page and '<option value="retrying">retrying</option>' in page


def test_time_range_is_read_in_the_operators_time_zone(client, mirror, r):
    job = client.enqueue("examples.echo", {"x": 1}).id
    mirror.drain()
    browser = web(*VIEW)
    now = datetime.now(UTC)

    def local(zone: str, delta: timedelta) -> str:
        return (now + delta).astimezone(ZoneInfo(zone)).strftime("%Y-%m-%dT%H:%M")

    assert ids_on(browser.get("/jobs/", {"after": local("UTC", -timedelta(hours=1))})) == [job]
    assert ids_on(browser.get("/jobs/", {"after": local("UTC", timedelta(hours=1))})) == []
    assert ids_on(browser.get("/jobs/", {"before": local("UTC", timedelta(minutes=10))})) == [job]
    browser.cookies["jc_tz"] = "Asia/Kolkata"  # 5 h 30 ahead of UTC: a UTC wall time means hours earlier
    assert ids_on(browser.get("/jobs/", {"before": local("UTC", timedelta(minutes=10))})) == []
    assert ids_on(browser.get("/jobs/", {"before": local("Asia/Kolkata", timedelta(minutes=10))})) == [job]


def test_cursor_paging_stays_valid_while_rows_arrive_and_never_counts(client, mirror, r):
    first = [
        res.id for res in client.enqueue_many([JobSpec(task="examples.echo", params={"i": i}) for i in range(120)])
    ]
    mirror.drain()
    expected = [j.id for j in Job.objects.order_by("-enqueued_at", "-id")]
    assert sorted(expected) == sorted(first)
    browser = web(*VIEW)
    with CaptureQueriesContext(connection) as queries:
        page1 = browser.get("/jobs/", {"task": "examples.echo"})
    sql = " ".join(q["sql"].upper() for q in queries.captured_queries)
    assert "COUNT(" not in sql and "OFFSET" not in sql
    assert ids_on(page1) == expected[:50]
    cursor = page1.context["next_cursor"]
    assert cursor and urlencode({"cursor": cursor}) in text(page1)  # the "Older" link keeps the filters
    newer = [
        res.id for res in client.enqueue_many([JobSpec(task="examples.echo", params={"new": i}) for i in range(10)])
    ]
    mirror.drain()
    page2 = browser.get("/jobs/", {"task": "examples.echo", "cursor": cursor})
    assert ids_on(page2) == expected[50:100]  # the new rows came in above the cursor, not into this page
    page3 = browser.get("/jobs/", {"task": "examples.echo", "cursor": page2.context["next_cursor"]})
    assert ids_on(page3) == expected[100:] and page3.context["next_cursor"] is None
    assert set(ids_on(browser.get("/jobs/", {"task": "examples.echo"}))) >= set(newer)


def test_a_queue_alone_pages_in_time_order_across_states(client, mirror, r):
    ids = echoes(client, 130)
    for job_id in ids[::3]:
        client.cancel(job_id)  # two states interleaved in time in one queue
    mirror.drain()
    expected = [j.id for j in Job.objects.order_by("-enqueued_at", "-id")]
    browser = web(*VIEW)
    seen, query = [], {"queue": "examples.echo"}
    while True:
        response = browser.get("/jobs/", query)
        seen += ids_on(response)
        if not response.context["next_cursor"]:
            break
        query = {"queue": "examples.echo", "cursor": response.context["next_cursor"]}
    assert seen == expected


def test_a_parameter_text_search_looks_through_a_bounded_window_per_page_and_skips_nothing(
    client, mirror, r, monkeypatch
):
    from jobconsole import search

    monkeypatch.setattr(search, "TEXT_SCAN", 10)
    monkeypatch.setattr(search, "PAGE", 2)
    specs = [
        JobSpec(task="examples.echo", params={"i": i, "tag": "rare" if i % 7 == 3 else "plain"}) for i in range(40)
    ]
    ids = [result.id for result in client.enqueue_many(specs)]
    mirror.drain()
    base = datetime.now(UTC) - timedelta(hours=1)
    for i, job_id in enumerate(ids):  # a batch can share one enqueue instant; here each job has its own
        Job.objects.filter(id=job_id).update(enqueued_at=base + timedelta(seconds=i))
    newest_first = list(Job.objects.order_by("-enqueued_at", "-id"))
    expected = [job.id for job in newest_first if '"rare"' in job.params]
    assert len(expected) == 6
    browser = web(*VIEW)
    seen, query, pages, windows = [], {"text": '"rare"', "queue": "examples.echo"}, 0, 0
    while True:
        response = browser.get("/jobs/", query)
        pages += 1
        rows = ids_on(response)
        assert len(rows) <= 2
        seen += rows
        if response.context["searched_back_to"] is not None:
            windows += 1
            assert "searches older ones" in text(response) and "Search older jobs" in text(response)
        if not response.context["next_cursor"]:
            break
        query = {**query, "cursor": response.context["next_cursor"]}
    # Every match found once, in order, though no request looked at more than 10 rows: windows without a full
    # page of matches ended where they stopped looking, and the next page went on from there.
    assert seen == expected and windows >= 2 and pages >= 4


def test_the_jobs_page_offers_bulk_actions_on_ticked_or_all_matching_jobs_by_permission(client, mirror, r):
    waiting = [client.enqueue("examples.echo", {"i": i}, delay=600).id for i in range(3)]
    client.enqueue("examples.fail", {"message": "other"}, delay=600)
    mirror.drain()
    html = text(web(*PURGE).get("/jobs/", {"task": "examples.echo", "state": "scheduled"}))
    for label in ("Retry selected", "Cancel selected", "Delete selected", "Cancel all matching", "Delete all matching"):
        assert label in html
    assert f'name="id" value="{waiting[0]}"' in html
    link = re.search(r'href="(/bulk/new\?[^"]*kind=cancel[^"]*)"', html).group(1).replace("&amp;", "&")
    assert "task=examples.echo" in link and "state=scheduled" in link
    preview = web(*OPERATE).get(link)
    assert preview.status_code == 200 and preview.context["preview"].count == 3  # not the examples.fail job
    viewer_html = text(web(*VIEW).get("/jobs/", {"task": "examples.echo"}))
    assert "all matching" not in viewer_html and 'type="checkbox"' not in viewer_html
    assert "Delete all matching" not in text(web(*OPERATE).get("/jobs/", {"task": "examples.echo"}))


@pytest.mark.parametrize(
    "query, message",
    [
        ({"state": "exploded"}, "Unknown state exploded"),
        ({"queue": "no-such-queue"}, "Unknown queue no-such-queue"),
        ({"task": "no.such.task"}, "Unknown task no.such.task"),
        ({"id": "not-an-id"}, "is not a job id"),
        ({"id": "Z" * 26}, "is not a job id"),
        ({"after": "yesterday"}, "Enter a date and time"),
        ({"before": "2026-13-45T99:99"}, "Enter a date and time"),
        ({"after": "2026-01-02T00:00", "before": "2026-01-01T00:00"}, "must come after its start"),
        ({"text": "x" * 500}, "at most 200 characters"),
    ],
)
def test_bad_filters_get_a_clear_message_not_a_500(client, mirror, r, query, message):
    client.enqueue("examples.echo", {"x": 1})
    mirror.drain()
    response = web(*VIEW).get("/jobs/", query)
    assert response.status_code == 400
    assert message in text(response) and "nothing was searched" in text(response)
    assert response.context["rows"] is None


def test_bad_cursors_and_hostile_input_are_harmless(client, mirror, r):
    job = client.enqueue("examples.echo", {"x": 1}).id
    mirror.drain()
    browser = web(*VIEW)
    response = browser.get("/jobs/", {"cursor": "garbage!"})
    assert response.status_code == 200 and "no longer valid" in text(response) and ids_on(response) == [job]
    hostile = browser.get("/jobs/", {"text": '"><script>alert(1)</script>'})
    assert hostile.status_code == 200 and "<script>alert(1)" not in text(hostile)
    assert "&lt;script&gt;alert(1)" in text(hostile)
    for path in ("/running/", "/scheduled/"):
        response = browser.get(path, {"cursor": "garbage!", "queue": "nope"})
        assert response.status_code == 200, path
        assert "no longer valid" in text(response) and "Unknown queue" in text(response)
    assert "Unknown range" in text(browser.get("/scheduled/", {"range": "year"}))
    # The live part's polls get the partial alone, and leave no message behind for the next page.
    poll = browser.get("/running/", {"queue": "nope"}, headers={"HX-Request": "true"})
    assert poll.status_code == 200 and 'id="running-live"' in text(poll) and "<html" not in text(poll)
    assert "Unknown queue" not in text(browser.get("/running/"))
    missing = browser.get("/jobs/not-a-job/")
    assert missing.status_code == 404 and "is not a job id" in text(missing)
    unknown = browser.get("/jobs/01JD3Z8K4N5P6Q7R8S9T0V1W2X/")
    assert unknown.status_code == 404 and "Neither Redis nor the database knows" in text(unknown)
    assert browser.get(f"/jobs/{job.lower()}/").url == f"/jobs/{job}/"


# --- one job -------------------------------------------------------------------------------------------


def test_job_detail_live_from_redis_with_history_escaped(client, mirror, r):
    job_id = dead_job(client, r, {"message": "<script>alert('x')</script>"})
    response = web(*VIEW).get(f"/jobs/{job_id}/")
    assert response.status_code == 200
    page = text(response)
    assert "live from Redis" in page and "from the database" not in page
    job = response.context["job"]
    assert job.live and job.state == "dead" and len(job.history) == 2
    assert [a.outcome for a in job.history] == ["failed", "failed"]
    assert page.count("Traceback (most recent call last)") >= 2 and "ExampleFailure" in page
    assert "<script>alert" not in page and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    # The last error is listed field by field, its time a moment (stored as epoch milliseconds), not raw JSON.
    assert job.error["error_class"].endswith("ExampleFailure") and job.error["outcome"] == "failed"
    assert job.error["at"] == job.history[-1].ended_at and '"at":' not in page
    whats = [m.what for m in job.timeline]
    assert whats[0] == "Enqueued" and whats.index("Attempt 1 started") < whats.index("Attempt 2 failed")


def test_job_detail_from_the_mirror_once_redis_dropped_it(client, mirror, r):
    job_id = client.enqueue("examples.echo", {"kept": "in the database"}).id
    run_worker(r, ["examples.echo"])
    mirror.drain()
    Maintenance(r, retention=Retention(completed=0)).trim("examples.echo")
    mirror.drain()
    assert Job.objects.get(id=job_id).in_redis is False
    browser = web(*PURGE)
    response = browser.get(f"/jobs/{job_id}/")
    assert response.status_code == 200
    page = text(response)
    assert "from the database" in page and "Redis has dropped this job" in page and "in the database" in page
    assert response.context["job"].live is False and len(response.context["job"].history) == 1
    # Only deleting is left to do: no retry, no edit.
    assert f"/jobs/{job_id}/retry" not in page and f"/jobs/{job_id}/edit" not in page
    assert f"/jobs/{job_id}/delete" in page
    browser.post(f"/jobs/{job_id}/delete")
    assert not Job.objects.filter(id=job_id).exists()
    assert AuditLog.objects.get(action="delete").job_ids == [job_id]


ACTIONS = ["retry", "cancel", "recover", "edit", "delete"]


def test_a_viewer_sees_no_buttons_and_every_post_is_refused(client, mirror, r):
    waiting = client.enqueue("examples.echo", {"x": 1}, delay=600).id
    mirror.drain()
    browser = web(*VIEW)
    page = text(browser.get(f"/jobs/{waiting}/"))
    assert not any(f"/jobs/{waiting}/{a}" in page for a in ACTIONS)
    scheduled = text(browser.get("/scheduled/"))
    assert waiting in scheduled and "Run now" not in scheduled and "/delete" not in scheduled
    for action in ACTIONS:
        data = {"params": '{"x": 2}', "priority": 0, "expected_state": "scheduled", "expected_attempts": 0}
        assert browser.post(f"/jobs/{waiting}/{action}", data).status_code == 403, action
    assert state_in_redis(client, waiting) == "scheduled" and client.get(waiting).params == {"x": 1}
    assert not AuditLog.objects.exists()


def test_an_operator_without_purge_cannot_delete(client, mirror, r):
    waiting = client.enqueue("examples.echo", {"x": 1}, delay=600).id
    mirror.drain()
    browser = web(*OPERATE)
    page = text(browser.get(f"/jobs/{waiting}/"))
    assert f"/jobs/{waiting}/retry" in page and f"/jobs/{waiting}/delete" not in page
    assert browser.post(f"/jobs/{waiting}/delete").status_code == 403
    assert state_in_redis(client, waiting) == "scheduled"
    assert browser.get(f"/jobs/{waiting}/retry").status_code == 405  # actions are POSTs only


def test_retry_cancel_and_delete_act_on_redis_and_are_audited(client, mirror, r):
    dead = dead_job(client, r)
    waiting = client.enqueue("examples.echo", {"x": 1}, delay=600).id
    mirror.drain()
    browser = web(*PURGE)
    response = browser.post(f"/jobs/{dead}/retry", {"reason": "fixed the bug"}, follow=True)
    assert f"Job {dead} is queued" in text(response)
    assert state_in_redis(client, dead) == "queued"
    record = AuditLog.objects.get(action="retry")
    assert record.job_ids == [dead] and record.reason == "fixed the bug" and record.count == 1
    # Retrying again is refused by the engine (it is queued now): said so, and audited as refused.
    response = browser.post(f"/jobs/{dead}/retry", follow=True)
    assert "Nothing was done" in text(response) and "it is queued" in text(response)
    assert AuditLog.objects.filter(action="retry", refused=1).count() == 1
    response = browser.post(f"/jobs/{waiting}/cancel", {"next": "/scheduled/"})
    assert response.status_code == 302 and response.url == "/scheduled/"
    assert state_in_redis(client, waiting) == "cancelled"
    assert browser.post(f"/jobs/{waiting}/cancel", {"next": "https://evil.example/"}).url == f"/jobs/{waiting}/"
    browser.post(f"/jobs/{waiting}/delete")
    with pytest.raises(Exception, match="no job"):
        client.get(waiting)
    assert [a.action for a in AuditLog.objects.order_by("at")][-3:] == ["cancel", "cancel", "delete"]


def _edit_form(job_id: str, browser: WebClient) -> dict:
    """The edit form's fields as the page rendered them (what a browser would post back)."""
    form = browser.get(f"/jobs/{job_id}/").context["form"]
    return {name: form[name].value() for name in ("params", "priority", "expected_state", "expected_attempts")}


def test_edit_a_waiting_job_in_place(client, mirror, r):
    waiting = client.enqueue("examples.echo", {"x": 1}, delay=600).id
    browser = web(*OPERATE)
    data = _edit_form(waiting, browser)
    assert data["expected_state"] == "scheduled" and data["expected_attempts"] == 0
    response = browser.post(f"/jobs/{waiting}/edit", {**data, "params": '{"x": 2}', "priority": 5,
                                                      "reason": "typo"}, follow=True)  # fmt: skip
    assert "was changed in Redis" in text(response)
    job = client.get(waiting)
    assert job.params == {"x": 2} and job.priority == 5 and job.state is JobState.SCHEDULED
    record = AuditLog.objects.get(action="edit_job")
    assert record.reason == "typo" and set(record.detail["changes"]) == {"params", "priority"}


def test_edit_and_retry_a_dead_job_resubmits_it(client, mirror, r):
    dead = dead_job(client, r)
    browser = web(*OPERATE)
    data = _edit_form(dead, browser)
    assert data["expected_state"] == "dead" and data["expected_attempts"] == 2
    browser.post(f"/jobs/{dead}/edit", {**data, "params": '{"message": "fixed"}', "reset_attempts": "on"})
    job = client.get(dead)
    assert job.state is JobState.QUEUED and job.params == {"message": "fixed"} and job.attempts == 0
    assert len(job.history) == 2  # the history is kept
    assert AuditLog.objects.get(action="resubmit_edited").detail["reset_attempts"] is True


def test_attempts_are_numbered_over_the_jobs_life_and_an_old_error_shows_its_context(client, mirror, r):
    # Two failed attempts, dead; resubmitted with attempts reset, it completes: the engine's count restarts
    # (1, 2, 1), the page numbers the attempts 1, 2, 3 and says the last error came before the completion.
    job_id = client.enqueue("examples.flaky", {"failures": 5}, max_retries=1).id
    run_worker(r, ["examples.flaky"])
    time.sleep(0.6)  # its retry is due after 0.2 s
    run_worker(r, ["examples.flaky"])
    assert state_in_redis(client, job_id) == "dead"
    browser = web(*OPERATE)
    dead = browser.get(f"/jobs/{job_id}/")
    assert dead.context["job"].last_error_heading == "Last error (attempt 2)"  # the present state's error
    browser.post(f"/jobs/{job_id}/edit", {**_edit_form(job_id, browser), "params": '{"failures": 0}',
                                          "reset_attempts": "on"})  # fmt: skip
    run_worker(r, ["examples.flaky"])
    assert state_in_redis(client, job_id) == "completed"
    response = browser.get(f"/jobs/{job_id}/")
    job = response.context["job"]
    assert [a.attempt for a in job.history] == [1, 2, 1]  # what the engine stores: its count toward max_retries
    assert [n for n, _ in job.numbered_history] == [1, 2, 3]
    page = text(response)
    rows = page.split('<table id="attempts">')[1].split("</table>")[0]
    numbers = re.findall(r'<td class="num">(\d+)(?:<span class="sub"[^>]*>(try \d+)</span>)?</td>', rows)
    assert numbers == [("1", ""), ("2", ""), ("3", "try 1")]
    assert '<h3 id="last-error-heading">Last error (attempt 2, before it completed)</h3>' in page
    assert "<h2>Result</h2>" in page and "1 of 2 <span" in page and "· 3 in its whole life</span>" in page
    whats = [m.what for m in job.timeline]
    assert "Attempt 3 started" in whats and "Attempt 3 completed" in whats and whats.count("Attempt 1 started") == 1
    # From the mirror, the same numbers (its rows keep each attempt's place in the history).
    mirror.drain()
    from dashboards.job_detail import load

    r.delete(*r.keys(f"*{job_id}*"))
    stored = load(job_id)
    assert stored is not None and not stored.live
    assert [n for n, _ in stored.numbered_history] == [1, 2, 3] and [a.attempt for a in stored.history] == [1, 2, 1]
    assert stored.last_error_heading == "Last error (attempt 2, before it completed)"


def test_edit_and_retry_refuses_a_stale_form(client, mirror, r):
    dead = dead_job(client, r)
    browser = web(*OPERATE)
    stale = _edit_form(dead, browser)  # the page as the operator loaded it
    client.requeue(dead)  # meanwhile someone retries it and it fails again
    run_worker(r, ["examples.fail"])
    assert client.get(dead).attempts == 3
    response = browser.post(f"/jobs/{dead}/edit", {**stale, "params": '{"message": "mine"}'}, follow=True)
    assert "Nothing was changed: the job moved on" in text(response)
    assert client.get(dead).params == {"message": "boom"}
    assert not AuditLog.objects.filter(action__in=["edit_job", "resubmit_edited"]).exists()


def test_edit_with_bad_parameters_changes_nothing(client, mirror, r):
    waiting = client.enqueue("examples.echo", {"x": 1}, delay=600).id
    browser = web(*OPERATE)
    data = _edit_form(waiting, browser)
    for bad, message in (("[1, 2]", "must be a JSON object"), ("{not json", "Not valid JSON")):
        response = browser.post(f"/jobs/{waiting}/edit", {**data, "params": bad})
        assert response.status_code == 400 and message in text(response)
    response = browser.post(f"/jobs/{waiting}/edit", {**data, "expected_state": "running"})
    assert response.status_code == 400
    assert client.get(waiting).params == {"x": 1} and not AuditLog.objects.exists()


# --- running and stalled -------------------------------------------------------------------------------


def _row(page: str, job_id: str) -> str:
    """The <tr> of a job on a page."""
    match = re.search(r"<tr class=\"([^\"]*)\">\s*<td><a class=\"mono\" href=\"/jobs/" + job_id + r"/\".*?</tr>",
                      page, re.S)  # fmt: skip
    assert match, f"no row for {job_id}"
    return match.group(0)


def test_a_job_whose_lease_ran_out_is_stalled_and_can_be_requeued(client, mirror, r):
    job_id = client.enqueue("tests.sleep_plain", {"seconds": 30}).id  # a 1 s lease
    [lease] = claim(r, "tests.sleep_plain", worker="ghost-worker")  # a worker that never registered
    assert lease.id == job_id
    time.sleep(1.2)  # nobody renews it
    browser = web(*OPERATE)
    response = browser.get("/running/")
    page = text(response)
    row = _row(page, job_id)
    assert 'class="is-stalled"' in row and "stalled" in row and "lease ran out" in row
    assert "not registered" in row and "Requeue now" in row
    assert response.context["stalled"] == 1
    response = browser.post(f"/jobs/{job_id}/recover", {"next": "/running/"}, follow=True)
    assert "is queued again" in text(response)
    job = client.get(job_id)
    assert job.state is JobState.QUEUED and [a.outcome for a in job.history] == ["worker_lost"]
    assert AuditLog.objects.get(action="recover").job_ids == [job_id]


def test_a_task_that_stopped_heartbeating_is_stalled_but_not_requeued_while_its_lease_runs(client, mirror, r):
    options = default_registry.get("tests.console_beating").options()  # as a starting worker announces it
    client.store.announce(["tests.console_beating"], {"tests.console_beating": json.dumps(options)})
    job_id = client.enqueue("tests.console_beating").id
    healthy = client.enqueue("examples.sleep", {"seconds": 60}).id
    claim(r, "tests.console_beating", worker="quiet-worker")
    claim(r, "examples.sleep", worker="quiet-worker")
    time.sleep(0.7)  # past the 0.5 s max_heartbeat_interval; the 30 s lease still runs
    browser = web(*OPERATE)
    page = text(browser.get("/running/"))
    row = _row(page, job_id)
    assert 'class="is-stalled"' in row and "no heartbeat for" in row and "must report every 0.5 s" in row
    assert "Requeue now" not in row and "recoverer requeues it when the lease runs out" in row
    other = _row(page, healthy)
    assert "is-stalled" not in other and "worker gone" in other  # not registered, lease still valid
    response = browser.post(f"/jobs/{job_id}/recover", follow=True)
    assert "its lease is still valid" in text(response) and state_in_redis(client, job_id) == "running"
    response = browser.post(f"/jobs/{job_id}/cancel", follow=True)
    assert "asked to stop" in text(response) and client.get(job_id).cancel_requested
    detail = text(browser.get(f"/jobs/{job_id}/"))
    assert "overdue" in detail and "cannot be requeued while its lease is valid" in detail


def test_cancelling_a_job_whose_lease_ran_out_recovers_it_first(client, mirror, r):
    job_id = client.enqueue("tests.sleep_plain", {"seconds": 30}).id
    claim(r, "tests.sleep_plain", worker="ghost-worker")
    time.sleep(1.2)
    response = web(*OPERATE).post(f"/jobs/{job_id}/cancel", follow=True)
    assert "recovered first" in text(response)
    job = client.get(job_id)
    assert job.state is JobState.CANCELLED and [a.outcome for a in job.history] == ["worker_lost"]


# --- scheduled -----------------------------------------------------------------------------------------


def test_scheduled_jobs_soonest_first_and_the_histogram_counts(client, mirror, r):
    # One run_at per group, so a minute boundary passing between two enqueues cannot split a group.
    now = datetime.now(UTC)
    soon = [client.enqueue("examples.echo", {"i": i}, run_at=now + timedelta(seconds=200)).id for i in range(3)]
    half = [client.enqueue("examples.echo", {"i": i}, run_at=now + timedelta(seconds=1800)).id for i in range(2)]
    later = client.enqueue("examples.echo", {"late": 1}, delay=3 * 3600).id
    waiting = client.enqueue("examples.echo", {"now": 1}).id  # not scheduled: not counted
    browser = web(*PURGE)
    response = browser.get("/scheduled/")
    hour = response.context["histogram"]
    assert (hour["overdue"], hour["in_range"], hour["later"], hour["total"]) == (0, 5, 1, 6)
    counts = hour["figure"]["data"][0]["y"]
    assert len(counts) == 60 and sorted(n for n in counts if n) == [2, 3]
    # Whole-minute buckets from now's minute: 200 s ahead is the 4th or 5th, 1800 s the 30th to 32nd (30th when
    # the jobs were enqueued just before the minute that now is in began).
    assert counts.index(3) in (3, 4) and counts.index(2) in (29, 30, 31)
    listed = [t.job.id for t in response.context["jobs"]]
    assert (set(listed[:3]), set(listed[3:5]), listed[5:]) == (set(soon), set(half), [later])  # soonest first
    assert waiting not in text(response) and 'data-figure="due-chart-data"' in text(response)
    day = browser.get("/scheduled/", {"range": "day"}).context["histogram"]
    assert (day["in_range"], day["later"]) == (6, 0) and len(day["figure"]["data"][0]["y"]) == 24
    assert sorted(n for n in day["figure"]["data"][0]["y"] if n) in ([1, 5], [1, 2, 3])
    browser.post(f"/jobs/{soon[0]}/retry", {"next": "/scheduled/"})
    assert state_in_redis(client, soon[0]) == "queued"
    browser.post(f"/jobs/{later}/delete", {"next": "/scheduled/"})
    hour = browser.get("/scheduled/").context["histogram"]
    assert (hour["in_range"], hour["later"]) == (4, 0)


def test_scheduled_pages_by_cursor_across_queues(client, mirror, r):
    run_at = datetime.now(UTC) + timedelta(hours=1)
    ids = [client.enqueue("examples.echo", {"i": i}, run_at=run_at).id for i in range(40)]
    ids += [client.enqueue("examples.fail", {"message": str(i)}, run_at=run_at).id for i in range(30)]
    browser = web(*VIEW)
    seen: list[str] = []
    response = browser.get("/scheduled/")
    while True:
        seen += [t.job.id for t in response.context["jobs"]]
        if not response.context["next_cursor"]:
            break
        response = browser.get("/scheduled/", {"cursor": response.context["next_cursor"]})
    assert sorted(seen) == sorted(ids) and len(seen) == len(set(seen))


def test_the_timeline_puts_the_enqueue_first_and_says_delayed_only_before_any_attempt(engine_settings):
    from dashboards.job_detail import JobDetail, timeline
    from jobconsole.core.job import Attempt

    t0 = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
    ms = timedelta(milliseconds=1)
    # Handed straight to an idle worker: its lease began a millisecond before the drained entry's stamp.
    first = Attempt(attempt=1, outcome="failed", worker="w1", host="h", pid=1, started_at=t0, ended_at=t0 + 5 * ms,
                    error_class="KeyError", message="1")  # fmt: skip
    fields = dict(id="01JCZ4Y1V6Q2J8M3N4P5R6S7T8", task="t", queue="q", priority=0, attempts=1, max_retries=3,
                  version=1, unique_key="", group="", started_at=None, finished_at=None, heartbeat_at=None,
                  worker="", host="", pid="", progress=None, cancel_requested=False, reason="", params="{}",
                  result="", checkpoint="", last_error="", live=True)  # fmt: skip
    retrying = JobDetail(**fields, state="retrying", enqueued_at=t0 + ms, run_at=t0 + timedelta(seconds=30),
                         history=[first])  # fmt: skip
    second = Attempt(attempt=2, outcome="failed", worker="w1", host="h", pid=1, started_at=t0 + 9 * ms,
                     ended_at=t0 + 20 * ms, error_class="KeyError", message="2")  # fmt: skip
    # The retry's promotion and its claim were one script; the stream stamped the promotion a millisecond later.
    promoted = SimpleNamespace(job=fields["id"], name="promoted", fields={}, at=t0 + 10 * ms)
    moments = timeline(dataclasses.replace(retrying, history=[first, second]), [promoted])
    assert [m.what for m in moments] == [
        "Enqueued", "Attempt 1 started", "Attempt 1 failed", "Promoted", "Attempt 2 started", "Attempt 2 failed", "Due"
    ]  # fmt: skip
    assert moments[0].detail == "on queue q"  # the retry's due time is no delay of the enqueue
    delayed = JobDetail(**fields, state="scheduled", enqueued_at=t0, run_at=t0 + timedelta(minutes=5), history=[])
    assert timeline(delayed, [])[0].detail == "on queue q, delayed"
