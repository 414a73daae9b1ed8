"""A bulk resubmit of dead letters by filter, in a real browser: the operator filters the dead-letters page, opens
the preview (the count and a sample of what the filter matches, and nothing else), confirms, watches the progress
bar move on the operation's page while a worker does the work, and the resubmitted jobs complete."""

import time
from typing import Any

import pytest

from jobconsole.core import JobState
from tests.browser.console_helpers import accept_dialogs, wait_for_dead_letters, wait_for_state
from tests.browser.support import LiveConsole, Visitor, Workers
from tests.live import wait_until

# Pages, workers and a browser on a 2-core machine shared with other work: each test takes 10-60 s when it
# is quiet, three or four times that under load.
pytestmark = pytest.mark.timeout(300)

FLAKY = 60  # examples.flaky fails its first attempt only: dead with max_retries=0, and it succeeds when resubmitted
OTHERS = 4  # examples.fail: dead letters the filter must leave alone
CHUNK = 5  # jobs per chunk, so the operation takes a dozen steps the bar shows


def test_bulk_resubmit_by_filter_shows_its_preview_and_progress_and_the_jobs_complete(
    operator: Visitor, console_server: LiveConsole, workers: Workers, settings: Any
) -> None:
    from jobconsole.models import BulkOperation, DeadLetter

    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "BULK": {"CHUNK": CHUNK}}  # read by the confirm (this process)
    client = console_server.client
    # A worker without the system queue: the operation waits for the second one, so the bar starts at 0.
    first = workers.start("w1", "", "--no-system-worker")
    flaky = [client.enqueue("examples.flaky", {"failures": 1}, max_retries=0).id for _ in range(FLAKY)]
    others = [client.enqueue("examples.fail", {"message": "still broken"}, max_retries=0).id for _ in range(OTHERS)]
    wait_for_dead_letters(FLAKY + OTHERS, 60, first)

    operator.visit("/dead/", "dead-letters")
    operator.page.select_option("select[name=task]", "examples.flaky")
    operator.click("form.filters button:has-text('Filter')", "dead-letters-filtered")
    assert "task=examples.flaky" in operator.page.url
    listed = operator.page.locator("#dead-letter-list tbody tr").all_inner_texts()
    assert listed and all("examples.flaky" in row for row in listed), listed

    operator.click("a:has-text('Resubmit all matching')", "bulk-preview")
    assert operator.page.url.startswith(operator.url("/bulk/new?kind=resubmit"))
    acts_on = operator.page.locator(".tile", has_text="it acts on").locator(".value").inner_text()
    assert acts_on == str(FLAKY), f"the preview counts {acts_on}, not the {FLAKY} flaky dead letters"
    sample = operator.page.locator("main table tbody tr").all_inner_texts()
    assert sample and all("examples.flaky" in row for row in sample), sample
    assert BulkOperation.objects.count() == 0, "a preview changes nothing"

    asked = accept_dialogs(operator)
    operator.click("form[action='/bulk/confirm'] button[type=submit]", "bulk-confirmed")
    assert asked == [f"Resubmit dead letters: {FLAKY} job(s)?"]
    assert "/bulk/" in operator.page.url and "frozen" in operator.page.locator(".messages").inner_text()
    operation = BulkOperation.objects.get()
    assert operation.total == FLAKY

    bar = operator.page.locator("#bulk-progress progress")
    assert bar.get_attribute("max") == str(FLAKY)
    readings = [int(bar.get_attribute("value") or 0)]
    assert readings == [0] and "waiting for a worker" in operator.page.locator("#bulk-progress").inner_text()

    workers.start("w2")  # with the system queue: it takes the operation, chunk by chunk
    deadline = time.monotonic() + 60
    while readings[-1] < FLAKY:  # what the page shows as htmx refreshes it (every second)
        assert time.monotonic() < deadline, f"the bar stopped at {readings}"
        operator.page.wait_for_timeout(100)
        value = int(operator.page.locator("#bulk-progress progress").get_attribute("value") or 0)
        if value != readings[-1]:
            readings.append(value)
    assert readings == sorted(readings) and len(readings) >= 2, readings  # it moved, and only forward
    print(f"progress bar readings: {readings} of {FLAKY}")
    operator.page.locator("#bulk-progress .badge", has_text="done").wait_for()
    operator.screenshot("bulk-done")
    summary = operator.page.locator("#bulk-progress").inner_text()
    assert f"Resubmitted {FLAKY} of {FLAKY}" in summary, summary

    for job_id in flaky:
        wait_for_state(client, job_id, JobState.COMPLETED, 60, first.output)
    assert client.get(flaky[0]).history[-1].outcome == "completed"
    assert [client.get(job_id, history=False).state for job_id in others] == [JobState.DEAD] * OTHERS
    wait_until(
        lambda: DeadLetter.objects.filter(resubmitted_at__isnull=False).count() == FLAKY, 30, "resubmissions mirrored"
    )
    assert DeadLetter.objects.filter(task="examples.fail", resubmitted_at=None).count() == OTHERS

    operator.visit("/dead/?task=examples.flaky", "dead-letters-after")
    assert "Nothing here" in operator.page.locator("#dead-letter-list").inner_text()
    operator.visit("/bulk/", "bulk-list")
    assert "operator" in operator.page.locator("main").inner_text()
    operator.assert_no_browser_errors()
