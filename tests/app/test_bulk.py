"""Bulk operations (jobconsole/bulk/): preview changes nothing, confirming freezes the set, the runner does each
chunk once (also when interrupted between its Redis step and its commit), cancel stops between chunks, progress
figures, the console's pages with their permissions and bad input, and the admin's large actions."""

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client as WebClient
from django.utils import timezone

import jobconsole.bulk.runner as runner
from jobconsole.bulk import operations
from jobconsole.bulk.operations import ConfirmError, confirm, preview, request_cancel
from jobconsole.bulk.progress import progress
from jobconsole.bulk.runner import run_operation
from jobconsole.bulk.selection import Selection, SelectionError, parse_selection
from jobconsole.bulk.system import SYSTEM_QUEUE
from jobconsole.core.keys import queue_keys
from jobconsole.core.queries.events import events_of
from jobconsole.models import AuditLog, BulkChunk, BulkOperation, DeadLetter, Job
from tests.mirror_fixtures import *  # noqa: F403
from tests.mirror_fixtures import SimulatedCrash, run_worker

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

K = queue_keys("examples.fail")
VIEW = ["view_job", "view_deadletter", "view_queue", "view_auditlog"]
OPERATE = [*VIEW, "operate_job", "operate_deadletter", "operate_queue"]
PURGE = [*OPERATE, "purge_job", "purge_deadletter"]
EVERY_LETTER = Selection("deadletter", filter={"status": ["all"]})
OPEN_LETTERS = Selection("deadletter")


@pytest.fixture
def small_chunks(engine_settings: Any) -> Any:
    engine_settings.JOBCONSOLE = {**engine_settings.JOBCONSOLE, "BULK": {"CHUNK": 3, "ADMIN_THRESHOLD": 4}}
    return engine_settings


@pytest.fixture
def operator() -> User:
    return user(*OPERATE)


@pytest.fixture
def no_hook() -> Any:
    yield
    runner.after_redis_step = None


def user(*codenames: str) -> User:
    account = User.objects.create_user(f"u{User.objects.count()}", password="pw", is_staff=True)
    account.user_permissions.set(
        Permission.objects.filter(content_type__app_label="jobconsole", codename__in=codenames)
    )
    return User.objects.get(pk=account.pk)  # fresh: no cached permissions


def web(*codenames: str) -> WebClient:
    browser = WebClient()
    browser.force_login(user(*codenames))
    return browser


def make_dead(client: Any, mirror: Any, r: Any, n: int, message: str = "boom") -> list[str]:
    ids = [client.enqueue("examples.fail", {"message": f"{message} {i}"}, max_retries=0).id for i in range(n)]
    run_worker(r, ["examples.fail"])
    mirror.drain()
    return ids


def state(r: Any, job_id: str) -> str | None:
    return r.hget(K.job(job_id), "state")


def requeued(r: Any, job_id: str) -> int:
    events = [e for i, f in r.xrange(K.events) for e in events_of(K.queue, i, f)]  # batch entries too
    return sum(1 for e in events if e.job == job_id and e.name == "requeued")


def frozen(operation: BulkOperation) -> list[str]:
    """The operation's job ids in the order its chunks hold them."""
    chunks = BulkChunk.objects.filter(operation=operation).order_by("index")
    return [item[0] for chunk in chunks for item in chunk.items]


def start(kind: str, selection: Selection, who: User, **options: Any) -> BulkOperation:
    operation, created = confirm(preview(kind, selection).token, user=who, options=options)
    assert created
    return operation


def test_preview_counts_and_samples_without_changing_anything(client, mirror, r, small_chunks):
    ids = make_dead(client, mirror, r, 5)
    client.requeue(ids[0])  # resubmitted elsewhere: left out of a resubmit
    mirror.drain()
    found = preview("resubmit", EVERY_LETTER)
    assert (found.matched, found.count, found.left_out) == (5, 4, 1)
    assert {d.job_id for d in found.sample} == set(ids[1:])
    assert preview("purge", EVERY_LETTER).count == 5
    assert preview("resubmit", Selection("deadletter", ids=(ids[1], ids[2]))).count == 2
    assert not BulkOperation.objects.exists() and not AuditLog.objects.exists()
    assert [state(r, i) for i in ids[1:]] == ["dead"] * 4
    with pytest.raises(SelectionError, match="acts on jobs, not on dead letters"):
        preview("retry", EVERY_LETTER)


