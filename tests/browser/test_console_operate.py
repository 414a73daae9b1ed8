"""Operating the console in a real browser: a queue paused with its button stops being worked while a worker
runs, and works again when resumed; a user without the operate permission sees no action button anywhere and is
refused (403) when posting anyway, with nothing changed."""

import time
from collections.abc import Callable

import pytest
import redis

from jobconsole.core import JobState
from tests.browser.console_helpers import accept_dialogs, buttons, redis_snapshot, wait_for_mirrored, wait_for_state
from tests.browser.support import ConsoleUsers, LiveConsole, Proc, Visitor, Workers

# Pages, workers and a browser on a 2-core machine shared with other work: each test takes 10-60 s when it
# is quiet, three or four times that under load.
pytestmark = pytest.mark.timeout(300)

QUEUE = "examples.echo"


def test_a_queue_paused_in_the_console_stops_being_worked_until_resumed(
    operator: Visitor, console_server: LiveConsole, worker: Proc
) -> None:
    client = console_server.client
    first = client.enqueue(QUEUE, {"n": 0}).id
    wait_for_state(client, first, JobState.COMPLETED, 30, worker.output)

    asked = accept_dialogs(operator)
    operator.visit(f"/queues/{QUEUE}/", "queue-active")
    assert "active" in operator.page.locator("h1").inner_text()
    operator.click("button:has-text('Pause queue')", "queue-paused")
    assert asked == [f"Pause {QUEUE}? Workers will take nothing from it until it is resumed."]
    assert operator.page.locator("h1 .badge:has(.icon-pause)").inner_text().strip() == "paused"
    assert "paused" in operator.page.locator(".messages").inner_text()
    assert client.queries.queues.is_paused(QUEUE)

    held = [client.enqueue(QUEUE, {"n": n}).id for n in range(1, 4)]
    # The worker keeps working other queues: once it ran a job enqueued after these, it has had its chance.
    other = client.enqueue("examples.flaky", {"failures": 0}).id
    wait_for_state(client, other, JobState.COMPLETED, 30, worker.output)
    time.sleep(1)
    assert [client.get(job_id, history=False).state for job_id in held] == [JobState.QUEUED] * 3

    operator.visit(f"/queues/{QUEUE}/?state=queued", "queue-paused-holding")
    waiting = operator.page.locator(".tile", has_text="Queued").locator(".value").inner_text()
    assert waiting == "3"
    for job_id in held:
        assert operator.page.locator(f"a[href='/jobs/{job_id}/']").count() == 1
    operator.visit("/", "overview-paused")
    assert (
        operator.page.locator(f"#queues tr:has(a[href='/queues/{QUEUE}/']) .badge:has(.icon-pause)")
        .inner_text()
        .strip()
        == "paused"
    )

    operator.visit(f"/queues/{QUEUE}/")
    operator.click("button:has-text('Resume queue')", "queue-resumed")
    assert asked[-1] == f"Resume {QUEUE}?"
    assert not client.queries.queues.is_paused(QUEUE)
    for job_id in held:
        wait_for_state(client, job_id, JobState.COMPLETED, 30, worker.output)
    operator.visit(f"/queues/{QUEUE}/?state=completed", "queue-drained")
    assert operator.page.locator(".tile", has_text="Queued").locator(".value").inner_text() == "0"
    assert "active" in operator.page.locator("h1").inner_text()

    operator.visit(f"/audit/?queue={QUEUE}", "audit-pause-resume")
    log = operator.page.locator("main table").inner_text()
    assert "pause" in log and "resume" in log and "operator" in log
    operator.assert_no_browser_errors()


# Words on every button that changes something (the operator's pages show them; the viewer's none).
ACTIONS = ("Pause", "Resume", "Retry", "Run now", "Cancel", "Ask to stop", "Delete", "Requeue", "Resubmit", "Purge",
           "Save")  # fmt: skip


def _actions(tab: Visitor) -> list[str]:
    return [text for text in buttons(tab) if any(word in text for word in ACTIONS)]