def test_confirming_freezes_the_set_and_later_deaths_are_never_touched(client, mirror, r, small_chunks, operator):
    before = make_dead(client, mirror, r, 4)
    shown = preview("resubmit", OPEN_LETTERS)
    after_preview = make_dead(client, mirror, r, 2, "later")  # die between the preview and the confirmation
    operation, _ = confirm(shown.token, user=operator, options={})
    after_confirm = make_dead(client, mirror, r, 2, "latest")
    assert (operation.previewed, operation.total, operation.chunks) == (4, 4, 2)
    assert BulkChunk.objects.filter(operation=operation).count() == 2
    run_operation(operation.pk)
    assert [state(r, i) for i in before] == ["queued"] * 4
    assert [state(r, i) for i in after_preview + after_confirm] == ["dead"] * 4
    operation.refresh_from_db()
    assert (operation.status, operation.done, operation.refused, operation.failed) == ("done", 4, 0, 0)


def test_a_resubmit_marks_the_dead_letters_audits_and_reports_progress(client, mirror, r, small_chunks, operator):
    ids = make_dead(client, mirror, r, 7)
    operation = start("resubmit", OPEN_LETTERS, operator, reset_attempts="on")
    record = AuditLog.objects.get(action="bulk_resubmit")
    assert (record.count, record.actor, record.detail["operation"]) == (7, operator.username, operation.pk)
    assert progress(operation.pk).status == "pending" and progress(operation.pk).seconds_left is None
    client.requeue(ids[6])  # moves on after the confirmation: refused, not overwritten
    run_operation(operation.pk)
    assert [r.hget(K.job(i), "attempts") for i in ids[:6]] == ["0"] * 6
    figures = progress(operation.pk)
    assert (figures.status, figures.total, figures.done, figures.refused, figures.failed) == ("done", 7, 6, 1, 0)
    assert figures.percent == 100 and figures.rate and figures.rate > 0 and figures.seconds_left is None
    assert figures.chunks == figures.chunks_done == 3
    operation.refresh_from_db()
    assert operation.summary == {"reasons": {"it is queued": 1}, "sample": [[ids[6], "it is queued"]]}
    letters = DeadLetter.objects.filter(job_id__in=ids[:6])
    assert {(d.resubmitted_by, d.resubmitted_at is not None) for d in letters} == {(operator.username, True)}
    record.refresh_from_db()
    assert (record.count, record.refused, record.detail["status"]) == (6, 1, "done")


def test_a_chunk_interrupted_after_its_redis_step_is_not_done_twice(client, mirror, r, small_chunks, operator, no_hook):
    """The worst moment to die: Redis changed, the database not yet. The jobs of that chunk even run and die
    again before the operation resumes; none is resubmitted twice and none counts as refused."""
    ids = make_dead(client, mirror, r, 8)
    operation = start("resubmit", OPEN_LETTERS, operator, reset_attempts="on")

    def crash(chunk: BulkChunk) -> None:
        if chunk.index == 1:
            raise SimulatedCrash("after the Redis step")

    runner.after_redis_step = crash
    with pytest.raises(SimulatedCrash):
        run_operation(operation.pk)
    runner.after_redis_step = None
    chunk = BulkChunk.objects.get(operation=operation, index=1)
    assert (chunk.status, chunk.runs) == ("started", 1)
    operation.refresh_from_db()
    assert (operation.done, operation.chunks_done) == (3, 1)
    order = frozen(operation)
    run_worker(r, ["examples.fail"])  # the six resubmitted jobs die again, with the same attempt count
    mirror.drain()
    assert [state(r, i) for i in order] == ["dead"] * 8
    run_operation(operation.pk)
    operation.refresh_from_db()
    assert (operation.status, operation.done, operation.refused, operation.failed) == ("done", 8, 0, 0)
    assert operation.redone == 1
    assert [requeued(r, i) for i in ids] == [1] * 8
    assert list(BulkChunk.objects.filter(operation=operation).order_by("index").values_list("runs", flat=True)) == [
        1, 2, 1
    ]  # fmt: skip
    assert [state(r, i) for i in order] == ["dead"] * 6 + ["queued"] * 2
    run_operation(operation.pk)  # a finished operation: nothing more
    assert [requeued(r, i) for i in ids] == [1] * 8


def test_cancel_stops_between_chunks(client, mirror, r, small_chunks, operator, no_hook):
    ids = make_dead(client, mirror, r, 9)
    operation = start("resubmit", OPEN_LETTERS, operator)

    def cancel_during_the_second(chunk: BulkChunk) -> None:
        if chunk.index == 1:
            request_cancel(operation, operator)

    runner.after_redis_step = cancel_during_the_second
    result = run_operation(operation.pk)
    assert (result["status"], result["done"]) == ("cancelled", 6)  # the chunk under way finishes
    order = frozen(operation)
    assert sorted(order) == sorted(ids) and [state(r, i) for i in order] == ["queued"] * 6 + ["dead"] * 3
    operation.refresh_from_db()
    assert operation.cancelled_by == operator.username and operation.finished_at is not None
    assert AuditLog.objects.filter(action="bulk_cancel").count() == 1
    # Cancelled while it waits: nothing happens at all.
    purger = user(*PURGE)
    waiting = start("purge", EVERY_LETTER, purger)
    assert request_cancel(waiting, purger).status == "cancelled"
    run_operation(waiting.pk)
    assert [state(r, i) for i in order[6:]] == ["dead"] * 3 and Job.objects.filter(id__in=ids).count() == 9


def test_purge_removes_jobs_still_dead_from_redis_and_the_database(client, mirror, r, small_chunks):
    ids = make_dead(client, mirror, r, 5)
    operation = start("purge", EVERY_LETTER, user(*PURGE))
    client.requeue(ids[0])  # brought back after the confirmation: not purged
    run_operation(operation.pk)
    assert state(r, ids[0]) == "queued" and Job.objects.filter(id=ids[0]).exists()
    assert not any(r.exists(K.job(i)) for i in ids[1:])
    assert not Job.objects.filter(id__in=ids[1:]).exists() and not DeadLetter.objects.filter(job_id__in=ids[1:])
    operation.refresh_from_db()
    assert (operation.done, operation.refused) == (4, 1)


def test_job_operations_retry_cancel_and_delete(client, mirror, r, small_chunks):
    scheduled = [client.enqueue("examples.echo", {"i": i}, delay=600).id for i in range(4)]
    mirror.drain()
    who = user(*PURGE)
    by_state = Selection("job", filter={"state": ["scheduled"]})
    assert preview("retry", by_state).count == 4
    run_operation(start("retry", by_state, who).pk)
    k = queue_keys("examples.echo")
    assert [r.hget(k.job(i), "state") for i in scheduled] == ["queued"] * 4
    mirror.drain()
    queued = Selection("job", filter={"queue": ["examples.echo"], "state": ["queued"]})
    run_operation(start("cancel", queued, who).pk)
    assert [r.hget(k.job(i), "state") for i in scheduled] == ["cancelled"] * 4
    mirror.drain()
    run_operation(start("delete", Selection("job", ids=tuple(scheduled[:2])), who).pk)
    assert not r.exists(k.job(scheduled[0])) and not Job.objects.filter(id__in=scheduled[:2]).exists()
    assert Job.objects.filter(id__in=scheduled[2:]).count() == 2