def test_without_the_operate_permission_no_action_buttons_and_posts_are_refused(
    visitor: Callable[..., Visitor],
    console_users: ConsoleUsers,
    viewer: Visitor,
    console_server: LiveConsole,
    workers: Workers,
    r: redis.Redis,
) -> None:
    from jobconsole.models import AuditLog, BulkOperation, DeadLetter

    admin = visitor(console_users.admin)  # may do everything: the buttons the viewer must not see are there
    client = console_server.client
    worker = workers.start("w1")
    dead = client.enqueue("examples.fail", {"message": "card reader on fire"}, max_retries=0).id
    wait_for_state(client, dead, JobState.DEAD, 30, worker.output)
    wait_for_mirrored(dead, JobState.DEAD, 30, worker)
    worker.terminate()  # from here on nothing but the console could change Redis
    client.pause("examples.flaky")  # so the queue page offers Resume, the other half of the button
    queued = client.enqueue(QUEUE, {"waiting": True}).id
    scheduled = client.enqueue(QUEUE, {"later": True}, delay=3600).id

    pages = {
        f"/queues/{QUEUE}/": {"Pause queue"},
        "/queues/examples.flaky/": {"▶ Resume queue"},
        f"/jobs/{dead}/": {"↻ Retry", "✕ Delete", "Save and retry"},
        f"/jobs/{scheduled}/": {"▶ Run now", "■ Cancel", "✕ Delete"},
        "/scheduled/": {"▶ Run now", "✕ Delete"},
        "/dead/": {"↻ Resubmit selected…", "↻ Resubmit all matching…", "Resubmit group…", "✕ Purge selected…",
                   "✕ Purge all matching…"},
    }  # fmt: skip
    for path, expected in pages.items():
        admin.visit(path)
        assert expected <= set(_actions(admin)), f"the admin misses buttons on {path}: {_actions(admin)}"
        viewer.visit(path)
        assert _actions(viewer) == [], f"a viewer sees action buttons on {path}: {_actions(viewer)}"
        assert viewer.page.locator("main form[method=post]").count() == 0, f"a viewer gets a form on {path}"
    assert viewer.page.locator("#dead-letter-list input[type=checkbox]").count() == 0  # nothing to select for
    response = viewer.visit("/bulk/new?kind=resubmit&task=examples.fail", "bulk-preview-refused")
    assert response is not None and response.status == 403
    viewer.errors.clear()  # that 403 was the point
    admin.visit("/bulk/new?kind=purge&task=examples.fail", "bulk-preview")
    token = admin.page.locator("input[name=confirmation]").get_attribute("value")
    assert token

    before, audited = redis_snapshot(r), AuditLog.objects.count()
    refused = {
        f"/queues/{QUEUE}/pause": {"action": "pause"},
        "/queues/examples.flaky/pause": {"action": "resume"},
        f"/jobs/{dead}/retry": {},
        f"/jobs/{dead}/edit": {"params": '{"message": "fixed"}', "priority": "0", "expected_state": "dead",
                               "expected_attempts": "1", "reset_attempts": "on"},
        f"/jobs/{dead}/delete": {},
        f"/jobs/{queued}/cancel": {},
        f"/jobs/{queued}/recover": {},
        f"/jobs/{scheduled}/retry": {"next": "/scheduled/"},
        "/bulk/confirm": {"confirmation": token},  # the admin's genuine confirmation of a purge, posted by the viewer
    }  # fmt: skip
    for path, form in refused.items():
        response = viewer.post(path, form)
        assert response.status == 403, f"POST {path}: {response.status} {response.text()[:500]}"
        assert "CSRF verification failed" not in response.text()  # refused for the permission, not a bad token
    assert redis_snapshot(r) == before, "a refused request changed Redis"
    assert AuditLog.objects.count() == audited and not BulkOperation.objects.exists()
    assert DeadLetter.objects.filter(job_id=dead, resubmitted_at=None).count() == 1
    assert client.get(dead, history=False).state is JobState.DEAD
    assert client.get(queued, history=False).state is JobState.QUEUED
    assert client.queries.queues.is_paused("examples.flaky") and not client.queries.queues.is_paused(QUEUE)

    # The same posts by the admin do act (the refusals above are the permission's, not a broken form).
    response = admin.post(f"/jobs/{queued}/cancel", {})
    assert response.ok and client.get(queued, history=False).state is JobState.CANCELLED
    viewer.assert_no_browser_errors()
    admin.assert_no_browser_errors()