def test_a_spread_resubmit_schedules_the_jobs_evenly_over_the_window(client, mirror, r, small_chunks, operator):
    ids = make_dead(client, mirror, r, 6)
    operation = start("resubmit", OPEN_LETTERS, operator, spread_seconds="600")
    run_operation(operation.pk)
    operation.refresh_from_db()
    begin = operation.spread_start_ms
    assert begin is not None
    order = frozen(operation)
    assert sorted(order) == sorted(ids)
    times = [r.zscore(K.scheduled, i) for i in order]
    assert [state(r, i) for i in order] == ["queued"] + ["scheduled"] * 5  # position 0 is due at once
    assert times[1:] == [begin + 600_000 * n // 6 for n in range(1, 6)]


def test_the_system_task_runs_on_a_worker_with_heartbeats(client, mirror, r, small_chunks, operator):
    ids = make_dead(client, mirror, r, 5)
    operation = start("resubmit", OPEN_LETTERS, operator)
    assert client.get(operation.job_id).queue == SYSTEM_QUEUE  # published by the outbox at the commit
    run_worker(r, [SYSTEM_QUEUE])
    operation.refresh_from_db()
    assert (operation.status, operation.done) == ("done", 5)
    system_job = client.get(operation.job_id)
    assert system_job.state.value == "completed" and system_job.progress == 1.0
    assert system_job.checkpoint == {"chunks_done": 2, "processed": 5}
    assert [state(r, i) for i in ids] == ["queued"] * 5


def test_one_confirmation_makes_one_operation(client, mirror, r, small_chunks, operator):
    make_dead(client, mirror, r, 2)
    token = preview("resubmit", OPEN_LETTERS).token
    first, created = confirm(token, user=operator, options={})
    again, created_again = confirm(token, user=operator, options={})
    assert created and not created_again and first.pk == again.pk
    assert BulkOperation.objects.count() == 1


def test_stale_altered_or_empty_confirmations_are_refused(client, mirror, r, small_chunks, operator):
    ids = make_dead(client, mirror, r, 2)
    token = preview("resubmit", OPEN_LETTERS).token
    with pytest.raises(ConfirmError, match="not valid"):
        confirm(token[:-2] + "xx", user=operator, options={})
    for job_id in ids:
        client.requeue(job_id)
    mirror.drain()
    with pytest.raises(ConfirmError, match="Nothing left to do"):
        confirm(token, user=operator, options={})
    small_chunks.JOBCONSOLE = {**small_chunks.JOBCONSOLE, "BULK": {"PREVIEW_MAX_AGE": 0.0}}
    with pytest.raises(ConfirmError, match="minutes old"):
        confirm(preview("purge", EVERY_LETTER).token, user=operator, options={})
    with pytest.raises(ConfirmError, match="spread window"):
        operations.parse_options(operations.kind_spec("resubmit"), {"spread_seconds": "soon"})
    assert not BulkOperation.objects.exists()


def test_selections_are_checked_strictly():
    assert parse_selection("deadletter", {"queue": "a", "since": "2025-01-02"}).filter == {
        "queue": ["a"], "since": ["2025-01-02"]
    }  # fmt: skip
    problems = {
        "Unknown filter 'colour'": {"colour": "red"},
        "Unknown job state 'zombie'": {"state": "zombie"},
        "is not a job id": {"id": "not-an-id"},
        "is not a date": {"after": "yesterday"},
        "out of the range": {"after": "0001-01-01T00:00:00+05:00"},  # before year 1 in UTC
        "No jobs were ticked": {"selection": "ticked"},
        "takes one value": {"before": ["2025-01-01", "2025-01-02"]},
    }
    for message, data in problems.items():
        with pytest.raises(SelectionError, match=message):
            parse_selection("job", data)
    with pytest.raises(SelectionError, match="not an error fingerprint"):
        parse_selection("deadletter", {"fingerprint": "xyz"})


# --- the console's pages -------------------------------------------------------------------------------------


def test_the_preview_confirm_and_progress_pages(client, mirror, r, small_chunks):
    ids = make_dead(client, mirror, r, 4)
    browser = web(*OPERATE)
    page = browser.get("/bulk/new", {"kind": "resubmit", "queue": "examples.fail"})
    text = page.content.decode()
    assert page.status_code == 200 and page.context["preview"].count == 4 and ids[0] in text
    assert 'name="confirmation"' in text and "csrfmiddlewaretoken" in text
    assert browser.get("/bulk/confirm").status_code == 405  # a GET never changes anything
    done = browser.post("/bulk/confirm", {"confirmation": page.context["preview"].token, "reason": "fixed the bug"})
    operation = BulkOperation.objects.get()
    assert done.status_code == 302 and done["Location"] == f"/bulk/{operation.pk}/"
    assert operation.reason == "fixed the bug"
    live = browser.get(f"/bulk/{operation.pk}/", headers={"HX-Request": "true"})
    assert b"<html" not in live.content and b"<progress" in live.content and b'hx-trigger="every 1s"' in live.content
    run_operation(operation.pk)
    final = browser.get(f"/bulk/{operation.pk}/", headers={"HX-Request": "true"}).content.decode()
    assert "hx-get" not in final and "Resubmitted 4 of 4" in final  # the polling stops at the summary
    assert browser.get(f"/bulk/{operation.pk}/progress.json").json()["done"] == 4
    listing = browser.get("/bulk/").content.decode()
    assert f"/bulk/{operation.pk}/" in listing and "Resubmit dead letters" in listing
    # The dead-letters page's selection form: the ticked ids.
    picked = browser.get("/bulk/new", {"kind": "purge", "selection": "ticked", "id": [ids[0], ids[1]]})
    assert picked.status_code == 403  # an operator may resubmit, not purge
    assert web(*PURGE).get("/bulk/new", {"kind": "purge", "selection": "ticked", "id": ids[:2]}).context[
        "preview"
    ].count == 2  # fmt: skip


def test_pages_refuse_without_permission_and_answer_bad_input_with_a_message(client, mirror, r, small_chunks):
    ids = make_dead(client, mirror, r, 2)
    viewer = web(*VIEW)
    assert viewer.get("/bulk/new", {"kind": "resubmit"}).status_code == 403
    token = preview("resubmit", OPEN_LETTERS).token
    assert viewer.post("/bulk/confirm", {"confirmation": token}).status_code == 403
    assert not BulkOperation.objects.exists()
    assert WebClient().get("/bulk/").status_code == 302  # to the login page
    operator = web(*OPERATE)
    for query, message in [
        ({"kind": "explode"}, "Unknown bulk operation"),
        ({"kind": "resubmit", "colour": "red"}, "Unknown filter"),
        ({"kind": "resubmit", "selection": "ticked", "id": "1234"}, "is not a job id"),
        ({"kind": "resubmit", "since": "last tuesday"}, "is not a date"),
        ({"kind": "resubmit", "selection": "ticked"}, "No dead letters were ticked"),
    ]:
        response = operator.get("/bulk/new", query)
        assert response.status_code == 400 and message in response.content.decode(), query
    assert operator.post("/bulk/confirm", {}).status_code == 400
    altered = operator.post("/bulk/confirm", {"confirmation": token + "x"})
    assert altered.status_code == 400 and "not valid" in altered.content.decode()
    bad_spread = operator.post("/bulk/confirm", {"confirmation": token, "spread_seconds": "-5"}, follow=True)
    assert "spread window" in bad_spread.content.decode() and bad_spread.context["preview"].count == 2
    small_chunks.JOBCONSOLE = {**small_chunks.JOBCONSOLE, "BULK": {"PREVIEW_MAX_AGE": 0.0}}
    stale = operator.post("/bulk/confirm", {"confirmation": token}, follow=True)
    assert stale.status_code == 200 and "minutes old" in stale.content.decode()
    assert stale.context["preview"].count == 2  # the preview again, fresh
    assert operator.get("/bulk/999/").status_code == 404 and operator.get("/bulk/", {"before": "x"}).status_code == 200
    assert [state(r, i) for i in ids] == ["dead", "dead"]


def test_every_mutation_needs_the_csrf_token(client, mirror, r, small_chunks):
    make_dead(client, mirror, r, 2)
    purger = user(*PURGE)
    browser = WebClient(enforce_csrf_checks=True)
    browser.force_login(purger)
    page = browser.get("/bulk/new", {"kind": "purge"})
    token = page.context["preview"].token
    assert browser.post("/bulk/confirm", {"confirmation": token}).status_code == 403
    operation = start("purge", EVERY_LETTER, purger)
    for action in ("cancel", "resume"):
        assert browser.post(f"/bulk/{operation.pk}/{action}").status_code == 403
    assert BulkOperation.objects.get().status == "pending"
    form = {"confirmation": token, "csrfmiddlewaretoken": page.context["csrf_token"]}
    assert browser.post("/bulk/confirm", form).status_code == 302  # the page's own form goes through


def test_cancel_and_resume_buttons_need_the_kinds_permission(client, mirror, r, small_chunks):
    make_dead(client, mirror, r, 4)
    purger = user(*PURGE)
    operation = start("purge", EVERY_LETTER, purger)
    operator = web(*OPERATE)
    assert operator.post(f"/bulk/{operation.pk}/cancel").status_code == 403
    assert "■ Cancel" not in operator.get(f"/bulk/{operation.pk}/").content.decode()
    browser = WebClient()
    browser.force_login(purger)
    assert browser.get(f"/bulk/{operation.pk}/cancel").status_code == 405
    assert browser.post(f"/bulk/{operation.pk}/cancel", follow=True).status_code == 200
    operation.refresh_from_db()
    assert operation.status == "cancelled"
    resumed = browser.post(f"/bulk/{operation.pk}/resume", follow=True)
    assert "nothing to resume" in resumed.content.decode()


def test_a_failed_operation_can_be_resumed_where_it_stopped(client, mirror, r, small_chunks, operator, no_hook):
    ids = make_dead(client, mirror, r, 6)
    operation = start("resubmit", OPEN_LETTERS, operator)

    def fail_on_the_second(chunk: BulkChunk) -> None:
        if chunk.index == 1:
            raise RuntimeError("database went away")

    runner.after_redis_step = fail_on_the_second
    with pytest.raises(RuntimeError):
        run_operation(operation.pk)
    runner.mark_failed(operation.pk, RuntimeError("database went away"))
    runner.after_redis_step = None
    operation.refresh_from_db()
    assert operation.status == "failed" and "database went away" in operation.summary["error"]
    operations.resume(operation, operator)
    assert BulkOperation.objects.get(pk=operation.pk).status == "running"
    run_operation(operation.pk)
    operation.refresh_from_db()
    assert (operation.status, operation.done, operation.redone) == ("done", 6, 1)
    assert [requeued(r, i) for i in ids] == [1] * 6


# --- the admin -------------------------------------------------------------------------------------------------


def test_large_admin_actions_become_bulk_operations(client, mirror, r, small_chunks):
    ids = make_dead(client, mirror, r, 7)
    browser = web(*PURGE)
    few = list(DeadLetter.objects.filter(job_id__in=ids[:2]).values_list("pk", flat=True))
    browser.post("/admin/jobconsole/deadletter/", {"action": "resubmit", "_selected_action": few}, follow=True)
    assert not BulkOperation.objects.exists() and [state(r, i) for i in ids[:2]] == ["queued"] * 2  # at once
    rest = list(DeadLetter.objects.filter(job_id__in=ids[2:]).values_list("pk", flat=True))
    response = browser.post(
        "/admin/jobconsole/deadletter/", {"action": "resubmit_reset", "_selected_action": rest}, follow=True
    )
    operation = BulkOperation.objects.get()
    assert f'href="/bulk/{operation.pk}/"' in response.content.decode()
    assert (operation.kind, operation.total, operation.options) == (
        "resubmit_deadletters", 5, {"reset_attempts": True, "spread_seconds": 0}
    )  # fmt: skip
    assert [state(r, i) for i in ids[2:]] == ["dead"] * 5  # not in the request: on a worker
    run_operation(operation.pk)
    assert [r.hget(K.job(i), "attempts") for i in ids[2:]] == ["0"] * 5
    scheduled = [client.enqueue("examples.echo", {"i": i}, delay=600).id for i in range(5)]
    mirror.drain()
    browser.post("/admin/jobconsole/job/", {"action": "cancel_jobs", "_selected_action": scheduled})
    cancel = BulkOperation.objects.get(kind="cancel_jobs")
    run_operation(cancel.pk)
    k = queue_keys("examples.echo")
    assert [r.hget(k.job(i), "state") for i in scheduled] == ["cancelled"] * 5


def test_operations_are_kept_as_long_as_audit_records(client, mirror, r, small_chunks, operator):
    from jobconsole.cleaning import enforce_db_retention

    make_dead(client, mirror, r, 2)
    operation = start("resubmit", OPEN_LETTERS, operator)
    run_operation(operation.pk)
    enforce_db_retention()
    assert BulkOperation.objects.filter(pk=operation.pk).exists()
    enforce_db_retention(timezone.now() + timedelta(days=400))
    assert not BulkOperation.objects.exists() and not BulkChunk.objects.exists()
